"""Expected counts, re-estimation and Baum-Welch, against a naive implementation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from smc_hmm.errors import InvalidInputError, ModelError, ShapeMismatchError
from smc_hmm.hmm import (
    DiscreteHMM,
    ExpectedCounts,
    GaussianHMM,
    baum_welch,
    expected_counts,
    log_likelihood,
    reestimate,
)

TOL = {"rtol": 1e-9, "atol": 1e-10}


# --- naive probability-space Baum-Welch (Rabiner 1989, eqs. 18-27, 37-40, 52-53) ------


def _densities(model: DiscreteHMM | GaussianHMM, obs: np.ndarray) -> np.ndarray:
    if isinstance(model, DiscreteHMM):
        return model.emissionprob[:, obs].T
    return np.column_stack(
        [multivariate_normal(m, c).pdf(obs) for m, c in zip(model.means, model.full_covars)]
    ).reshape(len(obs), model.n_states)


def _naive_step(
    model: DiscreteHMM | GaussianHMM, sequences: list[np.ndarray]
) -> tuple[DiscreteHMM | GaussianHMM, float]:
    """One EM step without logs or scaling (fine for short sequences)."""
    n = model.n_states
    pi_num, a_num = np.zeros(n), np.zeros((n, n))
    gammas, total = [], 0.0
    for obs in sequences:
        b = _densities(model, obs)
        length = len(obs)
        alpha, beta = np.zeros((length, n)), np.ones((length, n))
        alpha[0] = model.startprob * b[0]
        for t in range(1, length):
            alpha[t] = (alpha[t - 1] @ model.transmat) * b[t]
        for t in range(length - 2, -1, -1):
            beta[t] = model.transmat @ (b[t + 1] * beta[t + 1])
        prob = alpha[-1].sum()
        total += np.log(prob)
        gamma = alpha * beta / prob
        for t in range(length - 1):
            a_num += np.outer(alpha[t], b[t + 1] * beta[t + 1]) * model.transmat / prob
        pi_num += gamma[0]
        gammas.append(gamma)
    gamma = np.concatenate(gammas)
    x = np.concatenate(sequences)
    startprob = pi_num / pi_num.sum()
    transmat = a_num / a_num.sum(axis=1, keepdims=True)
    if isinstance(model, DiscreteHMM):
        emit = np.array(
            [[gamma[x == k, j].sum() for k in range(model.n_symbols)] for j in range(n)]
        )
        return DiscreteHMM(startprob, transmat, emit / emit.sum(axis=1, keepdims=True)), total
    weights = gamma / gamma.sum(axis=0)
    means = weights.T @ x
    covars = []
    for j in range(n):
        centred = x - means[j]
        full = (weights[:, j, None] * centred).T @ centred
        covars.append(np.diag(full) if model.covariance_type == "diag" else full)
    return GaussianHMM(startprob, transmat, means, np.array(covars), model.covariance_type), total


def _assert_same_model(
    a: DiscreteHMM | GaussianHMM, b: DiscreteHMM | GaussianHMM, rtol: float = 1e-9
) -> None:
    names = ["startprob", "transmat"]
    names += ["emissionprob"] if isinstance(a, DiscreteHMM) else ["means", "covars"]
    for name in names:
        np.testing.assert_allclose(
            getattr(a, name), getattr(b, name), rtol=rtol, atol=1e-10, err_msg=name
        )


@pytest.fixture(params=["discrete", "diag", "full"])
def model_and_sequences(
    request: pytest.FixtureRequest,
    make_discrete: Callable[..., DiscreteHMM],
    make_gaussian: Callable[..., GaussianHMM],
) -> tuple[DiscreteHMM | GaussianHMM, list[np.ndarray]]:
    if request.param == "discrete":
        truth, start = make_discrete(3, 4, seed=1), make_discrete(3, 4, seed=2)
    else:
        truth = make_gaussian(3, 2, request.param, seed=1)
        start = make_gaussian(3, 2, request.param, seed=2)
    rng = np.random.default_rng(7)
    return start, [truth.sample(length, rng)[0] for length in (8, 12, 5)]


# --- expected counts ------------------------------------------------------------


def test_expected_counts_sum_to_sequence_lengths(model_and_sequences: tuple) -> None:
    model, sequences = model_and_sequences
    counts = expected_counts(model, sequences)
    lengths = [len(s) for s in sequences]
    np.testing.assert_allclose(counts.initial.sum(), len(sequences), **TOL)
    np.testing.assert_allclose(counts.transitions.sum(), sum(lengths) - len(sequences), **TOL)
    np.testing.assert_allclose(counts.occupancy.sum(), sum(lengths), **TOL)
    expected_ll = sum(log_likelihood(model, s) for s in sequences)
    np.testing.assert_allclose(counts.log_likelihood, expected_ll, **TOL)
    if isinstance(model, DiscreteHMM):
        assert counts.obs_sum is None and counts.obs_sq_sum is None
        np.testing.assert_allclose(counts.emissions.sum(axis=1), counts.occupancy, **TOL)
        symbols = np.concatenate(sequences)
        np.testing.assert_allclose(
            counts.emissions.sum(axis=0), np.bincount(symbols, minlength=4), **TOL
        )
    else:
        assert counts.emissions is None
        x = np.concatenate(sequences)
        np.testing.assert_allclose(counts.obs_sum.sum(axis=0), x.sum(axis=0), **TOL)
        second = counts.obs_sq_sum.sum(axis=0)
        expected = x.T @ x if model.covariance_type == "full" else (x**2).sum(axis=0)
        np.testing.assert_allclose(second, expected, **TOL)


def test_reestimate_matches_naive_em_step(model_and_sequences: tuple) -> None:
    model, sequences = model_and_sequences
    counts = expected_counts(model, sequences)
    naive, naive_ll = _naive_step(model, sequences)
    np.testing.assert_allclose(counts.log_likelihood, naive_ll, **TOL)
    _assert_same_model(reestimate(model, counts, min_covar=0.0), naive)


def test_baum_welch_matches_naive_iterations(model_and_sequences: tuple) -> None:
    model, sequences = model_and_sequences
    result = baum_welch(model, sequences, n_iter=5, tol=0.0, min_covar=0.0)
    naive, history = model, []
    for _ in range(5):
        naive, ll = _naive_step(naive, sequences)
        history.append(ll)
    assert len(result.history) == 6  # the input model and five re-estimates
    np.testing.assert_allclose(result.history[:5], history, rtol=1e-9)
    _assert_same_model(result.model, naive, rtol=1e-7)


# --- Baum-Welch -------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["discrete", "diag", "full"])
def test_baum_welch_is_monotone(
    kind: str,
    seed: int,
    make_discrete: Callable[..., DiscreteHMM],
    make_gaussian: Callable[..., GaussianHMM],
) -> None:
    if kind == "discrete":
        truth, start = make_discrete(3, 5, seed=seed), make_discrete(3, 5, seed=seed + 10)
    else:
        truth = make_gaussian(3, 2, kind, seed=seed)
        start = make_gaussian(3, 2, kind, seed=seed + 10)
    rng = np.random.default_rng(seed)
    sequences = [truth.sample(40, rng)[0] for _ in range(4)]
    result = baum_welch(start, sequences, n_iter=30, tol=1e-8, min_covar=0.05)
    history = result.history
    assert len(history) >= 2
    assert np.all(np.diff(history) >= -1e-8 * np.abs(history[:-1])), np.diff(history)
    assert history[-1] > history[0]
    np.testing.assert_allclose(
        history[-1], sum(log_likelihood(result.model, s) for s in sequences), **TOL
    )


def test_baum_welch_history_and_convergence(make_discrete: Callable[..., DiscreteHMM]) -> None:
    model = make_discrete(2, 3, seed=3)
    sequences = [model.sample(30, rng=1)[0]]
    capped = baum_welch(model, sequences, n_iter=3, tol=0.0)
    assert len(capped.history) == 4 and not capped.converged
    zero = baum_welch(model, sequences, n_iter=0)
    assert zero.model is model and len(zero.history) == 1 and not zero.converged
    converged = baum_welch(model, sequences, n_iter=500, tol=1e-6)
    assert converged.converged and len(converged.history) < 501
    assert converged.history[-1] - converged.history[-2] < 1e-6


def test_structural_zeros_survive_training(left_right: DiscreteHMM) -> None:
    sequences = [left_right.sample(20, rng=s)[0] for s in range(5)]
    result = baum_welch(left_right, sequences, n_iter=10)
    assert np.all(result.model.transmat[left_right.transmat == 0] == 0)
    assert np.all(result.model.emissionprob[left_right.emissionprob == 0] == 0)
    assert np.all(np.diff(result.history) >= -1e-9)


def test_unvisited_state_keeps_its_parameters() -> None:
    model = DiscreteHMM(
        [1.0, 0.0], [[1.0, 0.0], [0.5, 0.5]], [[0.5, 0.5], [0.1, 0.9]]
    )  # state 1 is unreachable
    counts = expected_counts(model, [[0, 1, 1, 0]])
    assert counts.occupancy[1] == 0
    new = reestimate(model, counts)
    np.testing.assert_array_equal(new.transmat[1], model.transmat[1])
    np.testing.assert_array_equal(new.emissionprob[1], model.emissionprob[1])
    np.testing.assert_allclose(new.emissionprob[0], [0.5, 0.5])


def test_variance_floor(make_gaussian: Callable[..., GaussianHMM]) -> None:
    model = make_gaussian(1, 2, "full", seed=0)
    sequences = [np.tile([[1.0, 2.0]], (6, 1))]  # zero sample variance
    floored = reestimate(model, expected_counts(model, sequences), min_covar=0.01)
    np.testing.assert_allclose(floored.covars[0], 0.01 * np.eye(2), atol=1e-12)
    with pytest.raises(ModelError):
        reestimate(model, expected_counts(model, sequences), min_covar=0.0)
    diag = make_gaussian(1, 2, "diag", seed=0)
    floored = reestimate(diag, expected_counts(diag, sequences), min_covar=0.01)
    np.testing.assert_allclose(floored.covars[0], [0.01, 0.01])


# --- invalid inputs -------------------------------------------------------------


@pytest.mark.parametrize(
    "sequences",
    [np.zeros((2, 3), dtype=int), [], "abc", None],
    ids=["array", "empty", "str", "none"],
)
def test_sequences_must_be_a_nonempty_list(
    make_discrete: Callable[..., DiscreteHMM], sequences: object
) -> None:
    with pytest.raises(InvalidInputError):
        expected_counts(make_discrete(), sequences)  # type: ignore[arg-type]


def test_impossible_sequence_is_rejected(left_right: DiscreteHMM) -> None:
    with pytest.raises(InvalidInputError, match="sequence 1 has probability zero"):
        expected_counts(left_right, [[0, 1], [2]])


def test_invalid_observations_are_rejected(make_discrete: Callable[..., DiscreteHMM]) -> None:
    with pytest.raises(InvalidInputError, match="outside the alphabet"):
        baum_welch(make_discrete(3, 4), [[0, 1], [0, 9]])


def test_reestimate_rejects_bad_counts(
    make_discrete: Callable[..., DiscreteHMM], make_gaussian: Callable[..., GaussianHMM]
) -> None:
    model = make_discrete(3, 4)
    counts = expected_counts(model, [[0, 1, 2, 3]])
    noisy = counts.transitions.copy()
    noisy[0, 1] = -0.5
    with pytest.raises(InvalidInputError, match="negative"):
        reestimate(model, dataclasses.replace(counts, transitions=noisy))
    with pytest.raises(InvalidInputError, match="finite"):
        reestimate(model, dataclasses.replace(counts, initial=np.full(3, np.nan)))
    with pytest.raises(ShapeMismatchError):
        reestimate(model, dataclasses.replace(counts, emissions=np.ones((3, 5))))
    with pytest.raises(InvalidInputError, match="emissions is required"):
        reestimate(model, dataclasses.replace(counts, emissions=None))
    with pytest.raises(InvalidInputError, match="min_covar"):
        reestimate(model, counts, min_covar=-1.0)
    gaussian = make_gaussian(3, 2, "diag")
    with pytest.raises(InvalidInputError, match="obs_sum is required"):
        reestimate(gaussian, counts)


def test_reestimate_accepts_post_processed_counts(
    make_discrete: Callable[..., DiscreteHMM],
) -> None:
    """A DP release perturbs the counts between the two steps, then re-estimates."""
    model = make_discrete(2, 3)
    counts = expected_counts(model, [[0, 1, 2, 2, 1]])
    noise = np.random.default_rng(0).laplace(scale=0.1, size=counts.emissions.shape)
    noisy = ExpectedCounts(
        counts.initial,
        counts.transitions,
        counts.occupancy,
        counts.log_likelihood,
        emissions=np.clip(counts.emissions + noise, 0.0, None),
    )
    new = reestimate(model, noisy)
    np.testing.assert_allclose(new.emissionprob.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"n_iter": -1}, "n_iter"), ({"tol": np.nan}, "tol")]
)
def test_baum_welch_rejects_bad_settings(
    make_discrete: Callable[..., DiscreteHMM], kwargs: dict, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        baum_welch(make_discrete(), [[0, 1]], **kwargs)
