"""The DP aggregate classifier of thesis 003, 4.1.3, in the clear: local training and noise.

Plaintext pieces of ``protocols/aggregate.py`` (which adds the secure computation) and
of the benchmark's accuracy sweeps; the module docstring of ``protocols/aggregate.py``
gives the analysis.  In short: each owner minimises

    J(w) = (1/n) sum_i log(1 + exp(-y_i w.x_i)) + (lambda/2) ||w||^2

on rows with ||x||_2 <= 1 (:func:`train_local`); Chaudhuri and Monteleoni's bound
||w(D) - w(D')||_2 <= 2/(n lambda) (thesis Theorem A.3.1) is an L2 bound, so the noise
of the smallest owner (size n_(1)) has density prop. to exp(-eps n_(1) lambda ||eta||_2 / 2)
(:func:`l2_noise`: the K-norm mechanism of the L2 ball; ||eta||_2 ~ Gamma(d, 2/(n_(1) eps
lambda)), uniform direction).  The thesis's i.i.d. Laplace coordinates of scale
2/(n_(1) eps lambda) (:func:`laplace_noise_thesis`) are only sqrt(d) eps-DP: their privacy
loss is ||delta||_1 / b and ||delta||_1 reaches sqrt(d) ||delta||_2.

The thesis writes the regulariser as lambda w^T w; with it the bound would be 1/(n lambda).
We use (lambda/2) ||w||^2, Chaudhuri and Monteleoni's form, for which 2/(n lambda) is
their bound; it is what scikit-learn fits with C = 1/(n lambda) and no intercept (tests).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy import optimize, special, stats

from smc_hmm.dp.knorm import ConvexBody, KNormMechanism
from smc_hmm.dp.params import check_epsilon
from smc_hmm.errors import AggregateInputError, PrivacyParameterError

NOISE_TAIL = 2.0**-64
"""The public radius cut of eta: its 1 - 2^-64 quantile for n = 1 (a delta of at most this)."""


def check_data(data, dim: int | None = None, max_size: int | None = None):
    """An owner's ``(X, y)``: X (n, d) finite with rows ||x||_2 <= 1, y in {-1, +1}
    (0/1 accepted).  Returns float arrays (X, y with +-1)."""
    if isinstance(data, Mapping):
        data = (data.get("X"), data.get("y"))
    if data is None or not isinstance(data, tuple | list) or len(data) != 2:
        raise AggregateInputError("an owner's input is the pair (X, y)")
    try:
        x = np.asarray(data[0], dtype=float)
        y = np.asarray(data[1], dtype=float).reshape(-1)
    except (TypeError, ValueError) as e:
        raise AggregateInputError(f"X and y must be numeric arrays: {e}") from e
    if x.ndim != 2 or x.shape[0] == 0:
        raise AggregateInputError(f"X must be a non-empty (n, d) array, got shape {x.shape}")
    if y.shape != (x.shape[0],):
        raise AggregateInputError(f"y has {y.size} labels for {x.shape[0]} rows")
    if dim is not None and x.shape[1] != dim:
        raise AggregateInputError(f"X has {x.shape[1]} features, the agreed dim is {dim}")
    if max_size is not None and x.shape[0] > max_size:
        raise AggregateInputError(f"{x.shape[0]} rows exceed the public max_size {max_size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise AggregateInputError("X or y contains NaN or infinity")
    if np.any(np.linalg.norm(x, axis=1) > 1 + 1e-9):
        raise AggregateInputError("rows of X must lie in the unit L2 ball (clip_rows)")
    labels = set(np.unique(y).tolist())
    if labels <= {0.0, 1.0}:
        y = 2 * y - 1
    elif not labels <= {-1.0, 1.0}:
        raise AggregateInputError(f"labels must be -1/+1 or 0/1, got {sorted(labels)}")
    return x, y


def clip_rows(x) -> np.ndarray:
    """Each row scaled into the unit L2 ball (a per-record map: keeps the DP guarantee)."""
    x = np.asarray(x, dtype=float)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1.0)


def train_local(x, y, lam: float) -> np.ndarray:
    """argmin_w (1/n) sum_i log(1 + exp(-y_i w.x_i)) + (lam/2) ||w||^2 (no intercept:
    append a constant feature before clipping), by L-BFGS; ||w||_2 <= 1/lam."""
    x, y = check_data((x, y))
    lam = check_epsilon(lam, "lam", error=AggregateInputError)
    n, d = x.shape

    def objective(w):
        m = y * (x @ w)
        loss = np.logaddexp(0.0, -m).mean() + 0.5 * lam * w @ w
        grad = -(x.T @ (y * special.expit(-m))) / n + lam * w
        return loss, grad

    res = optimize.minimize(
        objective, np.zeros(d), jac=True, method="L-BFGS-B", options={"gtol": 1e-10}
    )
    return res.x


def noise_scale(n: int, eps: float, lam: float) -> float:
    """The Gamma scale 2/(n eps lambda) of ||eta||_2 (and the L2 sensitivity / eps)."""
    return 2.0 / (n * eps * lam)


def l2_noise(dim: int, n: int, eps: float, lam: float, rng=None, size: int | None = None):
    """eta with density prop. to exp(-eps n lam ||eta||_2 / 2): the K-norm mechanism of the
    L2 ball of radius 2/(n lam) (radius Gamma(d, 2/(n eps lam)), uniform direction)."""
    eps = check_epsilon(eps, "eps", error=PrivacyParameterError)
    lam = check_epsilon(lam, "lam", error=AggregateInputError)
    body = ConvexBody.ball("l2", int(dim), radius=2.0 / (int(n) * lam))
    out = KNormMechanism(body, eps, rng).sample_noise(1 if size is None else int(size))
    return out[0] if size is None else out


def laplace_noise_thesis(dim: int, n: int, eps: float, lam: float, rng) -> np.ndarray:
    """The thesis's per-coordinate Lap(2/(n eps lam)): only sqrt(d) eps-DP (module doc);
    for the comparison in the benchmark, never used by the protocol."""
    return rng.laplace(0.0, noise_scale(n, eps, lam), size=int(dim))


def max_noise_radius(dim: int, eps: float, lam: float) -> float:
    """Public cut of ||eta||_2: the 1 - 2^-64 quantile of Gamma(d, 2/(eps lam)) (n >= 1)."""
    return float(stats.gamma.isf(NOISE_TAIL, dim, scale=noise_scale(1, eps, lam)))


def aggregate_plain(ws, sizes, eps: float, lam: float, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """What the protocol publishes, computed in the clear (reference and sweeps):
    (mean of w_j + eta of the smallest owner, eta)."""
    ws = np.asarray(ws, dtype=float)
    eta = l2_noise(ws.shape[1], int(min(sizes)), eps, lam, rng)
    return ws.mean(axis=0) + eta, eta


def classify(w, x) -> np.ndarray:
    """Dave's test-time rule: label +1 iff sigmoid(w.x) > 1/2."""
    return np.where(np.asarray(x, dtype=float) @ np.asarray(w, dtype=float) > 0, 1, -1)
