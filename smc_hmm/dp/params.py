"""Validation of the privacy parameters every DP module takes.

A leaf module: it imports nothing from :mod:`smc_hmm.dp`, so the mechanisms, the
accountant, the K-norm mechanism and the releases can all use one check without
importing each other (``lint-imports`` keeps ``smc_hmm.dp`` free of import cycles).

- :func:`check_epsilon`: a privacy parameter (or any other strictly positive bound, such
  as a clamp bound or a feature norm) must be a finite real number > 0;
- :func:`check_sensitivity`: a sensitivity must be a finite real number >= 0;
- :func:`check_delta`: the delta of an (eps, delta) guarantee must be a real in (0, 1);
- :func:`check_points`: points, a query's answers or records' features must form a
  finite, non-empty (n, d) array.

The number checks refuse booleans and non-numbers, and raise the error class the caller names
(default :class:`~smc_hmm.errors.PrivacyParameterError`). See ``docs/dp-layer.md``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from smc_hmm.errors import PrivacyParameterError

__all__ = ["check_delta", "check_epsilon", "check_points", "check_sensitivity"]


def _shown(value: object) -> str:
    """A value as the user wrote it: numpy scalars as plain Python values."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _real(value: object, name: str, error: type[Exception]) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a real number, got {_shown(value)}")
    return float(value)


def check_epsilon(
    epsilon: object, name: str = "epsilon", *, error: type[Exception] = PrivacyParameterError
) -> float:
    """Return ``epsilon`` as a float if it is a finite real > 0, else raise ``error``."""
    value = _real(epsilon, name, error)
    if not (math.isfinite(value) and value > 0):
        raise error(f"{name} must be finite and > 0, got {_shown(epsilon)}")
    return value


def check_sensitivity(
    sensitivity: object,
    name: str = "sensitivity",
    *,
    error: type[Exception] = PrivacyParameterError,
) -> float:
    """Return ``sensitivity`` as a float if it is a finite real >= 0, else raise ``error``."""
    value = _real(sensitivity, name, error)
    if not (math.isfinite(value) and value >= 0):
        raise error(f"{name} must be finite and >= 0, got {_shown(sensitivity)}")
    return value


def check_delta(
    delta: object, name: str = "delta", *, error: type[Exception] = PrivacyParameterError
) -> float:
    """Return ``delta`` as a float if it is a real in (0, 1), else raise ``error``."""
    value = check_epsilon(delta, name, error=error)
    if value >= 1:
        raise error(f"{name} must be in (0, 1), got {_shown(delta)}")
    return value


def check_points(
    points: object,
    name: str,
    *,
    error: type[Exception] = PrivacyParameterError,
    shape_error: type[Exception] | None = None,
    vector_as_column: bool = True,
) -> np.ndarray:
    """``points`` as a float array of shape (n, d), n and d >= 1, every entry finite, else
    ``error`` (``shape_error``, if given, for a wrong shape).  A 1-D array is n points of
    one dimension with ``vector_as_column``, a wrong shape without."""
    try:
        arr = np.asarray(points, dtype=float)
    except (TypeError, ValueError) as exc:
        raise error(f"{name} must be a numeric array: {exc}") from None
    if vector_as_column and arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise (shape_error or error)(
            f"{name} must be a non-empty (n, d) array, got shape {np.shape(points)}"
        )
    if not np.all(np.isfinite(arr)):
        raise error(f"{name} contains NaN or inf")
    return arr
