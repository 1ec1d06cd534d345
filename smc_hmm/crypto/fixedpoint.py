"""Fixed-point encoding with one explicit binary scale per quantity.

A real x is carried as the integer round(x * 2^s) for a scale s (fractional
bits) chosen per quantity, never phe's per-value floating exponent (mismatched
exponents cost a hidden rescaling, and repeated scalar products overflow, a known
phe limitation, python-paillier GitHub #110; thesis 4.2.1 "Practical issues" used a
decimal 10^6 scale and truncation).  Products add scales; sums need equal scales.  Every encoding
reports a *bound* (max |integer|) so that arithmetic can be checked against the
plaintext space before it is computed.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from smc_hmm.errors import InvalidInputError


def check_scale(scale) -> int:
    if not isinstance(scale, Integral) or isinstance(scale, bool) or not 0 <= scale <= 4096:
        raise InvalidInputError(
            f"scale must be an integer number of bits in [0, 4096], got {_plain(scale)!r}"
        )
    return int(scale)


def _plain(value):
    """A numpy scalar as the Python value, so messages never show ``np.int64(5000)``."""
    return value.item() if isinstance(value, np.generic) else value


def as_object_array(values) -> np.ndarray:
    """An ndarray of Python ints (dtype object) from ints, int arrays or object arrays."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.dtype == object:
        flat = arr.reshape(-1)
        out = np.empty(flat.shape, dtype=object)
        for i, v in enumerate(flat):
            if type(v) is int:  # the common case, without the slower ABC check below
                out[i] = v
                continue
            if isinstance(v, bool) or not isinstance(v, Integral):
                if hasattr(v, "__int__") and type(v).__name__ == "mpz":
                    out[i] = int(v)
                    continue
                raise InvalidInputError(f"expected integers, got {type(v).__name__}")
            out[i] = int(v)
        return out.reshape(arr.shape)
    if arr.dtype.kind in "iu":
        return arr.astype(object)
    if arr.dtype.kind == "b":
        raise InvalidInputError("booleans are not valid plaintext integers")
    raise InvalidInputError(f"expected an integer array, got dtype {arr.dtype}")


def encode(values, scale: int) -> tuple[np.ndarray, int]:
    """Encode reals or ints at ``scale``: (object array of ints, bound = max |int|).

    Floats are rounded to nearest; NaN and infinities raise InvalidInputError.
    Integer input is encoded exactly (multiplied by 2^scale).
    """
    scale = check_scale(scale)
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError("cannot encode NaN or infinity")
        flat = arr.reshape(-1)
        # exact: math.ldexp then round on Python floats avoids int64 overflow
        ints = np.empty(flat.shape, dtype=object)
        for i, x in enumerate(flat.tolist()):
            ints[i] = ldexp_int(x, scale)
        ints = ints.reshape(arr.shape)
    elif arr.dtype.kind in "iuO":
        ints = as_object_array(arr)
        if scale:
            ints = ints * (1 << scale)
    else:
        raise InvalidInputError(f"cannot encode values of dtype {arr.dtype}")
    return ints, max_abs(ints)


def ldexp_int(x: float, exponent: int) -> int:
    """round(x * 2^exponent) computed exactly in integers (no float overflow)."""
    mantissa, e = math.frexp(x)
    m = int(mantissa * (1 << 53))  # exact: x = m * 2^(e - 53)
    shift = e - 53 + exponent
    if shift >= 0:
        return m << shift
    if m >= 0:
        return (m + (1 << (-shift - 1))) >> -shift
    return -((-m + (1 << (-shift - 1))) >> -shift)


def decode(ints, scale: int) -> np.ndarray:
    """Integers at ``scale`` back to float64 (correctly rounded)."""
    arr = np.asarray(ints, dtype=object)
    flat = [_int_to_float(int(v), scale) for v in arr.reshape(-1)]
    return np.array(flat, dtype=np.float64).reshape(arr.shape)


def _int_to_float(v: int, scale: int) -> float:
    # int / 2^scale is correctly rounded for huge ints too (true division of ints)
    return v / (1 << scale) if scale else float(v)


def max_abs(ints: np.ndarray) -> int:
    return max((abs(int(v)) for v in np.asarray(ints, dtype=object).reshape(-1)), default=0)
