"""CipherArray: a numpy-shaped array of Paillier ciphertexts with one binary scale.

Element-wise homomorphic arithmetic (thesis 3.1.2): E(a) E(b) = E(a + b),
E(a)^k = E(k a).  Each array carries its fixed-point ``scale`` (fractional
bits) and a ``bound`` on the magnitude of every plaintext integer; every
operation computes the bound of its result first and raises
:class:`~smc_hmm.errors.PrecisionError` if it could leave the plaintext space,
so results never wrap silently.

Linear combinations are multi-exponentiations (:mod:`smc_hmm.crypto.multiexp`)
and run in parallel through a :class:`~smc_hmm.compute.Compute`: the one
given, else the one the key view carries (a party's context gives each of
its key views its executor), else inline.
"""

from __future__ import annotations

import gmpy2
import numpy as np
import phe
from gmpy2 import mpz

from smc_hmm.compute import Compute
from smc_hmm.crypto import fixedpoint, native
from smc_hmm.crypto.bulk import PackedInts
from smc_hmm.crypto.keys import PrivateKey, PublicKey
from smc_hmm.crypto.multiexp import (
    SHARED_BASE_MAX_TERMS,
    combine_parts,
    merge_window_parts,
    multiplication_count,
    shared_base_parts,
    signed_parts,
    uses_native,
    window_count,
    window_plan,
)
from smc_hmm.crypto.randomness import RandomizerPool, randomizer_from_params
from smc_hmm.errors import (
    InvalidInputError,
    KeyMismatchError,
    ScaleMismatchError,
    ShapeMismatchError,
)

_INLINE = Compute.inline()
#: below this many multiplications' worth of work a batch stays in-process
_PARALLEL_MIN_TERMS = 512


def _count_scalar_muls(meter, count: int, exponent_bits: int, inversions: int) -> None:
    """Meter ``count`` scalar multiplications and what they really cost: the exponents'
    total bits (``scalar_mul_bits``; a factor of +-1 is one bit, a negation too) and the
    inversions of negative factors (``invert``), which the cost model prices apart."""
    meter.count("scalar_mul", count)
    meter.count("scalar_mul_bits", int(exponent_bits))
    meter.count("invert", int(inversions))


def _mpz_array(values, shape) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr.reshape(shape)


def _count_mults(meter, blocks, modulus) -> None:
    """Meter the modular multiplications of ``(terms, rows)`` blocks, the cost model's
    count: ``native_mults`` where the native kernel computes them (a rate of their own;
    its unsigned Straus also inverts each base that has a negative weight, ``invert``),
    else ``multiexp_mults``."""
    on_kernel = uses_native(modulus)
    mults = inversions = 0
    for terms, rows in blocks:
        top = max((abs(x) for row in rows for x in row), default=0)
        if on_kernel and terms <= SHARED_BASE_MAX_TERMS:
            signed = sum(1 for i in range(terms) if any(row[i] < 0 for row in rows))
            mults += native.multiplication_count(terms + signed, len(rows), top.bit_length())
            inversions += signed
        else:
            mults += multiplication_count(terms, len(rows), top.bit_length())
    meter.count("native_mults" if on_kernel else "multiexp_mults", mults)
    if inversions:
        meter.count("invert", inversions)


def _lincomb_task(bases: PackedInts, weight_rows: list, modulus) -> list:
    """Lane: (P, Q) parts of prod_i bases_i^{w_ri} for each weight row."""
    if len(bases.values) <= SHARED_BASE_MAX_TERMS:  # few terms: tables shared by the rows
        return shared_base_parts(bases.values, weight_rows, modulus)
    return [signed_parts(bases.values, row, modulus) for row in weight_rows]


def _lincomb_block_task(plans: list, modulus) -> list:
    """Lane: the (P, Q) parts of every block's rows (see :meth:`CipherArray.lincomb_blocks`)."""
    return [_lincomb_task(bases, rows, modulus) for bases, rows, _ in plans]


def _lincomb_windows_task(
    bases: PackedInts, weight_rows: list, modulus, c: int, lo: int, hi: int
) -> list:
    """Lane: digit windows [lo, hi) of each row's multi-exponentiation."""
    return [signed_parts(bases.values, row, modulus, window=c, lo=lo, hi=hi) for row in weight_rows]


def _encrypt_task(params: dict, values: list[int]) -> PackedInts:
    """Worker lane: DJN-encrypt signed integers with a table cached in this process."""
    key = PublicKey(params["n"], randomizer=randomizer_from_params(params))
    return PackedInts.for_modulus(key.encrypt_ints(values), key.nsquare_mpz)


def _lane_randomizer(public_key: PublicKey, count: int, compute: Compute):
    """The randomizer whose draws for ``count`` values to spread over ``compute``'s lanes,
    or None to draw them in the caller: the offline phase's pool still covers them, the
    batch is small, or the key's randomness is seeded (tests)."""
    randomizer = public_key.randomizer
    if isinstance(randomizer, RandomizerPool):  # the offline phase's, while it lasts
        if len(randomizer) >= count:
            return None
        randomizer = randomizer.source
    if (
        compute.parallel
        and count >= 64
        and hasattr(randomizer, "params")
        and not public_key.rng.insecure
    ):
        return randomizer
    return None


def _rerandomize_task(params: dict, ciphertexts: PackedInts) -> PackedInts:
    """Worker lane: multiply ciphertexts by fresh DJN randomizers (a table cached here)."""
    n2 = mpz(params["n"]) ** 2
    values = ciphertexts.values
    rs = randomizer_from_params(params).draw(len(values))
    return PackedInts.for_modulus([c * r % n2 for c, r in zip(values, rs)], n2)


class CipherArray:
    """Ciphertexts (gmpy2 mpz, dtype=object ndarray) sharing one key and one scale."""

    __slots__ = ("public_key", "data", "scale", "bound")
    __array_priority__ = 1000  # numpy defers `ndarray + CipherArray` to us

    def __init__(
        self,
        public_key: PublicKey,
        data,
        scale: int = 0,
        bound: int | None = None,
        *,
        validate: bool = False,
    ):
        if not isinstance(public_key, PublicKey):
            raise InvalidInputError("CipherArray needs an smc_hmm PublicKey")
        arr = (
            data
            if isinstance(data, np.ndarray) and data.dtype == object
            else np.asarray(data, dtype=object)
        )
        self.public_key = public_key
        self.data = arr
        self.scale = fixedpoint.check_scale(scale)
        self.bound = public_key.max_plain if bound is None else int(bound)
        if validate:
            public_key.validate_ciphertexts(arr.reshape(-1))

    # -- construction -----------------------------------------------------------

    @classmethod
    def encrypt(
        cls, public_key: PublicKey, values, scale: int = 0, *, compute: Compute | None = None
    ) -> CipherArray:
        """Encrypt reals (rounded at ``scale`` fractional bits) or exact integers."""
        ints, bound = fixedpoint.encode(values, scale)
        return cls.encrypt_encoded(public_key, ints, scale, bound, compute=compute)

    @classmethod
    def encrypt_encoded(
        cls,
        public_key: PublicKey,
        ints,
        scale: int,
        bound: int | None = None,
        *,
        compute: Compute | None = None,
    ) -> CipherArray:
        """Encrypt already-encoded integers at ``scale``."""
        ints = fixedpoint.as_object_array(ints)
        bound = fixedpoint.max_abs(ints) if bound is None else bound
        public_key.check_plain(bound, "encrypted value")
        flat = [int(v) for v in ints.reshape(-1)]
        compute = compute or public_key.compute or _INLINE
        randomizer = _lane_randomizer(public_key, len(flat), compute)
        if randomizer is not None:
            params = randomizer.params()
            chunks = compute.chunks(flat, min_chunk=32)
            parts = compute.map(
                _encrypt_task,
                [params] * len(chunks),
                chunks,
                local=lambda _params, values: PackedInts.for_modulus(
                    public_key.encrypt_ints(values), public_key.nsquare_mpz
                ),
            )
            cts = [c for part in parts for c in part.values]
            public_key.meter.count("encrypt", len(flat) - len(chunks[0]))
        else:
            cts = public_key.encrypt_ints(flat)
        return cls(public_key, _mpz_array(cts, ints.shape), scale, bound)

    @classmethod
    def concatenate(cls, arrays, axis: int = 0) -> CipherArray:
        arrays = list(arrays)
        if not arrays:
            raise InvalidInputError("nothing to concatenate")
        first = arrays[0]
        for a in arrays[1:]:
            first._check_compatible(a)
        data = np.concatenate([a.data for a in arrays], axis=axis)
        return cls(first.public_key, data, first.scale, max(a.bound for a in arrays))

    # -- numpy-like shape -------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index) -> CipherArray:
        sub = self.data[index]
        if not isinstance(sub, np.ndarray):
            sub = _mpz_array([sub], ())
        return CipherArray(self.public_key, sub, self.scale, self.bound)

    def reshape(self, *shape) -> CipherArray:
        return CipherArray(self.public_key, self.data.reshape(*shape), self.scale, self.bound)

    def ravel(self) -> CipherArray:
        return self.reshape(-1)

    @property
    def T(self) -> CipherArray:  # numpy's name
        return CipherArray(self.public_key, self.data.T, self.scale, self.bound)

    def ciphertexts(self) -> list[mpz]:
        """The flat list of raw ciphertexts (row-major)."""
        return list(self.data.reshape(-1))

    def _like(self, flat: list, scale: int, bound: int, shape=None) -> CipherArray:
        return CipherArray(
            self.public_key, _mpz_array(flat, self.shape if shape is None else shape), scale, bound
        )

    # -- decryption -------------------------------------------------------------

    def decrypt_ints(self, private_key: PrivateKey) -> np.ndarray:
        """Signed plaintext integers (object array), i.e. values * 2^scale."""
        self._check_private(private_key)
        out = private_key.decrypt_ints(self.ciphertexts())
        return fixedpoint.as_object_array(np.array(out, dtype=object)).reshape(self.shape)

    def decrypt_residues(self, private_key: PrivateKey) -> list[int]:
        """The plaintexts as residues in [0, n), flat: how a receiver reads ciphertexts
        masked over the whole plaintext space (``add_mask``), which have no sign."""
        n = int(self.public_key.n)
        return [int(v) % n for v in self.decrypt_ints(private_key).reshape(-1)]

    def decrypt(self, private_key: PrivateKey) -> np.ndarray:
        """Plaintext values as float64 (integers / 2^scale, correctly rounded)."""
        return fixedpoint.decode(self.decrypt_ints(private_key), self.scale)

    def _check_private(self, private_key: PrivateKey) -> None:
        if not isinstance(private_key, PrivateKey):
            raise InvalidInputError("decryption needs an smc_hmm PrivateKey")
        self.public_key.same_key(private_key.public_key)

    # -- arithmetic ---------------------------------------------------------------

    def _check_compatible(self, other: CipherArray) -> None:
        self.public_key.same_key(other.public_key)
        if other.scale != self.scale:
            raise ScaleMismatchError(
                f"scales differ ({self.scale} vs {other.scale} fractional bits); "
                "call rescale_up() on the coarser operand first"
            )

    def _broadcast(self, other_data: np.ndarray):
        try:
            a, b = np.broadcast_arrays(self.data, other_data)
        except ValueError as e:
            raise ShapeMismatchError(
                f"shapes {self.shape} and {other_data.shape} do not broadcast"
            ) from e
        return a, b

    def __add__(self, other) -> CipherArray:
        if not isinstance(other, CipherArray):
            ints, _ = fixedpoint.encode(np.asarray(other), self.scale)
            return self.add_encoded(ints)
        pk, n2 = self.public_key, self.public_key.nsquare_mpz
        self._check_compatible(other)
        bound = self.bound + other.bound
        pk.check_plain(bound, "sum")
        a, b = self._broadcast(other.data)
        flat = [x * y % n2 for x, y in zip(a.reshape(-1), b.reshape(-1))]
        pk.meter.count("add", len(flat))
        return self._like(flat, self.scale, bound, a.shape)

    def add_encoded(self, ints) -> CipherArray:
        """E(x) + k for plaintext integers k already encoded at this array's scale."""
        ints = fixedpoint.as_object_array(ints)
        pk, n, n2 = self.public_key, self.public_key.n_mpz, self.public_key.nsquare_mpz
        bound = self.bound + fixedpoint.max_abs(ints)
        pk.check_plain(bound, "sum")
        a, b = self._broadcast(ints)
        flat = [x * (1 + (int(k) % n) * n) % n2 for x, k in zip(a.reshape(-1), b.reshape(-1))]
        pk.meter.count("add", len(flat))
        return self._like(flat, self.scale, bound, a.shape)

    def add_mask(self, ints) -> CipherArray:
        """E(x + k mod n) for masks k uniform over the plaintext space (integers, reduced
        mod n): the sum has no bound -- its holder reads residues -- so no further
        arithmetic checks it (``smc_hmm.messages.MaskedCiphertexts``)."""
        ints = fixedpoint.as_object_array(ints)
        pk, n, n2 = self.public_key, self.public_key.n_mpz, self.public_key.nsquare_mpz
        a, b = self._broadcast(ints)
        flat = [x * (1 + (int(k) % n) * n) % n2 for x, k in zip(a.reshape(-1), b.reshape(-1))]
        pk.meter.count("add", len(flat))
        return self._like(flat, self.scale, int(n), a.shape)

    def with_scale(self, scale: int) -> CipherArray:
        """The same ciphertexts read at another scale (the caller re-interprets the units)."""
        return CipherArray(self.public_key, self.data, scale, self.bound)

    __radd__ = __add__

    def __neg__(self) -> CipherArray:
        n2 = self.public_key.nsquare_mpz
        flat = [gmpy2.invert(c, n2) for c in self.ciphertexts()]
        _count_scalar_muls(self.public_key.meter, len(flat), len(flat), len(flat))
        return self._like(flat, self.scale, self.bound)

    def __sub__(self, other) -> CipherArray:
        if isinstance(other, CipherArray):
            return self + (-other)
        return self + (-np.asarray(other))

    def __rsub__(self, other) -> CipherArray:
        return (-self) + other

    def mul(self, factors, scale: int = 0) -> CipherArray:
        """Multiply by plaintext integers carrying ``scale`` fractional bits.

        The result's scale is ``self.scale + scale``.  ``factors`` broadcasts
        against the array; one shared factor uses gmpy2's GIL-free list powmod.
        """
        scale = fixedpoint.check_scale(scale)
        ks = fixedpoint.as_object_array(factors)
        bound = self.bound * fixedpoint.max_abs(ks)
        pk, n2 = self.public_key, self.public_key.nsquare_mpz
        pk.check_plain(bound, "product")
        fixedpoint.check_scale(self.scale + scale)
        if ks.ndim == 0:
            k = int(ks.item())
            base = self.ciphertexts()
            if k < 0:
                base, k = [gmpy2.invert(c, n2) for c in base], -k
            flat = list(gmpy2.powmod_base_list(base, k, n2)) if base else []
            shape = self.shape
            exponent_bits, inversions = k.bit_length() * len(flat), len(flat) * (ks.item() < 0)
        else:
            a, b = self._broadcast(ks)
            exponents = [int(k) for k in b.reshape(-1)]
            flat = [gmpy2.powmod(c, k, n2) for c, k in zip(a.reshape(-1), exponents)]
            shape = a.shape
            exponent_bits = sum(abs(k).bit_length() for k in exponents)
            inversions = sum(k < 0 for k in exponents)
        _count_scalar_muls(pk.meter, len(flat), exponent_bits, inversions)
        return self._like(flat, self.scale + scale, bound, shape)

    def mul_fixed(self, reals, scale: int) -> CipherArray:
        """Multiply by real factors rounded at ``scale`` fractional bits."""
        ints, _ = fixedpoint.encode(np.asarray(reals, dtype=float), scale)
        return self.mul(ints, scale)

    def __mul__(self, other) -> CipherArray:
        arr = np.asarray(other)
        if arr.dtype.kind == "f":
            raise InvalidInputError(
                "multiply by reals with mul_fixed(values, scale): the "
                "factor's fixed-point scale must be explicit"
            )
        return self.mul(other)

    __rmul__ = __mul__

    def rescale_up(self, bits: int) -> CipherArray:
        """Exactly multiply by 2^bits and add ``bits`` to the scale (align scales)."""
        if bits == 0:
            return self
        result = self.mul(1 << bits)
        result.scale = self.scale + bits
        return result

    def sum(self, axis=None) -> CipherArray:
        """Homomorphic sum over ``axis`` (all elements by default)."""
        n2, pk = self.public_key.nsquare_mpz, self.public_key
        data = self.data
        if axis is None:
            data, axis = data.reshape(-1), 0
        count = data.shape[axis]
        bound = self.bound * count
        pk.check_plain(bound, "sum")
        moved = np.moveaxis(data, axis, 0)
        out_shape = moved.shape[1:]
        cols = moved.reshape(count, -1)
        flat = []
        for j in range(cols.shape[1]):
            acc = mpz(1)
            for c in cols[:, j]:
                acc = acc * c % n2
            flat.append(acc)
        pk.meter.count("add", max(0, count - 1) * cols.shape[1])
        return self._like(flat, self.scale, bound, out_shape)

    def lincomb(
        self, weights, weight_scale: int = 0, *, compute: Compute | None = None
    ) -> CipherArray:
        """E(W x) for this 1-D array x and integer weights W of shape (k, m) or (m,).

        Each output is one multi-exponentiation; negative weights cost one
        inversion per output in total.  Result scale: ``scale + weight_scale``.
        """
        if self.ndim != 1:
            raise ShapeMismatchError("lincomb needs a 1-D CipherArray; reshape first")
        w = fixedpoint.as_object_array(weights)
        single = w.ndim == 1
        w2 = w.reshape(1, -1) if single else w
        if w2.ndim != 2 or w2.shape[1] != self.size:
            raise ShapeMismatchError(
                f"weights of shape {w.shape} do not match {self.size} ciphertexts"
            )
        weight_scale = fixedpoint.check_scale(weight_scale)
        fixedpoint.check_scale(self.scale + weight_scale)
        pk, n2 = self.public_key, self.public_key.nsquare_mpz
        row_l1 = [sum(abs(int(x)) for x in row) for row in w2]
        bound = self.bound * max(row_l1, default=0)
        pk.check_plain(bound, "linear combination")
        bases = PackedInts.for_modulus(self.ciphertexts(), n2)
        rows = [[int(x) for x in row] for row in w2]
        compute = compute or pk.compute or _INLINE
        k, m = len(rows), len(bases)
        if not compute.parallel or k * m < _PARALLEL_MIN_TERMS:
            parts = [[p] for p in _lincomb_task(bases, rows, n2)]
        elif k >= compute.workers or m <= SHARED_BASE_MAX_TERMS:
            groups = compute.chunks(rows)
            results = compute.map(_lincomb_task, [bases] * len(groups), groups, [n2] * len(groups))
            parts = [[p] for res in results for p in res]
        else:
            # few outputs: split the digit windows (all terms in every lane), so each
            # lane pays the bucket aggregation only for its own windows
            c = max(window_plan(row)[0] for row in rows)
            windows = window_count(max(abs(x) for row in rows for x in row), c)
            spans = compute.chunks(list(range(windows)))
            results = compute.map(
                _lincomb_windows_task, *zip(*[(bases, rows, n2, c, s[0], s[-1] + 1) for s in spans])
            )
            parts = [
                [merge_window_parts([(s[0], res[r]) for s, res in zip(spans, results)], c, n2)]
                for r in range(k)
            ]
        flat = [combine_parts(p, n2) for p in parts]
        pk.meter.count("multiexp_terms", k * m)
        pk.meter.count("multiexp_bits", sum(abs(x).bit_length() for row in rows for x in row))
        _count_mults(pk.meter, [(m, rows)], n2)
        out = self._like(flat, self.scale + weight_scale, bound, (k,))
        return out[0] if single else out

    @classmethod
    def lincomb_blocks(
        cls, blocks, weight_scale: int = 0, *, compute: Compute | None = None
    ) -> CipherArray:
        """E(W_b x_b) for many small independent blocks (x_b, W_b), concatenated.

        Same result as ``concatenate([x.lincomb(W, weight_scale) for x, W in blocks])``,
        but the blocks (each too small to split) are spread over the compute lanes
        together: one batch per lane instead of one call per block.
        """
        blocks = [(x, fixedpoint.as_object_array(w)) for x, w in blocks]
        if not blocks:
            raise InvalidInputError("no blocks to combine")
        first = blocks[0][0]
        pk, n2 = first.public_key, first.public_key.nsquare_mpz
        weight_scale = fixedpoint.check_scale(weight_scale)
        plans = []
        for x, w in blocks:
            first._check_compatible(x)
            if x.ndim != 1 or w.ndim != 2 or w.shape[1] != x.size:
                raise ShapeMismatchError(
                    f"block weights of shape {w.shape} do not match {x.size} ciphertexts"
                )
            rows = [[int(v) for v in row] for row in w]
            bound = x.bound * max((sum(abs(v) for v in row) for row in rows), default=0)
            pk.check_plain(bound, "linear combination")
            plans.append((PackedInts.for_modulus(x.ciphertexts(), n2), rows, bound))
        compute = compute or pk.compute or _INLINE
        lanes = compute.chunks(plans) if compute.parallel else [plans]
        results = compute.map(_lincomb_block_task, lanes, [n2] * len(lanes))
        flat = [combine_parts([p], n2) for lane in results for block in lane for p in block]
        pk.meter.count("multiexp_terms", sum(len(r) * len(b) for b, r, _ in plans))
        pk.meter.count(
            "multiexp_bits",
            sum(abs(x).bit_length() for _, rows, _ in plans for row in rows for x in row),
        )
        _count_mults(pk.meter, [(len(b.values), rows) for b, rows, _ in plans], n2)
        bound = max(b for _, _, b in plans)
        fixedpoint.check_scale(first.scale + weight_scale)
        return cls(pk, _mpz_array(flat, (len(flat),)), first.scale + weight_scale, bound)

    def lincomb_fixed(
        self, reals, weight_scale: int, *, compute: Compute | None = None
    ) -> CipherArray:
        """:meth:`lincomb` with real weights rounded at ``weight_scale`` bits."""
        ints, _ = fixedpoint.encode(np.asarray(reals, dtype=float), weight_scale)
        return self.lincomb(ints, weight_scale, compute=compute)

    def __rmatmul__(self, weights) -> CipherArray:
        arr = np.asarray(weights)
        if arr.dtype.kind == "f":
            raise InvalidInputError("use lincomb_fixed(W, scale) for real weights")
        return self.lincomb(arr)

    def rerandomize(self, *, compute: Compute | None = None) -> CipherArray:
        """Fresh randomness, same plaintexts: apply before sending computed ciphertexts.

        Randomizers come from the offline phase's pool while it covers the batch, else a
        large batch is spread over the compute lanes (as :meth:`encrypt_encoded` does)."""
        pk, flat = self.public_key, self.ciphertexts()
        compute = compute or pk.compute or _INLINE
        randomizer = _lane_randomizer(pk, len(flat), compute)
        if randomizer is not None:
            n2 = pk.nsquare_mpz
            chunks = compute.chunks(flat, min_chunk=32)
            parts = compute.map(
                _rerandomize_task,
                [randomizer.params()] * len(chunks),
                [PackedInts.for_modulus(c, n2) for c in chunks],
                local=lambda _params, cts: PackedInts.for_modulus(pk.rerandomize(cts.values), n2),
            )
            pk.meter.count("rerandomize", len(flat) - len(chunks[0]))
            out = [c for part in parts for c in part.values]
        else:
            out = pk.rerandomize(flat)
        return self._like(out, self.scale, self.bound)

    def with_bound(self, bound: int) -> CipherArray:
        """The same ciphertexts with a caller-asserted (tighter or looser) bound."""
        return CipherArray(self.public_key, self.data, self.scale, bound)

    # -- phe interoperability -----------------------------------------------------

    def to_phe(self) -> np.ndarray:
        """phe ``EncryptedNumber`` objects (exponent base 16; scale rounded up to 4k bits)."""
        extra = -self.scale % 4
        arr = self.rescale_up(extra) if extra else self
        exponent = -(arr.scale // 4)
        out = np.empty(self.size, dtype=object)
        for i, c in enumerate(arr.ciphertexts()):
            out[i] = phe.EncryptedNumber(self.public_key, int(c), exponent)
        return out.reshape(self.shape)

    @classmethod
    def from_phe(
        cls,
        numbers,
        public_key: PublicKey | None = None,
        scale: int | None = None,
        bound: int | None = None,
    ) -> CipherArray:
        """Wrap phe ``EncryptedNumber`` objects; exponents are aligned to one binary scale.

        phe does not track magnitudes, so ``bound`` (max |plaintext integer| at
        the target scale) should be given; by default the full plaintext space
        is assumed, which leaves no room for further arithmetic.
        """
        arr = np.asarray(numbers, dtype=object)
        flat = list(arr.reshape(-1))
        if not flat or not all(isinstance(x, phe.EncryptedNumber) for x in flat):
            raise InvalidInputError("from_phe needs a non-empty array of phe EncryptedNumbers")
        key = public_key if public_key is not None else flat[0].public_key
        if not isinstance(key, PublicKey):
            key = PublicKey(key.n)
        for x in flat:
            if x.public_key.n != key.n:
                raise KeyMismatchError("EncryptedNumbers under different keys")
        natural = [max(0, -4 * x.exponent) for x in flat]
        target = max(natural) if scale is None else fixedpoint.check_scale(scale)
        n2 = key.nsquare_mpz
        cts = []
        for x, s in zip(flat, natural):
            shift = target - s + (4 * x.exponent if x.exponent > 0 else 0)
            if shift < 0:
                raise InvalidInputError(f"scale {target} is too coarse for exponent {x.exponent}")
            c = mpz(x.ciphertext(be_secure=False))
            cts.append(gmpy2.powmod(c, 1 << shift, n2) if shift else c)
        key.validate_ciphertexts(cts)
        return cls(key, _mpz_array(cts, arr.shape), target, bound)

    def __repr__(self) -> str:
        return (
            f"CipherArray(shape={self.shape}, scale={self.scale}, "
            f"bound_bits={self.bound.bit_length()}, key={self.public_key!r})"
        )
