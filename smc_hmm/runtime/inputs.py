"""Loaders for private inputs named in a party's configuration table.

A protocol role's ``load(value, base_dir)`` turns the configured value (a
path relative to the configuration file, or inline data) into its private
input; these are the common cases.  Every failure is a :class:`ConfigError`
naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from smc_hmm.errors import ConfigError, InvalidInputError, SmcHmmError

__all__ = ["load_array", "load_frames", "load_models", "load_vector", "resolve_path"]


def resolve_path(value, base: Path) -> Path:
    """A configured path, relative to the configuration's directory."""
    if not isinstance(value, str | Path):
        raise ConfigError(f"expected a file path, got {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def load_array(value, base: Path) -> np.ndarray:
    """Inline numbers (a list) or a .npy / .json / .csv / .txt file, as an ndarray."""
    if isinstance(value, list):
        return np.asarray(value)
    path = resolve_path(value, base)
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if path.suffix == ".json":
            return np.asarray(json.loads(path.read_text()))
        if path.suffix in (".csv", ".txt"):
            return np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None, ndmin=1)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not a numeric array: {e}") from e
    raise ConfigError(f"{path.name}: expected a .npy, .json, .csv or .txt file")


def load_frames(value, base: Path, featurise) -> np.ndarray:
    """Feature frames: a WAV recording, which ``featurise(path)`` turns into frames on the
    party's own machine (the protocol's pipeline, imported only when a WAV is given), or
    an array as :func:`load_array`.  A recording the pipeline refuses is a ConfigError."""
    if isinstance(value, str) and value.lower().endswith(".wav"):
        try:
            return featurise(resolve_path(value, base))
        except InvalidInputError as e:
            raise ConfigError(str(e)) from e
    return load_array(value, base)


def load_vector(value, base: Path) -> np.ndarray:
    """A numeric vector (float64), inline or from a file."""
    arr = load_array(value, base)
    try:
        arr = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"the input is not a numeric vector: {e}") from e
    if arr.ndim != 1:
        raise ConfigError(f"the input must be a vector, got shape {arr.shape}")
    return arr


def load_models(value, base: Path) -> list:
    """HMMs from a model file written by :func:`smc_hmm.hmm.io.save_models`."""
    from smc_hmm.hmm.io import load_models as _load

    path = resolve_path(value, base)
    try:
        return _load(path)[0]
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
