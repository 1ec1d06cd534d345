"""One model, many sequences at once: forward log-likelihoods, Viterbi scores and the
Baum-Welch E-step, vectorised across the sequences.

:mod:`smc_hmm.hmm.inference` runs one numpy step per frame of one sequence; training
ten digit models on 2,000 utterances, as the leave-one-speaker-out evaluation of
``docs/speech-models.md`` does five times over, then spends its time in the Python loop.
Here the sequences are sorted by length and cut into blocks; a block's log-emissions are
padded to its longest sequence and each recursion step runs on the whole block (the
frames past a sequence's end are masked out).  The results are those of
:func:`~smc_hmm.hmm.inference.log_likelihood`, :func:`~smc_hmm.hmm.inference.viterbi`'s
score and :func:`~smc_hmm.hmm.training.expected_counts` (the tests compare them to
1e-9); :func:`batched_expected_counts` plugs into
:func:`~smc_hmm.hmm.training.baum_welch` as its ``e_step``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm.inference import logsumexp
from smc_hmm.hmm.models import HMM
from smc_hmm.hmm.training import ExpectedCounts, check_sequences, emission_statistics

__all__ = ["BLOCK", "batched_expected_counts", "batched_log_likelihoods", "batched_viterbi_scores"]

#: sequences per block: bounds the padded (block, T, N) arrays
BLOCK = 256


def _blocks(
    model: HMM, sequences: Sequence[ArrayLike]
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]]:
    """(positions, lengths, padded log-emissions (B, T, N), the checked sequences) of
    each block of sequences, shortest first; padded emissions are 0."""
    checked = [model.check_observations(x) for x in check_sequences(sequences)]
    order = np.argsort([len(x) for x in checked], kind="stable")
    for start in range(0, len(order), BLOCK):
        positions = order[start : start + BLOCK]
        block = [checked[i] for i in positions]
        lengths = np.array([len(x) for x in block])
        flat = model.log_emission(np.concatenate(block))
        log_b = np.zeros((len(block), lengths.max(), model.n_states))
        mask = np.arange(lengths.max())[None, :] < lengths[:, None]
        log_b[mask] = flat
        yield positions, lengths, log_b, block


def _forward(model: HMM, log_b: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log alpha (B, T, N) (meaningless past each sequence's end) and log P (B,)."""
    trans = model.log_transmat
    alpha = np.empty_like(log_b)
    alpha[:, 0] = model.log_startprob + log_b[:, 0]
    for t in range(1, log_b.shape[1]):
        alpha[:, t] = logsumexp(alpha[:, t - 1, :, None] + trans, axis=1) + log_b[:, t]
    last = alpha[np.arange(len(lengths)), lengths - 1]
    return alpha, logsumexp(last, axis=1)


def batched_log_likelihoods(model: HMM, sequences: Sequence[ArrayLike]) -> np.ndarray:
    """log P(O_k | model) of every sequence (the forward algorithm), in input order."""
    out = np.empty(len(check_sequences(sequences)))
    for positions, lengths, log_b, _ in _blocks(model, sequences):
        out[positions] = _forward(model, log_b, lengths)[1]
    return out


def batched_viterbi_scores(model: HMM, sequences: Sequence[ArrayLike]) -> np.ndarray:
    """log P(O_k, Q*_k | model), the best path's score of every sequence, in input order."""
    trans = model.log_transmat
    out = np.empty(len(check_sequences(sequences)))
    for positions, lengths, log_b, _ in _blocks(model, sequences):
        delta = model.log_startprob + log_b[:, 0]
        best = np.empty(len(lengths))
        for t in range(log_b.shape[1]):
            if t:
                delta = np.max(delta[:, :, None] + trans, axis=1) + log_b[:, t]
            ending = lengths == t + 1
            best[ending] = delta[ending].max(axis=1)
        out[positions] = best
    return out


def batched_expected_counts(model: HMM, sequences: Sequence[ArrayLike]) -> ExpectedCounts:
    """:func:`~smc_hmm.hmm.training.expected_counts` (the E-step of Baum-Welch), block by
    block; raises InvalidInputError if a sequence is impossible under the model."""
    n = model.n_states
    trans = model.log_transmat
    initial, transitions, total = np.zeros(n), np.zeros((n, n)), 0.0
    all_values, all_gammas = [], []
    for positions, lengths, log_b, block in _blocks(model, sequences):
        alpha, log_p = _forward(model, log_b, lengths)
        if np.any(log_p == -np.inf):
            index = int(positions[np.flatnonzero(log_p == -np.inf)[0]])
            raise InvalidInputError(f"sequence {index} has probability zero under the model")
        beta = np.zeros_like(log_b)
        for t in range(log_b.shape[1] - 2, -1, -1):
            step = logsumexp(trans + (log_b[:, t + 1] + beta[:, t + 1])[:, None, :], axis=2)
            beta[:, t] = np.where((t < lengths - 1)[:, None], step, 0.0)
        mask = np.arange(log_b.shape[1])[None, :] < lengths[:, None]
        gamma = np.exp(alpha + beta - log_p[:, None, None])[mask]
        for t in range(log_b.shape[1] - 1):
            live = t < lengths - 1
            if not live.any():
                break
            log_xi = (
                alpha[live, t, :, None]
                + trans
                + (log_b[live, t + 1] + beta[live, t + 1])[:, None, :]
                - log_p[live, None, None]
            )
            transitions += np.exp(log_xi).sum(axis=0)
        initial += np.exp(alpha[:, 0] + beta[:, 0] - log_p[:, None]).sum(axis=0)
        total += float(log_p.sum())
        all_values.append(np.concatenate(block))
        all_gammas.append(gamma)
    values, gamma = np.concatenate(all_values), np.concatenate(all_gammas)
    return ExpectedCounts(
        initial=initial,
        transitions=transitions,
        occupancy=gamma.sum(axis=0),
        log_likelihood=total,
        **emission_statistics(model, values, gamma),
    )
