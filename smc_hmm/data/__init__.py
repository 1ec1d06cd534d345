"""Bundled real-speech data: features and keyword HMMs derived from the Free Spoken Digit Dataset.

The files in ``smc_hmm/data/fsdd/`` are made by ``scripts/make_speech_data.py`` and
described in ``docs/speech-models.md`` (features, splits, training, accuracies); they
serve the secure keyword recognition of thesis 003, section 4.2.1. They are derived from
the Free Spoken Digit Dataset (github.com/Jakobovski/free-spoken-digit-dataset, commit
26eb9aa) and licensed CC BY-SA 4.0: see ``smc_hmm/data/fsdd/NOTICE``.

The loaders read the files through :mod:`importlib.resources`, so they work from an
installed package and need neither the recordings nor librosa.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.features import FeaturePipeline
from smc_hmm.hmm.io import load_models
from smc_hmm.hmm.models import GaussianHMM

__all__ = [
    "DIGIT_WORDS",
    "NOTICE_TEXT",
    "FSDD_ENV",
    "FSDD_NAME",
    "TestUtterance",
    "bundled_file",
    "fsdd_dir",
    "BACKGROUND_LABEL",
    "load_background_model",
    "load_bundled_models",
    "load_garbage_model",
    "load_manifest",
    "load_pipeline",
    "load_recordings",
    "load_test_utterances",
]

#: the environment variable naming the FSDD folder (the one holding ``recordings/``)
FSDD_ENV = "FSDD_DIR"
FSDD_SOURCE = (
    "the Free Spoken Digit Dataset (FSDD; github.com/Jakobovski/free-spoken-digit-dataset, "
    "CC BY-SA 4.0; the bundled data come from its commit 26eb9aa)"
)
#: the name of an FSDD recording, DIGIT_SPEAKER_INDEX.wav (groups: digit, speaker, index)
FSDD_NAME = re.compile(r"^(\d)_([a-z]+)_(\d+)\.wav$")


def fsdd_dir(path: str | Path | None = None) -> Path:
    """The folder of the FSDD recordings: ``path``, else the ``FSDD_DIR`` variable.

    Only the scripts that retrain the speech models or use the training split need
    the recordings (the bundled files need none).  Raises :class:`ConfigError`,
    saying where to get them, when neither names a folder holding ``recordings/``.
    """
    given = path if path is not None else os.environ.get(FSDD_ENV)
    if not given:
        raise ConfigError(
            f"the FSDD recordings are not bundled: get {FSDD_SOURCE}, then give its folder "
            f"(the one holding recordings/) as an argument or set {FSDD_ENV}=DIR"
        )
    folder = Path(given)
    if not (folder / "recordings").is_dir():
        raise ConfigError(
            f"{folder} holds no recordings/ folder: it should be a checkout of {FSDD_SOURCE}"
        )
    return folder


DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
"""Model labels, in digit order: model ``d`` of a bundled file recognises the digit ``d``."""

NOTICE_TEXT = """\
The files in this directory (extracted MFCC features of recordings, utterance-level
speaker features and hidden Markov models trained on such features) are derived from
the Free Spoken Digit Dataset (FSDD) and its contributors:

    Free Spoken Digit Dataset, https://github.com/Jakobovski/free-spoken-digit-dataset
    (commit 26eb9aa), recordings of the speakers jackson, nicolas, theo, yweweler and
    george.

The FSDD is licensed under the Creative Commons Attribution-ShareAlike 4.0 International
license (CC BY-SA 4.0). As adaptations of it, these derived files are licensed under the
same license, CC BY-SA 4.0: https://creativecommons.org/licenses/by-sa/4.0/
(full legal code: https://creativecommons.org/licenses/by-sa/4.0/legalcode).

Changes made: the recordings were converted to 39-dimensional MFCC features (13
cepstra, deltas, delta-deltas; with a noise floor and per-utterance cepstral mean
normalisation for the digit models, without for the spotting keyword models) and used
to train Gaussian hidden Markov models, by scripts/make_speech_data.py of the smc-hmm
project; see docs/speech-models.md.  The background model (background_*.npz) is
trained on generated silence and white noise, not on the recordings.
speaker_features.npz holds per recording the mean and standard deviation of its 13
static cepstra, made by scripts/make_speaker_features.py; see docs/lmgmm.md.
The rest of the smc-hmm project is not derived from the FSDD and keeps its own license.
"""

_PACKAGE = "smc_hmm.data"
_DIR = "fsdd"
_KINDS = ("diag", "full")


def bundled_file(name: str) -> Any:
    """The bundled data file ``name`` (in ``smc_hmm/data/fsdd/``, read through
    :mod:`importlib.resources`)."""
    return resources.files(_PACKAGE).joinpath(_DIR, name)


def load_recordings(
    name: str, frames: str, keys: tuple[str, ...], what: str
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A bundled file of recordings stored end to end: its arrays (``frames``, ``"lengths"``
    and ``keys``) and the frame where each recording starts, then the total (``bounds[i]``
    to ``bounds[i + 1]`` is recording i). ``what`` names the file in errors."""
    with resources.as_file(bundled_file(name)) as path:
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in (frames, "lengths", *keys)}
        except (OSError, ValueError, KeyError) as exc:
            raise InvalidInputError(f"cannot read the {what}: {exc}") from exc
    lengths = arrays["lengths"].astype(np.int64)
    if lengths.sum() != arrays[frames].shape[0]:
        raise InvalidInputError(f"{what}: lengths do not match the frames")
    return arrays, np.concatenate([[0], np.cumsum(lengths)])


def _check_kind(kind: str) -> str:
    if kind not in _KINDS:
        raise ConfigError(f"kind must be 'diag' or 'full', got {kind!r}")
    return kind


def _load_model_file(name: str) -> tuple[list[GaussianHMM], list[str]]:
    with resources.as_file(bundled_file(name)) as path:
        models, labels = load_models(path)
    if labels is None or not all(isinstance(m, GaussianHMM) for m in models):
        raise ConfigError(f"bundled file {name} does not hold labelled Gaussian HMMs")
    return models, labels  # type: ignore[return-value]


def load_pipeline() -> FeaturePipeline:
    """The feature pipeline of the bundled models, with its global standardisation."""
    return FeaturePipeline.from_json(bundled_file("pipeline.json").read_text(encoding="utf-8"))


def load_manifest() -> dict[str, Any]:
    """Provenance, training settings, keywords and plaintext results of the bundled data."""
    return json.loads(bundled_file("manifest.json").read_text(encoding="utf-8"))


def load_bundled_models(
    kind: Literal["diag", "full"] = "diag",
) -> tuple[list[GaussianHMM], list[str]]:
    """The ten left-to-right digit HMMs (8 states, ``docs/speech-models.md``) and their
    labels ``"zero"`` .. ``"nine"``.

    They expect features standardised by :func:`load_pipeline` (as returned by
    :func:`load_test_utterances` with ``standardised=True``).
    """
    models, labels = _load_model_file(f"models_{_check_kind(kind)}.npz")
    if tuple(labels) != DIGIT_WORDS:
        raise ConfigError(f"bundled models have labels {labels}, expected {list(DIGIT_WORDS)}")
    return models, labels


def load_garbage_model(kind: Literal["diag", "full"] = "diag") -> tuple[GaussianHMM, list[str]]:
    """The garbage (background) model and the keyword labels it was trained against.

    It is trained on the training utterances of every digit that is not a keyword;
    an utterance is spotted as keyword ``k`` if model ``k`` scores above the garbage model
    and above the other keywords.
    """
    models, _ = _load_model_file(f"garbage_{_check_kind(kind)}.npz")
    return models[0], list(load_manifest()["keywords"])


#: the background model's label among Bob's models (``smc-hmm keyword --garbage``)
BACKGROUND_LABEL = "background"


def load_background_model(kind: Literal["diag", "full"] = "diag") -> tuple[GaussianHMM, float]:
    """The background (silence and noise) model and its public margin in nats.

    With the ten digit models and this model as the keyword protocol's ``garbage``
    (``margin`` nats), an utterance is "no keyword" unless its best digit beats the
    background model by more than the margin: silence and white noise are rejected
    (``docs/speech-models.md`` gives the rates).
    """
    models, _ = _load_model_file(f"background_{_check_kind(kind)}.npz")
    return models[0], float(load_manifest()["background"]["margin"])


@dataclass(frozen=True, eq=False)
class TestUtterance:
    """One test-split recording: features (T, 39), its digit, speaker and index (0-4)."""

    __test__ = False  # not a pytest test class

    features: np.ndarray
    digit: int
    speaker: str
    index: int

    @property
    def label(self) -> str:
        """The digit as a model label (``"zero"`` .. ``"nine"``)."""
        return DIGIT_WORDS[self.digit]


def load_test_utterances(standardised: bool = True) -> list[TestUtterance]:
    """The 250 test-split utterances (indices 0-4 of every speaker and digit).

    The file stores raw MFCC features as float32; with ``standardised=True`` they are
    mapped by the bundled pipeline's standardisation, ready for the bundled models.
    Features are float64 arrays.
    """
    pipeline = load_pipeline() if standardised else None
    arrays, bounds = load_recordings(
        "test_features.npz", "features", ("digits", "speakers", "indices"), "bundled test features"
    )
    utterances = []
    for i in range(len(bounds) - 1):
        features = arrays["features"][bounds[i] : bounds[i + 1]].astype(np.float64)
        if pipeline is not None:
            features = pipeline.standardise(features)
        utterances.append(
            TestUtterance(
                features,
                int(arrays["digits"][i]),
                str(arrays["speakers"][i]),
                int(arrays["indices"][i]),
            )
        )
    return utterances
