"""Gaussian log-densities as quadratic forms z^T W z and their distinct products."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal

from smc_hmm import hmm
from smc_hmm.errors import InvalidInputError, ModelError, ShapeMismatchError
from smc_hmm.hmm import GaussianHMM


def _random_gaussian(dim: int, seed: int, full: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mean = rng.normal(scale=3.0, size=dim)
    if full:
        factor = rng.normal(size=(dim, dim))
        return mean, factor @ factor.T + rng.uniform(0.05, 1.0) * np.eye(dim)
    return mean, rng.uniform(0.05, 4.0, size=dim)


@settings(max_examples=60, deadline=None)
@given(
    dim=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
    full=st.booleans(),
    n_points=st.integers(1, 5),
)
def test_quadratic_form_equals_logpdf(dim: int, seed: int, full: bool, n_points: int) -> None:
    mean, cov = _random_gaussian(dim, seed, full)
    x = np.random.default_rng(seed + 1).normal(loc=mean, scale=2.0, size=(n_points, dim))
    expected = multivariate_normal(mean, cov if full else np.diag(cov)).logpdf(x)
    expected = np.atleast_1d(expected)
    w = hmm.quadratic_form_matrix(mean, cov)
    z = np.hstack([x, np.ones((n_points, 1))])
    np.testing.assert_allclose(np.einsum("ti,ij,tj->t", z, w, z), expected, rtol=1e-9, atol=1e-9)
    products = hmm.quadratic_products(x)
    np.testing.assert_allclose(products @ hmm.quadratic_weights(w), expected, rtol=1e-9, atol=1e-9)


def test_matrix_blocks_follow_the_thesis() -> None:
    mean = np.array([1.0, -2.0])
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    precision = np.linalg.inv(cov)
    w = hmm.quadratic_form_matrix(mean, cov)
    np.testing.assert_allclose(w[:2, :2], -0.5 * precision)
    np.testing.assert_allclose(w[:2, 2], precision @ mean)
    np.testing.assert_array_equal(w[2, :2], 0.0)
    constant = (
        -0.5 * mean @ precision @ mean - 0.5 * math.log(np.linalg.det(cov)) - math.log(2 * math.pi)
    )
    np.testing.assert_allclose(w[2, 2], constant)
    # the thesis's printed constant (+1/2 mu^T P mu - 1/2 ln|P| - d/2 ln 2pi) differs
    printed = (
        0.5 * mean @ precision @ mean
        - 0.5 * math.log(np.linalg.det(precision))
        - math.log(2 * math.pi)
    )
    assert not np.isclose(w[2, 2], printed)
    np.testing.assert_allclose(w[2, 2], multivariate_normal(mean, cov).logpdf(np.zeros(2)))


def test_diagonal_and_full_forms_agree() -> None:
    mean, variances = np.array([0.5, 1.5, -1.0]), np.array([0.2, 1.0, 3.0])
    np.testing.assert_allclose(
        hmm.quadratic_form_matrix(mean, variances),
        hmm.quadratic_form_matrix(mean, np.diag(variances)),
    )


# --- product ordering -----------------------------------------------------------


def test_product_ordering_is_documented_row_major_upper_triangle() -> None:
    rows, cols = hmm.product_indices(2)
    pairs = list(zip(rows.tolist(), cols.tolist(), strict=True))
    assert pairs == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
    x = np.array([3.0, 5.0])
    np.testing.assert_array_equal(hmm.quadratic_products(x), [9.0, 15.0, 3.0, 25.0, 5.0, 1.0])


@pytest.mark.parametrize(("dim", "count"), [(1, 3), (2, 6), (13, 105), (39, 820)])
def test_product_count_and_constant_position(dim: int, count: int) -> None:
    assert hmm.n_products(dim) == count
    assert hmm.constant_index(dim) == count - 1
    rows, cols = hmm.product_indices(dim)
    assert len(rows) == count and rows[-1] == cols[-1] == dim
    products = hmm.quadratic_products(np.random.default_rng(0).normal(size=(4, dim)))
    assert products.shape == (4, count)
    np.testing.assert_array_equal(products[:, hmm.constant_index(dim)], 1.0)


def test_weights_of_a_nonsymmetric_matrix() -> None:
    w = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(hmm.quadratic_weights(w), [0.0, 4.0, 8.0, 4.0, 12.0, 8.0])
    z = np.array([0.3, -1.2, 1.0])
    np.testing.assert_allclose(hmm.quadratic_products(z[:2]) @ hmm.quadratic_weights(w), z @ w @ z)


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_model_emissions_from_products(
    make_gaussian: Callable[..., GaussianHMM], covariance_type: str
) -> None:
    model = make_gaussian(n_states=4, n_features=5, covariance_type=covariance_type, seed=3)
    x, _ = model.sample(30, rng=4)
    assert hmm.quadratic_form_matrices(model).shape == (4, 6, 6)
    weights = hmm.emission_weights(model)
    assert weights.shape == (4, hmm.n_products(5))
    scores = hmm.quadratic_products(x) @ weights.T
    np.testing.assert_allclose(scores, model.log_emission(x), rtol=1e-10, atol=1e-10)
    # the forward algorithm on product scores is the plaintext reference of the
    # simplified secure forward algorithm
    _, log_prob = hmm.forward_from_logs(model.log_startprob, model.log_transmat, scores)
    np.testing.assert_allclose(log_prob, hmm.log_likelihood(model, x), rtol=1e-10)


def test_mfcc_sized_model(make_gaussian: Callable[..., GaussianHMM]) -> None:
    model = make_gaussian(n_states=5, n_features=39, covariance_type="diag", seed=0)
    x, _ = model.sample(98, rng=0)
    weights = hmm.emission_weights(model)
    assert weights.shape == (5, 820)
    np.testing.assert_allclose(
        hmm.quadratic_products(x) @ weights.T, model.log_emission(x), rtol=1e-9, atol=1e-9
    )


# --- invalid inputs -------------------------------------------------------------


@pytest.mark.parametrize(
    ("mean", "cov", "error"),
    [
        ([0.0, 1.0], [1.0, 0.0], ModelError),
        ([0.0, 1.0], [1.0, -2.0], ModelError),
        ([0.0, 1.0], [[1.0, 2.0], [2.0, 1.0]], ModelError),
        ([0.0, 1.0], [[1.0, 0.1], [0.0, 1.0]], ModelError),
        ([0.0, 1.0], [1.0, 1.0, 1.0], ShapeMismatchError),
        ([0.0, 1.0], [[1.0]], ShapeMismatchError),
        ([[0.0, 1.0]], [1.0, 1.0], ShapeMismatchError),
        ([], [], ShapeMismatchError),
        ([np.nan, 1.0], [1.0, 1.0], InvalidInputError),
        ([0.0, 1.0], [np.inf, 1.0], InvalidInputError),
    ],
)
def test_quadratic_form_matrix_rejects_invalid_gaussians(
    mean: list, cov: list, error: type
) -> None:
    with pytest.raises(error):
        hmm.quadratic_form_matrix(mean, cov)


@pytest.mark.parametrize(
    ("function", "argument", "error"),
    [
        (hmm.quadratic_products, np.zeros((2, 2, 2)), ShapeMismatchError),
        (hmm.quadratic_products, np.zeros(0), ShapeMismatchError),
        (hmm.quadratic_products, [np.nan], InvalidInputError),
        (hmm.quadratic_weights, np.zeros((2, 3)), ShapeMismatchError),
        (hmm.quadratic_weights, np.zeros((1, 1)), ShapeMismatchError),
        (hmm.quadratic_weights, np.full((2, 2), np.inf), InvalidInputError),
        (hmm.n_products, 0, InvalidInputError),
        (hmm.n_products, 2.0, InvalidInputError),
        (hmm.product_indices, -1, InvalidInputError),
        (hmm.constant_index, True, InvalidInputError),
    ],
)
def test_helpers_reject_invalid_inputs(function: Callable, argument: object, error: type) -> None:
    with pytest.raises(error):
        function(argument)
