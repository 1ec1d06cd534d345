"""DPHMM: releasing a state trace of a Markov model under a policy graph (Algorithm 2).

DPHMM paper (Xiao et al., seeds 001/004), sections 3.3, 4, 6.2 and 7; ``docs/dphmm.md``.
At every timestamp t, for the true state s*_t:

1. prior p_t^- = p_{t-1}^+ M (Markov transition; the support is tracked exactly as a set,
   so an underflowing probability never silently leaves C_t);
2. constraint C_t = {s : p_t^-(s) > 0} (Definition 4.1) -- or, for the baseline of [27]
   (Theorem 4.1), the delta-location set: the fewest most probable states holding prior
   mass >= 1 - delta, with a complete policy graph;
3. the constrained graph G n C_t, repaired into a protectable graph (Algorithm 1, greedy, by
   default; Algorithm 3 on request) and its sensitivity hull K_t;
4. the K-norm release z_t = f(s*_t) + r U (:mod:`smc_hmm.dp.knorm`);
5. the posterior p_t^+ by Bayes' rule with the K-norm likelihood exp(-eps ||z_t - f(s)||_K)
   (equation (2); the normalising constant depends only on K_t and eps, so it cancels;
   a state whose z_t - f(s) leaves span K_t gets likelihood 0 and leaves the support).

Privacy accounting (per release, reported in :class:`ReleaseRecord`):

- Theorem 6.2: each release is {eps_t, G, C_t}-DPHMM;
- Theorem 6.3: it is also {eps_t * max_{s_j, s_k in C_t} ||f(s_j) - f(s_k)||_{K_t}, G, C_t}-
  constrained DP (between *any* two states of C_t, not only neighbours; +inf when K_t is
  flat and C_t leaves its span, which Definition 4.4 allows);
- Theorem 7.1 (several queries at one timestamp): the eps_i add up, and so do the
  constrained-DP terms;
- Theorem 7.2 (one query over timestamps 1..t): the sequence is constrained-DPS with the sum
  over timestamps of the per-timestamp constrained-DP terms; combined with Theorem 7.1 the
  sum runs over timestamps and queries.  (Parallel composition does not apply: there is only
  one state.)  An optional ``budget`` on that Theorem 7.2 total refuses a release before any
  noise is drawn.

The true state outside C_t: the paper assumes the adversary's Markov model is the true one,
so s*_t always has p_t^-(s*_t) > 0 (the K-norm likelihood of the true state is never 0).  A
state outside C_t means the model and the trace disagree: by default this raises
:class:`~smc_hmm.errors.StateOutsideConstraintError`.  The delta-location-set baseline, whose
set may omit the true state by design, releases a *surrogate* instead, as [27] does: the
state of the set nearest to s*_t in measurement space (``outside="surrogate"``).
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import cdist

from smc_hmm.dp.knorm import (
    DEFAULT_TOL,
    ConvexBody,
    KNormMechanism,
    check_epsilon,
    noise_source,
)
from smc_hmm.dp.policy import (
    PolicyGraph,
    check_query,
    complete_graph,
    degree_of_protection,
    delta_location_set,
    extreme_points,
    protectable_graph,
    state_indices,
)
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import (
    DPHMMParameterError,
    EmptyConstraintError,
    PrivacyBudgetError,
    StateOutsideConstraintError,
    UnknownStateError,
)

__all__ = [
    "DPHMM",
    "CompositionLedger",
    "LedgerEntry",
    "ReleaseDiagnostics",
    "ReleaseRecord",
    "check_transition",
    "constrained_epsilon",
]


def check_transition(transition: object, atol: float = 1e-8) -> np.ndarray:
    """Validate a row-stochastic (n, n) transition matrix M (m_ij = P(j | i))."""
    try:
        m = np.asarray(transition, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DPHMMParameterError(f"the transition matrix must be numeric: {exc}") from None
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise DPHMMParameterError(f"the transition matrix must be square (n, n), got {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise DPHMMParameterError("the transition matrix must be finite and >= 0")
    if not np.allclose(m.sum(axis=1), 1.0, atol=atol):
        raise DPHMMParameterError("every row of the transition matrix must sum to 1")
    return m


def constrained_epsilon(
    eps: float, body: ConvexBody, f: np.ndarray, constraint: np.ndarray
) -> float:
    """Theorem 6.3: eps * max_{s_j, s_k in C} ||f(s_j) - f(s_k)||_K.

    The gauge is convex, so the maximum over the difference set is reached at differences
    of extreme points of f(C); +inf if some difference leaves span K.
    """
    pts = f[constraint]
    if len(pts) < 2:
        return 0.0
    ext = extreme_points(pts)
    diff = ext[:, None, :] - ext[None, :, :]
    g = float(np.max(body.gauge(diff)))
    return math.inf if math.isinf(g) else eps * g


# -- composition bookkeeping (Theorems 7.1 and 7.2) --------------------------------------


@dataclass(frozen=True)
class LedgerEntry:
    """One release: its timestamp, query name, eps (DPHMM) and constrained-DP epsilon."""

    t: int
    query: str
    epsilon: float
    constrained_epsilon: float


class CompositionLedger:
    """Sequential composition of DPHMM releases as the paper states it.

    - :meth:`timestamp` (Theorem 7.1): at one timestamp the eps_i of the queries add up to
      a {sum eps_i, G, C_t}-DPHMM guarantee, and their constrained-DP terms add up to a
      {sum_i eps_i max ||f_i(s_j) - f_i(s_k)||_{K_i}, G, C_t}-constrained-DP guarantee;
    - :meth:`sequence` (Theorem 7.2): the released sequence of a query is constrained-DPS
      with the sum over timestamps of its constrained-DP terms; over all queries the sum
      runs over timestamps and queries;
    - ``budget`` (optional) caps the Theorem 7.2 total over everything recorded.
    """

    def __init__(self, budget: float | None = None) -> None:
        self.budget = None if budget is None else check_epsilon(budget, "budget")
        self.entries: list[LedgerEntry] = []

    def check(self, constrained: float) -> None:
        """Raise :class:`PrivacyBudgetError` if spending ``constrained`` more would exceed
        the budget (nothing is recorded)."""
        if self.budget is None:
            return
        total = self.sequence() + constrained
        if not total <= self.budget * (1 + 1e-12):
            raise PrivacyBudgetError(
                f"the release would bring the Theorem 7.2 total to {total:.6g} "
                f"> budget {self.budget:.6g}"
            )

    def record(self, t: int, query: str, epsilon: float, constrained: float) -> LedgerEntry:
        """Record one release (epsilon finite > 0; constrained >= 0, possibly +inf)."""
        eps = check_epsilon(epsilon)
        if isinstance(constrained, bool) or not isinstance(constrained, numbers.Real):
            raise DPHMMParameterError("the constrained epsilon must be a real number")
        if math.isnan(constrained) or constrained < 0:
            raise DPHMMParameterError(f"the constrained epsilon must be >= 0, got {constrained}")
        entry = LedgerEntry(int(t), str(query), eps, float(constrained))
        self.entries.append(entry)
        return entry

    def timestamp(self, t: int) -> tuple[float, float]:
        """Theorem 7.1 at timestamp t: (sum of eps_i, sum of constrained-DP terms)."""
        es = [e for e in self.entries if e.t == t]
        return math.fsum(e.epsilon for e in es), _sum(e.constrained_epsilon for e in es)

    def sequence(self, query: str | None = None) -> float:
        """Theorem 7.2: the sum over timestamps (and queries, unless one ``query`` is named)
        of the constrained-DP terms."""
        return _sum(
            e.constrained_epsilon for e in self.entries if query is None or e.query == query
        )

    def epsilon_sum(self, query: str | None = None) -> float:
        """Plain sum of the per-release eps (the DPHMM-level eps_t, for reference)."""
        return math.fsum(e.epsilon for e in self.entries if query is None or e.query == query)


def _sum(values) -> float:
    vals = list(values)
    return math.inf if any(math.isinf(v) for v in vals) else math.fsum(vals)


# -- the release loop (Algorithm 2) -------------------------------------------------------


@dataclass(frozen=True)
class ReleaseDiagnostics:
    """Evaluation-only facts that depend on the true state: never publish them."""

    true_state: int
    released_state: int  # the surrogate when the true state is outside C_t
    true_value: np.ndarray
    dop: int  # DoP of the true state under K_t (section 8's privacy metric)
    error: float  # ||z_t - f(s*_t)||_2 (section 8's utility metric)


@dataclass(frozen=True)
class ReleaseRecord:
    """One release z_t of one query and its public facts.

    ``epsilon`` is the DPHMM level (Theorem 6.2); ``constrained_epsilon`` the Theorem 6.3
    term; ``timestamp_epsilon`` / ``timestamp_constrained_epsilon`` the Theorem 7.1 sums
    over the queries released so far at t; ``sequence_constrained_epsilon`` the Theorem 7.2
    total over everything released so far (timestamps and queries).  ``constraint`` lists
    C_t, ``added_edges`` the repair, ``exposed`` the states exposed before repair, ``rank``
    the dimension of K_t and ``sampler`` the uniform sampler used.
    """

    t: int
    query: str
    z: np.ndarray
    epsilon: float
    constrained_epsilon: float
    timestamp_epsilon: float
    timestamp_constrained_epsilon: float
    sequence_constrained_epsilon: float
    constraint: np.ndarray
    added_edges: np.ndarray
    exposed: np.ndarray
    rank: int
    volume: float
    sampler: str
    seconds: float
    private: ReleaseDiagnostics = field(repr=False)


def _check_queries(queries: object, n: int) -> dict[str, np.ndarray]:
    """The named queries over ``n`` states (a single query is named ``"f"``)."""
    if isinstance(queries, Mapping):
        if not queries:
            raise DPHMMParameterError("at least one query is required")
        return {str(k): check_query(v, n) for k, v in queries.items()}
    return {"f": check_query(queries, n)}


def _check_eps(eps: float | Mapping[str, float], queries: Mapping[str, object]) -> dict[str, float]:
    """The epsilon of each query: one for all, or one per query by name."""
    if isinstance(eps, Mapping):
        if set(map(str, eps)) != set(queries):
            raise DPHMMParameterError("eps must name exactly the queries")
        return {str(k): check_epsilon(v, f"eps[{k}]") for k, v in eps.items()}
    e = check_epsilon(eps)
    return {name: e for name in queries}


def _check_policy(policy: object, n: int) -> PolicyGraph:
    if not isinstance(policy, PolicyGraph):
        raise DPHMMParameterError(f"policy must be a PolicyGraph, got {type(policy).__name__}")
    if policy.n != n:
        raise UnknownStateError(
            f"the policy graph is over {policy.n} states, the Markov model has {n}"
        )
    return policy


def _check_outside(delta: float | None, outside: str | None) -> tuple[float | None, str]:
    """``delta`` as a float (or None) and what to do with an observation outside the
    model's support (default: raise without ``delta``, a surrogate with it)."""
    if delta is not None and (
        isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 <= delta < 1
    ):
        raise DPHMMParameterError(f"delta must be in [0, 1), got {delta!r}")
    outside = outside or ("raise" if delta is None else "surrogate")
    if outside not in ("raise", "surrogate"):
        raise DPHMMParameterError(f"outside must be 'raise' or 'surrogate', got {outside!r}")
    return None if delta is None else float(delta), outside


def _check_initial(initial: object | None, n: int) -> np.ndarray:
    """The prior over the ``n`` states, normalised (default: uniform)."""
    if initial is None:
        return np.full(n, 1.0 / n)
    p0 = np.asarray(initial, dtype=float)
    if p0.shape != (n,) or not np.all(np.isfinite(p0)) or np.any(p0 < 0) or p0.sum() <= 0:
        raise DPHMMParameterError(f"initial must be a distribution over {n} states")
    return p0 / p0.sum()


class DPHMM:
    """The DPHMM release mechanism (Algorithm 2) for one Markov model and policy graph.

    Parameters: ``transition`` (n, n) row-stochastic M; ``queries`` an (n, d) query f (rows
    f(s_i)) or a mapping name -> query for several queries per timestamp; ``policy`` a
    :class:`PolicyGraph` over the same n states; ``eps`` a float or a mapping name -> eps;
    ``initial`` the adversary's p_0^+ (default uniform; the first prior is p_0^+ M);
    ``repair`` "greedy" (Algorithm 1), "min_area" (Algorithm 3) or "none" (raise
    :class:`~smc_hmm.errors.ExposedStateError` on exposure); ``delta`` switches C_t to the
    delta-location set of [27]; ``outside`` "raise" or "surrogate" (default: "raise", or
    "surrogate" with ``delta``); ``budget`` caps the Theorem 7.2 total; ``rng`` the K-norm
    noise's randomness (:func:`smc_hmm.dp.knorm.noise_source`: default the OS CSPRNG; a
    seeded :class:`~smc_hmm.dp.random.DPRandom` or a numpy Generator for INSECURE
    reproducible experiments), named by ``randomness``.
    """

    def __init__(
        self,
        transition: object,
        queries: object,
        policy: PolicyGraph,
        eps: float | Mapping[str, float],
        *,
        initial: object | None = None,
        repair: str = "greedy",
        delta: float | None = None,
        outside: str | None = None,
        budget: float | None = None,
        rng: DPRandom | np.random.Generator | None = None,
        tol: float = DEFAULT_TOL,
    ) -> None:
        self.transition = check_transition(transition)
        n = self.transition.shape[0]
        self.n = n
        self.queries = _check_queries(queries, n)
        self.eps = _check_eps(eps, self.queries)
        self.policy = _check_policy(policy, n)
        if repair not in ("greedy", "min_area", "none"):
            raise DPHMMParameterError(f"repair must be 'greedy', 'min_area' or 'none': {repair!r}")
        self.repair = repair
        self.delta, self.outside = _check_outside(delta, outside)
        self.tol = tol
        self.rng = noise_source(rng)
        self.randomness = self.rng.description
        self.ledger = CompositionLedger(budget)
        p0 = _check_initial(initial, n)
        self.posterior = p0
        self.support = p0 > 0
        self._reach = (self.transition > 0).astype(np.float64)
        self.t = 0

    @classmethod
    def location_set_baseline(
        cls,
        transition: object,
        queries: object,
        eps: float | Mapping[str, float],
        delta: float = 0.01,
        **kwargs,
    ) -> DPHMM:
        """The delta-location-set baseline of [27] (Theorem 4.1): a complete policy graph on
        the delta-location set, surrogates for a true state outside it."""
        m = check_transition(transition)
        return cls(m, queries, complete_graph(m.shape[0]), eps, delta=delta, **kwargs)

    def prior(self) -> tuple[np.ndarray, np.ndarray]:
        """(p_{t+1}^-, its exact support) from the current posterior."""
        p = self.posterior @ self.transition
        support = (self.support.astype(np.float64) @ self._reach) > 0
        return p, support

    def release(self, true_state: int) -> list[ReleaseRecord]:
        """Run one timestamp of Algorithm 2 for the true state; one record per query."""
        start = time.perf_counter()
        if isinstance(true_state, bool) or not isinstance(true_state, numbers.Integral):
            raise UnknownStateError(f"the true state must be an integer, got {true_state!r}")
        (s_true,) = state_indices(int(true_state), self.n, "true state")
        prior, support = self.prior()
        cmask = self._constraint(prior, support, s_true)
        cidx = np.flatnonzero(cmask)
        t = self.t + 1
        sidx = np.flatnonzero(support)
        pending = self._protect(self.policy.constrain(cidx), cmask, sidx, s_true)
        self.ledger.check(sum(p[-1] for p in pending))
        results, loglik = self._draw(pending, sidx, s_true)
        self._update_posterior(prior, sidx, loglik)
        self.t = t
        seconds = time.perf_counter() - start
        return [self._record(t, cidx, s_true, seconds, *result) for result in results]

    def _constraint(self, prior: np.ndarray, support: np.ndarray, s_true: int) -> np.ndarray:
        """The mask of C_t (Definition 4.1; the delta-location set with ``delta``); a true
        state outside it is refused unless surrogates stand in for it."""
        if not support.any():
            raise EmptyConstraintError("C_t is empty")
        if self.delta is None:
            cmask = support  # C_t (Definition 4.1), tracked exactly: immune to underflow
        else:
            cmask = delta_location_set(np.where(support, prior, 0.0), self.delta)
            if not cmask.any():
                raise EmptyConstraintError("the delta-location set is empty")
        if not cmask[s_true] and self.outside == "raise":
            raise StateOutsideConstraintError(
                f"the true state {s_true} has prior probability 0 at t={self.t + 1}: "
                "it is not in C_t (the Markov model does not allow this trace)"
            )
        return cmask

    def _protect(self, graph_t, cmask: np.ndarray, sidx: np.ndarray, s_true: int) -> list:
        """Per query, before any noise: the protectable graph on C_t and its body, the
        surrogate of every support state, the released state and the constrained eps."""
        cidx = np.flatnonzero(cmask)
        pending = []
        for name, f in self.queries.items():
            eps = self.eps[name]
            rep = protectable_graph(graph_t, f, self.repair, tol=self.tol)
            body = rep.body
            # surrogate of every state in the support: itself in C_t, else the nearest of C_t
            surr = sidx.copy()
            out = ~cmask[sidx]
            if out.any():
                near = np.argmin(cdist(f[sidx[out]], f[cidx]), axis=1)
                surr[out] = cidx[near]
            s_rel = s_true if cmask[s_true] else int(cidx[np.argmin(cdist(f[[s_true]], f[cidx]))])
            c_eps = constrained_epsilon(eps, body, f, cidx)
            pending.append((name, f, eps, rep, body, surr, s_rel, c_eps))
        return pending

    def _draw(self, pending: list, sidx: np.ndarray, s_true: int) -> tuple[list, np.ndarray]:
        """The K-norm release of each query, and the log-likelihood of every support state
        given the releases (its surrogate's answer against each z)."""
        loglik = np.zeros(sidx.size)
        results = []
        for name, f, eps, rep, body, surr, s_rel, c_eps in pending:
            if body.rank == 0:  # all candidate answers coincide with f(s_rel): nothing to hide
                z = f[s_rel].copy()
                sampler = body.sampler
            else:
                mech = KNormMechanism(body, eps, self.rng)
                rel = mech.release(f[s_rel])
                z, sampler = rel.value, rel.sampler
            loglik += -eps * body.gauge(z - f[surr])
            dop = int(degree_of_protection(rep.graph, f, [s_true], body=body, tol=self.tol)[0])
            results.append((name, f, eps, rep, body, s_rel, c_eps, z, sampler, dop))
        return results, loglik

    def _update_posterior(self, prior: np.ndarray, sidx: np.ndarray, loglik: np.ndarray) -> None:
        """The posterior (equation (2)) on the exact support."""
        keep = np.isfinite(loglik)
        post = np.zeros(self.n)
        w = np.where(keep, loglik - np.max(loglik[keep]), -np.inf)
        post[sidx] = prior[sidx] * np.exp(w)
        if post.sum() <= 0:  # every support probability underflowed: fall back to the likelihood
            post[sidx] = np.exp(w)
        self.posterior = post / post.sum()
        self.support = np.zeros(self.n, dtype=bool)
        self.support[sidx[keep]] = True

    def _record(
        self, t, cidx, s_true, seconds, name, f, eps, rep, body, s_rel, c_eps, z, sampler, dop
    ) -> ReleaseRecord:
        """One query's release at ``t``, charged to the composition ledger."""
        self.ledger.record(t, name, eps, c_eps)
        ts_eps, ts_c = self.ledger.timestamp(t)
        return ReleaseRecord(
            t=t,
            query=name,
            z=z,
            epsilon=eps,
            constrained_epsilon=c_eps,
            timestamp_epsilon=ts_eps,
            timestamp_constrained_epsilon=ts_c,
            sequence_constrained_epsilon=self.ledger.sequence(),
            constraint=cidx,
            added_edges=rep.added,
            exposed=rep.exposed,
            rank=body.rank,
            volume=body.volume,
            sampler=sampler,
            seconds=seconds,
            private=ReleaseDiagnostics(
                true_state=int(s_true),
                released_state=int(s_rel),
                true_value=f[s_true].copy(),
                dop=dop,
                error=float(np.linalg.norm(z - f[s_true])),
            ),
        )

    def run(self, states: Sequence[int]) -> list[list[ReleaseRecord]]:
        """Release a whole trace s*_1, s*_2, ... (one list of records per timestamp)."""
        return [self.release(s) for s in states]
