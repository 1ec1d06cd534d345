"""MFCC extraction (smc_hmm.features): numpy vs librosa, frame counts, deltas, WAV input."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile

from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.features import (
    BENCHMARK_FRAMES,
    FeaturePipeline,
    delta_features,
    mel_filterbank,
    mfcc_numpy,
    pad_or_cut,
    read_wav,
)

#: the FSDD recordings (not bundled): FSDD_DIR names a checkout of the Free Spoken Digit
#: Dataset; without it the tests that read recordings are skipped (README, "Tests")
RECORDINGS = Path(os.environ.get("FSDD_DIR") or "FSDD_DIR-is-not-set") / "recordings"
NUMPY_VS_LIBROSA_ATOL = 1e-5  # measured: at most 6e-7 over all 2,500 FSDD recordings


def _synthetic(n_samples: int = 5000, seed: int = 0) -> np.ndarray:
    """A vowel-like signal: a gliding harmonic tone with a syllable envelope, plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_samples) / 8000.0
    f0 = 120.0 + 60.0 * t
    phase = 2 * np.pi * np.cumsum(f0) / 8000.0
    tone = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = np.sin(np.pi * np.arange(n_samples) / n_samples) ** 2
    return 0.3 * envelope * tone + 0.003 * rng.standard_normal(n_samples)


def _signals() -> list:
    """A synthetic signal, plus three real recordings when the FSDD is available."""
    signals = [pytest.param(_synthetic(), id="synthetic")]
    if RECORDINGS.is_dir():
        for name in ("0_george_0.wav", "7_jackson_3.wav", "9_yweweler_49.wav"):
            signals.append(pytest.param(read_wav(RECORDINGS / name), id=name))
    return signals


# --- numpy vs librosa -------------------------------------------------------------------


@pytest.mark.parametrize("signal", _signals())
def test_numpy_features_match_librosa(signal):
    pytest.importorskip("librosa")
    pipeline = FeaturePipeline()
    ours = pipeline.extract(signal, backend="numpy")
    ref = pipeline.extract(signal, backend="librosa")
    assert ours.shape == ref.shape == (pipeline.n_frames(signal.size), 39)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=NUMPY_VS_LIBROSA_ATOL)
    assert np.max(np.abs(ref[:, 0])) > 10  # c0 is large: the tolerance is tight in relative terms


def test_mel_filterbank_matches_librosa():
    librosa = pytest.importorskip("librosa")
    pipeline = FeaturePipeline()
    ref = librosa.filters.mel(
        sr=8000, n_fft=200, n_mels=40, fmin=0.0, fmax=4000.0, htk=False, norm="slaney"
    )
    np.testing.assert_allclose(mel_filterbank(pipeline), ref, rtol=1e-6, atol=1e-9)


def test_deltas_match_librosa():
    librosa = pytest.importorskip("librosa")
    data = np.random.default_rng(1).normal(size=(30, 13))
    for order in (1, 2):
        np.testing.assert_allclose(
            delta_features(data, 9, order),
            librosa.feature.delta(data, width=9, order=order, axis=0),
            atol=1e-12,
        )


def test_librosa_backend_missing_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "librosa", None)  # makes `import librosa` fail
    with pytest.raises(ConfigError, match="pip install"):
        FeaturePipeline().extract(_synthetic(), backend="librosa")


def test_unknown_backend():
    with pytest.raises(ConfigError):
        FeaturePipeline().extract(_synthetic(), backend="torch")


# --- shapes and the pipeline steps ------------------------------------------------------


def test_frame_counts():
    pipeline = FeaturePipeline()
    assert pipeline.extract(_synthetic(7840)).shape == (BENCHMARK_FRAMES, 39)  # 0.98 s
    assert pipeline.extract(_synthetic(7841)).shape == (99, 39)
    assert pipeline.extract(_synthetic(8000)).shape == (100, 39)
    assert mfcc_numpy(_synthetic(pipeline.min_samples)).shape == (9, 13)
    with pytest.raises(InvalidInputError, match="too short"):
        pipeline.extract(_synthetic(pipeline.min_samples - 1))


def test_features_are_finite_for_digital_silence_and_noise():
    pipeline = FeaturePipeline()
    silence = pipeline.extract(np.zeros(4000))
    assert np.all(np.isfinite(silence))
    np.testing.assert_allclose(silence[:, 13:], 0.0, atol=1e-9)  # constant: no deltas
    noise = pipeline.extract(np.random.default_rng(2).normal(size=4000))
    assert np.all(np.isfinite(noise))


def test_deltas_are_the_regression_formula_inside_and_exact_on_ramps():
    rng = np.random.default_rng(3)
    data = rng.normal(size=(25, 4))
    d1 = delta_features(data, 9, 1)
    n = np.arange(1, 5)
    for t in range(4, 21):
        expected = (n[:, None] * (data[t + n] - data[t - n])).sum(axis=0) / (2 * (n**2).sum())
        np.testing.assert_allclose(d1[t], expected, atol=1e-12)
    ramp = np.outer(np.arange(20.0), [1.0, -2.0])
    np.testing.assert_allclose(delta_features(ramp, 9, 1), np.tile([1.0, -2.0], (20, 1)))
    np.testing.assert_allclose(delta_features(ramp, 9, 2), 0.0, atol=1e-12)
    parabola = np.arange(20.0)[:, None] ** 2
    np.testing.assert_allclose(delta_features(parabola, 9, 2), 2.0)
    with pytest.raises(InvalidInputError):
        delta_features(data[:8], 9, 1)
    with pytest.raises(InvalidInputError):
        delta_features(data, 9, 3)


def test_mel_filterbank_shape_and_slaney_scale():
    weights = mel_filterbank(FeaturePipeline())
    assert weights.shape == (40, 101)
    assert np.all(weights >= 0) and np.all(weights.max(axis=1) > 0)
    peaks = np.argmax(weights, axis=1)
    assert np.all(np.diff(peaks) >= 0)
    # Slaney normalisation: every triangle has unit area in Hz (40 Hz bins), up to sampling
    areas = weights.sum(axis=1) * 40.0
    np.testing.assert_allclose(areas[5:], 1.0, rtol=0.15)


def test_signal_validation():
    pipeline = FeaturePipeline()
    with pytest.raises(InvalidInputError, match="mono"):
        pipeline.extract(np.zeros((4000, 2)))
    bad = _synthetic()
    bad[10] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        pipeline.extract(bad)
    with pytest.raises(InvalidInputError):
        pipeline.extract(["a", "b"])


# --- fixed length -----------------------------------------------------------------------


def test_pad_or_cut():
    x = np.arange(40.0 * 3).reshape(40, 3)
    padded = pad_or_cut(x, 98)
    assert padded.shape == (98, 3)
    np.testing.assert_array_equal(padded[29:69], x)  # 58 frames added: 29 before, 29 after
    np.testing.assert_array_equal(padded[:29], np.tile(x[0], (29, 1)))
    np.testing.assert_array_equal(padded[69:], np.tile(x[-1], (29, 1)))
    start = pad_or_cut(x, 45, align="start")
    np.testing.assert_array_equal(start[:40], x)
    np.testing.assert_array_equal(start[40:], np.tile(x[-1], (5, 1)))
    long = np.arange(120.0)[:, None]
    np.testing.assert_array_equal(pad_or_cut(long, 98)[:, 0], np.arange(11.0, 109.0))
    np.testing.assert_array_equal(pad_or_cut(long, 98, align="start")[:, 0], np.arange(98.0))
    np.testing.assert_array_equal(pad_or_cut(x, 40), x)
    odd = pad_or_cut(x, 43)
    np.testing.assert_array_equal(odd[1:41], x)  # one frame before, two after
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidInputError):
            pad_or_cut(x, bad)
    with pytest.raises(InvalidInputError):
        pad_or_cut(x, 98, align="end")
    with pytest.raises(InvalidInputError):
        pad_or_cut(np.zeros((0, 3)), 98)


# --- the pipeline object ----------------------------------------------------------------


def test_pipeline_round_trip_and_standardisation():
    rng = np.random.default_rng(4)
    feats = [rng.normal(3.0, 2.0, size=(50, 39)) for _ in range(4)]
    pipeline = FeaturePipeline().fit_standardisation(feats)
    assert pipeline.standardised and len(pipeline.mean) == len(pipeline.std) == 39
    frames = np.concatenate([pipeline.standardise(f) for f in feats])
    np.testing.assert_allclose(frames.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(frames.std(axis=0), 1.0, atol=1e-12)
    text = json.dumps(pipeline.to_dict())
    again = FeaturePipeline.from_dict(json.loads(text))
    assert again == pipeline  # floats survive JSON exactly
    assert FeaturePipeline.from_json(pipeline.to_json()) == pipeline
    assert FeaturePipeline.from_dict(FeaturePipeline().to_dict()) == FeaturePipeline()
    with pytest.raises(dataclasses.FrozenInstanceError):
        pipeline.n_mfcc = 12  # type: ignore[misc]


def test_pipeline_rejects_bad_parameters():
    good = FeaturePipeline().to_dict()
    for key, value in [
        ("format", "other/1"),
        ("colour", 1),
        ("n_mfcc", 0),
        ("n_fft", 100),
        ("delta_width", 8),
        ("window", "kaiser"),
        ("fmax", 5000.0),
        ("mean", [0.0] * 39),
        ("preemphasis", 1.0),
        ("hop_length", 2.5),
        ("noise_floor_db", 0.0),
        ("noise_floor_db", "25"),
        ("cepstral_norm", "median"),
        ("level_frames", "quietest"),
    ]:
        with pytest.raises(ConfigError):
            FeaturePipeline.from_dict({**good, key: value})
    with pytest.raises(ConfigError):
        FeaturePipeline.from_dict({**good, "mean": [0.0] * 38, "std": [1.0] * 38})
    with pytest.raises(ConfigError):
        FeaturePipeline.from_dict({**good, "mean": [0.0] * 39, "std": [0.0] * 39})
    with pytest.raises(ConfigError):
        FeaturePipeline.from_json("{not json")
    with pytest.raises(ConfigError, match="no standardisation"):
        FeaturePipeline().standardise(np.zeros((3, 39)))
    fitted = FeaturePipeline().fit_standardisation([np.random.default_rng(0).normal(size=(9, 39))])
    with pytest.raises(InvalidInputError):
        fitted.standardise(np.zeros((3, 13)))


def test_non_default_pipeline_still_matches_librosa():
    pytest.importorskip("librosa")
    pipeline = FeaturePipeline(
        n_fft=256, window="hann", n_mels=26, fmin=100.0, fmax=3800.0, preemphasis=0.97
    )
    signal = _synthetic(6000, seed=5)
    np.testing.assert_allclose(
        pipeline.extract(signal), pipeline.extract(signal, "librosa"), atol=NUMPY_VS_LIBROSA_ATOL
    )


# --- WAV files --------------------------------------------------------------------------


def _write(path: Path, rate: int, data: np.ndarray) -> Path:
    wavfile.write(path, rate, data)
    return path


def test_read_wav_scales_16_bit_and_matches_features(tmp_path):
    samples = (_synthetic() * 32767).astype(np.int16)
    path = _write(tmp_path / "ok.wav", 8000, samples)
    signal = read_wav(path)
    assert signal.dtype == np.float64
    np.testing.assert_array_equal(signal, samples / 32768.0)
    pipeline = FeaturePipeline()
    np.testing.assert_array_equal(pipeline.features_from_wav(path), pipeline.extract(signal))


def test_read_wav_accepts_float_and_resamples(tmp_path):
    signal = _synthetic(8000)
    path = _write(tmp_path / "f32.wav", 8000, signal.astype(np.float32))
    np.testing.assert_allclose(read_wav(path), signal, atol=1e-7)
    t = np.arange(16000) / 16000.0
    tone = 0.5 * np.sin(2 * np.pi * 440.0 * t)
    resampled = read_wav(_write(tmp_path / "16k.wav", 16000, tone))
    assert resampled.shape == (8000,)
    expected = 0.5 * np.sin(2 * np.pi * 440.0 * np.arange(8000) / 8000.0)
    np.testing.assert_allclose(resampled[100:-100], expected[100:-100], atol=1e-3)


def test_bad_wav_files_raise_typed_errors(tmp_path):
    stereo = _write(tmp_path / "stereo.wav", 8000, np.zeros((4000, 2), dtype=np.int16))
    with pytest.raises(InvalidInputError, match="2 channels"):
        read_wav(stereo)
    text = tmp_path / "notes.wav"
    text.write_text("this is not a RIFF file")
    with pytest.raises(InvalidInputError, match="not a readable WAV"):
        read_wav(text)
    empty = _write(tmp_path / "empty.wav", 8000, np.zeros(0, dtype=np.int16))
    with pytest.raises(InvalidInputError, match="no samples"):
        read_wav(empty)
    short = _write(tmp_path / "short.wav", 8000, np.ones(300, dtype=np.int16))
    with pytest.raises(InvalidInputError, match="too short"):
        FeaturePipeline().features_from_wav(short)
    with pytest.raises(InvalidInputError, match="no such"):
        read_wav(tmp_path / "missing.wav")
    nan = _write(tmp_path / "nan.wav", 8000, np.full(4000, np.nan, dtype=np.float32))
    with pytest.raises(InvalidInputError, match="NaN"):
        read_wav(nan)


@pytest.mark.parametrize("cut", [4, 20, 30, 36, 40])
def test_a_wav_cut_inside_its_header_is_a_typed_error(tmp_path, cut):
    whole = _write(tmp_path / "whole.wav", 8000, (_synthetic(3472) * 32767).astype(np.int16))
    part = tmp_path / f"first{cut}.wav"
    part.write_bytes(whole.read_bytes()[:cut])
    with pytest.raises(InvalidInputError, match="not a readable WAV file"):
        read_wav(part)


@pytest.mark.parametrize("present", [0, 1, 2000, 3471])
def test_a_wav_holding_fewer_samples_than_its_header_promises_is_refused(tmp_path, present):
    whole = _write(tmp_path / "whole.wav", 8000, (_synthetic(3472) * 32767).astype(np.int16))
    part = tmp_path / "truncated.wav"
    part.write_bytes(whole.read_bytes()[: 44 + 2 * present])  # 44-byte header, 16-bit mono
    with pytest.raises(InvalidInputError, match=f"promises 3472 samples, the file holds {present}"):
        read_wav(part)
    assert read_wav(whole).shape == (3472,)


@pytest.mark.parametrize("rate", [1, 3999, 192_001, 4_000_000])
def test_a_declared_rate_outside_the_public_range_is_refused_before_any_sample_is_read(
    tmp_path, rate
):
    """A 40 KB file declaring 1 Hz used to be resampled to 8 kHz (gigabytes) before any
    check: the header's rate is now checked first, and the refusal names the range."""
    path = _write(tmp_path / "rate.wav", rate, (_synthetic(20000) * 32767).astype(np.int16))
    with pytest.raises(InvalidInputError, match=f"declares a sampling rate of {rate} Hz"):
        read_wav(path)
    for ok in (4000, 192_000):
        assert read_wav(_write(tmp_path / f"ok{ok}.wav", ok, np.ones(8000, np.int16))).size


def test_a_wav_cut_inside_a_sample_says_so(tmp_path):
    whole = _write(tmp_path / "whole.wav", 8000, (_synthetic(3472) * 32767).astype(np.int16))
    part = tmp_path / "odd.wav"
    part.write_bytes(whole.read_bytes()[:-1])  # the last 16-bit sample loses a byte
    with pytest.raises(InvalidInputError, match="truncated inside a sample"):
        read_wav(part)


def test_a_wav_with_an_open_ended_data_size_reads_what_it_holds(tmp_path):
    """Streaming writers leave the sizes at 0xFFFFFFFF: such a file promises nothing."""
    samples = (_synthetic(3000) * 32767).astype(np.int16)
    raw = bytearray(_write(tmp_path / "ok.wav", 8000, samples).read_bytes())
    assert raw[36:40] == b"data"
    raw[40:44] = (0xFFFFFFFF).to_bytes(4, "little")
    streamed = tmp_path / "streamed.wav"
    streamed.write_bytes(bytes(raw))
    np.testing.assert_array_equal(read_wav(streamed), samples / 32768.0)


@pytest.mark.skipif(not RECORDINGS.is_dir(), reason="FSDD recordings: set FSDD_DIR")
def test_real_recording_reads_as_8k_mono():
    signal = read_wav(RECORDINGS / "3_theo_10.wav")
    assert signal.ndim == 1 and 1000 < signal.size < 20000
    assert 0.01 < np.max(np.abs(signal)) <= 1.0


# --- per-utterance normalisation (docs/speech-models.md) ---------------------------------

RECIPE = FeaturePipeline(noise_floor_db=25.0, cepstral_norm="mean", level_frames="loudest_half")


def test_the_recipe_pipeline_does_not_depend_on_the_recording_level():
    """A noise floor relative to the utterance's level and cepstral mean normalisation:
    the same signal 20 dB louder or quieter gives the same features."""
    y = _synthetic()
    ref = RECIPE.extract(y)
    for gain in (0.1, 10.0):
        np.testing.assert_allclose(RECIPE.extract(gain * y), ref, atol=1e-9)
    assert not np.allclose(FeaturePipeline().extract(0.1 * y), FeaturePipeline().extract(y))
    assert FeaturePipeline.from_json(RECIPE.to_json()) == RECIPE


def test_cepstral_mean_normalisation_centres_the_statics_on_its_frames():
    y = _synthetic()
    every = FeaturePipeline(cepstral_norm="mean").extract(y)[:, :13]
    np.testing.assert_allclose(every.mean(axis=0), 0.0, atol=1e-9)
    scaled = FeaturePipeline(cepstral_norm="meanvar").extract(y)[:, :13]
    np.testing.assert_allclose(scaled.std(axis=0), 1.0, atol=1e-9)
    loud = RECIPE.extract(y)[:, :13]
    raw = FeaturePipeline(noise_floor_db=25.0, level_frames="loudest_half").extract(y)[:, :13]
    half = raw[:, 0] >= np.median(raw[:, 0])
    assert 0 < half.sum() < len(half)
    np.testing.assert_allclose(loud, raw - raw[half].mean(axis=0), atol=1e-9)


def test_digital_silence_gives_finite_zero_statics():
    """Silence is a constant spectrum: its normalised statics are 0, never NaN."""
    for mode in ("mean", "meanvar"):
        x = FeaturePipeline(noise_floor_db=25.0, cepstral_norm=mode).extract(np.zeros(4000))
        assert np.all(np.isfinite(x)) and np.max(np.abs(x)) < 1e-9
