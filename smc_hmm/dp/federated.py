"""Federated DP Baum-Welch: several data owners, one noisy total per E-step.

Each data owner j holds private observation sequences for a shared HMM.  In every
iteration each owner computes the expected counts of the current (public) model on its
own sequences (:func:`owner_counts`); the counts are summed and Laplace noise is added
*once* to the total (``aggregate``); the M-step runs on the noisy total
(:func:`smc_hmm.dp.baum_welch.counts_to_model`, post-processing) and the new model is
public.  The accountant is charged eps / n_iter per iteration before any noise is drawn.

**Sensitivity.** The neighbouring relation is that of :mod:`smc_hmm.dp.baum_welch` on
the union of the owners' data: one sequence (of length <= L) added or removed (or
substituted: doubled).  That sequence belongs to one owner, so the total of the counts
moves by at most the centralised sensitivities (seed 000's analysis,
:func:`~smc_hmm.dp.baum_welch.count_sensitivities`: initial 1, transitions L - 1,
emissions L; Gaussian: occupancy L, mean sums L sqrt(D) R, second moments L R^2 (diag)
for frames clipped to ||x||_2 <= R).  The noise Lap(Delta_c / eps_c) on the total is
therefore the same mechanism as the centralised one, with the same guarantee: the
federated model has the distribution of the centralised DP model trained on the
pooled data.  Per-owner noise would be K times the variance for the same guarantee.

**Who adds the noise.** ``aggregate(vectors, scales)`` returns sum(vectors) + noise.
:func:`plain_aggregate` does it in the clear (a simulation with the same output
distribution, for sweeps); :func:`protocols.aggregate.secure_count_aggregator` runs the
``dp_sum`` protocol, in which the owners' counts travel encrypted under the curator's
key, one owner adds the noise under encryption and the curator decrypts only the noisy
total (the coalitions are stated in ``protocols/aggregate.py`` and
``docs/security.md``).  This module is plaintext and imports no encryption (the
architecture's import contract); the secure aggregator is injected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from smc_hmm.dp.accountant import PrivacyAccountant
from smc_hmm.dp.baum_welch import (
    DEFAULT_MIN_PROB,
    check_iterations,
    count_sensitivities,
    counts_from_parts,
    counts_to_model,
    data_components,
    discrete_expected_counts,
    prepare_sequences,
    reserve_budget,
    split_budget,
    zero_counts,
)
from smc_hmm.dp.mechanisms import LaplaceMechanism
from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import AggregateInputError, PrivacyParameterError
from smc_hmm.hmm.models import HMM, DiscreteHMM
from smc_hmm.hmm.training import DEFAULT_MIN_COVAR, ExpectedCounts, expected_counts

Aggregate = Callable[[Sequence[np.ndarray], np.ndarray], np.ndarray]

DEFAULT_CLIP = 50.0
"""Laplace noise is cut at 50 scales (probability e^-50 per entry: a delta of that order),
so the encrypted sum has a public bound."""


def count_layout(model: HMM) -> list[tuple[str, tuple[int, ...], np.ndarray]]:
    """(component, shape, mask of its data-dependent entries) in the order of the vector."""
    parts = data_components(model, zero_counts(model))
    return [(name, values.shape, mask) for name, (values, mask) in parts.items()]


def flatten_counts(model: HMM, counts: ExpectedCounts) -> np.ndarray:
    """The data-dependent entries of every component, concatenated (the summed vector)."""
    return np.concatenate(
        [values[mask] for values, mask in data_components(model, counts).values()]
    )


def unflatten_counts(model: HMM, vector: np.ndarray) -> ExpectedCounts:
    """The inverse of :func:`flatten_counts` (structural zeros stay 0; a full covariance's
    upper triangle is mirrored)."""
    vector = np.asarray(vector, dtype=float)
    layout = count_layout(model)
    expected = sum(int(mask.sum()) for _, _, mask in layout)
    if vector.shape != (expected,):
        raise AggregateInputError(f"a count vector of shape {vector.shape}, expected ({expected},)")
    out: dict[str, np.ndarray] = {}
    at = 0
    for name, shape, mask in layout:
        arr = np.zeros(shape)
        k = int(mask.sum())
        arr[mask] = vector[at : at + k]
        at += k
        out[name] = arr
    return counts_from_parts(model, out)


def noise_scales(
    model: HMM,
    epsilon: float,
    *,
    max_length: int,
    neighbouring: str = "add_remove",
    feature_bound: float | None = None,
    split: Mapping[str, float] | None = None,
) -> np.ndarray:
    """The Laplace scale Delta_c / eps_c of every entry of the count vector (public)."""
    sens = count_sensitivities(
        model, max_length, neighbouring=neighbouring, feature_bound=feature_bound
    )
    eps = split_budget(epsilon, sens, split)
    parts = []
    for name, _, mask in count_layout(model):
        b = sens[name] / eps[name] if sens[name] > 0 else 0.0
        parts.append(np.full(int(mask.sum()), b))
    return np.concatenate(parts)


def count_bound(
    model: HMM, max_sequences: int, max_length: int, feature_bound: float | None = None
) -> float:
    """A public bound on every entry of one owner's count vector: at most
    ``max_sequences`` sequences of at most L frames, frames in the R-ball."""
    r = 1.0 if feature_bound is None else float(feature_bound)
    return float(max_sequences) * float(max_length) * max(1.0, r, r * r)


def owner_counts(
    model: HMM,
    sequences: Sequence,
    *,
    max_length: int,
    long_sequences: str = "raise",
    feature_bound: float | None = None,
) -> np.ndarray:
    """One owner's local E-step on its own sequences: the clean count vector.  A sequence
    the public model rules out contributes nothing (as in the central DP Baum-Welch,
    :mod:`smc_hmm.dp.baum_welch`, "Impossible sequences"): no owner fails on one record."""
    prepared = prepare_sequences(
        model, sequences, max_length, long_sequences=long_sequences, feature_bound=feature_bound
    )
    if isinstance(model, DiscreteHMM):
        counts = discrete_expected_counts(model, prepared, skip_impossible=True)
    else:
        counts = expected_counts(model, prepared)
    return flatten_counts(model, counts)


def laplace_vector(
    scales: np.ndarray, rng: DPRandom | None = None, clip: float = DEFAULT_CLIP
) -> np.ndarray:
    """Independent Lap(b_i) per entry (b_i = 0: no noise), each cut at ``clip`` b_i, from the
    hardened default sampler (OpenDP; the float sampler only on an INSECURE seeded
    ``rng``, see :func:`smc_hmm.dp.mechanisms.default_sampler`)."""
    scales = np.asarray(scales, dtype=float)
    if scales.ndim != 1 or not np.all(np.isfinite(scales)) or np.any(scales < 0):
        raise PrivacyParameterError("noise scales must be a finite, nonnegative vector")
    noise = np.zeros(scales.size)
    parent = rng if rng is not None else DPRandom.system()
    for b in np.unique(scales[scales > 0]):
        idx = np.flatnonzero(scales == b)
        release = LaplaceMechanism(1.0, float(b), rng=parent).release(np.zeros(idx.size))
        noise[idx] = np.clip(np.asarray(release.value, dtype=float), -clip * b, clip * b)
    return noise


def plain_aggregate(rng: DPRandom | None = None) -> Aggregate:
    """sum(vectors) + Laplace noise in the clear: the secure protocol's output distribution
    (up to its fixed-point rounding), for sweeps and tests."""

    def aggregate(vectors, scales):
        return np.sum(np.asarray(vectors, dtype=float), axis=0) + laplace_vector(scales, rng)

    return aggregate


@dataclass(frozen=True, eq=False)
class FederatedResult:
    """The released model, the privacy spent, the accountant and the models per iteration."""

    model: HMM
    epsilon: float
    n_owners: int
    n_iter: int
    scales: np.ndarray
    models: tuple[HMM, ...]
    accountant: PrivacyAccountant


def _check_owners(owners: object) -> None:
    """:class:`AggregateInputError` unless ``owners`` is a non-empty list of non-empty
    sequence lists."""
    if isinstance(owners, np.ndarray) or not isinstance(owners, list | tuple) or not owners:
        raise AggregateInputError("owners must be a non-empty list of sequence lists")
    if any(not isinstance(s, list | tuple) or not s for s in owners):
        raise AggregateInputError("every owner needs a non-empty list of sequences")


def _owner_vectors(
    model: HMM,
    owners: Sequence[Sequence],
    max_length: int,
    long_sequences: str,
    feature_bound: float | None,
) -> list[np.ndarray]:
    """Every owner's local E-step (:func:`owner_counts`; in a deployment each runs its own)."""
    return [
        owner_counts(
            model,
            seqs,
            max_length=max_length,
            long_sequences=long_sequences,
            feature_bound=feature_bound,
        )
        for seqs in owners
    ]


def federated_dp_baum_welch(
    model: HMM,
    owners: Sequence[Sequence],
    epsilon: float,
    *,
    max_length: int,
    n_iter: int = 10,
    aggregate: Aggregate | None = None,
    rng: DPRandom | None = None,
    neighbouring: str = "add_remove",
    long_sequences: str = "raise",
    feature_bound: float | None = None,
    split: Mapping[str, float] | None = None,
    min_prob: float = DEFAULT_MIN_PROB,
    min_covar: float = DEFAULT_MIN_COVAR,
    accountant: PrivacyAccountant | None = None,
) -> FederatedResult:
    """``n_iter`` federated noisy EM iterations from the public skeleton ``model`` (eps-DP
    on the union of the owners' sequences; module docstring).  ``owners[j]`` is owner j's
    list of sequences (in a deployment each owner runs :func:`owner_counts` itself)."""
    _check_owners(owners)
    epsilon = check_epsilon(epsilon)
    n_iter = check_iterations(n_iter)
    accountant = reserve_budget(accountant, epsilon)
    aggregate = aggregate if aggregate is not None else plain_aggregate(rng)
    step = epsilon / n_iter
    current, models, spent = model, [], 0.0
    scales = np.zeros(0)
    for it in range(n_iter):
        scales = noise_scales(
            current,
            step,
            max_length=max_length,
            neighbouring=neighbouring,
            feature_bound=feature_bound,
            split=split,
        )
        vectors = _owner_vectors(current, owners, max_length, long_sequences, feature_bound)
        accountant.spend(step, f"federated iteration {it + 1}/{n_iter}")
        spent += step
        noisy = aggregate(vectors, scales)
        current = counts_to_model(
            current,
            unflatten_counts(current, noisy),
            min_prob=min_prob,
            feature_bound=feature_bound,
            min_covar=min_covar,
        )
        models.append(current)
    return FederatedResult(
        model=current,
        epsilon=spent,
        n_owners=len(owners),
        n_iter=n_iter,
        scales=scales,
        models=tuple(models),
        accountant=accountant,
    )
