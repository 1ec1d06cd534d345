"""The bundled FSDD features and keyword models (smc_hmm.data): load, classify, cross-check."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from smc_hmm.data import (
    DIGIT_WORDS,
    load_bundled_models,
    load_garbage_model,
    load_manifest,
    load_pipeline,
    load_test_utterances,
)
from smc_hmm.errors import ConfigError
from smc_hmm.features import BENCHMARK_FRAMES, pad_or_cut
from smc_hmm.hmm import log_likelihood

DATA = Path(__file__).resolve().parents[2] / "smc_hmm" / "data" / "fsdd"
#: the FSDD recordings (not bundled): FSDD_DIR names a checkout of the Free Spoken Digit
#: Dataset; without it the tests that read recordings are skipped (README, "Tests")
RECORDINGS = Path(os.environ.get("FSDD_DIR") or "FSDD_DIR-is-not-set") / "recordings"


@pytest.fixture(scope="module")
def utterances():
    return load_test_utterances()


def _left_to_right(transmat: np.ndarray) -> bool:
    n = transmat.shape[0]
    allowed = np.eye(n, dtype=bool) | np.eye(n, k=1, dtype=bool)
    return bool(np.all(transmat[~allowed] == 0) and transmat[-1, -1] == 1.0)


def test_files_are_small_and_carry_the_notice():
    sizes = {p.name: p.stat().st_size for p in DATA.iterdir()}
    assert {
        "test_features.npz",
        "models_diag.npz",
        "models_full.npz",
        "pipeline.json",
        "NOTICE",
    } <= set(sizes)
    assert sum(sizes.values()) < 4_000_000
    notice = (DATA / "NOTICE").read_text()
    for needed in (
        "Free Spoken Digit Dataset",
        "github.com/Jakobovski/free-spoken-digit-dataset",
        "26eb9aa",
        "CC BY-SA 4.0",
        "creativecommons.org/licenses/by-sa/4.0",
    ):
        assert needed in notice


def test_pipeline_is_the_documented_one():
    pipeline = load_pipeline()
    assert pipeline.standardised and pipeline.n_features == 39
    assert (pipeline.sample_rate, pipeline.win_length, pipeline.hop_length) == (8000, 200, 80)
    assert pipeline.n_frames(7840) == BENCHMARK_FRAMES
    assert all(s > 0 for s in pipeline.std)


@pytest.mark.parametrize("kind", ["diag", "full"])
def test_models_are_five_state_left_to_right(kind):
    models, labels = load_bundled_models(kind)
    assert labels == list(DIGIT_WORDS)
    for model in models:
        assert model.n_states == 5 and model.n_features == 39
        assert model.covariance_type == kind
        assert model.startprob[0] == 1.0
        assert _left_to_right(model.transmat)
    garbage, keywords = load_garbage_model(kind)
    assert garbage.n_states == 5 and _left_to_right(garbage.transmat)
    assert len(keywords) == 3 and set(keywords) <= set(DIGIT_WORDS)


def test_bad_kind():
    with pytest.raises(ConfigError):
        load_bundled_models("spherical")


def test_test_split_layout(utterances):
    assert len(utterances) == 250
    assert Counter(u.digit for u in utterances) == {d: 25 for d in range(10)}
    assert Counter(u.speaker for u in utterances) == {
        s: 50 for s in ("george", "jackson", "nicolas", "theo", "yweweler")
    }
    assert {u.index for u in utterances} == set(range(5))
    assert len({(u.digit, u.speaker, u.index) for u in utterances}) == 250
    for u in utterances:
        assert u.features.dtype == np.float64 and u.features.shape[1] == 39
        assert u.features.shape[0] >= 9
        assert u.label == DIGIT_WORDS[u.digit]


def test_standardisation_is_the_pipelines(utterances):
    raw = load_test_utterances(standardised=False)
    pipeline = load_pipeline()
    for u, r in zip(utterances[::25], raw[::25], strict=True):
        np.testing.assert_array_equal(u.features, pipeline.standardise(r.features))
    frames = np.concatenate([u.features for u in utterances])
    assert np.all(np.abs(frames.mean(axis=0)) < 0.5)  # test frames look like training frames


def test_diag_models_classify_the_test_split(utterances):
    models, _ = load_bundled_models("diag")
    predicted = [
        int(np.argmax([log_likelihood(m, u.features) for m in models])) for u in utterances
    ]
    accuracy = np.mean(np.array(predicted) == np.array([u.digit for u in utterances]))
    assert accuracy >= 0.97
    assert accuracy == pytest.approx(load_manifest()["results"]["diag"]["test"])


def test_full_models_classify_fixed_length_utterances(utterances):
    """Full covariances on the benchmark's 98-frame sequences (every fifth utterance)."""
    models, _ = load_bundled_models("full")
    subset = utterances[::5]
    correct = 0
    for u in subset:
        x = pad_or_cut(u.features, BENCHMARK_FRAMES)
        correct += int(np.argmax([log_likelihood(m, x) for m in models])) == u.digit
    assert correct / len(subset) >= 0.9


@pytest.mark.parametrize("kind", ["diag", "full"])
def test_log_likelihood_equals_hmmlearn_score(kind, utterances):
    pytest.importorskip("hmmlearn")
    models, _ = load_bundled_models(kind)
    other = utterances[77]
    for model, u in ((models[3], utterances[0]), (models[other.digit], other)):
        ours = log_likelihood(model, u.features)
        theirs = model.to_hmmlearn().score(u.features)
        assert np.isfinite(ours)
        assert ours == pytest.approx(theirs, rel=1e-10, abs=1e-8)


@pytest.mark.skipif(not RECORDINGS.is_dir(), reason="FSDD recordings: set FSDD_DIR")
def test_bundled_features_are_the_pipelines_features_of_the_wav(utterances):
    pipeline = load_pipeline()
    for u in utterances[::50]:
        wav = RECORDINGS / f"{u.digit}_{u.speaker}_{u.index}.wav"
        np.testing.assert_allclose(pipeline.features_from_wav(wav), u.features, atol=1e-4)


def test_fsdd_dir_says_where_to_get_the_recordings(tmp_path, monkeypatch):
    from smc_hmm.data import fsdd_dir

    monkeypatch.delenv("FSDD_DIR", raising=False)
    with pytest.raises(ConfigError, match="Jakobovski/free-spoken-digit-dataset.*FSDD_DIR"):
        fsdd_dir()
    with pytest.raises(ConfigError, match="holds no recordings/"):
        fsdd_dir(tmp_path)
    (tmp_path / "recordings").mkdir()
    assert fsdd_dir(tmp_path) == tmp_path
    monkeypatch.setenv("FSDD_DIR", str(tmp_path))
    assert fsdd_dir() == tmp_path
