"""simulate(, min_key_bits=512): contexts, metering, failure propagation, clean teardown."""

import threading
import time

import numpy as np
import pytest

from smc_hmm.cost import CostLedger
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.errors import (
    InvalidInputError,
    PeerDisconnectedError,
    PeerTimeoutError,
    PrecisionError,
    ProtocolError,
    TransportError,
)
from smc_hmm.messages import Ciphertexts, Key, Message
from smc_hmm.runtime import PartyContext, simulate
from smc_hmm.transport import Channel, LocalNetwork
from smc_hmm.wire import WireCodec


def _ping(ctx, n):
    for i in range(n):
        ctx.send("pong", "ping", i)
        assert ctx.recv("pong", "pong") == i + 1
    return "ping done"


def _pong(ctx, n):
    for _ in range(n):
        x = ctx.recv("ping", "ping")
        ctx.send("ping", "pong", x + 1)
    return "pong done"


def test_outputs_rounds_and_messages_of_a_ping_pong():
    result = simulate(
        {"ping": _ping, "pong": _pong}, {"ping": (4,), "pong": (4,)}, min_key_bits=512
    )
    assert result.outputs == {"ping": "ping done", "pong": "pong done"}
    assert result["ping"] == "ping done"
    assert result.cost.rounds == 8  # each message waits for the previous one
    assert result.cost.messages_total == 8
    assert result.cost.parties["pong"]["messages"] == {"sent": 4, "recv": 4}
    assert result.cost.meta["mode"] == "in-process"


X = Message("x", Ciphertexts(0, 3, (3,)))
Y = Message("y", Ciphertexts(0, 6, (3,)))
KEY = Message("key", Key())


def test_each_party_meters_its_own_work_on_received_ciphertexts(keypair_512):
    def owner(ctx):
        pk, sk = ctx.keypair
        ctx.send("helper", "pk", pk)
        ctx.send("helper", X, CipherArray.encrypt(pk, [1, 2, 3]))
        y = ctx.recv("helper", Y)
        return y.decrypt_ints(sk).tolist()

    def helper(ctx):
        pk = ctx.recv("owner", "pk")
        assert isinstance(pk, PublicKey) and pk.meter is ctx.ledger
        x = ctx.recv("owner", X)
        assert x.public_key is pk  # decoded under this party's metered view
        assert x.bound == 3  # the declared bound, not the sender's
        pk.meter.count("compare", 2)  # a composite operation, counted by its own layer
        with ctx.phase("double"):
            y = (x + x).rerandomize()
        ctx.send("owner", Y, y)

    result = simulate(
        {"owner": owner, "helper": helper}, keys={"owner": keypair_512}, min_key_bits=512
    )
    assert result["owner"] == [2, 4, 6]
    owner_ops, helper_ops = result.cost.ops("owner"), result.cost.ops("helper")
    assert owner_ops["encrypt"] == 3 and owner_ops["decrypt"] == 3 and owner_ops["add"] == 0
    assert helper_ops["add"] == 3 and helper_ops["rerandomize"] == 3
    assert helper_ops["compare"] == 2 and helper_ops["encrypt"] == 0
    phase = result.cost.parties["helper"]["phases"]["double"]
    assert phase["ops"]["add"] == 3
    assert result.cost.key_bits == 512


def test_first_error_is_raised_and_the_others_stop_promptly():
    before = set(threading.enumerate())

    def fails(ctx):
        time.sleep(0.05)
        raise ValueError("boom")

    def waits(ctx):
        ctx.recv("fails", "never")  # would wait 30 s without the abort

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="boom") as info:
        simulate({"fails": fails, "waits": waits, "also": waits}, timeout=30, min_key_bits=512)
    assert time.monotonic() - t0 < 5
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "raised by party fails" in notes
    assert set(threading.enumerate()) == before


def test_a_stalled_peer_times_out_with_a_typed_error():
    def stalls(ctx):
        ctx.recv("other", "never")

    def other(ctx):
        ctx.recv("stalls", "never")

    t0 = time.monotonic()
    with pytest.raises(PeerTimeoutError):
        simulate({"stalls": stalls, "other": other}, timeout=0.3, min_key_bits=512)
    assert time.monotonic() - t0 < 3


def test_a_party_ending_early_disconnects_its_waiting_peer():
    with pytest.raises(PeerDisconnectedError):
        simulate(
            {"quits": lambda ctx: None, "waits": lambda ctx: ctx.recv("quits", "x")},
            timeout=30,
            min_key_bits=512,
        )


def test_unread_messages_are_a_protocol_error():
    def talker(ctx):
        ctx.send("listener", "a", 1)
        ctx.send("listener", "b", 2)

    def listener(ctx):
        return ctx.recv("talker", "b")  # "a" is buffered and never read

    with pytest.raises(ProtocolError, match="never received"):
        simulate({"talker": talker, "listener": listener}, min_key_bits=512)


def test_record_views_and_invalid_calls(keypair_512):
    result = simulate(
        {"a": lambda ctx: ctx.send("b", "t", np.arange(3)), "b": lambda ctx: ctx.recv("a", "t")},
        record_views=True,
        min_key_bits=512,
    )
    assert result.views["a"] == []
    ((peer, tag, payload),) = result.views["b"]
    assert (peer, tag) == ("a", "t") and payload.tolist() == [0, 1, 2]
    with pytest.raises(InvalidInputError):
        simulate({}, min_key_bits=512)
    with pytest.raises(InvalidInputError):
        simulate(
            {"a": lambda ctx: None, "b": lambda ctx: None},
            keys={"c": keypair_512},
            min_key_bits=512,
        )
    with pytest.raises(InvalidInputError):
        simulate({"a": lambda ctx: None, "b": "not callable"}, min_key_bits=512)
    with pytest.raises(InvalidInputError):
        simulate({"a": lambda ctx: None, "b": lambda ctx: None}, timeout=0, min_key_bits=512)


def test_party_context_keys(keypair_512, other_keypair_512):
    pk, sk = keypair_512
    net = LocalNetwork(["a", "b"])
    ledger = CostLedger("a")
    ctx = PartyContext(
        "a", Channel(net.transport("a"), WireCodec()), keypair=keypair_512, ledger=ledger
    )
    view, metered_sk = ctx.keypair
    assert view.meter is ledger and pk.meter is not ledger
    CipherArray.encrypt(view, [5]).decrypt(metered_sk)
    assert ledger.ops["encrypt"] == 1 and ledger.ops["decrypt"] == 1
    assert ctx.adopt_key(pk) is view  # one view per key
    assert set(ctx.keys) == {pk.fingerprint}
    with pytest.raises(InvalidInputError):
        PartyContext("a", ctx.channel, keypair=(pk, other_keypair_512[1]))
    bare = PartyContext("b", Channel(net.transport("b"), WireCodec()))
    with pytest.raises(InvalidInputError):
        _ = bare.keypair
    net.close()
    with pytest.raises(TransportError):
        ctx.send("b", "x", 1)


def test_ciphertexts_travel_only_in_declared_messages(keypair_512):
    def owner(ctx):
        pk, _ = ctx.keypair
        ctx.send("helper", "x", CipherArray.encrypt(pk, [1]))

    with pytest.raises(InvalidInputError, match="declared messages"):
        simulate(
            {"owner": owner, "helper": lambda ctx: None},
            keys={"owner": keypair_512},
            min_key_bits=512,
        )


def test_a_sender_whose_values_exceed_the_declared_bound_is_stopped(keypair_512):
    def owner(ctx):
        pk, _ = ctx.keypair
        ctx.send("helper", X, CipherArray.encrypt(pk, [1, 2, 4]))  # 4 > the declared 3

    with pytest.raises(PrecisionError, match="declares"):
        simulate(
            {"owner": owner, "helper": lambda ctx: None},
            keys={"owner": keypair_512},
            min_key_bits=512,
        )


def test_a_fresh_field_is_re_randomised_on_the_way_out_and_a_plain_one_is_not(keypair_512):
    """``Ciphertexts(fresh=True)``: the receiver gets other ciphertexts of the same
    plaintexts than the sender computed (the receiver cannot match them with its own),
    each send drawing one randomizer a ciphertext; a field not declared fresh travels as
    it is."""
    fresh, plain = Message("f", Ciphertexts(0, 7, (3,), fresh=True)), Message("p", Y.body)
    pk, sk = keypair_512
    values = CipherArray.encrypt(pk, [1, 2, 3])

    def owner(ctx):
        ctx.send("helper", KEY, pk)
        ctx.send("helper", fresh, values)
        ctx.send("helper", plain, values)

    def helper(ctx):
        ctx.recv("owner", KEY)
        return ctx.recv("owner", fresh), ctx.recv("owner", plain)

    got, same = simulate(
        {"owner": owner, "helper": helper}, keys={"owner": keypair_512}, min_key_bits=512
    ).outputs["helper"]
    sent = [int(c) for c in values.ciphertexts()]
    assert not set(int(c) for c in got.ciphertexts()) & set(sent)
    assert [int(c) for c in same.ciphertexts()] == sent
    assert list(got.decrypt_ints(sk)) == list(same.decrypt_ints(sk)) == [1, 2, 3]


def test_a_deferred_refusal_is_raised_after_the_roles_last_message():
    """ctx.defer: a role records a refusal on private data, carries on with its messages,
    and the runner raises it once the role has returned -- the peer's view is that of an
    accepted run (the peer finishes too)."""
    from smc_hmm.errors import InvalidInputError, PrecisionError, SmcHmmError

    seen = []

    def alice(ctx):
        ctx.defer(PrecisionError("a private check failed"))
        ctx.send("bob", "ping", 1)
        seen.append(ctx.recv("bob", "pong"))
        return "alice's output"

    def bob(ctx):
        x = ctx.recv("alice", "ping")
        ctx.send("alice", "pong", x + 1)
        return "bob's output"

    with pytest.raises(SmcHmmError, match="a private check failed"):
        simulate({"alice": alice, "bob": bob})
    assert seen == [2]  # every message went out before the refusal
    with pytest.raises(InvalidInputError, match="typed errors"):
        simulate({"alice": lambda ctx: ctx.defer(ValueError("untyped")), "bob": lambda ctx: None})


def test_a_served_client_is_named_by_its_certificate_in_errors():
    """A client whose certificate says carol plays the config's alice: its errors name
    carol (the protocol still addresses the role alice)."""
    from smc_hmm.errors import InvalidInputError
    from smc_hmm.transport.base import Channel
    from smc_hmm.transport.local import LocalNetwork
    from smc_hmm.wire import WireCodec

    net = LocalNetwork(["alice", "bob"])
    ctx = PartyContext(
        "alice", Channel(net.transport("alice"), WireCodec()), label="carol (as alice)"
    )
    assert ctx.name == "alice"
    with pytest.raises(InvalidInputError, match=r"party carol \(as alice\) holds no key pair"):
        _ = ctx.keypair
    net.close()
