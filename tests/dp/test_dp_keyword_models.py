"""examples/dp_keyword_models.py's core on a tiny synthetic Gaussian data set (no speech)."""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from smc_hmm.dp.random import DPRandom
from smc_hmm.hmm import GaussianHMM

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dp_keyword_models.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("dp_keyword_models_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _data(seed=0, per_label=40, test_per_label=10):
    """Three 'words': 3-state left-to-right 2-d Gaussian HMMs with distinct mean paths."""
    rng = np.random.default_rng(seed)
    paths = {
        "a": [(-2, 0), (0, 0), (2, 0)],
        "b": [(0, -2), (0, 2), (2, 2)],
        "c": [(2, -2), (-2, -2), (-2, 2)],
    }
    trans = np.array([[0.7, 0.3, 0.0], [0.0, 0.7, 0.3], [0.0, 0.0, 1.0]])
    truth = {
        k: GaussianHMM([1.0, 0, 0], trans, np.array(p, float), np.full((3, 2), 0.3), "diag")
        for k, p in paths.items()
    }
    train = {k: [m.sample(int(rng.integers(6, 12)), rng)[0] for _ in range(per_label)]
             for k, m in truth.items()}  # fmt: skip
    test = [(m.sample(10, rng)[0], k) for k, m in truth.items() for _ in range(test_per_label)]
    return train, test


def test_core_pipeline_end_to_end(example):
    train, test = _data()
    train = {k: [example.clip(x, 5.0) for x in v] for k, v in train.items()}
    common = dict(n_states=3, max_length=12, feature_bound=4.0)
    plain = example.plain_models(train, n_iter=5, **common)
    assert example.accuracy(plain, test) >= 0.9
    converged = example.plain_models(train, n_iter=20, tol=1e-3, **common)
    for mode in ("every", "last"):
        models, spent = example.dp_models(
            train, 50.0, mode=mode, n_iter=3, rng=DPRandom.insecure_seeded(1),
            converged=converged, **common,
        )  # fmt: skip
        assert spent == pytest.approx(50.0)  # parallel composition over disjoint labels
        assert set(models) == {"a", "b", "c"}
        for m in models.values():  # valid HMMs: stochastic, left-to-right kept, bounded
            assert isinstance(m, GaussianHMM) and m.n_states == 3
            np.testing.assert_allclose(m.transmat.sum(axis=1), 1.0)
            assert m.transmat[1, 0] == 0 and m.transmat[2, 0] == 0
            assert np.all(m.covars > 0) and np.all(m.covars <= 16.0 + 1e-9)
            assert np.all(np.linalg.norm(m.means, axis=1) <= 4.0 + 1e-9)
        acc = example.accuracy(models, test)
        assert 0.0 <= acc <= 1.0 and math.isfinite(acc)


def test_strong_privacy_destroys_and_weak_privacy_keeps_accuracy(example):
    train, test = _data(seed=2)
    common = dict(n_states=3, max_length=12, feature_bound=4.0, n_iter=3)
    weak, _ = example.dp_models(train, 1e5, rng=DPRandom.insecure_seeded(3), **common)
    assert example.accuracy(weak, test) >= 0.8
    strong, _ = example.dp_models(train, 0.01, rng=DPRandom.insecure_seeded(4), **common)
    assert example.accuracy(strong, test) <= 0.8


def test_dp_models_rejects_a_bad_mode(example):
    train, _ = _data(per_label=3, test_per_label=1)
    with pytest.raises(ValueError):
        example.dp_models(train, 1.0, mode="first")
    with pytest.raises(ValueError):
        example.dp_models(train, 1.0, mode="last")


def test_secure_summary_of_a_demo_report(example):
    def run(secure, plain, seconds, nbytes):
        return {
            "secure": secure,
            "plain": plain,
            "seconds": seconds,
            "cost": {"totals": {"bytes": nbytes}},
        }

    report = {
        "mode": "fast",
        "runs": [
            run("one", "one", 10.0, 2e6),
            run("two", "two", 30.0, 4e6),
            run("six", "two", 20.0, 3e6),
        ],
    }
    summary = example.secure_summary(report)
    assert summary == {
        "utterances": 3,
        "agree": 2,
        "median_seconds": 20.0,
        "median_megabytes": 3.0,
        "mode": "fast",
    }
