"""The decision stage (protocols.stages.decision) in both comparisons: every rule against
decide_plain on edge values and ties, transcripts that follow from public sizes only
(whatever the scores and the claim), and what a client who deviates can and cannot do
in the garbled default."""

from __future__ import annotations

import numpy as np
import pytest
from party_support import simulate_alice_and_bob
from transcript_harness import assert_same_transcripts

from protocols.stages import bound as bd
from protocols.stages import decision, garbled
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import GarbledCircuitError, InvalidInputError, ProtocolError
from smc_hmm.gc import arith, mac

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
        keys=[keypair_512],
    )


def test_a_claim_past_the_enrolled_scores_is_refused(keypair_512, monkeypatch):
    """A client who enters an index past the non-reference scores (she may enter any
    bits) selects the reference itself: [s_ref < s_ref] is 0, a refused claim, however
    the scores lie.  (The dgk mode's encrypted one-hot vector had no such check: a
    vector of all ones accepted whenever any speaker beat the reference.)"""
    spec = _spec("claimed", "garbled", count=6)  # 5 others: index bits 0..7
    scores = [900, 800, 700, 600, 500, -900]  # every speaker beats the reference
    for index, accepted in ((2, True), (5, False), (6, False), (7, False)):
        monkeypatch.setattr(decision, "claim_bits", lambda s, c, i=index: arith.to_bits(i, 3))
        assert _run(keypair_512, spec, scores, choice=0)["bob"] is accepted


def test_a_client_cannot_flip_the_bit_she_returns(keypair_512, monkeypatch):
    """Bob decodes his bit from the labels Alice returns: she holds one label a wire and
    the other needs Delta, so a returned label she altered ends the session with a typed
    error instead of a forced decision."""
    real = garbled.garbler_output_labels

    def forged(circuit, w):
        out = real(circuit, w).copy()
        out[:, 0] ^= np.uint64(1 << 5)  # flip a bit of the label (not its permute bit)
        return out

    monkeypatch.setattr(garbled, "garbler_output_labels", forged)
    with pytest.raises(GarbledCircuitError):
        _run(keypair_512, _spec("beats", "garbled"), [1, 2, 3, 4, 0])


def _shift_share(monkeypatch, index: int, delta: int) -> None:
    """The deviation: Alice adds ``delta`` to her slot of score ``index`` before she
    enters it (what an unbound conversion let her do: the circuit then compared
    s_index + delta)."""
    real = bd.AliceShares.bits

    def shifted(self):
        y = list(self.y)
        y[index] = (y[index] + delta) % (1 << self.plan.width)
        return real(bd.AliceShares(self.plan, y, self.z))

    monkeypatch.setattr(bd.AliceShares, "bits", shifted)


def _without(monkeypatch, name: str) -> None:
    """The control: the circuit with one of its checks removed (built afresh)."""
    from protocols.stages import circuits

    monkeypatch.setattr(bd, name, lambda c, v, *rest: np.ones(np.shape(v)[:-1], np.int64))
    circuits.decision_circuit.cache_clear()


@pytest.fixture
def fresh_circuits():
    from protocols.stages import circuits

    circuits.decision_circuit.cache_clear()
    yield
    circuits.decision_circuit.cache_clear()


def test_shifted_shares_are_refused_and_move_the_answer_without_the_check(
    keypair_512, monkeypatch, fresh_circuits
):
    """Deviation: Alice adds D to her share of the runner-up.  Unbound, the circuit
    named argmax_i (s_i + D_i): bisection on D read the gap to the best score, one bit a
    session.  Bound, D_A != D_B (unless she guesses alpha: 3/p) and ok = 0: the argmax
    raises after her last message, the bit rules give Bob 0.  The control (the MAC
    check removed from the circuit) shows the same shift moves the answer."""
    scores = [3, -7, 500, 10, -1000]
    spec = _spec("argmax", "garbled")
    assert _run(keypair_512, spec, scores)["alice"] == 2
    _shift_share(monkeypatch, 3, 600)
    with pytest.raises(ProtocolError, match="binding check"):
        _run(keypair_512, spec, scores)
    verify = _spec("beats", "garbled", reference=2)  # the reference (500) beats every other
    assert _run(keypair_512, verify, scores)["bob"] is False
    _without(monkeypatch, "check_equal")
    assert _run(keypair_512, spec, scores)["alice"] == 3
    assert _run(keypair_512, verify, scores)["bob"] is True


def test_a_share_shifted_by_a_multiple_of_p_is_refused_by_the_range_check(
    keypair_512, monkeypatch, fresh_circuits
):
    """y - 600 p passes the mod-p MAC check (a p-multiple vanishes) and, p being
    2^61 - 1, adds 600 to the low l bits; the range check refuses it: modulo 2^w the sum
    lands outside the l-bit range.  Without the range check (the control) the shift goes
    through and moves the answer.  (Slots narrower than p cannot even carry the shift:
    the scores' bound here makes them 93 bits, so y - 600 p stays positive.)"""
    scores = [3, -7, 500, 10, -1000]
    spec = decision.DecisionSpec(5, 1 << 50, "argmax", comparison="garbled")
    assert spec.bits + spec.sigma + 1 > mac.MAC_BITS
    _shift_share(monkeypatch, 3, -600 * mac.PRIME)
    with pytest.raises(ProtocolError, match="binding check"):
        _run(keypair_512, spec, scores)
    _without(monkeypatch, "in_range")
    assert _run(keypair_512, spec, scores)["alice"] == 3


def test_a_forged_check_value_is_refused(keypair_512, monkeypatch):
    monkeypatch.setattr(bd.AliceShares, "check_value", lambda self: 12345)
    with pytest.raises(ProtocolError, match="binding check"):
        _run(keypair_512, _spec("argmax", "garbled"), [3, -7, 500, 10, -1000])
    beats = _spec("beats", "garbled", reference=0)
    assert _run(keypair_512, beats, [3, -7, 5, 1, 0])["bob"] is False


def test_bad_specs_are_typed_errors():
    with pytest.raises(InvalidInputError, match="comparison"):
        decision.DecisionSpec(3, 10, comparison="yao")
    spec = _spec("claimed", "garbled")
    assert spec.randomizers(1024) == {"alice": 0, "bob": 2}  # the shares, the MAC limbs
