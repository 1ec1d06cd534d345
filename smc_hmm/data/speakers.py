"""Bundled speaker models (GMMs and a UBM) and test utterances, with their plaintext decisions.

Secure speaker identification and verification (thesis 003, section 5.2.2;
``protocols/speaker.py``, ``docs/speaker.md``) score an utterance with one Gaussian
mixture model per enrolled speaker and a universal background model (UBM).  This module
loads the models bundled in ``smc_hmm/data/fsdd/`` (made by
``scripts/make_speaker_models.py`` from the Free Spoken Digit Dataset, CC BY-SA 4.0:
see ``smc_hmm/data/fsdd/NOTICE``) and states the plaintext decisions the secure
protocol must reproduce.

A GMM is stored as a :class:`~smc_hmm.hmm.GaussianHMM` whose start distribution and every
transition row equal the mixture weights: its forward algorithm is then exactly
sum_t log sum_m w_m N(x_t; mu_m, Sigma_m), so :func:`smc_hmm.hmm.log_likelihood` (and
hmmlearn) are the correctness oracles of the secure protocol.

Features: the first :data:`SPEAKER_FEATURES` (26) columns of the bundled feature pipeline
(:func:`smc_hmm.data.load_pipeline`): 13 MFCCs and their deltas, standardised.  The test
utterances are stored compactly: their 13 standardised MFCCs as float16, from which the
deltas are recomputed exactly as the pipeline does (``docs/speaker.md``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from smc_hmm.data import bundled_file
from smc_hmm.data.speaker_features import SPEAKERS
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.features import delta_features
from smc_hmm.hmm import GaussianHMM, log_likelihood
from smc_hmm.hmm.io import load_models

__all__ = [
    "SPEAKERS",
    "SPEAKER_FEATURES",
    "SPEAKER_NOTICE",
    "UBM_LABEL",
    "SpeakerUtterance",
    "best_component_scores",
    "gmm",
    "decision",
    "equal_error_rate",
    "gmm_parts",
    "identify",
    "load_loso_ubms",
    "load_speaker_manifest",
    "load_speaker_models",
    "load_speaker_test_utterances",
    "mfcc_to_speaker_features",
    "scores",
    "speaker_features",
    "speaker_features_from_wav",
    "verify",
]

UBM_LABEL = "ubm"
"""The label of the universal background model in the bundled model file."""
SPEAKER_FEATURES = 26
"""Feature columns of the speaker models: 13 MFCCs and their 13 deltas."""

SPEAKER_NOTICE = """\
The speaker files (speaker_models.npz, speaker_loso_ubms.npz, speaker_test.npz,
speaker_manifest.json) are derived from the same recordings: MFCC features, Gaussian
mixture models of each speaker and universal background models trained on them by
scripts/make_speaker_models.py of the smc-hmm project (see docs/speaker.md). They are
licensed CC BY-SA 4.0 like the other derived files here.
"""

# -- a GMM as an HMM ---------------------------------------------------------------------------


def gmm(weights, means, variances) -> GaussianHMM:
    """A diagonal GMM as a GaussianHMM: start distribution and transition rows = ``weights``."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0:
        raise InvalidInputError("mixture weights must be a non-empty vector")
    return GaussianHMM(w, np.tile(w, (w.size, 1)), means, variances, covariance_type="diag")


def gmm_parts(model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(weights, means, variances)`` of a diagonal GMM stored as a GaussianHMM.

    Raises InvalidInputError unless ``model`` is a diagonal GaussianHMM whose every
    transition row equals its start distribution (then it *is* a GMM)."""
    if not isinstance(model, GaussianHMM) or model.covariance_type != "diag":
        raise InvalidInputError("a speaker model must be a diagonal GaussianHMM (a GMM)")
    w = np.asarray(model.startprob, dtype=float)
    if not np.array_equal(np.asarray(model.transmat), np.tile(w, (w.size, 1))):
        raise InvalidInputError(
            "a speaker model's transition rows must all equal its mixture weights (a GMM)"
        )
    return w, np.asarray(model.means, dtype=float), np.asarray(model.covars, dtype=float)


# -- plaintext decisions ---------------------------------------------------------------------


def identify(scores, labels, ubm: str, margin: float, frames: int) -> str | None:
    """The identification decision: the best enrolled speaker if its log-likelihood beats
    the UBM's by more than ``margin`` nats per frame, else None ("none").

    Ties between speakers go to the lowest index here; the secure protocol breaks them
    at random (``protocols/speaker.py``)."""
    labels = list(labels)
    scores = [float(s) for s in scores]
    u = labels.index(ubm)
    speakers = [k for k in range(len(labels)) if k != u]
    best = max(speakers, key=lambda k: scores[k])
    return labels[best] if scores[best] - scores[u] > margin * frames else None


def verify(score: float, ubm_score: float, threshold: float, frames: int) -> bool:
    """Accept iff log p(x | claim) - log p(x | UBM) > ``threshold`` nats per frame."""
    return float(score) - float(ubm_score) > threshold * frames


def decision(mode: str, scores, labels, params, frames: int, claim: str | None = None):
    """The plaintext decision of ``mode`` (``identify``: a label or None; ``verify`` and
    ``anonymous``: the claim accepted -- anonymous verification verifies the claimed
    speaker too, only Bob never learns the claim) with the margin and threshold of
    ``params`` (the protocol's public parameters), which the secure one must equal."""
    labels = list(labels)
    if mode == "identify":
        return identify(scores, labels, UBM_LABEL, params.margin, frames)
    if claim not in labels or claim == UBM_LABEL:
        raise InvalidInputError(f"{mode} needs the claimed speaker, one of the enrolled labels")
    ubm = scores[labels.index(UBM_LABEL)]
    return verify(scores[labels.index(claim)], ubm, params.threshold, frames)


def equal_error_rate(target, impostor) -> tuple[float, float]:
    """(equal error rate, threshold): where false rejections of target trials (score <=
    threshold) meet false acceptances of impostor trials (score > threshold)."""
    target, impostor = np.sort(np.asarray(target, float)), np.sort(np.asarray(impostor, float))
    best = (2.0, 0.0, 0.0)
    for th in np.unique(np.concatenate([target, impostor])):
        fr = np.searchsorted(target, th, side="right") / target.size
        fa = 1.0 - np.searchsorted(impostor, th, side="right") / impostor.size
        if abs(fr - fa) < best[0]:
            best = (abs(fr - fa), (fr + fa) / 2, float(th))
    return best[1], best[2]


# -- bundled files ---------------------------------------------------------------------------


def _load(name: str) -> tuple[list[GaussianHMM], list[str]]:
    with resources.as_file(bundled_file(name)) as path:
        models, labels = load_models(path)
    if labels is None:
        raise ConfigError(f"bundled file {name} has no labels")
    for m in models:
        gmm_parts(m)
    return models, labels  # type: ignore[return-value]


def load_speaker_models() -> tuple[list[GaussianHMM], list[str]]:
    """The five speaker GMMs and the UBM (label :data:`UBM_LABEL`, last)."""
    models, labels = _load("speaker_models.npz")
    if tuple(labels) != (*SPEAKERS, UBM_LABEL):
        raise ConfigError(f"bundled speaker models have labels {labels}")
    return models, labels


def load_loso_ubms() -> dict[str, GaussianHMM]:
    """Leave-one-speaker-out UBMs: speaker -> the UBM trained without that speaker's voice
    (the background model of verification trials in which that speaker is the impostor)."""
    models, labels = _load("speaker_loso_ubms.npz")
    return dict(zip(labels, models))


def load_speaker_manifest() -> dict[str, Any]:
    """Training settings, splits and plaintext results of the bundled speaker models."""
    return json.loads(bundled_file("speaker_manifest.json").read_text(encoding="utf-8"))


def speaker_features(features) -> np.ndarray:
    """The speaker models' columns of standardised pipeline features (T, 39) -> (T, 26)."""
    x = np.asarray(features, dtype=float)
    if x.ndim != 2 or x.shape[1] < SPEAKER_FEATURES:
        raise InvalidInputError(f"expected (T, >= {SPEAKER_FEATURES}) features, got {x.shape}")
    return x[:, :SPEAKER_FEATURES]


def speaker_features_from_wav(
    path: str | Path, max_frames: int | None = None, limit: str | None = None
) -> np.ndarray:
    """Features of a WAV recording for the speaker models (the bundled pipeline); a file
    of more than ``max_frames`` frames' worth of audio is refused from its header
    (:meth:`smc_hmm.features.FeaturePipeline.read_wav`)."""
    from smc_hmm.data import load_pipeline

    return speaker_features(
        load_pipeline().features_from_wav(path, max_frames=max_frames, limit=limit)
    )


def mfcc_to_speaker_features(standardised_mfcc, pipeline) -> np.ndarray:
    """(T, 13) standardised MFCCs -> (T, 26) speaker features: un-standardise, recompute
    the deltas as the pipeline does, standardise again."""
    z = np.asarray(standardised_mfcc, dtype=float)
    n = z.shape[1]
    mean, std = np.asarray(pipeline.mean), np.asarray(pipeline.std)
    static = z * std[:n] + mean[:n]
    delta = delta_features(static, pipeline.delta_width, order=1)
    raw = np.concatenate([static, delta], axis=1)
    return (raw - mean[: 2 * n]) / std[: 2 * n]


@dataclass(frozen=True, eq=False)
class SpeakerUtterance:
    """One test recording (index 25-49 of a digit): features (T, 26), speaker, digit, index."""

    features: np.ndarray
    speaker: str
    digit: int
    index: int

    @property
    def name(self) -> str:
        """The recording's file name in the FSDD: ``DIGIT_SPEAKER_INDEX.wav``."""
        return f"{self.digit}_{self.speaker}_{self.index}.wav"


def load_speaker_test_utterances(select=None) -> list[SpeakerUtterance]:
    """The 1,250 test recordings (indices 25-49 of every speaker and digit), in file order;
    ``select``: only these positions of that list (recomputing the deltas takes ~5 ms per
    utterance)."""
    from smc_hmm.data import load_pipeline, load_recordings

    pipeline = load_pipeline()
    arrays, bounds = load_recordings(
        "speaker_test.npz", "mfcc", ("speakers", "digits", "indices"), "bundled speaker test set"
    )
    count = len(bounds) - 1
    positions = range(count) if select is None else [int(i) for i in select]
    if any(not 0 <= i < count for i in positions):
        raise InvalidInputError(f"test utterances are numbered 0..{count - 1}")
    return [
        SpeakerUtterance(
            mfcc_to_speaker_features(arrays["mfcc"][bounds[i] : bounds[i + 1]], pipeline),
            str(arrays["speakers"][i]),
            int(arrays["digits"][i]),
            int(arrays["indices"][i]),
        )
        for i in positions
    ]


def scores(models, frames) -> list[float]:
    """Plaintext log-likelihoods of ``frames`` under every model (the forward algorithm)."""
    return [log_likelihood(m, frames) for m in models]


def best_component_scores(models, frames) -> list[float]:
    """Per model sum_t max_m (log w_m + log N(x_t; mu_m, Sigma_m)): the score of the secure
    default (scoring ``max``, ``protocols/stages/mixture.py``), each frame's best component
    standing for the mixture (the Viterbi approximation of a GMM's log-likelihood)."""
    x = np.asarray(frames, dtype=float)
    out = []
    for model in models:
        w, mu, var = gmm_parts(model)
        quad = ((x[:, None, :] - mu[None]) ** 2 / var[None]).sum(axis=-1)
        logs = np.log(w)[None] - 0.5 * (quad + np.log(2 * np.pi * var).sum(axis=1)[None])
        out.append(float(logs.max(axis=1).sum()))
    return out
