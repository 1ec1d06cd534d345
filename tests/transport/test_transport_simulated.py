"""SimulatedNetwork: latency and bandwidth delays are real and modelled per link."""

from __future__ import annotations

import math
import threading
import time

import pytest

from smc_hmm.errors import InvalidInputError, PeerDisconnectedError, PeerTimeoutError
from smc_hmm.transport import Channel, LocalNetwork, SimulatedNetwork
from smc_hmm.wire import WireCodec


def test_default_is_off():
    net = SimulatedNetwork(LocalNetwork(["a", "b"]))
    assert net.latency_s == 0 and math.isinf(net.bandwidth_bytes_per_s)
    t0 = time.monotonic()
    for i in range(200):
        net.transport("a").send_bytes("b", bytes([i % 256]))
        assert net.transport("b").recv_bytes("a", 1) == bytes([i % 256])
    assert time.monotonic() - t0 < 0.5
    net.close()


def test_latency_per_message_and_ping_pong_rounds():
    k, latency = 3, 0.05
    net = SimulatedNetwork(LocalNetwork(["a", "b"]), latency_s=latency)
    a = Channel(net.transport("a"), WireCodec(), timeout=5)
    b = Channel(net.transport("b"), WireCodec(), timeout=5)

    def bob():
        for _ in range(k):
            b.send("a", "pong", b.recv("a", "ping"))

    thread = threading.Thread(target=bob)
    thread.start()
    t0 = time.monotonic()
    for i in range(k):
        a.send("b", "ping", i)
        assert a.recv("b", "pong") == i
    elapsed = time.monotonic() - t0
    thread.join()
    assert 2 * k * latency <= elapsed < 2 * k * latency + 0.25
    assert a.depth == 2 * k
    net.close()


def test_bandwidth_serialises_one_link_but_not_different_peers():
    bandwidth = 1_000_000.0  # 1 MB/s
    net = SimulatedNetwork(LocalNetwork(["a", "b", "c"]), bandwidth_bytes_per_s=bandwidth)
    a, b, c = (net.transport(n) for n in "abc")
    frame = b"x" * 100_000  # 0.1 s each
    t0 = time.monotonic()
    a.send_bytes("b", frame)
    a.send_bytes("b", frame)
    a.send_bytes("c", frame)
    assert c.recv_bytes("a", 5) == frame
    t_c = time.monotonic() - t0
    b.recv_bytes("a", 5)
    b.recv_bytes("a", 5)
    t_b = time.monotonic() - t0
    assert 0.1 <= t_c < 0.18  # the link to c runs in parallel with the link to b
    assert 0.2 <= t_b < 0.3  # two frames queue on the link to b
    net.close()


def test_frame_in_flight_times_out_then_arrives():
    net = SimulatedNetwork(LocalNetwork(["a", "b"]), latency_s=0.3)
    net.transport("a").send_bytes("b", b"slow")
    t0 = time.monotonic()
    with pytest.raises(PeerTimeoutError):
        net.transport("b").recv_bytes("a", 0.1)
    assert 0.09 <= time.monotonic() - t0 < 0.2
    assert net.transport("b").recv_bytes("a", 1) == b"slow"
    assert time.monotonic() - t0 >= 0.29
    net.close()


def test_disconnect_passes_through():
    inner = LocalNetwork(["a", "b"])
    net = SimulatedNetwork(inner, latency_s=0.01)
    net.transport("a").close()
    with pytest.raises(PeerDisconnectedError):
        net.transport("b").recv_bytes("a", 5)
    net.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"latency_s": -1},
        {"latency_s": math.nan},
        {"bandwidth_bytes_per_s": 0},
        {"bandwidth_bytes_per_s": math.nan},
    ],
)
def test_invalid_parameters(kwargs):
    with pytest.raises(InvalidInputError):
        SimulatedNetwork(LocalNetwork(["a", "b"]), **kwargs)
