"""Bundled connected-digit recordings and the digit loop (``docs/digits.md``).

The recordings (``digit_strings.npz``, ``digit_strings_manifest.json``) are made by
``scripts/make_digit_strings.py`` from the test split of the Free Spoken Digit Dataset
(indices 0-4 of every speaker and digit, never seen by a model; CC BY-SA 4.0,
``smc_hmm/data/fsdd/NOTICE``): strings of 3 to 6 digits, each recording one speaker,
joined with 0.1-0.5 s noise pauses at the recordings' own noise floor.  They are stored
as their 13 static MFCCs in float16; :func:`load_digit_strings` recomputes the deltas and
standardises with the bundled pipeline, as the spotting set's loader does, so the
features follow whatever pipeline is bundled.

The loop (:func:`digit_loop`) joins the digit HMMs of continuous speech -- spotting's
8-state keyword models on its own pipeline (:func:`smc_hmm.data.continuous.
load_spotting_keywords`, :func:`digit_pipeline`: normalised over the whole recording, as
the client normalises the recording she sends; ``docs/speech-models.md``) -- with a
one-state silence model: the bundled fillers' pause
(:func:`smc_hmm.data.continuous.load_spotting_pause`, the pauses of joined training
recordings, on the same pipeline).  Both load through the existing
loaders, so retrained models are picked up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from smc_hmm.data import bundled_file
from smc_hmm.data.continuous import (
    SpokenDigits,
    load_spoken_digits,
    load_spotting_keywords,
)
from smc_hmm.errors import ConfigError, SmcHmmError
from smc_hmm.hmm.digits import DigitGrammar, DigitLoopLayout, DigitModels, compose_loop
from smc_hmm.hmm.models import GaussianHMM

__all__ = [
    "DIGIT_STRINGS_NOTICE",
    "SILENCE_LABEL",
    "DigitRecording",
    "bundled_digit_models",
    "digit_pipeline",
    "digit_loop",
    "load_digit_models",
    "load_digit_strings",
    "load_digit_strings_manifest",
    "silence_model",
]

#: the label of the silence model in a model file (the digits are "zero" .. "nine")
SILENCE_LABEL = "silence"

#: what the NOTICE says of these files
DIGIT_STRINGS_NOTICE = """\
The connected-digit files (digit_strings.npz, digit_strings_manifest.json) are derived
from the same recordings: strings of 3 to 6 test-split digit recordings of one speaker
joined with 0.1-0.5 s noise pauses, stored as their static MFCC features (float16) with
the digits spoken and each word's frames, by scripts/make_digit_strings.py of the
smc-hmm project (see docs/digits.md). They are licensed CC BY-SA 4.0 like the other
derived files here.
"""


@dataclass(frozen=True, eq=False)
class DigitRecording(SpokenDigits):
    """One bundled digit string: :class:`~smc_hmm.data.continuous.SpokenDigits` and its
    speaker."""

    speaker: str

    @property
    def text(self) -> str:
        return "".join(str(d) for d in self.digits)


def digit_pipeline():
    """The feature pipeline of the digit loop: continuous speech's (spotting's), which its
    models, its silence state and the bundled strings' features follow."""
    from smc_hmm.data.continuous import load_spotting_pipeline

    return load_spotting_pipeline()


def load_digit_strings(select=None) -> list[DigitRecording]:
    """The bundled digit strings (all, or those at the positions ``select``)."""
    return load_spoken_digits(
        DigitRecording,
        "digit_strings.npz",
        "bundled digit strings",
        digit_pipeline(),
        lambda speaker, keep: str(speaker),
        select,
    )


def load_digit_strings_manifest() -> dict[str, Any]:
    """How the set was made and its plaintext recognition figures."""
    return json.loads(bundled_file("digit_strings_manifest.json").read_text(encoding="utf-8"))


def silence_model(filler: GaussianHMM | None = None) -> GaussianHMM:
    """A one-state silence model: the pause state (state 0) of ``filler``, by default the
    bundled fillers' pause."""
    if filler is None:
        from smc_hmm.data.continuous import load_spotting_pause

        return load_spotting_pause("diag")
    return GaussianHMM(
        np.ones(1), np.ones((1, 1)), filler.means[:1], filler.covars[:1], filler.covariance_type
    )


def digit_loop(
    grammar: DigitGrammar | None = None, digits=None, silence: GaussianHMM | None = None
) -> tuple[GaussianHMM, DigitLoopLayout]:
    """The loop of the bundled digit HMMs (or ``digits``) and the silence model under the
    public ``grammar`` (:func:`smc_hmm.hmm.digits.compose_loop`)."""
    if digits is None:
        digits, _ = load_spotting_keywords()
    return compose_loop(digits, silence or silence_model(), grammar or DigitGrammar())


def bundled_digit_models() -> DigitModels:
    """The digit HMMs of continuous speech and the bundled fillers' pause state as silence."""
    models, _ = load_spotting_keywords()
    return DigitModels(tuple(models), silence_model())


def load_digit_models(spec, base=None) -> DigitModels:
    """``"bundled"``, or a model file with models labelled zero .. nine and silence."""
    from pathlib import Path

    from smc_hmm.data import DIGIT_WORDS
    from smc_hmm.hmm.io import load_models

    path = Path(str(spec))
    if spec == "bundled" or (path.name == "bundled" and not path.exists()):
        return bundled_digit_models()
    if base is not None and not path.is_absolute():
        path = Path(base) / path
    if not path.is_file():
        raise ConfigError(f"{spec}: not 'bundled' or a model file (.npz)")
    try:
        models, labels = load_models(path)
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
    by_label = dict(zip(labels or (), models))
    missing = [w for w in (*DIGIT_WORDS, SILENCE_LABEL) if w not in by_label]
    if missing:
        raise ConfigError(f"{spec}: no model labelled {missing}")
    return DigitModels(tuple(by_label[w] for w in DIGIT_WORDS), by_label[SILENCE_LABEL])
