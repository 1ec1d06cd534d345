"""The regularised Huber loss of the large-margin GMM and its derivatives (thesis 003,
equations 4.8-4.11 and 4.13; ``docs/lmgmm.md``).

For records (x_i, y_i, m_i) and u_ic = 1 + a_{y_i m_i}(x_i) + log sum_m exp(-a_cm(x_i)),

    J_B(Phi) = (1/n) sum_i w_i sum_{c != y_i} H_h(u_ic)
               + lam sum_cm [ tr(I_Phi Phi_cm I_Phi) + 1/2 ||Phi_cm||_F^2 ]
               + (1/n) sum_cm <B_cm, Phi_cm>,

with w_i = 1, or 0 for a null record (``TrainingData.weights``: counted in n, no loss).

:func:`objective_and_gradient` is what the solvers minimise; :func:`example_gradients` and
:func:`example_hessians` are one record's derivatives, on which the privacy analysis rests
(the tests check its bounds on them).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from smc_hmm.dp.lmgmm.model import TrainingData, quadratic_distances
from smc_hmm.dp.params import check_epsilon

# -- loss, objective and derivatives ----------------------------------------------------------


def huber_hinge(u: ArrayLike, h: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Huber hinge H_h (thesis 4.10, Chapelle 2007) and its first two derivatives.

    H = 0 (u <= -h), (u + h)^2 / (4h) (|u| <= h), u (u >= h); H' in [0, 1];
    H'' = 1/(2h) on (-h, h), else 0.  (Our u is the thesis's hinge argument 1 + M; its
    case split in (4.10) is written for -M.)
    """
    h = check_epsilon(h, "h")
    u = np.asarray(u, dtype=float)
    quad = np.abs(u) <= h
    value = np.where(u >= h, u, np.where(quad, (u + h) ** 2 / (4 * h), 0.0))
    first = np.where(u >= h, 1.0, np.where(quad, (u + h) / (2 * h), 0.0))
    second = np.where(quad, 1.0 / (2 * h), 0.0)
    return value, first, second


def _margins(phi: np.ndarray, data: TrainingData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(u (n, C), competitor mask (n, C), soft-min weights pi (n, C, M))."""
    a = quadratic_distances(phi, data.z)
    rows = np.arange(data.n)
    own = a[rows, data.y, data.components]
    if data.n_components == 1:
        lse = -a[..., 0]
        pi = np.ones_like(a)
    else:
        lse = special.logsumexp(-a, axis=2)
        pi = np.exp(-a - lse[..., None])
    u = 1.0 + own[:, None] + lse
    mask = np.ones(u.shape, dtype=bool)
    mask[rows, data.y] = False
    return u, mask, pi


def _distance_gradients(data: TrainingData, first: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """d(sum_c H(u_ic))/d a_i[c, m] for every record, shape (n, C, M)."""
    g = -first[..., None] * pi
    rows = np.arange(data.n)
    g[rows, data.y, data.components] += first.sum(axis=1)
    return g


def _lift(weights: np.ndarray, z: np.ndarray) -> np.ndarray:
    """sum_i w[i, c, m] z_i z_i^T, shape (C, M, D, D)."""
    n, c, m = weights.shape
    d1 = z.shape[1]
    weighted = (weights.reshape(n, c * m, 1) * z[:, None, :]).reshape(n, c * m * d1)
    return (weighted.T @ z).reshape(c, m, d1, d1)


def _regulariser(phi: np.ndarray) -> tuple[float, np.ndarray]:
    """sum_cm tr(I_Phi Phi_cm I_Phi) + 1/2 ||Phi_cm||_F^2 and its gradient."""
    d = phi.shape[2] - 1
    trace = np.trace(phi[:, :, :d, :d], axis1=2, axis2=3).sum()
    value = float(trace + 0.5 * np.vdot(phi, phi))
    grad = phi.copy()
    idx = np.arange(d)
    grad[:, :, idx, idx] += 1.0
    return value, grad


def objective_and_gradient(
    phi: np.ndarray,
    data: TrainingData,
    lam: float,
    h: float,
    perturbation: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """J_B(Phi) of the module docstring and its gradient (C, M, D, D)."""
    u, mask, pi = _margins(phi, data)
    value, first, _ = huber_hinge(u, h)
    w = data.w[:, None]  # null records (weight 0) add no loss
    first = np.where(mask, first, 0.0) * w
    loss = float(np.sum(value * w, where=mask)) / data.n
    reg, reg_grad = _regulariser(phi)
    grad = _lift(_distance_gradients(data, first, pi), data.z) / data.n + lam * reg_grad
    total = loss + lam * reg
    if perturbation is not None:
        total += float(np.vdot(perturbation, phi)) / data.n
        grad = grad + perturbation / data.n
    return total, grad


def objective(
    phi: np.ndarray,
    data: TrainingData,
    lam: float,
    h: float,
    perturbation: np.ndarray | None = None,
) -> float:
    """J_B(Phi) of the module docstring (B = ``perturbation``, or none)."""
    return objective_and_gradient(phi, data, lam, h, perturbation)[0]


def example_gradients(phi: np.ndarray, data: TrainingData, h: float) -> np.ndarray:
    """Gradient of each record's loss sum_{c != y_i} H_h(u_ic): shape (n, C, M, D, D)."""
    u, mask, pi = _margins(phi, data)
    _, first, _ = huber_hinge(u, h)
    g = _distance_gradients(data, np.where(mask, first, 0.0) * data.w[:, None], pi)
    return np.einsum("ncm,nd,ne->ncmde", g, data.z, data.z)


def example_hessians(phi: np.ndarray, data: TrainingData, h: float) -> np.ndarray:
    """Each record's loss Hessian in the distances a (n, CM, CM).

    The loss depends on Phi only through a_cm = <Phi_cm, z z^T>, a map whose adjoint is
    ||z||^2 times an isometry, so the Hessian in Phi has the eigenvalues ||z||^4 times
    these (the others are 0): G_i = sum_{c != y} H''(u) g_c g_c^T + H'(u) S_c, with
    g_c = e_{y m_i} - pi_c and S_c = diag(pi_c) - pi_c pi_c^T on class c's block.
    """
    u, mask, pi = _margins(phi, data)
    _, first, second = huber_hinge(u, h)
    c, m = data.n_classes, data.n_components
    out = np.zeros((data.n, c * m, c * m))
    for i in range(data.n):
        own = data.y[i] * m + data.components[i]
        for k in np.flatnonzero(mask[i]):
            g = np.zeros(c * m)
            g[own] = 1.0
            block = slice(k * m, (k + 1) * m)
            g[block] -= pi[i, k]
            out[i] += second[i, k] * np.outer(g, g)
            out[i, block, block] += first[i, k] * (np.diag(pi[i, k]) - np.outer(pi[i, k], pi[i, k]))
    return out * data.w[:, None, None]
