"""The optional garbling kernel: half gates, IKNP's transposition and the KOS sum on AES-NI.

A garbled AND gate costs four fixed-key AES calls to the garbler and two to the
evaluator; the numpy path (:mod:`smc_hmm.gc.garble`) spends about 0.4 us a gate on them
and some 35 us on the array calls of every layer.  ``_gcnative.c`` runs the same
constructions gate by gate in C with AES-NI and carry-less multiplication, so that a
gate costs tens of nanoseconds and a layer nothing: the depth of a circuit stops
mattering.  Its outputs equal the numpy path's bit for bit (``tests/gc``).  Written by
hand because no maintained library offers garbling to Python (``docs/garbled.md``).

Built at install where a C compiler is present (``setup.py``; a failed build is
skipped), used where the CPU has AES-NI, SSE4.1 and PCLMULQDQ and a self-test against
the numpy path passes; ``SMC_HMM_NATIVE=off`` turns it off (:func:`smc_hmm.crypto.native.
switch`; ``noifma`` keeps it).  Not constant time in anything secret: gates run in the
public order of the circuit, and the branches on point-and-permute bits select between
values the party may see.  :mod:`ctypes` releases the GIL for each call.
"""

from __future__ import annotations

import ctypes
import importlib.util
import threading

import numpy as np

from smc_hmm.crypto.native import switch
from smc_hmm.gc.aes import FIXED_KEY, tccr_hash_numpy

__all__ = ["GcKernel", "gc_kernel", "load_gc_kernel"]

_P, _I64, _U64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int
_PROTOTYPES = {
    "smc_gc_supported": (_INT, []),
    "smc_gc_hash": (_INT, [_P, _I64, _P, _P, _P]),
    "smc_gc_garble": (_INT, [_P, _I64, _P, _P, _P, _P, _P, _P, _P, _U64, _P]),
    "smc_gc_evaluate": (_INT, [_P, _I64, _P, _P, _P, _P, _P, _P, _U64, _P]),
    "smc_gf128_inner": (_INT, [_I64, _P, _P, _P]),
    "smc_gc_transpose": (_INT, [_I64, _P, _P]),
}


def _ptr(array: np.ndarray) -> int:
    return array.ctypes.data


def _blocks(array, what: str) -> np.ndarray:
    out = np.ascontiguousarray(array, dtype="<u8")
    if out.ndim < 1 or out.shape[-1] != 2:
        raise ValueError(f"{what}: blocks are (..., 2) uint64")
    return out


class GcKernel:
    """The loaded library (build it with :func:`load_gc_kernel`)."""

    name = "AES-NI garbling kernel"

    def __init__(self, lib: ctypes.CDLL, path: str):
        for symbol, (restype, argtypes) in _PROTOTYPES.items():
            function = getattr(lib, symbol)
            function.restype, function.argtypes = restype, argtypes
        self.lib, self.path = lib, path
        self._key = ctypes.create_string_buffer(FIXED_KEY, 16)

    def describe(self) -> str:
        return f"{self.name} ({self.path})"

    def hash(self, blocks: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
        """:func:`smc_hmm.gc.hashing.tccr_hash` of ``(n, 2)`` blocks under ``(n,)`` tweaks."""
        x = _blocks(blocks, "hash").reshape(-1, 2)
        t = np.ascontiguousarray(np.broadcast_to(tweaks, (len(x),)), dtype=np.uint64)
        out = np.empty_like(x)
        self.lib.smc_gc_hash(self._key, len(x), _ptr(x), _ptr(t), _ptr(out))
        return out.reshape(np.shape(blocks))

    def garble(self, program, w0: np.ndarray, delta: np.ndarray, tweak_base: int, tables):
        """Garble ``program`` (:attr:`CompiledCircuit.program`) in place on the 0-labels
        ``w0`` (inputs set), writing the AND tables ``(and_gates, 2, 2)``."""
        kind, a, b, out, index = program
        d = _blocks(delta, "delta")
        status = self.lib.smc_gc_garble(
            self._key, len(kind), _ptr(kind), _ptr(a), _ptr(b), _ptr(out), _ptr(index),
            _ptr(w0), _ptr(d), int(tweak_base), _ptr(tables),
        )  # fmt: skip
        if status:
            raise ValueError("the garbling kernel met an unknown gate kind")

    def evaluate(self, program, w: np.ndarray, tweak_base: int, tables: np.ndarray) -> None:
        """Evaluate ``program`` in place on the active labels ``w`` (inputs set)."""
        kind, a, b, out, index = program
        t = _blocks(tables, "tables")
        status = self.lib.smc_gc_evaluate(
            self._key, len(kind), _ptr(kind), _ptr(a), _ptr(b), _ptr(out), _ptr(index),
            _ptr(w), int(tweak_base), _ptr(t),
        )  # fmt: skip
        if status:
            raise ValueError("the garbling kernel met an unknown gate kind")

    def gf128_inner(self, chi: np.ndarray, rows: np.ndarray) -> int:
        """sum_j chi_j rows_j in GF(2^128) (:func:`smc_hmm.gc.ot.gf128_inner`)."""
        c, r = _blocks(chi, "chi"), _blocks(rows, "rows")
        out = np.zeros(2, np.uint64)
        self.lib.smc_gf128_inner(len(c), _ptr(c), _ptr(r), _ptr(out))
        return int(out[0]) | int(out[1]) << 64

    def transpose(self, columns: np.ndarray) -> np.ndarray:
        """IKNP's ``(128, nbytes)`` column bits as ``(8 nbytes, 2)`` row blocks."""
        cols = np.ascontiguousarray(columns, dtype=np.uint8)
        out = np.empty((8 * cols.shape[1], 2), np.uint64)
        self.lib.smc_gc_transpose(cols.shape[1], _ptr(cols), _ptr(out))
        return out


def _library_path() -> str | None:
    try:
        spec = importlib.util.find_spec("smc_hmm.gc._gcnative")
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None


def _self_test(k: GcKernel) -> bool:
    """The kernel's hash against OpenSSL's AES through the numpy path."""
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, 2**63, size=(9, 2), dtype=np.uint64)
    tweaks = rng.integers(0, 2**63, size=9, dtype=np.uint64)
    return bool((k.hash(blocks, tweaks) == tccr_hash_numpy(blocks, tweaks)).all())


def load_gc_kernel(path: str | None = None) -> GcKernel | None:
    """The kernel from the built extension (or ``path``) if this CPU runs it and it passes
    its self-test; else None."""
    path = path or _library_path()
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)
        if not lib.smc_gc_supported():
            return None
        k = GcKernel(lib, path)
        return k if _self_test(k) else None
    except (OSError, AttributeError, ValueError):
        return None


_loaded: GcKernel | None | bool = False  # False: not tried in this process
_load_lock = threading.Lock()


def gc_kernel() -> GcKernel | None:
    """The process's garbling kernel, or None where it is missing, unsupported or switched
    off (``SMC_HMM_NATIVE=off``, read on every call)."""
    global _loaded
    if switch() == "off":
        return None
    loaded = _loaded
    if loaded is not False:
        return loaded
    with _load_lock:
        if _loaded is False:
            _loaded = load_gc_kernel()
        return _loaded
