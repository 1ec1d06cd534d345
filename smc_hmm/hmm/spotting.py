"""Keyword spotting by Viterbi decoding of a filler-keyword-filler HMM (thesis 003, 2.2.3,
Figure 2.4), in plaintext: the reference the secure protocol (``protocols/stages/decoding.py``)
is checked against.

A keyword HMM alone explains a recording that holds exactly that word.  To find whether,
and where, the word occurs in a longer recording, the keyword model is put between two
copies of a *filler* (garbage) model that explains everything else -- the other words and
the pauses::

    F1 (pause + word, looping) --enter--> K (the keyword's n states) --leave--> F2 (= F1)

The best path either stays in the fillers (no keyword) or passes through K once; the
frames it spends in K are the keyword's segment.  The *loop* form (``loop=True``) has one
filler copy, K's last state returning to its pause::

    F (pause + words, looping) --enter--> K --leave--> F's pause

which halves the states a frame when the filler is large (the bundled one holds the
other nine digits' models); the path may then pass through K more than once, each entry
paying ``enter``, and the segment is the longest of its passes (the earliest of equal
ones).  This module builds the composite model
(:func:`compose`), states its *public* layout (:class:`SpottingLayout`: the state ranges,
which states share an emission, the keyword's states -- what a secure protocol may show
its peer), and decodes in plaintext (:func:`spot`).

Conventions (public, ``docs/spotting.md``): states are ordered F1, K, F2 (F, K in the
loop); F2's states have exactly F1's emissions (one emission row serves both copies); the
path may start in F1's start states or in K's first state, and end anywhere.  The
transition probabilities that glue the parts (``enter``, ``leave``, ``start_keyword``)
and the form (``loop``) are the model holder's choice, like the models themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from smc_hmm.errors import InvalidInputError
from smc_hmm.features import FRAME_SECONDS
from smc_hmm.hmm.inference import viterbi_from_logs
from smc_hmm.hmm.models import DiscreteHMM, GaussianHMM

__all__ = [
    "FILLER_STAY",
    "SpottingLayout",
    "Spot",
    "compose",
    "filler_topology",
    "parallel_filler",
    "segment_of",
    "spot",
    "spotting_fillers",
]

#: default glue probabilities (the bundled evaluation's choice, ``docs/spotting.md``)
ENTER = 1e-15
LEAVE = 0.5
START_KEYWORD = 1e-15
#: a parallel filler's pause self-loop, and its words' last states' return to the pause
FILLER_STAY = 0.8


@dataclass(frozen=True)
class SpottingLayout:
    """The public shape of a filler-keyword-filler composite: ``filler`` states in each
    filler copy, ``keyword`` states; states are ordered F1, K, F2, or F, K when ``loop``
    (one filler copy, K returning to it)."""

    filler: int
    keyword: int
    loop: bool = False

    def __post_init__(self):
        for name in ("filler", "keyword"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidInputError(f"{name} states must be a positive int, got {v!r}")
        if not isinstance(self.loop, bool):
            raise InvalidInputError(f"loop must be a bool, got {self.loop!r}")

    @property
    def states(self) -> int:
        return (1 if self.loop else 2) * self.filler + self.keyword

    @property
    def keyword_states(self) -> range:
        """The keyword's states in the composite."""
        return range(self.filler, self.filler + self.keyword)

    @property
    def rows(self) -> tuple[int, ...]:
        """Per composite state, its emission row: F1 and K are rows 0 .. m + n - 1, F2's
        states reuse F1's rows (the tie is public: both copies are the same filler)."""
        m, n = self.filler, self.keyword
        return tuple(range(m + n)) + (() if self.loop else tuple(range(m)))


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


def parallel_filler(
    words: Sequence[GaussianHMM], pause: GaussianHMM, stay: float = FILLER_STAY
) -> GaussianHMM:
    """A filler of a one-state ``pause`` (state 0) and the word models ``words`` in
    parallel, looping: the pause loops (``stay``) or starts any word (as that word starts,
    the words equally likely); a word's last state loops, as trained, or returns to the
    pause (1 - ``stay``).  The last word's last state is the filler's last state
    (:func:`compose` enters the keyword from it and from the pause).  The path starts in
    the pause or in a word (half each)."""
    if not words or pause.n_states != 1:
        raise InvalidInputError("a parallel filler needs words and a one-state pause")
    m = 1 + sum(w.n_states for w in words)
    a = np.zeros((m, m))
    start = np.zeros(m)
    start[0] = 0.5
    a[0, 0] = stay
    at = 1
    for w in words:
        n = w.n_states
        block = slice(at, at + n)
        a[block, block] = w.transmat
        a[at + n - 1, block] *= stay
        a[at + n - 1, 0] = 1 - stay
        a[0, block] = (1 - stay) / len(words) * np.asarray(w.startprob)
        start[block] = 0.5 / len(words) * np.asarray(w.startprob)
        at += n
    means = np.vstack([pause.means, *(w.means for w in words)])
    covars = np.concatenate([pause.covars, *(w.covars for w in words)])
    return GaussianHMM(start, a, means, covars, pause.covariance_type)


def spotting_fillers(keywords: Sequence[GaussianHMM], pause: GaussianHMM) -> list[GaussianHMM]:
    """Filler k for every keyword k: :func:`parallel_filler` of the other keywords' models
    and the ``pause`` (so a keyword is reported only where it beats every other one)."""
    return [
        parallel_filler([w for d, w in enumerate(keywords) if d != k], pause)
        for k in range(len(keywords))
    ]


def compose(
    keyword,
    filler,
    *,
    enter: float = ENTER,
    leave: float = LEAVE,
    start_keyword: float = START_KEYWORD,
    loop: bool = False,
) -> tuple[GaussianHMM | DiscreteHMM, SpottingLayout]:
    """The composite F1-K-F2 model (or the F-K loop, ``loop=True``) of ``keyword`` and
    ``filler`` (both Gaussian with the same features and covariance type, or both
    discrete over the same symbols).

    The filler's first state is its pause and its last the end of its generic word
    (:func:`filler_topology`): each of them moves to K's first state with probability
    ``enter`` (its other transitions scaled by 1 - enter); K's last state moves to F2's
    pause with probability ``leave`` (its other transitions scaled by 1 - leave); the path
    starts in K's first state with probability ``start_keyword``, else as the filler
    starts.  In the loop, K's last state moves to F's pause instead, with ``leave``."""
    for name, p in (("enter", enter), ("leave", leave), ("start_keyword", start_keyword)):
        if not (isinstance(p, int | float) and 0 < p < 1):
            raise InvalidInputError(f"{name} must be a probability in (0, 1), got {p!r}")
    if type(keyword) is not type(filler) or not isinstance(keyword, GaussianHMM | DiscreteHMM):
        raise InvalidInputError("keyword and filler must be both Gaussian or both discrete HMMs")
    layout = SpottingLayout(filler.n_states, keyword.n_states, loop)
    m, n, total = layout.filler, layout.keyword, layout.states
    a = np.zeros((total, total))
    af, ak = np.asarray(filler.transmat), np.asarray(keyword.transmat)
    a[:m, :m] = af
    for exit_state in sorted({0, m - 1}):
        a[exit_state, :m] *= 1 - enter
        a[exit_state, m] = enter
    a[m : m + n, m : m + n] = ak
    a[m + n - 1, m : m + n] *= 1 - leave
    a[m + n - 1, 0 if loop else m + n] = leave
    if not loop:
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
        means = np.concatenate([filler.means, keyword.means, filler.means])[:total]
        covars = np.concatenate([filler.covars, keyword.covars, filler.covars])[:total]
        model = GaussianHMM(pi, a, means, covars, keyword.covariance_type)
    else:
        if keyword.n_symbols != filler.n_symbols:
            raise InvalidInputError("keyword and filler need the same symbols")
        b = np.concatenate([filler.emissionprob, keyword.emissionprob, filler.emissionprob])
        b = b[:total]
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

    def seconds(self, hop: float = FRAME_SECONDS) -> tuple[float, float] | None:
        """The span in seconds (frame k is centred at k * hop), or None."""
        if not self.found:
            return None
        return (self.start * hop, (self.end + 1) * hop)


def segment_of(inside) -> tuple[int | None, int | None]:
    """(first, last) index of the longest run where ``inside`` is true (the earliest of
    equal runs), or (None, None).  A filler-keyword-filler path has at most one run; a
    loop's may have several."""
    edges = np.diff(np.concatenate([[0], np.asarray(inside, dtype=np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if starts.size == 0:
        return None, None
    k = int(np.argmax(stops - starts))
    return int(starts[k]), int(stops[k]) - 1


def spot(model, layout: SpottingLayout, observations) -> Spot:
    """Plaintext spotting: Viterbi on the composite, the frames the path spends in K."""
    log_b = model.log_emission(observations)
    path, score = viterbi_from_logs(model.log_startprob, model.log_transmat, log_b)
    keyword = layout.keyword_states
    start, end = segment_of((path >= keyword.start) & (path < keyword.stop))
    return Spot(start, end, score)
