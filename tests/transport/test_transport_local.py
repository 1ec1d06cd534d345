"""LocalNetwork: round trips, timeouts, prompt disconnects."""

from __future__ import annotations

import threading
import time

import pytest

from smc_hmm.errors import (
    InvalidInputError,
    PeerDisconnectedError,
    PeerTimeoutError,
    TransportError,
)
from smc_hmm.transport import LocalNetwork


def test_round_trip_in_order():
    net = LocalNetwork(["alice", "bob", "trent"])
    a, b = net.transport("alice"), net.transport("bob")
    assert a.peers == ["bob", "trent"]
    frames = [b"", b"x", bytes(range(256)) * 100, bytearray(b"ba")]
    for f in frames:
        a.send_bytes("bob", f)
    assert [b.recv_bytes("alice", 1) for _ in frames] == [bytes(f) for f in frames]
    net.close()


def test_recv_timeout_is_typed_and_prompt():
    net = LocalNetwork(["alice", "bob"])
    t0 = time.monotonic()
    with pytest.raises(PeerTimeoutError):
        net.transport("alice").recv_bytes("bob", 0.2)
    assert 0.19 <= time.monotonic() - t0 < 0.5
    net.close()


def test_close_wakes_blocked_peer_promptly():
    net = LocalNetwork(["alice", "bob"])
    a, b = net.transport("alice"), net.transport("bob")
    a.send_bytes("bob", b"last words")
    threading.Timer(0.1, a.close).start()
    assert b.recv_bytes("alice", 10) == b"last words"  # sent before close: delivered
    t0 = time.monotonic()
    with pytest.raises(PeerDisconnectedError):
        b.recv_bytes("alice", 10)
    assert time.monotonic() - t0 < 1.0
    with pytest.raises(PeerDisconnectedError):
        b.send_bytes("alice", b"x")
    with pytest.raises(TransportError):
        a.send_bytes("bob", b"x")
    with pytest.raises(TransportError):
        a.recv_bytes("bob", 1)
    net.close()


def test_abort_makes_peers_fail_fast_with_reason():
    net = LocalNetwork(["alice", "bob", "trent"])
    results = {}

    def waiter(name):
        t0 = time.monotonic()
        try:
            net.transport(name).recv_bytes("trent", 30)
        except PeerDisconnectedError as exc:
            results[name] = (str(exc), time.monotonic() - t0)

    threads = [threading.Thread(target=waiter, args=(n,)) for n in ("alice", "bob")]
    for t in threads:
        t.start()
    time.sleep(0.05)
    net.abort("trent", "thread died: ValueError")
    for t in threads:
        t.join(5)
    assert set(results) == {"alice", "bob"}
    for msg, elapsed in results.values():
        assert "thread died" in msg
        assert elapsed < 2
    net.close()


def test_own_close_wakes_own_blocked_recv():
    net = LocalNetwork(["alice", "bob"])
    a = net.transport("alice")
    threading.Timer(0.1, a.close).start()
    t0 = time.monotonic()
    with pytest.raises(TransportError):
        a.recv_bytes("bob", 10)
    assert time.monotonic() - t0 < 2
    net.close()


def test_bad_names():
    with pytest.raises(InvalidInputError):
        LocalNetwork(["alice"])
    with pytest.raises(InvalidInputError):
        LocalNetwork(["alice", "alice"])
    net = LocalNetwork(["alice", "bob"])
    with pytest.raises(InvalidInputError):
        net.transport("carol")
    with pytest.raises(InvalidInputError):
        net.transport("alice").send_bytes("alice", b"self")
    with pytest.raises(InvalidInputError):
        net.transport("alice").send_bytes("bob", "not bytes")
    net.close()
