"""Gaussian log-densities as quadratic forms in z = [x; 1] (thesis 003, section 4.2.1).

For a state with mean mu and covariance C in dimension d, with precision P = C^{-1},

    log N(x; mu, C) = -1/2 (x - mu)^T P (x - mu) - 1/2 ln|C| - d/2 ln(2 pi)
                    = z^T W z,   z = [x; 1],

    W = [ -1/2 P    P mu ]        w = -1/2 mu^T P mu - 1/2 ln|C| - d/2 ln(2 pi).
        [   0        w   ],

This is the block layout of the thesis ("Secure Keyword Recognition"), whose printed
constant w_j = +1/2 mu^T C^{-1} mu - 1/2 ln|C^{-1}| - d/2 ln 2pi has the signs of its
first two terms flipped; the value above is the one derived from the density and is
checked against ``scipy.stats.multivariate_normal.logpdf`` in the tests.

Distinct products. z^T W z depends on z only through the products z_i z_j, i <= j, so
the client (Alice) encrypts those and the server (Bob) evaluates every state as one
weighted sum. Products are ordered like the upper triangle of z z^T read row by row,
i.e. pairs ``(i, j)`` as returned by ``numpy.triu_indices(d + 1)``:

    (0,0), (0,1), ..., (0,d), (1,1), (1,2), ..., (1,d), ..., (d-1,d-1), (d-1,d), (d,d).

With 0-based indices z_d = 1, so a pair (i, d) with i < d is the linear term x_i, a
pair (i, j) with j < d is x_i x_j, and the last pair (d, d) is the constant 1. The
vector therefore has n_products(d) = (d+1)(d+2)/2 entries *including* the constant,
which is always last (:func:`constant_index`); a protocol that need not encrypt the
constant drops that entry and adds its weight in the clear. For d = 39 (MFCC frames)
there are 820 products. The weight of a pair is W_ii on the diagonal and W_ij + W_ji
off it, so that log b_j(x) = weights_j . products(z) for any (not only symmetric) W.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import cho_solve

from smc_hmm.errors import InvalidInputError, ShapeMismatchError
from smc_hmm.hmm import _checks
from smc_hmm.hmm.models import GaussianHMM

_LOG_2PI = math.log(2.0 * math.pi)


def n_products(n_features: int) -> int:
    """Number of distinct products z_i z_j (i <= j) for x in R^d: (d+1)(d+2)/2."""
    d = _check_dimension(n_features)
    return (d + 1) * (d + 2) // 2


def product_indices(n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays (rows, cols) into z of every product, in the documented order.

    Equal to ``numpy.triu_indices(d + 1)``; entry k of the product vector is
    ``z[rows[k]] * z[cols[k]]``.
    """
    d = _check_dimension(n_features)
    return np.triu_indices(d + 1)


def constant_index(n_features: int) -> int:
    """Position of the constant product z_d z_d = 1: always the last, n_products(d) - 1."""
    return n_products(n_features) - 1


def quadratic_products(x: ArrayLike) -> np.ndarray:
    """Distinct products of z = [x; 1] for one frame x (d,) -> (P,) or frames (T, d) -> (T, P).

    P = (d+1)(d+2)/2, the constant 1 included, ordered as :func:`product_indices`.
    """
    frames = _checks.as_float_array(x, "x", InvalidInputError)
    if frames.ndim not in (1, 2) or frames.shape[-1] < 1:
        raise ShapeMismatchError(
            f"x must have shape (d,) or (T, d) with d >= 1, got {frames.shape}"
        )
    _checks.require_finite(frames, "x", InvalidInputError)
    z = np.concatenate([frames, np.ones(frames.shape[:-1] + (1,))], axis=-1)
    rows, cols = product_indices(frames.shape[-1])
    return z[..., rows] * z[..., cols]


def quadratic_weights(weight_matrix: ArrayLike) -> np.ndarray:
    """Weights of the distinct products for W (d+1, d+1) -> (P,), or stacked (N, d+1, d+1)
    -> (N, P): W_ii on the diagonal and W_ij + W_ji off it, so z^T W z = weights . products.
    """
    w = _checks.as_float_array(weight_matrix, "weight_matrix", InvalidInputError)
    if w.ndim not in (2, 3) or w.shape[-1] != w.shape[-2] or w.shape[-1] < 2:
        raise ShapeMismatchError(
            f"weight_matrix must have shape (d+1, d+1) or (N, d+1, d+1) with d >= 1, got {w.shape}"
        )
    _checks.require_finite(w, "weight_matrix", InvalidInputError)
    rows, cols = product_indices(w.shape[-1] - 1)
    symmetrised = w + np.swapaxes(w, -1, -2)
    diagonal = rows == cols
    return np.where(diagonal, w[..., rows, cols], symmetrised[..., rows, cols])


def quadratic_form_matrix(mean: ArrayLike, cov: ArrayLike) -> np.ndarray:
    """The thesis's W (d+1, d+1) with log N(x; mean, cov) = z^T W z, z = [x; 1].

    ``cov`` is a vector (d,) of variances (diagonal covariance) or a symmetric
    positive-definite matrix (d, d). Raises ModelError for an invalid covariance.
    """
    mu = _checks.as_float_array(mean, "mean", InvalidInputError)
    if mu.ndim != 1 or mu.shape[0] < 1:
        raise ShapeMismatchError(f"mean must have shape (d,) with d >= 1, got {mu.shape}")
    _checks.require_finite(mu, "mean", InvalidInputError)
    d = mu.shape[0]
    c = _checks.as_float_array(cov, "cov", InvalidInputError)
    if c.shape not in ((d,), (d, d)):
        raise ShapeMismatchError(f"cov must have shape ({d},) or ({d}, {d}), got {c.shape}")
    _checks.require_finite(c, "cov", InvalidInputError)
    if c.ndim == 1:
        _checks.positive_variances(c, "cov")
        precision = np.diag(1.0 / c)
        log_det = float(np.sum(np.log(c)))
    else:
        chol = _checks.cholesky(c, "cov")
        precision = cho_solve((chol, True), np.eye(d))
        precision = 0.5 * (precision + precision.T)
        log_det = 2.0 * float(np.sum(np.log(np.diag(chol))))
    precision_mean = precision @ mu
    w = np.zeros((d + 1, d + 1))
    w[:d, :d] = -0.5 * precision
    w[:d, d] = precision_mean
    w[d, d] = -0.5 * float(mu @ precision_mean) - 0.5 * log_det - 0.5 * d * _LOG_2PI
    return w


def quadratic_form_matrices(model: GaussianHMM) -> np.ndarray:
    """W_j for every state of ``model``: shape (N, d+1, d+1)."""
    return np.stack(
        [quadratic_form_matrix(m, c) for m, c in zip(model.means, model.covars, strict=True)]
    )


def diag_emission_weights(model: GaussianHMM) -> np.ndarray:
    """Per state of a diagonal-covariance model: the weights of x_i and x_i^2, then the
    constant, with log b_j(x) = w . [x; x^2; 1] (what the secure protocols' diagonal
    emissions evaluate):

    log N(x; mu, diag(s)) = sum_i (mu_i / s_i) x_i - x_i^2 / (2 s_i)
                            - sum_i (mu_i^2 / (2 s_i) + log(2 pi s_i) / 2).
    """
    mu, var = np.asarray(model.means, float), np.asarray(model.covars, float)
    const = -(mu * mu / (2 * var)).sum(axis=1) - 0.5 * np.log(2 * np.pi * var).sum(axis=1)
    return np.concatenate([mu / var, -0.5 / var, const[:, None]], axis=1)


def emission_weights(model: GaussianHMM) -> np.ndarray:
    """Product weights of every state, shape (N, P): ``quadratic_products(x) @
    emission_weights(model).T`` equals ``model.log_emission(x)``."""
    return quadratic_weights(quadratic_form_matrices(model))


def _check_dimension(n_features: int) -> int:
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
        raise InvalidInputError(f"n_features must be an integer, got {n_features!r}")
    if n_features < 1:
        raise InvalidInputError(f"n_features must be >= 1, got {n_features}")
    return int(n_features)
