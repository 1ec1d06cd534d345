"""A synthetic grid-world mobility model and the DPHMM evaluation of the paper's section 8.

DPHMM paper (Xiao et al., seeds 001/004), section 8; ``docs/dphmm.md`` and
``examples/dphmm_gridworld.py``.  The paper learns Markov models from GeoLife and Gowalla
trajectories; we learn one the same way (counting transitions) from a documented simulator:

- the map is a ``width`` x ``height`` grid of cells (states; state index = y * width + x)
  and the query is f(s) = the cell's (x, y) coordinates times ``cell_size``;
- a walker has a position and a heading among the 8 king moves.  At every step it pauses in
  its cell with probability ``p_stay``; otherwise it keeps its heading with probability
  ``p_continue`` (if the move stays on the map), else it draws a new heading uniformly among
  the moves that stay on the map, and moves one cell;
- the Markov model is learned from simulated trajectories by counting cell-to-cell
  transitions, plus a pseudo-count on every physically possible move (the 3 x 3
  neighbourhood), so that the learned M allows every move the walker can make (the true
  state then never leaves C_t).  The walker's momentum is not a first-order Markov property
  of the cell, so the learned model is, as with real data, an approximation.

:func:`evaluate` runs DPHMM with the utility graph G_util(r) and the one-step transition
graph G_trs against the delta-location-set baseline (DPLS: a complete graph on the
delta-location set, delta = 0.01 as in the paper) and reports per release the runtime, the
DoP of the true state and the error ||z_t - f(s*_t)||_2; :func:`run_benchmark` reports the
runtime per release at the 20 x 20 grid.
"""

from __future__ import annotations

import numbers
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from smc_hmm.dp.dphmm import DPHMM, check_transition
from smc_hmm.dp.knorm import check_epsilon, default_rng
from smc_hmm.dp.policy import PolicyGraph, transition_graph, utility_graph
from smc_hmm.errors import DPHMMParameterError

__all__ = [
    "GridWorld",
    "MethodResult",
    "evaluate",
    "learn_markov_model",
    "run_benchmark",
    "sweep",
]

_MOVES = np.array([(dx, dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dx, dy) != (0, 0)])
METHODS = ("util", "trs", "dpls")


def _check_prob(p: object, name: str) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise DPHMMParameterError(f"{name} must be a probability in [0, 1], got {p!r}")
    return float(p)


def _check_count(v: object, name: str, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < minimum:
        raise DPHMMParameterError(f"{name} must be an integer >= {minimum}, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class GridWorld:
    """The grid-world walker (see the module docstring)."""

    width: int = 20
    height: int = 20
    p_continue: float = 0.7
    p_stay: float = 0.1
    cell_size: float = 1.0

    def __post_init__(self) -> None:
        _check_count(self.width, "width", 2)
        _check_count(self.height, "height", 2)
        _check_prob(self.p_continue, "p_continue")
        _check_prob(self.p_stay, "p_stay")
        if self.p_stay >= 1:
            raise DPHMMParameterError("p_stay must be < 1 (the walker must move)")
        check_epsilon(self.cell_size, "cell_size")

    @property
    def n_states(self) -> int:
        return self.width * self.height

    @property
    def coords(self) -> np.ndarray:
        """f: the (x, y) coordinates of every cell, shape (n, 2)."""
        idx = np.arange(self.n_states)
        return np.stack([idx % self.width, idx // self.width], axis=1) * float(self.cell_size)

    def neighbourhood(self) -> np.ndarray:
        """Boolean (n, n): the moves the walker can make (3 x 3 neighbourhood, incl. stay)."""
        xy = self.coords / self.cell_size
        return np.max(np.abs(xy[:, None, :] - xy[None, :, :]), axis=2) <= 1

    def simulate(
        self, n_steps: int, rng: np.random.Generator, start: int | None = None
    ) -> np.ndarray:
        """A trajectory of ``n_steps + 1`` states (the start, then n_steps moves)."""
        n_steps = _check_count(n_steps, "n_steps", 0)
        rng = default_rng(rng)
        w, h = self.width, self.height
        s = int(rng.integers(self.n_states)) if start is None else int(start)
        x, y = s % w, s // w
        heading = int(rng.integers(len(_MOVES)))
        out = np.empty(n_steps + 1, dtype=np.int64)
        out[0] = s
        u = rng.random((n_steps, 2))
        for t in range(n_steps):
            if u[t, 0] >= self.p_stay:
                dx, dy = _MOVES[heading]
                ok = 0 <= x + dx < w and 0 <= y + dy < h
                if not ok or u[t, 1] >= self.p_continue:
                    nx, ny = x + _MOVES[:, 0], y + _MOVES[:, 1]
                    valid = np.flatnonzero((nx >= 0) & (nx < w) & (ny >= 0) & (ny < h))
                    heading = int(valid[rng.integers(valid.size)])
                    dx, dy = _MOVES[heading]
                x, y = x + dx, y + dy
            out[t + 1] = y * w + x
        return out

    def simulate_many(self, count: int, n_steps: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` trajectories, shape (count, n_steps + 1)."""
        count = _check_count(count, "count")
        rng = default_rng(rng)
        return np.stack([self.simulate(n_steps, rng) for _ in range(count)])


def learn_markov_model(
    trajectories: Sequence[Sequence[int]] | np.ndarray,
    n_states: int,
    *,
    allowed: np.ndarray | None = None,
    pseudo_count: float = 0.5,
) -> np.ndarray:
    """Row-stochastic M from transition counts, plus ``pseudo_count`` on every ``allowed``
    move (boolean (n, n); default: none).  A state never left gets a self-loop."""
    n_states = _check_count(n_states, "n_states")
    counts = np.zeros((n_states, n_states))
    for traj in trajectories:
        tr = np.asarray(traj, dtype=np.int64)
        if tr.ndim != 1 or np.any((tr < 0) | (tr >= n_states)):
            raise DPHMMParameterError("trajectories must be 1-D sequences of states 0..n-1")
        np.add.at(counts, (tr[:-1], tr[1:]), 1.0)
    if allowed is not None:
        allowed = np.asarray(allowed, dtype=bool)
        if allowed.shape != (n_states, n_states):
            raise DPHMMParameterError(f"allowed must have shape ({n_states}, {n_states})")
        if isinstance(pseudo_count, bool) or not pseudo_count >= 0:
            raise DPHMMParameterError("pseudo_count must be >= 0")
        counts += pseudo_count * allowed
    rows = counts.sum(axis=1)
    empty = rows == 0
    counts[empty, empty] = 1.0
    return check_transition(counts / counts.sum(axis=1, keepdims=True))


@dataclass
class MethodResult:
    """Per-release metrics of one method: arrays of shape (n_sequences, n_steps)."""

    name: str
    seconds: np.ndarray
    dop: np.ndarray
    error: np.ndarray
    c_size: np.ndarray  # |C_t|

    def summary(self) -> dict:
        return {
            "ms_per_release_median": float(np.median(self.seconds) * 1e3),
            "ms_per_release_mean": float(np.mean(self.seconds) * 1e3),
            "ms_per_release_p95": float(np.percentile(self.seconds, 95) * 1e3),
            "dop_mean": float(np.mean(self.dop)),
            "error_mean": float(np.mean(self.error)),
            "error_rms": float(np.sqrt(np.mean(self.error**2))),
            "c_size_mean": float(np.mean(self.c_size)),
            "releases": int(self.seconds.size),
        }


def _setup(grid: GridWorld, seed: int, train_sequences: int, train_steps: int):
    rng = np.random.default_rng(seed)
    train = grid.simulate_many(train_sequences, train_steps, rng)
    m = learn_markov_model(train, grid.n_states, allowed=grid.neighbourhood())
    return m, rng


def _run(
    method: str,
    m: np.ndarray,
    f: np.ndarray,
    graphs: dict[str, PolicyGraph],
    eps: float,
    delta: float,
    traces: np.ndarray,
    rng: np.random.Generator,
) -> MethodResult:
    n_seq, length = traces.shape
    shape = (n_seq, length - 1)
    secs, dop, err, csz = (np.zeros(shape) for _ in range(4))
    for i, trace in enumerate(traces):
        init = np.zeros(m.shape[0])
        init[trace[0]] = 1.0  # the adversary knows the starting cell (worst case)
        if method == "dpls":
            mech = DPHMM.location_set_baseline(m, f, eps, delta=delta, initial=init, rng=rng)
        else:
            mech = DPHMM(m, f, graphs[method], eps, initial=init, rng=rng)
        for t, s in enumerate(trace[1:]):
            (rec,) = mech.release(int(s))
            secs[i, t] = rec.seconds
            dop[i, t] = rec.private.dop
            err[i, t] = rec.private.error
            csz[i, t] = rec.constraint.size
    return MethodResult(method, secs, dop, err, csz)


def evaluate(
    grid: GridWorld | None = None,
    *,
    n_sequences: int = 20,
    n_steps: int = 100,
    eps: float = 1.0,
    r: float = 2.0,
    delta: float = 0.01,
    methods: Sequence[str] = METHODS,
    train_sequences: int = 200,
    train_steps: int = 200,
    seed: int = 0,
) -> dict[str, MethodResult]:
    """Section 8's experiment: ``n_sequences`` simulated traces of ``n_steps`` releases each,
    for every method in ``methods`` ("util": G_util(r); "trs": G_trs; "dpls": the
    delta-location-set baseline).  All methods see the same traces."""
    grid = GridWorld() if grid is None else grid
    eps = check_epsilon(eps)
    bad = set(methods) - set(METHODS)
    if bad:
        raise DPHMMParameterError(f"unknown methods {sorted(bad)}: choose from {METHODS}")
    m, rng = _setup(grid, seed, train_sequences, train_steps)
    f = grid.coords
    traces = grid.simulate_many(n_sequences, n_steps, rng)
    graphs = {}
    if "util" in methods:
        graphs["util"] = utility_graph(f, r)
    if "trs" in methods:
        graphs["trs"] = transition_graph(m)
    return {
        name: _run(name, m, f, graphs, eps, delta, traces, np.random.default_rng([seed, k]))
        for k, name in enumerate(methods)
    }


def sweep(
    grid: GridWorld | None = None,
    *,
    eps_values: Sequence[float] = (0.2, 0.5, 1.0, 2.0, 5.0),
    r_values: Sequence[float] = (1.0, 1.5, 2.0, 3.0, 4.0),
    n_sequences: int = 20,
    n_steps: int = 100,
    r: float = 2.0,
    eps: float = 1.0,
    seed: int = 0,
) -> dict:
    """Mean DoP and error against eps (all methods, r fixed) and against r (G_util only,
    eps fixed; DPLS and G_trs do not depend on r), as in Figures 12 and 13."""
    by_eps = {
        float(e): {
            k: v.summary()
            for k, v in evaluate(
                grid, n_sequences=n_sequences, n_steps=n_steps, eps=e, r=r, seed=seed
            ).items()
        }
        for e in eps_values
    }
    by_r = {
        float(rv): evaluate(
            grid,
            n_sequences=n_sequences,
            n_steps=n_steps,
            eps=eps,
            r=rv,
            methods=("util",),
            seed=seed,
        )["util"].summary()
        for rv in r_values
    }
    return {"by_eps": by_eps, "by_r": by_r}


def run_benchmark(
    grid_size: int = 20,
    *,
    n_sequences: int = 4,
    n_steps: int = 50,
    eps: float = 1.0,
    r: float = 2.0,
    seed: int = 0,
) -> dict:
    """Runtime per release of the DPHMM release loop on a ``grid_size`` x ``grid_size``
    grid world for G_util(r), G_trs and the DPLS baseline, with DoP and error summaries.

    Returns a JSON-ready dict: {"benchmark", "grid", "n_states", "params", "machine",
    "methods": {name: summary}} where each summary has ``ms_per_release_median``,
    ``ms_per_release_mean`` and ``ms_per_release_p95`` (the whole Algorithm 2 step:
    prior, C_t, repair, hull, K-norm sample, posterior), ``dop_mean``, ``error_mean``,
    ``error_rms``, ``c_size_mean`` and ``releases``.
    """
    grid_size = _check_count(grid_size, "grid_size", 2)
    grid = GridWorld(width=grid_size, height=grid_size)
    start = time.perf_counter()
    res = evaluate(grid, n_sequences=n_sequences, n_steps=n_steps, eps=eps, r=r, seed=seed)
    return {
        "benchmark": "dphmm",
        "grid": [grid_size, grid_size],
        "n_states": grid.n_states,
        "params": {
            "n_sequences": n_sequences,
            "n_steps": n_steps,
            "eps": eps,
            "r": r,
            "delta": 0.01,
            "seed": seed,
        },
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "methods": {k: v.summary() for k, v in res.items()},
        "wall_seconds": time.perf_counter() - start,
    }
