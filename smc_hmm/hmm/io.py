"""Model files: several HMMs in one ``.npz`` archive (no pickle: loaded with allow_pickle=False).

Layout: ``kind`` ("discrete" or "gaussian"), ``count`` (an integer >= 1), and per
model ``i`` in ``0 .. count-1`` the arrays ``{i}/startprob``, ``{i}/transmat`` and
``{i}/emissionprob`` (discrete) or ``{i}/means``, ``{i}/covars``,
``{i}/covariance_type`` (Gaussian), plus optional ``{i}/label`` strings (every model
labelled, or none) and an optional ``pipeline`` (the feature pipeline's parameters as
a JSON string).  :func:`load_models` accepts nothing else: a file that is not a
readable ``.npz`` archive, a member it does not expect, a missing member, a
non-numeric parameter array or an invalid model raises
:class:`~smc_hmm.errors.ModelError` naming the file; a file that cannot be opened
at all raises :class:`~smc_hmm.errors.InvalidInputError`.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smc_hmm.errors import InvalidInputError, ModelError
from smc_hmm.hmm.models import HMM, DiscreteHMM, GaussianHMM

#: the per-model members of each kind (``label`` is optional)
_FIELDS = {
    "discrete": ("startprob", "transmat", "emissionprob"),
    "gaussian": ("startprob", "transmat", "means", "covars", "covariance_type"),
}
_MEMBER = re.compile(r"^(0|[1-9][0-9]*)/([a-z_]+)$")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header, an empty archive
_NPY_MAGIC = b"\x93NUMPY"


def save_models(
    path: str | Path,
    models: Sequence[HMM],
    labels: Sequence[str] | None = None,
    *,
    pipeline: Mapping[str, Any] | None = None,
) -> None:
    """Write ``models`` (all discrete or all Gaussian) and optional labels to ``path``.

    ``pipeline``: the parameters of the feature pipeline the models expect (a JSON
    object, e.g. :meth:`smc_hmm.features.FeaturePipeline.to_dict`), so that a
    recording gives the same features wherever the file goes
    (:func:`load_model_pipeline`).
    """
    models = list(models)
    if not models:
        raise InvalidInputError("nothing to save")
    if labels is not None and len(labels) != len(models):
        raise InvalidInputError("one label per model")
    kind = _kind(models)
    arrays: dict[str, np.ndarray] = {"kind": np.array(kind), "count": np.array(len(models))}
    for i, m in enumerate(models):
        arrays[f"{i}/startprob"] = m.startprob
        arrays[f"{i}/transmat"] = m.transmat
        if kind == "discrete":
            arrays[f"{i}/emissionprob"] = m.emissionprob
        else:
            arrays[f"{i}/means"] = m.means
            arrays[f"{i}/covars"] = m.covars
            arrays[f"{i}/covariance_type"] = np.array(m.covariance_type)
        if labels is not None:
            arrays[f"{i}/label"] = np.array(str(labels[i]))
    if pipeline is not None:
        arrays["pipeline"] = np.array(json.dumps(dict(pipeline), sort_keys=True))
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_models(path: str | Path) -> tuple[list[HMM], list[str] | None]:
    """``(models, labels or None)`` from a file written by :func:`save_models`.

    Raises :class:`~smc_hmm.errors.InvalidInputError` if the file cannot be read and
    :class:`~smc_hmm.errors.ModelError` if it is not a valid model file.
    """
    files = _read_archive(path)
    kind = _kind_member(files, path)
    count = _count_member(files, path)
    _check_members(files, kind, count, path)
    models = [_model(files, kind, i, path) for i in range(count)]
    return models, _labels(files, count, path)


def _check_members(files: dict, kind: str, count: int, path) -> None:
    """Refuse a member that is not a field (or label) of a ``kind`` model, and model
    numbers other than 0 .. count - 1."""
    fields = _FIELDS[kind]
    indices: set[int] = set()
    for name in files:
        if name in ("kind", "count", "pipeline"):
            continue
        match = _MEMBER.match(name)
        if match is None or match.group(2) not in (*fields, "label"):
            raise ModelError(
                f"model file {path} has an unexpected member '{name}' "
                f"(a {kind} model file holds {_layout(kind)})"
            )
        indices.add(int(match.group(1)))
    if len(indices) != count or max(indices) != count - 1:  # i.e. indices != {0 .. count-1}
        held = _ranges(sorted(indices))
        raise ModelError(
            f"model file {path} declares count = {count} but holds arrays for "
            f"models {held} (expected 0 .. {count - 1})"
        )


def _model(files: dict, kind: str, i: int, path) -> HMM:
    """Model ``i`` of the file, from its fields."""
    fields = _FIELDS[kind]
    for field in fields:
        if f"{i}/{field}" not in files:
            raise ModelError(
                f"model file {path} lacks '{i}/{field}' (a {kind} model file holds {_layout(kind)})"
            )
    params = [
        _numeric(files, f"{i}/{field}", path) for field in fields if field != "covariance_type"
    ]
    if kind == "gaussian":
        covariance_type = _string(files, f"{i}/covariance_type", path)
        if covariance_type not in ("diag", "full"):
            raise ModelError(
                f"model file {path}: '{i}/covariance_type' must be 'diag' or 'full', "
                f"got '{covariance_type}'"
            )
    try:
        if kind == "discrete":
            return DiscreteHMM(*params)
        return GaussianHMM(*params, covariance_type)
    except ModelError as e:
        raise ModelError(f"model file {path}, model {i}: {e}") from None


def _labels(files: dict, count: int, path) -> list[str] | None:
    """The models' labels: every model's, or None when no model has one."""
    labelled = [i for i in range(count) if f"{i}/label" in files]
    if not labelled:
        return None
    if len(labelled) != count:
        missing = ", ".join(str(i) for i in range(count) if i not in labelled)
        raise ModelError(
            f"model file {path} labels only some models (no label for {missing}): "
            "label every model or none"
        )
    return [_string(files, f"{i}/label", path) for i in range(count)]


def load_model_pipeline(path: str | Path) -> dict[str, Any] | None:
    """The feature-pipeline parameters stored with the models at ``path`` (None if the
    file has none).  Raises :class:`~smc_hmm.errors.ModelError` if they are malformed."""
    files = _read_archive(path)
    if "pipeline" not in files:
        return None
    try:
        value = json.loads(_string(files, "pipeline", path))
    except json.JSONDecodeError as e:
        raise ModelError(f"model file {path}: 'pipeline' is not JSON ({e})") from None
    if not isinstance(value, dict):
        raise ModelError(f"model file {path}: 'pipeline' must be a JSON object")
    return value


def _read_archive(path: str | Path) -> dict[str, object]:
    """Every member of the ``.npz`` archive at ``path``, loaded without pickle."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as e:
        raise InvalidInputError(f"cannot read model file {path}: {e.strerror or e}") from e
    if head.startswith(_NPY_MAGIC):
        raise ModelError(
            f"model file {path} is a single .npy array, not a model archive "
            "(a .npz file written by smc_hmm.hmm.io.save_models)"
        )
    if not head.startswith(_ZIP_MAGIC):
        raise ModelError(
            f"{path} is not a model file: not a .npz archive "
            "(expected a file written by smc_hmm.hmm.io.save_models)"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            if not isinstance(data, np.lib.npyio.NpzFile):  # pragma: no cover - sniffed above
                raise ModelError(f"{path} is not a model file: not a .npz archive")
            return dict(data.items())
    except ModelError:
        raise
    except ValueError as e:
        if "pickle" in str(e):
            raise ModelError(
                f"model file {path} holds object (pickled) arrays, which model "
                "files never contain; refusing to load them"
            ) from None
        raise ModelError(f"model file {path} is not a valid .npz archive: {e}") from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError) as e:
        raise ModelError(
            f"model file {path} is not a valid .npz archive (truncated or corrupt): {_describe(e)}"
        ) from None


def _ranges(indices: list[int]) -> str:
    """``"0, 1, 5"`` or, for many indices, ``"0, 1, 2, ... (12 in all)"``."""
    if not indices:
        return "none"
    shown = ", ".join(str(i) for i in indices[:8])
    return shown if len(indices) <= 8 else f"{shown}, ... ({len(indices)} in all)"


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _layout(kind: str) -> str:
    fields = ", ".join(f"'{{i}}/{f}'" for f in _FIELDS[kind])
    return f"'kind', 'count' and per model {fields} and optionally '{{i}}/label'"


def _array(files: dict, name: str, path) -> np.ndarray:
    value = files[name]
    if not isinstance(value, np.ndarray):
        raise ModelError(f"model file {path}: member '{name}' is not a numpy array")
    return value


def _string(files: dict, name: str, path) -> str:
    value = _array(files, name, path)
    if value.shape != () or value.dtype.kind != "U":
        raise ModelError(
            f"model file {path}: '{name}' must be a single string, got {_summary(value)}"
        )
    return str(value)


def _numeric(files: dict, name: str, path) -> np.ndarray:
    value = _array(files, name, path)
    if value.dtype.kind not in "iuf":
        raise ModelError(
            f"model file {path}: '{name}' must be a numeric array, got {_summary(value)}"
        )
    return value


def _kind_member(files: dict, path) -> str:
    if "kind" not in files:
        raise ModelError(f"model file {path} lacks 'kind' (not a file written by save_models?)")
    value = _array(files, "kind", path)
    kind = str(value) if value.shape == () and value.dtype.kind == "U" else None
    if kind not in _FIELDS:
        shown = f"'{kind}'" if kind is not None else _summary(value)
        raise ModelError(f"model file {path}: kind must be 'discrete' or 'gaussian', got {shown}")
    return kind


def _count_member(files: dict, path) -> int:
    if "count" not in files:
        raise ModelError(f"model file {path} lacks 'count'")
    value = _array(files, "count", path)
    if value.shape != () or value.dtype.kind not in "iu":
        raise ModelError(
            f"model file {path}: count must be a single integer, got {_summary(value)}"
        )
    count = int(value)
    if count < 1:
        raise ModelError(
            f"model file {path}: count must be >= 1 (the number of models), got {count}"
        )
    return count


def _summary(value: np.ndarray) -> str:
    """A short, numpy-repr-free description of an unexpected array."""
    if value.shape == () and value.dtype.kind in "biufU":
        item = value.item()
        return f"'{item}'" if isinstance(item, str) else str(item)
    return f"an array of dtype {value.dtype} and shape {value.shape}"


def _kind(models: Sequence[HMM]) -> str:
    if all(isinstance(m, DiscreteHMM) for m in models):
        return "discrete"
    if all(isinstance(m, GaussianHMM) for m in models):
        return "gaussian"
    raise InvalidInputError("a model file holds only discrete or only Gaussian HMMs")
