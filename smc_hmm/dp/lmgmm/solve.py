"""Minimisers of the large-margin GMM objective over positive semidefinite matrices.

:func:`solve` runs an accelerated projected gradient (FISTA with backtracking and adaptive
restart; the projection clips eigenvalues at 0) to a gradient-mapping tolerance, or, with
``method="cvxpy"``, the same problem as a conic program through cvxpy with an open solver
(Clarabel or SCS), the reference the tests hold the first-order method to (objective values
within 1e-6 relative).  The objective is lam-strongly convex, so the minimiser is unique and
a suboptimality bound is tol^2 / (2 lam).  See ``docs/lmgmm.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from threadpoolctl import threadpool_limits

from smc_hmm.dp.lmgmm.loss import objective, objective_and_gradient
from smc_hmm.dp.lmgmm.model import TrainingData, check_count
from smc_hmm.dp.params import check_epsilon
from smc_hmm.errors import ConfigError, ShapeMismatchError

Method = Literal["fista", "cvxpy"]

CLARABEL_SETTINGS = {"tol_gap_abs": 1e-7, "tol_gap_rel": 1e-7, "tol_feas": 1e-7}
"""Clarabel's stopping tolerances for the reference.  Its defaults (1e-8) lie at the edge
of what the exponential cones of a mixture's log-sum-exp reach in double precision: on
such a problem its steps shrink to zero with the gap at 1.5e-8 and it ends "almost
solved" (cvxpy: "Solution may be inaccurate").  1e-7 is still ten times tighter than the
1e-6 the tests hold the first-order method to."""


# -- solvers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Solution:
    """A minimiser of J_B: ``phi``, the objective value, the method and its iterations."""

    phi: np.ndarray
    objective: float
    method: str
    iterations: int
    converged: bool
    gradient_mapping: float

    def public_summary(self, tol: float) -> dict[str, Any]:
        """What a release may say about its solver: the method and the tolerance.  The
        objective value, the iteration count and the final gradient mapping depend on the
        data beyond the released minimiser, so they stay out of a release."""
        return {"method": self.method, "tol": tol, "converged": self.converged}


def _project_psd(phi: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(phi)
    return np.einsum("...ij,...j,...kj->...ik", v, np.maximum(w, 0.0), v)


def _fista(
    value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]],
    project: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, float, int, bool, float]:
    """Accelerated projected gradient with backtracking and adaptive restart (Beck and
    Teboulle 2009; O'Donoghue and Candes 2015).  Stops when the gradient mapping
    L ||y - p|| falls below ``tol``."""
    x = project(x0)
    y = x
    fy, gy = value_and_grad(y)
    lip, t, gm = 1.0, 1.0, math.inf
    for it in range(1, max_iter + 1):
        while True:
            p = project(y - gy / lip)
            fp, gp = value_and_grad(p)
            step = p - y
            quad = fy + float(np.vdot(gy, step)) + 0.5 * lip * float(np.vdot(step, step))
            if fp <= quad + 1e-13 * abs(fy):
                break
            lip *= 2.0
        gm = lip * float(np.linalg.norm(step))
        if gm <= tol:
            return p, fp, it, True, gm
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        if float(np.vdot(y - p, p - x)) > 0.0:  # momentum points uphill: restart
            y, fy, gy, t_next = p, fp, gp, 1.0
        else:
            y = p + ((t - 1.0) / t_next) * (p - x)
            fy, gy = value_and_grad(y)
        x, t = p, t_next
        lip *= 0.95
    fx, _ = value_and_grad(x)
    return x, fx, max_iter, False, gm


def _solve_cvxpy(
    data: TrainingData,
    lam: float,
    h: float,
    perturbation: np.ndarray | None,
    psd: bool,
    solver: str,
) -> np.ndarray:
    """The reference: the same problem as a conic program (Clarabel or SCS through cvxpy)."""
    try:
        import cvxpy as cp
    except ImportError as exc:  # a declared dependency: only a broken install lands here
        raise ConfigError(f"the cvxpy solver needs cvxpy: {exc}") from None
    c, m, n, d1 = data.n_classes, data.n_components, data.n, data.dim + 1
    kwargs = {"PSD": True} if psd else {"symmetric": True}
    phis = [[cp.Variable((d1, d1), **kwargs) for _ in range(m)] for _ in range(c)]
    flat = [phis[k // m][k % m] for k in range(c * m)]
    outer = np.einsum("nd,ne->nde", data.z, data.z).reshape(n, d1 * d1)
    a = outer @ cp.vstack([cp.vec(p, order="F") for p in flat]).T  # (n, C M)
    own_index = np.zeros((n, c * m))
    own_index[np.arange(n), data.y * m + data.components] = 1.0
    own = cp.sum(cp.multiply(a, own_index), axis=1)
    loss = 0
    for k in range(c):
        block = a[:, k * m : (k + 1) * m]
        lse = -block[:, 0] if m == 1 else cp.log_sum_exp(-block, axis=1)
        u = 1.0 + own + lse
        keep = (data.y != k).astype(float) * data.w
        loss = loss + cp.sum(cp.multiply(keep, cp.huber(cp.pos(u + h), 2 * h))) / (4 * h)
    reg = sum(cp.trace(p[:-1, :-1]) + 0.5 * cp.sum_squares(p) for p in flat)
    total = loss / n + lam * reg
    if perturbation is not None:
        b = perturbation.reshape(c * m, d1, d1)
        total = total + sum(cp.sum(cp.multiply(b[k], flat[k])) for k in range(c * m)) / n
    problem = cp.Problem(cp.Minimize(total))
    settings = CLARABEL_SETTINGS if solver == "CLARABEL" else {}
    try:
        problem.solve(solver=solver, **settings)
    except cp.error.SolverError as exc:
        raise ConfigError(f"cvxpy/{solver} failed: {exc}") from None
    if problem.status not in ("optimal", "optimal_inaccurate"):
        raise ConfigError(f"cvxpy/{solver} ended with status {problem.status}")
    out = np.stack([p.value for p in flat]).reshape(c, m, d1, d1)
    return 0.5 * (out + out.swapaxes(2, 3))


def solve(
    data: TrainingData,
    *,
    lam: float,
    h: float,
    perturbation: np.ndarray | None = None,
    psd: bool = True,
    method: Method = "fista",
    tol: float = 1e-7,
    max_iter: int = 50_000,
    phi0: np.ndarray | None = None,
    cvxpy_solver: str = "CLARABEL",
) -> Solution:
    """argmin over PSD (or, with ``psd=False``, symmetric) Phi of J_B (module docstring).

    ``method="fista"`` (default): accelerated projected gradient, eigenvalue clipping as the
    projection, to a gradient mapping below ``tol``; ``method="cvxpy"``: the conic program
    with ``cvxpy_solver`` (CLARABEL or SCS), the reference the tests compare with.
    ``phi0`` only sets the starting point: the minimiser is unique (J is lam-strongly convex).
    """
    lam = check_epsilon(lam, "lam")
    h = check_epsilon(h, "h")
    c, m, d1 = data.n_classes, data.n_components, data.dim + 1
    if perturbation is not None:
        perturbation = np.asarray(perturbation, dtype=float)
        if perturbation.shape != (c, m, d1, d1):
            raise ShapeMismatchError(
                f"the perturbation must have shape {(c, m, d1, d1)}, got {perturbation.shape}"
            )
    if method == "cvxpy":
        phi = _solve_cvxpy(data, lam, h, perturbation, psd, cvxpy_solver)
        value = objective(phi, data, lam, h, perturbation)
        return Solution(phi, value, f"cvxpy/{cvxpy_solver}", 0, True, math.nan)
    if method != "fista":
        raise ConfigError(f"method must be 'fista' or 'cvxpy', got {method!r}")
    start = np.zeros((c, m, d1, d1)) if phi0 is None else np.array(phi0, dtype=float)
    if start.shape != (c, m, d1, d1):
        raise ShapeMismatchError(f"phi0 must have shape {(c, m, d1, d1)}")
    project = _project_psd if psd else (lambda p: 0.5 * (p + p.swapaxes(2, 3)))
    # the matrices are small: one BLAS thread is several times faster than a contended pool
    with threadpool_limits(1, user_api="blas"):
        phi, value, iterations, converged, gm = _fista(
            lambda p: objective_and_gradient(p, data, lam, h, perturbation),
            project,
            start,
            check_epsilon(tol, "tol"),
            check_count(max_iter, "max_iter"),
        )
    return Solution(phi, value, "fista", iterations, converged, gm)
