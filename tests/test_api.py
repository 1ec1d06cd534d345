"""The hmmlearn user's path (smc_hmm.api, docs/api.md): a fitted hmmlearn model scored and
decoded securely, in-process or against a serving Bob, with hmmlearn's conventions, and
the weight floor's rule with its effect on log P bounded."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from smc_hmm.api import (
    RAISED_TO,
    WEIGHT_FLOOR,
    SecureHMM,
    apply_floor,
    floor_effect,
    save_model,
    to_model,
)
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, log_likelihood

hmm = pytest.importorskip("hmmlearn.hmm")
REPO = Path(__file__).resolve().parents[1]
SMALL = {"key_bits": 1024, "insecure": True}


def _gaussian(seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(size=(12, 2)), rng.normal(3, 1, (18, 2))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hmm.GaussianHMM(n_components=3, random_state=seed, n_iter=40).fit(x, [12, 18])
    return model, x, [12, 18]


def test_the_example_matches_hmmlearn_within_1e_9():
    """examples/hmmlearn_secure.py, at most 15 lines, against hmmlearn's own score."""
    path = REPO / "examples" / "hmmlearn_secure.py"
    assert len(path.read_text().splitlines()) <= 15
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    plain, secure = map(float, re.search(r"score: (\S+) secure: (\S+)", done.stdout).groups())
    assert abs(secure - plain) <= 1e-9 * abs(plain)
    states = re.search(r"decode: \[(.*)\] secure: \[(.*)\]", done.stdout).groups()
    assert states[0] == states[1]


def test_several_sequences_score_and_decode_as_hmmlearn():
    model, x, lengths = _gaussian(1)
    secure = SecureHMM(model, **SMALL)
    assert secure.score(x, lengths) == pytest.approx(model.score(x, lengths), rel=1e-9)
    assert len(secure.cost) == 2  # one secure run per sequence
    log_prob, states = secure.decode(x, lengths)
    want_prob, want_states = model.decode(x, lengths)
    # the default Viterbi rounds frames and weights before its circuit: within its bound
    tolerance = secure.decode_error_bound(x, lengths)
    assert 0 < tolerance < 1e-2
    assert abs(log_prob - want_prob) <= tolerance
    assert np.array_equal(states, want_states)


def test_a_categorical_model_takes_the_n_by_1_shape():
    rng = np.random.default_rng(2)
    symbols = rng.integers(0, 4, size=(25, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hmm.CategoricalHMM(n_components=2, random_state=1, n_iter=30).fit(symbols)
    secure = SecureHMM(model, **SMALL)
    assert secure.score(symbols) == pytest.approx(model.score(symbols), rel=1e-9)
    assert secure.score(symbols[:, 0]) == pytest.approx(model.score(symbols), rel=1e-9)
    log_prob, states = secure.decode(symbols, [10, 15])
    want_prob, want_states = model.decode(symbols, [10, 15])
    assert log_prob == pytest.approx(want_prob, rel=1e-9)
    assert np.array_equal(states, want_states)


def test_a_transition_below_the_floor_needs_no_hand_editing():
    """A fitted model with a transition of 9.2e-14 (below the floor 2^-42) used to end in
    a PrecisionError on Bob's side; the rule raises it and the score matches hmmlearn."""
    model, x, lengths = _gaussian(3)
    transmat = np.array([[0.9, 0.1 - 9.2e-14, 9.2e-14], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]])
    model.transmat_ = transmat
    secure = SecureHMM(model, **SMALL)
    assert secure.adjustment.raised >= 1 and secure.adjustment.smallest <= 9.2e-14
    assert secure.score(x, lengths) == pytest.approx(model.score(x, lengths), rel=1e-9)


def test_the_floor_rule_and_its_bound_on_log_p():
    """Every nonzero weight ends at or above the floor, zeros stay zeros, rows sum to one;
    log P goes down by at most T log(1 + delta), and floor_effect is the exact change."""
    rng = np.random.default_rng(7)
    for trial in range(20):
        n = int(rng.integers(2, 6))
        trans = rng.dirichlet(np.ones(n), size=n)
        tiny = rng.random((n, n)) < 0.4
        trans = np.where(tiny, 10.0 ** rng.uniform(-160, -12, size=(n, n)), trans)
        trans[:, 0] = np.where(rng.random(n) < 0.2, 0.0, trans[:, 0])
        trans = trans / trans.sum(axis=1, keepdims=True)
        start = rng.dirichlet(np.ones(n))
        model = DiscreteHMM(start, trans, rng.dirichlet(np.ones(3), size=n))
        adjusted, adjustment = apply_floor(model)
        rows = np.vstack([adjusted.startprob, adjusted.transmat])
        before = np.vstack([model.startprob, model.transmat])
        assert np.all(rows[before > 0] >= WEIGHT_FLOOR) and np.all(rows[before == 0] == 0)
        assert np.allclose(rows.sum(axis=1), 1.0)
        assert adjustment.delta <= n * RAISED_TO
        x = rng.integers(0, 3, size=int(rng.integers(5, 60)))
        change = log_likelihood(adjusted, x) - log_likelihood(model, x)
        assert change >= -adjustment.max_decrease(len(x)) - 1e-12, trial
        assert floor_effect(model, x[:, None]) == pytest.approx(change, abs=1e-12)


def test_refusals_are_one_line_typed_errors():
    model, x, lengths = _gaussian(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gmm = hmm.GMMHMM(n_components=2, n_mix=2, random_state=0, n_iter=5).fit(x)
    with pytest.raises(InvalidInputError, match="GMMHMM is not supported"):
        SecureHMM(gmm)
    with pytest.raises(ConfigError, match="not both"):
        SecureHMM(model, server="127.0.0.1:1")
    secure = SecureHMM(model, **SMALL)
    with pytest.raises(InvalidInputError, match="lengths must be positive and sum"):
        secure.score(x, [5, 5])
    with pytest.raises(InvalidInputError, match="shape"):
        secure.score(x[:, 0])
    with pytest.raises(InvalidInputError, match="feature_bound"):
        secure.score(x * 1e4)  # refused before any key or run
    assert secure.cost == [] and secure._keypair is None
    assert isinstance(to_model(model), GaussianHMM)


def test_against_a_serving_bob(tmp_path):
    """SecureHMM(server=..., certs=...): Alice here, Bob (smc-hmm serve) holds the model
    file save_model wrote; the scores are hmmlearn's."""
    from serve_harness import write_served_config

    from smc_hmm.runtime import load_config
    from smc_hmm.runtime.serve import Server

    model, x, lengths = _gaussian(5)
    save_model(model, tmp_path / "model.npz")
    path = write_served_config(
        tmp_path / "parties.toml", "forward", {"models": "model.npz"}, {}, timeout=60
    )
    with Server(load_config(path), "bob", port=0) as server:
        host, port = server.address
        secure = SecureHMM(
            server=f"{host}:{port}", certs=tmp_path / "certs", name="carol", key_bits=512,
            insecure=True,
        )  # fmt: skip
        assert secure.score(x, lengths) == pytest.approx(model.score(x, lengths), rel=1e-9)
        assert len(secure.cost) == 2
