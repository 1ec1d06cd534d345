"""How much a client learns from additively blinded log-values: the law every stage's
blinds follow and the per-client budget ``smc-hmm serve`` derives from it.

Every log-value a client decrypts in the log-domain stages (``protocols.stages``) is Bob's
secret plus a fresh blind whose density is the Irwin-Hall law of order 3 stretched over
[0, R) nats (a sum of three uniform integers).  A client who sees k blinded copies of the
same secret -- one frame repeated k times in a session, or the same frame in k sessions,
the blinds being independent either way -- can estimate it to no better than the
Cramer-Rao floor 1 / sqrt(k I), with I the blind's Fisher information for a shift:

    I = 18 sqrt(3) ln(2 + sqrt(3)) / R^2 ~ 41.06 / R^2,  floor ~ R / (6.41 sqrt(k)) nats.

(The integral of f'^2 / f over Irwin-Hall(3) on [0, 3] is 2 + (6 ln(2 + sqrt 3) / sqrt 3
- 4) + 2 = 2 sqrt(3) ln(2 + sqrt(3)); stretching to [0, R) multiplies by 9 / R^2.)  A
uniform blind, by contrast, has sharp edges: the extremes of k samples bracket the
secret to about R / k, which is why the stages do not use one.  ``docs/security.md``
("What a client learns over many frames") has the measured table.

Pure arithmetic, no protocol knowledge: it lives in the core so that ``serve`` can turn
a hiding target into a frame budget without importing a protocol.
"""

from __future__ import annotations

import math

from smc_hmm.errors import InvalidInputError

#: I R^2 for the Irwin-Hall(3) blind stretched over [0, R)
FISHER_CONSTANT = 18 * math.sqrt(3) * math.log(2 + math.sqrt(3))


def _positive(name: str, value) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value > 0)
    ):
        raise InvalidInputError(f"{name} must be a positive number of nats, not {value!r}")
    return float(value)


def fisher_information(blind_nats: float) -> float:
    """Fisher information, per sample, of a blind of width ``blind_nats`` for a shift of
    the value it hides."""
    r = _positive("blind_nats", blind_nats)
    return FISHER_CONSTANT / (r * r)


def estimation_floor(blind_nats: float, samples: int) -> float:
    """The Cramer-Rao floor, in nats, on the error of any unbiased estimate of a value
    hidden by ``samples`` independent blinds of width ``blind_nats``."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InvalidInputError("samples must be a positive integer")
    return 1.0 / math.sqrt(samples * fisher_information(blind_nats))


def samples_for_error(blind_nats: float, error_nats: float) -> int:
    """How many blinded copies of one value a client may see before the floor falls to
    ``error_nats``: Bob's per-client budget of frames per model (at least 1)."""
    e = _positive("hiding error", error_nats)
    return max(1, math.floor(1.0 / (fisher_information(blind_nats) * e * e)))
