"""The background model that makes "no keyword" the answer for silence and noise.

Every keyword model of the bundled digits was trained on recordings that start and end in
near silence, so it scores silence and steady noise well: without a reference, ``smc-hmm
keyword`` named a digit for 1 s of silence ("five") or of white noise ("nine").  The
keyword protocol's spotting mode (``KeywordParams.garbage``/``margin``) compares the best
keyword with a garbage model; this module builds that model for any feature pipeline,
from public synthetic signals only -- no recordings, no keyword model:

- four states, each a diagonal Gaussian fitted to the pipeline's (standardised) features
  of one kind of signal: white noise, pink (1/f) noise and brown (1/f^2) noise, one
  second at each level of :data:`NOISE_LEVELS_DBFS`, and digital silence;
- ergodic: start uniform, each state stays with probability :data:`STAY` and moves to
  each other with (1 - STAY) / 3 (16 edges: the secure forward algorithm's cost grows by
  about a sixth of the ten 5-state digit models');
- drawn from the public seed :data:`SEED`, so every party computes the same model.

An utterance is named keyword k only if model k's log-likelihood beats the background's
by more than the margin (0 nats by default).  What it catches and what it costs, measured
by ``scripts/measure_background.py``: ``docs/speech-models.md``, "Background model".  It
catches silence and broadband noise; narrowband or structured sounds (a hum, clicks, a
sweep) can still be named as digits.
"""

from __future__ import annotations

import numpy as np

from smc_hmm.features import FeaturePipeline
from smc_hmm.hmm import GaussianHMM

__all__ = ["BACKGROUND_LABEL", "NOISE_LEVELS_DBFS", "SEED", "STAY", "background_model"]

#: the background model's label among Bob's models
BACKGROUND_LABEL = "background"
#: the levels (dB below full scale) of the noise the states are fitted on
NOISE_LEVELS_DBFS = (-50, -40, -30, -20, -10, -3)
#: the public seed of the synthetic noise
SEED = 12345
#: the probability of staying in a state
STAY = 0.9
#: variance floor of a state (digital silence has constant features)
VARIANCE_FLOOR = 0.05
#: noise colours: the exponent beta of a 1/f^beta power spectrum
COLOURS = {"white": 0.0, "pink": 1.0, "brown": 2.0}


def coloured_noise(n: int, beta: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples of Gaussian noise with power spectrum 1/f^beta, unit RMS."""
    spectrum = np.fft.rfft(rng.normal(size=n))
    f = np.arange(spectrum.size, dtype=float)
    f[0] = 1.0
    y = np.fft.irfft(spectrum / f ** (beta / 2), n)
    return y / np.std(y)


def background_model(
    pipeline: FeaturePipeline | None = None, covariance_type: str = "diag"
) -> GaussianHMM:
    """The four-state background model over ``pipeline``'s features (default: the bundled
    pipeline), with ``diag`` or (diagonal) ``full`` covariances to match Bob's models."""
    if pipeline is None:
        from smc_hmm.data import load_pipeline

        pipeline = load_pipeline()
    rng = np.random.default_rng(SEED)
    n = pipeline.sample_rate  # one second per level
    means, variances = [], []
    for beta in COLOURS.values():
        frames = np.concatenate(
            [
                pipeline.features(np.clip(coloured_noise(n, beta, rng) * 10 ** (db / 20), -1, 1))
                for db in NOISE_LEVELS_DBFS
            ]
        )
        means.append(frames.mean(axis=0))
        variances.append(np.maximum(frames.var(axis=0), VARIANCE_FLOOR))
    silence = pipeline.features(np.zeros(n))
    means.append(silence.mean(axis=0))
    variances.append(np.maximum(silence.var(axis=0), VARIANCE_FLOOR))
    k = len(means)
    transmat = np.full((k, k), (1 - STAY) / (k - 1))
    np.fill_diagonal(transmat, STAY)
    covars = np.array(variances)
    if covariance_type == "full":
        covars = np.array([np.diag(v) for v in variances])
    return GaussianHMM(np.full(k, 1 / k), transmat, np.array(means), covars, covariance_type)
