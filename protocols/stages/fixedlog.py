"""Exact fixed-point logarithms and exponentials of big integers (256-bit MPFR).

Every log-domain stage reads and writes log-values as integers at a public scale f; these
two functions are the only conversions, so nothing is lost to float64 (thesis 003,
4.2.1, "fixed precision": the thesis's 0.5% error came from doing this in doubles).
"""

from __future__ import annotations

import gmpy2
from gmpy2 import mpz

from smc_hmm.errors import InvalidInputError

#: 256-bit MPFR: exact fixed-point logs and exps for scales up to ~150 bits
_HP = gmpy2.context(precision=256)


def round_mpfr(x) -> int:
    """Round an mpfr to the nearest integer, exactly."""
    num, den = x.as_integer_ratio()
    return int((2 * num + den) // (2 * den))


def log_fixed(value: int, scale: int) -> int:
    """round(ln(value) * 2^scale) for a positive integer ``value`` (any size)."""
    if value <= 0:
        raise InvalidInputError("log_fixed needs a positive integer")
    return round_mpfr(_HP.mul(_HP.log(mpz(value)), mpz(1) << scale))


def exp_fixed(exponent: int, scale: int, out_scale: int) -> int:
    """round(2^out_scale * exp(exponent / 2^scale)) for exponent <= 0 (0 when it underflows).

    The same operations whatever the exponent: the callers' exponents are secret (a
    component's distance behind the best one), so there is no early return for the ones
    that round to 0.  An exponent below -(out_scale + 2) nats is raised to that floor
    first (its exponential, at most e^-2 < 1/2 after scaling, still rounds to 0) and then
    divided, exponentiated, scaled and rounded like any other, so that MPFR works on a
    number of the usual size."""
    if exponent > 0:
        raise InvalidInputError("exp_fixed takes non-positive exponents")
    exponent = max(exponent, -((out_scale + 2) << scale))
    x = _HP.div(mpz(exponent), mpz(1) << scale)
    return round_mpfr(_HP.mul(_HP.exp(x), mpz(1) << out_scale))
