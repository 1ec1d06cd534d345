"""Log-space forward, backward, Viterbi and state posteriors for one sequence.

Each algorithm has one implementation, ``*_from_logs(log_startprob, log_transmat,
log_emission)``, working on the log parameters and the (T, N) matrix of log b_j(o_t);
the model-level function of the same name (``forward(model, obs)``, ...) builds those
parts with :func:`log_parameters` and calls it. The parts form lets a caller plug in
emission scores computed elsewhere, e.g. decrypted secure scores z^T W_j z of the
simplified secure forward algorithm (thesis 003, section 4.2.1).

The recursions are those of Rabiner (1989), section III, carried out on logarithms
with a max-shifted log-sum-exp (as :func:`scipy.special.logsumexp`) instead of
per-step scaling, so a sequence of any length neither underflows nor needs the
thesis's normalisation trick. Zero probabilities are ``-inf`` and propagate without
NaN or warnings; an impossible sequence has log-likelihood ``-inf``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm import _checks
from smc_hmm.hmm.models import HMM


class LogParameters(NamedTuple):
    """The three log-domain inputs of every recursion: shapes (N,), (N, N), (T, N)."""

    log_startprob: np.ndarray
    log_transmat: np.ndarray
    log_emission: np.ndarray


def log_parameters(model: HMM, obs: ArrayLike) -> LogParameters:
    """log pi, log A and the emission matrix log b_j(o_t) of ``model`` for ``obs``."""
    return LogParameters(model.log_startprob, model.log_transmat, model.log_emission(obs))


def logsumexp(values: np.ndarray, axis: int) -> np.ndarray:
    """log(sum(exp(values))) along ``axis``, stable, with all -inf giving -inf.

    Same result as :func:`scipy.special.logsumexp` (the tests compare them), written
    out because SciPy >= 1.15 spends ~250 us of array-API dispatch per call, which
    dominates a recursion made of T small calls.
    """
    peak = np.max(values, axis=axis, keepdims=True)
    peak[~np.isfinite(peak)] = 0.0  # an all -inf slice: exp gives 0 and log(0) = -inf
    with np.errstate(divide="ignore"):
        total = np.log(np.sum(np.exp(values - peak), axis=axis))
    return total + np.squeeze(peak, axis=axis)


# --- parts form: the single implementation of each algorithm --------------------


def forward_from_logs(
    log_startprob: ArrayLike, log_transmat: ArrayLike, log_emission: ArrayLike
) -> tuple[np.ndarray, float]:
    """Forward pass: (log alpha (T, N), log P(O | lambda)).

    alpha_1(j) = pi_j b_j(o_1); alpha_{t+1}(j) = [sum_i alpha_t(i) a_ij] b_j(o_{t+1})
    (Rabiner 1989, eqs. 19-21), in log space.
    """
    start, trans, emission = _checks.log_parts(log_startprob, log_transmat, log_emission)
    n_steps, n_states = emission.shape
    log_alpha = np.empty((n_steps, n_states))
    log_alpha[0] = start + emission[0]
    for t in range(1, n_steps):
        log_alpha[t] = logsumexp(log_alpha[t - 1][:, None] + trans, axis=0) + emission[t]
    return log_alpha, float(logsumexp(log_alpha[-1], axis=0))


def backward_from_logs(
    log_startprob: ArrayLike, log_transmat: ArrayLike, log_emission: ArrayLike
) -> np.ndarray:
    """Backward pass: log beta (T, N) with beta_T = 1 and
    beta_t(i) = sum_j a_ij b_j(o_{t+1}) beta_{t+1}(j) (Rabiner 1989, eqs. 24-25).

    ``log_startprob`` is not used by the recursion; it is taken (and shape-checked) so
    that every ``*_from_logs`` function accepts the same :class:`LogParameters`.
    """
    _, trans, emission = _checks.log_parts(log_startprob, log_transmat, log_emission)
    n_steps, n_states = emission.shape
    log_beta = np.empty((n_steps, n_states))
    log_beta[-1] = 0.0
    for t in range(n_steps - 2, -1, -1):
        log_beta[t] = logsumexp(trans + (emission[t + 1] + log_beta[t + 1])[None, :], axis=1)
    return log_beta


def viterbi_from_logs(
    log_startprob: ArrayLike, log_transmat: ArrayLike, log_emission: ArrayLike
) -> tuple[np.ndarray, float]:
    """Most likely state path (T,) int64 and its joint log-probability log P(O, Q* | lambda).

    Rabiner (1989), eqs. 32-35, in log space. Ties go to the lowest state index. If the
    sequence is impossible the log-probability is ``-inf`` and the path is arbitrary.
    """
    start, trans, emission = _checks.log_parts(log_startprob, log_transmat, log_emission)
    n_steps, n_states = emission.shape
    backpointers = np.zeros((n_steps, n_states), dtype=np.int64)
    delta = start + emission[0]
    columns = np.arange(n_states)
    for t in range(1, n_steps):
        scores = delta[:, None] + trans
        backpointers[t] = np.argmax(scores, axis=0)
        delta = scores[backpointers[t], columns] + emission[t]
    path = np.empty(n_steps, dtype=np.int64)
    path[-1] = np.argmax(delta)
    for t in range(n_steps - 1, 0, -1):
        path[t - 1] = backpointers[t, path[t]]
    return path, float(delta[path[-1]])


def posteriors_from_logs(
    log_startprob: ArrayLike, log_transmat: ArrayLike, log_emission: ArrayLike
) -> np.ndarray:
    """State posteriors gamma_t(i) = P(q_t = i | O, lambda), shape (T, N), rows sum to 1.

    Rabiner (1989), eq. 27. Raises InvalidInputError if P(O | lambda) = 0, for which
    the conditional distribution is undefined.
    """
    log_alpha, log_prob = forward_from_logs(log_startprob, log_transmat, log_emission)
    log_beta = backward_from_logs(log_startprob, log_transmat, log_emission)
    if log_prob == -np.inf:
        raise InvalidInputError(
            "the sequence has probability zero under the model; posteriors are undefined"
        )
    gamma = np.exp(log_alpha + log_beta - log_prob)
    return gamma / gamma.sum(axis=1, keepdims=True)


def log_likelihood_from_logs(
    log_startprob: ArrayLike, log_transmat: ArrayLike, log_emission: ArrayLike
) -> float:
    """log P(O | lambda); ``-inf`` for an impossible sequence."""
    return forward_from_logs(log_startprob, log_transmat, log_emission)[1]


# --- model form ----------------------------------------------------------------


def forward(model: HMM, obs: ArrayLike) -> tuple[np.ndarray, float]:
    """(log alpha (T, N), log P(obs | model)); see :func:`forward_from_logs`."""
    return forward_from_logs(*log_parameters(model, obs))


def backward(model: HMM, obs: ArrayLike) -> np.ndarray:
    """log beta (T, N); see :func:`backward_from_logs`."""
    return backward_from_logs(*log_parameters(model, obs))


def viterbi(model: HMM, obs: ArrayLike) -> tuple[np.ndarray, float]:
    """(best state path (T,), its log-probability); see :func:`viterbi_from_logs`."""
    return viterbi_from_logs(*log_parameters(model, obs))


def posteriors(model: HMM, obs: ArrayLike) -> np.ndarray:
    """gamma (T, N) = P(q_t = i | obs, model); see :func:`posteriors_from_logs`."""
    return posteriors_from_logs(*log_parameters(model, obs))


def log_likelihood(model: HMM, obs: ArrayLike) -> float:
    """log P(obs | model), as ``hmmlearn``'s ``score``; ``-inf`` if impossible."""
    return log_likelihood_from_logs(*log_parameters(model, obs))
