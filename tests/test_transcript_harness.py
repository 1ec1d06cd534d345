"""The transcript harness itself: it passes for ciphertext-only differences and fails
for any private-dependent byte outside ciphertexts and declared revealed fields, and,
given the run's keys, for a ciphertext beyond its declared bound; its freshness check
finds a ciphertext sent back to the key holder without fresh randomness."""

from __future__ import annotations

import numpy as np
import pytest
from transcript_harness import (
    assert_same_transcripts,
    assert_sends_within_bounds,
    recording_sends,
    stale_ciphertexts,
)

from smc_hmm.crypto import CipherArray
from smc_hmm.messages import Ciphertexts, Key, Message, Public, Revealed
from smc_hmm.runtime import simulate

KEY = Message("key", Key())
VALUE = Message("value", Ciphertexts(0, 2**32, (1,)))
LEAKY = Message("leaky", Public((int,)))
OPEN = Message("open", Revealed("the winner", (int,)))


def _run(keypair, secret, wrap, extra):
    def alice(ctx):
        ctx.send("bob", KEY, keypair[0])
        return ctx.recv("bob", VALUE).decrypt_ints(keypair[1])

    def bob(ctx):
        pk = ctx.recv("alice", KEY)
        ctx.send("alice", VALUE, CipherArray.encrypt_encoded(pk, [secret], 0, 2**32))
        for message, value in extra(secret):
            ctx.send("alice", message, value)

    def alice_then_extra(ctx):
        out = alice(ctx)
        for message, _ in extra(secret):
            ctx.recv("bob", message)
        return out

    simulate(
        {"alice": alice_then_extra, "bob": bob},
        keys={"alice": keypair},
        wrap_transport=wrap,
        min_key_bits=512,
    )


def test_ciphertexts_alone_may_differ(keypair_512):
    frames = assert_same_transcripts(
        lambda s, wrap: _run(keypair_512, s, wrap, lambda s: []), [5, 2**31], [KEY, VALUE]
    )
    assert len(frames[("alice", "bob")]) == 1


def test_a_private_dependent_public_field_fails(keypair_512):
    with pytest.raises(AssertionError, match="differs"):
        assert_same_transcripts(
            lambda s, wrap: _run(keypair_512, s, wrap, lambda s: [(LEAKY, s.bit_length())]),
            [5, 2**31],
            [KEY, VALUE, LEAKY],
        )


def test_a_declared_revealed_field_is_masked(keypair_512):
    assert_same_transcripts(
        lambda s, wrap: _run(keypair_512, s, wrap, lambda s: [(OPEN, s % 7)]),
        [5, 2**31],
        [KEY, VALUE, OPEN],
    )


def test_a_ciphertext_beyond_its_declared_bound_fails_when_the_keys_are_given(keypair_512):
    """A role that asserts a bound tighter than its values (``with_bound``) passes the
    send's check, which sees only the asserted bound; the harness opens the ciphertext
    with the run's key and finds it.  Within the bound, the same run passes."""

    def run(secret, wrap):
        _run(keypair_512, secret, wrap, lambda s: [])

    assert_same_transcripts(run, [5, -(2**32)], [KEY, VALUE], keys=[keypair_512])
    with pytest.raises(AssertionError, match="value: a plaintext of 34 bits beyond"):
        assert_same_transcripts(run, [5, 2**33], [KEY, VALUE], keys=[keypair_512])
    with recording_sends() as sent:  # the same check on the sends the run declared
        run(2**33, None)
    with pytest.raises(AssertionError, match="sent value: a plaintext of 34 bits beyond"):
        assert_sends_within_bounds(sent, [keypair_512])


def test_a_ciphertext_sent_back_without_fresh_randomness_is_found(keypair_512):
    """Bob sends Alice E(x)^3 (her ciphertext times his weight): the same bytes in two
    runs where only his randomizers differ, so it is stale; re-randomised it differs;
    a trivial encryption 1 + m n is the same in both runs but carries nothing."""
    from smc_hmm.wire import WireCodec

    pk, _ = keypair_512
    mine = CipherArray.encrypt_encoded(pk, [7], 0, 2**8)
    codec = WireCodec([pk])

    def frames(reply):
        return {("alice", "bob"): [codec.encode({"t": "value", "b": reply})]}

    stale = mine * 3
    trivial = CipherArray(pk, np.array([1 + 5 * int(pk.n)], dtype=object), 0, 8)
    keys = {"alice": keypair_512}
    found, compared = stale_ciphertexts(frames(stale), frames(stale), keys)
    assert (found, compared) == ([("alice", "bob", 0, "value")], 1)
    fresh = stale_ciphertexts(frames(stale.rerandomize()), frames(stale.rerandomize()), keys)
    assert fresh == ([], 1)
    assert stale_ciphertexts(frames(trivial), frames(trivial), keys) == ([], 1)
