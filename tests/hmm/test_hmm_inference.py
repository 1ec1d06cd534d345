"""Forward, backward, Viterbi and posteriors against hmmlearn and brute force."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from smc_hmm import hmm
from smc_hmm.errors import InvalidInputError, ShapeMismatchError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM

TOL = {"rtol": 1e-9, "atol": 1e-9}


def _hmmlearn_obs(model: DiscreteHMM | GaussianHMM, obs: np.ndarray) -> np.ndarray:
    return obs[:, None] if isinstance(model, DiscreteHMM) else obs


def _brute_force(model: DiscreteHMM, obs: list[int]) -> tuple[float, float]:
    """log P(O) and the best path's log-probability by enumerating every path."""
    probs = []
    for path in itertools.product(range(model.n_states), repeat=len(obs)):
        p = model.startprob[path[0]] * model.emissionprob[path[0], obs[0]]
        for t in range(1, len(obs)):
            p *= model.transmat[path[t - 1], path[t]] * model.emissionprob[path[t], obs[t]]
        probs.append(p)
    with np.errstate(divide="ignore"):
        return float(np.log(np.sum(probs))), float(np.log(np.max(probs)))


@pytest.fixture(params=["discrete", "diag", "full"])
def model_and_obs(
    request: pytest.FixtureRequest,
    make_discrete: Callable[..., DiscreteHMM],
    make_gaussian: Callable[..., GaussianHMM],
) -> tuple[DiscreteHMM | GaussianHMM, np.ndarray]:
    if request.param == "discrete":
        model = make_discrete(n_states=4, n_symbols=5, seed=11)
    else:
        model = make_gaussian(n_states=4, n_features=3, covariance_type=request.param, seed=11)
    obs, _ = model.sample(60, rng=5)
    return model, obs


# --- agreement with hmmlearn ----------------------------------------------------


def test_log_likelihood_matches_hmmlearn(model_and_obs: tuple) -> None:
    model, obs = model_and_obs
    expected = model.to_hmmlearn().score(_hmmlearn_obs(model, obs))
    np.testing.assert_allclose(hmm.log_likelihood(model, obs), expected, **TOL)


def test_viterbi_matches_hmmlearn(model_and_obs: tuple) -> None:
    model, obs = model_and_obs
    expected_logprob, expected_path = model.to_hmmlearn().decode(
        _hmmlearn_obs(model, obs), algorithm="viterbi"
    )
    path, logprob = hmm.viterbi(model, obs)
    np.testing.assert_array_equal(path, expected_path)
    np.testing.assert_allclose(logprob, expected_logprob, **TOL)


def test_posteriors_match_hmmlearn(model_and_obs: tuple) -> None:
    model, obs = model_and_obs
    expected = model.to_hmmlearn().predict_proba(_hmmlearn_obs(model, obs))
    np.testing.assert_allclose(hmm.posteriors(model, obs), expected, **TOL)


def test_long_sequence_does_not_underflow(make_gaussian: Callable[..., GaussianHMM]) -> None:
    model = make_gaussian(n_states=5, n_features=4, covariance_type="full", seed=2)
    obs, _ = model.sample(2000, rng=9)
    log_alpha, log_prob = hmm.forward(model, obs)
    assert np.isfinite(log_alpha).all() and np.isfinite(log_prob)
    assert log_prob < -2000  # far below the smallest positive float64 as a probability
    np.testing.assert_allclose(log_prob, model.to_hmmlearn().score(obs), **TOL)
    gamma = hmm.posteriors(model, obs)
    assert np.isfinite(gamma).all()
    np.testing.assert_allclose(gamma.sum(axis=1), 1.0, atol=1e-12)


# --- internal consistency -------------------------------------------------------


def test_forward_and_backward_agree_at_every_step(model_and_obs: tuple) -> None:
    model, obs = model_and_obs
    log_alpha, log_prob = hmm.forward(model, obs)
    log_beta = hmm.backward(model, obs)
    np.testing.assert_allclose(logsumexp(log_alpha + log_beta, axis=1), log_prob, **TOL)
    first = logsumexp(model.log_startprob + model.log_emission(obs)[0] + log_beta[0])
    np.testing.assert_allclose(first, log_prob, **TOL)


def test_model_form_equals_parts_form(model_and_obs: tuple) -> None:
    model, obs = model_and_obs
    parts = hmm.log_parameters(model, obs)
    assert parts.log_emission.shape == (len(obs), model.n_states)
    alpha, log_prob = hmm.forward(model, obs)
    alpha_parts, log_prob_parts = hmm.forward_from_logs(*parts)
    np.testing.assert_array_equal(alpha, alpha_parts)
    assert log_prob == log_prob_parts == hmm.log_likelihood_from_logs(*parts)
    np.testing.assert_array_equal(hmm.backward(model, obs), hmm.backward_from_logs(*parts))
    np.testing.assert_array_equal(hmm.viterbi(model, obs)[0], hmm.viterbi_from_logs(*parts)[0])
    np.testing.assert_array_equal(hmm.posteriors(model, obs), hmm.posteriors_from_logs(*parts))


def test_matches_brute_force_enumeration(make_discrete: Callable[..., DiscreteHMM]) -> None:
    model = make_discrete(n_states=3, n_symbols=3, seed=4)
    obs = [0, 2, 2, 1, 0, 1]
    expected_log_prob, expected_best = _brute_force(model, obs)
    np.testing.assert_allclose(hmm.log_likelihood(model, obs), expected_log_prob, **TOL)
    np.testing.assert_allclose(hmm.viterbi(model, obs)[1], expected_best, **TOL)


def test_single_observation() -> None:
    model = DiscreteHMM([0.3, 0.7], [[0.5, 0.5], [0.5, 0.5]], [[0.9, 0.1], [0.2, 0.8]])
    np.testing.assert_allclose(hmm.log_likelihood(model, [1]), np.log(0.3 * 0.1 + 0.7 * 0.8))
    path, logprob = hmm.viterbi(model, [1])
    assert path.tolist() == [1] and np.isclose(logprob, np.log(0.56))
    np.testing.assert_allclose(hmm.posteriors(model, [1]), [[0.03 / 0.59, 0.56 / 0.59]])


# --- zero probabilities ---------------------------------------------------------


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("obs", [[0, 1, 2, 2, 1], [1, 0, 0, 2], [0], [1, 2, 2, 2, 2, 2, 1]])
def test_structural_zeros_possible_sequence(left_right: DiscreteHMM, obs: list[int]) -> None:
    expected_log_prob, expected_best = _brute_force(left_right, obs)
    log_alpha, log_prob = hmm.forward(left_right, obs)
    assert np.isfinite(log_prob)
    assert not np.isnan(log_alpha).any() and not np.isnan(hmm.backward(left_right, obs)).any()
    np.testing.assert_allclose(log_prob, expected_log_prob, **TOL)
    path, best = hmm.viterbi(left_right, obs)
    np.testing.assert_allclose(best, expected_best, **TOL)
    assert np.isfinite(left_right.log_emission(obs)[np.arange(len(obs)), path]).all()
    gamma = hmm.posteriors(left_right, obs)
    assert not np.isnan(gamma).any()
    np.testing.assert_allclose(gamma.sum(axis=1), 1.0, atol=1e-12)
    cannot_emit = left_right.emissionprob[:, obs].T == 0.0
    assert np.all(gamma[cannot_emit] == 0.0)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("obs", [[2], [0, 2, 0], [0, 2, 2, 0, 1], [1, 1, 2, 0]])
def test_structural_zeros_impossible_sequence(left_right: DiscreteHMM, obs: list[int]) -> None:
    assert _brute_force(left_right, obs)[0] == -np.inf
    log_alpha, log_prob = hmm.forward(left_right, obs)
    assert log_prob == -np.inf
    assert not np.isnan(log_alpha).any()
    assert not np.isnan(hmm.backward(left_right, obs)).any()
    assert hmm.log_likelihood(left_right, obs) == -np.inf
    path, best = hmm.viterbi(left_right, obs)
    assert best == -np.inf and path.shape == (len(obs),)
    with pytest.raises(InvalidInputError, match="probability zero"):
        hmm.posteriors(left_right, obs)


# --- invalid inputs -------------------------------------------------------------


GOOD = (np.log([0.5, 0.5]), np.log([[0.9, 0.1], [0.2, 0.8]]), np.zeros((3, 2)))


@pytest.mark.parametrize(
    ("index", "value", "error"),
    [
        (0, np.log([0.2, 0.3, 0.5]), ShapeMismatchError),
        (0, np.zeros((1, 2)), ShapeMismatchError),
        (0, np.zeros(0), ShapeMismatchError),
        (1, np.zeros((2, 3)), ShapeMismatchError),
        (2, np.zeros((3, 3)), ShapeMismatchError),
        (2, np.zeros(2), ShapeMismatchError),
        (2, np.zeros((0, 2)), InvalidInputError),
        (0, np.array([np.nan, 0.0]), InvalidInputError),
        (1, np.array([[np.inf, 0.0], [0.0, 0.0]]), InvalidInputError),
        (2, np.full((3, 2), np.nan), InvalidInputError),
        (2, [["x", "y"]], InvalidInputError),
    ],
)
@pytest.mark.parametrize(
    "function",
    [
        hmm.forward_from_logs,
        hmm.backward_from_logs,
        hmm.viterbi_from_logs,
        hmm.posteriors_from_logs,
        hmm.log_likelihood_from_logs,
    ],
)
def test_parts_form_rejects_invalid_inputs(
    function: Callable, index: int, value: object, error: type
) -> None:
    parts = list(GOOD)
    parts[index] = value
    with pytest.raises(error):
        function(*parts)


def test_parts_form_accepts_minus_inf_and_positive_log_densities() -> None:
    emission = np.array([[2.0, -np.inf], [0.5, 1.0]])
    _, log_prob = hmm.forward_from_logs([0.0, -np.inf], GOOD[1], emission)
    expected = np.log(np.exp(2.0) * (0.9 * np.exp(0.5) + 0.1 * np.exp(1.0)))
    np.testing.assert_allclose(log_prob, expected, **TOL)


# --- reference recursion with scipy.special.logsumexp -----------------------------


def _scipy_forward(start: np.ndarray, trans: np.ndarray, emission: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        alpha = [start + emission[0]]
        for t in range(1, len(emission)):
            alpha.append(logsumexp(alpha[-1][:, None] + trans, axis=0) + emission[t])
        return np.array(alpha)


@pytest.mark.filterwarnings("error")
@settings(max_examples=60, deadline=None)
@given(
    n_states=st.integers(1, 4),
    n_steps=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
    zero_fraction=st.sampled_from([0.0, 0.3, 0.7]),
)
def test_forward_equals_scipy_logsumexp_recursion(
    n_states: int, n_steps: int, seed: int, zero_fraction: float
) -> None:
    rng = np.random.default_rng(seed)

    def log_with_zeros(shape: tuple[int, ...]) -> np.ndarray:
        values = rng.normal(scale=300.0, size=shape)  # spans far beyond exp's range
        values[rng.random(shape) < zero_fraction] = -np.inf
        return values

    start = log_with_zeros((n_states,))
    trans = log_with_zeros((n_states, n_states))
    emission = log_with_zeros((n_steps, n_states))
    expected = _scipy_forward(start, trans, emission)
    log_alpha, log_prob = hmm.forward_from_logs(start, trans, emission)
    assert not np.isnan(log_alpha).any()
    np.testing.assert_allclose(log_alpha, expected, rtol=1e-12, atol=1e-9)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(log_prob, logsumexp(expected[-1]), rtol=1e-12)
