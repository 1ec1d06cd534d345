"""``smc-hmm keyword`` answers "no keyword" for audio that matches no digit (new-user
defect H4): 1 s of silence used to be named "five" and of white noise "nine"; the
protocol's garbage model is now on the command line (``--garbage``, ``--margin``) and the
background model of silence and noise is its default (docs/speech-models.md,
"Background model")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from smc_hmm.cli import main
from smc_hmm.data import (
    BACKGROUND_LABEL,
    load_background_model,
    load_bundled_models,
    load_pipeline,
    load_test_utterances,
)
from smc_hmm.data.recipe import coloured_noise
from smc_hmm.hmm import log_likelihood

SMALL = ["--key-bits", "512", "--insecure", "--workers", "1"]


def _wav(path, signal):
    from scipy.io import wavfile

    wavfile.write(path, 8000, (np.clip(signal, -1, 1) * 32767).astype(np.int16))
    return str(path)


@pytest.mark.parametrize("kind", ["silence", "white noise"])
def test_silence_and_noise_get_no_keyword_by_default(tmp_path, capsys, kind):
    rng = np.random.default_rng(3)
    signal = np.zeros(8000) if kind == "silence" else 0.1 * rng.normal(size=8000)
    wav = _wav(tmp_path / "x.wav", signal)
    assert main(["keyword", "--audio", wav, *SMALL, "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["result"] == {"keyword": None} and report["agree"] is True
    assert report["plaintext"]["keyword"] is None and report["garbage"] == BACKGROUND_LABEL
    # --garbage none: the old answer, some digit, for the same audio
    assert main(["keyword", "--audio", wav, *SMALL, "--garbage", "none", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["keyword"] is not None


def test_garbage_and_margin_options(tmp_path, capsys):
    """A label of --models as the garbage model, with a margin; bad values are one line."""
    rng = np.random.default_rng(4)
    wav = _wav(tmp_path / "x.wav", 0.1 * rng.normal(size=4000))
    argv = ["keyword", "--audio", wav, *SMALL]
    assert main([*argv, "--garbage", "nine", "--margin", "1000", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["result"] == {"keyword": None} and report["margin"] == 1000.0
    for extra, needle in (
        (["--garbage", "eleven"], "no model of --models diag is labelled so"),
        (["--garbage", "none", "--margin", "2"], "--margin needs a --garbage model"),
        (["--margin", "-1"], "--margin must be a number of nats in [0, 1000]"),
        (["--margin", "nan"], "--margin must be a number of nats"),
    ):
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("kind", ["diag", "full"])
def test_the_background_catches_fresh_noise_and_costs_no_test_utterance(kind):
    """The bundled background model (docs/speech-models.md) against the bundled digit
    models: silence, dither and white, pink and brown noise at -45 to -20 dBFS, drawn from
    a seed other than its training clips', get "no keyword", and no test utterance does."""
    pipeline = load_pipeline()
    models, _ = load_bundled_models(kind)
    background, margin = load_background_model(kind)
    rng = np.random.default_rng(99)
    signals = [np.zeros(6000), 1e-3 * rng.normal(size=8000)]
    signals += [
        10 ** (db / 20) * coloured_noise(8000, beta, rng)
        for beta in (0.0, 1.0, 2.0)
        for db in (-45, -30, -20)
    ]
    for signal in signals:
        frames = pipeline.features(np.clip(signal, -1, 1))
        best = max(log_likelihood(m, frames) for m in models)
        assert log_likelihood(background, frames) + margin >= best
    changed = 0
    for u in load_test_utterances()[::5]:  # 50 of the 250, every digit and speaker
        scores = [log_likelihood(m, u.features) for m in models]
        changed += max(scores) <= log_likelihood(background, u.features) + margin
    assert changed == 0
