"""Differentially private keyword HMMs whose every record has a bounded total contribution.

Thesis 003, section 5.1.1 (final output stage): Bob publishes his keyword HMMs under
differential privacy and Alice recognises her utterances locally. DP Baum-Welch
(:mod:`smc_hmm.dp.baum_welch`, paper 000) bounds each *frame* and pays for L of them per
utterance, in L1, in every iteration: useless below eps ~ 100 on the spoken-digit task.
This module bounds each *utterance* instead and releases few, well-conditioned
statistics with the Gaussian mechanism in zCDP (``docs/dp-keyword-models.md``).

**Data and neighbouring relation.** A labelled data set: for every label (keyword) a
list of utterances, each a (T, D) matrix of raw feature frames (``smc_hmm.features``).
Neighbours differ by adding or removing one utterance of any label. The released object
is the set of all models (one per label) and their feature standardisation.

**Labels and records: public rules, never an error.** The label set is public: the
caller declares it (``labels``; by default the keys of the training mapping, every one
of them declared, even one without utterances), and every declared label gets a model,
whatever the data hold (a label without utterances gets one of pure noise). No record
makes the release fail, so adding or removing one utterance never changes whether it
succeeds nor which labels it releases (:data:`RECORD_RULE`):

- an utterance whose label is not declared is dropped;
- an utterance that is not a finite (T, D) real matrix with T >= 1 and D the pipeline's
  feature dimension is dropped;
- an utterance of 1 <= T < K frames is padded: every frame repeated ceil(K / T) times
  (the same frame averages, and K non-empty segments).

What was dropped or padded is not counted anywhere: only the noisy counts carry the
number of utterances.

**Public inputs** (they depend on no private utterance; the guarantee takes them as
given): the feature extraction, the labels, the design constants of
:class:`KeywordDesign`, the left-to-right skeleton (K states, start in state 0, each
state loops with probability ``self_loop`` or moves on, the last one absorbing) and,
for the private standardisation, a public reference (centre and spread per feature
dimension) that only sets its clipping window: by default the bundled test split,
published with the package and disjoint from the training utterances.

**The release** (one Gaussian mechanism per stage, rho-zCDP each; the stage's share of
the budget; every later stage uses only earlier *released* values, so sequential
composition applies and the rho add up):

0. *standardisation* (``standardisation="dp"``): every utterance's frames are mapped
   into the reference window, u = clip((x - c) / h, -1, 1) per coordinate, and
   contribute one vector, their average of u and of u^2 (2D values) clipped to L2 norm
   ``standardisation_bound`` = B0, plus B0 on a count coordinate. Summed over all
   utterances and released once; the post-processed mean and standard deviation
   (between half and twice the reference spread) become the models' feature pipeline.
   ``standardisation="public"`` takes the public reference itself (no budget);
   ``"bundled"`` takes the pipeline published with the package, fitted on the same
   training frames *without* noise: it is then NOT covered by the guarantee, which says
   so.
1. *state means*: frames standardised with the released pipeline and clipped per
   coordinate to ``coord_clip``; every utterance cut into K equal segments (the flat
   start of the non-private models, ``docs/speech-models.md``, here a public per-record
   rule that looks at no other utterance); its K segment means are stacked into one
   K D vector (K n_mfcc with ``static_means``: the deltas are then derived from the
   released static means, :func:`derived_deltas`) and clipped to L2 norm
   ``record_bound`` = C; with ``count_weight`` w on its count coordinate the vector of
   one utterance has L2 norm <= sqrt(C^2 + w^2) whatever its length, so no length bound
   is needed. Every label has its own block of coordinates (disjoint utterances:
   parallel composition inside one Gaussian release).
2. *variances* (``variances``): ``"unit"`` releases nothing (variance 1, the public
   scale of standardised features); ``"tied"`` releases one D vector shared by every
   state of every label: each utterance's average of (x - mu_{its state})^2 around the
   released means, clipped to ``variance_bound``; ``"state"`` releases one per state
   and label (segment averages stacked, in the label's block).

Transitions are not released: the skeleton's (public). Post-processing (free):
counts floored at one, means clipped to the coordinate box, variances to
[``variance_floor``, ``coord_clip``^2].

**Accounting.** rho_stage = Delta_stage^2 / (2 sigma_stage^2); sigma_stage is chosen so
that the stages' shares of the total rho add up to ``rho_from_epsilon(eps, delta)``
(:mod:`smc_hmm.dp.zcdp`: Canonne-Kamath-Steinke's conversion, OpenDP's); the guarantee
recomputes eps from the rho actually spent and cross-checks it with OpenDP's composition
of the same Gaussian measurements (:func:`smc_hmm.dp.zcdp.opendp_epsilon`).

See ``docs/dp-keyword-models.md`` for the measurements behind these choices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

import numpy as np

from smc_hmm.dp.params import check_delta, check_epsilon
from smc_hmm.dp.random import DPRandom
from smc_hmm.dp.zcdp import (
    GaussianMechanism,
    GaussianRelease,
    ZCDPAccountant,
    epsilon_from_rho,
    opendp_epsilon,
    rho_from_epsilon,
)
from smc_hmm.errors import InvalidInputError, PrivacyParameterError, SamplerUnavailableError
from smc_hmm.features import FeaturePipeline
from smc_hmm.hmm.models import GaussianHMM

__all__ = [
    "FORMAT",
    "RECORD_RULE",
    "KeywordDesign",
    "KeywordRelease",
    "PublicReference",
    "bundled_reference",
    "derived_deltas",
    "left_to_right_skeleton",
    "release_keyword_models",
    "segment_bounds",
    "segment_means",
]

FORMAT = "smc-hmm dp keyword models v1"
"""Tag of the guarantee written beside every release."""

RECORD_RULE = (
    "an utterance of an undeclared label, or one that is not a finite (T, D) matrix with "
    "T >= 1 and D the pipeline's dimension, is dropped; one of 1 <= T < K frames is padded "
    "(every frame repeated ceil(K / T) times); no record makes the release fail, and what "
    "was dropped or padded is not released"
)
"""The public per-record rule (module docstring), written into every guarantee."""

Standardisation = Literal["dp", "public", "bundled"]
Variances = Literal["unit", "tied", "state"]

_SAFETY = 1.0 - 1e-9  # plan slightly below the budget: OpenDP rounds its rho map upwards


@dataclass(frozen=True)
class KeywordDesign:
    """The public design of a release (every value is declared, none comes from data).

    Attributes:
        n_states: K, states of the left-to-right skeleton (and segments per utterance).
        self_loop: the skeleton's a_jj (0.875: eight 10 ms frames per state on average,
            the order of a phone's duration).
        coord_clip: per-coordinate clip of standardised frames, |x_i| <= coord_clip.
        record_bound: C, L2 bound of one utterance's stacked K D segment means.
        count_weight: w, the value one utterance adds to its label's count coordinate
            (a larger w makes the noisy count relatively more exact at the price of a
            larger sensitivity sqrt(C^2 + w^2)).
        standardisation: ``"dp"`` (released with a share of the budget), ``"public"``
            (the public reference's centre and spread: no budget) or ``"bundled"``
            (the published pipeline, outside the guarantee).
        standardisation_share: share of rho for stage 0 (``"dp"`` only).
        standardisation_bound: L2 bound of one utterance's (mean u, mean u^2) vector, and
            its weight on stage 0's count coordinate.
        static_means: release the state means of the first ``n_mfcc`` (static)
            dimensions only and derive the deltas and delta-deltas from them
            (:func:`derived_deltas`): a shorter vector per utterance, a smaller C.
        reference_width: the window half-width h = reference_width x reference spread.
        variances: ``"unit"``, ``"tied"`` or ``"state"`` (module docstring).
        variance_share: share of rho for the variances (not ``"unit"``).
        variance_bound: L2 bound of one utterance's variance statistic.
        variance_floor: smallest released variance (standardised units).
        delta: the delta of the (eps, delta) guarantee.
    """

    n_states: int = 5
    self_loop: float = 0.875
    coord_clip: float = 3.0
    record_bound: float = 6.0
    count_weight: float = 6.0
    standardisation: Standardisation = "dp"
    standardisation_share: float = 0.1
    standardisation_bound: float = 1.5
    reference_width: float = 3.0
    static_means: bool = False
    variances: Variances = "unit"
    variance_share: float = 0.25
    variance_bound: float = 6.0
    variance_floor: float = 0.05
    delta: float = 1e-6

    def __post_init__(self) -> None:
        k = self.n_states
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise PrivacyParameterError(f"n_states must be an int >= 1, got {k!r}")
        if not (isinstance(self.self_loop, (int, float)) and 0.0 < self.self_loop < 1.0):
            raise PrivacyParameterError(f"self_loop must be in (0, 1), got {self.self_loop!r}")
        for name in (
            "coord_clip",
            "record_bound",
            "count_weight",
            "standardisation_bound",
            "reference_width",
            "variance_bound",
            "variance_floor",
        ):
            check_epsilon(getattr(self, name), name)
        if self.standardisation not in ("dp", "public", "bundled"):
            raise PrivacyParameterError(
                f"standardisation must be 'dp', 'public' or 'bundled', got {self.standardisation!r}"
            )
        if self.variances not in ("unit", "tied", "state"):
            raise PrivacyParameterError(
                f"variances must be 'unit', 'tied' or 'state', got {self.variances!r}"
            )
        for name in ("standardisation_share", "variance_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PrivacyParameterError(f"{name} must be a number, got {value!r}")
        if not 0.0 < self.standardisation_share < 1.0 or not 0.0 < self.variance_share < 1.0:
            raise PrivacyParameterError("budget shares must lie in (0, 1)")
        if not isinstance(self.static_means, bool):
            raise PrivacyParameterError(f"static_means must be a bool, got {self.static_means!r}")
        if self.means_share <= 0:
            raise PrivacyParameterError("the shares leave no budget for the state means")
        if self.variance_floor >= self.coord_clip**2:
            raise PrivacyParameterError("variance_floor must be below coord_clip^2")
        check_delta(self.delta)

    @property
    def means_share(self) -> float:
        """Share of rho left for the state means."""
        share = 1.0
        if self.standardisation == "dp":
            share -= self.standardisation_share
        if self.variances != "unit":
            share -= self.variance_share
        return share


@dataclass(frozen=True)
class PublicReference:
    """A public centre and spread per raw feature dimension (stage 0's clipping window)."""

    centre: np.ndarray
    spread: np.ndarray
    source: str


def bundled_reference() -> PublicReference:
    """Mean and standard deviation of the bundled test split's raw frames (public: they
    ship with the package; disjoint from the training utterances)."""
    from smc_hmm.data import load_test_utterances

    frames = np.concatenate([u.features for u in load_test_utterances(standardised=False)])
    return PublicReference(
        frames.mean(axis=0),
        frames.std(axis=0),
        f"bundled test split: {len(frames)} raw frames of 250 public utterances",
    )


def left_to_right_skeleton(
    n_states: int, n_features: int, self_loop: float
) -> tuple[np.ndarray, np.ndarray]:
    """(startprob, transmat) of the public skeleton: start in state 0, a_jj = self_loop,
    a_j,j+1 = 1 - self_loop, the last state absorbing."""
    start = np.eye(n_states)[0]
    trans = np.zeros((n_states, n_states))
    for j in range(n_states - 1):
        trans[j, j], trans[j, j + 1] = self_loop, 1.0 - self_loop
    trans[-1, -1] = 1.0
    return start, trans


def segment_bounds(n_frames: int, n_states: int) -> np.ndarray:
    """Start of each of the K equal segments of an utterance, and its end."""
    return np.arange(n_states + 1) * n_frames // n_states


def segment_means(frames: np.ndarray, n_states: int) -> np.ndarray:
    """(K, D) means of the K equal segments of ``frames`` (the uniform segmentation)."""
    bounds = segment_bounds(len(frames), n_states)
    return np.add.reduceat(frames, bounds[:-1], axis=0) / np.diff(bounds)[:, None]


def _clip_rows(vectors: np.ndarray, bound: float) -> np.ndarray:
    """Scale every row down to L2 norm <= bound."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scale = np.ones_like(norms)
    np.divide(bound, norms, out=scale, where=norms > bound)
    return vectors * scale


@dataclass(frozen=True, eq=False)
class KeywordRelease:
    """The outcome of :func:`release_keyword_models`.

    Attributes:
        models: one diagonal :class:`GaussianHMM` per label, in label order.
        labels: the labels.
        pipeline: the feature pipeline the models expect (released standardisation).
        epsilon, delta: the (eps, delta) guarantee of everything released.
        rho: the zCDP cost spent.
        guarantee: the complete guarantee as a JSON-ready dictionary.
        releases: every Gaussian release, in order.
    """

    models: list[GaussianHMM]
    labels: list[str]
    pipeline: FeaturePipeline
    epsilon: float
    delta: float
    rho: float
    guarantee: dict
    releases: tuple[GaussianRelease, ...] = field(repr=False)


def _declared_labels(train: Mapping, labels: Sequence[str] | None) -> list[str]:
    """The public label set: ``labels`` if given, else the mapping's keys (declared)."""
    if not isinstance(train, Mapping):
        raise InvalidInputError("training data must map every label to its utterances")
    declared = list(train) if labels is None else labels
    if isinstance(declared, str) or not isinstance(declared, (list, tuple)):
        raise InvalidInputError(f"labels must be a list of strings, got {declared!r}")
    names = [str(label) for label in declared]
    if not names:
        raise InvalidInputError("no labels declared: nothing to release")
    if len(set(names)) != len(names) or not all(names):
        raise InvalidInputError(f"labels must be distinct non-empty strings, got {names}")
    return names


def _record(x: object, n_features: int, n_states: int) -> np.ndarray | None:
    """One utterance under the public rule (:data:`RECORD_RULE`): the (T >= K, D) float
    matrix to use, or ``None`` to drop it."""
    try:
        array = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if array.ndim != 2 or array.shape[1] != n_features or array.shape[0] < 1:
        return None
    if not np.all(np.isfinite(array)):
        return None
    if array.shape[0] < n_states:
        array = np.repeat(array, -(-n_states // array.shape[0]), axis=0)
    return array


def _check_data(
    train: Mapping[str, Sequence[np.ndarray]],
    labels: list[str],
    n_features: int,
    n_states: int,
) -> dict[str, list[np.ndarray]]:
    """Every declared label's utterances after the public rule (module docstring); only
    the mapping's structure can raise, never a record."""
    by_name = {}
    for label, utterances in train.items():
        if isinstance(utterances, np.ndarray) or not isinstance(utterances, (list, tuple)):
            raise InvalidInputError(f"label {label!r}: expected a list of (T, D) arrays")
        by_name.setdefault(str(label), []).extend(utterances)
    checked: dict[str, list[np.ndarray]] = {}
    for label in labels:
        rows = [_record(x, n_features, n_states) for x in by_name.get(label, [])]
        checked[label] = [x for x in rows if x is not None]
    return checked


def _mechanism(
    sigma: float, sensitivity: float, sampler: str, rng: DPRandom | None
) -> GaussianMechanism:
    return GaussianMechanism(sigma, sensitivity, sampler=sampler, rng=rng)


class _Stages:
    """Runs the stages of one release against one accountant (module docstring)."""

    def __init__(self, design: KeywordDesign, rho_total: float, sampler: str, rng):
        self.design = design
        self.rho_total = rho_total
        self.accountant = ZCDPAccountant(rho_total)
        self.sampler = sampler
        self.rng = rng
        self.releases: list[GaussianRelease] = []
        self.records: list[dict] = []

    def release(self, label: str, share: float, sensitivity: float, value, note: str):
        rho = self.rho_total * share * _SAFETY
        sigma = sensitivity / math.sqrt(2.0 * rho)
        mechanism = _mechanism(sigma, sensitivity, self.sampler, self.rng)
        out = mechanism.release(value, accountant=self.accountant, label=label)
        self.releases.append(out)
        self.records.append(
            {
                "stage": label,
                "sigma": out.sigma,
                "l2_sensitivity": out.sensitivity,
                "rho": out.rho,
                "coordinates": int(np.size(value)),
                "per_record_bound": note,
                "sampler": out.sampler,
                "randomness": out.randomness,
                "details": out.details,
            }
        )
        return out.value


def _standardisation(
    stages: _Stages, utterances: list[np.ndarray], reference: PublicReference
) -> tuple[np.ndarray, np.ndarray]:
    """Stage 0: the released mean and standard deviation of the raw features."""
    d = stages.design
    width = d.reference_width * np.maximum(reference.spread, np.finfo(float).tiny)
    dim = len(reference.centre)
    rows = np.zeros((len(utterances), 2 * dim))
    for i, x in enumerate(utterances):
        u = np.clip((x - reference.centre) / width, -1.0, 1.0)
        rows[i] = np.concatenate([u.mean(axis=0), (u**2).mean(axis=0)])
    contributions = _clip_rows(rows, d.standardisation_bound)
    weight = d.standardisation_bound  # the count coordinate weighs as much as the rest
    value = np.concatenate([contributions.sum(axis=0), [weight * len(rows)]])
    noisy = stages.release(
        "standardisation",
        d.standardisation_share,
        math.hypot(d.standardisation_bound, weight),
        value,
        f"||(mean u, mean u^2)||_2 <= {d.standardisation_bound:g}, count {weight:g}",
    )
    count = max(noisy[-1] / weight, 1.0)
    mean_u = np.clip(noisy[:dim] / count, -1.0, 1.0)
    var_u = noisy[dim:-1] / count - mean_u**2
    # post-processing: between half and twice the reference spread
    var_u = np.clip(var_u, (0.5 / d.reference_width) ** 2, (2.0 / d.reference_width) ** 2)
    return reference.centre + width * mean_u, width * np.sqrt(var_u)


def _segments(x: np.ndarray, design: KeywordDesign) -> np.ndarray:
    return segment_means(np.clip(x, -design.coord_clip, design.coord_clip), design.n_states)


def derived_deltas(static: np.ndarray, pipeline: FeaturePipeline, self_loop: float) -> np.ndarray:
    """(K, 3 n_mfcc) state means from (K, n_mfcc) standardised static means: the deltas
    and delta-deltas of a signal that moves through the state means at the skeleton's
    pace, f = 1 / (1 - self_loop) frames per state (the features' deltas are derivatives
    per frame, ``smc_hmm.features``): d = (dmu/dk) / f and dd = (d^2mu/dk^2) / f^2 in raw
    units (numpy's gradient along the states), divided by the pipeline's std of the
    delta dimensions. Public post-processing of released values."""
    n = pipeline.n_mfcc
    std = np.asarray(pipeline.std)
    frames = 1.0 / (1.0 - self_loop)
    slope = np.gradient(static, axis=0) if len(static) > 1 else np.zeros_like(static)
    curve = np.gradient(slope, axis=0) if len(static) > 1 else np.zeros_like(static)
    delta = slope * std[:n] / (frames * std[n : 2 * n])
    delta2 = curve * std[:n] / (frames**2 * std[2 * n : 3 * n])
    return np.concatenate([static, delta, delta2], axis=1)


def _state_means(
    stages: _Stages, data: dict[str, list[np.ndarray]], pipeline: FeaturePipeline
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Stage 1: per label, the released (K, D) state means and utterance counts."""
    d = stages.design
    labels = list(data)
    k = d.n_states
    dim = pipeline.n_mfcc if d.static_means else pipeline.n_features
    value = np.zeros((len(labels), k * dim + 1))
    for row, label in enumerate(labels):
        stacked = np.zeros((len(data[label]), k * dim))
        for i, x in enumerate(data[label]):
            stacked[i] = _segments(x, d)[:, :dim].ravel()
        value[row, :-1] = _clip_rows(stacked, d.record_bound).sum(axis=0)
        value[row, -1] = d.count_weight * len(stacked)
    what = "static segment means" if d.static_means else "segment means"
    noisy = stages.release(
        "state means",
        d.means_share,
        math.hypot(d.record_bound, d.count_weight),
        value,
        f"||stacked K {what}||_2 <= {d.record_bound:g} in its label's block, "
        f"count {d.count_weight:g}",
    )
    means, counts = {}, {}
    for row, label in enumerate(labels):
        counts[label] = max(noisy[row, -1] / d.count_weight, 1.0)
        mu = np.clip(noisy[row, :-1].reshape(k, dim) / counts[label], -d.coord_clip, d.coord_clip)
        if d.static_means:
            mu = np.clip(derived_deltas(mu, pipeline, d.self_loop), -d.coord_clip, d.coord_clip)
        means[label] = mu
    return means, counts


def _variances(
    stages: _Stages,
    data: dict[str, list[np.ndarray]],
    means: dict[str, np.ndarray],
    counts: dict[str, float],
) -> dict[str, np.ndarray]:
    """Stage 2: per label, the (K, D) variances (``"unit"``: ones, nothing released)."""
    d = stages.design
    labels = list(data)
    k, dim = d.n_states, means[labels[0]].shape[1]
    if d.variances == "unit":
        return {label: np.ones((k, dim)) for label in labels}
    blocks = []
    width = dim if d.variances == "tied" else k * dim
    for label in labels:
        rows = [np.zeros(width)]  # a label without utterances adds zeros
        for x in data[label]:
            clipped = np.clip(x, -d.coord_clip, d.coord_clip)
            bounds = segment_bounds(len(x), k)
            centres = np.repeat(means[label], np.diff(bounds), axis=0)
            squares = (clipped - centres) ** 2
            if d.variances == "tied":
                rows.append(squares.mean(axis=0))
            else:
                rows.append(segment_means(squares, k).ravel())
        blocks.append(_clip_rows(np.array(rows), d.variance_bound).sum(axis=0))
    value = np.sum(blocks, axis=0) if d.variances == "tied" else np.array(blocks)
    noisy = stages.release(
        f"variances ({d.variances})",
        d.variance_share,
        d.variance_bound,
        value,
        f"||squared deviations from the released means||_2 <= {d.variance_bound:g}",
    )
    top = d.coord_clip**2
    if d.variances == "tied":
        total = math.fsum(counts.values())
        tied = np.clip(noisy / total, d.variance_floor, top)
        return {label: np.tile(tied, (k, 1)) for label in labels}
    return {
        label: np.clip(noisy[row].reshape(k, dim) / counts[label], d.variance_floor, top)
        for row, label in enumerate(labels)
    }


def _released_pipeline(
    stages: _Stages,
    data: Mapping[str, list[np.ndarray]],
    base_pipeline: FeaturePipeline,
    reference: PublicReference | None,
) -> tuple[FeaturePipeline, PublicReference | None]:
    """The feature pipeline released with the models, by the design's standardisation
    (stage 0 under ``"dp"``), and the public reference used (None with ``"bundled"``
    unless one was given)."""
    design = stages.design
    if design.standardisation not in ("dp", "public"):
        if not base_pipeline.standardised:
            raise PrivacyParameterError("standardisation='bundled' needs a standardised pipeline")
        return base_pipeline, reference
    reference = reference or bundled_reference()
    if design.standardisation == "dp":
        everything = [x for rows in data.values() for x in rows]
        mean, std = _standardisation(stages, everything, reference)
    else:
        mean, std = reference.centre, np.maximum(reference.spread, np.finfo(float).tiny)
    return replace(base_pipeline, mean=tuple(mean), std=tuple(std)), reference


def release_keyword_models(
    train: Mapping[str, Sequence[np.ndarray]],
    epsilon: float,
    *,
    labels: Sequence[str] | None = None,
    design: KeywordDesign | None = None,
    base_pipeline: FeaturePipeline | None = None,
    reference: PublicReference | None = None,
    sampler: str = "opendp",
    rng: DPRandom | None = None,
) -> KeywordRelease:
    """Release one DP keyword HMM per label from raw training features (module docstring).

    Args:
        train: label -> list of raw (T, D) feature matrices; every record is handled by
            the public rule of :data:`RECORD_RULE` (dropped or padded, never an error).
        epsilon: the eps of the (eps, design.delta) guarantee of the whole release.
        labels: the public label set, in model order (default: the keys of ``train``);
            every label gets a model, utterances of other labels are dropped.
        design: the public design (default :class:`KeywordDesign`).
        base_pipeline: the feature extraction the features came from (default: the
            bundled pipeline's); its standardisation is replaced by the released one,
            or kept (and must exist) with ``standardisation="bundled"``.
        reference: stage 0's public window (default :func:`bundled_reference`).
        sampler: ``"opendp"`` (default, hardened) or ``"float"`` (with ``rng``, an
            INSECURE seeded stream, for reproducible experiments).
        rng: the float sampler's stream.
    """
    design = design or KeywordDesign()
    epsilon = check_epsilon(epsilon)
    labels = _declared_labels(train, labels)
    if base_pipeline is None:
        from smc_hmm.data import load_pipeline

        base_pipeline = load_pipeline()
    dim = base_pipeline.n_features
    data = _check_data(train, labels, dim, design.n_states)
    rho_total = rho_from_epsilon(epsilon, design.delta)
    stages = _Stages(design, rho_total, sampler, rng)
    pipeline, reference = _released_pipeline(stages, data, base_pipeline, reference)
    standard = {label: [pipeline.standardise(x) for x in rows] for label, rows in data.items()}
    means, counts = _state_means(stages, standard, pipeline)
    variances = _variances(stages, standard, means, counts)
    start, trans = left_to_right_skeleton(design.n_states, dim, design.self_loop)
    models = [GaussianHMM(start, trans, means[k], variances[k], "diag") for k in labels]
    rho = stages.accountant.spent
    spent = epsilon_from_rho(rho, design.delta)
    guarantee = _guarantee(design, stages, rho, spent, epsilon, labels, reference, sampler)
    return KeywordRelease(
        models=models,
        labels=labels,
        pipeline=pipeline,
        epsilon=spent,
        delta=design.delta,
        rho=rho,
        guarantee=guarantee,
        releases=tuple(stages.releases),
    )


def _standardisation_terms(
    design: KeywordDesign, reference: PublicReference | None
) -> tuple[str, list[str]]:
    """How the guarantee states the standardisation, and what of it the guarantee does
    not cover."""
    if design.standardisation == "dp":
        assert reference is not None
        return (
            "released by stage 0 (covered); its clipping window is centre +- "
            f"{design.reference_width:g} spread of the public reference: {reference.source}"
        ), []
    if design.standardisation == "public":
        assert reference is not None
        return (
            f"the public reference's centre and spread (no private data): {reference.source}"
        ), []
    stated = (
        "the bundled pipeline's mean and std, treated as public: they were fitted on "
        "the training frames without noise"
    )
    uncovered = (
        "the feature standardisation (bundled pipeline, computed from the training "
        "frames without noise): the guarantee holds for the models given it"
    )
    return stated, [uncovered]


def _guarantee(
    design: KeywordDesign,
    stages: _Stages,
    rho: float,
    epsilon: float,
    requested: float,
    labels: list[str],
    reference: PublicReference | None,
    sampler: str,
) -> dict:
    """The complete guarantee of a release, JSON-ready."""
    try:
        cross_check = opendp_epsilon(
            [(r.sigma, r.sensitivity) for r in stages.releases], design.delta
        )
    except SamplerUnavailableError:  # OpenDP missing (float sampler): no cross-check
        cross_check = None
    public = {
        "feature_extraction": "smc_hmm.features.FeaturePipeline parameters (no data)",
        "labels": labels,
        "skeleton": (
            f"left-to-right, {design.n_states} states, start in state 0, a_jj = "
            f"{design.self_loop:g}, last state absorbing; transitions not estimated"
        ),
        "segmentation": "every utterance cut into K equal segments (a per-record rule)",
        "records": RECORD_RULE,
        "design": asdict(design),
    }
    public["standardisation"], not_covered = _standardisation_terms(design, reference)
    insecure = any(r.insecure for r in stages.releases)
    return {
        "format": FORMAT,
        "epsilon": epsilon,
        "epsilon_requested": requested,
        "delta": design.delta,
        "rho": rho,
        "opendp_epsilon": cross_check,
        "neighbouring": "add/remove one utterance of any label (the unit of privacy is "
        "one recording; a speaker with several recordings is protected as a group)",
        "released": "all models together (one per label) and their feature pipeline",
        "accountant": "zCDP (Bun and Steinke 2016): rho of the stages add up; labels in "
        "disjoint blocks of one Gaussian release (parallel composition); rho -> (eps, "
        "delta) by Canonne, Kamath and Steinke 2020, as OpenDP's make_zCDP_to_approxDP",
        "mechanisms": stages.records,
        "public": public,
        "not_covered": not_covered,
        "sampler": sampler,
        "insecure_randomness": insecure,
    }
