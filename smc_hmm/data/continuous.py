"""Bundled continuous speech for keyword spotting: recordings of 3 to 5 joined FSDD digits
with their true word boundaries, and one filler (garbage) model per keyword.

Made by ``scripts/make_continuous_speech.py`` from the Free Spoken Digit Dataset (CC BY-SA
4.0, ``smc_hmm/data/fsdd/NOTICE``) and described in ``docs/spotting.md``: the test
recordings join test-split recordings (indices 0-4, never seen by a model) with short
noise pauses.  Spotting's models are trained on the training split (indices 5-49) of all
five speakers by the recipe ``smc-hmm bench speech`` measures for voices the models never
heard (:func:`smc_hmm.data.recipe.train_spotting`, ``docs/speech-models.md``): keyword
models of 8 states trained on words cut from continuous recordings of one speaker each,
normalised as a whole (:func:`load_spotting_pipeline`: noise floor and cepstral mean over
the recording, then a global standardisation); filler k a pause state and the other nine
keyword models in parallel.  Keyword spotting composes filler k and keyword model k in
the F-K loop with the glue of :func:`spotting_glue` (:func:`spotting_model`,
:mod:`smc_hmm.hmm.spotting`).

The recordings are stored as their 13 raw static MFCCs (float32); :func:`load_continuous_test`
recomputes the deltas as the bundled pipeline does and standardises, so the features are
what ``load_pipeline().features`` gives on the joined signal up to float32 rounding of
the statics.  Neither the WAVs nor librosa are needed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from smc_hmm.data import bundled_file
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.features import delta_features
from smc_hmm.hmm.io import load_models
from smc_hmm.hmm.spotting import SpottingLayout, compose, spotting_fillers

__all__ = [
    "CONTINUOUS_NOTICE",
    "FILLER_LABELS",
    "STATIC_MFCC",
    "ContinuousRecording",
    "SpokenDigits",
    "load_continuous_manifest",
    "load_continuous_test",
    "load_fillers",
    "load_spoken_digits",
    "load_spotting_keywords",
    "load_spotting_pause",
    "load_spotting_pipeline",
    "spotting_glue",
    "load_spotting_models",
    "spotting_model",
    "statics_to_features",
    "word_frames",
]

#: the stored columns: the 13 static MFCCs (deltas are recomputed on load)
STATIC_MFCC = 13
FILLER_LABELS = tuple(
    f"filler-{w}"
    for w in ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
)

CONTINUOUS_NOTICE = """\
The keyword-spotting files (spotting_keywords_diag.npz, continuous_test.npz,
continuous_manifest.json) are derived from the same recordings: continuous recordings
made by joining test-split recordings of 3 to 5 digits with short noise pauses (stored as
their MFCC features, with the true word boundaries), and keyword HMMs and a pause model
trained on the training-split recordings so joined, by
scripts/make_continuous_speech.py of the smc-hmm project (see docs/spotting.md). They
are licensed CC BY-SA 4.0 like the other derived files here.
"""


def word_frames(first_sample: int, stop_sample: int, hop: int) -> tuple[int, int]:
    """The frames (first, last inclusive) of a word spanning samples [first, stop): frame
    k is centred at sample k * hop and belongs to the word if its centre lies inside."""
    return math.ceil(first_sample / hop), math.ceil(stop_sample / hop) - 1


@dataclass(frozen=True, eq=False)
class SpokenDigits:
    """A bundled recording of spoken digits: standardised features (T, 39), the digits
    spoken in order and each word's (first, last) frame."""

    __test__ = False

    features: np.ndarray
    digits: tuple[int, ...]
    words: tuple[tuple[int, int], ...]


@dataclass(frozen=True, eq=False)
class ContinuousRecording(SpokenDigits):
    """One continuous test recording: :class:`SpokenDigits` and each word's speaker."""

    speakers: tuple[str, ...]

    def span_of(self, digit: int) -> tuple[int, int] | None:
        """The true (first, last) frame of ``digit``, or None if it is not spoken."""
        return self.words[self.digits.index(digit)] if digit in self.digits else None


def statics_to_features(static: np.ndarray, pipeline) -> np.ndarray:
    """The pipeline's standardised features (T, 39) from 13 static MFCCs (T, 13): the
    deltas recomputed as the pipeline computes them."""
    static = np.asarray(static, dtype=np.float64)
    raw = np.concatenate(
        [static, *(delta_features(static, pipeline.delta_width, order=o) for o in (1, 2))],
        axis=1,
    )
    return (raw - np.asarray(pipeline.mean)) / np.asarray(pipeline.std)


def load_spoken_digits(kind, name: str, what: str, pipeline, speakers, select=None) -> list:
    """The bundled recordings of spoken digits in ``name`` (``what``, for errors), all or
    those at the positions ``select``, as ``kind`` (a :class:`SpokenDigits`): the features
    under ``pipeline`` (:func:`statics_to_features`), the digits and words kept, then
    ``speakers(stored speakers, kept words)``."""
    from smc_hmm.data import load_recordings

    arrays, starts = load_recordings(name, "mfcc", ("digits", "bounds", "speakers"), what)
    positions = range(len(starts) - 1) if select is None else select
    out = []
    for i in positions:
        keep = arrays["digits"][i] >= 0
        out.append(
            kind(
                statics_to_features(arrays["mfcc"][starts[i] : starts[i + 1]], pipeline),
                tuple(int(d) for d in arrays["digits"][i][keep]),
                tuple((int(a), int(b)) for a, b in arrays["bounds"][i][keep]),
                speakers(arrays["speakers"][i], keep),
            )
        )
    return out


def load_continuous_manifest() -> dict[str, Any]:
    """How the set and the fillers were made, and their plaintext spotting results."""
    return json.loads(bundled_file("continuous_manifest.json").read_text(encoding="utf-8"))


def load_continuous_test(select=None) -> list[ContinuousRecording]:
    """The bundled continuous test recordings (all, or those at the positions ``select``)."""
    return load_spoken_digits(
        ContinuousRecording,
        "continuous_test.npz",
        "bundled continuous speech",
        load_spotting_pipeline(),
        lambda speakers, keep: tuple(str(s) for s in speakers[keep]),
        select,
    )


def load_spotting_pipeline():
    """The feature pipeline of keyword spotting (stored with its keyword models): the
    bundled continuous recordings, the fillers and the spotting keyword models expect it."""
    from smc_hmm.features import FeaturePipeline
    from smc_hmm.hmm.io import load_model_pipeline

    with resources.as_file(bundled_file("spotting_keywords_diag.npz")) as path:
        stored = load_model_pipeline(path)
    if stored is None:
        raise ConfigError("the bundled spotting keyword models carry no feature pipeline")
    return FeaturePipeline.from_dict(stored)


def _bundled_diag_models(name: str, kind: str, what: str):
    """The models and labels of the bundled file ``name``, which holds ``what`` with
    diagonal covariances (the only ``kind`` there is)."""
    if kind != "diag":
        raise ConfigError(f"the bundled {what} have diagonal covariances, not {kind!r}")
    with resources.as_file(bundled_file(name)) as path:
        return load_models(path)


#: the label of the pause stored beside the ten keyword models
PAUSE_LABEL = "pause"


def _spotting_file(kind: str):
    """The ten keyword models and the pause of ``spotting_keywords_diag.npz``."""
    from smc_hmm.data import DIGIT_WORDS

    models, labels = _bundled_diag_models("spotting_keywords_diag.npz", kind, "spotting keywords")
    if tuple(labels or ()) != (*DIGIT_WORDS, PAUSE_LABEL):
        raise ConfigError(f"bundled spotting keywords have labels {labels}")
    return models[:10], list(DIGIT_WORDS), models[10]


def load_spotting_keywords(kind: str = "diag"):
    """The ten keyword models of spotting (8-state left-to-right digit HMMs on
    :func:`load_spotting_pipeline`'s features) and their labels "zero" .. "nine"."""
    models, labels, _ = _spotting_file(kind)
    return models, labels


def load_spotting_pause(kind: str = "diag"):
    """The one-state pause of the fillers (the digit loop's silence), trained on the
    pauses of joined training recordings on the same pipeline."""
    return _spotting_file(kind)[2]


def load_fillers(kind: str = "diag"):
    """The ten fillers and their labels "filler-zero" ..: filler k the pause and the other
    nine keyword models in parallel (:func:`smc_hmm.hmm.spotting.spotting_fillers`, built
    from the stored keyword models and pause)."""
    models, _, pause = _spotting_file(kind)
    return spotting_fillers(models, pause), list(FILLER_LABELS)


def spotting_glue() -> dict[str, Any]:
    """The bundled composites' public form and glue probabilities (``enter``, ``leave``,
    ``start_keyword``, ``loop``; :func:`smc_hmm.hmm.spotting.compose`), as trained."""
    glue = load_continuous_manifest().get("glue")
    if not isinstance(glue, dict) or set(glue) != {"enter", "leave", "start_keyword", "loop"}:
        raise ConfigError("the bundled continuous manifest has no valid spotting glue")
    return dict(glue)


def load_spotting_models() -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The bundled keywords' labels and, per keyword, the arguments of
    :func:`smc_hmm.hmm.spotting.compose`: its model, its filler and :func:`spotting_glue`
    (what the spot protocol takes as one keyword's input)."""
    models, labels = load_spotting_keywords("diag")
    fillers, _ = load_fillers("diag")
    glue = spotting_glue()
    return labels, {
        k: {"keyword": m, "filler": f, **glue} for k, m, f in zip(labels, models, fillers)
    }


def spotting_model(keyword: int, **glue) -> tuple[Any, SpottingLayout]:
    """The composite model of digit ``keyword`` (spotting keyword model and its filler,
    with :func:`spotting_glue` unless ``glue`` overrides it) and its public layout
    (:func:`smc_hmm.hmm.spotting.compose`)."""
    if isinstance(keyword, bool) or not isinstance(keyword, int) or not 0 <= keyword <= 9:
        raise InvalidInputError(f"a keyword is a digit 0-9, got {keyword!r}")
    labels, models = load_spotting_models()
    return compose(**{**models[labels[keyword]], **glue})
