"""The one blinding rule of every log-domain stage (``docs/security.md``, "Blinds").

Every log-value Alice decrypts carries an additive blind that Bob draws here, and every
coefficient Bob folds into a LOGSUM carries one too.  The rule:

* A blind is a sum of :data:`BLIND_TERMS` independent uniform integers, each on
  [0, top / BLIND_TERMS) at the value's own fixed-point scale: no floats, no rounded logs
  of integers, no products of structured numbers.  Its support is [0, R) nats (R the
  public ``blind_nats``) and its density is a quadratic spline (Irwin-Hall of order 3)
  that falls smoothly to zero at both ends.
* Why smooth: a uniform blind has sharp edges, so a client who repeats an input k times
  brackets the hidden value between the extremes of what she saw, to about R / k nats.
  A blind whose density vanishes smoothly at its ends has finite Fisher information
  I = :func:`fisher_information` (R) = 18 sqrt(3) ln(2 + sqrt(3)) / R^2
  ~ 41.06 / R^2:
  no unbiased estimator beats 1 / sqrt(k I) ~ R / (6.41 sqrt(k)) nats after k samples
  (Cramer-Rao; the maximum-likelihood estimate reaches it as k grows).  That is the
  per-value leakage formula (:mod:`smc_hmm.leakage`) the stages state and
  ``tests/protocols/test_stages.py`` measures with an estimator attack.
* Why fine-grained: a blind folded into a coefficient Bob rounds (LOGSUM) is drawn at
  :data:`FINE_BITS` fractional bits, far below anything Alice can resolve, so the
  rounded coefficient's distribution depends on Bob's secret only through the position
  of the blind's window, never through its arithmetic.

Hand-written: no library draws Irwin-Hall integers; ``secrets``-backed :class:`Rng`
supplies the uniform draws.
"""

from __future__ import annotations

import math

import numpy as np

from smc_hmm.crypto import Rng
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.errors import InvalidInputError
from smc_hmm.leakage import (  # the law of these blinds, shared with serve's budget
    FISHER_CONSTANT,
    estimation_floor,
    fisher_information,
    samples_for_error,
)

__all__ = [
    "BLIND_TERMS",
    "FINE_BITS",
    "FISHER_CONSTANT",
    "blind_top",
    "estimation_floor",
    "fisher_information",
    "log_blinds",
    "samples_for_error",
    "smooth_blind",
]

#: uniform terms summed into one blind: 3 gives a density with a continuous derivative,
#: so finite Fisher information (2 would give a triangle, whose information diverges)
BLIND_TERMS = 3
#: fractional bits of the blinds folded into LOGSUM coefficients: finer than the
#: ~2^-190 relative precision at which Alice can read a coefficient, with sigma to spare
FINE_BITS = 256


def blind_top(nats: float, scale: int) -> int:
    """The exclusive top of a blind of ``nats`` at ``scale`` bits: a multiple of
    :data:`BLIND_TERMS` so that every term is uniform on the same integer range."""
    if not (isinstance(nats, int | float) and math.isfinite(nats) and nats > 0):
        raise InvalidInputError(f"a blind's width must be a positive number of nats, not {nats}")
    per = ldexp_int(float(nats), scale) // BLIND_TERMS
    return per * BLIND_TERMS


def smooth_blind(rng: Rng, top: int) -> int:
    """One blind on [0, top): the sum of :data:`BLIND_TERMS` uniform integers."""
    per = top // BLIND_TERMS
    return sum(rng.randbelow(per) for _ in range(BLIND_TERMS))


def log_blinds(rng: Rng, count: int, nats: float, scale: int) -> np.ndarray:
    """``count`` additive blinds of log-values at ``scale`` bits, each within [0, nats)."""
    top = blind_top(nats, scale)
    return np.array([smooth_blind(rng, top) for _ in range(count)], dtype=object)


def _irwin_hall_fisher() -> float:
    """Fisher information of Irwin-Hall(3) on [0, 3] for a location shift (numerically):
    int f'^2 / f over the three pieces of the quadratic spline."""
    from scipy.integrate import quad

    def ratio(x):
        if x < 1:
            return 2.0  # f = x^2 / 2, f' = x
        if x < 2:
            f = (-2 * x * x + 6 * x - 3) / 2
            return (3 - 2 * x) ** 2 / f
        return 2.0

    return quad(ratio, 0, 3, points=[1, 2])[0]
