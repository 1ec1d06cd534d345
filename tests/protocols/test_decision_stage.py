"""The decision stage (protocols.stages.decision) in both comparisons: every rule against
decide_plain on edge values and ties, transcripts that follow from public sizes only
(whatever the scores and the claim), and what a client who deviates can and cannot do
in the garbled default."""

from __future__ import annotations

import numpy as np
import pytest
from party_support import simulate_alice_and_bob
from transcript_harness import assert_same_transcripts

from protocols.stages import decision, garbled
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import GarbledCircuitError, InvalidInputError
from smc_hmm.gc import arith

BOUND = 1000


def _run(keypair, spec, scores, choice=None, wrap=None, alice_role=None):
    pk, _ = keypair

    def bob(ctx):
        enc = CipherArray.encrypt_encoded(pk, np.array(scores, dtype=object), 0, BOUND)
        return decision.bob_decide(ctx, enc, spec)

    def alice(ctx):
        if alice_role is not None:
            return alice_role(ctx)
        return decision.alice_decide(ctx, spec, choice=choice)

    result = simulate_alice_and_bob(alice, bob, keypair, seed=7, wrap_transport=wrap, timeout=60)
    return result.outputs


def _spec(rule, comparison, count=5, reference=None, offset=0):
    if rule != "argmax" and reference is None:
        reference = count - 1
    return decision.DecisionSpec(
        count, BOUND + abs(offset), rule, reference, offset, comparison=comparison
    )


CASES = [
    [3, -7, 3, 10, -1000],  # a tie at the top of the first two, and -bound
    [1000, 1000, -1000, 0, 999],  # ties at +bound
    [0, 0, 0, 0, 0],  # all equal
    [-5, 4, 2, 4, 3],
]


@pytest.mark.parametrize("comparison", ["garbled", "dgk"])
@pytest.mark.parametrize("rule", ["argmax", "beats", "claimed"])
def test_every_rule_decides_as_plaintext(keypair_512, comparison, rule):
    for scores in CASES:
        for offset in (0, 3):
            reference = None if rule == "argmax" and offset == 0 else 4
            spec = _spec(rule, comparison, reference=reference, offset=offset)
            choices = [1, 3] if rule == "claimed" else [None]
            for choice in choices:
                out = _run(keypair_512, spec, scores, choice)
                want = decision.decide_plain(spec, scores, choice)
                if rule == "argmax":
                    values = list(scores)
                    if reference is not None:
                        values[reference] += offset
                    if comparison == "dgk":  # ties go to a random tied label
                        assert values[out["alice"]] == max(values)
                    else:  # ties go to the lowest index, as decide_plain
                        assert out["alice"] == want
                    assert out["bob"] is None
                else:
                    assert out["bob"] == want and out["alice"] is None


@pytest.mark.parametrize("rule", ["argmax", "beats", "claimed"])
def test_garbled_frames_follow_from_public_sizes_only(keypair_512, rule):
    spec = _spec(rule, "garbled")
    rng = np.random.default_rng(3)
    inputs = [(list(rng.integers(-BOUND, BOUND + 1, 5)), int(rng.integers(0, 4))) for _ in range(3)]
    assert_same_transcripts(
        lambda case, wrap: _run(
            keypair_512, spec, case[0], case[1] if rule == "claimed" else None, wrap
        ),
        inputs,
        spec.messages(),
    )


def test_a_claim_past_the_enrolled_scores_is_refused(keypair_512):
    """A client who enters an index past the non-reference scores (she may enter any
    bits) selects the reference itself: [s_ref < s_ref] is 0, a refused claim, however
    the scores lie.  (The dgk mode's encrypted one-hot vector had no such check: a
    vector of all ones accepted whenever any speaker beat the reference.)"""
    spec = _spec("claimed", "garbled", count=6)  # 5 others: index bits 0..7

    def forged(index):
        def alice(ctx):
            evaluator = garbled.alice_setup(ctx, spec.cots, "bob")
            shares = garbled.alice_share(ctx, (spec.count,), spec.bits, spec.sigma, "bob",
                                         "dec.share")  # fmt: skip
            bits = np.concatenate([shares.reshape(-1), arith.to_bits(index, 3)])
            return evaluator.run(ctx, spec.circuit, bits)

        return alice

    scores = [900, 800, 700, 600, 500, -900]  # every speaker beats the reference
    assert _run(keypair_512, spec, scores, alice_role=forged(2))["bob"] is True
    for index in (5, 6, 7):
        assert _run(keypair_512, spec, scores, alice_role=forged(index))["bob"] is False


def test_a_client_cannot_flip_the_bit_she_returns(keypair_512):
    """Bob decodes his bit from the labels Alice returns: she holds one label a wire and
    the other needs Delta, so a returned label she altered ends the session with a typed
    error instead of a forced decision."""
    spec = _spec("beats", "garbled")

    def cheat(ctx):
        evaluator = garbled.alice_setup(ctx, spec.cots, "bob")
        shares = garbled.alice_share(ctx, (spec.count,), spec.bits, spec.sigma, "bob",
                                     "dec.share")  # fmt: skip
        msg = garbled.circuit_messages(spec.circuit)
        circuit = spec.circuit
        labels = evaluator.input_labels(ctx, shares.reshape(-1))
        raw_tables, raw_labels, raw_decoding = ctx.recv("bob", msg["tables"])
        from smc_hmm.gc.garble import evaluate, garbler_output_labels
        from smc_hmm.gc.hashing import as_blocks

        sent = as_blocks(raw_labels)
        tables = as_blocks(raw_tables).reshape(-1, 2, 2)
        w = evaluate(circuit, tables, sent[:2], sent[2:], labels, evaluator.tweak)
        out = garbler_output_labels(circuit, w).copy()
        out[:, 0] ^= np.uint64(1 << 5)  # flip a bit of the label (not its permute bit)
        ctx.send("bob", msg["outputs"], out.tobytes())

    with pytest.raises(GarbledCircuitError):
        _run(keypair_512, spec, [1, 2, 3, 4, 0], alice_role=cheat)


def test_bad_specs_are_typed_errors():
    with pytest.raises(InvalidInputError, match="comparison"):
        decision.DecisionSpec(3, 10, comparison="yao")
    spec = _spec("claimed", "garbled")
    assert spec.randomizers(1024) == {"alice": 0, "bob": 1}
