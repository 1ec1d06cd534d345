"""Model files: several HMMs in one ``.npz`` archive (no pickle: loaded with allow_pickle=False).

Layout: ``kind`` ("discrete" or "gaussian"), ``count``, and per model ``i``
the arrays ``{i}/startprob``, ``{i}/transmat`` and ``{i}/emissionprob``
(discrete) or ``{i}/means``, ``{i}/covars``, ``{i}/covariance_type`` (Gaussian),
plus optional ``{i}/label`` strings.  Every model is validated on load.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from smc_hmm.errors import InvalidInputError, ModelError
from smc_hmm.hmm.models import HMM, DiscreteHMM, GaussianHMM


def save_models(path: str | Path, models: Sequence[HMM],
                labels: Sequence[str] | None = None) -> None:
    """Write ``models`` (all discrete or all Gaussian) and optional labels to ``path``."""
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
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_models(path: str | Path) -> tuple[list[HMM], list[str] | None]:
    """``(models, labels or None)`` from a file written by :func:`save_models`."""
    try:
        with np.load(path, allow_pickle=False) as data:
            files = dict(data.items())
    except (OSError, ValueError) as e:
        raise InvalidInputError(f"cannot read model file {path}: {e}") from e
    try:
        kind, count = str(files["kind"]), int(files["count"])
        models: list[HMM] = []
        for i in range(count):
            common = (files[f"{i}/startprob"], files[f"{i}/transmat"])
            if kind == "discrete":
                models.append(DiscreteHMM(*common, files[f"{i}/emissionprob"]))
            elif kind == "gaussian":
                models.append(GaussianHMM(*common, files[f"{i}/means"], files[f"{i}/covars"],
                                          str(files[f"{i}/covariance_type"])))
            else:
                raise ModelError(f"unknown model kind {kind!r} in {path}")
        labels = [str(files[f"{i}/label"]) for i in range(count)] \
            if count and "0/label" in files else None
    except KeyError as e:
        raise ModelError(f"model file {path} lacks {e.args[0]!r}") from None
    return models, labels


def _kind(models: Sequence[HMM]) -> str:
    if all(isinstance(m, DiscreteHMM) for m in models):
        return "discrete"
    if all(isinstance(m, GaussianHMM) for m in models):
        return "gaussian"
    raise InvalidInputError("a model file holds only discrete or only Gaussian HMMs")
