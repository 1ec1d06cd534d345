"""1-of-M oblivious transfer by Paillier selection (protocols.stages.ot).

``ot.alice`` does not send her public key (the OT is a building block used
after the key exchange), so Bob's role adopts it first (``ctx.adopt_key``) so
that his wire codec accepts ciphertexts under it.
"""

from __future__ import annotations

import numpy as np
import pytest
from transcript_harness import assert_same_transcripts

from protocols.stages import ot
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError
from smc_hmm.runtime import simulate

BITS = 128  # public: every message is below 2^128 in magnitude


def bob_role(ctx, public_key, messages):
    ctx.adopt_key(public_key)  # known from an earlier key exchange in a real protocol
    return ot.bob(ctx, messages, BITS)


def run_ot(keypair, choices, n_options, messages, **kwargs):
    return simulate(
        {"alice": ot.alice, "bob": bob_role},
        args={"alice": (choices, n_options, BITS), "bob": (keypair[0], messages)},
        keys={"alice": keypair},
        timeout=10,
        min_key_bits=512,
        **kwargs,
    )


MESSAGES = [7, -3, 2**100 + 1, 0, -(2**90), 42]


def test_alice_gets_exactly_the_chosen_messages(keypair_512):
    choices = np.array([0, 5, 2, 2, 1, 4, 3, 0])
    result = run_ot(keypair_512, choices, len(MESSAGES), MESSAGES, record_views=True)
    got = result.outputs["alice"]
    assert [int(v) for v in got] == [MESSAGES[c] for c in choices]
    assert result.outputs["bob"] is None
    # Bob's view: only the encrypted one-hot rows, one per transfer
    ((peer, tag, payload),) = result.views["bob"]
    assert (peer, tag) == ("alice", "ot.choices")
    assert isinstance(payload, CipherArray) and payload.shape == (len(choices), len(MESSAGES))
    assert payload.public_key.n == keypair_512[0].n
    # ... which decrypt to one-hot rows (Bob could not read them; Alice's key can)
    rows = payload.decrypt_ints(keypair_512[1])
    assert (rows.sum(axis=1) == 1).all() and (rows.argmax(axis=1) == choices).all()
    # Alice's view: one ciphertext per transfer, re-randomised (not the bare selection)
    ((_, tag, transfer),) = result.views["alice"]
    assert tag == "ot.transfer" and isinstance(transfer, CipherArray)
    bare = ot.bob_select(payload, np.array(MESSAGES, dtype=object))
    assert all(a != b for a, b in zip(transfer.ciphertexts(), bare.ciphertexts()))
    # cost: Bob counted the transfers and never decrypted
    assert result.cost.ops("bob")["ot"] == len(choices)
    assert result.cost.ops("bob")["decrypt"] == 0
    assert result.cost.ops("alice")["decrypt"] == len(choices)


def test_single_option_and_single_transfer(keypair_512):
    result = run_ot(keypair_512, np.array([0]), 1, [123456789])
    assert [int(v) for v in result.outputs["alice"]] == [123456789]


@pytest.mark.parametrize(
    "choices",
    [
        np.array([0, 6]),  # out of range (M = 6)
        np.array([-1]),
        np.array([0.0, 1.0]),  # not integers
        np.array([[0, 1]]),  # not 1-D
    ],
)
def test_bad_choices_raise_invalid_input(keypair_512, choices):
    with pytest.raises(InvalidInputError):
        run_ot(keypair_512, choices, len(MESSAGES), MESSAGES)


def test_bad_messages(keypair_512):
    with pytest.raises(InvalidInputError):  # Bob's messages must be 1-D
        run_ot(keypair_512, np.array([0]), 2, [[1, 2], [3, 4]])
    with pytest.raises(ProtocolError):  # Alice chooses among 6, Bob offers 2
        run_ot(keypair_512, np.array([0]), len(MESSAGES), [1, 2])


def test_messages_beyond_the_declared_bits_are_refused(keypair_512):
    with pytest.raises(PrecisionError):
        run_ot(keypair_512, np.array([0]), 2, [1, 2**BITS])


def test_transcript_does_not_depend_on_choices_or_messages(keypair_512):
    """The metadata rule: only ciphertexts differ between two runs."""
    cases = [
        (np.array([0, 1, 2]), [1, 2, 3, 4]),
        (np.array([3, 3, 0]), [2**120, -(2**127) + 1, 0, -5]),
        (np.array([2, 0, 1]), [0, 0, 0, 0]),
    ]

    def run(case, wrap):
        choices, messages = case
        run_ot(keypair_512, choices, 4, messages, wrap_transport=wrap)

    frames = assert_same_transcripts(run, cases, ot.messages(4, BITS), keys=[keypair_512])
    assert set(frames) == {("alice", "bob"), ("bob", "alice")}
