"""Keyword spotting by Viterbi decoding of a filler-keyword-filler HMM (thesis 003, 2.2.3,
Figure 2.4), in plaintext: the reference the secure protocol (``protocols/stages/decoding.py``)
is checked against.

A keyword HMM alone explains a recording that holds exactly that word.  To find whether,
and where, the word occurs in a longer recording, the keyword model is put between two
copies of a *filler* (garbage) model that explains everything else -- the other words and
the pauses::

    F1 (pause + word, looping) --enter--> K (the keyword's n states) --leave--> F2 (= F1)

The best path either stays in the fillers (no keyword) or passes through K once; the
frames it spends in K are the keyword's segment.  This module builds the composite model
(:func:`compose`), states its *public* layout (:class:`SpottingLayout`: the state ranges,
which states share an emission, the keyword's states -- what a secure protocol may show
its peer), and decodes in plaintext (:func:`spot`).

Conventions (public, ``docs/spotting.md``): states are ordered F1, K, F2; F2's states have
exactly F1's emissions (one emission row serves both copies); the path may start in F1's
start states or in K's first state, and end anywhere.  The transition probabilities that
glue the parts (``enter``, ``leave``, ``start_keyword``) are the model holder's choice,
like the models themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm.inference import viterbi_from_logs
from smc_hmm.hmm.models import DiscreteHMM, GaussianHMM

__all__ = ["SpottingLayout", "Spot", "compose", "filler_topology", "segment_of", "spot"]

#: default glue probabilities (the bundled evaluation's choice, ``docs/spotting.md``)
ENTER = 1e-15
LEAVE = 0.5
START_KEYWORD = 1e-15


@dataclass(frozen=True)
class SpottingLayout:
    """The public shape of a filler-keyword-filler composite: ``filler`` states in each
    filler copy, ``keyword`` states; states are ordered F1, K, F2."""

    filler: int
    keyword: int

    def __post_init__(self):
        for name in ("filler", "keyword"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidInputError(f"{name} states must be a positive int, got {v!r}")

    @property
    def states(self) -> int:
        return 2 * self.filler + self.keyword

    @property
    def keyword_states(self) -> range:
        """The keyword's states in the composite."""
        return range(self.filler, self.filler + self.keyword)

    @property
    def rows(self) -> tuple[int, ...]:
        """Per composite state, its emission row: F1 and K are rows 0 .. m + n - 1, F2's
        states reuse F1's rows (the tie is public: both copies are the same filler)."""
        m, n = self.filler, self.keyword
        return tuple(range(m + n)) + tuple(range(m))


def filler_topology(states: int, stay: float = 0.8) -> np.ndarray:
    """A filler's transition pattern: state 0 is the pause, states 1 .. m - 1 a generic
    word from left to right; the pause loops or starts a word, a word state loops or moves
    on, the word's last state loops or returns to the pause -- so the filler absorbs any
    number of words and pauses.  A single state just loops."""
    a = np.zeros((states, states))
    for i in range(states):
        a[i, i] = stay if states > 1 else 1.0
        if states > 1:
            a[i, (i + 1) % states] += 1 - stay
    return a


def compose(
    keyword,
    filler,
    *,
    enter: float = ENTER,
    leave: float = LEAVE,
    start_keyword: float = START_KEYWORD,
) -> tuple[GaussianHMM | DiscreteHMM, SpottingLayout]:
    """The composite F1-K-F2 model of ``keyword`` and ``filler`` (both Gaussian with the
    same features and covariance type, or both discrete over the same symbols).

    The filler's first state is its pause and its last the end of its generic word
    (:func:`filler_topology`): each of them moves to K's first state with probability
    ``enter`` (its other transitions scaled by 1 - enter); K's last state moves to F2's
    pause with probability ``leave`` (its other transitions scaled by 1 - leave); the path
    starts in K's first state with probability ``start_keyword``, else as the filler
    starts.  F2 ends the path."""
    for name, p in (("enter", enter), ("leave", leave), ("start_keyword", start_keyword)):
        if not (isinstance(p, int | float) and 0 < p < 1):
            raise InvalidInputError(f"{name} must be a probability in (0, 1), got {p!r}")
    if type(keyword) is not type(filler) or not isinstance(keyword, GaussianHMM | DiscreteHMM):
        raise InvalidInputError("keyword and filler must be both Gaussian or both discrete HMMs")
    layout = SpottingLayout(filler.n_states, keyword.n_states)
    m, n, total = layout.filler, layout.keyword, layout.states
    a = np.zeros((total, total))
    af, ak = np.asarray(filler.transmat), np.asarray(keyword.transmat)
    a[:m, :m] = af
    for exit_state in sorted({0, m - 1}):
        a[exit_state, :m] *= 1 - enter
        a[exit_state, m] = enter
    a[m : m + n, m : m + n] = ak
    a[m + n - 1, m : m + n] *= 1 - leave
    a[m + n - 1, m + n] = leave
    a[m + n :, m + n :] = af
    pi = np.zeros(total)
    pi[:m] = (1 - start_keyword) * np.asarray(filler.startprob)
    pi[m] = start_keyword
    if isinstance(keyword, GaussianHMM):
        if (
            keyword.n_features != filler.n_features
            or keyword.covariance_type != filler.covariance_type
        ):
            raise InvalidInputError("keyword and filler need the same features and covariances")
        means = np.concatenate([filler.means, keyword.means, filler.means])
        covars = np.concatenate([filler.covars, keyword.covars, filler.covars])
        model = GaussianHMM(pi, a, means, covars, keyword.covariance_type)
    else:
        if keyword.n_symbols != filler.n_symbols:
            raise InvalidInputError("keyword and filler need the same symbols")
        b = np.concatenate([filler.emissionprob, keyword.emissionprob, filler.emissionprob])
        model = DiscreteHMM(pi, a, b)
    return model, layout


@dataclass(frozen=True)
class Spot:
    """A decision: the keyword's first and last frame (inclusive), or None for both."""

    start: int | None
    end: int | None
    score: float = -math.inf

    @property
    def found(self) -> bool:
        return self.start is not None

    def seconds(self, hop: float = 0.01) -> tuple[float, float] | None:
        """The span in seconds (frame k is centred at k * hop), or None."""
        if not self.found:
            return None
        return (self.start * hop, (self.end + 1) * hop)


def segment_of(inside) -> tuple[int | None, int | None]:
    """(first, last) index where ``inside`` is true, or (None, None)."""
    where = np.flatnonzero(np.asarray(inside, dtype=bool))
    if where.size == 0:
        return None, None
    return int(where[0]), int(where[-1])


def spot(model, layout: SpottingLayout, observations) -> Spot:
    """Plaintext spotting: Viterbi on the composite, the frames the path spends in K."""
    log_b = model.log_emission(observations)
    path, score = viterbi_from_logs(model.log_startprob, model.log_transmat, log_b)
    keyword = layout.keyword_states
    start, end = segment_of((path >= keyword.start) & (path < keyword.stop))
    return Spot(start, end, score)
