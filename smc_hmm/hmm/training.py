"""Baum-Welch (EM) training from several sequences, with a separate E-step.

:func:`expected_counts` is the E-step: the expected initial, transition and emission
counts (or Gaussian sufficient statistics) summed over the sequences (Rabiner 1989,
eqs. 37-40 and 52-53). :func:`reestimate` is the M-step. They are public so that a
differentially private Baum-Welch (paper 000, sections 3-5: Laplace noise on the
expected transition counts A_kl and emission counts E_k(b)) can perturb the counts
between the two steps. :func:`baum_welch` alternates them until the log-likelihood
stops improving.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.errors import InvalidInputError, ShapeMismatchError
from smc_hmm.hmm._checks import plain
from smc_hmm.hmm.inference import backward_from_logs, forward_from_logs
from smc_hmm.hmm.models import HMM, DiscreteHMM, GaussianHMM

DEFAULT_MIN_COVAR = 1e-3
"""Default variance floor of the Gaussian M-step (the value hmmlearn uses)."""


@dataclass(frozen=True, eq=False)
class ExpectedCounts:
    """Expected sufficient statistics of one E-step, summed over all sequences.

    Attributes:
        initial: (N,) expected number of sequences starting in state i,
            sum_k gamma^k_1(i); sums to the number of sequences.
        transitions: (N, N) expected number of i -> j transitions,
            sum_k sum_t xi^k_t(i, j); sums to sum_k (T_k - 1).
        occupancy: (N,) expected number of frames spent in state i,
            sum_k sum_t gamma^k_t(i); sums to sum_k T_k.
        log_likelihood: sum_k log P(O^k | lambda) under the model of the E-step.
        emissions: discrete models only, (N, M) expected number of times state i
            emits symbol m; row sums equal ``occupancy``. ``None`` for Gaussian models.
        obs_sum: Gaussian models only, (N, D) sum_k sum_t gamma^k_t(i) x_t.
        obs_sq_sum: Gaussian models only, sum_k sum_t gamma^k_t(i) x_t x_t^T as (N, D, D)
            for full covariances, or its diagonal (N, D) for diagonal ones.
    """

    initial: np.ndarray
    transitions: np.ndarray
    occupancy: np.ndarray
    log_likelihood: float
    emissions: np.ndarray | None = None
    obs_sum: np.ndarray | None = None
    obs_sq_sum: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class BaumWelchResult:
    """Outcome of :func:`baum_welch`.

    Attributes:
        model: the last model; its log-likelihood is ``history[-1]``.
        history: total log-likelihood of the sequences under the input model
            (``history[0]``) and under each re-estimated model; non-decreasing up to
            rounding, as EM guarantees.
        converged: True if the last improvement was below ``tol`` before ``n_iter``
            re-estimations were spent.
    """

    model: HMM
    history: np.ndarray
    converged: bool


def check_sequences(sequences: Sequence[ArrayLike]) -> Sequence[ArrayLike]:
    if isinstance(sequences, np.ndarray) or not isinstance(sequences, (list, tuple)):
        raise InvalidInputError(
            "sequences must be a list or tuple of observation arrays (wrap a single "
            "sequence in a list)"
        )
    if not sequences:
        raise InvalidInputError("at least one sequence is required")
    return sequences


def _sequence_posteriors(
    model: HMM, log_emission: np.ndarray, index: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """gamma (T, N), summed xi (N, N) and log P of one sequence."""
    log_transmat = model.log_transmat
    log_alpha, log_prob = forward_from_logs(model.log_startprob, log_transmat, log_emission)
    if log_prob == -np.inf:
        raise InvalidInputError(f"sequence {index} has probability zero under the model")
    log_beta = backward_from_logs(model.log_startprob, log_transmat, log_emission)
    gamma = np.exp(log_alpha + log_beta - log_prob)
    log_xi = (
        log_alpha[:-1, :, None]
        + log_transmat[None, :, :]
        + (log_emission[1:] + log_beta[1:])[:, None, :]
        - log_prob
    )
    return gamma, np.exp(log_xi).sum(axis=0), log_prob


def expected_counts(model: HMM, sequences: Sequence[ArrayLike]) -> ExpectedCounts:
    """E-step of Baum-Welch over several sequences (Rabiner 1989, section V.B).

    ``sequences`` is a list of observation arrays, each as accepted by
    ``model.log_emission``. Raises InvalidInputError if a sequence is impossible under
    the model (its posteriors are undefined).
    """
    sequences = check_sequences(sequences)
    n_states = model.n_states
    initial = np.zeros(n_states)
    transitions = np.zeros((n_states, n_states))
    total_log_prob = 0.0
    all_values, all_gammas = [], []
    for index, obs in enumerate(sequences):
        values = model.check_observations(obs)
        gamma, xi_sum, log_prob = _sequence_posteriors(model, model.log_emission(values), index)
        initial += gamma[0]
        transitions += xi_sum
        total_log_prob += log_prob
        all_values.append(values)
        all_gammas.append(gamma)
    values = np.concatenate(all_values)
    gamma = np.concatenate(all_gammas)
    return ExpectedCounts(
        initial=initial,
        transitions=transitions,
        occupancy=gamma.sum(axis=0),
        log_likelihood=total_log_prob,
        **emission_statistics(model, values, gamma),
    )


def emission_statistics(model: HMM, values: np.ndarray, gamma: np.ndarray) -> dict[str, np.ndarray]:
    """Posterior-weighted emission statistics of all frames (concatenated sequences)."""
    if isinstance(model, DiscreteHMM):
        emissions = np.zeros((model.n_states, model.n_symbols))
        np.add.at(emissions.T, values, gamma)
        return {"emissions": emissions}
    if model.covariance_type == "full":
        obs_sq_sum = np.einsum("ti,tj,tk->ijk", gamma, values, values)
    else:
        obs_sq_sum = gamma.T @ values**2
    return {"obs_sum": gamma.T @ values, "obs_sq_sum": obs_sq_sum}


def _check_counts(name: str, counts: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    if counts is None:
        raise InvalidInputError(f"counts.{name} is required for this model")
    array = np.asarray(counts, dtype=np.float64)
    if array.shape != shape:
        raise ShapeMismatchError(f"counts.{name} has shape {array.shape}, expected {shape}")
    if not np.all(np.isfinite(array)):
        raise InvalidInputError(f"counts.{name} must be finite")
    return array


def _check_nonnegative(name: str, counts: np.ndarray) -> None:
    if np.any(counts < 0):
        raise InvalidInputError(
            f"counts.{name} has a negative entry; clip or post-process noisy counts first"
        )


def _normalise_rows(counts: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Divide each row by its sum; a row with no mass keeps its previous value."""
    sums = counts.sum(axis=-1, keepdims=True)
    empty = sums[..., 0] <= 0
    rows = np.divide(counts, sums, out=np.zeros_like(counts), where=sums > 0)
    rows[empty] = previous[empty]
    return rows


def _floor_covariance(cov: np.ndarray, min_covar: float) -> np.ndarray:
    """Clip the eigenvalues of a symmetric matrix at ``min_covar``.

    This is the maximiser of the Gaussian M-step under the constraint C >= min_covar I,
    so EM stays monotone (unlike hmmlearn's "add min_covar" rule).
    """
    symmetric = 0.5 * (cov + cov.T)
    eigenvalues, eigenvectors = np.linalg.eigh(symmetric)
    if np.all(eigenvalues >= min_covar):
        return symmetric
    clipped = np.maximum(eigenvalues, min_covar)
    floored = (eigenvectors * clipped) @ eigenvectors.T
    return 0.5 * (floored + floored.T)


def reestimate(model: HMM, counts: ExpectedCounts, *, min_covar: float = DEFAULT_MIN_COVAR) -> HMM:
    """M-step: the model maximising the expected complete-data log-likelihood.

    pi_i = initial_i / sum, a_ij = transitions_ij / row sum, b_j(m) = emissions_jm /
    row sum (Rabiner 1989, eqs. 40a-c); Gaussian means and covariances are the
    gamma-weighted moments (eqs. 52-53), with variances (eigenvalues for full
    covariances) floored at ``min_covar``. A state with no expected mass keeps its
    previous parameters. Counts must be finite and nonnegative.
    """
    if not (math.isfinite(min_covar) and min_covar >= 0):
        raise InvalidInputError(f"min_covar must be finite and >= 0, got {plain(min_covar)!r}")
    n_states = model.n_states
    initial = _check_counts("initial", counts.initial, (n_states,))
    transitions = _check_counts("transitions", counts.transitions, (n_states, n_states))
    for name, array in (("initial", initial), ("transitions", transitions)):
        _check_nonnegative(name, array)
    startprob = _normalise_rows(initial, model.startprob)
    transmat = _normalise_rows(transitions, model.transmat)

    if isinstance(model, DiscreteHMM):
        emissions = _check_counts("emissions", counts.emissions, model.emissionprob.shape)
        _check_nonnegative("emissions", emissions)
        emissionprob = _normalise_rows(emissions, model.emissionprob)
        return DiscreteHMM(startprob, transmat, emissionprob)
    return _reestimate_gaussian(model, counts, startprob, transmat, min_covar)


def _reestimate_gaussian(
    model: GaussianHMM,
    counts: ExpectedCounts,
    startprob: np.ndarray,
    transmat: np.ndarray,
    min_covar: float,
) -> GaussianHMM:
    n_states, n_features = model.means.shape
    occupancy = _check_counts("occupancy", counts.occupancy, (n_states,))
    _check_nonnegative("occupancy", occupancy)
    obs_sum = _check_counts("obs_sum", counts.obs_sum, (n_states, n_features))
    obs_sq_sum = _check_counts("obs_sq_sum", counts.obs_sq_sum, model.covars.shape)
    means = model.means.copy()
    covars = model.covars.copy()
    for j in np.flatnonzero(occupancy > 0):
        mean = obs_sum[j] / occupancy[j]
        second_moment = obs_sq_sum[j] / occupancy[j]
        means[j] = mean
        if model.covariance_type == "full":
            covars[j] = _floor_covariance(second_moment - np.outer(mean, mean), min_covar)
        else:
            covars[j] = np.maximum(second_moment - mean**2, min_covar)
    return GaussianHMM(startprob, transmat, means, covars, model.covariance_type)


def baum_welch(
    model: HMM,
    sequences: Sequence[ArrayLike],
    *,
    n_iter: int = 100,
    tol: float = 1e-4,
    min_covar: float = DEFAULT_MIN_COVAR,
    e_step=None,
) -> BaumWelchResult:
    """Fit ``model`` to ``sequences`` by EM (Baum-Welch; Rabiner 1989, section III.C).

    ``e_step(model, sequences) -> ExpectedCounts`` replaces :func:`expected_counts`
    (e.g. a vectorised E-step for many short discrete sequences).

    Runs at most ``n_iter`` re-estimations and stops early once the total
    log-likelihood improves by less than ``tol`` (absolute). Every model in the run,
    including the returned one, has its log-likelihood recorded in ``history``.
    """
    if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or n_iter < 0:
        raise InvalidInputError(f"n_iter must be an integer >= 0, got {plain(n_iter)!r}")
    if not (math.isfinite(tol) and tol >= 0):
        raise InvalidInputError(f"tol must be finite and >= 0, got {plain(tol)!r}")
    sequences = check_sequences(sequences)
    history: list[float] = []
    converged = False
    e_step = expected_counts if e_step is None else e_step
    for iteration in range(int(n_iter) + 1):
        counts = e_step(model, sequences)
        history.append(counts.log_likelihood)
        if iteration > 0 and history[-1] - history[-2] < tol:
            converged = True
            break
        if iteration == n_iter:
            break
        model = reestimate(model, counts, min_covar=min_covar)
    return BaumWelchResult(model=model, history=np.array(history), converged=converged)
