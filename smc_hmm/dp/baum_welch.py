"""Differentially private Baum-Welch: Laplace noise on the expected counts (paper 000).

Paper 000 (IPSJ 2014), sections 4.1-4.2: the data provider runs EM on its observation
sequences from a public skeleton given by the data miner and releases a model whose
expected counts were perturbed with Laplace noise, Â_kl = A_kl + Lap(L/eps) and
Ê_k(b) = E_k(b) + Lap(L/eps), then normalised (its eqs. (3), (4)). Section 5 adds the
noise either in the last iteration only or in every iteration with the budget split.

**Neighbouring relation.** Data sets X, X' of observation sequences, each of length at
most the declared maximum ``max_length`` = L, are neighbours when X' is X with one
sequence added or removed (``neighbouring="add_remove"``, the paper's |X (+) X'| = 1),
or with one sequence replaced by another (``"substitute"``: every sensitivity doubles).
A sequence longer than L raises :class:`~smc_hmm.errors.SensitivityBoundError`
(``long_sequences="raise"``, the default) or is cut to its first L observations
(``long_sequences="truncate"``, a per-record transformation that keeps the guarantee).

**Records: a public rule, never an error.** A release must end the same way whether or
not any one record is present, so :func:`public_sequences` (what ``smc-hmm release hmm``
applies, :data:`RECORD_RULE`) maps every record by a rule that looks at that record only
and at public values (the skeleton's alphabet M or dimension D, and L): a record that is
not a non-empty sequence of the skeleton's kind -- 1-d integer symbols in 0..M-1, or
(T, D) finite real frames -- is dropped, and a longer one than L is cut to its first L
observations.  Dropping is removal, truncation keeps a record within the declared L, so
the guarantee (add/remove or substitute) is unchanged.  An empty data set is allowed: its
counts are zero, and the release is the noise alone (post-processed).

**Sensitivities (L1, add/remove, for a fixed model of the E-step).** One sequence of
length T <= L contributes nonnegative posteriors with fixed sums: initial counts
gamma_1(k) sum to 1, transition counts xi_t(k, l) sum to T - 1 <= L - 1, emission counts
gamma_t(k)[x_t = b] sum to T <= L. Hence Delta(initial) = 1, Delta(transitions) = L - 1,
Delta(emissions) = L (the paper bounds both A and E by L). Entries that are zero in the
public skeleton (structural zeros: a_kl = 0, b_k(b) = 0, pi_k = 0) are zero for every
data set; they get no noise and stay zero.

For Gaussian emissions, every frame is first clipped to the L2 ball of radius R
(``feature_bound``), x <- x min(1, R/||x||_2). With sum_k gamma_t(k) = 1 per frame:
occupancy n_k = sum_t gamma_t(k) has Delta_1 = L; the means' sums s_k = sum_t gamma_t(k) x_t
have Delta_1 <= sum_t sum_k gamma_t(k) ||x_t||_1 <= L sqrt(D) R (and Delta_2 <= L R by the
triangle inequality on the stacked (N, D) matrix); the second moments S_k = sum_t
gamma_t(k) x_t x_t^T have, for diagonal covariances (the vector of x_i^2),
Delta_1 <= sum_t ||x_t||_2^2 <= L R^2 (Delta_2 <= L R^2), and for full covariances, released as
the upper triangle with the diagonal, Delta_1 <= L sum_{i<=j} |x_i x_j| =
L (||x||_1^2 + ||x||_2^2)/2 <= L (D + 1) R^2 / 2 (Delta_2 <= L R^2). The Laplace
mechanism uses the L1 values.

**Budget.** One noisy E-step with budget eps releases its components sequentially: eps is
split among them (``split``: weights, default proportional to the sensitivities, which
gives every count the same Laplace scale sum_c Delta_c / eps, i.e. (1 + (L - 1) + L)/eps =
2L/eps for discrete HMMs). Each count c gets Lap(Delta_c / eps_c). Note that the paper's
Lap(L/eps) on A and on E is eps-DP for each of them alone and 2 eps together (plus the
initial counts, which it does not perturb). ``mode="every"`` runs ``n_iter`` noisy
iterations with eps / ``n_iter`` each (a fixed, data-independent number of iterations);
``mode="last"`` runs plain Baum-Welch to convergence (the paper's threshold 1e-5 and at
most 80 iterations) and adds noise with the whole eps in one final iteration. Only
"every" is eps-DP on the data set: in "last" the final E-step runs on a model already
fitted to the data without noise, so the counts of every sequence depend on all others
and the sensitivity L holds only if that model is taken as public. ``mode="last"``
reproduces the paper's first experiment and reports ``formal_guarantee = False``.

**Impossible sequences.** A public skeleton with structural zeros (for instance an
emission b_k(b) = 0 for every state k, a symbol the model forbids) gives some sequences
probability zero; their posteriors are undefined. Refusing the data set would make the
outcome depend on one record (an error that names the sequence reveals that it is
present), so every DP path drops such a sequence: it contributes no counts, exactly as
if it were absent. This is a per-record map (a record becomes its counts, or nothing)
within the sensitivities above, so the guarantee is unchanged, and the run ends the same
way whether the sequence is there or not; how many sequences were dropped is not
released. With the default ``min_prob`` > 0 the support never changes during a run
(post-processing floors every allowed entry), so "impossible" means impossible under the
public skeleton; with ``min_prob = 0`` a noisy iteration may zero an entry, and the
sequences that this already released model rules out are dropped the same way.
Gaussian emissions give every (clipped) frame a positive density and every state of a
row-stochastic transition matrix has a successor, so no Gaussian sequence is impossible.
The plain :func:`discrete_expected_counts` still raises by default (it is not private).

**Samplers.** The Laplace noise uses the hardened default of
:func:`smc_hmm.dp.mechanisms.default_sampler` (OpenDP) unless ``sampler="float"`` is asked
for, or ``rng`` is an INSECURE seeded stream (reproducible experiments), which OpenDP
cannot honour and which therefore uses the float sampler.

**Post-processing** (free under DP): noisy counts are clamped at 0 on allowed entries,
rows normalised (an all-zero row becomes uniform over allowed entries), probabilities
floored at ``min_prob`` and renormalised. Gaussian occupancies are floored at one frame,
means clipped to the R-ball, variances (eigenvalues for full covariances) clipped to
[``min_covar``, R^2].

The noise itself is testable without hooks: :func:`dp_expected_counts` returns the noisy
counts and :func:`discrete_expected_counts` / :func:`~smc_hmm.hmm.expected_counts` the
clean ones of the same model; their difference is the noise.

See ``docs/dp-layer.md`` ("DP Baum-Welch") and ``examples/dp_baum_welch.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.dp.accountant import PrivacyAccountant
from smc_hmm.dp.mechanisms import LaplaceMechanism, LaplaceSampler, Release
from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import (
    InvalidInputError,
    PrivacyBudgetError,
    PrivacyParameterError,
    SensitivityBoundError,
)
from smc_hmm.hmm.models import HMM, DiscreteHMM, GaussianHMM
from smc_hmm.hmm.training import (
    DEFAULT_MIN_COVAR,
    BaumWelchResult,
    ExpectedCounts,
    baum_welch,
    expected_counts,
)

RECORD_RULE = (
    "a record that is not a non-empty sequence of the skeleton's kind (1-d integer symbols "
    "in 0..M-1, or a (T, D) array of finite real frames) is dropped; one longer than L is "
    "cut to its first L observations; frames are clipped to the R-ball; a sequence the "
    "skeleton gives probability zero adds no counts; an empty data set releases the noise "
    "alone; no record makes the release fail, and what was dropped or cut is not released"
)
"""The public per-record rule of ``smc-hmm release hmm`` (module docstring), written into
the release's privacy metadata."""

Neighbouring = Literal["add_remove", "substitute"]
LongSequences = Literal["raise", "truncate"]
Mode = Literal["every", "last"]

DEFAULT_MIN_PROB = 1e-6
"""Floor of every allowed probability after post-processing."""

PAPER_TOL = 1e-5
"""The paper's Delta-threshold on the log-likelihood (section 5)."""

PAPER_MAX_ITER = 80
"""The paper's maximum number of Baum-Welch iterations (section 5)."""

DISCRETE_COMPONENTS = ("initial", "transitions", "emissions")
GAUSSIAN_COMPONENTS = ("initial", "transitions", "occupancy", "obs_sum", "obs_sq_sum")
NEIGHBOURINGS = ("add_remove", "substitute")


@dataclass(frozen=True, eq=False)
class NoisyCounts:
    """One DP E-step.

    Attributes:
        counts: the noisy expected counts (raw: entries may be negative);
            ``log_likelihood`` is NaN because it is not released.
        releases: the Laplace release of each perturbed component.
        epsilon: the privacy spent (sum over components).
        sensitivities, epsilons, scales: per component: Delta_c, eps_c and Delta_c/eps_c.
    """

    counts: ExpectedCounts
    releases: Mapping[str, Release]
    epsilon: float
    sensitivities: Mapping[str, float]
    epsilons: Mapping[str, float]
    scales: Mapping[str, float]


@dataclass(frozen=True, eq=False)
class DPBaumWelchResult:
    """Outcome of :func:`dp_baum_welch` and :func:`dp_em_step`.

    Attributes:
        model: the released (post-processed) model.
        epsilon: total privacy spent by this run (the sum over its releases; the
            accountant's ``spent`` also counts whatever it held before).
        mode: ``"every"``, ``"last"`` or ``"step"`` (one DP iteration).
        n_noisy_iterations: number of E-steps that received noise.
        max_length: the declared L.
        neighbouring: the neighbouring relation of the guarantee.
        sensitivities, epsilons, scales: per component, per noisy iteration.
        formal_guarantee: True if the release is epsilon-DP on the data set under
            ``neighbouring`` (False for ``mode="last"``, see the module docstring).
        mechanism: a one-line description of what ran.
        releases: every Laplace release, in order.
        accountant: the accountant charged with them.
    """

    model: HMM
    epsilon: float
    mode: str
    n_noisy_iterations: int
    max_length: int
    neighbouring: str
    sensitivities: Mapping[str, float]
    epsilons: Mapping[str, float]
    scales: Mapping[str, float]
    formal_guarantee: bool
    mechanism: str
    releases: tuple[Release, ...] = field(repr=False)
    accountant: PrivacyAccountant = field(repr=False)


# --- parameters ------------------------------------------------------------------------


def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PrivacyParameterError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def _check_length(max_length: object) -> int:
    return _check_count(max_length, "max_length")


def check_iterations(n_iter: object) -> int:
    """``n_iter`` as an int, or :class:`PrivacyParameterError` unless it is an int >= 1."""
    return _check_count(n_iter, "n_iter")


def _check_choice(value: object, name: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise PrivacyParameterError(f"{name} must be one of {allowed}, got {value!r}")
    return str(value)


def _check_model(model: object) -> HMM:
    if not isinstance(model, (DiscreteHMM, GaussianHMM)):
        raise InvalidInputError(
            f"model must be a DiscreteHMM or GaussianHMM, got {type(model).__name__}"
        )
    return model


def _check_bound(model: HMM, feature_bound: object) -> float | None:
    if isinstance(model, DiscreteHMM):
        if feature_bound is not None:
            raise PrivacyParameterError("feature_bound applies to Gaussian models only")
        return None
    if feature_bound is None:
        raise PrivacyParameterError(
            "Gaussian DP Baum-Welch needs feature_bound R (frames are clipped to ||x||_2 <= R)"
        )
    return check_epsilon(feature_bound, "feature_bound")


def count_sensitivities(
    model: HMM,
    max_length: int,
    *,
    neighbouring: Neighbouring = "add_remove",
    feature_bound: float | None = None,
) -> dict[str, float]:
    """L1 sensitivity of each count component (see the module docstring)."""
    model = _check_model(model)
    length = _check_length(max_length)
    relation = _check_choice(neighbouring, "neighbouring", NEIGHBOURINGS)
    factor = 2.0 if relation == "substitute" else 1.0
    bound = _check_bound(model, feature_bound)
    sensitivities = {"initial": 1.0, "transitions": float(length - 1)}
    if isinstance(model, DiscreteHMM):
        sensitivities["emissions"] = float(length)
    else:
        assert bound is not None
        n_features = model.n_features
        sensitivities["occupancy"] = float(length)
        sensitivities["obs_sum"] = length * math.sqrt(n_features) * bound
        if model.covariance_type == "diag":
            sensitivities["obs_sq_sum"] = length * bound**2
        else:
            sensitivities["obs_sq_sum"] = length * (n_features + 1) * bound**2 / 2
    return {name: factor * value for name, value in sensitivities.items()}


def split_budget(
    epsilon: float, sensitivities: Mapping[str, float], split: Mapping[str, float] | None = None
) -> dict[str, float]:
    """eps_c for each component: ``split`` weights (default: the sensitivities), normalised
    over the components with positive sensitivity; zero-sensitivity components get 0."""
    epsilon = check_epsilon(epsilon)
    active = [name for name, value in sensitivities.items() if value > 0]
    if split is None:
        weights = {name: sensitivities[name] for name in active}
    else:
        unknown = set(split) - set(sensitivities)
        if unknown:
            raise PrivacyParameterError(f"split names unknown components {sorted(unknown)}")
        weights = {}
        for name in active:
            weight = split.get(name, 0.0)
            if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight > 0):
                raise PrivacyParameterError(
                    f"split weight of {name!r} must be finite and > 0 (it has sensitivity "
                    f"{sensitivities[name]}), got {weight!r}"
                )
            weights[name] = float(weight)
    total = math.fsum(weights.values())
    return within_budget(
        epsilon,
        {
            name: (epsilon * weights[name] / total if name in weights else 0.0)
            for name in sensitivities
        },
    )


def within_budget(budget: float, shares: Mapping[str, float], times: int = 1) -> dict[str, float]:
    """``shares`` of ``budget`` whose exact sum, ``times`` over, does not exceed it.

    Each share was rounded to a float, so their sum could come out one unit in the last
    place above the budget (eps 1 over 7 iterations reported 1.0000000000000002): the
    largest share is lowered, one float at a time, until the exact sum (fractions, not
    floats) is within the budget, so the guarantee stated is the budget asked for."""
    from fractions import Fraction

    out = dict(shares)
    while times * sum(Fraction(v) for v in out.values()) > Fraction(budget):
        name = max(out, key=out.get)
        out[name] = math.nextafter(out[name], 0.0)
    return out


# --- sequences -------------------------------------------------------------------------


def _check_sequences(
    sequences: Sequence[ArrayLike], allow_empty: bool = False
) -> Sequence[ArrayLike]:
    if isinstance(sequences, np.ndarray) or not isinstance(sequences, (list, tuple)):
        raise InvalidInputError("sequences must be a list or tuple of observation arrays")
    if not sequences and not allow_empty:
        raise InvalidInputError("at least one sequence is required")
    return sequences


def _public_record(model: HMM, record: object, length: int) -> np.ndarray | None:
    """One record under :data:`RECORD_RULE`: the sequence cut to ``length``, or None."""
    if record is None:
        return None
    try:
        values = np.asarray(record)
    except (TypeError, ValueError):  # ragged nested lists
        return None
    if values.ndim == 0 or values.shape[0] == 0:
        return None
    if isinstance(model, DiscreteHMM):
        if values.ndim != 1 or values.dtype.kind not in "iu":
            return None
        if np.any(values < 0) or np.any(values >= model.n_symbols):
            return None
        return values[:length].astype(np.int64)
    if values.ndim != 2 or values.shape[1] != model.n_features or values.dtype.kind not in "iuf":
        return None
    values = values.astype(np.float64)
    if not np.all(np.isfinite(values)):
        return None
    return values[:length]


def public_sequences(model: HMM, records: Sequence[object], max_length: int) -> list[np.ndarray]:
    """The records kept by the public rule (:data:`RECORD_RULE`), each cut to at most
    ``max_length`` observations; never raises on a record.

    A record is kept if it is a non-empty sequence of ``model``'s kind: a 1-d integer
    array of symbols in 0..M-1 (DiscreteHMM) or a (T, D) real array of finite frames with
    D = ``model.n_features`` (GaussianHMM); anything else, None included, is dropped.  The
    rule looks at one record and at public values only, so the guarantee of the release
    (which then clips frames and drops impossible sequences) is unchanged.
    """
    model = _check_model(model)
    length = _check_length(max_length)
    if isinstance(records, np.ndarray) or not isinstance(records, (list, tuple)):
        raise InvalidInputError("records must be a list or tuple")
    kept = (_public_record(model, record, length) for record in records)
    return [values for values in kept if values is not None]


def zero_counts(model: HMM) -> ExpectedCounts:
    """The expected counts of an empty data set: all zero (also the layout of the
    federated release's count vector, :mod:`smc_hmm.dp.federated`)."""
    n = model.n_states
    if isinstance(model, DiscreteHMM):
        return ExpectedCounts(
            initial=np.zeros(n),
            transitions=np.zeros((n, n)),
            occupancy=np.zeros(n),
            log_likelihood=0.0,
            emissions=np.zeros((n, model.n_symbols)),
        )
    d = model.n_features
    square = (n, d) if model.covariance_type == "diag" else (n, d, d)
    return ExpectedCounts(
        initial=np.zeros(n),
        transitions=np.zeros((n, n)),
        occupancy=np.zeros(n),
        log_likelihood=0.0,
        obs_sum=np.zeros((n, d)),
        obs_sq_sum=np.zeros(square),
    )


def prepare_sequences(
    model: HMM,
    sequences: Sequence[ArrayLike],
    max_length: int,
    *,
    long_sequences: LongSequences = "raise",
    feature_bound: float | None = None,
) -> list[np.ndarray]:
    """Validate, bound the length (raise or truncate) and clip Gaussian frames to the R-ball
    (an empty list gives an empty list: the data set without records)."""
    model = _check_model(model)
    length = _check_length(max_length)
    policy = _check_choice(long_sequences, "long_sequences", ("raise", "truncate"))
    bound = _check_bound(model, feature_bound)
    prepared = []
    for index, obs in enumerate(_check_sequences(sequences, allow_empty=True)):
        values = model.check_observations(obs)
        if values.shape[0] > length:
            if policy == "raise":
                raise SensitivityBoundError(
                    f"sequence {index} has length {values.shape[0]} > max_length = {length}"
                )
            values = values[:length]
        if bound is not None:
            norms = np.linalg.norm(values, axis=1, keepdims=True)
            values = values * np.minimum(1.0, bound / np.maximum(norms, np.finfo(float).tiny))
        prepared.append(values)
    return prepared


# --- fast E-step for discrete models (not private) ---------------------------------------


def discrete_expected_counts(
    model: DiscreteHMM, sequences: Sequence[ArrayLike], *, skip_impossible: bool = False
) -> ExpectedCounts:
    """The E-step of :func:`smc_hmm.hmm.expected_counts` for a DiscreteHMM, vectorised over
    sequences of equal length (scaled forward-backward, Rabiner 1989, section V.A).

    Same result as ``expected_counts`` (the tests compare them); much faster for many
    short sequences. Not private: it computes the clean counts. A sequence with
    probability zero under ``model`` raises :class:`~smc_hmm.errors.InvalidInputError`,
    or, with ``skip_impossible=True`` (the DP paths), contributes no counts and no
    log-likelihood, exactly as if it were absent (module docstring, "Impossible sequences").
    """
    if not isinstance(model, DiscreteHMM):
        raise InvalidInputError(f"expected a DiscreteHMM, got {type(model).__name__}")
    values = [model.check_observations(obs) for obs in _check_sequences(sequences)]
    n_states, n_symbols = model.n_states, model.n_symbols
    initial = np.zeros(n_states)
    transitions = np.zeros((n_states, n_states))
    occupancy = np.zeros(n_states)
    emissions = np.zeros((n_symbols, n_states))  # transposed for np.add.at
    log_likelihood = 0.0
    lengths = np.array([v.shape[0] for v in values])
    for length in np.unique(lengths):
        members = np.flatnonzero(lengths == length)
        batch = np.stack([values[i] for i in members])
        gamma, xi_sum, log_probs = _batch_posteriors(model, batch, members, skip_impossible)
        initial += gamma[:, 0].sum(axis=0)
        transitions += xi_sum
        occupancy += gamma.sum(axis=(0, 1))
        np.add.at(emissions, batch.ravel(), gamma.reshape(-1, n_states))
        log_likelihood += float(log_probs[np.isfinite(log_probs)].sum())
    return ExpectedCounts(
        initial=initial,
        transitions=transitions,
        occupancy=occupancy,
        log_likelihood=log_likelihood,
        emissions=emissions.T.copy(),
    )


def _batch_posteriors(
    model: DiscreteHMM, batch: np.ndarray, members: np.ndarray, skip_impossible: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """gamma (B, T, N), summed xi (N, N) and log P (B,) of equal-length sequences; an
    impossible sequence raises, or (``skip_impossible``) gets gamma = 0, no xi and
    log P = -inf."""
    transmat = model.transmat
    emission = model.emissionprob[:, batch].transpose(1, 2, 0)  # (B, T, N)
    n_batch, length, n_states = emission.shape
    alpha = np.empty((n_batch, length, n_states))
    scale = np.empty((n_batch, length))
    impossible = np.zeros(n_batch, dtype=bool)
    current = model.startprob * emission[:, 0]
    for t in range(length):
        if t > 0:
            current = (alpha[:, t - 1] @ transmat) * emission[:, t]
        scale[:, t] = current.sum(axis=1)
        zero = scale[:, t] <= 0
        if np.any(zero):
            if not skip_impossible:
                index = int(members[np.flatnonzero(zero)[0]])
                raise InvalidInputError(f"sequence {index} has probability zero under the model")
            impossible |= zero
            scale[zero, t] = 1.0  # alpha stays 0 from here on; the rows are dropped below
        alpha[:, t] = current / scale[:, t, None]
    alpha[impossible] = 0.0
    beta = np.empty_like(alpha)
    beta[:, -1] = 1.0
    weighted = np.empty_like(alpha)  # b_j(o_{t}) beta_t(j) / c_t, used by beta and xi
    for t in range(length - 1, 0, -1):
        weighted[:, t] = emission[:, t] * beta[:, t] / scale[:, t, None]
        beta[:, t - 1] = weighted[:, t] @ transmat.T
    gamma = alpha * beta
    xi_sum = np.einsum("bti,btj->ij", alpha[:, :-1], weighted[:, 1:]) * transmat
    log_probs = np.where(impossible, -np.inf, np.log(scale).sum(axis=1))
    return gamma, xi_sum, log_probs


def train_discrete(
    model: DiscreteHMM,
    sequences: Sequence[ArrayLike],
    *,
    n_iter: int = PAPER_MAX_ITER,
    tol: float = PAPER_TOL,
    skip_impossible: bool = False,
) -> BaumWelchResult:
    """Plain (NOT private) Baum-Welch with :func:`discrete_expected_counts`.

    Same stopping rule as :func:`smc_hmm.hmm.baum_welch`; the defaults are the paper's
    (threshold 1e-5, at most 80 iterations). Used by ``mode="last"`` (with
    ``skip_impossible=True``) and as the non-private reference of the experiment.
    """
    e_step = partial(discrete_expected_counts, skip_impossible=skip_impossible)
    return baum_welch(model, sequences, n_iter=n_iter, tol=tol, e_step=e_step)


# --- the DP E-step ---------------------------------------------------------------------


def data_components(model: HMM, counts: ExpectedCounts) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (clean array, mask of the entries that depend on the data)."""
    parts = {
        "initial": (counts.initial, model.startprob > 0),
        "transitions": (counts.transitions, model.transmat > 0),
    }
    if isinstance(model, DiscreteHMM):
        assert counts.emissions is not None
        parts["emissions"] = (counts.emissions, model.emissionprob > 0)
        return parts
    assert counts.obs_sum is not None and counts.obs_sq_sum is not None
    parts["occupancy"] = (counts.occupancy, np.ones(model.n_states, dtype=bool))
    parts["obs_sum"] = (counts.obs_sum, np.ones(counts.obs_sum.shape, dtype=bool))
    if model.covariance_type == "diag":
        sq_mask = np.ones(counts.obs_sq_sum.shape, dtype=bool)
    else:  # upper triangle with the diagonal; the lower one is mirrored afterwards
        upper = np.triu(np.ones((model.n_features, model.n_features), dtype=bool))
        sq_mask = np.broadcast_to(upper, counts.obs_sq_sum.shape).copy()
    parts["obs_sq_sum"] = (counts.obs_sq_sum, sq_mask)
    return parts


def counts_from_parts(model: HMM, parts: Mapping[str, np.ndarray]) -> ExpectedCounts:
    """Expected counts from their released parts (:func:`data_components`' names): a full
    covariance's upper triangle of second moments mirrored, and a discrete model's
    occupancy post-processed from its emission counts.  Shared by the central and the
    federated DP Baum-Welch (:mod:`smc_hmm.dp.federated`)."""
    parts = dict(parts)
    full = isinstance(model, GaussianHMM) and model.covariance_type == "full"
    if full and "obs_sq_sum" in parts:
        upper = parts["obs_sq_sum"]
        parts["obs_sq_sum"] = np.triu(upper) + np.swapaxes(np.triu(upper, 1), 1, 2)
    return ExpectedCounts(
        initial=parts["initial"],
        transitions=parts["transitions"],
        occupancy=parts["occupancy"] if "occupancy" in parts else parts["emissions"].sum(axis=1),
        log_likelihood=math.nan,
        emissions=parts.get("emissions"),
        obs_sum=parts.get("obs_sum"),
        obs_sq_sum=parts.get("obs_sq_sum"),
    )


def dp_expected_counts(
    model: HMM,
    sequences: Sequence[ArrayLike],
    epsilon: float,
    *,
    max_length: int,
    rng: DPRandom | None = None,
    sampler: LaplaceSampler | None = None,
    split: Mapping[str, float] | None = None,
    neighbouring: Neighbouring = "add_remove",
    long_sequences: LongSequences = "raise",
    feature_bound: float | None = None,
    accountant: PrivacyAccountant | None = None,
    label: str = "",
) -> NoisyCounts:
    """One eps-DP E-step: the expected counts of ``model`` on ``sequences`` plus Laplace
    noise Lap(Delta_c / eps_c) on every data-dependent entry of each component c.

    ``model`` must not depend on ``sequences`` (a public skeleton or an earlier DP
    release) for the guarantee to hold. ``sampler`` is ``None`` (the default: OpenDP, see
    :func:`~smc_hmm.dp.mechanisms.default_sampler`), ``"opendp"`` or ``"float"`` (not
    hardened; warned); the snapping sampler needs a clamp bound on counts and is not
    offered here. The components are charged to ``accountant`` (if given) before any
    noise is drawn.
    """
    model = _check_model(model)
    epsilon = check_epsilon(epsilon)
    if sampler not in (None, "float", "opendp"):
        raise PrivacyParameterError(f"sampler must be 'opendp' or 'float', got {sampler!r}")
    sensitivities = count_sensitivities(
        model, max_length, neighbouring=neighbouring, feature_bound=feature_bound
    )
    epsilons = split_budget(epsilon, sensitivities, split)
    prepared = prepare_sequences(
        model,
        sequences,
        max_length,
        long_sequences=long_sequences,
        feature_bound=feature_bound,
    )
    clean = _clean_counts(model, prepared)
    noisy, releases, scales = _noisy_components(
        model,
        clean,
        sensitivities,
        epsilons,
        sampler=sampler,
        rng=rng if rng is not None else DPRandom.system(),
        accountant=accountant,
        label=label,
    )
    return NoisyCounts(
        counts=counts_from_parts(model, noisy),
        releases=releases,
        epsilon=math.fsum(r.epsilon for r in releases.values()),
        sensitivities=sensitivities,
        epsilons=epsilons,
        scales=scales,
    )


def _clean_counts(model: HMM, prepared: list[np.ndarray]) -> ExpectedCounts:
    """The expected counts of ``model`` on the prepared sequences, without noise."""
    if not prepared:  # an empty data set: zero counts, the release is the noise alone
        return zero_counts(model)
    if isinstance(model, DiscreteHMM):
        return discrete_expected_counts(model, prepared, skip_impossible=True)
    return expected_counts(model, prepared)


def _noisy_components(
    model: HMM,
    clean: ExpectedCounts,
    sensitivities: Mapping[str, float],
    epsilons: Mapping[str, float],
    *,
    sampler: LaplaceSampler | None,
    rng: DPRandom,
    accountant: PrivacyAccountant | None,
    label: str,
) -> tuple[dict[str, np.ndarray], dict[str, Release], dict[str, float]]:
    """Each data component of ``clean`` with Laplace noise on its data-dependent entries
    (structural zeros stay zero); the releases drawn and the noise scale of each."""
    noisy: dict[str, np.ndarray] = {}
    releases: dict[str, Release] = {}
    scales: dict[str, float] = {}
    for name, (values, mask) in data_components(model, clean).items():
        out = np.where(mask, values, 0.0)
        if sensitivities[name] > 0 and np.any(mask):
            mechanism = LaplaceMechanism(
                epsilons[name], sensitivities[name], sampler=sampler, rng=rng
            )
            release = mechanism.release(values[mask], accountant=accountant, label=label + name)
            out[mask] = release.value
            releases[name] = release
            scales[name] = mechanism.scale
        else:
            scales[name] = 0.0
        noisy[name] = out
    return noisy, releases, scales


# --- post-processing -------------------------------------------------------------------


def _stochastic_rows(noisy: np.ndarray, mask: np.ndarray, min_prob: float) -> np.ndarray:
    """Clamp at 0 on allowed entries, normalise rows, floor at min_prob, renormalise."""
    noisy = np.atleast_2d(noisy)
    mask = np.atleast_2d(mask)
    clamped = np.where(mask, np.maximum(noisy, 0.0), 0.0)
    sums = clamped.sum(axis=1, keepdims=True)
    allowed = mask.sum(axis=1, keepdims=True)
    uniform = mask / np.maximum(allowed, 1)
    rows = np.where(sums > 0, clamped / np.where(sums > 0, sums, 1.0), uniform)
    rows = np.where(mask, np.maximum(rows, min_prob), 0.0)
    return rows / rows.sum(axis=1, keepdims=True)


def counts_to_model(
    model: HMM,
    counts: ExpectedCounts,
    *,
    min_prob: float = DEFAULT_MIN_PROB,
    feature_bound: float | None = None,
    min_covar: float = DEFAULT_MIN_COVAR,
) -> HMM:
    """The post-processed M-step: a valid model from noisy counts (module docstring).

    Structural zeros of ``model`` stay zero; ``feature_bound`` (Gaussian models) clips
    the means to the R-ball and the variances to at most R^2.
    """
    model = _check_model(model)
    if not (isinstance(min_prob, float | int) and 0 <= min_prob < 1):
        raise PrivacyParameterError(f"min_prob must be in [0, 1), got {min_prob!r}")
    startprob = _stochastic_rows(counts.initial, model.startprob > 0, min_prob)[0]
    transmat = _stochastic_rows(counts.transitions, model.transmat > 0, min_prob)
    if isinstance(model, DiscreteHMM):
        if counts.emissions is None:
            raise InvalidInputError("counts.emissions is required for a DiscreteHMM")
        emissionprob = _stochastic_rows(counts.emissions, model.emissionprob > 0, min_prob)
        return DiscreteHMM(startprob, transmat, emissionprob)
    bound = _check_bound(model, feature_bound)
    assert bound is not None and counts.obs_sum is not None and counts.obs_sq_sum is not None
    occupancy = np.maximum(counts.occupancy, 1.0)  # at least one frame's worth
    means = counts.obs_sum / occupancy[:, None]
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    means = means * np.minimum(1.0, bound / np.maximum(norms, np.finfo(float).tiny))
    top = max(bound**2, min_covar)
    if model.covariance_type == "diag":
        covars = np.clip(counts.obs_sq_sum / occupancy[:, None] - means**2, min_covar, top)
    else:
        second = counts.obs_sq_sum / occupancy[:, None, None]
        raw = second - np.einsum("ki,kj->kij", means, means)
        raw = 0.5 * (raw + np.swapaxes(raw, 1, 2))
        eigenvalues, eigenvectors = np.linalg.eigh(raw)
        clipped = np.clip(eigenvalues, min_covar, top)
        covars = np.einsum("kij,kj,klj->kil", eigenvectors, clipped, eigenvectors)
        covars = 0.5 * (covars + np.swapaxes(covars, 1, 2))
    return GaussianHMM(startprob, transmat, means, covars, model.covariance_type)


# --- drivers -----------------------------------------------------------------------------


def _describe(
    releases: Sequence[Release], sensitivities: Mapping[str, float], neighbouring: str
) -> str:
    sampler = "/".join(sorted({r.sampler for r in releases})) or "no"
    parts = ", ".join(f"{name} {value:g}" for name, value in sensitivities.items())
    return (
        f"Laplace ({sampler} sampler) on expected counts; L1 sensitivities ({neighbouring}): "
        f"{parts}"
    )


def reserve_budget(accountant: PrivacyAccountant | None, epsilon: float) -> PrivacyAccountant:
    """The accountant to charge; refuses up front if the whole run cannot fit, so a run
    is never cut short half-way with part of the budget spent."""
    if accountant is None:
        return PrivacyAccountant(epsilon)
    if not accountant.can_spend(epsilon):
        raise PrivacyBudgetError(
            f"DP Baum-Welch needs epsilon = {epsilon:.6g} but the accountant has "
            f"{accountant.remaining:.6g} left of {accountant.total:.6g}"
        )
    return accountant


def dp_baum_welch(
    model: HMM,
    sequences: Sequence[ArrayLike],
    epsilon: float,
    *,
    max_length: int,
    mode: Mode = "every",
    n_iter: int = 10,
    rng: DPRandom | None = None,
    sampler: LaplaceSampler | None = None,
    split: Mapping[str, float] | None = None,
    neighbouring: Neighbouring = "add_remove",
    long_sequences: LongSequences = "raise",
    feature_bound: float | None = None,
    min_prob: float = DEFAULT_MIN_PROB,
    min_covar: float = DEFAULT_MIN_COVAR,
    accountant: PrivacyAccountant | None = None,
    plain_iter: int = PAPER_MAX_ITER,
    plain_tol: float = PAPER_TOL,
) -> DPBaumWelchResult:
    """DP Baum-Welch from the public skeleton ``model`` (module docstring).

    ``mode="every"``: ``n_iter`` noisy iterations with ``epsilon / n_iter`` each (eps-DP).
    ``mode="last"``: plain EM (``plain_iter``, ``plain_tol``) then one noisy iteration
    with the whole ``epsilon`` (the paper's first experiment; ``formal_guarantee`` False).
    Everything is charged to ``accountant`` (default: a new one holding ``epsilon``).
    """
    model = _check_model(model)
    epsilon = check_epsilon(epsilon)
    mode = _check_choice(mode, "mode", ("every", "last"))
    n_iter = check_iterations(n_iter)
    accountant = reserve_budget(accountant, epsilon)
    options = _estep_options(
        max_length, sampler, split, neighbouring, long_sequences, feature_bound
    )
    start, steps, step_epsilon = _schedule(
        model, sequences, epsilon, mode, n_iter, options, plain_iter, plain_tol, min_covar
    )
    current, noisy, releases = _noisy_iterations(
        start, sequences, steps, step_epsilon, rng, accountant, options, min_prob, min_covar
    )
    return _result(
        current,
        noisy,
        releases,
        mode=mode,
        steps=steps,
        max_length=max_length,
        neighbouring=neighbouring,
        formal_guarantee=mode == "every",
        detail=_mode_detail(mode, steps, step_epsilon),
        accountant=accountant,
    )


def _mode_detail(mode: str, steps: int, step_epsilon: float) -> str:
    """What the mechanism description adds for ``mode``."""
    if mode == "every":
        return f"; mode every, {steps} noisy iteration(s) of epsilon {step_epsilon:g}"
    return (
        "; mode last (NOT DP, no guarantee): plain EM, then one noisy iteration "
        f"whose noise is calibrated to eps {step_epsilon:g}"
    )


def _estep_options(
    max_length: int,
    sampler: LaplaceSampler | None,
    split: Mapping[str, float] | None,
    neighbouring: Neighbouring,
    long_sequences: LongSequences,
    feature_bound: float | None,
) -> dict:
    """The keyword arguments every noisy E-step (:func:`dp_expected_counts`) of a run takes."""
    return {
        "max_length": max_length,
        "sampler": sampler,
        "split": split,
        "neighbouring": neighbouring,
        "long_sequences": long_sequences,
        "feature_bound": feature_bound,
    }


def _schedule(
    model: HMM,
    sequences,
    epsilon: float,
    mode: str,
    n_iter: int,
    options: Mapping,
    plain_iter: int,
    plain_tol: float,
    min_covar,
) -> tuple[HMM, int, float]:
    """Where the noisy iterations start, how many there are and the epsilon of each:
    mode ``last`` starts from plain EM with one iteration of the whole ``epsilon``,
    mode ``every`` from ``model`` with ``n_iter`` iterations sharing it."""
    if mode == "last":
        start = _plain_em(model, sequences, options, plain_iter, plain_tol, min_covar)
        return start, 1, epsilon
    return model, n_iter, within_budget(epsilon, {"s": epsilon / n_iter}, n_iter)["s"]


def _plain_em(model: HMM, sequences, options: Mapping, n_iter: int, tol: float, min_covar):
    """Mode ``last``'s start (paper 000's first experiment): plain EM on the data, no
    noise -- the model it returns depends on the data, so no guarantee follows."""
    prepared = prepare_sequences(
        model,
        sequences,
        options["max_length"],
        long_sequences=options["long_sequences"],
        feature_bound=options["feature_bound"],
    )
    if not prepared:  # nothing to fit: plain EM leaves the skeleton as it is
        return model
    if isinstance(model, DiscreteHMM):
        return train_discrete(model, prepared, n_iter=n_iter, tol=tol, skip_impossible=True).model
    return baum_welch(model, prepared, n_iter=n_iter, tol=tol, min_covar=min_covar).model


def _noisy_iterations(
    model: HMM,
    sequences,
    steps: int,
    step_epsilon: float,
    rng: DPRandom | None,
    accountant: PrivacyAccountant,
    options: Mapping,
    min_prob: float,
    min_covar: float,
) -> tuple[HMM, NoisyCounts, list[Release]]:
    """``steps`` DP EM iterations of ``step_epsilon`` each: noisy expected counts
    (:func:`dp_expected_counts`), then the M-step on them (:func:`counts_to_model`);
    (the last model, the last noisy counts, every release)."""
    rng = rng if rng is not None else DPRandom.system()
    releases: list[Release] = []
    noisy: NoisyCounts | None = None
    for step in range(steps):
        noisy = dp_expected_counts(
            model,
            sequences,
            step_epsilon,
            rng=rng,
            accountant=accountant,
            label=f"iteration {step + 1}/{steps}: ",
            **options,
        )
        releases.extend(noisy.releases.values())
        model = counts_to_model(
            model,
            noisy.counts,
            min_prob=min_prob,
            feature_bound=options["feature_bound"],
            min_covar=min_covar,
        )
    assert noisy is not None
    return model, noisy, releases


def _result(
    model: HMM,
    noisy: NoisyCounts,
    releases: Sequence[Release],
    *,
    mode: str,
    steps: int,
    max_length: int,
    neighbouring: str,
    formal_guarantee: bool,
    detail: str,
    accountant: PrivacyAccountant,
) -> DPBaumWelchResult:
    """The released model with what its noise was (the last iteration's calibration)."""
    return DPBaumWelchResult(
        model=model,
        epsilon=math.fsum(r.epsilon for r in releases),
        mode=mode,
        n_noisy_iterations=steps,
        max_length=_check_length(max_length),
        neighbouring=neighbouring,
        sensitivities=noisy.sensitivities,
        epsilons=noisy.epsilons,
        scales=noisy.scales,
        formal_guarantee=formal_guarantee,
        mechanism=_describe(releases, noisy.sensitivities, neighbouring) + detail,
        releases=tuple(releases),
        accountant=accountant,
    )


def dp_em_step(
    model: HMM,
    sequences: Sequence[ArrayLike],
    epsilon: float,
    *,
    max_length: int,
    rng: DPRandom | None = None,
    sampler: LaplaceSampler | None = None,
    split: Mapping[str, float] | None = None,
    neighbouring: Neighbouring = "add_remove",
    long_sequences: LongSequences = "raise",
    feature_bound: float | None = None,
    min_prob: float = DEFAULT_MIN_PROB,
    min_covar: float = DEFAULT_MIN_COVAR,
    accountant: PrivacyAccountant | None = None,
    formal_guarantee: bool = True,
) -> DPBaumWelchResult:
    """One DP EM iteration from ``model``: :func:`dp_expected_counts` + :func:`counts_to_model`.

    eps-DP when ``model`` does not depend on ``sequences``; pass
    ``formal_guarantee=False`` to record that it does (e.g. the experiment's "last"
    mode, which calls this on a model trained without noise).
    """
    model = _check_model(model)
    epsilon = check_epsilon(epsilon)
    accountant = reserve_budget(accountant, epsilon)
    options = _estep_options(
        max_length, sampler, split, neighbouring, long_sequences, feature_bound
    )
    noisy = dp_expected_counts(model, sequences, epsilon, rng=rng, accountant=accountant, **options)
    released = counts_to_model(
        model, noisy.counts, min_prob=min_prob, feature_bound=feature_bound, min_covar=min_covar
    )
    return _result(
        released,
        noisy,
        tuple(noisy.releases.values()),
        mode="step",
        steps=1,
        max_length=max_length,
        neighbouring=neighbouring,
        formal_guarantee=bool(formal_guarantee),
        detail=f"; one noisy iteration of epsilon {epsilon:g}",
        accountant=accountant,
    )
