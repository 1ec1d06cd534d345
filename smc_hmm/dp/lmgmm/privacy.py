"""The privacy of objective perturbation for the large-margin GMM (thesis 003, Theorem
4.1.2 and Lemma A.2.1, corrected; Chaudhuri, Monteleoni and Sarwate 2011; ``docs/lmgmm.md``).

- :func:`sensitivity`: Delta, the largest Frobenius distance between two records' loss
  gradients (replace-one neighbours);
- :func:`jacobian_term`: k of eps' = eps + k, a bound on log det(I + H/(n lam)) over one
  record's loss Hessian H, and alpha, its largest-eigenvalue bound;
- :class:`Guarantee` / :func:`guarantee`: everything a release states; :func:`noise_epsilon`
  the noise parameter for a target eps';
- :func:`sample_perturbation`: B with density proportional to exp(-eps ||B||_F / Delta) on
  the parameter space; :func:`sample_thesis_perturbation`: the thesis's shared b (4.12).

Randomness comes from :mod:`smc_hmm.dp.random` (the OS CSPRNG unless an INSECURE seeded
stream is given).  The sampler works in floating point; ``docs/lmgmm.md`` argues why that is
acceptable for a release that is a minimiser rather than f(D) + noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from smc_hmm.dp.knorm import ConvexBody, KNormMechanism
from smc_hmm.dp.lmgmm.model import check_count
from smc_hmm.dp.params import check_epsilon
from smc_hmm.errors import PrivacyParameterError

Z_NORM_SQUARED = 2.0
"""Bound on ||z||^2 = ||x||^2 + 1 for x in the unit ball: every bound below scales with it."""


# -- the privacy analysis ---------------------------------------------------------------------


def sensitivity(n_classes: int) -> float:
    """Delta = 2 ||z||^2 sqrt(C (C - 1)) = 4 sqrt(C (C - 1)): the largest Frobenius distance
    between the loss gradients of two records (replace-one neighbours; ``docs/lmgmm.md``)."""
    c = check_count(n_classes, "n_classes", 2)
    return 2.0 * Z_NORM_SQUARED * math.sqrt(c * (c - 1))


def jacobian_term(
    n: int, lam: float, h: float, n_classes: int, n_components: int = 1
) -> tuple[float, float]:
    """(k, alpha): the Jacobian term of eps' = eps + k and the largest-eigenvalue bound alpha.

    k bounds log det(I + H/(n lam)) over one record's loss Hessian H, whose nonzero
    eigenvalues are ||z||^4 <= 4 times those of :func:`example_hessians` (``docs/lmgmm.md``).
    M = 1: the Hessian in the distances is sum_c H''_c (e_y - e_c)(e_y - e_c)^T, at most
    1/(2h) times a star graph's Laplacian (eigenvalues C once, 1 (C - 2) times), so
    k = log(1 + 4C t) + (C - 2) log(1 + 4 t) with t = 1/(2h n lam) -- the supremum, reached
    when ||x|| = 1 and every margin lies in the quadratic zone.  M > 1: rank r <= 1 + (C-1) M
    and trace <= 4 (C - 1) max(1/h, (1 + 1/M)/(2h) + 1 - 1/M), so by concavity
    k <= r log(1 + trace/(r n lam)).
    """
    n = check_count(n, "n")
    lam = check_epsilon(lam, "lam")
    h = check_epsilon(h, "h")
    c = check_count(n_classes, "n_classes", 2)
    m = check_count(n_components, "n_components")
    z4 = Z_NORM_SQUARED**2
    mu = n * lam
    if m == 1:
        alpha = z4 * c / (2 * h)
        k = math.log1p(alpha / mu) + (c - 2) * math.log1p(z4 / (2 * h * mu))
        return k, alpha
    per_term = max(1.0 / h, (1.0 + 1.0 / m) / (2 * h) + 1.0 - 1.0 / m)
    trace = z4 * (c - 1) * per_term
    rank = 1 + (c - 1) * m
    alpha = z4 * ((c - 1) / h + 1.0)  # >= the largest eigenvalue: ||G|| <= sum of the terms
    return rank * math.log1p(trace / (rank * mu)), min(alpha, trace)


@dataclass(frozen=True)
class Guarantee:
    """What a DP large-margin GMM release guarantees (replace-one neighbours, n public).

    ``epsilon`` is the noise parameter of (4.12) (||B|| ~ Gamma(``dimension``,
    ``noise_scale``)), ``epsilon_total`` = eps' = eps + ``jacobian_term`` the privacy the
    release actually has (Theorem 4.1.2), ``alpha`` the largest-eigenvalue bound of one
    record's loss Hessian, ``thesis_jacobian_term`` the thesis's
    log(1 + 2 alpha/(n lam) + alpha^2/(n lam)^2) for comparison (valid for rank <= 2 only).
    """

    epsilon: float
    epsilon_total: float
    jacobian_term: float
    thesis_jacobian_term: float
    alpha: float
    sensitivity: float
    noise_scale: float
    dimension: int
    n: int
    lam: float
    h: float
    n_classes: int
    n_components: int
    dim: int
    neighbouring: str = "replace-one"

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def guarantee(
    n: int,
    n_classes: int,
    dim: int,
    epsilon: float,
    *,
    lam: float,
    h: float,
    n_components: int = 1,
) -> Guarantee:
    """The :class:`Guarantee` of :func:`train_dp` for these public parameters."""
    eps = check_epsilon(epsilon, "epsilon")
    d = check_count(dim, "dim")
    k, alpha = jacobian_term(n, lam, h, n_classes, n_components)
    delta = sensitivity(n_classes)
    mu = n * lam
    return Guarantee(
        epsilon=eps,
        epsilon_total=eps + k,
        jacobian_term=k,
        thesis_jacobian_term=2.0 * math.log1p(alpha / mu),
        alpha=alpha,
        sensitivity=delta,
        noise_scale=delta / eps,
        dimension=int(n_classes) * int(n_components) * (d + 1) * (d + 2) // 2,
        n=int(n),
        lam=float(lam),
        h=float(h),
        n_classes=int(n_classes),
        n_components=int(n_components),
        dim=d,
    )


def noise_epsilon(
    total: float, n: int, n_classes: int, *, lam: float, h: float, n_components: int = 1
) -> float:
    """The noise parameter eps for a target eps' (= eps + k); refuses when k >= eps'."""
    total = check_epsilon(total, "total epsilon")
    k, _ = jacobian_term(n, lam, h, n_classes, n_components)
    if k >= total:
        raise PrivacyParameterError(
            f"the Jacobian term alone is k = {k:.4g} >= eps' = {total:g} for n = {n}, "
            f"lam = {lam:g}, h = {h:g}: raise lam or h (or train on more points)"
        )
    return total - k


# -- the perturbation -------------------------------------------------------------------------


def _l2_knorm(dim: int, radius: float, eps: float, rng) -> np.ndarray:
    """One draw with density proportional to exp(-eps ||b||_2 / radius) in R^dim: the K-norm
    mechanism of the L2 ball of that radius (:mod:`smc_hmm.dp.knorm`), whose norm is
    Gamma(dim, radius/eps) and whose direction is uniform."""
    # the unit ball, scaled afterwards: its volume, which sampling does not use, would
    # overflow as radius**dim for a few hundred dimensions
    body = ConvexBody.ball("l2", dim)
    return radius * KNormMechanism(body, eps, rng).sample_noise(1)[0]


def _svec_to_symmetric(v: np.ndarray, d1: int) -> np.ndarray:
    """Inverse of the isometry svec: diagonal entries as they are, off-diagonal entries
    divided by sqrt 2 on both sides, so ||matrix||_F = ||v||_2."""
    rows, cols = np.triu_indices(d1)
    out = np.zeros(v.shape[:-1] + (d1, d1))
    off = rows != cols
    scaled = np.where(off, v / math.sqrt(2.0), v)
    out[..., rows, cols] = scaled
    out[..., cols, rows] = scaled
    return out


def sample_perturbation(
    n_classes: int, n_components: int, dim: int, epsilon: float, scale_sensitivity: float, rng
) -> np.ndarray:
    """B: symmetric (C, M, d+1, d+1) with density proportional to exp(-eps ||B||_F / Delta).

    ||B||_F ~ Gamma(K, Delta/eps) with K = C M (d+1)(d+2)/2, the dimension of the parameter
    space, and a uniform direction on its unit sphere: the K-norm mechanism of the L2 ball
    of radius Delta in svec coordinates, mapped back with the inverse of svec.  ``rng``: a
    :class:`~smc_hmm.dp.random.DPRandom` (the mechanism spawns its own child stream) or
    None for the OS CSPRNG.
    """
    eps = check_epsilon(epsilon, "epsilon")
    delta = check_epsilon(scale_sensitivity, "sensitivity")
    c = check_count(n_classes, "n_classes")
    m = check_count(n_components, "n_components")
    d = check_count(dim, "dim")
    k = c * m * (d + 1) * (d + 2) // 2
    return _svec_to_symmetric(_l2_knorm(k, delta, eps, rng).reshape(c, m, -1), d + 1)


def sample_thesis_perturbation(dim: int, epsilon: float, rng) -> np.ndarray:
    """The thesis's b (4.12): one general (d+1) x (d+1) matrix, ||b|| ~ Gamma((d+1)^2, 2/eps),
    uniform direction.  For reproducing the thesis only: shared by all classes it gives no
    guarantee (module docstring)."""
    eps = check_epsilon(epsilon, "epsilon")
    d1 = check_count(dim, "dim") + 1
    return _l2_knorm(d1 * d1, 2.0, eps, rng).reshape(d1, d1)
