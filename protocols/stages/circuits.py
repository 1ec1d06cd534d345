"""Comparisons and argmax on the garbled stage: E(a), E(b) under Alice's key in, the bit
[a < b] or the winner's index out, to the party the caller names (``docs/garbled.md``).

Both halves of each are here, one line for a protocol to call:

* :func:`bob_compare` / :func:`alice_compare`: k comparisons of l-bit values, the sign
  of d = a - b (l + 1 bits).  ``reveal``: ``"alice"`` (she decodes the bits) or
  ``"bob"`` (he decodes them from her returned labels) on bound shares of d
  (:func:`protocols.stages.bound.bob_bind_shares`: she cannot shift d, and a shifted
  share makes Bob raise); ``"none"`` on plain shares
  (:func:`protocols.stages.garbled.bob_share`): Alice decodes b ^ m for Bob's random m
  and returns E(b ^ m), so Bob keeps E([a < b]) as DGK's comparison gives him -- her
  returned ciphertext is hers to choose, so that mode assumes a semi-honest Alice.
* :func:`bob_argmax` / :func:`alice_argmax`: the index of the largest of k l-bit values
  (ties: the lowest index, numpy's rule; the caller permutes first for a random one),
  to Alice or to Bob, on bound shares: k - 1 compare-and-selects in a tournament tree
  (:func:`smc_hmm.gc.arith.argmax`).
* :func:`decision_circuit`: the decision stage's three rules on shared scores
  (:mod:`protocols.stages.decision`): the argmax's index to Alice, or to Bob the bit
  [reference < the best other score] or [reference < the score Alice's index bits
  select].

Bound shares need values below the MAC field's 61 bits (:func:`protocols.stages.bound.binds`:
d of at most 60 bits, so a, b of at most 59; argmax values of at most 60); wider values
take plain shares, which a deviating Alice could shift (``docs/security.md``,
"compare").  What each party sees is the garbled stage's (its docstring): uniform
shares, labels, tables, and only the declared output.  Circuits depend on public sizes
only and are built once per shape (cached).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from protocols.stages import bound as bd
from protocols.stages.garbled import (
    Evaluator,
    Garbler,
    alice_bits_to_bob,
    alice_share,
    bob_bits_from_circuit,
    bob_share,
)
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError
from smc_hmm.gc import arith
from smc_hmm.gc.circuit import Circuit, CompiledCircuit, built_once

__all__ = [
    "REVEAL",
    "alice_argmax",
    "alice_compare",
    "argmax_circuit",
    "bob_argmax",
    "bob_compare",
    "claim_width",
    "compare_circuit",
    "decide",
    "decision_circuit",
    "label_width",
]

REVEAL = ("alice", "bob", "none")
#: the bound shares' messages of the standalone comparison and argmax
TAG = "cmp"


def _check(reveal: str, count: int, bits: int) -> None:
    if reveal not in REVEAL:
        raise InvalidInputError(f"reveal must be one of {REVEAL}, got {reveal!r}")
    if count < 1 or not 1 <= bits < arith.MAX_BITS:
        raise InvalidInputError(
            f"{count} values of {bits} bits: need at least 1 of 1 to {arith.MAX_BITS - 1} bits"
        )


def bound_compare(bits: int, sigma: int, reveal: str) -> bool:
    """Whether a comparison of l-bit values takes bound shares of d = a - b: when it
    reveals to a party and l + 1 bits fit the MAC field (:func:`bound.binds`)."""
    return reveal != "none" and bd.binds(bits + 1, sigma)


@built_once
def compare_circuit(count: int, bits: int, reveal: str, sigma: int = 40) -> CompiledCircuit:
    """k comparisons of d = a - b (l + 1 bits): the sign of the shares' sum out.  On
    bound shares (:func:`bound_compare`; :func:`protocols.stages.bound.share_inputs`) the
    signs ANDed with ok (``"alice"``: ok first); else plain shares, Bob's then Alice's
    (``"none"``: the sign XORed with Bob's mask bit, to Alice)."""
    _check(reveal, count, bits)
    c = Circuit()
    if bound_compare(bits, sigma, reveal):
        values, _, ok = bd.share_inputs(c, bd.SharePlan(count, bits + 1, sigma))
        to = "garbler" if reveal == "bob" else "evaluator"
        _gated_output(c, values[..., -1], ok, to, ok_first=True)
        return c.compile()
    mine = c.input("garbler", (count, bits + 1))
    hers = c.input("evaluator", (count, bits + 1))
    sign = arith.add(c, mine, hers)[..., -1]
    if reveal == "none":
        sign = c.xor(sign, c.input("garbler", (count,)))
    c.output(sign, "garbler" if reveal == "bob" else "evaluator")
    return c.compile()


def _difference(enc_a: CipherArray, enc_b: CipherArray, bits: int) -> CipherArray:
    bound = (1 << (bits - 1)) - 1
    for name, enc in (("a", enc_a), ("b", enc_b)):
        if enc.bound > bound:
            raise PrecisionError(f"|{name}| < 2^(l-1) with l = {bits} is not guaranteed")
    return (enc_a.with_scale(0) - enc_b.with_scale(0)).with_bound(2 * bound)


def bob_compare(
    ctx,
    garbler: Garbler,
    enc_a: CipherArray,
    enc_b: CipherArray,
    bits: int,
    sigma: int = 40,
    reveal: str = "none",
):
    """Bob: E(a_i), E(b_i) -> E([a_i < b_i]) (``"none"``), the bits (``"bob"``) or None."""
    if enc_a.shape != enc_b.shape or enc_a.ndim != 1:
        raise InvalidInputError(f"operands of shapes {enc_a.shape} and {enc_b.shape}")
    count = enc_a.shape[0]
    diff, circuit = _difference(enc_a, enc_b, bits), compare_circuit(count, bits, reveal, sigma)
    if bound_compare(bits, sigma, reveal):
        plan = bd.SharePlan(count, bits + 1, sigma, enc_a.public_key.bits)
        binding = bd.bob_bind_shares(ctx, diff, plan, garbler.peer, TAG)
        out = bd.bob_run_shared(ctx, garbler, binding, circuit, tag=TAG)
        return _bob_checked(out) if reveal == "bob" else None
    inputs = [bob_share(ctx, diff, bits + 1, sigma, garbler.peer).reshape(-1)]
    masks = np.array([ctx.rng.randbits(1) for _ in range(count)], dtype=np.uint8)
    out = garbler.run(ctx, circuit, np.concatenate(inputs + ([masks] if reveal == "none" else [])))
    if reveal == "none":
        return bob_bits_from_circuit(ctx, masks, enc_a.public_key, garbler.peer)
    return out if reveal == "bob" else None


def alice_compare(
    ctx, evaluator: Evaluator, count: int, bits: int, sigma: int = 40, reveal: str = "none"
):
    """Alice's half of :func:`bob_compare`: the bits (``"alice"``) or None."""
    circuit = compare_circuit(count, bits, reveal, sigma)
    if bound_compare(bits, sigma, reveal):
        plan = bd.SharePlan(count, bits + 1, sigma, ctx.keypair[0].bits)
        binding = bd.alice_bind_shares(ctx, plan, evaluator.peer, TAG)
        out = bd.alice_run_shared(ctx, evaluator, binding, circuit, tag=TAG)
        return out if reveal == "alice" else None
    hers = alice_share(ctx, (count,), bits + 1, sigma, evaluator.peer)
    out = evaluator.run(ctx, circuit, hers.reshape(-1))
    if reveal == "none":
        alice_bits_to_bob(ctx, out, evaluator.peer)
        return None
    return out if reveal == "alice" else None


@built_once
def argmax_circuit(
    count: int, bits: int, reveal: str, label_bits: int = 0, sigma: int = 40
) -> CompiledCircuit:
    """The index of the largest of k l-bit values, to Alice or to Bob; with
    ``label_bits``, Bob's label of the winner instead (his labels are garbler inputs,
    after his shares).  On bound shares where l fits the MAC field
    (:func:`protocols.stages.bound.binds`: the winner ANDed with ok, ok first for
    Alice), else plain shares."""
    _check(reveal, count, bits)
    if reveal == "none":
        raise InvalidInputError("an argmax reveals its index to alice or bob")
    c = Circuit()
    ok = None
    if bd.binds(bits, sigma):
        values, _, ok = bd.share_inputs(c, bd.SharePlan(count, bits, sigma))
    else:
        mine = c.input("garbler", (count, bits))
        values = arith.add(c, mine, c.input("evaluator", (count, bits)))
    labels = c.input("garbler", (count, label_bits)) if label_bits else None
    _, winner = arith.argmax(c, values, labels)
    to = "garbler" if reveal == "bob" else "evaluator"
    if ok is None:
        c.output(winner, to)
    else:
        _gated_output(c, winner, ok, to, ok_first=True)
    return c.compile()


def label_width(labels_bound: int) -> int:
    """Bits of a label in [0, labels_bound]."""
    return max(1, int(labels_bound).bit_length())


def bob_argmax(
    ctx,
    garbler: Garbler,
    values: CipherArray,
    bits: int,
    sigma: int = 40,
    reveal: str = "alice",
    labels=None,
    labels_bound: int | None = None,
):
    """Bob: the argmax of E(v_0..v_(k-1)) (|v| < 2^(l-1)) on bound shares; returns the
    winner's index (or its label from ``labels``, integers in [0, labels_bound]) if
    ``reveal == "bob"``, else None (Alice learns it)."""
    if values.ndim != 1:
        raise InvalidInputError(f"values of shape {values.shape}: one vector")
    width = 0 if labels is None else label_width(labels_bound)
    circuit = argmax_circuit(values.shape[0], bits, reveal, width, sigma)
    extra = () if labels is None else arith.to_bits(np.asarray(labels, dtype=object), width)
    if bd.binds(bits, sigma):
        plan = bd.SharePlan(values.shape[0], bits, sigma, values.public_key.bits)
        binding = bd.bob_bind_shares(ctx, values, plan, garbler.peer, TAG)
        out = bd.bob_run_shared(ctx, garbler, binding, circuit, extra, TAG)
        out = _bob_checked(out) if reveal == "bob" else out
    else:
        mine = bob_share(ctx, values, bits, sigma, garbler.peer).reshape(-1)
        out = garbler.run(ctx, circuit, np.concatenate([mine, np.reshape(extra, -1)]))
    return int(arith.from_bits(out, signed=False)) if reveal == "bob" else None


def alice_argmax(
    ctx,
    evaluator: Evaluator,
    count: int,
    bits: int,
    sigma: int = 40,
    reveal: str = "alice",
    labels_bound: int | None = None,
):
    """Alice's half of :func:`bob_argmax` (``labels_bound`` if Bob's labels ride along):
    the index or label if ``reveal == "alice"``."""
    width = 0 if labels_bound is None else label_width(labels_bound)
    circuit = argmax_circuit(count, bits, reveal, width, sigma)
    if bd.binds(bits, sigma):
        plan = bd.SharePlan(count, bits, sigma, ctx.keypair[0].bits)
        binding = bd.alice_bind_shares(ctx, plan, evaluator.peer, TAG)
        out = bd.alice_run_shared(ctx, evaluator, binding, circuit, tag=TAG)
    else:
        hers = alice_share(ctx, (count,), bits, sigma, evaluator.peer)
        out = evaluator.run(ctx, circuit, hers.reshape(-1))
    return int(arith.from_bits(out, signed=False)) if reveal == "alice" else None


@lru_cache(maxsize=64)
def decision_circuit(
    count: int, bits: int, rule: str, reference: int | None = None, sigma: int | None = None
) -> CompiledCircuit:
    """The decision stage's circuit on ``count`` shared ``bits``-bit scores (the
    reference's offset already in its score): :func:`decide` on their sums.  ``sigma``
    None: plain shares (:func:`protocols.stages.garbled.bob_share`, l bits each, then,
    ``claimed``, her index bits); else bound shares
    (:func:`protocols.stages.bound.share_inputs`, her index bits among her inputs), every
    output ANDed with ok, ok first among Alice's."""
    c = Circuit()
    claim_shape = (claim_width(count),) if rule == "claimed" else None
    if sigma is None:
        y = c.input("evaluator", (count, bits))
        claim = c.input("evaluator", claim_shape) if claim_shape else None
        sums = arith.add(c, y, c.input("garbler", (count, bits)))
        c.output(*decide(c, sums, rule, reference, claim))
        return c.compile()
    values, claim, ok = bd.share_inputs(c, bd.SharePlan(count, bits, sigma), claim_shape)
    out, to = decide(c, values, rule, reference, claim)
    _gated_output(c, out, ok, to)
    return c.compile()


def _gated_output(c: Circuit, out, ok, to: str, ok_first: bool | None = None) -> None:
    """Outputs on bound shares: each ANDed with ok, and ok itself first for Alice, who
    raises on 0 (``ok_first``, default: ``to`` is Alice).  The decision stage gives Bob
    no ok: his 0 stands for a refusal, and an ok of his own would be a second bit a
    deviating Bob could aim at her inputs; the standalone comparisons, whose shares hide
    only Bob's own values, give it to him so that he raises."""
    gated = c.and_(np.asarray(out).reshape(-1), ok)
    first = to == "evaluator" if ok_first is None else ok_first
    c.output(np.concatenate([[ok], gated]) if first else gated, to)


def _bob_checked(out) -> np.ndarray:
    """Bob's outputs of a standalone comparison on bound shares, without the leading ok."""
    if not int(out[0]):
        raise ProtocolError("the key holder's shares failed the circuit's binding check")
    return np.asarray(out[1:])


def decide(c: Circuit, values, rule: str, reference: int | None = None, claim=None):
    """The decision stage's three rules on ``(count, l)`` score wires: ``argmax`` -- the
    winner's index bits for Alice (ties: the lowest index); ``beats`` -- the bit
    [s_ref < max of the others] for Bob; ``claimed`` -- the bit [s_ref < s_k] for Bob, k
    the other score Alice's ``claim`` bits (over the others in index order) select; an
    index past the others selects the reference itself, so it is refused like a losing
    claim.  Returns (the output wires, who decodes them)."""
    values = np.asarray(values)
    if rule == "argmax":
        return arith.argmax(c, values)[1], "evaluator"
    count = values.shape[0]
    others = [i for i in range(count) if i != reference]
    ref = values[reference]
    if rule == "beats":
        best = arith.argmax(c, values[others])[0]
    elif rule == "claimed":
        width = claim_width(count)
        pool = [values[i] for i in others] + [ref] * ((1 << width) - len(others))
        best = arith.select(c, np.stack(pool), np.asarray(claim))
    else:
        raise InvalidInputError(f"a decision rule is argmax, beats or claimed, not {rule!r}")
    return arith.less(c, ref, best)[None], "garbler"


def claim_width(count: int) -> int:
    """Bits of Alice's index over the count - 1 non-reference scores (``claimed``)."""
    return max(1, (count - 2).bit_length())
