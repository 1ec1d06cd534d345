"""MFCC features of 8 kHz speech for the keyword-recognition HMMs (thesis 003, section 4.2.1).

Each 10 ms frame of a recording becomes a 39-dimensional vector: 13 mel-frequency
cepstral coefficients (c0 included: it plays the role of the log-energy), their deltas
and their delta-deltas. The pipeline, its parameters and the models trained on it are
described in ``docs/speech-models.md``.

Two implementations compute the same features:

- :func:`mfcc_numpy` (the default): numpy/scipy only, so that Alice can turn a WAV file
  into features without the optional ``librosa`` dependency;
- :func:`mfcc_librosa`: the same pipeline through ``librosa`` (the ``audio`` extra), the
  reference the numpy implementation is tested against.

Both apply, for a signal of ``N`` samples at 8 kHz (no pre-emphasis by default):

1. centred framing: the signal is zero-padded by ``n_fft // 2`` samples on each side
   and cut into frames of ``n_fft`` samples every ``hop_length`` (80 = 10 ms), so frame
   ``t`` is centred on sample ``t * hop_length``. Only frames whose centre lies inside the
   recording are kept: ``T = ceil(N / hop_length)`` frames (0.98 s gives 98 frames).
   librosa emits one more frame, centred on sample ``N``, when ``hop_length`` divides
   ``N``; it is dropped;
2. a periodic Hamming window of ``win_length`` = 200 samples (25 ms), centred in the
   ``n_fft``-sample frame, and the power spectrum ``|rfft|^2``;
3. a mel filterbank of ``n_mels`` triangles between ``fmin`` and ``fmax`` on the Slaney
   mel scale (linear below 1 kHz, logarithmic above), each triangle scaled to unit area
   (Slaney normalisation) -- librosa's ``filters.mel(htk=False, norm="slaney")``, whose
   weights librosa rounds to float32 (so do we, to agree to rounding error);
4. ``10 log10(max(power, 1e-10))`` in dB, floored at 80 dB below the utterance's
   maximum (librosa's ``power_to_db(ref=1.0, amin=1e-10, top_db=80)``);
5. the orthonormal DCT-II along the mel axis, keeping coefficients 0..12 (no liftering);
6. deltas and delta-deltas over ``delta_width`` = 9 frames: the first and second
   derivative of a local least-squares polynomial of degree 1 and 2 (Savitzky-Golay,
   edges by fitting the first/last window: ``mode="interp"``), exactly
   ``librosa.feature.delta(width=9, order=1 / 2)``. Inside the sequence the first-order
   delta is the classic regression ``sum_n n (c[t+n] - c[t-n]) / (2 sum_n n^2)``, n = 1..4.

The features of an utterance are then standardised with one global affine map
(per-dimension mean and standard deviation of the training frames), carried by the
:class:`FeaturePipeline` so that a model file and its features travel together.
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.errors import ConfigError, InvalidInputError, parse_json

__all__ = [
    "BENCHMARK_FRAMES",
    "FRAME_SECONDS",
    "FeaturePipeline",
    "delta_features",
    "mel_filterbank",
    "mfcc_librosa",
    "mfcc_numpy",
    "normalise_cepstra",
    "pad_or_cut",
    "read_wav",
]

BENCHMARK_FRAMES = 98
"""Fixed sequence length of the secure-recognition benchmark: 98 frames = 0.98 s."""

FRAME_SECONDS = 0.01
"""Seconds from one frame to the next with the bundled (and the default) pipeline: a hop of
80 samples at 8 kHz; frame k is centred at k * FRAME_SECONDS."""

PIPELINE_FORMAT = "smc-hmm-feature-pipeline/1"
"""Tag written by :meth:`FeaturePipeline.to_dict`; other tags are rejected on load."""

Backend = Literal["numpy", "librosa"]

_AMIN = 1e-10  # power floor before the logarithm (librosa's power_to_db default)
_TOP_DB = 80.0  # dynamic range kept below the utterance's loudest mel band (librosa default)
#: per-utterance normalisations of the static cepstra (:class:`FeaturePipeline`)
CEPSTRAL_NORMS = ("none", "mean", "meanvar")
#: which frames set the levels of those normalisations (:class:`FeaturePipeline`)
LEVEL_FRAMES = ("all", "loudest_half")
#: the deepest noise floor a pipeline may add, dB below the utterance's mean power
MAX_NOISE_FLOOR_DB = 120.0
_MIN_CEPSTRAL_STD = 1e-3


@dataclass(frozen=True)
class FeaturePipeline:
    """Every parameter from WAV samples to standardised 39-dimensional features.

    Attributes:
        sample_rate: expected sampling rate in Hz; other rates are resampled on read.
        n_mfcc: cepstral coefficients per frame, c0 included.
        win_length: analysis window in samples (200 = 25 ms at 8 kHz).
        hop_length: frame step in samples (80 = 10 ms at 8 kHz).
        n_fft: FFT size (>= ``win_length``; the window is centred in the FFT frame).
        window: ``"hamming"`` or ``"hann"`` (periodic, as ``scipy.signal.get_window``).
        n_mels: mel bands.
        fmin, fmax: edges of the mel filterbank in Hz (``fmax`` <= ``sample_rate / 2``).
        delta_width: frames of the delta / delta-delta regression (odd, >= 3).
        preemphasis: coefficient ``a`` of ``y[n] = x[n] - a x[n-1]``; 0 disables it.
        noise_floor_db: if set, a flat floor this many dB below the utterance's mean
            power per FFT bin is added to every bin of the power spectrum before the
            mel filterbank (the expected spectrum of white noise at that level), so
            every recording's own noise floor, however low or coloured, is masked by
            one of the same relative level; ``None`` adds nothing.
        cepstral_norm: per-utterance normalisation of the static cepstra, computed on
            the utterance itself: ``"none"``, ``"mean"`` (cepstral mean normalisation:
            each coefficient minus its mean over the utterance) or ``"meanvar"`` (also
            divided by its standard deviation, floored at 1e-3).  The deltas are
            computed after it.
        level_frames: the frames whose statistics set the noise floor's level and the
            cepstral means: ``"all"`` or ``"loudest_half"`` (the frames of at least the
            median power, resp. median c0: the speech, whatever share of the recording
            pauses take, so a word has the same features alone or inside a longer
            recording).
        mean, std: the global standardisation (one value per feature dimension), or
            ``None`` for raw features.
    """

    sample_rate: int = 8000
    n_mfcc: int = 13
    win_length: int = 200
    hop_length: int = 80
    n_fft: int = 200
    window: str = "hamming"
    n_mels: int = 40
    fmin: float = 0.0
    fmax: float = 4000.0
    delta_width: int = 9
    preemphasis: float = 0.0
    noise_floor_db: float | None = None
    cepstral_norm: str = "none"
    level_frames: str = "all"
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        for name in (
            "sample_rate",
            "n_mfcc",
            "win_length",
            "hop_length",
            "n_fft",
            "n_mels",
            "delta_width",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.n_fft < self.win_length:
            raise ConfigError(f"n_fft ({self.n_fft}) must be >= win_length ({self.win_length})")
        if self.n_mfcc > self.n_mels:
            raise ConfigError(f"n_mfcc ({self.n_mfcc}) must be <= n_mels ({self.n_mels})")
        if self.delta_width < 3 or self.delta_width % 2 == 0:
            raise ConfigError(f"delta_width must be odd and >= 3, got {self.delta_width}")
        if self.window not in ("hamming", "hann"):
            raise ConfigError(f"window must be 'hamming' or 'hann', got {self.window!r}")
        for name in ("fmin", "fmax", "preemphasis"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                raise ConfigError(f"{name} must be a number, got {value!r}")
            object.__setattr__(self, name, float(value))
        if not 0.0 <= self.fmin < self.fmax <= self.sample_rate / 2:
            raise ConfigError(
                f"need 0 <= fmin < fmax <= sample_rate / 2, got fmin={self.fmin}, "
                f"fmax={self.fmax}, sample_rate={self.sample_rate}"
            )
        if not 0.0 <= self.preemphasis < 1.0:
            raise ConfigError(f"preemphasis must be in [0, 1), got {self.preemphasis}")
        self._check_normalisation()
        if (self.mean is None) != (self.std is None):
            raise ConfigError("mean and std must both be given or both be None")
        if self.mean is not None:
            mean = self._vector(self.mean, "mean")
            std = self._vector(self.std, "std")
            if any(s <= 0 for s in std):
                raise ConfigError("std must be strictly positive")
            object.__setattr__(self, "mean", mean)
            object.__setattr__(self, "std", std)

    def _check_normalisation(self) -> None:
        floor = self.noise_floor_db
        if floor is not None:
            if isinstance(floor, bool) or not isinstance(floor, (int, float, np.floating)):
                raise ConfigError(f"noise_floor_db must be a number or None, got {floor!r}")
            if not 0.0 < float(floor) <= MAX_NOISE_FLOOR_DB:
                raise ConfigError(
                    f"noise_floor_db must be in (0, {MAX_NOISE_FLOOR_DB:g}] dB, got {floor}"
                )
            object.__setattr__(self, "noise_floor_db", float(floor))
        if self.level_frames not in LEVEL_FRAMES:
            raise ConfigError(
                f"level_frames must be one of {LEVEL_FRAMES}, got {self.level_frames!r}"
            )
        if self.cepstral_norm not in CEPSTRAL_NORMS:
            raise ConfigError(
                f"cepstral_norm must be one of {CEPSTRAL_NORMS}, got {self.cepstral_norm!r}"
            )

    def _vector(self, value: Any, name: str) -> tuple[float, ...]:
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{name} must be a list of numbers: {exc}") from exc
        if array.shape != (self.n_features,) or not np.all(np.isfinite(array)):
            raise ConfigError(
                f"{name} must hold {self.n_features} finite numbers, got shape {array.shape}"
            )
        return tuple(float(v) for v in array)

    # --- derived sizes ------------------------------------------------------------

    @property
    def n_features(self) -> int:
        """Feature dimension: cepstra, deltas and delta-deltas (39)."""
        return 3 * self.n_mfcc

    @property
    def min_samples(self) -> int:
        """Shortest signal with enough frames (``delta_width``) for the deltas."""
        return (self.delta_width - 1) * self.hop_length + 1

    def n_frames(self, n_samples: int) -> int:
        """Frames of a signal of ``n_samples`` samples: ``ceil(n_samples / hop_length)``."""
        return -(-int(n_samples) // self.hop_length)

    @property
    def standardised(self) -> bool:
        """True if the pipeline carries a global standardisation."""
        return self.mean is not None

    # --- features -----------------------------------------------------------------

    def extract(self, signal: ArrayLike, backend: Backend = "numpy") -> np.ndarray:
        """Raw (un-standardised) features (T, 39) of a mono signal at ``sample_rate``."""
        static = _static_mfcc(signal, self, backend)
        loud = static[:, 0] >= np.median(static[:, 0]) if self.level_frames != "all" else None
        static = normalise_cepstra(static, self.cepstral_norm, loud)
        if backend == "librosa":
            librosa = _require_librosa()
            deltas = [
                librosa.feature.delta(static, width=self.delta_width, order=o, axis=0)
                for o in (1, 2)
            ]
        else:
            deltas = [delta_features(static, self.delta_width, order=o) for o in (1, 2)]
        return np.concatenate([static, *deltas], axis=1)

    def standardise(self, features: ArrayLike) -> np.ndarray:
        """Apply the global standardisation ``(x - mean) / std`` to features (T, 39)."""
        if self.mean is None or self.std is None:
            raise ConfigError("this pipeline has no standardisation (mean/std); fit one first")
        array = _feature_matrix(features, self.n_features)
        return (array - np.asarray(self.mean)) / np.asarray(self.std)

    def features(self, signal: ArrayLike, backend: Backend = "numpy") -> np.ndarray:
        """Features (T, 39) of a signal, standardised if the pipeline carries a map."""
        raw = self.extract(signal, backend)
        return self.standardise(raw) if self.standardised else raw

    def features_from_wav(
        self,
        path: str | Path,
        backend: Backend = "numpy",
        max_frames: int | None = None,
        limit: str | None = None,
    ) -> np.ndarray:
        """:func:`read_wav` then :meth:`features`: what a client computes from a recording;
        with ``max_frames``, a file holding more frames' worth of audio is refused from its
        header, before its samples are read (``limit`` names the bound in the refusal)."""
        return self.features(self.read_wav(path, max_frames, limit), backend)

    def read_wav(self, path: str | Path, max_frames: int | None = None, limit=None) -> np.ndarray:
        """:func:`read_wav` at this pipeline's rate, refusing (from the header) a file of
        more than ``max_frames`` frames' worth of audio: T = ceil(N / hop) <= max_frames
        exactly when N <= max_frames * hop."""
        cap = None if max_frames is None else int(max_frames) * self.hop_length
        return read_wav(path, self.sample_rate, self.min_samples, cap, limit)

    def fit_standardisation(self, feature_list: Iterable[ArrayLike]) -> FeaturePipeline:
        """A copy carrying the mean and standard deviation of all frames of ``feature_list``."""
        arrays = [_feature_matrix(f, self.n_features) for f in feature_list]
        if not arrays:
            raise InvalidInputError("at least one feature matrix is needed")
        frames = np.concatenate(arrays)
        std = frames.std(axis=0)
        if np.any(std <= 0):
            raise InvalidInputError("a feature dimension is constant over the training frames")
        return replace(self, mean=tuple(frames.mean(axis=0)), std=tuple(std))

    # --- serialisation ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary of every parameter (floats round-trip exactly)."""
        data: dict[str, Any] = {"format": PIPELINE_FORMAT}
        for key, value in asdict(self).items():
            data[key] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeaturePipeline:
        """Inverse of :meth:`to_dict`; unknown keys or a wrong format tag raise ConfigError."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a pipeline must be a mapping, got {type(data).__name__}")
        if data.get("format") != PIPELINE_FORMAT:
            raise ConfigError(
                f"unknown pipeline format {data.get('format')!r}, expected {PIPELINE_FORMAT!r}"
            )
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names - {"format"}
        if unknown:
            raise ConfigError(f"unknown pipeline parameters: {sorted(unknown)}")
        kwargs = {k: v for k, v in data.items() if k != "format"}
        for key in ("mean", "std"):
            if kwargs.get(key) is not None:
                if not isinstance(kwargs[key], (list, tuple)):
                    raise ConfigError(f"{key} must be a list of numbers")
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> FeaturePipeline:
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(parse_json(text, "the pipeline"))


# --- WAV input ------------------------------------------------------------------------


#: below this RMS level (dBFS) a recording counts as silent: the quietest of FSDD's
#: 2,500 real recordings is at -53 dBFS, digital silence at -inf
SILENCE_DBFS = -65.0
#: a recording whose power spectrum puts more than this fraction within five bins
#: (about +-20 Hz) of its peak is a steady tone, not speech (FSDD's real recordings: at
#: most 0.88; a 440 Hz sine: 0.9997)
TONE_FRACTION = 0.97


def speech_warning(samples: ArrayLike, sample_rate: int = 8000) -> str | None:
    """A public rule on the recording's owner's side: a sentence saying why ``samples``
    hold no speech (silence, a steady tone), or None.  A heuristic, not a voice detector:
    it catches the inputs that would otherwise be recognised as some word with no
    complaint, and never fires on the FSDD recordings
    (``tests/features/test_features_mfcc.py``)."""
    from scipy.signal import welch

    x = np.asarray(samples, dtype=float).ravel()
    rms = float(np.sqrt(np.mean(x * x))) if x.size else 0.0
    level = 20 * np.log10(rms) if rms > 0 else -np.inf
    if level < SILENCE_DBFS:
        return f"the recording is silent (RMS {level:.0f} dBFS): no speech to recognise"
    freqs, power = welch(x, fs=sample_rate, nperseg=min(1024, x.size))
    peak = int(np.argmax(power))
    share = float(power[max(0, peak - 2) : peak + 3].sum() / power.sum())
    if share > TONE_FRACTION:
        return (
            f"the recording is a steady tone near {freqs[peak]:.0f} Hz ({share:.0%} of its "
            "power), not speech"
        )
    return None


def read_wav(
    path: str | Path,
    sample_rate: int = 8000,
    min_samples: int = 1,
    max_samples: int | None = None,
    limit: str | None = None,
) -> np.ndarray:
    """Read a mono PCM/float WAV file as float64 samples in [-1, 1] at ``sample_rate``.

    16-bit integers are divided by 32768 (8-bit unsigned, 24/32-bit integers and
    float files are scaled likewise); other rates are resampled with
    :func:`scipy.signal.resample_poly`. Raises InvalidInputError for a missing or
    non-WAV file, a file cut inside its header, a file whose header promises more
    samples than it holds (a truncated recording is refused, not padded or
    shortened silently), a multi-channel file, non-finite samples or fewer than
    ``min_samples`` samples (after resampling).

    The header is read first (:data:`HEADER_BYTES`) and checked before any sample is
    read or resampled: its rate must lie in [:data:`MIN_WAV_RATE`,
    :data:`MAX_WAV_RATE`], and, with ``max_samples``, the audio it holds must last at
    most ``max_samples`` samples at ``sample_rate`` (``limit`` names that bound in the
    refusal, e.g. the command's option).
    """
    from scipy.signal import resample_poly

    path = Path(path)
    raw = _read_checked(path, sample_rate, max_samples, limit)
    rate, data = _parse_wav(raw, path)
    signal = _mono_samples(data, path)
    if rate <= 0:
        raise InvalidInputError(f"{path} declares an invalid sampling rate {rate}")
    if rate != sample_rate:
        g = math.gcd(int(rate), int(sample_rate))
        signal = resample_poly(signal, sample_rate // g, int(rate) // g)
    if signal.size < min_samples:
        raise InvalidInputError(
            f"{path} is too short: {signal.size} samples at {sample_rate} Hz, "
            f"at least {min_samples} needed"
        )
    return signal


def _parse_wav(raw: bytes, path: Path) -> tuple[int, np.ndarray]:
    """The rate and samples of the WAV file ``raw`` (read from ``path``), once the file
    holds every sample its header promises."""
    from scipy.io import wavfile

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", wavfile.WavFileWarning)
            rate, data = wavfile.read(io.BytesIO(raw))
    except struct.error as exc:  # scipy unpacks a header field the file does not hold
        raise InvalidInputError(
            f"{path} is not a readable WAV file: it ends inside its header ({len(raw)} bytes)"
        ) from exc
    except ValueError as exc:  # scipy: ValueError for non-RIFF input or a cut sample
        if "multiple of element size" in str(exc):
            raise InvalidInputError(
                f"{path} is truncated inside a sample: its data ends at a byte that does not "
                "complete one"
            ) from exc
        raise InvalidInputError(f"{path} is not a readable WAV file: {exc}") from exc
    except (EOFError, OSError) as exc:
        raise InvalidInputError(f"{path} is not a readable WAV file: {exc}") from exc
    promised = _promised_frames(raw)
    if promised is not None and promised > data.shape[0]:
        raise InvalidInputError(
            f"{path} is truncated: its header promises {promised} samples, the file holds "
            f"{data.shape[0]}"
        )
    return rate, data


def _mono_samples(data: np.ndarray, path: Path) -> np.ndarray:
    """One channel of samples as float64 in [-1, 1]: a mono file, not empty, all finite."""
    if data.ndim == 2 and data.shape[1] == 1:
        data = data[:, 0]
    if data.ndim != 1:
        raise InvalidInputError(
            f"{path} has {data.shape[1]} channels; a mono recording is required"
        )
    signal = _as_float(data, path)
    if signal.size == 0:
        raise InvalidInputError(f"{path} holds no samples")
    if not np.all(np.isfinite(signal)):
        raise InvalidInputError(f"{path} holds NaN or infinite samples")
    return signal


def _as_float(data: np.ndarray, path: Path) -> np.ndarray:
    """WAV samples as float64 in [-1, 1] (8-bit unsigned, 16/32-bit integers, floats)."""
    if data.dtype == np.int16:
        return data.astype(np.float64) / 32768.0
    if data.dtype == np.uint8:
        return (data.astype(np.float64) - 128.0) / 128.0
    if data.dtype == np.int32:
        return data.astype(np.float64) / 2.0**31
    if data.dtype.kind == "f":
        return data.astype(np.float64)
    raise InvalidInputError(f"{path} has unsupported sample type {data.dtype}")


#: the sampling rates a WAV file may declare (a public range, checked from its header
#: before any sample is read or resampled: a file declaring 1 Hz would be resampled into
#: gigabytes)
MIN_WAV_RATE, MAX_WAV_RATE = 4_000, 192_000


#: bytes of a WAV file read before the rest: its header, checked first (a ``data`` chunk
#: that starts later is checked once the whole file is read, still before any sample is
#: decoded or resampled)
HEADER_BYTES = 1 << 16


def _read_checked(path: Path, sample_rate: int, max_samples: int | None, limit) -> bytes:
    """The bytes of ``path``, its header's rate and duration checked before the rest of
    the file (its samples) is read."""
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER_BYTES)
            size = os.fstat(f.fileno()).st_size
            _check_declared_rate(raw, path)
            known = _check_duration(raw, size, path, sample_rate, max_samples, limit)
            raw += f.read()
    except FileNotFoundError as exc:
        raise InvalidInputError(f"no such WAV file: {path}") from exc
    except IsADirectoryError as exc:
        raise InvalidInputError(f"{path} is a folder, not a WAV file") from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not known:  # the data chunk starts beyond the first bytes
        _check_duration(raw, len(raw), path, sample_rate, max_samples, limit)
    return raw


def _check_duration(
    raw: bytes, size: int, path: Path, sample_rate: int, max_samples: int | None, limit
) -> bool:
    """Refuse a RIFF/WAVE file whose ``data`` chunk holds more than ``max_samples``
    samples at ``sample_rate`` (the smaller of what its header promises and what the
    ``size``-byte file holds); False if ``raw`` does not reach that chunk's header."""
    if max_samples is None or raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        return True
    rate = _declared_rate(raw)
    align = None
    for chunk, body, length in _chunks(raw):
        if chunk == b"fmt " and body + 14 <= len(raw):
            align = int.from_bytes(raw[body + 12 : body + 14], "little")
        if chunk == b"data":
            if not rate or not align:
                return True  # scipy refuses such a header in words
            held = max(0, size - body)
            if length not in (0, 0xFFFFFFFF):  # a streaming writer's open size
                held = min(held, length)
            samples = math.ceil(held // align * sample_rate / rate)
            if samples > max_samples:
                seconds = held // align / rate
                raise InvalidInputError(
                    f"{path} holds {seconds:,.1f} s of audio by its header, above "
                    f"{limit or f'the limit of {max_samples:,} samples at {sample_rate} Hz'}"
                )
            return True
    return False


def _check_declared_rate(raw: bytes, path: Path) -> None:
    """Refuse a RIFF/WAVE header's rate outside [MIN_WAV_RATE, MAX_WAV_RATE] Hz."""
    declared = _declared_rate(raw) if raw[:4] == b"RIFF" and raw[8:12] == b"WAVE" else None
    if declared is not None and not MIN_WAV_RATE <= declared <= MAX_WAV_RATE:
        raise InvalidInputError(
            f"{path} declares a sampling rate of {declared} Hz; a recording's rate must be "
            f"in [{MIN_WAV_RATE}, {MAX_WAV_RATE}] Hz"
        )


def _chunks(raw: bytes):
    """(id, offset of its body, declared size) of every chunk of a RIFF/WAVE file, in
    order, as far as the bytes go (chunks are padded to an even size)."""
    pos = 12
    while pos + 8 <= len(raw):
        size = int.from_bytes(raw[pos + 4 : pos + 8], "little")
        yield raw[pos : pos + 4], pos + 8, size
        pos += 8 + size + (size & 1)


def _declared_rate(raw: bytes) -> int | None:
    """The sampling rate the ``fmt`` chunk of a RIFF/WAVE file declares (None if none)."""
    for chunk, body, _ in _chunks(raw):
        if chunk == b"fmt " and body + 8 <= len(raw):
            return int.from_bytes(raw[body + 4 : body + 8], "little")
    return None


def _promised_frames(raw: bytes) -> int | None:
    """Frames the ``data`` chunk's header of a RIFF/WAVE file promises (None if unknown).

    Streaming writers that leave the size open (0 or 0xFFFFFFFF) promise nothing.
    """
    block_align = None
    for chunk, body, size in _chunks(raw):
        if chunk == b"fmt " and body + 14 <= len(raw):
            block_align = int.from_bytes(raw[body + 12 : body + 14], "little")
        if chunk == b"data":
            if not block_align or size in (0, 0xFFFFFFFF):
                return None
            return size // block_align
    return None


# --- numpy implementation -------------------------------------------------------------


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: 3 mels per 200 Hz up to 1 kHz, then log-spaced (27 steps/6.4x)."""
    hz = np.asarray(hz, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    mels = hz / f_sp
    above = hz >= min_log_hz
    mels[above] = min_log_hz / f_sp + np.log(hz[above] / min_log_hz) / logstep
    return mels


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    mels = np.asarray(mels, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    hz = f_sp * mels
    above = mels >= min_log_mel
    hz[above] = min_log_hz * np.exp(logstep * (mels[above] - min_log_mel))
    return hz


def mel_filterbank(pipeline: FeaturePipeline) -> np.ndarray:
    """Slaney-normalised triangular mel filters (n_mels, n_fft // 2 + 1).

    Band ``m`` rises linearly from edge ``f[m]`` to ``f[m+1]`` and falls to ``f[m+2]``,
    the ``n_mels + 2`` edges equally spaced on the mel scale between ``fmin`` and
    ``fmax``; it is scaled by ``2 / (f[m+2] - f[m])``. The weights are rounded to float32
    as librosa's default ``dtype`` does.
    """
    fft_freqs = np.fft.rfftfreq(pipeline.n_fft, 1.0 / pipeline.sample_rate)
    edges = _mel_to_hz(
        np.linspace(
            _hz_to_mel(np.array([pipeline.fmin]))[0],
            _hz_to_mel(np.array([pipeline.fmax]))[0],
            pipeline.n_mels + 2,
        )
    )
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32).astype(np.float64)


def _window(pipeline: FeaturePipeline) -> np.ndarray:
    """Periodic window of ``win_length`` samples zero-padded (centred) to ``n_fft``."""
    n = np.arange(pipeline.win_length)
    if pipeline.window == "hamming":
        win = 0.54 - 0.46 * np.cos(2.0 * np.pi * n / pipeline.win_length)
    else:
        win = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / pipeline.win_length)
    left = (pipeline.n_fft - pipeline.win_length) // 2
    return np.pad(win, (left, pipeline.n_fft - pipeline.win_length - left))


def _check_signal(signal: ArrayLike, pipeline: FeaturePipeline) -> np.ndarray:
    try:
        y = np.asarray(signal, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"the signal must be a numeric array: {exc}") from exc
    if y.ndim != 1:
        raise InvalidInputError(f"the signal must be mono (1-D), got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise InvalidInputError("the signal holds NaN or infinite samples")
    if y.size < pipeline.min_samples:
        raise InvalidInputError(
            f"the signal is too short: {y.size} samples, at least {pipeline.min_samples} "
            f"({pipeline.delta_width} frames) needed"
        )
    if pipeline.preemphasis:
        y = np.concatenate([y[:1], y[1:] - pipeline.preemphasis * y[:-1]])
    return y


def _with_noise_floor(power: np.ndarray, pipeline: FeaturePipeline) -> np.ndarray:
    """The power spectrogram (T, bins) plus the pipeline's flat noise floor, if any:
    ``noise_floor_db`` dB below its mean over frames and bins."""
    if pipeline.noise_floor_db is None:
        return power
    level = power
    if pipeline.level_frames == "loudest_half":
        frame_power = power.sum(axis=1)
        level = power[frame_power >= np.median(frame_power)]
    return power + level.mean() * 10.0 ** (-pipeline.noise_floor_db / 10.0)


def normalise_cepstra(static: ArrayLike, mode: str = "mean", frames=None) -> np.ndarray:
    """Per-utterance normalisation of static cepstra (T, n): ``"mean"`` subtracts each
    column's mean over the utterance (cepstral mean normalisation), ``"meanvar"`` also
    divides by its standard deviation (floored at 1e-3, so a constant column, as
    digital silence gives, becomes 0), ``"none"`` returns them unchanged.  ``frames``
    (a boolean mask or indices) restricts the statistics to those frames; every frame
    is normalised."""
    array = np.asarray(static, dtype=np.float64)
    if mode not in CEPSTRAL_NORMS:
        raise ConfigError(f"cepstral_norm must be one of {CEPSTRAL_NORMS}, got {mode!r}")
    if mode == "none":
        return array
    reference = array if frames is None else array[frames]
    centred = array - reference.mean(axis=0)
    if mode == "mean":
        return centred
    return centred / np.maximum(reference.std(axis=0), _MIN_CEPSTRAL_STD)


def _log_mel_to_mfcc(log_mel: np.ndarray, n_mfcc: int) -> np.ndarray:
    """Orthonormal DCT-II over the mel axis of (T, n_mels); first ``n_mfcc`` columns."""
    from scipy.fft import dct

    return dct(log_mel, type=2, norm="ortho", axis=1)[:, :n_mfcc]


def mfcc_numpy(signal: ArrayLike, pipeline: FeaturePipeline | None = None) -> np.ndarray:
    """Static MFCCs (T, n_mfcc) of a mono signal, numpy/scipy only (steps 1-5 above)."""
    pipeline = pipeline or FeaturePipeline()
    y = _check_signal(signal, pipeline)
    half = pipeline.n_fft // 2
    padded = np.pad(y, (half, half))
    n_frames = pipeline.n_frames(y.size)
    starts = np.arange(n_frames) * pipeline.hop_length
    frames = padded[starts[:, None] + np.arange(pipeline.n_fft)[None, :]]
    power = _with_noise_floor(
        np.abs(np.fft.rfft(frames * _window(pipeline), axis=1)) ** 2, pipeline
    )
    mel = power @ mel_filterbank(pipeline).T
    log_mel = 10.0 * np.log10(np.maximum(mel, _AMIN))
    log_mel = np.maximum(log_mel, log_mel.max() - _TOP_DB)
    return _log_mel_to_mfcc(log_mel, pipeline.n_mfcc)


def delta_features(features: ArrayLike, width: int = 9, order: int = 1) -> np.ndarray:
    """Delta (``order=1``) or delta-delta (``order=2``) of (T, D) features along time.

    The ``order``-th derivative of the least-squares polynomial of degree ``order``
    fitted to ``width`` frames around each frame (Savitzky-Golay); the first and last
    ``width // 2`` frames use the polynomial of the first / last full window. Same as
    ``librosa.feature.delta(..., width=width, order=order, mode="interp")``.
    """
    from scipy.signal import savgol_filter

    array = np.asarray(features, dtype=np.float64)
    if array.ndim != 2:
        raise InvalidInputError(f"features must be 2-D (T, D), got shape {array.shape}")
    if order not in (1, 2):
        raise InvalidInputError(f"order must be 1 or 2, got {order!r}")
    if width < 3 or width % 2 == 0:
        raise InvalidInputError(f"width must be odd and >= 3, got {width!r}")
    if array.shape[0] < width:
        raise InvalidInputError(
            f"{array.shape[0]} frames are too few for deltas over {width} frames"
        )
    return savgol_filter(array, width, polyorder=order, deriv=order, axis=0, mode="interp")


# --- librosa implementation -----------------------------------------------------------


def _require_librosa() -> Any:
    try:
        import librosa
    except ImportError as exc:
        raise ConfigError(
            "librosa is required for backend='librosa'; install it with "
            "`pip install 'smc-hmm[audio]'` or `pip install librosa` "
            "(backend='numpy' computes the same features without it)"
        ) from exc
    return librosa


def mfcc_librosa(signal: ArrayLike, pipeline: FeaturePipeline | None = None) -> np.ndarray:
    """Static MFCCs (T, n_mfcc) through librosa, with the parameters of the numpy version."""
    pipeline = pipeline or FeaturePipeline()
    librosa = _require_librosa()
    y = _check_signal(signal, pipeline)
    power = (
        np.abs(
            librosa.stft(
                y,
                n_fft=pipeline.n_fft,
                hop_length=pipeline.hop_length,
                win_length=pipeline.win_length,
                window=pipeline.window,
                center=True,
                pad_mode="constant",
            )
        )
        ** 2
    )
    weights = librosa.filters.mel(
        sr=pipeline.sample_rate,
        n_fft=pipeline.n_fft,
        n_mels=pipeline.n_mels,
        fmin=pipeline.fmin,
        fmax=pipeline.fmax,
        htk=False,
        norm="slaney",
    )
    # the noise floor on the frames the numpy version keeps (librosa may add one more)
    kept = pipeline.n_frames(y.size)
    floored = _with_noise_floor(power[:, :kept].T, pipeline).T
    mel = weights @ np.concatenate([floored, power[:, kept:]], axis=1)
    log_mel = librosa.power_to_db(mel, ref=1.0, amin=_AMIN, top_db=_TOP_DB)
    mfcc = librosa.feature.mfcc(
        S=log_mel, n_mfcc=pipeline.n_mfcc, dct_type=2, norm="ortho", lifter=0
    )
    return mfcc[:, : pipeline.n_frames(y.size)].T


def _static_mfcc(signal: ArrayLike, pipeline: FeaturePipeline, backend: str) -> np.ndarray:
    if backend == "numpy":
        return mfcc_numpy(signal, pipeline)
    if backend == "librosa":
        return mfcc_librosa(signal, pipeline)
    raise ConfigError(f"backend must be 'numpy' or 'librosa', got {backend!r}")


# --- fixed-length sequences -----------------------------------------------------------


def _feature_matrix(features: ArrayLike, n_features: int | None = None) -> np.ndarray:
    try:
        array = np.asarray(features, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"features must be a numeric array: {exc}") from exc
    if array.ndim != 2 or array.shape[0] < 1:
        raise InvalidInputError(f"features must have shape (T >= 1, D), got {array.shape}")
    if n_features is not None and array.shape[1] != n_features:
        raise InvalidInputError(
            f"features have {array.shape[1]} dimensions, the pipeline has {n_features}"
        )
    if not np.all(np.isfinite(array)):
        raise InvalidInputError("features hold NaN or infinite values")
    return array


def pad_or_cut(
    features: ArrayLike,
    n_frames: int = BENCHMARK_FRAMES,
    align: Literal["center", "start"] = "center",
) -> np.ndarray:
    """Bring a feature sequence (T, D) to exactly ``n_frames`` frames.

    A short sequence is padded by repeating its edge frames (the first frame before,
    the last after: no synthetic silence frame is invented); a long one is cut. With
    ``align="center"`` (the default) padding and cutting are split evenly between both
    ends (the extra frame, if any, goes at the end), keeping the word in the middle;
    with ``align="start"`` frames are added or removed at the end only.
    """
    array = _feature_matrix(features)
    if isinstance(n_frames, bool) or not isinstance(n_frames, (int, np.integer)) or n_frames < 1:
        raise InvalidInputError(f"n_frames must be a positive integer, got {n_frames!r}")
    if align not in ("center", "start"):
        raise InvalidInputError(f"align must be 'center' or 'start', got {align!r}")
    length = array.shape[0]
    if length >= n_frames:
        start = (length - n_frames) // 2 if align == "center" else 0
        return array[start : start + n_frames].copy()
    missing = n_frames - length
    before = missing // 2 if align == "center" else 0
    return np.pad(array, ((before, missing - before), (0, 0)), mode="edge")
