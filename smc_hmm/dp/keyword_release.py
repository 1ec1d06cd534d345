"""The files of ``smc-hmm release hmm --keyword-models``: labelled training utterances in,
DP keyword HMMs and their guarantee out.

The file side of :mod:`smc_hmm.dp.keyword_models` (the command, its options and output
are :mod:`smc_hmm.cli.release.keyword_models`): it reads labelled training utterances
(:func:`read_training_data`) for :func:`~smc_hmm.dp.keyword_models.release_keyword_models`
and writes (:func:`save_release`)

- the model file ``--out`` (:func:`smc_hmm.hmm.io.save_models`: one model per label and
  the feature pipeline with the released standardisation), which ``smc-hmm keyword
  --models FILE`` and the secure keyword protocol use unchanged;
- the guarantee beside it, ``<out stem>.privacy.json`` (the same sidecar name as every
  ``release hmm``): eps, delta, neighbouring relation, accountant, each Gaussian
  mechanism, what is public and what is not covered, and the SHA-256 of the model file.

Training data (``--data``):

- a directory of recordings named ``<digit>_<speaker>_<index>.wav`` (the Free Spoken
  Digit Dataset's naming; the directory itself or its ``recordings/`` subdirectory),
  labelled ``"zero"`` .. ``"nine"``; recordings whose index is in ``--skip-indices``
  (default 0-4: the bundled public test split) are left out. Features are extracted
  with the bundled pipeline's parameters (:mod:`smc_hmm.features`);
- or an ``.npz`` file with raw features in the layout of the bundled test split:
  ``features`` (all frames, (N, D)), ``lengths`` (frames per utterance) and ``digits``
  (0-9) or ``labels`` (strings; then ``--labels`` must declare the label set).

**Labels are public.** The released labels are ``--labels A,B,...`` if given, else the
bundled data's documented list ``"zero"`` .. ``"nine"``
(:data:`smc_hmm.data.DIGIT_WORDS`); they never come from the data, so every declared
label gets a model even when no utterance carries it (a model of pure noise).

**Records never make the release fail** (:data:`smc_hmm.dp.keyword_models.RECORD_RULE`):
a recording that cannot be read or featurised, an utterance of an undeclared label (or a
digit outside 0-9), an utterance of zero frames or with a non-finite value is dropped;
an utterance shorter than K frames is padded. An empty data set releases pure noise.
Adding or removing one utterance therefore never changes whether the release succeeds
nor which labels it releases. Only the file itself can be refused (not an npz, members
missing or of the wrong shape or type, ``lengths`` that do not split the frames, frames
of another dimension than the pipeline's): that is its format, not a record.

Every bad input raises a typed :class:`~smc_hmm.errors.SmcHmmError`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np

from smc_hmm.errors import ConfigError, InvalidInputError

__all__ = [
    "read_labelled_features",
    "read_labelled_recordings",
    "read_training_data",
    "save_release",
]

_FSDD_NAME = re.compile(r"^(\d)_([A-Za-z]+)_(\d+)\.wav$")


def _recordings(directory: Path) -> list[Path]:
    folder = directory / "recordings" if (directory / "recordings").is_dir() else directory
    return sorted(p for p in folder.glob("*.wav") if _FSDD_NAME.match(p.name))


def read_labelled_recordings(
    directory: str | Path, skip_indices: Iterable[int] = range(5), max_frames: int | None = None
) -> dict[str, list[np.ndarray]]:
    """Raw features per digit word of FSDD-named recordings (module docstring); a
    recording that cannot be read or featurised is dropped, never an error, and so is one
    whose header says it holds more than ``max_frames`` frames' worth of audio (checked
    before its samples are read: a public rule on each file alone)."""
    from smc_hmm.data import DIGIT_WORDS, load_pipeline

    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"{directory} is not a directory of recordings")
    skip = set(skip_indices)
    extractor = replace(load_pipeline(), mean=None, std=None)
    data: dict[str, list[np.ndarray]] = {word: [] for word in DIGIT_WORDS}
    for path in _recordings(directory):
        match = _FSDD_NAME.match(path.name)
        assert match is not None
        if int(match[3]) in skip:
            continue
        try:
            signal = extractor.read_wav(path, max_frames)
            features = extractor.extract(signal)
        except InvalidInputError:  # the public rule: an unreadable record is dropped
            continue
        data[DIGIT_WORDS[int(match[1])]].append(features)
    return data


def read_labelled_features(
    path: str | Path, labels: Iterable[str] | None = None, n_features: int | None = None
) -> dict[str, list[np.ndarray]]:
    """Raw features per label from an ``.npz`` file (module docstring).

    The file's format is checked (a bad one raises ``ConfigError``); its records never
    raise: an utterance of zero frames is left out here, the others are handed to the
    release's public rule.  ``labels``: the declared label set, required when the file
    holds string ``labels`` (free text: the data cannot declare them); ``n_features``:
    the dimension the frames must have (the feature pipeline's), if given.
    """
    from smc_hmm.data import DIGIT_WORDS

    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            members = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError) as exc:
        raise ConfigError(f"{path} is not a readable .npz archive: {exc}") from None
    if "features" not in members or "lengths" not in members:
        raise ConfigError(f"{path}: needs members 'features' and 'lengths'")
    features = members["features"]
    lengths = members["lengths"]
    if features.ndim != 2 or lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise ConfigError(f"{path}: 'features' must be (N, D) and 'lengths' 1-d integers")
    if features.dtype.kind not in "iuf":
        raise ConfigError(f"{path}: 'features' must be numeric")
    if n_features is not None and features.shape[1] != n_features:
        raise ConfigError(
            f"{path}: frames of {features.shape[1]} features, the feature pipeline's have "
            f"{n_features}"
        )
    if np.any(lengths < 0) or int(lengths.sum()) != features.shape[0]:
        raise ConfigError(f"{path}: 'lengths' do not split the {features.shape[0]} frames")
    if "labels" in members:
        if labels is None:
            raise ConfigError(
                f"{path} holds string labels: declare the public label set with --labels "
                "A,B,... (labels must not come from the data)"
            )
        if members["labels"].ndim != 1 or members["labels"].dtype.kind not in "US":
            raise ConfigError(f"{path}: 'labels' must be a 1-d array of strings")
        tags = [str(v) for v in members["labels"]]
    elif "digits" in members:
        digits = members["digits"]
        if digits.ndim != 1 or digits.dtype.kind not in "iu":
            raise ConfigError(f"{path}: 'digits' must be 1-d integers")
        # a digit outside 0-9 has no label: its utterance is dropped (the public rule)
        tags = [DIGIT_WORDS[int(v)] if 0 <= int(v) <= 9 else "" for v in digits]
    else:
        raise ConfigError(f"{path}: needs member 'labels' or 'digits'")
    if len(tags) != len(lengths):
        raise ConfigError(f"{path}: one label per utterance")
    declared = list(DIGIT_WORDS if labels is None else labels)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    data: dict[str, list[np.ndarray]] = {label: [] for label in declared}
    for i, tag in enumerate(tags):
        if tag in data and lengths[i] > 0:
            data[tag].append(features[bounds[i] : bounds[i + 1]].astype(np.float64))
    return data


def read_training_data(
    path: str | Path,
    labels: Iterable[str] | None = None,
    skip_indices: Iterable[int] = range(5),
    max_frames: int | None = None,
) -> dict[str, list[np.ndarray]]:
    """Raw features per label from ``--data``: a directory of FSDD-named recordings
    (:func:`read_labelled_recordings`, leaving out ``skip_indices`` and recordings longer
    than ``max_frames``) or an ``.npz`` file (:func:`read_labelled_features`, frames of the
    bundled pipeline's dimension)."""
    path = Path(str(path))
    if path.is_dir():
        return read_labelled_recordings(path, skip_indices, max_frames)
    if path.suffix.lower() == ".npz" and path.is_file():
        from smc_hmm.data import load_pipeline

        return read_labelled_features(path, labels, load_pipeline().n_features)
    raise ConfigError(f"--data {path}: expected a recordings directory or an .npz file")


def save_release(release, out: str | Path, guarantee_path: str | Path) -> dict:
    """Write the model file and the guarantee; returns the guarantee as written."""
    from smc_hmm.hmm.io import save_models

    out = Path(out)
    save_models(out, release.models, release.labels, pipeline=release.pipeline.to_dict())
    guarantee = {
        **release.guarantee,
        "model_sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        "model_file": out.name,
    }
    try:
        Path(guarantee_path).write_text(
            json.dumps(guarantee, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
    except OSError as exc:
        raise ConfigError(f"cannot write {guarantee_path}: {exc.strerror or exc}") from exc
    return guarantee
