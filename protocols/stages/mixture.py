"""Mixture scores in garbled circuits: per model, the sum over the frames of its best
component's log-density, and a decision on the scores, inside circuits Bob garbles
(thesis 003, 5.2.2; ``docs/garbled.md``, "Mixture scores").

Inputs: every frame's component log-densities log w_m + log N(x_t; mu_m, Sigma_m) as
bound shares (:mod:`protocols.stages.bound`: Alice's full masked values under a MAC she
cannot forge, her x and x^2 with them, so that the circuit checks every x^2 is her x
squared), clamped to the public range [-2^K, 2^K) nats at the scores' scale s.

Circuits (one chain under one Delta; labels carried, :data:`smc_hmm.gc.circuit.CARRY`):

1. ``inputs``, :func:`~protocols.stages.bound.chunks`' frames at a time: each
   component's value from its shares, clamped; per frame and model the maximum over the
   model's components (a tournament, ``arith.group_argmax``); the chunk's sum per model
   added to the running sums carried in; the x^2 checks ANDed into one carried bit;
2. ``final``: the public offset (the margin or threshold times T) added to the reference
   model's (the UBM's) sum, then the decision stage's rule
   (:func:`protocols.stages.circuits.decide`): ``argmax`` -- the winner's index to
   Alice; ``beats`` -- [UBM + offset < the claim's score] to Bob (verify: only the claim
   and the UBM run); ``claimed`` -- the same for the speaker Alice's index bits select
   (anonymous: her bits enter here, an index past the speakers is a refusal).  Every
   output is ANDed with *ok*: the binding check (Alice's D_A against Bob's D_B) and the
   x^2 checks.  A claimant whose inputs are not the ones the protocol gave her is
   rejected; one who enters x^2 that is not x squared is rejected.

The score is the best component's (the Viterbi approximation of a GMM's log-likelihood):
on the bundled test split it identifies 98.72% of the speakers (the LOGSUM's exact
log-likelihood: 98.64%) with an equal error rate of 2.33% (2.34%),
``docs/speaker.md``.  :func:`plain_scores` is its plaintext.

Who learns what: Alice, her output (argmax) and ok; Bob, his output bit (beats, claimed)
-- 0 whenever ok is 0, so he cannot tell a refused input from a rejected claim.  Every
circuit follows from the public layout.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from protocols.stages import bound as bd
from protocols.stages.bound import Emissions
from protocols.stages.circuits import claim_width, decide
from protocols.stages.garbled import choice_message, circuit_messages, third_party_outputs
from smc_hmm.errors import InvalidInputError, ProtocolError
from smc_hmm.gc import arith, mac
from smc_hmm.gc.circuit import CARRY, Circuit, CompiledCircuit, built_once

__all__ = [
    "MixtureLayout",
    "alice_mixture",
    "bob_mixture",
    "messages",
    "plain_scores",
    "trent_mixture",
]

#: Tweak base of the binding's label MACs (:mod:`smc_hmm.gc.mac`).
MAC_TWEAK = 0
RULES = ("argmax", "beats", "claimed")


@dataclass(frozen=True)
class MixtureLayout:
    """The public shape of one scoring: per running model its components (the rows, in
    order), T, the width l of a clamped value, how the values enter (:class:`~protocols.
    stages.bound.Emissions`), the decision ``rule``, the reference model and the offset
    added to its score (scale s)."""

    components: tuple[int, ...]
    length: int
    bits: int
    emissions: Emissions
    rule: str
    reference: int
    offset: int = 0
    #: ``argmax`` with a hidden count: the bits of a name; Bob's garbler inputs then carry
    #: per model a dummy bit (its score forced below every real one) and its name, and
    #: Alice learns the winner's name instead of its index (0: off)
    names: int = 0
    #: ``argmax``: the answer goes to a third party (Trent) instead of Alice: the final
    #: circuit's outputs are the garbler's wires, decoded by Trent from Alice's labels and
    #: Bob's hashes of both labels (:func:`trent_mixture`)
    third: bool = False

    def __post_init__(self):
        if self.rule not in RULES:
            raise InvalidInputError(f"rule must be one of {RULES}, got {self.rule!r}")
        if not 0 <= self.reference < len(self.components) or len(self.components) < 2:
            raise InvalidInputError("a reference among at least two models")

    @property
    def rows(self) -> int:
        return sum(self.components)

    @property
    def models(self) -> int:
        return len(self.components)

    @property
    def sum_bits(self) -> int:
        """Width of a model's score: l plus the bits of T, plus the offset's room."""
        top = (self.length << (self.bits - 1)) + abs(self.offset)
        return top.bit_length() + 2

    @property
    def chunks(self) -> list[range]:
        """The frames of each ``inputs`` circuit (:func:`protocols.stages.bound.chunks`)."""
        one = inputs_circuit(self.frame_key, 1, True, self.sum_bits)
        return bd.chunks(self.length, one.and_gates)

    @property
    def frame_key(self) -> MixtureLayout:
        """The layout without T's frames (the chunk circuits depend on T only through the
        sums' width)."""
        return replace(self, length=0, offset=0)

    def inputs(self, index: int) -> CompiledCircuit:
        return inputs_circuit(self.frame_key, len(self.chunks[index]), index == 0, self.sum_bits)

    @property
    def input_bits(self) -> list[int]:
        return [self.inputs(i).input_count("evaluator") for i in range(len(self.chunks))]

    @property
    def final(self) -> CompiledCircuit:
        return final_circuit(self)

    @property
    def check_bits(self) -> int:
        """Alice's input bits of ``final``: D_A, then (``claimed``) her claim's index."""
        return self.final.input_count("evaluator")


@built_once
def inputs_circuit(lay: MixtureLayout, frames: int, first: bool, width: int) -> CompiledCircuit:
    """One chunk of the chain: ``frames`` frames' values rebuilt from the bound emissions
    (range-checked), each model's best component per frame, summed onto the carried
    sums (the ``first`` chunk starts from zero) in ``width`` bits; built once per public
    shape and process."""
    c = Circuit()
    values, ok = bd.reconstruct(c, lay.emissions, lay.rows, frames, lay.bits, first)
    bounds = np.cumsum([0, *lay.components])
    groups = [
        list(range(t * lay.rows + a, t * lay.rows + b))
        for t in range(frames)
        for a, b in zip(bounds[:-1], bounds[1:])
    ]
    best, _ = arith.group_argmax(c, values.reshape(-1, lay.bits), groups, None)
    best = arith.sign_extend(best, width).reshape(frames, lay.models, width)
    terms = [best[t] for t in range(frames)]
    if not first:
        terms.append(c.input(CARRY, (lay.models, width)))
    while len(terms) > 1:  # a balanced tree of additions
        pairs = [arith.add(c, a, b, depth="ripple") for a, b in zip(terms[::2], terms[1::2])]
        terms = pairs + ([terms[-1]] if len(terms) % 2 else [])
    c.output(terms[0], CARRY)
    if ok is not None:
        c.output([ok], CARRY)
    return c.compile()


@built_once
def final_circuit(lay: MixtureLayout) -> CompiledCircuit:
    """The chain's last circuit: the offset onto the reference, the rule's decision, D_A =
    D_B and the range checks ANDed into every output; built once per shape and process."""
    c, width = Circuit(), lay.sum_bits
    sums = c.input(CARRY, (lay.models, width))
    checks = c.input(CARRY, (1,))[0] if lay.emissions.checked else np.int64(1)
    d_a = c.input("evaluator", (mac.MAC_BITS,))
    d_b = c.input("garbler", (mac.MAC_BITS,))
    claimed = lay.rule == "claimed"
    claim = c.input("evaluator", (claim_width(lay.models),)) if claimed else None
    ok = c.and_(bd.check_equal(c, d_a, d_b), checks)
    shift = np.zeros(lay.models, dtype=object)
    shift[lay.reference] = lay.offset
    scores = arith.add(c, sums, arith.constant(shift, width), depth="ripple")
    if lay.names:  # the count hidden: dummies never win, the winner's name out
        dummy = c.input("garbler", (lay.models,))
        table = c.input("garbler", (lay.models, lay.names))
        floor = arith.constant([-(1 << (width - 1))] * lay.models, width)
        scores = arith.mux(c, dummy, floor, scores)
        out, to = arith.argmax(c, scores, table)[1], "evaluator"
    else:
        out, to = decide(c, scores, lay.rule, lay.reference, claim)
    gated = c.and_(np.asarray(out).reshape(-1), ok)
    to = "garbler" if lay.third else to
    c.output(np.concatenate([[ok], gated]) if lay.rule == "argmax" else gated, to)
    return c.compile()


def bob_mixture(ctx, garbler, lay: MixtureLayout, binding: bd.BobBound, prefix="mix",
                hidden=None, third=None):  # fmt: skip
    """Bob (garbler): the chain on his shares of the bound values; returns his output bit
    (``beats``, ``claimed``) or None (``argmax``: Alice's).  ``hidden`` (with
    ``lay.names``): his dummy bits and name table, (models,) and (models, names) bits."""
    zero = garbler.input_labels(ctx, sum(lay.input_bits), f"{prefix}.choice")
    binding.key_message(ctx, zero, garbler.delta, MAC_TWEAK, garbler.peer)
    width = lay.emissions.bound.share_bits  # his shares span the whole slot
    mine = arith.to_bits(binding.shares(), width).reshape(lay.length, -1)

    def run(i, labels, carry):
        chunk = lay.chunks[i]
        bits = mine[chunk.start : chunk.stop].reshape(-1)
        carry = _carry_in(i, carry, sums)
        _, out = garbler.garble(ctx, lay.inputs(i), bits, labels, carry, f"{prefix}.inputs")
        _keep_sums(out, sums, lay)
        return out

    sums: list = []
    _, checks = bd.run_inputs(_lengths(lay), lay.input_bits, lay.emissions.checked, run, zero)
    bits = arith.to_bits(binding.check_value(), mac.MAC_BITS)
    if lay.names:
        dummy, table = hidden
        bits = np.concatenate(
            [bits, np.asarray(dummy, np.uint8), np.asarray(table, np.uint8).reshape(-1)]
        )
    check_zero = garbler.input_labels(ctx, lay.check_bits, f"{prefix}.check")
    out, _ = garbler.garble(
        ctx, lay.final, bits, check_zero, np.concatenate([sums[-1], checks]), f"{prefix}.final",
        third=third if lay.third else None,
    )  # fmt: skip
    return int(out[0]) if lay.rule != "argmax" else None


def alice_mixture(ctx, evaluator, lay: MixtureLayout, binding: bd.AliceBound, claim=None,
                  prefix="mix", third=None):  # fmt: skip
    """Alice (evaluator): the chain on her bound values; ``claimed``: her claim's index
    among the non-reference models.  Returns the winner's index (``argmax``; with
    ``lay.names``, its name's bits) or None; an
    ok bit of 0 raises :class:`~smc_hmm.errors.ProtocolError` after her last message."""
    mine = binding.all_bits()
    labels = evaluator.input_labels(ctx, mine, f"{prefix}.choice")
    binding.key_message(ctx, labels, mine, MAC_TWEAK, evaluator.peer)

    def run(i, labels, carry):
        carry = _carry_in(i, carry, sums)
        _, out = evaluator.evaluate(ctx, lay.inputs(i), labels, carry, f"{prefix}.inputs")
        _keep_sums(out, sums, lay)
        ctx.progress("scores, frames", lay.chunks[i].stop, lay.length)  # public counts
        return out

    sums: list = []
    _, checks = bd.run_inputs(_lengths(lay), lay.input_bits, lay.emissions.checked, run, labels)
    bits = arith.to_bits(binding.check_value(), mac.MAC_BITS)
    if lay.rule == "claimed":
        width = claim_width(lay.models)
        bits = np.concatenate([bits, arith.to_bits(int(claim), width)])
    check = evaluator.input_labels(ctx, bits, f"{prefix}.check")
    out, _ = evaluator.evaluate(
        ctx, lay.final, check, np.concatenate([sums[-1], checks]), f"{prefix}.final",
        third=third if lay.third else None,
    )  # fmt: skip
    if lay.rule != "argmax" or lay.third:
        return None
    if not int(out[0]):
        ctx.defer(ProtocolError("the circuit's binding check failed: no output"))
    if lay.names:  # the winner's name bits
        return np.asarray(out[1:], dtype=np.uint8)
    return int(arith.from_bits(out[1:], signed=False))


def trent_mixture(ctx, lay: MixtureLayout, garbler: str, evaluator: str, prefix="mix"):
    """Trent (``lay.third``): the answer's bits -- the winner's index, or its name's bits
    with ``lay.names`` -- decoded from Bob's hashes of both labels and Alice's labels of
    the final circuit's outputs; ok = 0 (her inputs failed the binding) raises
    :class:`~smc_hmm.errors.ProtocolError`, a forged label GarbledCircuitError."""
    bits = third_party_outputs(ctx, lay.final, garbler, evaluator, f"{prefix}.final")
    if not int(bits[0]):
        raise ProtocolError("the circuit's binding check failed: no output")
    if lay.names:
        return np.asarray(bits[1:], dtype=np.uint8)
    return int(arith.from_bits(bits[1:], signed=False))


def _lengths(lay: MixtureLayout) -> list[int]:
    return [len(chunk) for chunk in lay.chunks]


def _carry_in(i: int, checks, sums):
    """A chunk's carried inputs: the checks' bit (the chunks after the first, declared
    first in the circuit: :func:`protocols.stages.bound.reconstruct`), then the sums."""
    if i == 0:
        return None if checks is None else checks
    parts = [p for p in (checks, sums[-1]) if p is not None]
    return np.concatenate(parts)


def _keep_sums(out, sums: list, lay: MixtureLayout) -> None:
    """Keep the labels of a chunk's running sums (its carried outputs before the checks')."""
    n = lay.models * lay.sum_bits
    sums.append(out[:n])


def messages(lay: MixtureLayout, prefix: str = "mix") -> list:
    """Every message of the chain, declared from the layout (the binding's key message is
    the bound stage's)."""
    out = [choice_message(sum(lay.input_bits), f"{prefix}.choice")]
    sizes = {len(chunk): i for i, chunk in enumerate(lay.chunks)}
    for i in sorted(sizes.values()):
        out.append(circuit_messages(lay.inputs(i), f"{prefix}.inputs")["tables"])
    out.append(choice_message(lay.check_bits, f"{prefix}.check"))
    final = circuit_messages(lay.final, f"{prefix}.final")
    out.append(final["tables"])
    if lay.rule != "argmax" or lay.third:  # her labels of Bob's (or Trent's) outputs
        out.append(final["outputs"])
    if lay.third:
        out.append(final["third"])
    return out


def plain_scores(component_logs, components, scale: int, keep: int) -> list[int]:
    """The chain's scores in plaintext, for tests and benchmarks: per model the sum over
    frames of the best component's value, each value floored to scale s and clamped to
    [-2^keep, 2^keep) as the circuit does.  ``component_logs``: (T, rows) nats."""
    logs = np.asarray(component_logs, dtype=float)
    values = np.clip(np.floor(logs * 2.0**scale), -(2.0**keep), 2.0**keep - 1)
    bounds = np.cumsum([0, *components])
    return [int(values[:, a:b].max(axis=1).sum()) for a, b in zip(bounds[:-1], bounds[1:])]
