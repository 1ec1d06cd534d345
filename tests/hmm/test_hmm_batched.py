"""The batched forward, Viterbi score and E-step equal the one-sequence ones."""

from __future__ import annotations

import numpy as np
import pytest

from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm import GaussianHMM, baum_welch, expected_counts, log_likelihood, viterbi
from smc_hmm.hmm import batched as batched_module
from smc_hmm.hmm.batched import (
    batched_expected_counts,
    batched_log_likelihoods,
    batched_viterbi_scores,
)

TOL = {"rtol": 1e-9, "atol": 1e-9}


def _sequences(model: GaussianHMM, lengths: list[int], seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [model.sample(n, rng)[0] for n in lengths]


def _left_to_right(states: int = 4, dim: int = 3, cov: str = "diag") -> GaussianHMM:
    rng = np.random.default_rng(7)
    a = np.zeros((states, states))
    for j in range(states - 1):
        a[j, j], a[j, j + 1] = 0.6, 0.4
    a[-1, -1] = 1.0
    covars = (
        rng.uniform(0.5, 2.0, (states, dim))
        if cov == "diag"
        else np.stack([np.eye(dim) * 0.8 + 0.1 for _ in range(states)])
    )
    return GaussianHMM(np.eye(states)[0], a, rng.normal(0, 3, (states, dim)), covars, cov)


@pytest.mark.parametrize("cov", ["diag", "full"])
def test_batched_results_equal_the_per_sequence_ones(make_gaussian, cov, monkeypatch):
    """Blocks of 3 (several blocks, padded sequences of lengths 1..9) give the same
    likelihoods, Viterbi scores and expected counts as the one-sequence functions."""
    monkeypatch.setattr(batched_module, "BLOCK", 3)
    model = make_gaussian(n_states=3, n_features=2, covariance_type=cov, seed=4)
    sequences = _sequences(model, [5, 1, 9, 3, 3, 7, 2, 8])
    np.testing.assert_allclose(
        batched_log_likelihoods(model, sequences),
        [log_likelihood(model, x) for x in sequences],
        **TOL,
    )
    np.testing.assert_allclose(
        batched_viterbi_scores(model, sequences),
        [viterbi(model, x)[1] for x in sequences],
        **TOL,
    )
    ours, ref = batched_expected_counts(model, sequences), expected_counts(model, sequences)
    for name in ("initial", "transitions", "occupancy", "obs_sum", "obs_sq_sum"):
        np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), **TOL)
    assert ours.log_likelihood == pytest.approx(ref.log_likelihood, rel=1e-12)


def test_left_to_right_training_with_the_batched_e_step_matches():
    """Baum-Welch with the batched E-step follows the plain one iteration by iteration
    (zeros of the transition matrix stay zero)."""
    model = _left_to_right()
    sequences = _sequences(model, [6, 11, 4, 9, 15, 7])
    plain = baum_welch(model, sequences, n_iter=5, tol=0.0)
    fast = baum_welch(model, sequences, n_iter=5, tol=0.0, e_step=batched_expected_counts)
    np.testing.assert_allclose(fast.history, plain.history, rtol=1e-10)
    np.testing.assert_allclose(fast.model.means, plain.model.means, **TOL)
    assert np.all(fast.model.transmat[np.tril_indices(4, -1)] == 0.0)


def test_sequences_must_be_a_list():
    """As for expected_counts: a bare array (one sequence not wrapped in a list) or an
    empty list is refused with InvalidInputError."""
    model = _left_to_right()
    for call in (batched_log_likelihoods, batched_viterbi_scores, batched_expected_counts):
        with pytest.raises(InvalidInputError, match="list or tuple"):
            call(model, np.zeros((3, 3)))
        with pytest.raises(InvalidInputError, match="at least one"):
            call(model, [])
