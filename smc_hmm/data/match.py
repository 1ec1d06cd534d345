"""Audio matching in plaintext: which recording of a collection a short snippet was cut from.

Thesis 003, 2.2.2 (music matching): Alice has a snippet of 0.25-0.5 s, Bob a collection of
longer recordings; the answer is the recording and the offset of the best-matching
window, or "no match" when even the best window scores below a public threshold.  This
module holds everything of the task that needs no encryption, so that the secure protocol
(``protocols/match.py``) and this plaintext matcher compute on *the same integers*:

* :class:`Spectrogram` -- the feature: mel-band magnitudes (the square root of the mel
  power spectrum, 24 bands from 0 to 4 kHz) of 40 ms frames every 20 ms.  Compressed
  magnitudes keep white noise a small additive floor on the loud bands, where log-mel
  values or MFCCs let it dominate the quiet ones (``docs/matching.md`` measures both).
* :class:`Quantisation` -- the public integer encoding.  Alice's snippet (L frames x B
  bands) is centred per band over time and scaled to Frobenius norm 2^a, then rounded so
  that every band still sums to exactly zero (:meth:`Quantisation.query_ints`).  Bob
  scales each recording so its loudest frame has norm 2^b (:meth:`recording_ints`).  The
  raw score of window o is the integer <Q, X[o:o+L]>; as Q sums to zero per band it
  equals <Q, X[o:o+L] - mean>, and Bob's per-window integer factor
  c_o = round(2^k d_max / max(D_o, d_max 2^-floor)) (D_o the centred window's norm,
  :meth:`window_factors`) turns it into a normalised correlation:
  score_o = raw_o c_o ~ corr_o 2^(a+k) d_max.
* :func:`candidates` and :func:`match` -- the candidates (candidate 0 is the threshold,
  then every offset of every recording in order, or every ``stride``-th offset with the
  scores of ``stride`` adjacent windows pooled: the approximate mode) and the answer:
  the first candidate of largest value (ties go to the lowest index, so a window must
  beat the threshold strictly).
* :class:`Collection` -- recordings' frames from a folder of WAV files, an ``.npz`` file
  or the bundled FSDD collection (:func:`load_bundled_collection`), and
  :func:`load_bundled_queries` -- the bundled noisy queries of ``smc-hmm bench match``.

The bundled files ``match_collection.npz``, ``match_queries.npz`` and
``match_manifest.json`` in ``smc_hmm/data/fsdd/`` are made by ``scripts/make_match_data.py``
from the Free Spoken Digit Dataset (CC BY-SA 4.0: see ``smc_hmm/data/fsdd/NOTICE``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from smc_hmm.data import bundled_file
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.features import FeaturePipeline, mel_filterbank, read_wav

__all__ = [
    "MATCH_NOTICE",
    "Collection",
    "MatchResult",
    "Quantisation",
    "Query",
    "Spectrogram",
    "answer",
    "candidate_values",
    "candidates",
    "load_bundled_collection",
    "load_bundled_queries",
    "load_match_manifest",
    "match",
    "pooled",
    "raw_scores",
    "window_counts",
]

MATCH_NOTICE = """\
The matching files (match_collection.npz, match_queries.npz, match_manifest.json) are
derived from the same recordings: mel-band magnitudes of 200 recordings (the collection)
and of short excerpts of recordings, with white noise and a random gain added (the
queries), made by scripts/make_match_data.py of the smc-hmm project (see
docs/matching.md). They are licensed CC BY-SA 4.0 like the other derived files here.
"""

COLLECTION_FILE = "match_collection.npz"
QUERIES_FILE = "match_queries.npz"
MANIFEST_FILE = "match_manifest.json"
#: the SNR label of queries without added noise
CLEAN = "clean"


# -- the feature ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Spectrogram:
    """Mel-band magnitudes of frames of ``win_length`` samples every ``hop_length``.

    Frame t covers samples [t hop, t hop + win) (no padding: a signal of N >= win samples
    has 1 + (N - win) // hop frames); a periodic Hann window, the power spectrum of an
    ``n_fft``-point FFT, ``n_bands`` Slaney mel triangles between ``fmin`` and ``fmax``
    (:func:`smc_hmm.features.mel_filterbank`), then power ** ``exponent``.
    """

    sample_rate: int = 8000
    win_length: int = 320
    hop_length: int = 160
    n_fft: int = 512
    n_bands: int = 24
    fmin: float = 0.0
    fmax: float = 4000.0
    exponent: float = 0.5

    def __post_init__(self):
        for name in ("sample_rate", "win_length", "hop_length", "n_fft", "n_bands"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        if self.n_fft < self.win_length:
            raise ConfigError("n_fft must be at least win_length")
        if not 0 < self.exponent <= 1:
            raise ConfigError(f"exponent must be in (0, 1], got {self.exponent!r}")
        self._pipeline()  # checks the band edges

    def _pipeline(self) -> FeaturePipeline:
        return FeaturePipeline(
            sample_rate=self.sample_rate,
            n_mfcc=1,
            win_length=self.win_length,
            hop_length=self.hop_length,
            n_fft=self.n_fft,
            window="hann",
            n_mels=self.n_bands,
            fmin=self.fmin,
            fmax=self.fmax,
        )

    @property
    def frame_seconds(self) -> float:
        """The time between frames (the offsets' unit)."""
        return self.hop_length / self.sample_rate

    def n_frames(self, n_samples: int) -> int:
        """Frames of a signal of ``n_samples`` samples (0 below one window)."""
        n_samples = int(n_samples)
        return (
            0
            if n_samples < self.win_length
            else 1 + (n_samples - self.win_length) // (self.hop_length)
        )

    def frames(self, signal) -> np.ndarray:
        """The (T, n_bands) magnitudes of a mono signal at ``sample_rate``."""
        from scipy.signal import get_window

        y = np.asarray(signal, dtype=np.float64)
        if y.ndim != 1 or not np.all(np.isfinite(y)):
            raise InvalidInputError("a signal must be a finite 1-D array of samples")
        count = self.n_frames(y.size)
        if count < 1:
            raise InvalidInputError(
                f"a signal of {y.size} samples is shorter than one {self.win_length}-sample frame"
            )
        index = np.arange(count)[:, None] * self.hop_length + np.arange(self.win_length)[None]
        window = get_window("hann", self.win_length, fftbins=True)
        power = np.abs(np.fft.rfft(y[index] * window, self.n_fft, axis=1)) ** 2
        mel = power @ mel_filterbank(self._pipeline()).T
        return np.maximum(mel, 0.0) ** self.exponent

    def from_wav(
        self,
        path: str | Path,
        start: float | None = None,
        seconds: float | None = None,
        max_seconds: float | None = None,
    ) -> np.ndarray:
        """The frames of a WAV file (any rate, resampled), or of its excerpt from ``start``
        seconds lasting ``seconds``; a file holding more than ``max_seconds`` of audio is
        refused from its header, before its samples are read."""
        cap = None if max_seconds is None else math.floor(max_seconds * self.sample_rate)
        limit = None if max_seconds is None else f"--max-seconds {max_seconds:g}"
        signal = read_wav(path, self.sample_rate, self.win_length, cap, limit)
        if start is not None or seconds is not None:
            a = round(float(start or 0.0) * self.sample_rate)
            b = signal.size if seconds is None else a + round(float(seconds) * self.sample_rate)
            if not 0 <= a < b <= signal.size:
                raise InvalidInputError(
                    f"the excerpt [{a}, {b}) lies outside {path} ({signal.size} samples)"
                )
            signal = signal[a:b]
        return self.frames(signal)

    def to_dict(self) -> dict:
        return asdict(self)


# -- the public integer encoding -------------------------------------------------------------


def _whole(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value <= hi:
        raise InvalidInputError(f"{name} must be an int in [{lo}, {hi}], got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Quantisation:
    """The public integer encoding of snippets, recordings and window factors.

    ``query_bits`` (a): Alice's centred snippet has Frobenius norm 2^a before rounding.
    ``frame_bits`` (b): a recording's loudest frame has norm 2^b before rounding.
    ``factor_bits`` (k): every window factor is at least about 2^k.
    ``floor_bits``: window norms below d_max 2^-floor_bits count as that floor (silence
    would otherwise get an unbounded factor).
    """

    query_bits: int = 6
    frame_bits: int = 6
    factor_bits: int = 7
    floor_bits: int = 5

    def __post_init__(self):
        _whole("query_bits", self.query_bits, 2, 24)
        _whole("frame_bits", self.frame_bits, 2, 24)
        _whole("factor_bits", self.factor_bits, 1, 32)
        _whole("floor_bits", self.floor_bits, 0, 24)

    # Alice's side
    def query_ints(self, frames) -> np.ndarray:
        """Alice's (L, B) integers: centred per band, norm 2^a, every band summing to 0.

        Rounding keeps each band's sum at zero (largest-remainder correction), so every
        entry is within 1 of its real value: |Q_ij| <= 2^a + 1 and ||Q|| <= 2^a + sqrt(LB).
        A snippet with no variation gives zeros."""
        x = _frames(frames, "snippet")
        centred = x - x.mean(axis=0, keepdims=True)
        norm = float(np.linalg.norm(centred))
        if not norm > 0:
            return np.zeros(x.shape, dtype=np.int64)
        real = centred * (2.0**self.query_bits / norm)
        out = np.rint(real).astype(np.int64)
        for j in range(out.shape[1]):
            excess = int(out[:, j].sum())
            if excess:  # move the |excess| entries rounded furthest in its direction
                error = (out[:, j] - real[:, j]) * np.sign(excess)
                picks = np.argsort(-error, kind="stable")[: abs(excess)]
                out[picks, j] -= int(np.sign(excess))
        return out

    def query_entry_bound(self) -> int:
        """The largest |entry| of Alice's integers (public)."""
        return (1 << self.query_bits) + 1

    def query_norm_bound(self, length: int, bands: int) -> float:
        """A public bound on the Frobenius norm of Alice's integers."""
        return 2.0**self.query_bits + math.sqrt(length * bands)

    # Bob's side
    def recording_ints(self, frames) -> np.ndarray:
        """Bob's (T, B) non-negative integers: the loudest frame scaled to norm 2^b."""
        x = _frames(frames, "recording")
        if np.any(x < 0):
            raise InvalidInputError("recording frames are magnitudes (non-negative)")
        top = float(np.linalg.norm(x, axis=1).max())
        if not top > 0:
            return np.zeros(x.shape, dtype=np.int64)
        return np.rint(x * (2.0**self.frame_bits / top)).astype(np.int64)

    def d_max(self, length: int, bands: int) -> float:
        """A public bound on the norm of any (centred) window of Bob's integers."""
        return math.sqrt(length) * (2.0**self.frame_bits + math.sqrt(bands) / 2)

    def window_factors(self, ints, length: int) -> np.ndarray:
        """Bob's factor c_o = round(2^k d_max / max(D_o, d_max 2^-floor)) of every window o
        (D_o the Frobenius norm of the window minus its per-band mean); int64."""
        x = np.asarray(ints, dtype=np.float64)
        count = x.shape[0] - length + 1
        if count < 1:
            return np.zeros(0, dtype=np.int64)
        d_max = self.d_max(length, x.shape[1])
        windows = np.lib.stride_tricks.sliding_window_view(x, (length, x.shape[1]))[:, 0]
        centred = windows - windows.mean(axis=1, keepdims=True)
        norms = np.sqrt(np.einsum("oij,oij->o", centred, centred))
        norms = np.maximum(norms, d_max * 2.0**-self.floor_bits)
        return np.rint(2.0**self.factor_bits * d_max / norms).astype(np.int64)

    def factor_bound(self) -> int:
        """The largest window factor (public)."""
        return (1 << (self.factor_bits + self.floor_bits)) + 1

    # bounds of the protocol's integers
    def raw_bound(self, length: int, bands: int) -> int:
        """A public bound on |<Q, X[o:o+L]>| (any of Bob's windows, any snippet)."""
        return math.ceil(self.query_norm_bound(length, bands) * self.d_max(length, bands)) + 1

    def score_bound(self, length: int, bands: int) -> int:
        """A public bound on |raw_o c_o| (Alice's bands sum to zero, so
        |raw_o| <= ||Q|| D_o, and c_o D_o <= 2^k d_max + D_o / 2)."""
        d_max = self.d_max(length, bands)
        reach = 2.0**self.factor_bits * d_max + d_max / 2
        return math.ceil(self.query_norm_bound(length, bands) * reach) + 1

    def score_unit(self, length: int, bands: int) -> float:
        """A score is about a normalised correlation times this (2^(a+k) d_max)."""
        return 2.0 ** (self.query_bits + self.factor_bits) * self.d_max(length, bands)

    def threshold_units(self, threshold: float, length: int, bands: int) -> int:
        """The public threshold (a normalised correlation) in score units."""
        return round(float(threshold) * self.score_unit(length, bands))

    def to_dict(self) -> dict:
        return asdict(self)


def _frames(frames, what: str) -> np.ndarray:
    x = np.asarray(frames, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1 or not np.all(np.isfinite(x)):
        raise InvalidInputError(f"{what} frames must be a finite (frames, bands) array")
    return x


# -- windows, candidates and the plaintext answer ---------------------------------------------


def window_counts(lengths: Sequence[int], length: int) -> list[int]:
    """Windows of ``length`` frames of each recording: max(0, T - L + 1)."""
    return [max(0, int(t) - int(length) + 1) for t in lengths]


def candidates(lengths: Sequence[int], length: int, stride: int = 1) -> list[tuple[int, int]]:
    """The (recording, offset) of every candidate after the threshold (candidate 0):
    every ``stride``-th offset of every recording, in order (``stride`` 1: every offset)."""
    stride = _whole("stride", stride, 1, 1 << 16)
    return [
        (r, o)
        for r, count in enumerate(window_counts(lengths, length))
        for o in range(0, count, stride)
    ]


def raw_scores(query_ints, recording_ints) -> np.ndarray:
    """<Q, X[o:o+L]> for every window o of one recording (int64)."""
    q = np.asarray(query_ints, dtype=np.int64)
    x = np.asarray(recording_ints, dtype=np.int64)
    count = x.shape[0] - q.shape[0] + 1
    if count < 1:
        return np.zeros(0, dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(x, q.shape)[:, 0]
    return np.einsum("oij,ij->o", windows, q)


def pooled(scores: np.ndarray, stride: int) -> list[int]:
    """The approximate mode's candidate values of one recording: for every ``stride``-th
    offset o the sum of the scores at o, o + 1, ..., o + stride - 1 (the last window
    repeated past the end); ``stride`` 1 gives the scores themselves."""
    count = len(scores)
    return [
        sum(int(scores[min(o + j, count - 1)]) for j in range(stride))
        for o in range(0, count, stride)
    ]


def candidate_values(
    query_ints, recordings: Sequence[np.ndarray], quant: Quantisation, stride: int = 1
) -> list[int]:
    """The value of every candidate after the threshold (:func:`candidates`' order)."""
    q = np.asarray(query_ints, dtype=np.int64)
    out: list[int] = []
    for x in recordings:
        factors = quant.window_factors(x, q.shape[0])
        if factors.size:
            out += pooled(raw_scores(q, x) * factors, stride)
    return out


@dataclass(frozen=True)
class MatchResult:
    """An answer: ``index`` of the winning candidate (0: no match), its recording index,
    id and offset in frames (None for no match), and its value in score units."""

    index: int
    recording: int | None
    id: str | None
    offset: int | None
    value: int

    @property
    def matched(self) -> bool:
        return self.recording is not None


def answer(index: int, lengths, length: int, stride: int, ids) -> MatchResult:
    """The answer named by candidate ``index`` (what Alice learns from the secure argmax)."""
    if index == 0:
        return MatchResult(0, None, None, None, 0)
    table = candidates(lengths, length, stride)
    if not 1 <= index <= len(table):
        raise InvalidInputError(f"candidate {index} is not one of {len(table)} (+ threshold)")
    r, o = table[index - 1]
    return MatchResult(index, r, str(ids[r]), o, 0)


def match(
    query_frames,
    collection: Collection,
    *,
    quant: Quantisation | None = None,
    threshold: float = 0.0,
    stride: int = 1,
) -> MatchResult:
    """The plaintext matcher: the first candidate of largest value, the threshold first."""
    quant = quant or Quantisation()
    q = quant.query_ints(query_frames)
    length, bands = q.shape
    if bands != collection.bands:
        raise InvalidInputError(
            f"the snippet has {bands} bands per frame, the collection {collection.bands}"
        )
    values = [stride * quant.threshold_units(threshold, length, bands)]
    values += candidate_values(q, collection.ints(quant), quant, stride)
    best = int(np.argmax(np.array(values, dtype=object)))  # the first of the largest
    result = answer(best, collection.lengths, length, stride, collection.ids)
    return MatchResult(result.index, result.recording, result.id, result.offset, values[best])


# -- collections and the bundled data --------------------------------------------------------


@dataclass
class Collection:
    """Bob's recordings: an id and the (T, B) magnitudes of each."""

    ids: list[str]
    frames: list[np.ndarray]
    spectrogram: Spectrogram = field(default_factory=Spectrogram)
    _ints: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if len(self.ids) != len(self.frames) or not self.frames:
            raise InvalidInputError("a collection needs at least one recording, one id each")
        self.frames = [_frames(f, "recording") for f in self.frames]
        bands = {f.shape[1] for f in self.frames}
        if bands != {self.spectrogram.n_bands}:
            raise InvalidInputError(
                f"recordings have {sorted(bands)} bands, the spectrogram {self.spectrogram.n_bands}"
            )
        self.ids = [str(i) for i in self.ids]

    @property
    def lengths(self) -> list[int]:
        return [f.shape[0] for f in self.frames]

    @property
    def bands(self) -> int:
        return self.spectrogram.n_bands

    def __len__(self) -> int:
        return len(self.frames)

    def head(self, count: int) -> Collection:
        """The first ``count`` recordings."""
        count = _whole("count", count, 1, len(self))
        return Collection(self.ids[:count], self.frames[:count], self.spectrogram)

    def take(self, indices) -> Collection:
        """The recordings at ``indices``, in that order."""
        indices = [int(i) for i in indices]
        if not indices or any(not 0 <= i < len(self) for i in indices):
            raise InvalidInputError(f"indices must name recordings 0..{len(self) - 1}")
        return Collection(
            [self.ids[i] for i in indices], [self.frames[i] for i in indices], self.spectrogram
        )

    def ints(self, quant: Quantisation) -> list[np.ndarray]:
        """Bob's integer frames under ``quant`` (computed once)."""
        key = (quant.frame_bits,)
        if key not in self._ints:
            self._ints[key] = [quant.recording_ints(f) for f in self.frames]
        return self._ints[key]

    @classmethod
    def from_folder(
        cls,
        folder: str | Path,
        spectrogram: Spectrogram | None = None,
        max_seconds: float | None = None,
    ) -> Collection:
        """Every ``*.wav`` file of ``folder`` (sorted by name; the id is the file's stem);
        one holding more than ``max_seconds`` of audio is refused from its header."""
        spectrogram = spectrogram or Spectrogram()
        folder = Path(folder)
        if not folder.is_dir():
            raise ConfigError(f"{folder} is not a folder of WAV files")
        paths = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".wav")
        if not paths:
            raise ConfigError(f"{folder} holds no .wav files")
        frames = [spectrogram.from_wav(p, max_seconds=max_seconds) for p in paths]
        return cls([p.stem for p in paths], frames, spectrogram)

    @classmethod
    def from_npz(cls, path) -> Collection:
        """A collection written by :meth:`save` (an ``.npz`` archive; anything else is
        refused in words, never with numpy's advice to unpickle it)."""
        import zipfile

        if not zipfile.is_zipfile(path):
            raise ConfigError(
                f"{path} is not a match collection file: an .npz archive written by "
                "Collection.save, or a folder of WAV files, is expected"
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                ids = [str(x) for x in data["ids"]]
                lengths = [int(x) for x in data["lengths"]]
                flat = np.asarray(data["frames"], dtype=np.float64)
                spec = Spectrogram(**json.loads(str(data["spectrogram"])))
        except (OSError, KeyError, ValueError, TypeError) as e:
            raise ConfigError(f"{path} is not a match collection file: {e}") from e
        if sum(lengths) != flat.shape[0] or len(ids) != len(lengths):
            raise ConfigError(f"{path}: the frame counts do not add up")
        cuts = np.cumsum([0, *lengths])
        return cls(ids, [flat[a:b] for a, b in zip(cuts[:-1], cuts[1:])], spec)

    @classmethod
    def load(cls, spec: str | Path, max_seconds: float | None = None) -> Collection:
        """``fsdd`` (the bundled collection), a folder of WAV files (each of at most
        ``max_seconds`` of audio, if given) or an ``.npz`` file."""
        if str(spec) == "fsdd":
            return load_bundled_collection()
        path = Path(spec)
        if path.is_dir():
            return cls.from_folder(path, max_seconds=max_seconds)
        if path.is_file():
            return cls.from_npz(path)
        raise ConfigError(
            f"collection {spec}: not 'fsdd' (the bundled one), a folder of WAV files or an "
            ".npz file written by Collection.save"
        )

    def save(self, path) -> None:
        """An ``.npz`` file of the frames (float32), ids and spectrogram parameters."""
        np.savez_compressed(
            path,
            ids=np.array(self.ids),
            lengths=np.array(self.lengths, dtype=np.int64),
            frames=np.concatenate(self.frames).astype(np.float32),
            spectrogram=np.array(json.dumps(self.spectrogram.to_dict())),
        )


def load_bundled_collection() -> Collection:
    """The bundled collection: 200 FSDD recordings (``match_collection.npz``)."""
    with resources.as_file(bundled_file(COLLECTION_FILE)) as path:
        return Collection.from_npz(path)


def load_match_manifest() -> dict[str, Any]:
    """How the bundled matching data were made, and their public default threshold."""
    return json.loads(bundled_file(MANIFEST_FILE).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Query:
    """A bundled query: its frames, SNR label (``clean`` or e.g. ``10``), whether its
    source recording is in the collection and, if so, its index and true offset (in
    frames, from the excerpt's start sample), the excerpt's source id, start and length."""

    frames: np.ndarray
    snr: str
    inside: bool
    recording: int | None
    offset: float | None
    source: str
    start: int
    samples: int


def load_bundled_queries(snr: str | None = None, inside: bool | None = None) -> list[Query]:
    """The bundled queries (``match_queries.npz``), optionally one SNR and one kind."""
    with resources.as_file(bundled_file(QUERIES_FILE)) as path, np.load(path) as data:
        lengths = [int(x) for x in data["lengths"]]
        flat = np.asarray(data["frames"], dtype=np.float64)
        cuts = np.cumsum([0, *lengths])
        rows = zip(
            cuts[:-1],
            cuts[1:],
            data["snr"],
            data["inside"],
            data["recording"],
            data["offset"],
            data["source"],
            data["start"],
            data["samples"],
        )
        out = []
        for a, b, s, ins, rec, off, src, start, samples in rows:
            if (snr is not None and str(s) != str(snr)) or (
                inside is not None and bool(ins) != inside
            ):
                continue
            out.append(
                Query(
                    flat[a:b],
                    str(s),
                    bool(ins),
                    int(rec) if ins else None,
                    float(off) if ins else None,
                    str(src),
                    int(start),
                    int(samples),
                )
            )
        return out
