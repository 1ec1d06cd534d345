"""Empirical privacy audit of a randomised release: a histogram-ratio estimate of its loss.

An exact audit (:mod:`smc_hmm.dp.audit`) needs the mechanism's output distribution in
closed form. For a whole release pipeline -- clipping, a private standardisation, a
Gaussian mechanism, post-processing -- we instead *sample* it: run the release many times
on two neighbouring data sets D and D', keep one released parameter, and compare the two
empirical distributions bin by bin.

:func:`histogram_privacy_loss` cuts the pooled samples into equal-mass bins and returns
max_b |ln(P_D(b) / P_D'(b))| over the bins where one side holds at least ``min_count``
samples (one is added to both counts, so that a bin one side never reaches gives a
large, finite ratio instead of a division by zero). Under (eps, delta)-DP every bin B
with P_D(B), P_D'(B) well above delta satisfies P_D(B) <= e^eps P_D'(B) + delta, so the
estimate stays near or below eps up to sampling error (about sqrt(2 / min_count) on a
log ratio). It is a lower-bound-style check, not a proof: it catches an implementation
whose noise is too small (a wrong sensitivity, a lost factor, a forgotten stage), which
then shows a loss far above the claim; it cannot certify a guarantee.

:func:`audit_keyword_release` applies it to :func:`smc_hmm.dp.keyword_models.
release_keyword_models`: D is the training set, D' the same without one utterance (the
one with the largest contribution to the audited mean coordinate, measured on the public
reference's scale) or with a crafted canary utterance that puts its whole bounded
contribution on that coordinate; the released parameter is that state-mean coordinate.
See ``docs/dp-keyword-models.md`` ("Empirical audit").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.dp.keyword_models import (
    KeywordDesign,
    PublicReference,
    bundled_reference,
    release_keyword_models,
    segment_bounds,
    segment_means,
)
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import InvalidInputError, PrivacyParameterError

__all__ = ["KeywordAudit", "audit_keyword_release", "histogram_privacy_loss"]


def histogram_privacy_loss(
    first: ArrayLike, second: ArrayLike, *, bins: int = 10, min_count: int = 50
) -> float:
    """max over well-populated equal-mass bins of |ln(p_first / p_second)| (module doc)."""
    a = np.asarray(first, dtype=np.float64).ravel()
    b = np.asarray(second, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InvalidInputError("both samples must be non-empty and finite")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise InvalidInputError(f"bins must be an int >= 2, got {bins!r}")
    edges = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0.0, 1.0, bins + 1)))
    if edges.size < 3:
        raise InvalidInputError("the samples take too few distinct values to form bins")
    count_a = np.histogram(a, edges)[0]
    count_b = np.histogram(b, edges)[0]
    kept = np.maximum(count_a, count_b) >= min_count
    if not np.any(kept):
        raise InvalidInputError(f"no bin holds {min_count} samples of one side: draw more")
    # one added to each count: an empty bin on one side gives a large, finite ratio
    ratio = ((count_a[kept] + 1) / a.size) / ((count_b[kept] + 1) / b.size)
    return float(np.max(np.abs(np.log(ratio))))


@dataclass(frozen=True)
class KeywordAudit:
    """The outcome of :func:`audit_keyword_release`.

    Attributes:
        estimate: the histogram-ratio estimate of the privacy loss.
        epsilon, delta: the claimed guarantee of one release.
        releases: releases drawn on each of D and D'.
        parameter: which released value was audited.
        neighbour: how D' differs from D.
        shift: the mean difference of the audited value between D and D', in units of
            its standard deviation over the releases on D.
    """

    estimate: float
    epsilon: float
    delta: float
    releases: int
    parameter: str
    neighbour: str
    shift: float


def _most_influential(
    utterances: Sequence[np.ndarray],
    reference: PublicReference,
    design: KeywordDesign,
    state: int,
    dim: int,
) -> int:
    scale = np.maximum(reference.spread, np.finfo(float).tiny)
    bound = design.coord_clip
    values = [
        segment_means(np.clip((x - reference.centre) / scale, -bound, bound), design.n_states)
        for x in utterances
    ]
    return int(np.argmax([abs(v[state, dim]) for v in values]))


def _canary(reference: PublicReference, design: KeywordDesign, state: int, dim: int) -> np.ndarray:
    frames = 8 * design.n_states
    canary = np.tile(reference.centre, (frames, 1))
    bounds = segment_bounds(frames, design.n_states)
    canary[bounds[state] : bounds[state + 1], dim] += 12.0 * reference.spread[dim]
    return canary


def audit_keyword_release(
    train: Mapping[str, Sequence[np.ndarray]],
    epsilon: float,
    *,
    label: str,
    state: int = 0,
    dim: int = 0,
    releases: int = 1000,
    design: KeywordDesign | None = None,
    reference: PublicReference | None = None,
    base_pipeline=None,
    seed: int = 0,
    bins: int = 10,
    min_count: int | None = None,
    neighbour: str = "remove",
) -> KeywordAudit:
    """Release ``releases`` times on D = ``train`` and on a neighbour D'; estimate the
    loss on the released mean (``label``, ``state``, ``dim``).

    ``neighbour="remove"``: D' is D without the utterance of ``label`` with the largest
    contribution to the audited coordinate. ``"canary"``: D' is D plus a crafted
    utterance of ``label`` that sits at the reference centre except in segment
    ``state``, where dimension ``dim`` lies 12 reference spreads above it (clipped to
    ``coord_clip`` after standardisation): its whole bounded contribution lies on the
    audited coordinate, the neighbour that moves it most.

    Noise comes from INSECURE seeded streams (``seed``): the float sampler, the same
    Gaussian distribution as the OpenDP sampler of a real release. ``min_count``
    defaults to half a bin's expected count per side, releases / (2 bins), at least 5.
    """
    design = design or KeywordDesign()
    reference = reference or bundled_reference()
    utterances = _audited_utterances(train, label, state, releases, design)
    other, changed = _neighbouring_data(
        train, utterances, neighbour, label, state, dim, reference, design
    )
    a, b, spent = _sample_releases(
        train, other, epsilon, label, state, dim, releases, design, reference, base_pipeline, seed
    )
    if min_count is None:
        min_count = max(5, releases // (2 * bins))
    return KeywordAudit(
        estimate=histogram_privacy_loss(a, b, bins=bins, min_count=min_count),
        epsilon=spent,
        delta=design.delta,
        releases=releases,
        parameter=f"mean of label {label!r}, state {state}, dimension {dim}",
        neighbour=changed,
        shift=float(abs(a.mean() - b.mean()) / max(a.std(), np.finfo(float).tiny)),
    )


def _audited_utterances(
    train: Mapping[str, Sequence[np.ndarray]],
    label: str,
    state: int,
    releases: int,
    design: KeywordDesign,
) -> list[np.ndarray]:
    """Check the audit's arguments; return the utterances of the audited label."""
    if label not in train:
        raise InvalidInputError(f"label {label!r} is not in the training data")
    if not (0 <= state < design.n_states):
        raise InvalidInputError(f"state must be in 0..{design.n_states - 1}, got {state!r}")
    if isinstance(releases, bool) or not isinstance(releases, int) or releases < 2:
        raise PrivacyParameterError(f"releases must be an int >= 2, got {releases!r}")
    utterances = list(train[label])
    if len(utterances) < 2:
        raise InvalidInputError(f"label {label!r} needs at least two utterances")
    return utterances


def _neighbouring_data(
    train: Mapping[str, Sequence[np.ndarray]],
    utterances: list[np.ndarray],
    neighbour: str,
    label: str,
    state: int,
    dim: int,
    reference: PublicReference,
    design: KeywordDesign,
) -> tuple[dict[str, Sequence[np.ndarray]], str]:
    """D' for the chosen ``neighbour`` kind, and a sentence saying how it differs from D."""
    if neighbour == "remove":
        index = _most_influential(utterances, reference, design, state, dim)
        other = {**train, label: utterances[:index] + utterances[index + 1 :]}
        changed = f"utterance {index} of label {label!r} removed (largest |segment mean|)"
    elif neighbour == "canary":
        other = {**train, label: [*utterances, _canary(reference, design, state, dim)]}
        changed = f"a canary utterance of label {label!r} added (segment {state}, dim {dim})"
    else:
        raise InvalidInputError(f"neighbour must be 'remove' or 'canary', got {neighbour!r}")
    return other, changed


def _sample_releases(
    train: Mapping[str, Sequence[np.ndarray]],
    other: Mapping[str, Sequence[np.ndarray]],
    epsilon: float,
    label: str,
    state: int,
    dim: int,
    releases: int,
    design: KeywordDesign,
    reference: PublicReference,
    base_pipeline,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Release alternately on D and D'; the audited value of each, and the epsilon spent."""
    position = list(train).index(label)
    parent = DPRandom.insecure_seeded(seed)
    samples: dict[str, list[float]] = {"D": [], "D'": []}
    spent = math.nan
    for _ in range(releases):
        for name, data in (("D", train), ("D'", other)):
            out = release_keyword_models(
                data,
                epsilon,
                design=design,
                reference=reference,
                base_pipeline=base_pipeline,
                sampler="float",
                rng=parent.spawn(),
            )
            samples[name].append(float(out.models[position].means[state, dim]))
            spent = out.epsilon
    return np.array(samples["D"]), np.array(samples["D'"]), spent
