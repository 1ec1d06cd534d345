"""Channel: tag buffering, causal depth, observer byte counts, envelope validation."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from smc_hmm.errors import (
    InvalidInputError,
    PeerTimeoutError,
    ProtocolError,
    TransportError,
    WireError,
)
from smc_hmm.transport import Channel, ChannelObserver, LocalNetwork
from smc_hmm.wire import WireCodec


class Recorder(ChannelObserver):
    def __init__(self):
        self.sent = []
        self.received = []

    def on_send(self, peer, tag, nbytes, depth):
        self.sent.append((peer, tag, nbytes, depth))

    def on_recv(self, peer, tag, nbytes, depth, waited_seconds):
        self.received.append((peer, tag, nbytes, depth, waited_seconds))


def channels(names, **kwargs):
    net = LocalNetwork(names)
    return net, {n: Channel(net.transport(n), WireCodec(), timeout=5, **kwargs) for n in names}


def run_threads(*targets):
    errors = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]


def test_tags_are_buffered_out_of_order():
    net, ch = channels(["alice", "bob"])
    ch["alice"].send("bob", "first", 1)
    ch["alice"].send("bob", "second", {"x": [2, 3]})
    ch["alice"].send("bob", "first", 11)
    assert ch["bob"].recv("alice", "second") == {"x": [2, 3]}
    # only the frames read so far are buffered: the second "first" is still in transit
    assert ch["bob"].pending() == {"alice": {"first": 1}}
    assert ch["bob"].recv("alice", "first") == 1
    assert ch["bob"].recv("alice", "first") == 11
    assert ch["bob"].pending() == {}
    net.close()


def test_ping_pong_depth_is_twice_the_exchanges():
    k = 5
    net, ch = channels(["alice", "bob"])

    def alice():
        for i in range(k):
            ch["alice"].send("bob", "ping", i)
            assert ch["alice"].recv("bob", "pong") == i + 1

    def bob():
        for _ in range(k):
            ch["bob"].send("alice", "pong", ch["bob"].recv("alice", "ping") + 1)

    run_threads(alice, bob)
    assert ch["alice"].depth == 2 * k
    assert ch["bob"].depth == 2 * k - 1
    assert max(c.depth for c in ch.values()) == 2 * k
    net.close()


def test_parallel_sends_count_once():
    net, ch = channels(["alice", "bob", "trent"])
    # Trent sends to both in parallel; both answer; one round trip = depth 2.
    ch["trent"].send("alice", "q", 1)
    ch["trent"].send("bob", "q", 2)
    for name in ("alice", "bob"):
        x = ch[name].recv("trent", "q")
        assert ch[name].depth == 1
        ch[name].send("trent", "a", x * 10)
    assert ch["trent"].recv("alice", "a") == 10
    assert ch["trent"].recv("bob", "a") == 20
    assert ch["trent"].depth == 2
    net.close()


def test_depth_takes_max_over_incoming():
    net, ch = channels(["alice", "bob", "trent"])
    ch["alice"].send("bob", "x", 0)  # depth 1
    ch["bob"].recv("alice", "x")
    ch["bob"].send("trent", "x", 0)  # depth 2
    ch["trent"].send("alice", "y", 0)  # depth 1 (trent had depth 0)
    ch["trent"].recv("bob", "x")
    assert ch["trent"].depth == 2
    ch["trent"].send("alice", "z", 0)  # depth 3
    ch["alice"].recv("trent", "y")
    assert ch["alice"].depth == 1
    ch["alice"].recv("trent", "z")
    assert ch["alice"].depth == 3
    net.close()


def test_observer_sees_real_frame_sizes():
    rec_a, rec_b = Recorder(), Recorder()
    net = LocalNetwork(["alice", "bob"])
    codec = WireCodec()
    a = Channel(net.transport("alice"), codec, observer=rec_a)
    b = Channel(net.transport("bob"), codec, observer=rec_b)
    payloads = [None, 7, "text" * 100, np.arange(1000, dtype=np.float64), {"k": [1, 2**90]}]
    for i, p in enumerate(payloads):
        n = a.send("bob", f"m{i}", p)
        assert n == len(codec.encode({"t": f"m{i}", "d": 1, "b": p}))
    for i in reversed(range(len(payloads))):
        b.recv("alice", f"m{i}")
    sent = {tag: (nbytes, depth) for _, tag, nbytes, depth in rec_a.sent}
    for peer, tag, nbytes, depth, waited in rec_b.received:
        assert peer == "alice"
        assert (nbytes, depth) == sent[tag]
        assert waited >= 0
    assert {t for _, t, *_ in rec_b.received} == set(sent)
    assert all(s[0] == "bob" for s in rec_a.sent)
    net.close()


def test_observer_waited_seconds_measures_blocking():
    rec = Recorder()
    net = LocalNetwork(["alice", "bob"])
    a = Channel(net.transport("alice"), WireCodec())
    b = Channel(net.transport("bob"), WireCodec(), observer=rec)
    timer = threading.Timer(0.2, lambda: a.send("bob", "late", 1))
    timer.start()
    assert b.recv("alice", "late") == 1
    timer.join()
    assert 0.15 <= rec.received[0][4] < 2.0
    net.close()


def test_recv_timeout_with_other_tags_buffered():
    net, ch = channels(["alice", "bob"])
    ch["alice"].send("bob", "other", 1)
    with pytest.raises(PeerTimeoutError):
        ch["bob"].recv("alice", "wanted", timeout=0.1)
    assert ch["bob"].recv("alice", "other") == 1
    net.close()


def test_bad_envelopes_raise_wire_error():
    net = LocalNetwork(["alice", "bob"])
    codec = WireCodec()
    b = Channel(net.transport("bob"), codec)
    ta = net.transport("alice")
    for bad in (
        [1, 2],
        {"t": "x", "d": 1},
        {"t": "", "d": 1, "b": None},
        {"t": "x", "d": 0, "b": None},
        {"t": "x", "d": "1", "b": None},
        {"t": 5, "d": 1, "b": None},
        {"t": "x", "d": 1, "b": None, "extra": 1},
    ):
        ta.send_bytes("bob", codec.encode(bad))
        with pytest.raises(WireError):
            b.recv("alice", "x", timeout=1)
    ta.send_bytes("bob", b"\xc1garbage")
    with pytest.raises(WireError):
        b.recv("alice", "x", timeout=1)
    net.close()


def test_invalid_arguments():
    net, ch = channels(["alice", "bob"])
    with pytest.raises(InvalidInputError):
        ch["alice"].send("carol", "x", 1)
    with pytest.raises(InvalidInputError):
        ch["alice"].send("bob", "", 1)
    with pytest.raises(InvalidInputError):
        ch["alice"].recv("bob", 3)
    with pytest.raises(WireError):
        ch["alice"].send("bob", "x", object())
    ch["alice"].close()
    with pytest.raises(TransportError):
        ch["alice"].send("bob", "x", 1)
    net.close()


def test_strict_close_reports_unrequested_messages():
    net, ch = channels(["alice", "bob"], strict=True)
    ch["alice"].send("bob", "a", 1)
    ch["alice"].send("bob", "b", 2)
    assert ch["bob"].recv("alice", "b") == 2
    with pytest.raises(ProtocolError, match="'a'"):
        ch["bob"].close()
    ch["alice"].close()
