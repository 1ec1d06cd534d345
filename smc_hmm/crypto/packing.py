"""Packing several signed fixed-point values into the slots of one plaintext.

A packed plaintext is P = sum_j v_j 2^(j w) for signed slot values |v_j| < 2^(w-1).
Homomorphic addition and multiplication by a plaintext integer act on every
slot at once and keep slots independent as long as each slot stays below
2^(w-1) in magnitude; decoding reads slots from low to high with a borrow
(the thesis's 4.2.1 keyword task scores many frames with the same weights).
The slot width is planned from

    w = value_bits + growth_bits + mask_bits + 2     (sign bit and carry margin)

where ``growth_bits`` covers sums and linear combinations applied later and
``mask_bits`` the additive masks of a later blinding step.  Every operation
checks the per-slot bound before computing and raises PrecisionError.

A :class:`PackedCipherArray` is a (rows, width) matrix of values stored as
``rows`` ciphertexts of ``width`` slots each: a linear combination over rows
(weights shared by all slots) costs one multi-exponentiation for all columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smc_hmm.compute import Compute
from smc_hmm.crypto import fixedpoint, native
from smc_hmm.crypto.cipherarray import CipherArray
from smc_hmm.crypto.keys import PRECISION_MARGIN_BITS, PrivateKey, PublicKey
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError, ShapeMismatchError


def plain_bits(key_bits: int) -> int:
    """The bits a packed plaintext of a ``key_bits``-bit key may fill: every |x| below
    2^plain_bits is below n / 2^(1 + PRECISION_MARGIN_BITS), the bound every homomorphic
    operation checks (:meth:`PublicKey.check_plain`).  The one home of that headroom for
    every packing plan (``protocols.stages``)."""
    return key_bits - 2 - PRECISION_MARGIN_BITS


@dataclass(frozen=True)
class PackingPlan:
    """Slot layout: ``slots`` slots of ``slot_bits`` bits in one plaintext."""

    slot_bits: int
    slots: int

    @classmethod
    def for_key(
        cls,
        public_key: PublicKey,
        value_bits: int,
        *,
        growth_bits: int = 0,
        mask_bits: int = 0,
        max_slots: int | None = None,
    ) -> PackingPlan:
        """The widest plan for ``public_key``: values of ``value_bits`` bits (magnitude),
        ``growth_bits`` of headroom for later sums/linear combinations and ``mask_bits``
        for additive masks."""
        for name, v in (
            ("value_bits", value_bits),
            ("growth_bits", growth_bits),
            ("mask_bits", mask_bits),
        ):
            if not isinstance(v, int) or v < 0:
                raise InvalidInputError(f"{name} must be a non-negative int, got {v!r}")
        width = value_bits + growth_bits + mask_bits + 2
        slots = (public_key.max_plain.bit_length() - 1) // width
        if max_slots is not None:
            slots = min(slots, max_slots)
        if slots < 1:
            raise PrecisionError(f"a {width}-bit slot does not fit a {public_key.bits}-bit key")
        return cls(width, slots)

    def packed_bound(self, slot_bound: int) -> int:
        """Bound on a packed plaintext whose slots each hold |v| <= ``slot_bound`` (slots
        may borrow from the next: the packed integer itself is what must fit)."""
        return slot_bound << ((self.slots - 1) * self.slot_bits + 1)

    @property
    def slot_limit(self) -> int:
        """Largest magnitude a slot may hold."""
        return (1 << (self.slot_bits - 1)) - 1

    def pack(self, values) -> int:
        """One packed integer from at most ``slots`` signed integers (slot 0 lowest)."""
        values = [int(v) for v in values]
        if len(values) > self.slots:
            raise ShapeMismatchError(f"{len(values)} values for {self.slots} slots")
        limit = self.slot_limit
        packed = 0
        for j, v in enumerate(values):
            if abs(v) > limit:
                raise PrecisionError(
                    f"slot value needs {abs(v).bit_length() + 1} bits, slot has {self.slot_bits}"
                )
            packed += v << (j * self.slot_bits)
        return packed

    def unpack(self, packed: int, count: int) -> list[int]:
        """The ``count`` signed slot values of a packed integer (low to high, with borrow)."""
        w, half, full = self.slot_bits, 1 << (self.slot_bits - 1), 1 << self.slot_bits
        out = []
        packed = int(packed)
        for _ in range(count):
            s = packed & (full - 1)
            if s >= half:
                s -= full
            out.append(s)
            packed = (packed - s) >> w
        return out


class PackedCipherArray:
    """A (rows, width) matrix of fixed-point values, one ciphertext per row."""

    __slots__ = ("cipher", "plan", "width", "slot_bound")

    def __init__(self, cipher: CipherArray, plan: PackingPlan, width: int, slot_bound: int):
        if cipher.ndim != 1:
            raise ShapeMismatchError("packed ciphertexts form a 1-D CipherArray")
        if not 1 <= width <= plan.slots:
            raise ShapeMismatchError(f"width {width} not in [1, {plan.slots}]")
        if slot_bound > plan.slot_limit:
            raise PrecisionError("slot bound exceeds the slot width")
        self.cipher, self.plan, self.width, self.slot_bound = cipher, plan, width, slot_bound

    @classmethod
    def encrypt(
        cls,
        public_key: PublicKey,
        values,
        scale: int,
        plan: PackingPlan,
        *,
        compute: Compute | None = None,
    ) -> PackedCipherArray:
        """Encrypt a (rows, width) array of reals (at ``scale``) or integers."""
        ints, bound = fixedpoint.encode(values, scale)
        if ints.ndim != 2:
            raise ShapeMismatchError(f"packed values must be 2-D (rows, width), got {ints.shape}")
        if bound > plan.slot_limit:
            raise PrecisionError(
                f"values need {bound.bit_length() + 1} bits per slot, plan has {plan.slot_bits}"
            )
        packed = np.array([plan.pack(row) for row in ints], dtype=object)
        cipher = CipherArray.encrypt_encoded(
            public_key, packed, scale, fixedpoint.max_abs(packed), compute=compute
        )
        return cls(cipher, plan, ints.shape[1], bound)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.cipher.size, self.width)

    @property
    def scale(self) -> int:
        return self.cipher.scale

    @property
    def public_key(self) -> PublicKey:
        return self.cipher.public_key

    def _with(self, cipher: CipherArray, slot_bound: int) -> PackedCipherArray:
        if slot_bound > self.plan.slot_limit:
            raise PrecisionError(
                f"a slot could reach {slot_bound.bit_length() + 1} bits but slots have "
                f"{self.plan.slot_bits}: plan more growth_bits"
            )
        return PackedCipherArray(cipher, self.plan, self.width, slot_bound)

    def _whole_bound(self, slot_bound: int) -> int:
        return slot_bound << ((self.width - 1) * self.plan.slot_bits + 1)

    def decrypt_ints(self, private_key: PrivateKey) -> np.ndarray:
        """The (rows, width) signed slot integers: one decryption per row."""
        packed = self.cipher.decrypt_ints(private_key)
        rows = [self.plan.unpack(p, self.width) for p in packed]
        return np.array(rows, dtype=object).reshape(self.shape)

    def decrypt(self, private_key: PrivateKey) -> np.ndarray:
        return fixedpoint.decode(self.decrypt_ints(private_key), self.scale)

    def __add__(self, other) -> PackedCipherArray:
        if isinstance(other, PackedCipherArray):
            if other.plan != self.plan or other.shape != self.shape:
                raise ShapeMismatchError("packed arrays differ in plan or shape")
            bound = self.slot_bound + other.slot_bound
            self._with(self.cipher, bound)  # check first
            summed = self.cipher.with_bound(
                self._whole_bound(self.slot_bound)
            ) + other.cipher.with_bound(self._whole_bound(other.slot_bound))
            return self._with(summed, bound)
        ints, obound = fixedpoint.encode(other, self.scale)
        ints = np.broadcast_to(ints, self.shape)
        bound = self.slot_bound + obound
        self._with(self.cipher, bound)
        packed = np.array([self.plan.pack(row) for row in ints], dtype=object)
        n, n2 = self.public_key.n_mpz, self.public_key.nsquare_mpz
        flat = [c * (1 + (int(p) % n) * n) % n2 for c, p in zip(self.cipher.ciphertexts(), packed)]
        self.public_key.meter.count("add", len(flat))
        return self._with(self.cipher._like(flat, self.scale, self._whole_bound(bound)), bound)

    def add_encoded(self, ints) -> PackedCipherArray:
        """Add a (rows, width) array of integers already encoded at this array's scale."""
        ints = np.broadcast_to(fixedpoint.as_object_array(ints), self.shape)
        bound = self.slot_bound + fixedpoint.max_abs(ints)
        self._with(self.cipher, bound)  # check first
        packed = np.array([self.plan.pack(row) for row in ints], dtype=object)
        summed = self.cipher.with_bound(self._whole_bound(self.slot_bound)).add_encoded(packed)
        return self._with(summed.with_bound(self._whole_bound(bound)), bound)

    def mul(self, factor: int, scale: int = 0) -> PackedCipherArray:
        """Multiply every slot by one plaintext integer (with ``scale`` fractional bits)."""
        if not isinstance(factor, int | np.integer):
            raise InvalidInputError("packed slots share one integer factor")
        bound = self.slot_bound * abs(int(factor))
        self._with(self.cipher, bound)
        cipher = self.cipher.with_bound(self._whole_bound(self.slot_bound)).mul(int(factor), scale)
        return self._with(cipher, bound)

    def lincomb(
        self, weights, weight_scale: int = 0, *, compute: Compute | None = None
    ) -> PackedCipherArray:
        """W @ values for integer weights W of shape (k, rows): one multi-exponentiation
        per output row computes all ``width`` columns at once."""
        w = fixedpoint.as_object_array(weights)
        if w.ndim != 2 or w.shape[1] != self.cipher.size:
            raise ShapeMismatchError(f"weights {w.shape} do not match {self.cipher.size} rows")
        bound = self.slot_bound * max((sum(abs(int(x)) for x in row) for row in w), default=0)
        self._with(self.cipher, bound)
        cipher = self.cipher.with_bound(self._whole_bound(self.slot_bound)).lincomb(
            w, weight_scale, compute=compute
        )
        return self._with(cipher, bound)

    def rerandomize(self) -> PackedCipherArray:
        return PackedCipherArray(self.cipher.rerandomize(), self.plan, self.width, self.slot_bound)

    def __repr__(self) -> str:
        return (
            f"PackedCipherArray(shape={self.shape}, slots={self.plan.slots}x"
            f"{self.plan.slot_bits}b, scale={self.scale})"
        )


def top_mask(n: int, used_bits: int, rng) -> int:
    """R 2^used_bits, R uniform on [1, n / 2^used_bits - 1): added to a packed plaintext
    whose slots fill its low ``used_bits`` (each masked over its whole width), it makes
    the whole plaintext uniform on Z_n to within 2^(used_bits + 2 - log2 n), whatever
    the ciphertext it was computed from held, and an honest plaintext never wraps."""
    return (1 + rng.randbelow((int(n) >> used_bits) - 2)) << used_bits


def horner_pack(enc: CipherArray, slot_bits: int, per: int) -> CipherArray:
    """Bob: E(sum_i x_i 2^(i w)) for consecutive groups of ``per`` non-negative values below
    2^w (w = ``slot_bits``), by Horner's rule: w squarings and one multiplication a value
    (in C on the native kernel where it runs, metered as ``native_mults``)."""
    flat = enc.reshape(enc.size)
    pk, n2 = flat.public_key, flat.public_key.nsquare_mpz
    kernel = native.kernel()
    if kernel is not None and kernel.fits(n2) and flat.size:
        pk.check_plain(1 << (min(per, flat.size) * slot_bits), "packed slots")
        data = kernel.horner_pack(flat.ciphertexts(), per, slot_bits, n2)
        groups = [min(per, flat.size - g) for g in range(0, flat.size, per)]
        # per group of s: s conversions in, (s - 1) (shift + 1) products, one conversion out
        pk.meter.count("native_mults", sum(2 * s + (s - 1) * slot_bits for s in groups))
        top = 1 << (min(per, flat.size) * slot_bits)
        return CipherArray(pk, data, flat.scale, top)
    out = []
    for start in range(0, flat.size, per):
        group = flat[start : start + per]
        acc = group[group.size - 1 : group.size]
        for i in reversed(range(group.size - 1)):
            acc = acc.mul(1 << slot_bits) + group[i : i + 1]
        out.append(acc.with_bound(1 << (group.size * slot_bits)))
    return CipherArray.concatenate(out)


def unpack_slots(packed, slot_bits: int, per: int, count: int) -> list[int]:
    """Alice: the ``count`` non-negative slot values of decrypted packed integers."""
    mask = (1 << slot_bits) - 1
    out = []
    for v in packed:
        v = int(v)
        if v < 0:
            raise ProtocolError("a packed value is negative")
        out += [(v >> (i * slot_bits)) & mask for i in range(per)]
    return out[:count]
