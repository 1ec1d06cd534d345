"""Array validation shared by the HMM models, inference and Gaussian forms.

Every helper returns a fresh float64 (or int64) array or raises one of the
typed errors of :mod:`smc_hmm.errors`; none of them mutates its input.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.errors import InvalidInputError, ModelError, ShapeMismatchError

ROW_SUM_TOL = 1e-8
"""Largest allowed deviation of a probability row sum from 1."""

SYMMETRY_RTOL = 1e-10
"""Relative tolerance of the symmetry check for full covariance matrices."""


def plain(value: object) -> object:
    """``value`` with a numpy scalar (or 0-d array) turned into the Python equivalent.

    For error messages: ``f"{plain(x)!r}"`` shows ``1.1`` or ``'a'``, never
    ``np.float64(1.1)`` or ``np.str_('a')``.
    """
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value


def as_float_array(value: ArrayLike, name: str, error: type[InvalidInputError]) -> np.ndarray:
    """Copy ``value`` into a float64 array, raising ``error`` if it is not numeric."""
    try:
        array = np.array(value, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise error(f"{name} must be a numeric array: {exc}") from exc
    return array


def require_ndim(array: np.ndarray, ndim: int, name: str, error: type[InvalidInputError]) -> None:
    """Raise ``error`` unless ``array`` has exactly ``ndim`` dimensions."""
    if array.ndim != ndim:
        raise error(f"{name} must be {ndim}-dimensional, got shape {array.shape}")


def require_finite(array: np.ndarray, name: str, error: type[InvalidInputError]) -> None:
    """Raise ``error`` if ``array`` holds a NaN or an infinity."""
    if not np.all(np.isfinite(array)):
        raise error(f"{name} must be finite (no NaN or inf)")


def probability_vector(value: ArrayLike, name: str) -> np.ndarray:
    """Validate a 1-D probability vector (finite, >= 0, sums to 1)."""
    array = as_float_array(value, name, ModelError)
    require_ndim(array, 1, name, ModelError)
    _check_probabilities(array[None, :], name, single_row=True)
    return array


def stochastic_matrix(value: ArrayLike, name: str) -> np.ndarray:
    """Validate a 2-D row-stochastic matrix (finite, >= 0, every row sums to 1)."""
    array = as_float_array(value, name, ModelError)
    require_ndim(array, 2, name, ModelError)
    _check_probabilities(array, name, single_row=False)
    return array


def _check_probabilities(rows: np.ndarray, name: str, *, single_row: bool) -> None:
    if rows.size == 0:
        raise ModelError(f"{name} must not be empty, got shape {rows.shape}")
    require_finite(rows, name, ModelError)
    negative = np.argwhere(rows < 0)
    if negative.size:
        where = "" if single_row else f" (row {negative[0][0]})"
        raise ModelError(f"{name} has a negative probability{where}")
    sums = rows.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
    if bad.size:
        row = int(bad[0])
        where = "" if single_row else f" row {row}"
        raise ModelError(
            f"{name}{where} sums to {plain(sums[row])!r}, not 1 (tolerance {ROW_SUM_TOL})"
        )


def cholesky(cov: np.ndarray, name: str) -> np.ndarray:
    """Lower Cholesky factor of a symmetric positive-definite matrix, else ModelError."""
    scale = max(1.0, float(np.max(np.abs(cov))))
    if not np.allclose(cov, cov.T, rtol=0.0, atol=SYMMETRY_RTOL * scale):
        raise ModelError(f"{name} is not symmetric")
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError as exc:
        raise ModelError(f"{name} is not positive definite") from exc


def positive_variances(variances: np.ndarray, name: str) -> None:
    """Raise ModelError unless every diagonal variance is strictly positive."""
    bad = np.argwhere(~(variances > 0))
    if bad.size:
        raise ModelError(
            f"{name} must be strictly positive (entry {tuple(int(i) for i in bad[0])})"
        )


def log_parts(
    log_startprob: ArrayLike, log_transmat: ArrayLike, log_emission: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate the log-domain inputs of the inference recursions.

    Shapes must be ``(N,)``, ``(N, N)`` and ``(T, N)`` with ``T >= 1``; entries may be
    ``-inf`` (zero probability) but never NaN or ``+inf``.
    """
    parts = (
        as_float_array(log_startprob, "log_startprob", InvalidInputError),
        as_float_array(log_transmat, "log_transmat", InvalidInputError),
        as_float_array(log_emission, "log_emission", InvalidInputError),
    )
    start, trans, emission = parts
    require_ndim(start, 1, "log_startprob", ShapeMismatchError)
    require_ndim(trans, 2, "log_transmat", ShapeMismatchError)
    require_ndim(emission, 2, "log_emission", ShapeMismatchError)
    n_states = start.shape[0]
    if n_states < 1:
        raise ShapeMismatchError("log_startprob must have at least one state")
    if trans.shape != (n_states, n_states):
        raise ShapeMismatchError(
            f"log_transmat has shape {trans.shape}, expected {(n_states, n_states)}"
        )
    if emission.shape[1] != n_states:
        raise ShapeMismatchError(
            f"log_emission has shape {emission.shape}, expected (T, {n_states})"
        )
    if emission.shape[0] < 1:
        raise InvalidInputError("the observation sequence must have at least one element")
    for array, name in zip(parts, ("log_startprob", "log_transmat", "log_emission"), strict=True):
        if np.any(np.isnan(array)) or np.any(array == np.inf):
            raise InvalidInputError(f"{name} must not contain NaN or +inf")
    return start, trans, emission
