"""Fault injection at every message of a small 3-party ring protocol, local and over mTLS.

Each party runs in its own thread and closes its channel when it finishes or
fails, as real parties do.  For every (faulty party, send index, fault mode)
we check that the run ends well within the timeouts, that nobody returns a
wrong or partial value, that every party that did not finish raised a typed
TransportError, that the party that should have received the faulty message
is among them, and that no thread is left behind.
"""

from __future__ import annotations

import threading
import time

import pytest
from transport_support import PARTIES

from smc_hmm.errors import PeerDisconnectedError, PeerTimeoutError, TransportError
from smc_hmm.transport import (
    Channel,
    FaultyTransport,
    InjectedFaultError,
    LocalNetwork,
    TcpNetwork,
)
from smc_hmm.transport.faults import FAULT_MODES
from smc_hmm.wire import WireCodec

pytestmark = pytest.mark.usefixtures("no_thread_leak")

RING = PARTIES  # the token goes alice -> bob -> trent -> alice
ROUNDS = 2  # every party sends ROUNDS messages: 6 in all
TIMEOUT = 0.4


def ring_party(channel: Channel) -> list[int]:
    """Pass a counter around the ring alice -> bob -> trent -> alice, ROUNDS times."""
    i = RING.index(channel.name)
    nxt, prev = RING[(i + 1) % 3], RING[(i - 1) % 3]
    seen = []
    for r in range(ROUNDS):
        if channel.name == "alice":
            channel.send(nxt, "token", 100 * r)
            seen.append(channel.recv(prev, "token"))
        else:
            value = channel.recv(prev, "token")
            seen.append(value)
            channel.send(nxt, "token", value + 1)
    return seen


EXPECTED = {"alice": [2, 102], "bob": [0, 100], "trent": [1, 101]}


def make_network(backend: str, tls):
    if backend == "local":
        return LocalNetwork(RING)
    return TcpNetwork(RING, tls, connect_timeout=5)


def run_ring(network, faulty: dict[str, FaultyTransport]):
    """Run the ring with one thread per party; returns (outcomes, seconds)."""
    channels = {
        name: Channel(faulty.get(name) or network.transport(name), WireCodec(), timeout=TIMEOUT)
        for name in RING
    }
    outcomes: dict[str, object] = {}

    def party(name):
        try:
            outcomes[name] = ring_party(channels[name])
        except Exception as exc:  # inspected by the test
            outcomes[name] = exc
        finally:
            channels[name].close()

    threads = {n: threading.Thread(target=party, args=(n,), name=f"party-{n}") for n in RING}
    t0 = time.monotonic()
    for t in threads.values():
        t.start()
    for name, t in threads.items():
        if name not in faulty:
            t.join(10 * TIMEOUT + 5)
    for f in faulty.values():
        f.close()  # releases a stalled party (a real deployment would kill it)
    for t in threads.values():
        t.join(10)
    elapsed = time.monotonic() - t0
    assert not any(t.is_alive() for t in threads.values()), "a party thread hung"
    network.close()
    return outcomes, elapsed


@pytest.mark.parametrize("backend", ["local", "tcp"])
def test_clean_run(backend, tls):
    outcomes, _ = run_ring(make_network(backend, tls), {})
    assert outcomes == EXPECTED


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize("fail_at", range(ROUNDS))
@pytest.mark.parametrize("culprit", RING)
@pytest.mark.parametrize("backend", ["local", "tcp"])
def test_fault_at_every_message(backend, culprit, fail_at, mode, tls):
    network = make_network(backend, tls)
    wrapper = FaultyTransport(network.transport(culprit), fail_at, mode)
    outcomes, elapsed = run_ring(network, {culprit: wrapper})

    assert wrapper.triggered
    # the faulty send is global message number g; every party that should receive
    # a message from g on must fail (and so must the culprit unless it only dropped)
    g = 3 * fail_at + RING.index(culprit)
    must_fail = {RING[(m + 1) % 3] for m in range(g, 3 * ROUNDS)}
    if mode != "drop":
        must_fail.add(culprit)
    victim = RING[(g + 1) % 3]  # the intended receiver of the faulty send
    failed = {n for n, o in outcomes.items() if isinstance(o, BaseException)}
    assert failed == must_fail
    for name, outcome in outcomes.items():
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, TransportError), f"{name}: untyped {outcome!r}"
        else:
            assert outcome == EXPECTED[name], f"{name} returned a partial result"
    assert isinstance(outcomes[victim], PeerTimeoutError | PeerDisconnectedError)
    if mode != "drop":
        assert isinstance(outcomes[culprit], InjectedFaultError)
    if mode == "disconnect":
        # a crash is noticed at once, never by waiting for a timeout
        assert isinstance(outcomes[victim], PeerDisconnectedError)
        assert elapsed < TIMEOUT
    else:
        # one timeout expires, then the failure cascades promptly
        assert elapsed < 2 * TIMEOUT + 0.5


def test_faulty_transport_validates_arguments():
    network = LocalNetwork(["a", "b"])
    with pytest.raises(ValueError):
        FaultyTransport(network.transport("a"), 0, "explode")
    with pytest.raises(ValueError):
        FaultyTransport(network.transport("a"), -1, "drop")
    network.close()


def test_stall_ends_after_stall_seconds():
    network = LocalNetwork(["a", "b"])
    faulty = FaultyTransport(network.transport("a"), 0, "stall", stall_seconds=0.2)
    t0 = time.monotonic()
    with pytest.raises(InjectedFaultError):
        faulty.send_bytes("b", b"x")
    assert 0.15 < time.monotonic() - t0 < 1.0
    faulty.send_bytes("b", b"y")  # only send 0 misbehaves
    assert network.transport("b").recv_bytes("a", 1) == b"y"
    network.close()
