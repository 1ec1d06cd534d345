"""Policy graphs, sensitivity hulls, degree of protection and protectable graphs for DPHMM.

DPHMM paper (Xiao et al., seeds 001/004):

- section 4.2: policy graphs over the states 0..n-1 (an undirected edge = a pair of states
  to be made indistinguishable): complete, categorical (disjoint cliques), utility
  (r-distance in measurement space) and one-step transition protection
  (s_j -- s_k iff some s_i has m_ij > 0 and m_ik > 0, i.e. s_j and s_k can both be reached
  from the same previous state in one step), plus user-supplied edge lists;
- Definition 4.1: the constraint C_t = {s : p_t^-(s) > 0}; the constrained graph G n C_t is
  the induced subgraph: the nodes outside C_t are removed *with their edges* and nothing is
  re-connected through them (Figure 3(d), Example 4.1); only the protectable-graph step adds
  edges;
- Definition 5.1: the sensitivity hull K = Conv{f(s_j) - f(s_k) : s_j -- s_k};
- Definition 5.2: DoP(s_i) = |{s_j in C_t : f(s_j) in f(s_i) + K}| (>= 1); a state with
  DoP = 1 is exposed, a graph whose states all have DoP > 1 is protectable (Def. 5.3);
- section 6.1: repair by the greedy Algorithm 1 (connect each exposed state to its nearest
  state in measurement space) or by minimum area / volume (Algorithm 3, appendix 10.3).

See ``docs/dphmm.md``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull
from scipy.spatial.distance import cdist

from smc_hmm.dp.knorm import DEFAULT_TOL, ConvexBody, span_basis
from smc_hmm.dp.params import check_points
from smc_hmm.errors import (
    DPHMMParameterError,
    EmptyConstraintError,
    ExposedStateError,
    UnknownStateError,
)

__all__ = [
    "PolicyGraph",
    "RepairResult",
    "categorical_graph",
    "check_query",
    "complete_graph",
    "constraint_set",
    "degree_of_protection",
    "delta_location_set",
    "exposed_states",
    "graph_from_edges",
    "l1_sensitivity",
    "protectable_graph",
    "sensitivity_hull",
    "sensitivity_points",
    "transition_graph",
    "utility_graph",
]

_METRICS = {"l2": "euclidean", "l1": "cityblock", "linf": "chebyshev"}


def _check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise DPHMMParameterError(f"the number of states must be an integer >= 1, got {n!r}")
    return int(n)


def check_query(f: object, n: int | None = None) -> np.ndarray:
    """Validate a measurement query: an (n, d) finite array whose row i is f(s_i)
    (a 1-D array is a one-dimensional query)."""
    arr = check_points(f, "the query", error=DPHMMParameterError)
    if n is not None and arr.shape[0] != n:
        raise DPHMMParameterError(f"the query has {arr.shape[0]} rows for {n} states")
    return arr


def state_indices(states: object, n: int, what: str = "state") -> np.ndarray:
    arr = np.asarray(states)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise UnknownStateError(f"a boolean {what} mask must have shape ({n},)")
        return np.flatnonzero(arr)
    arr = np.atleast_1d(arr)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise UnknownStateError(f"{what} indices must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False).ravel()
    bad = arr[(arr < 0) | (arr >= n)]
    if bad.size:
        raise UnknownStateError(f"unknown {what}(s) {bad[:5].tolist()}: states are 0..{n - 1}")
    return arr


class PolicyGraph:
    """An undirected policy graph over states 0..n-1, restricted to the active ``nodes``.

    ``adjacency`` is a symmetric boolean (n, n) matrix without diagonal; ``nodes`` is the
    boolean mask of active states (all of them for an unconstrained graph, C_t for
    G n C_t).  ``cliques`` optionally lists groups of active states that are pairwise
    connected (complete and categorical graphs): the sensitivity hull of a clique is then
    computed from the extreme points of f over it, not from its O(n^2) edges.
    """

    def __init__(
        self,
        adjacency: np.ndarray,
        *,
        nodes: np.ndarray | None = None,
        cliques: Sequence[np.ndarray] = (),
        name: str = "custom",
    ) -> None:
        adj = np.array(adjacency, dtype=bool)
        if adj.ndim != 2 or adj.shape[0] != adj.shape[1] or adj.shape[0] == 0:
            raise DPHMMParameterError(f"adjacency must be square (n, n), got {adj.shape}")
        n = adj.shape[0]
        adj = adj | adj.T
        np.fill_diagonal(adj, False)
        if nodes is None:
            active = np.ones(n, dtype=bool)
        else:
            active = np.zeros(n, dtype=bool)
            active[state_indices(nodes, n, "node")] = True
        adj &= active[:, None] & active[None, :]
        self.n = n
        self.adjacency = adj
        self.nodes = active
        self.cliques = tuple(
            c for c in (np.asarray(c, dtype=np.int64) for c in cliques) if c.size >= 2
        )
        self.name = name
        self.adjacency.flags.writeable = False
        self.nodes.flags.writeable = False

    # -- structure ------------------------------------------------------------------------

    @property
    def active(self) -> np.ndarray:
        """Indices of the active states."""
        return np.flatnonzero(self.nodes)

    @property
    def edges(self) -> np.ndarray:
        """The edges as an (m, 2) array of pairs i < j."""
        i, j = np.nonzero(np.triu(self.adjacency, 1))
        return np.stack([i, j], axis=1)

    @property
    def n_edges(self) -> int:
        return int(np.count_nonzero(self.adjacency)) // 2

    def neighbours(self, state: int) -> np.ndarray:
        """N(s) \\ {s}: the states connected to ``state``."""
        (s,) = state_indices(state, self.n)
        return np.flatnonzero(self.adjacency[s])

    @property
    def isolated(self) -> np.ndarray:
        """Active states without neighbours (candidates for exposure)."""
        return np.flatnonzero(self.nodes & ~self.adjacency.any(axis=1))

    def constrain(self, constraint: object) -> PolicyGraph:
        """G n C: keep the active states in ``constraint`` (indices or a mask) and the edges
        between them; the edges of removed states disappear and are not re-connected."""
        keep = np.zeros(self.n, dtype=bool)
        keep[state_indices(constraint, self.n, "constraint state")] = True
        keep &= self.nodes
        cliques = [c[keep[c]] for c in self.cliques]
        return PolicyGraph(self.adjacency, nodes=keep, cliques=cliques, name=self.name)

    def with_edges(self, pairs: object) -> PolicyGraph:
        """A supergraph with the extra undirected edges ``pairs`` ((m, 2) state indices)."""
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        state_indices(arr.ravel(), self.n)
        if arr.size and not np.all(self.nodes[arr]):
            raise UnknownStateError("an added edge names a state outside the active nodes")
        adj = self.adjacency.copy()
        adj[arr[:, 0], arr[:, 1]] = True
        adj[arr[:, 1], arr[:, 0]] = True
        return PolicyGraph(adj, nodes=self.nodes, cliques=self.cliques, name=self.name)

    def __repr__(self) -> str:
        return (
            f"PolicyGraph(name={self.name!r}, n={self.n}, active={int(self.nodes.sum())}, "
            f"edges={self.n_edges})"
        )


# -- constructors (section 4.2) ----------------------------------------------------------


def complete_graph(n: int) -> PolicyGraph:
    """G_cplt: every pair of states is connected (Figure 5(a))."""
    n = _check_n(n)
    adj = ~np.eye(n, dtype=bool)
    return PolicyGraph(adj, cliques=[np.arange(n)], name="complete")


def categorical_graph(labels: Sequence[Hashable]) -> PolicyGraph:
    """G_categ: disjoint cliques, one per category (Figure 5(b)); ``labels[i]`` is the
    category of state i."""
    labels = list(labels)
    _check_n(len(labels))
    codes: dict[Hashable, int] = {}
    try:
        idx = np.array([codes.setdefault(lab, len(codes)) for lab in labels])
    except TypeError as exc:
        raise DPHMMParameterError(f"category labels must be hashable: {exc}") from None
    adj = idx[:, None] == idx[None, :]
    cliques = [np.flatnonzero(idx == c) for c in range(len(codes))]
    return PolicyGraph(adj, cliques=cliques, name="categorical")


def utility_graph(
    coords: object,
    r: float,
    metric: str = "l2",
    *,
    distances: object | None = None,
) -> PolicyGraph:
    """G_util: s -- s' iff dist(f(s), f(s')) <= r (Figure 5(c)).

    ``coords`` (n, d) are the points (typically f itself) and ``metric`` is "l2", "l1" or
    "linf"; alternatively pass a symmetric (n, n) ``distances`` matrix (``coords`` may then
    be None).
    """
    if isinstance(r, bool) or not isinstance(r, numbers.Real) or not math.isfinite(r) or r < 0:
        raise DPHMMParameterError(f"r must be finite and >= 0, got {r!r}")
    if distances is not None:
        dist = np.asarray(distances, dtype=float)
        if dist.ndim != 2 or dist.shape[0] != dist.shape[1] or dist.shape[0] == 0:
            raise DPHMMParameterError(f"distances must be square (n, n), got {dist.shape}")
        if not np.all(np.isfinite(dist)) or np.any(dist < 0) or not np.allclose(dist, dist.T):
            raise DPHMMParameterError("distances must be finite, >= 0 and symmetric")
    else:
        if metric not in _METRICS:
            raise DPHMMParameterError(f"metric must be one of {sorted(_METRICS)}, got {metric!r}")
        pts = check_query(coords)
        dist = cdist(pts, pts, metric=_METRICS[metric])
    adj = dist <= r * (1.0 + 1e-12)
    return PolicyGraph(adj, name=f"utility(r={r:g})")


def transition_graph(transition: object) -> PolicyGraph:
    """G_trs: s_j -- s_k iff m_ij > 0 and m_ik > 0 for some state s_i (Figure 5(d)): states
    that can follow the same previous state are indistinguishable."""
    m = np.asarray(transition, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise DPHMMParameterError(f"the transition matrix must be square, got {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise DPHMMParameterError("the transition matrix must be finite and >= 0")
    b = (m > 0).astype(np.float64)
    adj = (b.T @ b) > 0
    return PolicyGraph(adj, name="one-step transition")


def graph_from_edges(n: int, edges: Iterable[Sequence[int]]) -> PolicyGraph:
    """A user-supplied policy graph over states 0..n-1 from undirected (i, j) pairs; a pair
    naming a state outside 0..n-1 raises :class:`UnknownStateError`; self-loops are
    ignored (s is always in its own neighbourhood)."""
    n = _check_n(n)
    pairs = list(edges)
    arr = np.asarray(pairs, dtype=object).reshape(-1, 2) if pairs else np.zeros((0, 2))
    for i, j in arr:
        for s in (i, j):
            if isinstance(s, bool) or not isinstance(s, numbers.Integral):
                raise UnknownStateError(f"edge ({i!r}, {j!r}) names a non-integer state")
            if not 0 <= s < n:
                raise UnknownStateError(
                    f"edge ({i}, {j}) names unknown state {s}: states are 0..{n - 1}"
                )
    idx = arr.astype(np.int64)
    adj = np.zeros((n, n), dtype=bool)
    adj[idx[:, 0], idx[:, 1]] = True
    return PolicyGraph(adj, name="user")


# -- constraints (Definition 4.1, Theorem 4.1) -------------------------------------------


def _check_prior(prior: object) -> np.ndarray:
    p = np.asarray(prior, dtype=float)
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0):
        raise DPHMMParameterError("the prior must be a non-empty 1-D vector of finite values >= 0")
    return p


def constraint_set(prior: object) -> np.ndarray:
    """C_t = {s_i : p_t^-[i] > 0} as a boolean mask (Definition 4.1)."""
    mask = _check_prior(prior) > 0
    if not mask.any():
        raise EmptyConstraintError("C_t is empty: the prior has no positive entry")
    return mask


def delta_location_set(prior: object, delta: float) -> np.ndarray:
    """The delta-location set of [27] (Theorem 4.1): the smallest set of states whose prior
    mass is >= 1 - delta (most probable first), as a boolean mask."""
    p = _check_prior(prior)
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 <= delta < 1:
        raise DPHMMParameterError(f"delta must be in [0, 1), got {delta!r}")
    total = p.sum()
    if total <= 0:
        raise EmptyConstraintError("the delta-location set is empty: the prior sums to 0")
    order = np.argsort(-p, kind="stable")
    cum = np.cumsum(p[order]) / total
    m = int(np.searchsorted(cum, 1.0 - delta - 1e-12)) + 1
    m = min(m, int(np.count_nonzero(p)))
    mask = np.zeros(p.size, dtype=bool)
    mask[order[:m]] = True
    return mask


# -- sensitivity hull (Definition 5.1) ---------------------------------------------------


def extreme_points(points: np.ndarray) -> np.ndarray:
    """A subset of ``points`` with the same convex hull (hull vertices; flat sets handled)."""
    if len(points) <= 2:
        return points
    centre = points.mean(axis=0)
    x = points - centre
    scale = np.abs(x).max()
    if scale == 0:
        return points[:1]
    basis = span_basis(x / scale)
    k = basis.shape[1]
    y = (x / scale) @ basis
    if k == 1:
        return points[[int(np.argmin(y[:, 0])), int(np.argmax(y[:, 0]))]]
    if len(points) <= k + 1:
        return points
    return points[ConvexHull(y).vertices]


def sensitivity_points(graph: PolicyGraph, f: object) -> np.ndarray:
    """The distinct points of Delta f = {f(s_j) - f(s_k), f(s_k) - f(s_j) : s_j -- s_k},
    or a subset with the same convex hull (clique blocks contribute only differences of
    their extreme points).
    Shape (m, d); m = 0 for a graph without edges."""
    if not isinstance(graph, PolicyGraph):
        raise DPHMMParameterError(f"graph must be a PolicyGraph, got {type(graph).__name__}")
    fv = check_query(f, graph.n)
    adj = graph.adjacency
    parts = []
    if graph.cliques:
        covered = np.zeros_like(adj)
        for c in graph.cliques:
            c = c[graph.nodes[c]]
            if c.size < 2:
                continue
            covered[np.ix_(c, c)] = True
            ext = extreme_points(fv[c])
            diff = (ext[:, None, :] - ext[None, :, :]).reshape(-1, fv.shape[1])
            parts.append(diff)
        adj = adj & ~covered
    i, j = np.nonzero(adj)  # both orientations: the hull is symmetric
    parts.append(fv[i] - fv[j])
    pts = np.concatenate(parts, axis=0)
    pts = pts[np.any(pts != 0, axis=1)]
    if len(pts) == 0:
        return np.zeros((0, fv.shape[1]))
    order = np.lexsort(pts.T[::-1])  # distinct rows, sorted (faster than unique(axis=0))
    pts = pts[order]
    keep = np.ones(len(pts), dtype=bool)
    keep[1:] = np.any(pts[1:] != pts[:-1], axis=1)
    return pts[keep]


def sensitivity_hull(graph: PolicyGraph, f: object, *, tol: float = DEFAULT_TOL) -> ConvexBody:
    """K(G, f) = Conv(Delta f) as a :class:`ConvexBody` (the point body {0} if no edge
    joins states with different answers)."""
    pts = sensitivity_points(graph, f)
    if len(pts) == 0:
        return ConvexBody.from_points(np.zeros((1, check_query(f).shape[1])), tol=tol)
    return ConvexBody.from_points(pts, tol=tol)


def l1_sensitivity(graph: PolicyGraph, f: object) -> float:
    """The L1-norm sensitivity max ||f(s_j) - f(s_k)||_1 over the edges (0 without edges)."""
    pts = sensitivity_points(graph, f)
    return float(np.abs(pts).sum(axis=1).max()) if len(pts) else 0.0


# -- degree of protection (Definition 5.2, Algorithm 4) ----------------------------------


def degree_of_protection(
    graph: PolicyGraph,
    f: object,
    states: object | None = None,
    *,
    body: ConvexBody | None = None,
    tol: float = DEFAULT_TOL,
) -> np.ndarray:
    """DoP(s_i) = |{s_j active : f(s_j) - f(s_i) in K}| for each of ``states`` (default: the
    active states, in index order).  A state outside the active set is allowed: its DoP
    counts the active states in f(s_i) + K (it does not count itself)."""
    fv = check_query(f, graph.n)
    idx = graph.active if states is None else state_indices(states, graph.n)
    k_body = sensitivity_hull(graph, fv, tol=tol) if body is None else body
    act = graph.active
    if idx.size == 0 or act.size == 0:
        return np.zeros(idx.size, dtype=np.int64)
    out = np.empty(idx.size, dtype=np.int64)
    chunk = max(1, 2_000_000 // max(1, act.size * fv.shape[1]))
    for start in range(0, idx.size, chunk):
        sl = idx[start : start + chunk]
        diff = fv[act][None, :, :] - fv[sl][:, None, :]
        out[start : start + chunk] = np.count_nonzero(k_body.contains(diff, tol), axis=1)
    return out


def exposed_states(
    graph: PolicyGraph, f: object, *, body: ConvexBody | None = None, tol: float = DEFAULT_TOL
) -> np.ndarray:
    """Active states with DoP = 1 (only isolated states can be exposed)."""
    cand = graph.isolated
    if cand.size == 0:
        return cand
    dop = degree_of_protection(graph, f, cand, body=body, tol=tol)
    return cand[dop <= 1]


# -- protectable graph (section 6.1, Algorithms 1 and 3) ----------------------------------


@dataclass(frozen=True)
class RepairResult:
    """A protectable supergraph of G n C_t: the ``graph``, the ``added`` edges (k, 2) in the
    order they were chosen, the initially ``exposed`` states, the ``method`` and ``body``
    (the sensitivity hull of the repaired graph)."""

    graph: PolicyGraph
    added: np.ndarray
    exposed: np.ndarray
    method: str
    body: ConvexBody


def _rank_volume(points: np.ndarray) -> tuple[int, float]:
    """(rank of span, k-volume in the span) of Conv(points) for a symmetric point set."""
    scale = np.abs(points).max() if points.size else 0.0
    if scale == 0:
        return 0, 0.0
    x = points / scale
    basis = span_basis(x)
    k = basis.shape[1]
    y = x @ basis
    if k == 1:
        return 1, float((y.max() - y.min()) * scale)
    return k, float(ConvexHull(y).volume * scale**k)


def protectable_graph(
    graph: PolicyGraph,
    f: object,
    method: str = "greedy",
    *,
    tol: float = DEFAULT_TOL,
) -> RepairResult:
    """Repair G n C_t into a protectable graph.

    ``method="greedy"`` is Algorithm 1: each exposed state s_i is connected to its nearest
    active state in L2 (ties: lowest index).  ``method="min_area"`` is Algorithm 3 (2-D
    minimum area, appendix 10.3), generalised to any d: s_i is connected to the state whose
    new hull has the smallest (rank, k-volume), ties broken by L2 distance then index; in
    2-D with full-rank candidates this is exactly the paper's minimum area.  Exposed states
    are visited in index order; one that an earlier repair already protected (the hull only
    grows) is skipped.  ``method="none"`` raises :class:`ExposedStateError` if any state is
    exposed.
    """
    if method not in ("greedy", "min_area", "none"):
        raise DPHMMParameterError(f"method must be 'greedy', 'min_area' or 'none', got {method!r}")
    fv = check_query(f, graph.n)
    body = sensitivity_hull(graph, fv, tol=tol)
    exposed = exposed_states(graph, fv, body=body, tol=tol)
    if exposed.size and method == "none":
        raise ExposedStateError(
            f"states {exposed[:10].tolist()} have DoP = 1 under {graph.name!r} n C_t"
        )
    act = graph.active
    if exposed.size == 0 or act.size < 2:
        return RepairResult(graph, np.zeros((0, 2), dtype=np.int64), exposed, method, body)
    added: list[tuple[int, int]] = []
    current = graph
    pts = sensitivity_points(graph, fv)
    for s in exposed:
        if added and degree_of_protection(current, fv, [s], body=body, tol=tol)[0] > 1:
            continue
        others = act[act != s]
        dist = np.linalg.norm(fv[others] - fv[s], axis=1)
        if method == "greedy":
            j = int(others[np.argmin(dist)])
        else:
            keys = []
            for jj in others:
                v = fv[s] - fv[jj]
                rank, vol = _rank_volume(np.concatenate([pts, v[None], -v[None]]))
                keys.append((rank, float(f"{vol:.10e}")))
            keys_arr = np.array(keys)
            order = np.lexsort((others, dist, keys_arr[:, 1], keys_arr[:, 0]))
            j = int(others[order[0]])
        added.append((int(s), j))
        current = current.with_edges([(s, j)])
        v = fv[s] - fv[j]
        pts = np.concatenate([pts, v[None], -v[None]])
        body = sensitivity_hull(current, fv, tol=tol)
    return RepairResult(current, np.array(added, dtype=np.int64), exposed, method, body)
