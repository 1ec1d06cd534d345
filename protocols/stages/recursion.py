"""The forward recursion on the LOGSUM stage: public topology, step and termination plans.

Thesis 003, 4.2.1 (secure forward algorithm); the stage around it is
:mod:`protocols.stages.forward_scoring`, the secure stage :mod:`protocols.stages.logsum`
(its docstring states what Alice learns), the leakage statement ``docs/security.md``.

At each step Alice holds, for every state l, u_t(l) = log alpha_t(l) + rho_t(l), rho Bob's
accumulated blinds (integers at scale f).  One step is one LOGSUM round:

* ``v2`` (the default): the transition topology -- which a_lj are nonzero -- is public;
  targets are every state of every model, a target's elements its predecessors (``edges``
  layout: Alice normalises every target by its own leading predecessor, so no state is
  ever dropped and no possible sequence refused; five targets share a reply at 2048 bits).
* ``v1`` (kept as the thesis's layout): one value per state normalised per model
  (``shared`` layout, one reply ciphertext per state, g as wide as the key allows, and
  no slot noise: the thesis's exact sums, whose leak ``docs/security.md`` states); a
  state that falls more than about (g - 53) ln 2 nats behind its model's leader may be
  refused (:mod:`protocols.stages.forward_scoring`).

Bob's side is the same for both: per model, the reference is the smallest of its states'
blinds, the weights are the a_lj, and the stage returns each target's new blind
ref + z_j - Z; the next step's emission blind gamma_(t+1)(j) joins it.  The blinds of a
model's states therefore stay within Z + R nats of their reference (``spread_nats``).
The termination is the same round with one target per model, every state an element,
a = 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from protocols.stages.logsum import LogsumPlan, bob_coefficients, check_weights
from smc_hmm.errors import ProtocolError


def topology_of(transmat) -> list[list[int]]:
    """The public topology of a transition matrix: its nonzero edges [l, j]."""
    a = np.asarray(transmat, dtype=float)
    return [[int(l), int(j)] for l, j in zip(*np.nonzero(a > 0))]


def check_topology(topology, states: Sequence[int]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Validate a peer's topology (one edge list per model) against the public sizes."""
    if not isinstance(topology, list) or len(topology) != len(states):
        raise ProtocolError("malformed topology: one edge list per model expected")
    out = []
    for edges, n in zip(topology, states):
        if not isinstance(edges, list) or not 0 < len(edges) <= n * n:
            raise ProtocolError(f"malformed topology: 1..{n * n} edges expected per model")
        pairs = []
        for e in edges:
            if (
                not isinstance(e, list)
                or len(e) != 2
                or not all(isinstance(v, int) and 0 <= v < n for v in e)
            ):
                raise ProtocolError(f"malformed topology edge {e!r} for {n} states")
            pairs.append((e[0], e[1]))
        if len(set(pairs)) != len(pairs):
            raise ProtocolError("malformed topology: repeated edge")
        out.append(tuple(sorted(pairs, key=lambda p: (p[1], p[0]))))
    return tuple(out)


def transition_plan(spec, topology) -> LogsumPlan:
    """v2's step plan: targets are every state of every model, elements its predecessors."""
    preds, base = [], 0
    for edges, n in zip(topology, spec.states):
        by_target = [[] for _ in range(n)]
        for l, j in edges:
            by_target[j].append(base + l)
        preds += by_target
        base += n
    return LogsumPlan.build(preds, spec.prec.logsum, spec.key_bits)


def final_plan(spec) -> LogsumPlan:
    """v2's termination plan: one target per model, every state an element."""
    preds = [list(range(seg.start, seg.stop)) for seg in spec.segments]
    return LogsumPlan.build(preds, spec.prec.logsum, spec.key_bits)


def shared_plans(spec) -> tuple[LogsumPlan, LogsumPlan]:
    """v1's step and termination plans: one value per state, one target per reply, Alice's
    exponent as wide as the key allows (or the explicit ``exp_scale``)."""
    dense = [
        list(range(seg.start, seg.stop))
        for seg in spec.segments
        for _ in range(seg.start, seg.stop)
    ]
    most = max(spec.states)
    params = spec.prec.logsum
    g = spec.prec.exp_scale or LogsumPlan.widest_g(params, spec.key_bits, most)
    step = LogsumPlan.build(dense, params, spec.key_bits, layout="shared", g=g, noisy=False)
    final = LogsumPlan.build(
        [list(range(seg.start, seg.stop)) for seg in spec.segments],
        params,
        spec.key_bits,
        layout="shared",
        g=g,
        noisy=False,
    )
    return step, final


def check_models(transmats, spec) -> None:
    """Bob's local check before anything is sent: every nonzero a_lj above the floor."""
    for a in transmats:
        check_weights(a, spec.prec.logsum)


def references(rho, spec) -> list[int]:
    """Per model, the smallest of its states' blinds."""
    return [min(int(r) for r in rho[seg]) for seg in spec.segments]


def bob_step(rng, plan: LogsumPlan, transmats, rho, spec) -> tuple[list[list[int]], list[int]]:
    """One step's coefficients (per target, over its elements in plan order) and every
    state's new blind (before the next emission blind joins it)."""
    refs = references(rho, spec)
    model_of = np.repeat(np.arange(len(spec.states)), spec.states)
    starts = [seg.start for seg in spec.segments]
    weights, target_refs = [], []
    for j, preds in enumerate(plan.preds):
        k = int(model_of[j])
        a = transmats[k]
        weights.append([float(a[l - starts[k], j - starts[k]]) for l in preds])
        target_refs.append(refs[k])
    return bob_coefficients(rng, plan, weights, rho, target_refs, spec.prec.f)


def bob_final(rng, plan: LogsumPlan, rho, spec) -> tuple[list[list[int]], list[int]]:
    """The termination's coefficients (a = 1) and each model's final blind."""
    refs = references(rho, spec)
    weights = [[1.0] * len(p) for p in plan.preds]
    return bob_coefficients(rng, plan, weights, rho, refs, spec.prec.f)
