"""How the bundled speech models are made: the feature pipeline, the word models' topology
and training, the background (silence and noise) model, and the continuous recordings of
keyword spotting.

One recipe serves ``scripts/make_speech_data.py`` and ``scripts/make_continuous_speech.py``
(which regenerate the bundled files from the Free Spoken Digit Dataset) and the
leave-one-speaker-out benchmark ``smc-hmm bench speech`` (which retrains everything per
fold); ``docs/speech-models.md`` gives the measurements behind each choice.

- **Features** (:data:`PIPELINE`): the 39 MFCC + delta + delta-delta features with a flat
  noise floor 25 dB below the utterance's mean power and per-utterance cepstral mean
  normalisation, both computed by the client from her own utterance.
- **Word models** (:func:`word_start`, :func:`train_word`): :data:`STATES` states from left
  to right, each a single Gaussian (diagonal or full covariance); the path may start in
  any of the first :data:`START_STATES` states and skip one state
  (a_j,j+2), so a word whose first sound the recording cut off still fits.
- **Background** (:func:`background_signals`): silence (digital and near-silent) and
  white, pink and brown noise of random level and length; a model of the same form
  trained on them is the reference of the keyword protocol's ``garbage``/``margin``
  decision.
- **Continuous recordings** (:func:`join_words`): real recordings joined with noise pauses
  at their own noise floor, with the true word spans.
- **Keyword spotting** (:func:`spotting_recordings`, :func:`cut_words`,
  :func:`train_spotting_models`, :func:`pause_model`): word models of the same form
  trained on words cut from continuous recordings of one speaker each, every recording
  normalised as a whole by :data:`CONTINUOUS_PIPELINE` (as a client normalises the
  recording she searches), and per keyword a filler made of a pause state and the other
  nine digits' models in parallel (:func:`train_spotting`, which the bundled spotting and
  connected-digit files come from).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from smc_hmm.data.continuous import word_frames
from smc_hmm.errors import InvalidInputError
from smc_hmm.features import FeaturePipeline
from smc_hmm.hmm.batched import batched_expected_counts
from smc_hmm.hmm.models import GaussianHMM
from smc_hmm.hmm.spotting import spotting_fillers
from smc_hmm.hmm.training import BaumWelchResult, baum_welch

__all__ = [
    "BACKGROUND_STATES",
    "CONTINUOUS_PIPELINE",
    "MIN_COVAR",
    "FULL_MIN_COVAR",
    "PIPELINE",
    "SKIP",
    "START_STATES",
    "STATES",
    "Recording",
    "BACKGROUND_COLOURS",
    "COLOURS",
    "background_signals",
    "coloured_noise",
    "build_recordings",
    "cut_words",
    "decide",
    "floor_probabilities",
    "join_words",
    "pause_frames",
    "pause_model",
    "spotting_recordings",
    "train_background",
    "train_spotting",
    "train_spotting_models",
    "train_word",
    "word_start",
]

#: the bundled feature pipeline before its global standardisation is fitted
PIPELINE = FeaturePipeline(noise_floor_db=25.0, cepstral_norm="mean")
#: states of a word model, and the first ones a path may start in
STATES = 8
START_STATES = 3
#: initial a_j,j+1 and a_j,j+2 (the rest is the self-loop); Baum-Welch keeps the zeros
ADVANCE, SKIP = 0.4, 0.1
#: the variance floor (features are standardised: 0.05 of the global variance)
MIN_COVAR = 0.05
#: the full-covariance word models' floor (0.2 of the global variance on the diagonal: on
#: the leave-one-speaker-out folds 90.4% / 85.2% mean / minimum, against 86.7% / 78.2%
#: with 0.05; ``docs/speech-models.md``)
FULL_MIN_COVAR = 0.2
N_ITER, TOL = 20, 1.0
#: the smallest nonzero start or transition probability of a trained model
PROBABILITY_FLOOR = 1e-3


def _left_to_right(
    states: int, start_states: int, skip: float = SKIP
) -> tuple[np.ndarray, np.ndarray]:
    start = np.zeros(states)
    start[: min(start_states, states)] = 1.0
    a = np.zeros((states, states))
    for j in range(states):
        a[j, j] = 1.0
        if j + 1 < states:
            a[j, j + 1] = ADVANCE if skip else 0.5
        if j + 2 < states and skip:
            a[j, j + 2] = skip
        a[j, j] = 1.0 - a[j, j + 1 :].sum()
    return start / start.sum(), a


def word_start(
    sequences: Sequence[np.ndarray],
    covariance_type: str = "diag",
    states: int = STATES,
    start_states: int = START_STATES,
    skip: float = SKIP,
    min_covar: float = MIN_COVAR,
) -> GaussianHMM:
    """The flat start of a word model: every sequence cut into ``states`` equal segments,
    state j gets the moments of the j-th segments (plus ``min_covar``); start spread over
    the first ``start_states`` states, a_jj = 0.5, a_j,j+1 = 0.4, a_j,j+2 = ``skip`` = 0.1
    (without skips a_j,j+1 = 0.5), the last state absorbing."""
    if not sequences:
        raise InvalidInputError("a word model needs at least one training sequence")
    segments: list[list[np.ndarray]] = [[] for _ in range(states)]
    for x in sequences:
        bounds = np.linspace(0, len(x), states + 1).astype(int)
        for j in range(states):
            segments[j].append(x[bounds[j] : max(bounds[j + 1], bounds[j] + 1)])
    frames = [np.concatenate(s) for s in segments]
    means = np.array([f.mean(axis=0) for f in frames])
    dim = means.shape[1]
    if covariance_type == "diag":
        covars = np.array([f.var(axis=0) + min_covar for f in frames])
    else:
        covars = np.array([np.cov(f.T, bias=True) + min_covar * np.eye(dim) for f in frames])
    start, a = _left_to_right(states, start_states, skip)
    return GaussianHMM(start, a, means, covars, covariance_type)


def train_word(
    sequences: Sequence[np.ndarray],
    covariance_type: str = "diag",
    states: int = STATES,
    start_states: int = START_STATES,
    n_iter: int = N_ITER,
    skip: float = SKIP,
    min_covar: float | None = None,
) -> BaumWelchResult:
    """:func:`word_start` then Baum-Welch (batched E-step, at most ``n_iter`` iterations,
    tolerance 1.0 on the total log-likelihood, variance floor ``min_covar``; None:
    :data:`FULL_MIN_COVAR` for full covariances, else :data:`MIN_COVAR`)."""
    if min_covar is None:
        min_covar = FULL_MIN_COVAR if covariance_type == "full" else MIN_COVAR
    start = word_start(list(sequences), covariance_type, states, start_states, skip, min_covar)
    result = baum_welch(
        start,
        list(sequences),
        n_iter=n_iter,
        tol=TOL,
        min_covar=min_covar,
        e_step=batched_expected_counts,
    )
    return replace(result, model=floor_probabilities(result.model, topology=start))


def floor_probabilities(
    model: GaussianHMM, floor: float = PROBABILITY_FLOOR, topology: GaussianHMM | None = None
) -> GaussianHMM:
    """``model`` with every start and transition probability that ``topology`` (by
    default ``model`` itself) allows -- its nonzero entries -- raised to at least
    ``floor`` (rows renormalised): the topology stays the documented one even where
    Baum-Welch drove an entry to exactly zero (so every word model of a size has the same
    public structure: what speech mining shows the data holder must not depend on the
    keyword), and no weight falls below the secure forward's public weight floor
    (Baum-Welch can drive an unused skip to 1e-260)."""
    pattern = model if topology is None else topology

    def lift(rows: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        lifted = np.where(allowed > 0, np.maximum(rows, floor), 0.0)
        return lifted / lifted.sum(axis=-1, keepdims=True)

    return GaussianHMM(
        lift(model.startprob, pattern.startprob),
        lift(model.transmat, pattern.transmat),
        model.means,
        model.covars,
        model.covariance_type,
    )


#: noise colours: the exponent beta of a 1/f^beta power spectrum
COLOURS = {"white": 0.0, "pink": 1.0, "brown": 2.0}
#: the colours the background model is trained on (the clips it is measured on: white)
BACKGROUND_COLOURS = ("white", "pink", "brown")


def coloured_noise(n: int, beta: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples of Gaussian noise with power spectrum 1/f^beta, unit RMS."""
    spectrum = np.fft.rfft(rng.normal(size=n))
    f = np.arange(spectrum.size, dtype=float)
    f[0] = 1.0
    y = np.fft.irfft(spectrum / f ** (beta / 2), n)
    return y / np.std(y)


def background_signals(
    rng: np.random.Generator,
    count: int,
    rate: int = 8000,
    seconds=(0.3, 1.5),
    colours: Sequence[str] = ("white",),
) -> list[tuple[str, np.ndarray]]:
    """``count`` generated clips of no speech, (kind, samples): alternately silence and
    noise of each of ``colours`` in turn (:data:`COLOURS`), each ``seconds`` long
    (uniform).  Silence is digital zeros or a near-silent floor (Gaussian, -90 to -60
    dBFS RMS); noise is at -50 to -6 dBFS RMS, clipped to [-1, 1]."""
    out = []
    for i in range(count):
        n = int(rng.uniform(*seconds) * rate)
        if i % 2 == 0:
            level = 0.0 if rng.random() < 0.5 else 10 ** (rng.uniform(-90, -60) / 20)
            out.append(("silence", level * rng.standard_normal(n)))
        else:
            level = 10 ** (rng.uniform(-50, -6) / 20)
            beta = COLOURS[colours[(i // 2) % len(colours)]]
            noise = rng.standard_normal(n) if beta == 0.0 else coloured_noise(n, beta, rng)
            out.append(("noise", np.clip(level * noise, -1.0, 1.0)))
    return out


@dataclass(frozen=True)
class Recording:
    """A continuous recording: samples, the digits spoken, their speakers, and each word's
    [first, last) sample."""

    samples: np.ndarray
    digits: tuple[int, ...]
    speakers: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


def _floor(samples: np.ndarray, edge: int) -> float:
    return float(np.sqrt(np.mean(samples[:edge] ** 2)))


def join_words(
    parts, rng: np.random.Generator, rate: int, pause=(0.15, 0.5), edge=(0.05, 0.2)
) -> Recording:
    """Join ``parts`` [(digit, speaker, samples)] with Gaussian-noise pauses at the
    neighbouring recordings' noise floor (RMS of their outer 10 ms): ``pause`` seconds
    between words and ``edge`` seconds before the first and after the last."""
    outer = rate // 100
    pieces, spans, at = [], [], 0

    def silence(length_s, level):
        nonlocal at
        count = int(round(length_s * rate))
        pieces.append(rng.normal(0.0, max(level, 1e-5), size=count))
        at += count

    silence(rng.uniform(*edge), _floor(parts[0][2], outer))
    for i, (_, _, samples) in enumerate(parts):
        if i:
            level = min(_floor(parts[i - 1][2][::-1], outer), _floor(samples, outer))
            silence(rng.uniform(*pause), level)
        pieces.append(samples)
        spans.append((at, at + len(samples)))
        at += len(samples)
    silence(rng.uniform(*edge), _floor(parts[-1][2][::-1], outer))
    return Recording(
        np.clip(np.concatenate(pieces), -1.0, 1.0),
        tuple(d for d, _, _ in parts),
        tuple(s for _, s, _ in parts),
        tuple(spans),
    )


#: the background model's states (silence and noise are stationary: few states suffice)
BACKGROUND_STATES = 3
#: the variance floor of the spotting fillers' pause
FILLER_MIN_COVAR = 0.05


def train_background(sequences: Sequence[np.ndarray], covariance_type: str = "diag"):
    """The background model: :data:`BACKGROUND_STATES` states from left to right, any of
    them a start, trained like a word on features of :func:`background_signals` (variance
    floor :data:`MIN_COVAR` for either covariance: its rejection was measured with it)."""
    return train_word(
        sequences, covariance_type, BACKGROUND_STATES, BACKGROUND_STATES, min_covar=MIN_COVAR
    )


def decide(digit_scores: np.ndarray, background: np.ndarray, margin: float) -> np.ndarray:
    """Per utterance the best digit, or -1 ("no keyword") when the background model's
    score plus ``margin`` nats reaches it: the keyword protocol's ``garbage``/``margin``
    rule (``protocols/keyword.py``)."""
    scores = np.asarray(digit_scores, dtype=float)
    best = scores.argmax(axis=1)
    rejected = np.asarray(background, dtype=float) + margin >= scores.max(axis=1)
    return np.where(rejected, -1, best)


def build_recordings(audio, count: int, rng: np.random.Generator, rate: int, digits=range(10)):
    """``count`` continuous recordings of 3-5 distinct ``digits`` from ``audio`` {(digit,
    speaker, index): samples}: even ones by one speaker, odd ones by a mix."""
    speakers = sorted({s for _, s, _ in audio})
    indices = sorted({i for _, _, i in audio})
    out = []
    for r in range(count):
        words = int(rng.integers(3, 6))
        chosen = rng.choice(sorted(digits), size=words, replace=False)
        speaker = speakers[int(rng.integers(len(speakers)))]
        parts = []
        for d in chosen:
            s = speaker if r % 2 == 0 else speakers[int(rng.integers(len(speakers)))]
            i = indices[int(rng.integers(len(indices)))]
            parts.append((int(d), s, audio[(int(d), s, i)]))
        out.append(join_words(parts, rng, rate))
    return out


def pause_frames(recordings, features, hop: int = 80) -> np.ndarray:
    """The frames of the pauses between words of continuous ``recordings`` (two frames
    off each word's edge)."""
    out = []
    for r, x in zip(recordings, features, strict=True):
        previous = 0
        for first, stop in r.spans:
            a, b = word_frames(previous, first, hop)
            if b - a > 4:
                out.append(x[a + 2 : b - 1])
            previous = stop
    return np.concatenate(out)


# --- keyword spotting (the recipe ``bench speech`` measures) ---------------------------

#: spotting's pipeline, applied to a whole recording: :data:`PIPELINE` (cepstral mean
#: normalisation over the recording) with the noise floor 40 dB below the recording's
#: mean power instead of 25 (measured: ``docs/speech-models.md``, "Keyword spotting")
CONTINUOUS_PIPELINE = replace(PIPELINE, noise_floor_db=40.0)

#: frames of the neighbouring pauses kept on each side of a word cut from a recording
SPOTTING_WORD_PAD = 3
#: the variance floor of spotting's word models (wider than the isolated digits' 0.05:
#: a voice the models never heard strays further from their means)
SPOTTING_MIN_COVAR = 0.2
#: the composite's glue (:func:`smc_hmm.hmm.spotting.compose`): the probability of
#: entering the keyword (also of starting in it); with fillers made of the other digits'
#: models the decision hardly depends on it (``docs/speech-models.md``)
SPOTTING_ENTER = 1e-5
#: words per training recording
SPOTTING_WORDS = (3, 5)
#: the composite's public form and glue: the F-K loop (one filler copy, half the states a
#: frame of F1-K-F2: the same detection and false alarms measured, ``docs/speech-models.md``)
SPOTTING_GLUE = {
    "enter": SPOTTING_ENTER,
    "leave": 0.5,
    "start_keyword": SPOTTING_ENTER,
    "loop": True,
}


def spotting_recordings(
    audio, rng: np.random.Generator, rate: int = 8000, words=SPOTTING_WORDS
) -> list[Recording]:
    """Every recording of ``audio`` {(digit, speaker, index): samples} exactly once, joined
    (:func:`join_words`) into recordings of ``words`` words (uniform), each recording by
    one speaker (speakers in sorted order, their recordings shuffled): the training
    material of spotting, one voice per recording as in the recordings it searches."""
    out = []
    for speaker in sorted({s for _, s, _ in audio}):
        keys = sorted(k for k in audio if k[1] == speaker)
        order = rng.permutation(len(keys))
        at = 0
        while at < len(order):
            n = int(rng.integers(words[0], words[1] + 1))
            parts = [keys[j] for j in order[at : at + n]]
            at += n
            out.append(join_words([(d, s, audio[(d, s, i)]) for d, s, i in parts], rng, rate))
    return out


def cut_words(
    recordings, features, pad: int = SPOTTING_WORD_PAD, hop: int = 80
) -> list[tuple[int, np.ndarray]]:
    """(digit, frames) of every word of ``recordings``, cut from the features of the whole
    recording (``features``, one (T, d) array per recording) with ``pad`` frames of the
    neighbouring pauses on each side."""
    out = []
    for r, x in zip(recordings, features, strict=True):
        for digit, span in zip(r.digits, r.spans, strict=True):
            first, last = word_frames(*span, hop)
            out.append((digit, x[max(0, first - pad) : min(len(x), last + 1 + pad)]))
    return out


def train_spotting_models(by_digit: Sequence[Sequence[np.ndarray]]) -> list[GaussianHMM]:
    """Spotting's keyword models: per digit, :func:`train_word` (diagonal, :data:`STATES`
    states, skips) with the variance floor :data:`SPOTTING_MIN_COVAR` on its cut words."""
    return [
        train_word(xs, "diag", STATES, START_STATES, N_ITER, SKIP, SPOTTING_MIN_COVAR).model
        for xs in by_digit
    ]


def pause_model(frames: np.ndarray) -> GaussianHMM:
    """The one-state pause of spotting's fillers and the digit loop's silence: the moments
    of ``frames`` (:func:`pause_frames`), the variance floored by :data:`FILLER_MIN_COVAR`."""
    frames = np.asarray(frames, dtype=float)
    return GaussianHMM(
        np.ones(1), np.ones((1, 1)), frames.mean(0)[None], frames.var(0)[None] + FILLER_MIN_COVAR
    )


def train_spotting(audio, rng: np.random.Generator) -> dict:
    """Keyword spotting's recipe trained on ``audio`` {(digit, speaker, index): samples}
    (``docs/speech-models.md``, "Keyword spotting"): every recording joined once into
    recordings of one speaker each (:func:`spotting_recordings`), each normalised as a
    whole by :data:`CONTINUOUS_PIPELINE` (noise floor and cepstral mean over the
    recording, as the client does with the recording she searches), the global
    standardisation fitted on them; the ten keyword models trained on the words cut from
    them, with a few frames of pause (:func:`cut_words`); filler k the pause of those
    recordings and the other nine keyword models in parallel
    (:func:`smc_hmm.hmm.spotting.spotting_fillers`).  Returns ``{"spotting_pipeline",
    "keywords", "pause", "fillers", "glue"}``."""
    joined = spotting_recordings(audio, rng, CONTINUOUS_PIPELINE.sample_rate)
    raw = [CONTINUOUS_PIPELINE.extract(r.samples) for r in joined]
    pipeline = CONTINUOUS_PIPELINE.fit_standardisation(raw)
    features = [pipeline.standardise(x) for x in raw]
    words = cut_words(joined, features, hop=pipeline.hop_length)
    keywords = train_spotting_models([[x for d, x in words if d == k] for k in range(10)])
    pause = pause_model(pause_frames(joined, features, pipeline.hop_length))
    return {
        "spotting_pipeline": pipeline,
        "keywords": keywords,
        "pause": pause,
        "fillers": spotting_fillers(keywords, pause),
        "glue": dict(SPOTTING_GLUE),
    }
