"""The optional native kernel: Montgomery arithmetic on AVX-512 IFMA.

Bob's linear combinations and every party's randomizers are chains of modular
multiplications (4096 bits modulo n^2: about 4.5 us each through ``gmpy2``).
``_ifma.c`` computes them as Montgomery multiplications on 52-bit limbs with the AVX-512
IFMA instructions (Gueron and Krasnov, ARITH 2016, "almost Montgomery multiplication"),
about 3x faster, and runs whole algorithms over them in C so that Python converts each
number once:

* :meth:`IfmaKernel.multiexp_rows`: Straus's method over bases shared by many rows
  (:func:`smc_hmm.crypto.multiexp.shared_base_parts`: the LOGSUM replies, the emission
  blocks);
* :meth:`IfmaKernel.pippenger`: signed-digit buckets for many terms
  (:func:`smc_hmm.crypto.multiexp.signed_parts`);
* :meth:`IfmaKernel.comb_table` / :meth:`IfmaKernel.comb_product`: fixed-base comb tables
  (:class:`smc_hmm.crypto.randomness.FixedBaseTable`: DJN and DGK randomizers);
* :meth:`IfmaKernel.secret_powmod_x2`: two exponentiations in constant time, interleaved
  (:class:`smc_hmm.crypto.consttime.IfmaPowmod`: CRT decryption).

``smc-hmm bench crypto`` puts each beside the gmpy2 path in the same run
(``docs/benchmarks.md``).  It is written by hand because no maintained library offers
it: GMP has no IFMA code and no multi-exponentiation, and OpenSSL's IFMA code serves only
its RSA moduli (and is not exported by the libcrypto CPython loads here).

The kernel is built when the package is installed, where a C compiler is present
(``setup.py``; a failed build is skipped), and used only where the CPU has AVX-512
IFMA and a self-test against ``gmpy2`` passes; everywhere else the ``gmpy2`` path runs,
with the same results.  ``SMC_HMM_NATIVE=off`` turns it off (and ``noifma`` turns off
this one alone, keeping the garbling kernel of :mod:`smc_hmm.gc.native`).  Apart from
:meth:`IfmaKernel.secret_powmod_x2`, it is not constant time: like the ``gmpy2`` paths,
it skips zero digits (``docs/security.md``, "Constant time").  :mod:`ctypes` releases the
GIL for each call.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

__all__ = [
    "IfmaKernel",
    "kernel",
    "load_kernel",
    "multiplication_count",
    "switch",
    "window_for",
]

#: environment variable of the native kernels: "off" (or "0", "no", "false") turns every
#: kernel off (the gmpy2 and numpy paths, as on a machine without a C compiler);
#: "noifma" turns this one off and keeps the garbling kernel (:mod:`smc_hmm.gc.native`):
#: what a CPU with AES-NI but without AVX-512 IFMA (AMD Zen 3, say) runs
SWITCH = "SMC_HMM_NATIVE"
_OFF = {"off", "0", "no", "false"}
NO_IFMA = "noifma"


def switch() -> str:
    """The kernels' switch, read on every call: ``"off"``, ``"noifma"`` or ``"on"``."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if value in _OFF:
        return "off"
    return NO_IFMA if value == NO_IFMA else "on"


#: moduli whose constants (R^2 mod M, -M^-1 mod 2^52) are kept
MODULI_KEPT = 8
_U8 = ctypes.c_char_p
_INT, _U64, _OUT = ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p
#: name: (result type, argument types) of every function of ``_ifma.c`` called here; a
#: number is little-endian bytes (_U8 in, _OUT a buffer written), a limb count an int
_PROTOTYPES = {
    "smc_ifma_supported": (_INT, []),
    "smc_ifma_max_regs": (_INT, []),
    "smc_multiexp_rows": (_INT, [_INT, _U8, _U8, _U64, _INT, _U8, _INT, _U8, _INT, _INT, _OUT]),
    "smc_powmod_ct_x2": (_INT, [_INT] * 3 + [_U8, _U8, _U8, _U64, _U8, _U8, _OUT] * 2),
    "smc_comb_build": (_INT, [_INT, _U8, _U8, _U64, _U8, _INT, _INT, _OUT]),
    "smc_comb_product": (_INT, [_INT, _U8, _U64, _OUT, _INT, _INT, _INT, _U8, _OUT]),
    "smc_pippenger": (_INT, [_INT, _U8, _U8, _U64, _INT, _U8, _INT, _INT, _U8, _OUT, _OUT]),
    "smc_amm": (_INT, [_INT, _U8, _U64, _U8, _U8, _OUT, _INT]),
    "smc_horner_pack": (_INT, [_INT, _U8, _U8, _U64, _INT, _U8, _INT, _INT, _OUT]),
}


def _library_path() -> str | None:
    """Where the installed extension ``smc_hmm.crypto._ifma`` is (None if it was not built)."""
    try:
        spec = importlib.util.find_spec("smc_hmm.crypto._ifma")
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None


def window_for(terms: int, rows: int, exp_bits: int) -> int:
    """Straus window c minimising rows * (bits + terms * windows) + terms * 2^c (the
    unsigned tables are built once and serve every row)."""
    return min(
        range(1, 9),
        key=lambda c: rows * (exp_bits + terms * -(-exp_bits // c)) + terms * (1 << c),
    )


def multiplication_count(terms: int, rows: int, exp_bits: int) -> int:
    """The multiplications :meth:`IfmaKernel.multiexp_rows` spends: each row's squarings
    and window products, the tables, and the conversions in and out of Montgomery form
    (the cost model prices them at the kernel's own rate)."""
    if terms < 1 or rows < 1 or exp_bits < 1:
        return 0
    c = window_for(terms, rows, exp_bits)
    return rows * (exp_bits + terms * -(-exp_bits // c) + 1) + terms * (1 << c)


class _Modulus:
    """A modulus's constants, computed once per modulus (with gmpy2, so in variable time:
    once per key, never per input): R^2 and R^3 mod M and -M^-1 mod 2^52."""

    __slots__ = ("regs", "width", "modulus", "r2", "r3", "k0", "bound")

    def __init__(self, modulus: mpz, regs: int):
        self.regs, self.width = regs, 52 * regs
        self.modulus = int(modulus).to_bytes(self.width, "little")
        r = mpz(1) << (52 * 8 * regs)
        self.r2 = int(r * r % modulus).to_bytes(self.width, "little")
        self.r3 = int(r * r * r % modulus).to_bytes(self.width, "little")
        self.k0 = int(-gmpy2.invert(modulus, mpz(1) << 52) % (mpz(1) << 52))
        self.bound = r * r  # a constant-time base is below R^2


class IfmaKernel:
    """The loaded library (build it with :func:`load_kernel`)."""

    name = "AVX-512 IFMA kernel"

    def __init__(self, lib: ctypes.CDLL, path: str):
        for symbol, (restype, argtypes) in _PROTOTYPES.items():
            function = getattr(lib, symbol)
            function.restype, function.argtypes = restype, argtypes
        self.lib, self.path = lib, path
        self.max_regs = int(lib.smc_ifma_max_regs())
        self._moduli: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"{self.name} ({self.path})"

    def fits(self, modulus) -> bool:
        """Whether this build takes the odd ``modulus`` (its size: 4 M <= 2^(416 regs))."""
        m = mpz(modulus)
        return m > 2 and bool(m % 2) and self._regs(m) <= self.max_regs

    @staticmethod
    def _regs(m: mpz) -> int:
        return -(-(m.bit_length() + 2) // 416)

    def _constants(self, modulus: mpz) -> _Modulus:
        key = int(modulus)
        with self._lock:
            entry = self._moduli.get(key)
            if entry is None:
                entry = self._moduli[key] = _Modulus(modulus, self._regs(modulus))
                while len(self._moduli) > MODULI_KEPT:
                    self._moduli.popitem(last=False)
            self._moduli.move_to_end(key)
            return entry

    def multiexp_rows(self, bases: Sequence, rows: Sequence[Sequence[int]], modulus) -> list[mpz]:
        """``[prod_i bases_i^{w_ri} mod modulus for each row]``, every w_ri >= 0 (a
        negative weight raises ValueError: invert its base first)."""
        m = mpz(modulus)
        if not self.fits(m):
            raise ValueError("the IFMA kernel takes odd moduli up to its build's size")
        rows = [[int(w) for w in row] for row in rows]
        if any(len(row) != len(bases) for row in rows):
            raise ValueError("every row needs one weight per base")
        if any(w < 0 for row in rows for w in row):
            raise ValueError("the IFMA kernel takes nonnegative exponents")
        if not rows:
            return []
        top = max((w for row in rows for w in row), default=0)
        if top == 0 or not bases:
            return [mpz(1) for _ in rows]
        const = self._constants(m)
        width, ew = const.width, (top.bit_length() + 7) // 8
        c = window_for(len(bases), len(rows), top.bit_length())
        packed_bases = b"".join(int(mpz(b) % m).to_bytes(width, "little") for b in bases)
        packed_exps = b"".join(w.to_bytes(ew, "little") for row in rows for w in row)
        out = ctypes.create_string_buffer(width * len(rows))
        status = self.lib.smc_multiexp_rows(
            const.regs, const.modulus, const.r2, const.k0, len(bases), packed_bases,
            len(rows), packed_exps, ew, c, out,
        )  # fmt: skip
        if status != 0:
            raise MemoryError("the IFMA kernel could not allocate its tables")
        raw = out.raw
        return [
            mpz(int.from_bytes(raw[r * width : (r + 1) * width], "little"))
            for r in range(len(rows))
        ]

    def horner_pack(self, bases: Sequence, per: int, shift: int, modulus) -> list[mpz]:
        """For each group of ``per`` consecutive bases, prod_i base_i^(2^(shift i)) mod
        modulus (Horner's rule: ``shift`` squarings and one multiplication a base)."""
        m = mpz(modulus)
        if not self.fits(m):
            raise ValueError("the IFMA kernel takes odd moduli up to its build's size")
        if not bases:
            return []
        const = self._constants(m)
        width = const.width
        packed = b"".join(int(mpz(b) % m).to_bytes(width, "little") for b in bases)
        groups = -(-len(bases) // per)
        out = ctypes.create_string_buffer(width * groups)
        status = self.lib.smc_horner_pack(
            const.regs, const.modulus, const.r2, const.k0, len(bases), packed, per, shift, out
        )
        if status != 0:
            raise MemoryError("the IFMA kernel could not allocate its Horner buffers")
        raw = out.raw
        return [
            mpz(int.from_bytes(raw[g * width : (g + 1) * width], "little")) for g in range(groups)
        ]

    def pippenger(self, bases: Sequence, columns, c: int, modulus) -> tuple[mpz, mpz]:
        """Signed-digit buckets over digit ``columns`` (windows x bases, |d| <= 2^(c-1),
        lowest window first): ``(P, Q)`` with the multi-exponentiation = P / Q, the
        contract of :func:`smc_hmm.crypto.multiexp.signed_parts`."""
        m = mpz(modulus)
        if not self.fits(m) or not 1 <= c <= 12:
            raise ValueError("the IFMA kernel takes odd moduli up to its size and c <= 12")
        digits = np.ascontiguousarray(columns, dtype=np.int16).reshape(-1, len(bases))
        const = self._constants(m)
        width = const.width
        packed = b"".join(int(mpz(b) % m).to_bytes(width, "little") for b in bases)
        pos, neg = ctypes.create_string_buffer(width), ctypes.create_string_buffer(width)
        status = self.lib.smc_pippenger(
            const.regs, const.modulus, const.r2, const.k0, len(bases), packed,
            digits.shape[0], c, digits.tobytes(), pos, neg,
        )  # fmt: skip
        if status != 0:
            raise MemoryError("the IFMA kernel could not allocate its buckets")
        return (mpz(int.from_bytes(pos.raw, "little")), mpz(int.from_bytes(neg.raw, "little")))

    def secret_bound(self, modulus) -> mpz:
        """Bases of :meth:`secret_powmod_x2` are below this (R^2 for this modulus)."""
        return self._constants(mpz(modulus)).bound

    def secret_powmod_x2(self, first, second) -> tuple[mpz, mpz]:
        """Two exponentiations ``(base, exponent, modulus)`` in constant time in the
        exponents and bases: a fixed 5-bit window over the exponents' length rounded up to
        64 bits, every table entry read at every step, no branch on a value (``_ifma.c``).
        Two at once cost about one.  Moduli odd and of one limb count
        (:meth:`shape`), bases in [0, :meth:`secret_bound`), exponents >= 0."""
        (b1, e1, m1), (b2, e2, m2) = first, second
        c1, c2 = self._constants(mpz(m1)), self._constants(mpz(m2))
        if c1.regs != c2.regs:
            raise ValueError("the two moduli of a pair need the same number of limbs")
        e1, e2 = int(e1), int(e2)
        ebits = max(64, -(-max(e1.bit_length(), e2.bit_length()) // 64) * 64)
        ew = ebits // 8
        width = c1.width
        o1, o2 = ctypes.create_string_buffer(width), ctypes.create_string_buffer(width)
        status = self.lib.smc_powmod_ct_x2(
            c1.regs, ebits, ew,
            c1.modulus, c1.r2, c1.r3, c1.k0, int(b1).to_bytes(2 * width, "little"),
            e1.to_bytes(ew, "little"), o1,
            c2.modulus, c2.r2, c2.r3, c2.k0, int(b2).to_bytes(2 * width, "little"),
            e2.to_bytes(ew, "little"), o2,
        )  # fmt: skip
        if status != 0:
            raise MemoryError("the IFMA kernel could not allocate its tables")
        return mpz(int.from_bytes(o1.raw, "little")), mpz(int.from_bytes(o2.raw, "little"))

    def shape(self, modulus) -> int:
        """Moduli of one shape (limb count) can share a :meth:`secret_powmod_x2` call."""
        return self._regs(mpz(modulus))

    def comb_entry_bytes(self, modulus) -> int:
        """Bytes one entry of a :meth:`comb_table` takes (8 * 8 * regs: 52-bit limbs)."""
        return 64 * self._regs(mpz(modulus))

    def comb_table(self, base, modulus, rows: int, window: int) -> ctypes.Array:
        """A fixed-base comb table of g^(d 2^(w i)) for ``rows`` rows of 2^``window``
        entries, in the Montgomery form the kernel multiplies (a buffer the caller keeps)."""
        m = mpz(modulus)
        const = self._constants(m)
        table = ctypes.create_string_buffer(rows * (1 << window) * self.comb_entry_bytes(m))
        base = int(mpz(base) % m).to_bytes(const.width, "little")
        if self.lib.smc_comb_build(const.regs, const.modulus, const.r2, const.k0, base, rows,
                                   window, table):  # fmt: skip
            raise ValueError("bad arguments to the comb table")
        return table

    def comb_product(self, table, modulus, rows: int, window: int, digits) -> list[mpz]:
        """For each exponent (a row of ``digits``: one base-2^window digit per table row,
        lowest first), the product of its table entries: g^e mod modulus."""
        m = mpz(modulus)
        const = self._constants(m)
        digits = np.ascontiguousarray(digits, dtype=np.uint16)
        count = digits.shape[0]
        if digits.ndim != 2 or digits.shape[1] != rows:
            raise ValueError(f"digits must have {rows} columns")
        out = ctypes.create_string_buffer(max(1, count) * const.width)
        if self.lib.smc_comb_product(const.regs, const.modulus, const.k0, table, rows, window,
                                     count, digits.tobytes(), out):  # fmt: skip
            raise ValueError("bad arguments to the comb product")
        raw, width = out.raw, const.width
        return [
            mpz(int.from_bytes(raw[c * width : (c + 1) * width], "little")) for c in range(count)
        ]

    def montgomery_product(self, a, b, modulus, repeat: int = 1) -> mpz:
        """a * b^repeat / R^repeat mod modulus with R = 2^(416 regs) (tests, benchmark)."""
        m = mpz(modulus)
        const = self._constants(m)
        out = ctypes.create_string_buffer(const.width)
        a_bytes = int(mpz(a) % m).to_bytes(const.width, "little")
        b_bytes = int(mpz(b) % m).to_bytes(const.width, "little")
        if self.lib.smc_amm(const.regs, const.modulus, const.k0, a_bytes, b_bytes, out, repeat):
            raise ValueError("bad arguments to the IFMA multiplication")
        return mpz(int.from_bytes(out.raw, "little")) % m


def _self_test(k: IfmaKernel) -> bool:
    """Fixed multi-exponentiations against gmpy2 at three sizes."""
    for bits in (1024, 2048, 4096):
        m = (mpz(1) << bits) - 159 if bits != 2048 else (mpz(1) << bits) - 1557
        m |= 1
        bases = [mpz(3) ** 700 % m, m - 2, (mpz(1) << (bits - 3)) + 12345]
        rows = [[0, 1, 5], [(1 << 200) + 99, 0, (1 << 63) - 1], [0, 0, 0]]
        want = []
        for row in rows:
            acc = mpz(1)
            for b, w in zip(bases, row):
                acc = acc * gmpy2.powmod(b, w, m) % m
            want.append(acc)
        if k.multiexp_rows(bases, rows, m) != want:
            return False
    return True


def load_kernel(path: str | None = None) -> IfmaKernel | None:
    """The kernel from the built extension (or ``path``) if this CPU has AVX-512 IFMA and
    it passes :func:`_self_test`; else None."""
    path = path or _library_path()
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)
        if not lib.smc_ifma_supported():
            return None
        k = IfmaKernel(lib, path)
        return k if _self_test(k) else None
    except (OSError, AttributeError, ValueError):
        return None


_loaded: IfmaKernel | None | bool = False  # False: not tried in this process
_load_lock = threading.Lock()


def kernel() -> IfmaKernel | None:
    """The process's kernel, or None where it is missing, unsupported or switched off
    (``SMC_HMM_NATIVE=off``; read on every call, so a test or a benchmark can flip it)."""
    global _loaded
    if switch() != "on":
        return None
    loaded = _loaded
    if loaded is not False:  # decided: no lock on the hot path
        return loaded
    with _load_lock:
        if _loaded is False:
            _loaded = load_kernel()
        return _loaded


def _after_fork_in_child() -> None:  # a lock held by another thread at the fork stays held
    global _load_lock
    _load_lock = threading.Lock()
    if isinstance(_loaded, IfmaKernel):
        _loaded._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
