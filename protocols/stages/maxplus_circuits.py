"""The circuits of the max-plus chain (:mod:`protocols.stages.maxplus`): ``inputs``,
``init``, ``step``, ``final`` and ``back``, each a function of the public layout only,
so both parties build the same (``docs/garbled.md``, "The Viterbi recursion").  The
module docstring of :mod:`protocols.stages.maxplus` describes what each computes; here
``lay`` is a :class:`~protocols.stages.maxplus.MaxPlusLayout`."""

from __future__ import annotations

import numpy as np

from protocols.stages import bound as bd
from smc_hmm.gc import arith, mac
from smc_hmm.gc.circuit import CARRY, ZERO, Circuit, CompiledCircuit, built_once

#: the output rules that compact the best path into a string of labels
STRING_RULES = ("string", "match")


@built_once
def build(lay, name: str, *args) -> CompiledCircuit:
    """Circuit ``name`` of the chain for ``lay``, built once per public shape and
    process."""
    return BUILDERS[name](lay, *args)


def _delta(lay, c: Circuit):
    return c.input(CARRY, (lay.states, 2, lay.bits) if lay.carry_save else (lay.states, lay.bits))


def _plus(lay, c: Circuit, x, y):
    """x + y, x a delta (a carry-save pair or a value), y a value: a delta."""
    if lay.carry_save:
        return arith.compress(c, x[..., 0, :], x[..., 1, :], y)
    return arith.add(c, x, y, depth="ripple")


def inputs_circuit(lay, frames: int, first: bool) -> CompiledCircuit:
    c = Circuit()
    values, ok = bd.reconstruct(c, lay.emissions, lay.rows, frames, lay.bits, first)
    c.output(values, CARRY)
    if ok is not None:
        c.output([ok], CARRY)
    return c.compile()


def init_circuit(lay) -> CompiledCircuit:
    c, l = Circuit(), lay.bits
    e = c.input(CARRY, (lay.rows, l))
    pi = c.input(lay.edge_holder, (lay.states, l))
    a = c.input(lay.edge_holder, (len(lay.edges), l))
    if lay.carry_save:  # a carry-save pair as it stands: no gate
        c.output(np.stack([e[list(lay.row_of)], pi], axis=-2), CARRY)
    else:
        c.output(arith.add(c, e[list(lay.row_of)], pi, depth="ripple"), CARRY)
    c.output(a, CARRY)
    return c.compile()


def step_circuit(lay) -> CompiledCircuit:
    c, l = Circuit(), lay.bits
    delta = _delta(lay, c)
    a = c.input(CARRY, (len(lay.edges), l))
    e = c.input(CARRY, (lay.rows, l))
    src = np.array([i for i, _ in lay.edges])
    cand = _plus(lay, c, delta[src], a)
    groups, onehot = _groups([len(p) for p in lay.preds])
    payload = onehot if lay.keeps_pointers else None
    best, pointer = arith.group_argmax(c, cand, groups, payload, lay.carry_save)
    c.output(_plus(lay, c, best, e[list(lay.row_of)]), CARRY)
    c.output(a, CARRY)
    if lay.keeps_pointers:
        kept = [pointer[j, : len(p)] for j, p in enumerate(lay.preds)]
        c.output(np.concatenate(kept), CARRY)
    return c.compile()


def final_circuit(lay) -> CompiledCircuit:
    c = Circuit()
    delta = _delta(lay, c)
    ok = _ok(lay, c)
    groups, onehot = _groups([n for _, n in lay.models])
    payload = onehot if lay.keeps_pointers else None
    best, last = arith.group_argmax(c, delta, groups, payload, lay.carry_save)
    if lay.reveal_score:
        value = arith.cs_value(c, best) if lay.carry_save else best
        c.output(c.and_(value, ok), "evaluator")
    if not lay.keeps_pointers:  # the best model's index, to Alice
        shift = arith.constant(list(lay.offsets) or [0] * len(lay.models), lay.bits)
        scored = _plus(lay, c, best, shift)
        index = arith.constant(np.arange(len(lay.models)), lay.model_bits)
        won = arith.group_argmax(c, scored, [range(len(lay.models))], index, True)[1]
        c.output(np.concatenate([[ok], c.and_(won.reshape(-1), ok)]), "evaluator")
        return c.compile()
    c.output(np.concatenate([last[k, :n] for k, (_, n) in enumerate(lay.models)]), CARRY)
    c.output([ok], CARRY)
    return c.compile()


def _ok(lay, c: Circuit):
    """The bit that gates every output: the binding check and the x^2 checks (1 when
    the emissions are plain shares)."""
    if not lay.is_bound:
        return np.int64(1)
    checks = c.input(CARRY, (1,))[0] if lay.emissions.checked else np.int64(1)
    d_a = c.input("evaluator", (mac.MAC_BITS,))
    d_b = c.input("garbler", (mac.MAC_BITS,))
    return c.and_(bd.check_equal(c, d_a, d_b), checks)


def back_circuit(lay) -> CompiledCircuit:
    c, edges = Circuit(), lay.edges
    q = c.input(CARRY, (lay.states,))
    ok = c.input(CARRY, (1,))[0]
    pointers = c.input(CARRY, (lay.length - 1, len(edges)))
    targets = np.array([j for _, j in edges], dtype=np.int64)
    by_source = [[e for e, (i, _) in enumerate(edges) if i == s] for s in range(lay.states)]
    width = max(len(e) for e in by_source)
    pad = np.array([e + [len(edges)] * (width - len(e)) for e in by_source])
    frames = [q]
    for t in reversed(range(lay.length - 1)):
        terms = np.concatenate([c.and_(q[targets], pointers[t]), [ZERO]])
        q = terms[pad[:, 0]]
        for k in range(1, width):
            q = c.xor(q, terms[pad[:, k]])
        frames.append(q)
    if lay.output in STRING_RULES:
        _string_outputs(lay, c, frames[::-1], ok)
        return c.compile()
    c.output([ok], "evaluator")
    for q in reversed(frames):
        c.output(c.and_(_marks(lay, c, q), ok), "evaluator")
    return c.compile()


def _string_outputs(lay, c: Circuit, frames, ok) -> None:
    """The path's string, compacted in the circuit: an entry into a labelled state (it
    holds the state now and did not the frame before) writes its label into the slot
    the one-hot count h points at, then moves h on (about L (B + 1) AND gates a
    frame).  ``string``: the slots (zero past L entries) and h, to Alice; ``match``:
    [slots and h equal Bob's reference] to Bob, the reference entering as his
    one-time-padded bits and Alice's pad."""
    L, B = lay.slots, lay.label_bits
    firsts = [s for s, d in enumerate(lay.entries) if d >= 0]
    labels = [lay.entries[s] for s in firsts]
    picks = [[i for i, d in enumerate(labels) if d >> b & 1] for b in range(B)]
    h = Circuit.constant([1] + [0] * (L + 1))
    slots = Circuit.constant(np.zeros((L, B), dtype=np.int64))
    before = None
    for q in frames:
        now = q[firsts]
        entered = now if before is None else c.and_(now, c.not_(before))
        before = now
        event = _xor_all(c, entered)
        digit = np.array([_xor_all(c, entered[i]) for i in picks], dtype=np.int64)
        slots = c.xor(slots, c.and_(h[:L, None], digit[None, :]))
        moved = np.concatenate([c.xor(h[: L + 1], np.concatenate([[ZERO], h[:L]])), h[L : L + 1]])
        h = c.xor(h, c.and_(np.full(L + 2, event), moved))
    if lay.output == "string":
        shown = c.and_(slots.reshape(-1), c.and_(ok, c.not_(h[L + 1])))
        c.output(np.concatenate([[ok], shown, c.and_(h, ok)]), "evaluator")
        return
    pad = c.input("evaluator", (lay.string_bits,))
    padded = c.input("garbler", (lay.string_bits,))
    same = c.not_(c.xor(np.concatenate([slots.reshape(-1), h]), c.xor(pad, padded)))
    c.output([c.and_(_and_all(c, same), ok)], "garbler")


def _groups(sizes):
    """Consecutive groups of the given sizes and their members' one-hot constants."""
    width, at, groups, rows = max(sizes), 0, [], []
    for n in sizes:
        groups.append(list(range(at, at + n)))
        rows += [np.eye(width, dtype=np.int64)[i] for i in range(n)]
        at += n
    return groups, Circuit.constant(np.array(rows))


def _marks(lay, c: Circuit, q) -> np.ndarray:
    """One frame's output bits from the one-hot state q: per model the state's index
    bits, or [q is in the segment] (XORs of a one-hot vector: free)."""
    out = []
    for k, (base, n) in enumerate(lay.models):
        if lay.output == "segment":
            lo, hi = lay.segments[k] or (0, 0)
            picks = [list(range(base + lo, base + hi))]
        else:
            picks = [[base + i for i in range(n) if i >> b & 1] for b in range(lay.output_bits(k))]
        for states in picks:
            bit = ZERO
            for s in states:
                bit = c.xor(bit, q[s])
            out.append(bit)
    return np.array(out, dtype=np.int64)


def _xor_all(c: Circuit, wires):
    out = ZERO
    for w in np.asarray(wires, dtype=np.int64).reshape(-1):
        out = c.xor(out, w)
    return out


def _and_all(c: Circuit, wires):
    """The AND of ``wires`` by a balanced tree (n - 1 AND gates, log2 n layers)."""
    wires = np.asarray(wires, dtype=np.int64).reshape(-1)
    while wires.size > 1:
        half = wires.size // 2
        joined = c.and_(wires[:half], wires[half : 2 * half])
        wires = np.concatenate([joined, wires[2 * half :]])
    return wires[0]


BUILDERS = {
    "inputs": inputs_circuit,
    "init": init_circuit,
    "step": step_circuit,
    "final": final_circuit,
    "back": back_circuit,
}
