"""The max-plus recursion in garbled circuits: Viterbi's recursion, termination and
traceback on shares of the emissions, inside circuits Bob garbles (thesis 003, 2.2.3;
``docs/garbled.md``, "The Viterbi recursion").

Inputs (all values at the recursion's scale s, l bits, two's complement; every value and
every difference of two values a comparison meets is below 2^(l-1) in magnitude):

* the emissions, as shares of Alice (the evaluator: she decrypted a masked value) and Bob
  (the mask), one per frame and emission row, in one of two public forms (:class:`
  Emissions`): *bound* (the default of every protocol whose client holds the frames:
  :mod:`protocols.stages.bound`, her full masked value, bound by a MAC she cannot forge,
  reconstructed at the program's scale f, floored to s and clamped to the public range
  [-2^keep, 2^keep)), or plain *shares* at scale s (speech mining: her own model's
  emissions on Bob's frames, where shifting them is choosing her model);
* the *edge holder*'s log pi and log a (the model holder, ``edge_holder``: the garbler in
  spotting, the evaluator in speech mining), entered once.

Circuits (a chain under one Delta; labels pass from one circuit to the next as *carried*
wires, :data:`smc_hmm.gc.circuit.CARRY`, and never leave the parties):

1. ``inputs``: every frame's emission from its shares (one wide circuit, its depth paid
   once), clamped; with bound inputs that carry phi, the check that each x^2 input is
   its x squared (:func:`protocols.stages.bound.square_check`);
2. ``init``: delta_0(j) = e_0(r_j) + log pi_j as a carry-save pair, no gate;
3. ``step`` (frames 1 .. T-1): every candidate delta(i) + log a_ij by one layer of full
   adders, the per-target maxima as lockstep tournaments of carry-save comparisons
   (:func:`smc_hmm.gc.arith.group_argmax`; ties to the lower predecessor, numpy's rule),
   the winner's one-hot pointer carried out, and delta_t(j) = max + e_t(r_j), one more
   layer: about 12 layers a frame;
4. ``final``: per model the same tournament over its states; with bound inputs the
   binding check (Alice's D_A against Bob's D_B) and the x^2 checks make one bit *ok*
   that gates every output: an Alice who entered other inputs sees ok = 0 and nothing
   else.  The ``model`` output adds each model's public offset (a garbage model's
   margin) to its best score and gives Alice the index of the best model;
5. ``back`` (``path`` and ``segment``): q_(t-1)(i) = XOR over edges (i -> j) of q_t(j) &
   pointer_t(i, j), and per frame and model the output Alice decodes (the state's index
   bits, or [the state is in the segment]), each ANDed with ok.  ``string``: the path never
   leaves the circuit; each entry into a labelled state (held now, not the frame
   before) writes its label into the slot a one-hot counter points at, and Alice decodes
   the L slots and the count (0 .. L, or "more than L"), ANDed with ok.  ``match``: the
   same string compared with Bob's one-time-padded reference (his garbler bits xor her
   pad), the bit [equal] AND ok to Bob, from a label she cannot forge.

The deltas are carry-save pairs (``carry_save``, the default: few layers a frame, the
numpy path's choice) or plain l-bit values (ripple-carry adders and comparisons: about
half the AND gates and l times the layers, which cost nothing on the native kernel).

Who learns what: Alice, her declared output bits and ok; everything else she holds is a
label, and her inputs are bound (:mod:`protocols.stages.bound`).  Bob, her padded choice
bits (uniform), and nothing from the check.  A Bob who garbles something else learns at
most whether Alice aborts (one bit).  Every circuit, and so every message, follows from
the public layout.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from protocols.stages import bound as bd
from protocols.stages.bound import Emissions
from protocols.stages.garbled import choice_message, circuit_messages
from protocols.stages.maxplus_circuits import STRING_RULES, build
from smc_hmm.errors import InvalidInputError, ProtocolError
from smc_hmm.gc import arith, mac
from smc_hmm.gc.circuit import CompiledCircuit

__all__ = ["Emissions", "MaxPlusLayout", "alice_maxplus", "bob_maxplus", "messages"]

#: Tweak base of the binding's label MACs (a domain of their own: :mod:`smc_hmm.gc.mac`).
MAC_TWEAK = 0


@dataclass(frozen=True)
class MaxPlusLayout:
    """The public shape of one recursion: per global state its predecessors (ascending)
    and emission row, the models as (first state, states), per model the output's states
    (``segment``: a half-open range, or None), the frames T, the width l and how the
    emissions enter (:class:`Emissions`)."""

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
    emissions: Emissions = Emissions(share_bits=0)
    #: ``string`` and ``match``: per state the label its entry starts (-1: none), and the
    #: public number of slots L of the compacted string
    entries: tuple[int, ...] = ()
    slots: int = 0
    #: keep each delta as a carry-save pair (few layers a frame: the numpy path's choice)
    #: or as one l-bit value (ripple-carry: about half the AND gates, l times the layers,
    #: which cost nothing on the native kernel)
    carry_save: bool = True

    def __post_init__(self):
        if self.output in STRING_RULES and (
            len(self.entries) != len(self.preds) or max(self.entries) < 0 or self.slots < 1
        ):
            raise InvalidInputError("a string output needs every state's entry label and L")
        em = self.emissions
        if em.bound is None and not 1 <= em.share_bits <= self.bits:
            raise InvalidInputError("plain emission shares need 1 to l bits")
        if em.bound is not None and em.keep + 2 > self.bits:
            raise InvalidInputError("the clamped emissions do not fit the recursion's width")

    @property
    def state_bits(self) -> int:
        """Wires of the carried deltas: (states, 2, l) carry-save or (states, l)."""
        return (2 if self.carry_save else 1) * self.states * self.bits

    @property
    def keeps_pointers(self) -> bool:
        return self.output != "model"

    @property
    def is_bound(self) -> bool:
        return self.emissions.bound is not None

    @property
    def states(self) -> int:
        return len(self.preds)

    @property
    def rows(self) -> int:
        return max(self.row_of) + 1

    @property
    def edges(self) -> list[tuple[int, int]]:
        """(source, target) of every edge, by target then source: log a's order."""
        return [(i, j) for j, p in enumerate(self.preds) for i in p]

    def output_bits(self, model: int) -> int:
        if self.output == "segment":
            return 1
        return max(1, (self.models[model][1] - 1).bit_length())

    @property
    def chunks(self) -> list[range]:
        """The frames of each ``inputs`` circuit (:func:`protocols.stages.bound.chunks`)."""
        return bd.chunks(self.length, build(self.frame_key, "inputs", 1, True).and_gates)

    def inputs(self, index: int) -> CompiledCircuit:
        """The ``inputs`` circuit of chunk ``index`` (cached per public shape)."""
        return build(self.frame_key, "inputs", len(self.chunks[index]), index == 0)

    @property
    def input_bits(self) -> list[int]:
        """Alice's input bits of each ``inputs`` circuit."""
        return [self.inputs(i).input_count("evaluator") for i in range(len(self.chunks))]

    @property
    def evaluator_bits(self) -> int:
        """Alice's input bits of the first choice message (``inputs`` and ``init``)."""
        return sum(self.input_bits) + self.init.input_count("evaluator")

    @property
    def check_bits(self) -> int:
        """Alice's input bits of ``final`` (D_A of the binding check)."""
        return self.final.input_count("evaluator")

    @property
    def cots(self) -> int:
        """The chain's OT budget: every input bit of Alice's, in its three choice messages
        (the inputs, the binding check, the PIN's pad), so one setup covers the run."""
        check = self.check_bits if self.is_bound else 0
        pin = self.string_bits if self.keeps_pointers and self.output == "match" else 0
        return self.evaluator_bits + check + pin

    @property
    def frame_key(self) -> MaxPlusLayout:
        """The layout without T: the key of every circuit but ``back``."""
        return replace(self, length=0)

    @property
    def init(self) -> CompiledCircuit:
        return build(self.frame_key, "init")

    @property
    def step(self) -> CompiledCircuit:
        return build(self.frame_key, "step")

    @property
    def final(self) -> CompiledCircuit:
        return build(self.frame_key, "final")

    @property
    def back(self) -> CompiledCircuit:
        return build(self, "back")

    @property
    def model_bits(self) -> int:
        return max(1, (len(self.models) - 1).bit_length())

    @property
    def label_bits(self) -> int:
        return max(1, max(self.entries).bit_length())

    @property
    def string_bits(self) -> int:
        """W: the compacted string's bits, L slots of labels then the count, one-hot over
        0 .. L and "more than L"."""
        return self.slots * self.label_bits + self.slots + 2


def _edge_inputs(lay: MaxPlusLayout, starts, trans) -> np.ndarray:
    """The edge holder's bits of ``init``: log pi (every state), then log a (every edge)."""
    l = lay.bits
    return np.concatenate(
        [arith.to_bits(np.asarray(v, dtype=object), l).reshape(-1) for v in (starts, trans)]
    )


def bob_maxplus(ctx, garbler, lay: MaxPlusLayout, shares, starts=None, trans=None, *,
                binding: bd.BobBound | None = None, reference=None, prefix="mp"):  # fmt: skip
    """Bob (garbler): the chain on his ``shares`` (T, rows) of the emissions (bound:
    :meth:`~protocols.stages.bound.BobBound.shares`; plain: at scale s), and log pi
    (``starts``, per state) and log a (``trans``, per edge in ``lay.edges`` order) where
    he is the edge holder; every value an integer at the recursion's scale.  ``match``:
    ``reference`` is his padded reference's W bits, and he returns the bit
    [string == reference] (else None)."""
    none = np.zeros((0, 2), np.uint64)
    em = lay.emissions
    width = em.bound.share_bits if em.bound is not None else em.share_bits
    zero = garbler.input_labels(ctx, lay.evaluator_bits, f"{prefix}.choice")
    cut = sum(lay.input_bits)
    if binding is not None:  # the corrections of her inputs' MACs, and the seed
        binding.key_message(ctx, zero[:cut], garbler.delta, MAC_TWEAK, garbler.peer)
    mine = arith.to_bits(np.asarray(shares, dtype=object), width).reshape(lay.length, -1)

    def run(i, labels, carry):
        bits = mine[lay.chunks[i].start : lay.chunks[i].stop].reshape(-1)
        return garbler.garble(ctx, lay.inputs(i), bits, labels, carry, f"{prefix}.inputs")[1]

    frames, checks = _run_inputs(ctx, lay, run, zero[:cut])
    edge = _edge_inputs(lay, starts, trans) if lay.edge_holder == "garbler" else []
    _, carry = garbler.garble(ctx, lay.init, edge, zero[cut:], frames[0], f"{prefix}.init")
    state, pointers = lay.state_bits, []
    for t in range(1, lay.length):
        _, out = garbler.garble(
            ctx, lay.step, [], none, np.concatenate([carry, frames[t]]), f"{prefix}.step"
        )
        keep = state + len(lay.edges) * lay.bits
        carry, pointer = out[:keep], out[keep:]
        pointers.append(pointer)
    bits, check_zero = [], none
    if lay.is_bound:
        bits = arith.to_bits(binding.check_value(), mac.MAC_BITS)
        check_zero = garbler.input_labels(ctx, lay.check_bits, f"{prefix}.check")
    _, last = garbler.garble(
        ctx, lay.final, bits, check_zero, np.concatenate([carry[:state], checks]),
        f"{prefix}.final",
    )  # fmt: skip
    if not lay.keeps_pointers:
        return None
    back = np.concatenate([last[:-1], last[-1:], *pointers])
    mine_back, zero_back = [], none
    if lay.output == "match":  # Bob's padded reference; the labels of Alice's pad
        mine_back = np.asarray(reference, dtype=np.uint8)
        zero_back = garbler.input_labels(ctx, lay.string_bits, f"{prefix}.pin")
    out, _ = garbler.garble(ctx, lay.back, mine_back, zero_back, back, f"{prefix}.back")
    return bool(out[0]) if lay.output == "match" else None


def _run_inputs(ctx, lay: MaxPlusLayout, run, labels):
    """The ``inputs`` circuits chunk by chunk (:func:`protocols.stages.bound.run_inputs`):
    per frame the labels of its emissions, and the checks' bit's.  They count to the
    ``emissions`` phase: composites sharing one table of rows run them once."""
    lengths = [len(chunk) for chunk in lay.chunks]
    with ctx.phase("emissions"):
        outs, checks = bd.run_inputs(lengths, lay.input_bits, lay.emissions.checked, run, labels)
    per = lay.rows * lay.bits
    frames = [out[k * per : (k + 1) * per] for out, n in zip(outs, lengths) for k in range(n)]
    return frames, checks


def alice_maxplus(ctx, evaluator, lay: MaxPlusLayout, shares, starts=None, trans=None, *,
                  binding: bd.AliceBound | None = None, reference=None, prefix="mp"):  # fmt: skip
    """Alice (evaluator): the chain on her ``shares`` (plain: (T, rows) at scale s; bound:
    ``binding``'s values), with log pi and log a where she is the edge holder (speech
    mining).  Returns (per model the per-frame outputs, per model the best score at the
    recursion's scale or None; ``string``: (the count, the labels or None); ``match``:
    nothing, her ``reference`` being the pad of Bob's); an ok bit of 0 (inputs that fail
    the binding) raises :class:`~smc_hmm.errors.ProtocolError` after her last message."""
    none = np.zeros((0, 2), np.uint64)
    if binding is not None:
        mine = binding.all_bits()
    else:
        mine = arith.to_bits(np.asarray(shares, dtype=object), lay.emissions.share_bits)
        mine = mine.reshape(-1)
    edge = _edge_inputs(lay, starts, trans) if lay.edge_holder == "evaluator" else []
    labels = evaluator.input_labels(ctx, np.concatenate([mine, edge]), f"{prefix}.choice")
    cut = sum(lay.input_bits)
    if binding is not None:
        binding.key_message(ctx, labels[:cut], mine, MAC_TWEAK, evaluator.peer)

    def run(i, labels, carry):
        return evaluator.evaluate(ctx, lay.inputs(i), labels, carry, f"{prefix}.inputs")[1]

    frames, checks = _run_inputs(ctx, lay, run, labels[:cut])
    _, carry = evaluator.evaluate(ctx, lay.init, labels[cut:], frames[0], f"{prefix}.init")
    state, pointers = lay.state_bits, []
    for t in range(1, lay.length):
        _, out = evaluator.evaluate(
            ctx, lay.step, none, np.concatenate([carry, frames[t]]), f"{prefix}.step"
        )
        keep = state + len(lay.edges) * lay.bits
        carry, pointer = out[:keep], out[keep:]
        pointers.append(pointer)
        ctx.progress("recursion, frames", t + 1, lay.length)  # public counts
    check = none
    if lay.is_bound:
        d_a = arith.to_bits(binding.check_value(), mac.MAC_BITS)
        check = evaluator.input_labels(ctx, d_a, f"{prefix}.check")
    out, last = evaluator.evaluate(
        ctx, lay.final, check, np.concatenate([carry[:state], checks]), f"{prefix}.final"
    )
    models, l = len(lay.models), lay.bits
    scores = None
    if lay.reveal_score:
        scores = [int(v) for v in arith.from_bits(out[: models * l].reshape(models, l))]
        out = out[models * l :]
    if not lay.keeps_pointers:  # ``model``: ok, then the best model's index
        _refuse_unless(ctx, out[0])
        return int(arith.from_bits(out[1:], signed=False)), scores
    back = np.concatenate([last[:-1], last[-1:], *pointers])
    labels = none
    if lay.output == "match":  # her pad of Bob's reference
        labels = evaluator.input_labels(ctx, np.asarray(reference, np.uint8), f"{prefix}.pin")
    marks, _ = evaluator.evaluate(ctx, lay.back, labels, back, f"{prefix}.back")
    if lay.output == "match":  # the bit is Bob's (ok gates it): nothing to her
        return None, scores
    _refuse_unless(ctx, marks[0])
    return _decoded(lay, marks[1:]), scores


def _decoded(lay: MaxPlusLayout, bits):
    """Alice's output from the ``back`` circuit's bits after ok: ``string``, (the count,
    0 .. L + 1 for "more than L"; the labels when 1 .. L); otherwise per model the
    per-frame values."""
    bits = np.asarray(bits, dtype=np.int64)
    if lay.output == "string":
        L, B = lay.slots, lay.label_bits
        count = int(np.flatnonzero(bits[L * B :])[0]) if bits[L * B :].any() else 0
        if not 1 <= count <= L:
            return count, None
        values = bits[: L * B].reshape(L, B) @ (1 << np.arange(B))
        return count, [int(v) for v in values[:count]]
    widths = [lay.output_bits(k) for k in range(len(lay.models))]
    frames = bits.reshape(lay.length, sum(widths))
    out, at = [], 0
    for w in widths:
        out.append([int(v) for v in frames[:, at : at + w] @ (1 << np.arange(w))])
        at += w
    return out


def _refuse_unless(ctx, ok) -> None:
    """An ok bit of 0: the binding check failed (inputs other than hers, or a Bob who
    deviates); the run ends after her last message."""
    if not int(ok):
        ctx.defer(ProtocolError("the circuit's binding check failed: no output"))


def messages(lay: MaxPlusLayout, prefix: str = "mp") -> list:
    """Every message of the chain, declared from the layout (the binding's key message is
    the bound stage's: :meth:`~protocols.stages.bound.BoundPlan.messages`)."""
    out = [choice_message(lay.evaluator_bits, f"{prefix}.choice")]
    sizes = {len(chunk): i for i, chunk in enumerate(lay.chunks)}
    for i in sorted(sizes.values()):  # the chunks' circuits differ only in the last one
        out.append(circuit_messages(lay.inputs(i), f"{prefix}.inputs")["tables"])
    for name in ("init", "step"):
        out.append(circuit_messages(getattr(lay, name), f"{prefix}.{name}")["tables"])
    if lay.is_bound:
        out.append(choice_message(lay.check_bits, f"{prefix}.check"))
    out.append(circuit_messages(lay.final, f"{prefix}.final")["tables"])
    if lay.keeps_pointers:
        back = circuit_messages(lay.back, f"{prefix}.back")
        if lay.output == "match":
            out.append(choice_message(lay.string_bits, f"{prefix}.pin"))
        out.append(back["tables"])
        if lay.output == "match":  # her labels of Bob's bit
            out.append(back["outputs"])
    return out
