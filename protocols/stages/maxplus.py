"""The max-plus recursion in garbled circuits: Viterbi's recursion, termination and
traceback on additive shares of the emissions, inside circuits Bob garbles (thesis 003,
2.2.3; ``docs/garbled.md``, "The Viterbi recursion").

Inputs, all mod 2^l (l bits, two's complement; every value and every difference of two
values a comparison meets is below 2^(l-1) in magnitude):

* the *row holder*: its shares of every frame's emission rows, added to each target's
  maximum;
* the *edge holder* (the model holder, ``edge_holder``: the garbler in spotting, the
  evaluator in speech mining): its shares, log pi and log a, folded into as few inputs as
  it can: v_0(j) = e_0(r_j) + log pi_j, and for every frame t >= 1 and edge (i -> j),
  beta_t(i, j) = log a_ij + e_t(r_j) (adding e_t(r_j) to every candidate of target j
  before the max instead of after it changes neither the max's argument nor its ties).

Alice's inputs reach the circuits through the session's OT pool, Bob's as his labels.

Circuits (a chain under one Delta; the labels of the state pass from one to the next as
*carried* wires, :data:`smc_hmm.gc.circuit.CARRY`, and never leave the parties):

1. ``init``: delta_0(j) = (a_0(r_j), v_0(j)) as a carry-save pair, no gate;
2. ``step`` (frames 1 .. T-1): every candidate delta(i) + beta_t(i, j) by one layer of
   full adders, the per-target maxima as lockstep tournaments of carry-save comparisons
   (:func:`smc_hmm.gc.arith.group_argmax`; ties to the lower predecessor, numpy's rule),
   the winner's one-hot pointer carried out, and delta_t(j) = max + a_t(r_j);
3. ``final``: per model the same tournament over its states: the one-hot q_(T-1) of the
   best path's last state (and, if the score is revealed, its value, to Alice);
4. ``back``: q_(t-1)(i) = XOR over edges (i -> j) of q_t(j) & pointer_t(i, j) (a path's
   predecessor is unique), and per frame and model the output Alice decodes: the state's
   index bits (``path``) or [the state is in the segment] (``segment``).

The ``model`` output (keyword recognition by Viterbi scores) keeps no pointers and has no
``back``: ``final`` adds each model's public offset (a garbage model's margin) to its best
score and gives Alice only the index of the best model (ties: the lowest index).

Who learns what (semi-honest garbler; see :mod:`protocols.stages.garbled` for what a
deviating Alice can still do with her inputs): Alice, the declared output bits (and the
score if revealed); everything else she holds is a label.  Bob, Alice's padded choice
bits (uniform).  Every circuit, and so every message, follows from the public layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from protocols.stages.garbled import choice_message, circuit_messages
from smc_hmm.gc import arith
from smc_hmm.gc.circuit import CARRY, ZERO, Circuit, CompiledCircuit

__all__ = ["MaxPlusLayout", "alice_maxplus", "bob_maxplus", "messages"]


@dataclass(frozen=True)
class MaxPlusLayout:
    """The public shape of one recursion: per global state its predecessors (ascending)
    and emission row, the models as (first state, states), per model the output's
    states (``segment``: a half-open range, or None) , the frames T and the width l."""

    preds: tuple[tuple[int, ...], ...]
    row_of: tuple[int, ...]
    models: tuple[tuple[int, int], ...]
    segments: tuple[tuple[int, int] | None, ...]
    length: int
    bits: int
    output: str = "path"
    reveal_score: bool = False
    #: who holds log pi and log a: ``garbler`` (Bob) or ``evaluator`` (Alice)
    edge_holder: str = "garbler"
    #: ``model`` output: the public offset added to each model's score (recursion scale)
    offsets: tuple[int, ...] = ()

    @property
    def keeps_pointers(self) -> bool:
        return self.output != "model"

    @property
    def row_holder(self) -> str:
        return "evaluator" if self.edge_holder == "garbler" else "garbler"

    @property
    def states(self) -> int:
        return len(self.preds)

    @property
    def rows(self) -> int:
        return max(self.row_of) + 1

    @property
    def edges(self) -> list[tuple[int, int]]:
        """(source, target) of every edge, by target then source: beta's order."""
        return [(i, j) for j, p in enumerate(self.preds) for i in p]

    def output_bits(self, model: int) -> int:
        if self.output == "segment":
            return 1
        return max(1, (self.models[model][1] - 1).bit_length())

    @property
    def evaluator_counts(self) -> list[int]:
        """Alice's input bits of each circuit of the chain (``init``, then every ``step``)."""
        return [self.init.input_count("evaluator")] + [self.step.input_count("evaluator")] * (
            self.length - 1
        )

    @property
    def evaluator_bits(self) -> int:
        return sum(self.evaluator_counts)

    # -- the circuits (public: both parties build the same) ------------------------------

    @cached_property
    def init(self) -> CompiledCircuit:
        c = Circuit()
        a = c.input(self.row_holder, (self.rows, self.bits))
        v = c.input(self.edge_holder, (self.states, self.bits))
        c.output(np.stack([a[list(self.row_of)], v], axis=-2), CARRY)
        return c.compile()

    @cached_property
    def step(self) -> CompiledCircuit:
        c, n, l = Circuit(), self.states, self.bits
        delta = c.input(CARRY, (n, 2, l))
        beta = c.input(self.edge_holder, (len(self.edges), l))
        a = c.input(self.row_holder, (self.rows, l))
        src = np.array([i for i, _ in self.edges])
        cand = arith.compress(c, delta[src, 0], delta[src, 1], beta)
        groups, onehot = self._groups([len(p) for p in self.preds])
        payload = onehot if self.keeps_pointers else None
        best, pointer = arith.group_argmax(c, cand, groups, payload, carry_save=True)
        c.output(arith.compress(c, best[:, 0], best[:, 1], a[list(self.row_of)]), CARRY)
        if self.keeps_pointers:
            kept = [pointer[j, : len(p)] for j, p in enumerate(self.preds)]
            c.output(np.concatenate(kept), CARRY)
        return c.compile()

    @cached_property
    def final(self) -> CompiledCircuit:
        c = Circuit()
        delta = c.input(CARRY, (self.states, 2, self.bits))
        groups, onehot = self._groups([n for _, n in self.models])
        payload = onehot if self.keeps_pointers else None
        best, last = arith.group_argmax(c, delta, groups, payload, carry_save=True)
        if self.reveal_score:
            c.output(arith.cs_value(c, best), "evaluator")
        if not self.keeps_pointers:  # the best model's index, to Alice
            shift = arith.constant(list(self.offsets) or [0] * len(self.models), self.bits)
            scored = arith.compress(c, best[:, 0], best[:, 1], shift)
            index = arith.constant(np.arange(len(self.models)), self.model_bits)
            c.output(
                arith.group_argmax(c, scored, [range(len(self.models))], index, True)[1],
                "evaluator",
            )
            return c.compile()
        c.output(np.concatenate([last[k, :n] for k, (_, n) in enumerate(self.models)]), CARRY)
        return c.compile()

    @property
    def model_bits(self) -> int:
        return max(1, (len(self.models) - 1).bit_length())

    @cached_property
    def back(self) -> CompiledCircuit:
        c, edges = Circuit(), self.edges
        q = c.input(CARRY, (self.states,))
        pointers = c.input(CARRY, (self.length - 1, len(edges)))
        targets = np.array([j for _, j in edges], dtype=np.int64)
        by_source = [[e for e, (i, _) in enumerate(edges) if i == s] for s in range(self.states)]
        width = max(len(e) for e in by_source)
        pad = np.array([e + [len(edges)] * (width - len(e)) for e in by_source])
        frames = [q]
        for t in reversed(range(self.length - 1)):
            terms = np.concatenate([c.and_(q[targets], pointers[t]), [ZERO]])
            q = terms[pad[:, 0]]
            for k in range(1, width):
                q = c.xor(q, terms[pad[:, k]])
            frames.append(q)
        for q in reversed(frames):
            c.output(self._marks(c, q), "evaluator")
        return c.compile()

    def _groups(self, sizes):
        """Consecutive groups of the given sizes and their members' one-hot constants."""
        width, at, groups, rows = max(sizes), 0, [], []
        for n in sizes:
            groups.append(list(range(at, at + n)))
            rows += [np.eye(width, dtype=np.int64)[i] for i in range(n)]
            at += n
        return groups, Circuit.constant(np.array(rows))

    def _marks(self, c: Circuit, q) -> np.ndarray:
        """One frame's output bits from the one-hot state q: per model the state's index
        bits, or [q is in the segment] (XORs of a one-hot vector: free)."""
        out = []
        for k, (base, n) in enumerate(self.models):
            if self.output == "segment":
                lo, hi = self.segments[k] or (0, 0)
                picks = [list(range(base + lo, base + hi))]
            else:
                picks = [
                    [base + i for i in range(n) if i >> b & 1] for b in range(self.output_bits(k))
                ]
            for states in picks:
                bit = ZERO
                for s in states:
                    bit = c.xor(bit, q[s])
                out.append(bit)
        return np.array(out, dtype=np.int64)

    # -- decoding ----------------------------------------------------------------------

    def decode(self, bits) -> list[list[int]]:
        """Per model the per-frame output values from the ``back`` circuit's bits."""
        widths = [self.output_bits(k) for k in range(len(self.models))]
        frames = np.asarray(bits, dtype=np.int64).reshape(self.length, sum(widths))
        out, at = [], 0
        for w in widths:
            weights = 1 << np.arange(w)
            out.append([int(v) for v in frames[:, at : at + w] @ weights])
            at += w
        return out


def _inputs(lay: MaxPlusLayout, shares, starts, trans, edges: bool) -> list[np.ndarray]:
    """One party's values of every circuit of the chain (init, then every step): its
    shares (T, rows) as they are (the row holder), or folded with log pi and log a (the
    edge holder: v_0, then beta_t per edge)."""
    shares = np.asarray(shares, dtype=object)
    if not edges:
        return [shares[t] for t in range(lay.length)]
    row_of = np.array(lay.row_of)
    targets = row_of[[j for _, j in lay.edges]]
    starts, trans = np.asarray(starts, dtype=object), np.asarray(trans, dtype=object)
    return [shares[0][row_of] + starts] + [trans + shares[t][targets] for t in range(1, lay.length)]


def _split(labels: np.ndarray, lay: MaxPlusLayout) -> list[np.ndarray]:
    return np.split(labels, np.cumsum(lay.evaluator_counts)[:-1])


def bob_maxplus(ctx, garbler, lay: MaxPlusLayout, shares, starts=None, trans=None, prefix="mp"):
    """Bob (garbler): the chain on his ``shares`` (T, rows) of the emissions, and log pi
    (``starts``, per state) and log a (``trans``, per edge in ``lay.edges`` order) where
    he is the edge holder; every value an integer at the recursion's scale."""
    l, none = lay.bits, np.zeros((0, 2), np.uint64)
    mine = _inputs(lay, shares, starts, trans, lay.edge_holder == "garbler")
    zero = _split(garbler.input_labels(ctx, lay.evaluator_bits, f"{prefix}.choice"), lay)
    _, carry = garbler.garble(
        ctx, lay.init, arith.to_bits(mine[0], l), zero[0], None, f"{prefix}.init"
    )
    state, pointers = 2 * lay.states * l, []
    for t in range(1, lay.length):
        bits = arith.to_bits(mine[t], l)
        _, out = garbler.garble(ctx, lay.step, bits, zero[t], carry, f"{prefix}.step")
        carry, pointer = out[:state], out[state:]
        pointers.append(pointer)
    _, last = garbler.garble(ctx, lay.final, [], none, carry, f"{prefix}.final")
    if lay.keeps_pointers:
        back = np.concatenate([last, *pointers])
        garbler.garble(ctx, lay.back, [], none, back, f"{prefix}.back")


def alice_maxplus(ctx, evaluator, lay: MaxPlusLayout, shares, starts=None, trans=None, prefix="mp"):
    """Alice (evaluator): the chain on her ``shares`` (T, rows), with log pi and log a where
    she is the edge holder (speech mining).  Returns (per model the per-frame outputs, per
    model the best score at the recursion's scale or None)."""
    l, none = lay.bits, np.zeros((0, 2), np.uint64)
    mine = _inputs(lay, shares, starts, trans, lay.edge_holder == "evaluator")
    bits = np.concatenate([arith.to_bits(x, l).reshape(-1) for x in mine])
    labels = _split(evaluator.input_labels(ctx, bits, f"{prefix}.choice"), lay)
    _, carry = evaluator.evaluate(ctx, lay.init, labels[0], None, f"{prefix}.init")
    state, pointers = 2 * lay.states * l, []
    for t in range(1, lay.length):
        _, out = evaluator.evaluate(ctx, lay.step, labels[t], carry, f"{prefix}.step")
        carry, pointer = out[:state], out[state:]
        pointers.append(pointer)
        ctx.progress("recursion, frames", t + 1, lay.length)  # public counts
    out, last = evaluator.evaluate(ctx, lay.final, none, carry, f"{prefix}.final")
    models, scores = len(lay.models), None
    if lay.reveal_score:
        scores = [int(v) for v in arith.from_bits(out[: models * l].reshape(models, l))]
    if not lay.keeps_pointers:  # ``model``: the best model's index
        return int(arith.from_bits(out[-lay.model_bits :], signed=False)), scores
    back = np.concatenate([last, *pointers])
    marks, _ = evaluator.evaluate(ctx, lay.back, none, back, f"{prefix}.back")
    return lay.decode(marks), scores


def messages(lay: MaxPlusLayout, prefix: str = "mp") -> list:
    """Every message of the chain, declared from the layout."""
    out = [choice_message(lay.evaluator_bits, f"{prefix}.choice")]
    for name in ("init", "step", "final", "back")[: 4 if lay.keeps_pointers else 3]:
        out.append(circuit_messages(getattr(lay, name), f"{prefix}.{name}")["tables"])
    return out
