"""Validation, emission log-densities, sampling and hmmlearn interop of the models."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
from hmmlearn import hmm as hl
from scipy.stats import multivariate_normal

from smc_hmm.errors import InvalidInputError, ModelError, ShapeMismatchError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM

START = [0.6, 0.4]
TRANS = [[0.7, 0.3], [0.4, 0.6]]
EMIT = [[0.5, 0.4, 0.1], [0.1, 0.3, 0.6]]
MEANS = [[0.0, 1.0], [2.0, -1.0]]
DIAG = [[1.0, 0.5], [2.0, 0.3]]
FULL = [[[1.0, 0.2], [0.2, 0.5]], [[2.0, -0.3], [-0.3, 0.4]]]


# --- parameter validation -----------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"transmat": [[0.7, 0.3], [0.4, 0.5]]}, "transmat row 1 sums to"),
        ({"startprob": [0.6, 0.5]}, "startprob sums to"),
        ({"emissionprob": [[0.5, 0.4, 0.1], [0.1, 0.3, 0.5]]}, "emissionprob row 1"),
        ({"transmat": [[1.1, -0.1], [0.4, 0.6]]}, "negative probability"),
        ({"startprob": [np.nan, 0.4]}, "finite"),
        ({"transmat": [[np.inf, 0.3], [0.4, 0.6]]}, "finite"),
        ({"startprob": []}, "empty"),
        ({"startprob": [[0.6, 0.4]]}, "1-dimensional"),
        ({"transmat": [[0.7, 0.3], [0.4, 0.6], [0.5, 0.5]]}, "transmat has shape"),
        ({"emissionprob": [[0.5, 0.4, 0.1]]}, "one per state"),
        ({"emissionprob": [0.5, 0.5]}, "2-dimensional"),
        ({"startprob": ["a", "b"]}, "numeric"),
    ],
)
def test_discrete_rejects_invalid_parameters(kwargs: dict, message: str) -> None:
    params = {"startprob": START, "transmat": TRANS, "emissionprob": EMIT} | kwargs
    with pytest.raises(ModelError, match=message):
        DiscreteHMM(**params)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"covars": [[1.0, 0.0], [2.0, 0.3]]}, "strictly positive"),
        ({"covars": [[1.0, -0.5], [2.0, 0.3]]}, "strictly positive"),
        ({"covars": [[1.0, np.nan], [2.0, 0.3]]}, "finite"),
        ({"means": [[0.0, np.nan], [2.0, -1.0]]}, "finite"),
        ({"means": [[0.0, 1.0]]}, "means has shape"),
        ({"means": [0.0, 1.0]}, "2-dimensional"),
        ({"covars": [[1.0, 0.5, 1.0], [2.0, 0.3, 1.0]]}, "covars has shape"),
        ({"covars": FULL}, "covars has shape"),
        ({"covariance_type": "tied"}, "covariance_type"),
        ({"covariance_type": "full", "covars": DIAG}, "covars has shape"),
        (
            {"covariance_type": "full", "covars": [[[1.0, 2.0], [2.0, 1.0]], FULL[1]]},
            r"covars\[0\] is not positive definite",
        ),
        (
            {"covariance_type": "full", "covars": [FULL[0], [[2.0, 0.1], [-0.3, 0.4]]]},
            r"covars\[1\] is not symmetric",
        ),
        ({"transmat": [[0.7, 0.2], [0.4, 0.6]]}, "transmat row 0"),
    ],
)
def test_gaussian_rejects_invalid_parameters(kwargs: dict, message: str) -> None:
    params = {"startprob": START, "transmat": TRANS, "means": MEANS, "covars": DIAG} | kwargs
    with pytest.raises(ModelError, match=message):
        GaussianHMM(**params)


def test_model_error_is_an_invalid_input_error() -> None:
    with pytest.raises(InvalidInputError):
        DiscreteHMM([0.5, 0.6], TRANS, EMIT)


def test_single_state_model_is_valid() -> None:
    model = DiscreteHMM([1.0], [[1.0]], [[0.25, 0.75]])
    assert model.n_states == 1
    assert model.n_symbols == 2
    np.testing.assert_allclose(model.log_emission([1, 0]), np.log([[0.75], [0.25]]))


def test_models_are_immutable_copies() -> None:
    transmat = np.array(TRANS)
    model = DiscreteHMM(START, transmat, EMIT)
    transmat[0, 0] = 0.0
    assert model.transmat[0, 0] == 0.7
    assert model.transmat.dtype == np.float64
    with pytest.raises(ValueError):
        model.transmat[0, 0] = 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.transmat = np.eye(2)  # type: ignore[misc]
    with pytest.raises(ValueError):
        model.log_transmat[0, 0] = 0.0


def test_replace_revalidates() -> None:
    model = DiscreteHMM(START, TRANS, EMIT)
    assert dataclasses.replace(model, startprob=[0.1, 0.9]).startprob[1] == 0.9
    with pytest.raises(ModelError):
        dataclasses.replace(model, startprob=[0.1, 0.8])
    gaussian = GaussianHMM(START, TRANS, MEANS, DIAG)
    full = dataclasses.replace(gaussian, covars=FULL, covariance_type="full")
    np.testing.assert_allclose(full.cholesky_factors[0] @ full.cholesky_factors[0].T, FULL[0])


def test_properties() -> None:
    discrete = DiscreteHMM(START, TRANS, EMIT)
    gaussian = GaussianHMM(START, TRANS, MEANS, FULL, "full")
    assert (discrete.n_states, discrete.n_symbols) == (2, 3)
    assert (gaussian.n_states, gaussian.n_features) == (2, 2)
    for j in range(2):
        chol = gaussian.cholesky_factors[j]
        np.testing.assert_allclose(chol @ chol.T, FULL[j])
    diag = GaussianHMM(START, TRANS, MEANS, DIAG)
    np.testing.assert_allclose(diag.full_covars[1], np.diag(DIAG[1]))


# --- emissions ----------------------------------------------------------------


def test_discrete_log_emission() -> None:
    model = DiscreteHMM(START, TRANS, EMIT)
    obs = [2, 0, 1]
    expected = np.log(np.array(EMIT)[:, obs].T)
    np.testing.assert_allclose(model.log_emission(obs), expected)
    np.testing.assert_allclose(model.log_emission(np.array(obs)[:, None]), expected)
    np.testing.assert_allclose(model.log_emission(np.array(obs, dtype=float)), expected)


@pytest.mark.filterwarnings("error")
def test_discrete_log_emission_zero_is_minus_inf() -> None:
    model = DiscreteHMM(START, TRANS, [[1.0, 0.0], [0.5, 0.5]])
    assert model.log_emission([1])[0, 0] == -np.inf
    assert model.log_transmat.dtype == np.float64


@pytest.mark.parametrize(
    ("obs", "error", "message"),
    [
        ([0, 3], InvalidInputError, "outside the alphabet"),
        ([-1, 0], InvalidInputError, "outside the alphabet"),
        ([0.5, 1], InvalidInputError, "integer symbols"),
        ([np.nan], InvalidInputError, "integer symbols"),
        (["a"], InvalidInputError, "integer symbols"),
        ([], InvalidInputError, "at least one"),
        ([[0, 1], [1, 0]], ShapeMismatchError, "shape"),
    ],
)
def test_discrete_rejects_invalid_observations(obs: list, error: type, message: str) -> None:
    model = DiscreteHMM(START, TRANS, EMIT)
    with pytest.raises(error, match=message):
        model.log_emission(obs)


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_gaussian_log_emission_matches_scipy(covariance_type: str) -> None:
    covars = DIAG if covariance_type == "diag" else FULL
    model = GaussianHMM(START, TRANS, MEANS, covars, covariance_type)
    x = np.random.default_rng(1).normal(size=(7, 2))
    for j in range(2):
        expected = multivariate_normal(MEANS[j], model.full_covars[j]).logpdf(x)
        np.testing.assert_allclose(model.log_emission(x)[:, j], expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("obs", "error"),
    [
        (np.zeros((3, 3)), ShapeMismatchError),
        (np.zeros(2), ShapeMismatchError),
        (np.zeros((0, 2)), InvalidInputError),
        ([[0.0, np.nan]], InvalidInputError),
        ([[0.0, np.inf]], InvalidInputError),
    ],
)
def test_gaussian_rejects_invalid_observations(obs: object, error: type) -> None:
    model = GaussianHMM(START, TRANS, MEANS, DIAG)
    with pytest.raises(error):
        model.log_emission(obs)


# --- sampling -------------------------------------------------------------------


def test_sampling_is_reproducible_and_valid(left_right: DiscreteHMM) -> None:
    obs, states = left_right.sample(50, rng=3)
    again, _ = left_right.sample(50, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(obs, again)
    assert obs.shape == states.shape == (50,)
    assert np.all(np.diff(states) >= 0)  # a left-right chain never goes back
    assert np.isfinite(left_right.log_emission(obs)[np.arange(50), states]).all()


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_gaussian_sample_moments(covariance_type: str) -> None:
    covars = DIAG if covariance_type == "diag" else FULL
    model = GaussianHMM([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]], MEANS, covars, covariance_type)
    obs, states = model.sample(8000, rng=0)
    assert obs.shape == (8000, 2) and np.all(states == 0)
    np.testing.assert_allclose(obs.mean(axis=0), MEANS[0], atol=0.03)
    np.testing.assert_allclose(np.cov(obs.T), model.full_covars[0], atol=0.05)


@pytest.mark.parametrize("n_steps", [0, -1, 2.5, True])
def test_sample_rejects_bad_length(n_steps: object) -> None:
    with pytest.raises(InvalidInputError):
        DiscreteHMM(START, TRANS, EMIT).sample(n_steps)  # type: ignore[arg-type]


def test_sample_rejects_bad_rng() -> None:
    with pytest.raises(InvalidInputError, match="rng"):
        DiscreteHMM(START, TRANS, EMIT).sample(3, rng="seed")  # type: ignore[arg-type]


# --- hmmlearn interop -----------------------------------------------------------


def test_discrete_round_trip() -> None:
    model = DiscreteHMM(START, TRANS, EMIT)
    exported = model.to_hmmlearn()
    assert isinstance(exported, hl.CategoricalHMM)
    back = DiscreteHMM.from_hmmlearn(exported)
    for name in ("startprob", "transmat", "emissionprob"):
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_gaussian_round_trip(covariance_type: str) -> None:
    covars = DIAG if covariance_type == "diag" else FULL
    model = GaussianHMM(START, TRANS, MEANS, covars, covariance_type)
    exported = model.to_hmmlearn()
    assert isinstance(exported, hl.GaussianHMM)
    assert exported.covariance_type == covariance_type
    back = GaussianHMM.from_hmmlearn(exported)
    assert back.covariance_type == covariance_type
    for name in ("startprob", "transmat", "means", "covars"):
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))


@pytest.mark.parametrize(
    ("hmmlearn_type", "covars", "ours"),
    [("spherical", [0.5, 2.0], "diag"), ("tied", FULL[0], "full")],
)
def test_from_hmmlearn_converts_spherical_and_tied(
    hmmlearn_type: str, covars: list, ours: str
) -> None:
    theirs = hl.GaussianHMM(n_components=2, covariance_type=hmmlearn_type, init_params="")
    theirs.n_features = 2
    theirs.startprob_ = np.array(START)
    theirs.transmat_ = np.array(TRANS)
    theirs.means_ = np.array(MEANS)
    theirs.covars_ = np.array(covars)
    model = GaussianHMM.from_hmmlearn(theirs)
    assert model.covariance_type == ours
    x = np.random.default_rng(0).normal(size=(5, 2))
    np.testing.assert_allclose(model.log_emission(x), theirs._compute_log_likelihood(x))


def test_from_hmmlearn_rejects_wrong_or_unfitted_models() -> None:
    with pytest.raises(InvalidInputError, match="CategoricalHMM"):
        DiscreteHMM.from_hmmlearn(hl.GaussianHMM())
    with pytest.raises(InvalidInputError, match="GaussianHMM"):
        GaussianHMM.from_hmmlearn(hl.CategoricalHMM())
    with pytest.raises(InvalidInputError, match="startprob_"):
        DiscreteHMM.from_hmmlearn(hl.CategoricalHMM(n_components=2))


def test_missing_hmmlearn_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hmmlearn", None)
    with pytest.raises(InvalidInputError, match="hmmlearn is required"):
        DiscreteHMM(START, TRANS, EMIT).to_hmmlearn()
