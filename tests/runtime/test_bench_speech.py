"""``smc-hmm bench speech`` on a small synthetic stand-in for the FSDD folder: the folds
retrain the recipe, the JSON reports every fold, and the rejection rule is the protocol's."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from scipy.io import wavfile

from smc_hmm.bench import speech
from smc_hmm.data.continuous import word_frames
from smc_hmm.data.recipe import decide
from smc_hmm.errors import InvalidInputError

SPEAKERS = speech.SPEAKERS


def _fake_fsdd(folder, indices=(3, 7)):
    """Two recordings per speaker and digit: a two-tone 'word' per digit (a rising then a
    falling tone), each speaker's pitch a little different, at 8 kHz."""
    rng = np.random.default_rng(0)
    rec = folder / "recordings"
    rec.mkdir(parents=True)
    t = np.arange(2400) / 8000
    for s, speaker in enumerate(SPEAKERS):
        for d in range(10):
            for i in indices:
                f1, f2 = 300 + 250 * d + 20 * s, 2600 - 180 * d + 15 * s
                half = len(t) // 2
                y = np.concatenate(
                    [np.sin(2 * np.pi * f1 * t[:half]), np.sin(2 * np.pi * f2 * t[half:])]
                )
                y = 0.3 * y * np.hanning(len(t)) + 0.002 * rng.standard_normal(len(t))
                wavfile.write(rec / f"{d}_{speaker}_{i}.wav", 8000, (y * 32767).astype(np.int16))


def _args(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    speech.add_arguments(parser)
    return parser.parse_args(
        ["--fsdd", str(tmp_path / "fsdd"), "--json", str(tmp_path / "s.json"), *extra]
    )


def test_the_folds_retrain_and_report(tmp_path):
    _fake_fsdd(tmp_path / "fsdd")
    args = _args(
        tmp_path, "--folds", "theo,within", "--clips", "6", "--recordings", "0", "--margin", "0"
    )
    code = speech.main(args)
    data = json.loads((tmp_path / "s.json").read_text())
    folds = data["folds"]
    assert set(folds) == {"theo", "within"}
    assert folds["theo"]["utterances"] == 20 and folds["within"]["utterances"] == 50
    for r in folds.values():
        assert r["viterbi"] > 0.9 and abs(r["viterbi"] - r["forward"]) <= 0.05
        assert r["clips"] == 6 and r["rejection"] == 1.0
    names = [row["name"] for row in data["rows"]]
    assert "LOSO viterbi: min" in names and "rejection of silence/noise, worst fold" in names
    assert code in (0, 1)


def test_bad_options_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        _args(tmp_path, "--clips", "5000")
    with pytest.raises(InvalidInputError, match="--folds"):
        speech.main(_args(tmp_path, "--folds", "alice"))
    with pytest.raises(InvalidInputError, match="--margin"):
        speech.main(_args(tmp_path, "--folds", "theo", "--margin", "-1"))


def test_the_rejection_rule_is_the_garbage_margin_rule():
    """No keyword when background + margin reaches the best digit (ties reject)."""
    scores = np.array([[-10.0, -5.0], [-3.0, -8.0], [-4.0, -4.5]])
    background = np.array([-6.0, -3.0, -5.0])
    assert decide(scores, background, 0.0).tolist() == [1, -1, 0]
    assert decide(scores, background, 1.0).tolist() == [-1, -1, -1]


def test_spotting_trains_on_whole_recordings_of_one_speaker_each():
    """Every training recording is joined exactly once, one speaker per recording, and the
    words cut from the whole recording keep the pad of pause frames on each side."""
    from smc_hmm.data import recipe

    rng = np.random.default_rng(1)
    audio = {
        (d, s, i): 0.01 * rng.standard_normal(800 + 80 * d)
        for d in range(10)
        for s in ("a", "b")
        for i in range(3)
    }
    joined = recipe.spotting_recordings(audio, np.random.default_rng(2))
    assert sum(len(r.digits) for r in joined) == len(audio)
    assert all(len(set(r.speakers)) == 1 and 1 <= len(r.digits) <= 5 for r in joined)
    features = [np.zeros((-(-len(r.samples) // 80), 1)) for r in joined]
    words = recipe.cut_words(joined, features, pad=3)
    assert [d for d, _ in words] == [d for r in joined for d in r.digits]
    r = joined[0]
    first, last = word_frames(*r.spans[1], 80)  # a middle word: pauses on both sides
    assert len(r.digits) >= 3 and len(words[1][1]) == last - first + 1 + 6


def test_the_spotting_filler_is_the_other_words_in_parallel():
    """Filler k: a pause state and the other keywords' models side by side, every row a
    distribution, the pause and the last word's end entering the keyword."""
    from smc_hmm.data import recipe
    from smc_hmm.hmm.spotting import FILLER_STAY, compose, spotting_fillers

    rng = np.random.default_rng(3)
    words = [recipe.word_start([rng.standard_normal((24, 2)) for _ in range(3)]) for _ in range(3)]
    pause = recipe.pause_model(rng.standard_normal((50, 2)))
    fillers = spotting_fillers(words, pause)
    assert len(fillers) == 3
    f = fillers[0]
    assert f.n_states == 1 + 2 * recipe.STATES
    assert np.allclose(f.transmat.sum(axis=1), 1.0) and np.isclose(f.startprob.sum(), 1.0)
    assert np.allclose(f.means[1 : 1 + recipe.STATES], words[1].means)
    assert np.allclose(f.means[0], pause.means[0]) and np.allclose(f.covars[0], pause.covars[0])
    ends = [recipe.STATES, 2 * recipe.STATES]
    assert all(np.isclose(f.transmat[e, 0], 1 - FILLER_STAY) for e in ends)
    composite, layout = compose(words[0], f, **recipe.SPOTTING_GLUE)
    assert layout.filler == f.n_states and layout.keyword == recipe.STATES and layout.loop
    assert np.allclose(composite.transmat.sum(axis=1), 1.0)


def test_every_trained_word_keeps_the_public_topology():
    """A start or transition probability Baum-Welch drives to exactly zero is lifted to the
    floor where the topology allows it: every word model of a size has one structure (speech
    mining shows the data holder the composite's structure, which must not name the
    keyword)."""
    from smc_hmm.data import recipe

    rng = np.random.default_rng(4)
    trained = recipe.word_start([rng.standard_normal((30, 2)) for _ in range(3)])
    start = np.zeros(recipe.STATES)
    start[0] = 1.0  # as if Baum-Welch had zeroed the second and third start states
    zeroed = type(trained)(start, trained.transmat, trained.means, trained.covars)
    lifted = recipe.floor_probabilities(zeroed, topology=trained)
    assert np.array_equal(lifted.startprob > 0, trained.startprob > 0)
    assert np.array_equal(lifted.transmat > 0, trained.transmat > 0)
    assert (
        lifted.startprob.min(where=lifted.startprob > 0, initial=1) >= recipe.PROBABILITY_FLOOR / 2
    )


def test_the_folds_report_spotting(tmp_path):
    _fake_fsdd(tmp_path / "fsdd")
    args = _args(
        tmp_path, "--folds", "theo", "--clips", "0", "--recordings", "4", "--margin", "0",
        "--spotting-form", "pair",
    )  # fmt: skip
    speech.main(args)
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["params"]["spotting_form"] == "pair"
    theo = data["folds"]["theo"]
    assert theo["recordings"] == 4
    assert 0.0 <= theo["detection"] <= 1.0 and 0.0 <= theo["false_alarm_rate"] <= 1.0
