"""The large-margin GMM classifier and its training records (thesis 003, section 4.1.2).

:class:`LargeMarginGMM` holds one symmetric (d+1) x (d+1) matrix Phi_cm per class c and
mixture component m and classifies by the smallest soft-min distance
-log sum_m exp(-z^T Phi_cm z), z = [x; 1].  :func:`training_data` validates records
(features in the unit L2 ball, labels, mixture labels) for training; :func:`into_unit_ball`
is the documented scaling step with a public centre and radius.  Mixture labels:
:func:`assign_components` (nearest public centre: a per-record rule, safe under DP) or
:func:`gmm_components` (the thesis's per-class generative GMM: non-private training only).
:func:`generative_classifier` writes the plaintext Gaussian / GMM classifier in the same
form, the baseline of the benchmarks.  See ``docs/lmgmm.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from smc_hmm.dp.classifier import clip_rows
from smc_hmm.dp.params import check_epsilon, check_points
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    ModelError,
    SensitivityBoundError,
    ShapeMismatchError,
)
from smc_hmm.hmm.gaussian_forms import quadratic_form_matrix

MIN_PER_CLASS = 2
"""Fewest training points per class (and per mixture component) accepted."""

BALL_TOLERANCE = 1e-9
"""Rounding slack of the unit-ball check: ||x||_2 <= 1 + BALL_TOLERANCE."""

RECORD_RULE = (
    "n is the number of records in the file (public); a record whose features are not d "
    "finite numbers or whose label is not an integer in 0..C-1 is kept in n with weight 0 "
    "(it adds no loss, as if replaced by a null record); features are mapped by the public "
    "scaling and rows outside the unit ball scaled onto its sphere; an empty data set is "
    "trained as one null record (n = 1); a class without records is trained like any other; "
    "no record makes the release fail"
)
"""The public per-record rule of ``smc-hmm release lmgmm`` (:func:`public_records`),
written into the release's metadata."""


# -- validation -------------------------------------------------------------------------------


def check_count(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidInputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _features(x: ArrayLike, dim: int | None = None) -> np.ndarray:
    arr = check_points(
        x, "x", error=InvalidInputError, shape_error=ShapeMismatchError, vector_as_column=False
    )
    if dim is not None and arr.shape[1] != dim:
        raise ShapeMismatchError(f"x has {arr.shape[1]} features, the model expects {dim}")
    return arr


def _labels(y: ArrayLike, n: int, n_classes: int | None, name: str = "y") -> np.ndarray:
    arr = np.asarray(y)
    if arr.shape != (n,):
        raise ShapeMismatchError(f"{name} must have shape ({n},), got {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise InvalidInputError(f"{name} must hold integers")
    elif arr.dtype.kind not in "iu":
        raise InvalidInputError(f"{name} must hold integers, got dtype {arr.dtype}")
    out = arr.astype(np.int64)
    upper = n_classes if n_classes is not None else None
    if np.any(out < 0) or (upper is not None and np.any(out >= upper)):
        raise InvalidInputError(f"{name} must lie in 0..{'C-1' if upper is None else upper - 1}")
    return out


def into_unit_ball(x: ArrayLike, radius: float, centre: ArrayLike | None = None) -> np.ndarray:
    """(x - centre) / radius with every row longer than 1 scaled back onto the unit sphere.

    A per-record map: with a *public* centre and radius (fixed before seeing the training
    data, or taken from public data) it changes nothing in the privacy analysis, which
    needs ||x||_2 <= 1.  Rows already inside are unchanged; longer rows keep their
    direction.  A centre or radius computed from the private data would itself leak.
    """
    arr = _features(x)
    r = check_epsilon(radius, "radius")
    if centre is not None:
        c = np.asarray(centre, dtype=float)
        if c.shape != (arr.shape[1],) or not np.all(np.isfinite(c)):
            raise ShapeMismatchError(f"centre must be a finite vector of shape ({arr.shape[1]},)")
        arr = arr - c
    return clip_rows(arr / r)


def _check_ball(x: np.ndarray) -> None:
    norms = np.linalg.norm(x, axis=1)
    outside = np.flatnonzero(norms > 1.0 + BALL_TOLERANCE)
    if outside.size:
        raise SensitivityBoundError(
            f"{outside.size} of {len(x)} points lie outside the unit L2 ball (largest norm "
            f"{norms.max():.4g}): the sensitivity bound needs ||x||_2 <= 1; scale and clip "
            "them with a public radius first (smc_hmm.dp.lmgmm.into_unit_ball, --radius)"
        )


@dataclass(frozen=True)
class TrainingData:
    """Validated training records: features in the unit ball, labels, mixture labels.

    ``x`` (n, d), ``y`` (n,) in 0..C-1, ``components`` (n,) in 0..M-1; ``z`` = [x; 1];
    ``weights`` (n,) in {0, 1}: a record of weight 0 (a null record, :func:`public_records`)
    counts in n but adds no loss (None: every weight 1).
    """

    x: np.ndarray
    y: np.ndarray
    components: np.ndarray
    n_classes: int
    n_components: int
    z: np.ndarray = field(repr=False)
    weights: np.ndarray | None = field(default=None, repr=False)

    @property
    def w(self) -> np.ndarray:
        """The records' weights (ones unless some are null records)."""
        return np.ones(self.n) if self.weights is None else self.weights

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def dim(self) -> int:
        return int(self.x.shape[1])


def training_data(
    x: ArrayLike,
    y: ArrayLike,
    *,
    n_classes: int | None = None,
    n_components: int = 1,
    components: ArrayLike | None = None,
    min_per_class: int = MIN_PER_CLASS,
    weights: ArrayLike | None = None,
) -> TrainingData:
    """Check and pack training records.

    Raises ShapeMismatchError (shapes), InvalidInputError (non-finite values, labels out of
    range, fewer than ``min_per_class`` points of weight 1 in a class, or mixture labels
    missing when M > 1) and SensitivityBoundError (a point outside the unit ball).
    ``n_classes`` defaults to 1 + the largest label: declare it when the number of classes
    must not depend on the data.  ``weights`` (n,) of 0 and 1 marks null records
    (:func:`public_records`); default: all 1.
    """
    arr = _features(x)
    n = arr.shape[0]
    classes = None if n_classes is None else check_count(n_classes, "n_classes", 2)
    labels = _labels(y, n, classes)
    classes = classes if classes is not None else int(labels.max()) + 1
    if classes < 2:
        raise InvalidInputError("a classifier needs at least two classes")
    m = check_count(n_components, "n_components")
    if components is None:
        if m > 1:
            raise InvalidInputError(
                "mixtures need a mixture label per record (assign_components with public "
                "centres; gmm_components for non-private training)"
            )
        comp = np.zeros(n, dtype=np.int64)
    else:
        comp = _labels(components, n, m, "components")
    _check_ball(arr)
    if weights is None:
        w = None
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != (n,) or not np.all((w == 0) | (w == 1)):
            raise ShapeMismatchError(f"weights must be ({n},) zeros and ones")
    minimum = check_count(min_per_class, "min_per_class", 0)
    counts = np.bincount(labels, weights=w, minlength=classes)
    if np.any(counts < minimum):
        raise InvalidInputError(
            f"every class needs at least {minimum} training points; per class: "
            f"{counts.astype(int).tolist()}"
        )
    z = np.concatenate([arr, np.ones((n, 1))], axis=1)
    return TrainingData(arr, labels, comp, classes, m, z, w)


def _record_features(row: object, dim: int) -> np.ndarray | None:
    """One record's features as d finite floats, or None."""
    if isinstance(row, np.ndarray):
        values = row
    elif isinstance(row, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in row
    ):
        try:
            values = np.array(row, dtype=float)
        except (OverflowError, TypeError, ValueError):
            return None
    else:
        return None
    if values.shape != (dim,) or values.dtype.kind not in "iuf":
        return None
    values = values.astype(float)
    return values if np.all(np.isfinite(values)) else None


def _record_label(label: object, n_classes: int) -> int | None:
    """One record's label as an integer in 0..C-1, or None."""
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, bool):
        return None
    if isinstance(label, float) and math.isfinite(label) and label == round(label):
        label = int(label)
    if isinstance(label, int) and 0 <= label < n_classes:
        return label
    return None


def public_records(
    rows: ArrayLike | list, labels: ArrayLike | list, n_classes: int, dim: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, weights)`` under the public rule (:data:`RECORD_RULE`); never raises on a
    record.

    ``rows`` and ``labels`` hold one entry per record (the lengths must agree: that is
    the file's format); C and d are declared.  A record whose features are not d finite
    numbers, or whose label is not an integer in 0..C-1, becomes a null record: x = 0,
    y = 0, weight 0, still counted in n.  Under the neighbouring relation of the guarantee
    (one record replaced, n public) a null record is a record like any other whose loss
    is 0: its gradient and Hessian are 0, within the sensitivity and the Jacobian bound,
    so the guarantee is unchanged.  An empty data set becomes one null record, so n >= 1.
    The features are returned as given (not yet scaled into the unit ball).
    """
    classes = check_count(n_classes, "n_classes", 2)
    d = check_count(dim, "dim")
    n = len(rows)
    if len(labels) != n:
        raise ShapeMismatchError(f"one label per record: {n} records, {len(labels)} labels")
    x = np.zeros((max(n, 1), d))
    y = np.zeros(max(n, 1), dtype=np.int64)
    weights = np.zeros(max(n, 1))
    for i in range(n):
        features = _record_features(rows[i], d)
        label = _record_label(labels[i], classes)
        if features is not None and label is not None:
            x[i], y[i], weights[i] = features, label, 1.0
    return x, y, weights


# -- the model --------------------------------------------------------------------------------


def _soft_min(a: np.ndarray) -> np.ndarray:
    """-log sum_m exp(-a_m) over the last axis (the minimum when M = 1)."""
    if a.shape[-1] == 1:
        return a[..., 0]
    return -special.logsumexp(-a, axis=-1)


def quadratic_distances(phi: np.ndarray, z: np.ndarray) -> np.ndarray:
    """a[i, c, m] = z_i^T Phi_cm z_i, shape (n, C, M)."""
    c, m, d1, _ = phi.shape
    zp = z @ phi.transpose(2, 0, 1, 3).reshape(d1, c * m * d1)  # (n, C M D)
    return np.einsum("nkd,nd->nk", zp.reshape(len(z), c * m, d1), z).reshape(len(z), c, m)


@dataclass(frozen=True, eq=False)
class LargeMarginGMM:
    """A classifier of C classes with M components each: ``phi`` of shape (C, M, d+1, d+1).

    Symmetric matrices; positive semidefinite when trained by :func:`solve`, not
    necessarily otherwise (a generative classifier from :func:`generative_classifier`
    carries log-determinants in its constant entry).
    """

    phi: np.ndarray

    def __post_init__(self) -> None:
        try:
            phi = np.array(self.phi, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"phi must be a numeric array: {exc}") from None
        if phi.ndim != 4 or phi.shape[2] != phi.shape[3] or phi.shape[2] < 2 or phi.shape[0] < 2:
            raise ModelError(f"phi must have shape (C >= 2, M, d+1, d+1), got {phi.shape}")
        if phi.shape[1] < 1 or not np.all(np.isfinite(phi)):
            raise ModelError("phi must be finite with at least one component per class")
        scale = max(1.0, float(np.abs(phi).max()))
        if np.abs(phi - phi.swapaxes(2, 3)).max() > 1e-9 * scale:
            raise ModelError("every Phi_cm must be symmetric")
        phi = 0.5 * (phi + phi.swapaxes(2, 3))
        phi.setflags(write=False)
        object.__setattr__(self, "phi", phi)

    @property
    def n_classes(self) -> int:
        return int(self.phi.shape[0])

    @property
    def n_components(self) -> int:
        return int(self.phi.shape[1])

    @property
    def dim(self) -> int:
        return int(self.phi.shape[2] - 1)

    def component_distances(self, x: ArrayLike) -> np.ndarray:
        """a[i, c, m] = z_i^T Phi_cm z_i for rows x_i, shape (n, C, M)."""
        arr = _features(x, self.dim)
        return quadratic_distances(self.phi, np.concatenate([arr, np.ones((len(arr), 1))], axis=1))

    def distances(self, x: ArrayLike) -> np.ndarray:
        """Soft-min distance of each row to each class, shape (n, C)."""
        return _soft_min(self.component_distances(x))

    def predict(self, x: ArrayLike) -> np.ndarray:
        """The class at the smallest distance, for each row."""
        return np.argmin(self.distances(x), axis=1)

    def error_rate(self, x: ArrayLike, y: ArrayLike) -> float:
        """Fraction of rows whose predicted class differs from ``y``."""
        pred = self.predict(x)
        return float(np.mean(pred != _labels(y, len(pred), None)))


# -- mixture labels and the generative baseline -----------------------------------------------


def assign_components(x: ArrayLike, y: ArrayLike, centres: ArrayLike) -> np.ndarray:
    """m_i = the nearest of its class's public centres (C, M, d): a per-record rule, so
    the mixture labels add nothing to a record's influence (module docstring)."""
    arr = _features(x)
    cen = np.asarray(centres, dtype=float)
    if cen.ndim != 3 or cen.shape[2] != arr.shape[1] or not np.all(np.isfinite(cen)):
        raise ShapeMismatchError(
            f"centres must be a finite (C, M, {arr.shape[1]}) array, got shape {cen.shape}"
        )
    labels = _labels(y, len(arr), cen.shape[0])
    own = cen[labels]  # (n, M, d)
    return np.argmin(((own - arr[:, None, :]) ** 2).sum(axis=2), axis=1)


def _sklearn_mixture():
    try:
        from sklearn.mixture import GaussianMixture
    except ImportError as exc:
        raise ConfigError(f"fitting generative GMMs needs scikit-learn: {exc}") from None
    return GaussianMixture


def gmm_components(
    x: ArrayLike, y: ArrayLike, n_components: int, n_classes: int | None = None, seed: int = 0
) -> np.ndarray:
    """The thesis's mixture labels: per class, the most probable component of a generative
    GMM fitted on that class's points (full covariances, scikit-learn).  Every label then
    depends on every record of its class: for non-private training only."""
    arr = _features(x)
    labels = _labels(y, len(arr), n_classes)
    m = check_count(n_components, "n_components")
    out = np.zeros(len(arr), dtype=np.int64)
    if m == 1:
        return out
    mixture = _sklearn_mixture()
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        if len(rows) < m:
            raise InvalidInputError(f"class {c} has {len(rows)} points for {m} components")
        gmm = mixture(m, covariance_type="full", reg_covar=1e-4, random_state=seed)
        out[rows] = gmm.fit(arr[rows]).predict(arr[rows])
    return out


def generative_classifier(
    x: ArrayLike,
    y: ArrayLike,
    *,
    n_classes: int | None = None,
    n_components: int = 1,
    reg: float = 1e-4,
    seed: int = 0,
) -> LargeMarginGMM:
    """The plaintext generative baseline as a :class:`LargeMarginGMM`: one Gaussian (full
    covariance + ``reg`` I, maximum likelihood) or a GMM (scikit-learn) per class, with
    Phi_cm = -sym(W_cm) - log w_m e e^T, W the quadratic form of
    :func:`smc_hmm.hmm.gaussian_forms.quadratic_form_matrix`, so that the soft-min distance
    is -log p(x | c) and the smallest distance is the maximum-likelihood class."""
    arr = _features(x)
    labels = _labels(y, len(arr), n_classes)
    classes = n_classes if n_classes is not None else int(labels.max()) + 1
    m = check_count(n_components, "n_components")
    d = arr.shape[1]
    phi = np.zeros((classes, m, d + 1, d + 1))
    for c in range(classes):
        pts = arr[labels == c]
        if len(pts) < max(MIN_PER_CLASS, m):
            raise InvalidInputError(f"class {c} has {len(pts)} training points")
        if m == 1:
            params = [(1.0, pts.mean(axis=0), np.cov(pts, rowvar=False, bias=True))]
        else:
            gmm = _sklearn_mixture()(m, covariance_type="full", reg_covar=reg, random_state=seed)
            gmm.fit(pts)
            params = list(zip(gmm.weights_, gmm.means_, gmm.covariances_))
        for k, (weight, mean, cov) in enumerate(params):
            w = quadratic_form_matrix(mean, np.atleast_2d(cov) + (reg * np.eye(d) if m == 1 else 0))
            phi[c, k] = -0.5 * (w + w.T)
            phi[c, k, d, d] -= math.log(weight)
    return LargeMarginGMM(phi)
