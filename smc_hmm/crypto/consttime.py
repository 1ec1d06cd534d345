"""Constant-time modular exponentiation for exponents derived from a secret key.

Every exponentiation whose exponent (or modulus) comes from a private key runs through
this module: Paillier's CRT decryption (c^(p-1) mod p^2, c^(q-1) mod q^2) and its
constant h_p, DGK's zero test and decryption (c^(v_p) mod p), the partial decryptions of
a shared key (c^(d_i) mod n^2) and the key holder's CRT randomizers.  ``gmpy2.powmod``,
used before, is a sliding-window exponentiation whose sequence of squarings and
multiplications follows the exponent's bits; the two backends here do the same work
whatever the exponent's bits are (``docs/security.md``, "Constant time"):

* :class:`OpenSSLPowmod` (the default): OpenSSL's ``BN_mod_exp_mont_consttime`` (fixed
  window, table read by masked scatter/gather, Montgomery multiplication), called through
  :mod:`ctypes` on the libcrypto that CPython's own :mod:`ssl` module has loaded -- no
  compiler and no new dependency.  One Montgomery context per modulus, kept in a small
  thread-safe cache and shared by every thread (OpenSSL only reads it); one ``BN_CTX``
  per thread.  :mod:`ctypes` releases the GIL for the duration of each call, so two
  threads compute two exponentiations at once (:func:`powmod_jobs`: the two CRT halves
  of a decryption).  The modulus and exponent carry ``BN_FLG_CONSTTIME``, so the
  reduction of a base that is larger than the modulus is OpenSSL's constant-time
  division too.
* :class:`GmpySecPowmod` (the fallback, where OpenSSL's symbols cannot be found):
  ``gmpy2.powmod_sec`` (GMP's ``mpz_powm_sec``), with the same guarantee for the
  exponentiation; it holds the GIL, so its batches run on one thread.

:func:`default_backend` picks the first that loads and passes a self-test against
Python's ``pow``; :func:`backend_by_name` gives either explicitly (the benchmark puts
them side by side).  Results are the same integers as ``pow(base, exponent, modulus)``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import gmpy2
from gmpy2 import mpz

from smc_hmm.crypto import native
from smc_hmm.errors import CryptoError, InvalidInputError

__all__ = [
    "GmpySecPowmod",
    "IfmaPowmod",
    "OpenSSLPowmod",
    "SecretPowmod",
    "backend_by_name",
    "default_backend",
    "load_openssl",
    "powmod_jobs",
    "secret_powmod",
    "secret_powmod_list",
]

OPENSSL = "openssl"
GMPY2 = "gmpy2"
IFMA = "ifma"

#: OpenSSL's BN_FLG_CONSTTIME (bn.h): constant-time paths for this number
_BN_FLG_CONSTTIME = 0x04
#: the IFMA kernel takes moduli of at least this many bits (a 2048-bit key's p^2 and up)
IFMA_MIN_BITS = 1536
#: Montgomery contexts kept (the CRT pair of a key takes two; DGK one per key)
MODULI_KEPT = 16
#: below this much estimated work (seconds) a batch stays on the calling thread: handing
#: work to another thread costs tens of microseconds
_PARALLEL_MIN_SECONDS = 3e-4
#: about the time of one 2048-bit-modulus, 1024-bit-exponent exponentiation (seconds); the
#: cost of others scales as modulus_bits^2 * exponent_bits (only to decide on threads)
_REFERENCE_SECONDS = 1e-3


def _check_modulus(modulus) -> mpz:
    m = mpz(modulus)
    if m < 3 or not m % 2:
        raise InvalidInputError("constant-time exponentiation needs an odd modulus > 2")
    return m


def _check_exponent(exponent) -> mpz:
    e = mpz(exponent)
    if e < 0:
        raise InvalidInputError(
            "constant-time exponentiation takes a non-negative exponent (invert the base first)"
        )
    return e


class SecretPowmod:
    """A constant-time ``base^exponent mod modulus`` (odd modulus, exponent >= 0)."""

    name = "abstract"
    #: whether its calls run without the GIL (then :func:`powmod_jobs` uses threads)
    releases_gil = False

    def powmod_list(self, bases: Sequence, exponent, modulus) -> list[mpz]:
        """``[pow(b, exponent, modulus) for b in bases]``; a base may be any non-negative
        integer (it is reduced modulo ``modulus``) or a negative one (reduced first)."""
        raise NotImplementedError

    def powmod(self, base, exponent, modulus) -> mpz:
        return self.powmod_list([base], exponent, modulus)[0]

    def describe(self) -> str:
        return self.name

    def __reduce__(self):  # a key carrying a backend may be pickled to a local process
        return (backend_by_name, (self.key,))

    key = "abstract"


class GmpySecPowmod(SecretPowmod):
    """``gmpy2.powmod_sec``: GMP's ``mpz_powm_sec`` (side-channel silent exponentiation)."""

    name = "gmpy2.powmod_sec"
    key = GMPY2
    releases_gil = False

    def powmod_list(self, bases, exponent, modulus) -> list[mpz]:
        m, e = _check_modulus(modulus), _check_exponent(exponent)
        if not e:
            return [mpz(1) for _ in bases]
        return [gmpy2.powmod_sec(mpz(b) % m, e, m) for b in bases]


# -- OpenSSL through ctypes ------------------------------------------------------------------

_VOIDP = ctypes.c_void_p
#: name: (result type, argument types) of every symbol the backend calls
_PROTOTYPES = {
    "BN_new": (_VOIDP, []),
    "BN_clear_free": (None, [_VOIDP]),
    "BN_bin2bn": (_VOIDP, [ctypes.c_char_p, ctypes.c_int, _VOIDP]),
    "BN_bn2binpad": (ctypes.c_int, [_VOIDP, ctypes.c_char_p, ctypes.c_int]),
    "BN_set_flags": (None, [_VOIDP, ctypes.c_int]),
    "BN_CTX_new": (_VOIDP, []),
    "BN_CTX_free": (None, [_VOIDP]),
    "BN_MONT_CTX_new": (_VOIDP, []),
    "BN_MONT_CTX_free": (None, [_VOIDP]),
    "BN_MONT_CTX_set": (ctypes.c_int, [_VOIDP, _VOIDP, _VOIDP]),
    "BN_mod_exp_mont_consttime": (
        ctypes.c_int,
        [_VOIDP, _VOIDP, _VOIDP, _VOIDP, _VOIDP, _VOIDP],  # rr, a, p, m, ctx, mont
    ),
    "OpenSSL_version_num": (ctypes.c_ulong, []),
}

if hasattr(mpz, "to_bytes"):  # gmpy2 >= 2.2

    def _to_bytes(x) -> bytes:
        return x.to_bytes((x.bit_length() + 7) // 8 or 1, "big")

    def _from_bytes(data: bytes) -> mpz:
        return mpz.from_bytes(data, "big")

else:  # pragma: no cover - gmpy2 2.1

    def _to_bytes(x) -> bytes:
        x = int(x)
        return x.to_bytes((x.bit_length() + 7) // 8 or 1, "big")

    def _from_bytes(data: bytes) -> mpz:
        return mpz(int.from_bytes(data, "big"))


class _Montgomery:
    """A modulus as an OpenSSL BIGNUM (flagged constant-time) with its Montgomery
    context.  Read-only once built, so threads share it; freed (and cleared) when the
    last reference goes -- a cache eviction never frees one that a call is using."""

    __slots__ = ("lib", "bn", "mont", "width")

    def __init__(self, lib, modulus: mpz, ctx):
        self.lib, self.bn, self.mont = lib, None, None
        self.width = (modulus.bit_length() + 7) // 8
        self.bn = _new_bn(lib, modulus)
        self.mont = lib.BN_MONT_CTX_new()
        if not self.mont or lib.BN_MONT_CTX_set(self.mont, self.bn, ctx) != 1:
            raise CryptoError("OpenSSL could not set up a Montgomery context")

    def __del__(self):
        lib = self.lib
        if self.mont:
            lib.BN_MONT_CTX_free(self.mont)
            self.mont = None
        if self.bn:
            lib.BN_clear_free(self.bn)
            self.bn = None


def _new_bn(lib, value) -> int:
    data = _to_bytes(mpz(value))
    bn = lib.BN_bin2bn(data, len(data), None)
    if not bn:
        raise CryptoError("OpenSSL could not allocate a BIGNUM")
    lib.BN_set_flags(bn, _BN_FLG_CONSTTIME)
    return bn


class _ThreadState:
    """One thread's BN_CTX and scratch numbers (a BN_CTX must not be shared)."""

    __slots__ = ("lib", "ctx", "base", "result", "buffers")

    def __init__(self, lib):
        self.lib = lib
        self.ctx = lib.BN_CTX_new()
        self.base = lib.BN_new()
        self.result = lib.BN_new()
        if not (self.ctx and self.base and self.result):
            raise CryptoError("OpenSSL could not allocate a BN_CTX")
        self.buffers: dict[int, ctypes.Array] = {}

    def buffer(self, width: int):
        buf = self.buffers.get(width)
        if buf is None:
            buf = self.buffers[width] = ctypes.create_string_buffer(width)
        return buf

    def __del__(self):
        lib = self.lib
        for name in ("base", "result"):
            bn = getattr(self, name, None)
            if bn:
                lib.BN_clear_free(bn)
        if getattr(self, "ctx", None):
            lib.BN_CTX_free(self.ctx)


class OpenSSLPowmod(SecretPowmod):
    """``BN_mod_exp_mont_consttime`` of the libcrypto at ``path`` (see the module
    docstring); build it with :func:`load_openssl`."""

    key = OPENSSL
    releases_gil = True

    def __init__(self, lib: ctypes.CDLL, path: str):
        # the exponentiation through ``lib`` (a CDLL: the GIL is released for the call);
        # the conversions and set-up, microseconds each, through a PyDLL of the same
        # library, which keeps the GIL: a thread then waits for the GIL once per
        # exponentiation, not once per call, while other threads run Python code
        quick = ctypes.PyDLL(path)
        for handle in (lib, quick):
            for symbol, (restype, argtypes) in _PROTOTYPES.items():
                function = getattr(handle, symbol)
                function.restype, function.argtypes = restype, argtypes
        self.lib, self.path = quick, path
        self._exp_mod = lib.BN_mod_exp_mont_consttime
        self.version = int(quick.OpenSSL_version_num())
        self.name = "OpenSSL BN_mod_exp_mont_consttime"
        self._moduli: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()

    def describe(self) -> str:
        return f"{self.name} ({_image_of(self._exp_mod) or self.path})"

    def _state(self) -> _ThreadState:
        state = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = _ThreadState(self.lib)
        return state

    def _montgomery(self, modulus: mpz, ctx) -> _Montgomery:
        key = int(modulus)
        with self._lock:
            entry = self._moduli.get(key)
            if entry is None:
                entry = self._moduli[key] = _Montgomery(self.lib, modulus, ctx)
                while len(self._moduli) > MODULI_KEPT:
                    self._moduli.popitem(last=False)
            self._moduli.move_to_end(key)
            return entry

    def powmod_list(self, bases, exponent, modulus) -> list[mpz]:
        m, e = _check_modulus(modulus), _check_exponent(exponent)
        lib, state = self.lib, self._state()
        mont = self._montgomery(m, state.ctx)
        width, buf = mont.width, state.buffer(mont.width)
        base, result, ctx = state.base, state.result, state.ctx
        exp_bn = _new_bn(lib, e)
        exp_mod = self._exp_mod
        out = []
        try:
            for b in bases:
                b = mpz(b)
                if b < 0:
                    b %= m
                data = _to_bytes(b)
                lib.BN_bin2bn(data, len(data), base)  # reuses the thread's scratch number
                lib.BN_set_flags(base, _BN_FLG_CONSTTIME)
                if exp_mod(result, base, exp_bn, mont.bn, ctx, mont.mont) != 1:
                    raise CryptoError("OpenSSL's BN_mod_exp_mont_consttime failed")
                lib.BN_bn2binpad(result, buf, width)
                out.append(_from_bytes(buf.raw))
        finally:
            lib.BN_clear_free(exp_bn)
        return out


# -- the native kernel ----------------------------------------------------------------------


class IfmaPowmod(SecretPowmod):
    """The native kernel's constant-time exponentiation (:mod:`smc_hmm.crypto.native`,
    ``_ifma.c``): a fixed 5-bit window over the exponent's length rounded up to 64 bits,
    Montgomery multiplications on AVX-512 IFMA with no branch on a value, every table
    entry read at every step (masked), and a base's Montgomery form computed from its two
    halves, so no step divides by the secret modulus.  Two exponentiations run
    interleaved in one call, for about the price of one: :meth:`powmod_jobs` pairs a CRT
    decryption's p and q halves.  Where the kernel does not take a modulus or a base
    (larger than it was built for, or a base above R^2), ``fallback`` does, with the same
    guarantee.  Moduli below :data:`IFMA_MIN_BITS` go to ``fallback`` too: there
    OpenSSL was faster in ``smc-hmm bench crypto --key-bits 1024`` (151 against 164 us a
    CRT decryption)."""

    key = IFMA
    releases_gil = True

    def __init__(self, kernel, fallback: SecretPowmod):
        self.kernel, self.fallback = kernel, fallback
        self.name = "AVX-512 IFMA constant-time kernel"

    def describe(self) -> str:
        return f"{self.name} ({self.kernel.path}; else {self.fallback.describe()})"

    def _takes(self, base: mpz, modulus: mpz) -> bool:
        return (
            modulus.bit_length() >= IFMA_MIN_BITS
            and self.kernel.fits(modulus)
            and base < self.kernel.secret_bound(modulus)
        )

    def _run_pairs(self, items: list) -> list[mpz]:
        """``[pow(b, e, m) for (b, e, m) in items]``, neighbours of one modulus size paired
        into one call."""
        out: list = [None] * len(items)
        shapes: dict[int, list[int]] = {}
        for i, (b, e, m) in enumerate(items):
            if self._takes(b, m):
                shapes.setdefault(self.kernel.shape(m), []).append(i)
            else:
                out[i] = self.fallback.powmod_list([b], e, m)[0]
        for index in shapes.values():
            for k in range(0, len(index), 2):
                i = index[k]
                j = index[k + 1] if k + 1 < len(index) else i
                out[i], out[j] = self.kernel.secret_powmod_x2(items[i], items[j])
        return out

    def powmod_list(self, bases, exponent, modulus) -> list[mpz]:
        m, e = _check_modulus(modulus), _check_exponent(exponent)
        items = [(mpz(b) % m if b < 0 else mpz(b), e, m) for b in bases]
        return self._run_pairs(items)

    def powmod_jobs(self, jobs, threads: int) -> list[list[mpz]]:
        """:func:`powmod_jobs` with the jobs' items interleaved (p_0, q_0, p_1, ...) so
        that each call computes a ciphertext's two halves, the pairs split over
        ``threads`` threads (the caller's among them)."""
        checked = []
        for bases, exponent, modulus in jobs:
            m, e = _check_modulus(modulus), _check_exponent(exponent)
            checked.append([(mpz(b) % m if b < 0 else mpz(b), e, m) for b in bases])
        order = [(j, i) for i in range(max(map(len, checked), default=0))
                 for j in range(len(checked)) if i < len(checked[j])]  # fmt: skip
        items = [checked[j][i] for j, i in order]
        pairs = -(-len(items) // 2)
        parts = max(1, min(threads, pairs))
        if parts == 1 or _estimated_seconds(jobs) < _PARALLEL_MIN_SECONDS:
            values = self._run_pairs(items)
        else:
            size = 2 * -(-pairs // parts)
            slices = [items[k : k + size] for k in range(0, len(items), size)]
            futures = [_executor().submit(self._run_pairs, part) for part in slices[1:]]
            values = self._run_pairs(slices[0])
            for future in futures:
                values += future.result()
        results = [[None] * len(c) for c in checked]
        for (j, i), v in zip(order, values):
            results[j][i] = v
        return results


# -- finding the ssl module's libcrypto ---------------------------------------------------------


class _DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", _VOIDP), ("sname", ctypes.c_char_p),
                ("saddr", _VOIDP)]  # fmt: skip


def _image_of(function) -> str | None:
    """The file a loaded function lives in (``dladdr``; None where there is none)."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes, dladdr.restype = [_VOIDP, ctypes.POINTER(_DlInfo)], ctypes.c_int
        info = _DlInfo()
        if dladdr(ctypes.cast(function, _VOIDP), ctypes.byref(info)) and info.fname:
            return os.fsdecode(info.fname)
    except (OSError, AttributeError, TypeError):
        pass
    return None


def _ssl_extension() -> str | None:
    try:
        import _ssl
    except ImportError:  # a Python built without ssl
        return None
    return getattr(_ssl, "__file__", None)


def _mapped_libcrypto() -> list[str]:
    """Paths of libcrypto images mapped into this process (Linux: the ssl module's)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            fields = [line.split(None, 5) for line in maps]
            paths = {f[5].strip() for f in fields if len(f) == 6}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith("libcrypto"))


def libcrypto_candidates() -> list[str]:
    """Where the libcrypto of CPython's ``ssl`` module may be, best first: the ``_ssl``
    extension itself (its symbol lookup searches the libraries it is linked against, or
    finds a statically linked copy), the libcrypto mapped into the process, the one
    beside ``_ssl`` (Windows and macOS installers ship it there), and the system's."""
    out = []
    ext = _ssl_extension()
    if ext:
        out.append(ext)
    out += _mapped_libcrypto()
    if ext:
        folder = os.path.dirname(ext)
        for pattern in ("libcrypto*.dll", "libcrypto*.dylib", "libcrypto*.so*"):
            for where in (folder, os.path.join(folder, os.pardir, "lib")):
                out += sorted(glob.glob(os.path.join(where, pattern)))
    system = ctypes.util.find_library("crypto") or ctypes.util.find_library("libcrypto")
    if system:
        out.append(system)
    seen: set[str] = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def _ssl_version() -> int | None:
    try:
        import ssl
    except ImportError:
        return None
    return int(ssl.OPENSSL_VERSION_NUMBER)


def load_openssl(candidates: Sequence[str] | None = None) -> OpenSSLPowmod | None:
    """The OpenSSL backend on the first candidate library that has every symbol, is the
    OpenSSL version the ``ssl`` module reports, and passes :func:`_self_test`; None if
    none does (the caller then falls back to :class:`GmpySecPowmod`)."""
    wanted = _ssl_version()
    for path in libcrypto_candidates() if candidates is None else candidates:
        try:
            lib = ctypes.CDLL(path)
            if not all(hasattr(lib, symbol) for symbol in _PROTOTYPES):
                continue
            backend = OpenSSLPowmod(lib, path)
            if wanted is not None and backend.version != wanted:
                continue  # another libcrypto than the ssl module's
            if _self_test(backend):
                return backend
        except (OSError, AttributeError, CryptoError, ValueError, TypeError):
            continue
    return None


def _self_test(backend: SecretPowmod) -> bool:
    """A few fixed exponentiations against ``pow`` (a mismatched library fails here)."""
    m = (mpz(1) << 521) - 1  # odd (a Mersenne prime)
    cases = [(mpz(3), mpz(0)), (mpz(2), mpz(1)), (m + 5, (mpz(1) << 300) + 12345)]
    cases.append((mpz(0xDEADBEEF) << 400, m - 2))
    return all(backend.powmod_list([b], e, m) == [pow(b, e, m)] for b, e in cases)


# -- choosing a backend ------------------------------------------------------------------------

_default: SecretPowmod | None = None
_openssl: OpenSSLPowmod | None | bool = False  # False: not tried yet
_ifma: IfmaPowmod | None | bool = False
_choose_lock = threading.Lock()
GMPY2_SEC = GmpySecPowmod()


def _openssl_backend() -> OpenSSLPowmod | None:
    global _openssl
    with _choose_lock:
        if _openssl is False:
            _openssl = load_openssl()
        return _openssl


def _ifma_backend() -> IfmaPowmod | None:
    global _ifma
    with _choose_lock:
        if _ifma is False:
            kernel = native.kernel()
            _ifma = None if kernel is None else IfmaPowmod(kernel, _openssl or GMPY2_SEC)
        return _ifma


def default_backend() -> SecretPowmod:
    """The native kernel where it runs (:mod:`smc_hmm.crypto.native`, not switched off by
    ``SMC_HMM_NATIVE=off``), else OpenSSL's constant-time exponentiation if this Python's
    ssl module brings it, else ``gmpy2.powmod_sec`` (decided once per process)."""
    global _default
    if _default is None:
        openssl = _openssl_backend()
        _default = _ifma_backend() or openssl or GMPY2_SEC
    return _default


def backend_by_name(name: str) -> SecretPowmod:
    """``"ifma"``, ``"openssl"`` or ``"gmpy2"`` (:class:`~smc_hmm.errors.CryptoError`
    if the kernel or OpenSSL's symbols are missing here)."""
    if name == GMPY2:
        return GMPY2_SEC
    if name == IFMA:
        _openssl_backend()  # the kernel's fallback
        backend = _ifma_backend()
        if backend is None:
            raise CryptoError("the IFMA kernel is not built here or this CPU lacks IFMA")
        return backend
    if name == OPENSSL:
        backend = _openssl_backend()
        if backend is None:
            raise CryptoError("OpenSSL's BN_mod_exp_mont_consttime is not available here")
        return backend
    raise InvalidInputError(f"no constant-time backend {name!r} (ifma, openssl or gmpy2)")


def secret_powmod_list(bases, exponent, modulus, backend: SecretPowmod | None = None):
    """``[pow(b, exponent, modulus) for b in bases]`` in constant time in the exponent."""
    return (backend or default_backend()).powmod_list(bases, exponent, modulus)


def secret_powmod(base, exponent, modulus, backend: SecretPowmod | None = None) -> mpz:
    """``pow(base, exponent, modulus)`` in constant time in the exponent."""
    return (backend or default_backend()).powmod_list([base], exponent, modulus)[0]


# -- several batches over threads ---------------------------------------------------------------

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """The process's pool of exponentiation threads, all started on first use: a
    ``ThreadPoolExecutor`` otherwise adds a thread the first time two batches overlap, so a
    server's thread count would grow under load, long after it started."""
    global _pool
    with _pool_lock:
        if _pool is None:
            size = max(2, os.cpu_count() or 2)
            pool = ThreadPoolExecutor(size, thread_name_prefix="secret-powmod")
            together = threading.Barrier(size)  # each start-up task holds a thread
            for started in [pool.submit(together.wait) for _ in range(size)]:
                started.result()
            _pool = pool
        return _pool


def _after_fork_in_child() -> None:  # threads do not survive a fork: start afresh
    global _pool, _pool_lock, _choose_lock
    _pool, _pool_lock, _choose_lock = None, threading.Lock(), threading.Lock()
    if isinstance(_openssl, OpenSSLPowmod):
        _openssl._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _estimated_seconds(jobs) -> float:
    total = 0.0
    for bases, exponent, modulus in jobs:
        size = (mpz(modulus).bit_length() / 2048) ** 2 * (mpz(exponent).bit_length() / 1024)
        total += len(bases) * size
    return total * _REFERENCE_SECONDS


def powmod_jobs(
    jobs: Sequence[tuple[Sequence, object, object]],
    threads: int = 2,
    backend: SecretPowmod | None = None,
) -> list[list[mpz]]:
    """Each job ``(bases, exponent, modulus)`` computed as :func:`secret_powmod_list`,
    the whole split evenly over up to ``threads`` threads (the caller's among them) when
    the backend releases the GIL and the work is worth it.  For a CRT decryption the two
    jobs are the p and q halves: one ciphertext's halves then run at once."""
    backend = backend or default_backend()
    jobs = [(list(bases), exponent, modulus) for bases, exponent, modulus in jobs]
    if isinstance(backend, IfmaPowmod):
        return backend.powmod_jobs(jobs, threads)
    items = [(j, i) for j, (bases, _, _) in enumerate(jobs) for i in range(len(bases))]
    if (
        threads <= 1
        or len(items) < 2
        or not backend.releases_gil
        or _estimated_seconds(jobs) < _PARALLEL_MIN_SECONDS
    ):
        return [backend.powmod_list(b, e, m) for b, e, m in jobs]
    parts = min(threads, len(items))
    size = -(-len(items) // parts)
    slices = [items[k : k + size] for k in range(0, len(items), size)]

    def run(part):
        out = []
        for j in dict.fromkeys(j for j, _ in part):  # each job's items in this slice, in order
            bases, exponent, modulus = jobs[j]
            idx = [i for jj, i in part if jj == j]
            values = backend.powmod_list([bases[i] for i in idx], exponent, modulus)
            out += [(j, i, v) for i, v in zip(idx, values)]
        return out

    pool = _executor()
    futures = [pool.submit(run, part) for part in slices[1:]]
    results = [[None] * len(bases) for bases, _, _ in jobs]
    for part in [run(slices[0])] + [f.result() for f in futures]:
        for j, i, v in part:
            results[j][i] = v
    return results
