"""TCP transport: round trips, timeouts, disconnects, mutual-TLS refusals, frame limits."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import msgpack
import numpy as np
import pytest
from transport_support import PARTIES

from smc_hmm.crypto import CipherArray
from smc_hmm.errors import (
    AuthenticationError,
    BackpressureError,
    ConfigError,
    FrameTooLargeError,
    InvalidInputError,
    PeerDisconnectedError,
    PeerTimeoutError,
    TransportError,
)
from smc_hmm.transport import Channel, TcpNetwork, TlsConfig, tcp_transport
from smc_hmm.transport.tcp import ConnectionBudget
from smc_hmm.wire import WireCodec

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def bound_listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    return s


def connect_concurrently(specs: dict[str, dict], connect_timeout: float = 5.0):
    """Start ``tcp_transport`` for every party in its own thread.

    Returns ``(results, elapsed)``: each party's transport or exception and the
    seconds it took.
    """
    listeners = {name: bound_listener() for name in specs}
    addresses = {name: ("127.0.0.1", s.getsockname()[1]) for name, s in listeners.items()}
    results: dict[str, object] = {}
    elapsed: dict[str, float] = {}

    def run(name):
        t0 = time.monotonic()
        try:
            results[name] = tcp_transport(
                name,
                addresses,
                connect_timeout=connect_timeout,
                listener=listeners[name],
                **specs[name],
            )
        except Exception as exc:  # inspected by the test
            results[name] = exc
            listeners[name].close()
        elapsed[name] = time.monotonic() - t0

    threads = [threading.Thread(target=run, args=(n,)) for n in specs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(connect_timeout + 10)
    assert not any(t.is_alive() for t in threads)
    return results, elapsed


def listen_in_thread(name, addresses, tls, connect_timeout, listener):
    """Start ``tcp_transport(name, ...)`` on ``listener`` in a thread.  Returns the thread
    and a dict that gets the transport (or the exception) under ``name`` and the seconds
    the set-up took under ``"seconds"``."""
    out: dict = {}
    t0 = time.monotonic()

    def run():
        try:
            out[name] = tcp_transport(
                name, addresses, tls, connect_timeout=connect_timeout, listener=listener
            )
        except Exception as exc:  # inspected by the test
            out[name] = exc
        out["seconds"] = time.monotonic() - t0

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def carries_then_close(alice, bob, payload: bytes) -> None:
    """alice's ``payload`` reaches bob; both transports are closed, whatever happens."""
    try:
        alice.send_bytes("bob", payload)
        assert bob.recv_bytes("alice", 5) == payload
    finally:
        alice.close()
        bob.close()


def raises_within(seconds: float, error: type[Exception], call) -> None:
    """``call()`` raises ``error`` in less than ``seconds``."""
    t0 = time.monotonic()
    with pytest.raises(error):
        call()
    assert time.monotonic() - t0 < seconds


def close_all(results) -> None:
    for r in results.values():
        if not isinstance(r, Exception):
            r.close()


@pytest.fixture(params=["tls", "plain"])
def network(request, tls):
    net = TcpNetwork(PARTIES, tls if request.param == "tls" else None, connect_timeout=5)
    yield net
    net.close()


# -- basics -------------------------------------------------------------------------


def test_round_trip_in_order_both_directions(network):
    a, b, t = (network.transport(n) for n in PARTIES)
    assert a.peers == ["bob", "trent"] and t.peers == ["alice", "bob"]
    big = os.urandom(3 * 2**20)
    frames = [b"", b"x", big, b"y" * 70_000, b"tail"]
    # both directions at once with multi-megabyte frames: the I/O threads must not deadlock
    for f in frames:
        a.send_bytes("bob", f)
        b.send_bytes("alice", f)
    assert [b.recv_bytes("alice", 5) for _ in frames] == frames
    assert [a.recv_bytes("bob", 5) for _ in frames] == frames
    t.send_bytes("alice", b"from trent")
    assert a.recv_bytes("trent", 5) == b"from trent"


def test_channel_with_ciphertexts_over_tls(tls, keypair_512):
    pk, sk = keypair_512
    net = TcpNetwork(["alice", "bob"], {n: tls[n] for n in ("alice", "bob")})
    try:
        alice = Channel(net.transport("alice"), WireCodec([pk]), timeout=5)
        bob = Channel(net.transport("bob"), WireCodec([pk]), timeout=5)
        ca = CipherArray.encrypt(pk, np.array([[1.5, -2.0], [0.25, 8.0]]), scale=16)
        alice.send("bob", "step-1", {"x": ca, "meta": [1, 2**80]})
        got = bob.recv("alice", "step-1")
        assert got["meta"] == [1, 2**80]
        # the scale is not on the wire: the receiver's declaration supplies it
        assert np.array_equal(got["x"].with_scale(16).decrypt(sk), [[1.5, -2.0], [0.25, 8.0]])
        bob.send("alice", "step-2", got["x"].ciphertexts()[0] == ca.ciphertexts()[0])
        assert alice.recv("bob", "step-2") is True
        assert (alice.depth, bob.depth) == (2, 1)
    finally:
        net.close()


def test_recv_timeout_within_slack(network):
    a = network.transport("alice")
    for timeout in (0.05, 0.3):
        t0 = time.monotonic()
        with pytest.raises(PeerTimeoutError):
            a.recv_bytes("trent", timeout)
        assert timeout - 0.01 <= time.monotonic() - t0 < timeout + 0.25


def test_peer_close_is_prompt_and_after_its_last_frames(network):
    a, b = network.transport("alice"), network.transport("bob")
    b.send_bytes("alice", b"one")
    b.send_bytes("alice", b"two")
    threading.Timer(0.2, b.close).start()
    assert a.recv_bytes("bob", 5) == b"one"
    assert a.recv_bytes("bob", 5) == b"two"
    raises_within(1.5, PeerDisconnectedError, lambda: a.recv_bytes("bob", 30))
    with pytest.raises(PeerDisconnectedError):  # and it stays that way
        a.recv_bytes("bob", 30)
    with pytest.raises(PeerDisconnectedError):
        a.send_bytes("bob", b"anyone there?")
    # the other link is unaffected
    network.transport("trent").send_bytes("alice", b"still here")
    assert a.recv_bytes("trent", 5) == b"still here"


def test_own_close_wakes_a_blocked_recv(network):
    a = network.transport("alice")
    timer = threading.Timer(0.2, a.close)
    timer.start()
    raises_within(2, TransportError, lambda: a.recv_bytes("bob", 30))
    timer.join()
    with pytest.raises(TransportError):
        a.send_bytes("bob", b"x")


def test_peer_may_start_later():
    listeners = {n: bound_listener() for n in ("alice", "bob")}
    addresses = {n: ("127.0.0.1", s.getsockname()[1]) for n, s in listeners.items()}
    # bob's port refuses connections until bob starts: close his listener for now
    listeners["bob"].close()
    out = {}

    def start_bob():
        time.sleep(0.5)
        out["bob"] = tcp_transport("bob", addresses, connect_timeout=5)

    thread = threading.Thread(target=start_bob)
    thread.start()
    t0 = time.monotonic()
    alice = tcp_transport("alice", addresses, connect_timeout=5, listener=listeners["alice"])
    thread.join()
    assert time.monotonic() - t0 >= 0.4
    carries_then_close(alice, out["bob"], b"late hello")


def test_connect_deadline():
    lst = bound_listener()
    port = lst.getsockname()[1]
    lst.close()  # nobody listens for bob
    addresses = {"alice": ("127.0.0.1", 1), "bob": ("127.0.0.1", port)}
    raises_within(
        1.5, PeerTimeoutError, lambda: tcp_transport("alice", addresses, connect_timeout=0.5)
    )


def test_listener_times_out_when_nobody_dials():
    lst = bound_listener()
    addresses = {"alice": ("127.0.0.1", 9), "bob": ("127.0.0.1", lst.getsockname()[1])}
    raises_within(
        1.5,
        PeerTimeoutError,
        lambda: tcp_transport("bob", addresses, connect_timeout=0.4, listener=lst),
    )


def test_bad_configuration(tmp_path):
    with pytest.raises(ConfigError):
        tcp_transport("alice", {"bob": ("127.0.0.1", 1)})
    with pytest.raises(ConfigError):
        tcp_transport("alice", {"alice": ("127.0.0.1", 1), "bob": ("127.0.0.1", "x")})
    with pytest.raises(ConfigError):
        TlsConfig(tmp_path / "no-ca.pem", tmp_path / "a.pem", tmp_path / "a.key").server_context()


# -- an OS process as the peer --------------------------------------------------------


PEER_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from smc_hmm.transport import TlsConfig, tcp_transport
    port_a, port_b, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    tls = TlsConfig(f"{d}/ca.pem", f"{d}/bob.pem", f"{d}/bob.key")
    addresses = {"alice": ("127.0.0.1", port_a), "bob": ("127.0.0.1", port_b)}
    t = tcp_transport("bob", addresses, tls, connect_timeout=20)
    frame = t.recv_bytes("alice", 20)
    t.send_bytes("alice", frame[::-1])
    time.sleep(0.3)
    os._exit(3)  # die without closing anything
    """
)


@pytest.mark.slow
def test_peer_process_dies(certs):
    listeners = {n: bound_listener() for n in ("alice", "bob")}
    ports = [s.getsockname()[1] for s in listeners.values()]
    listeners["bob"].close()  # the child binds it
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PEER_SCRIPT,
            str(ports[0]),
            str(ports[1]),
            str(certs.ca_cert.parent),
        ],
        env=env,
    )
    try:
        alice = tcp_transport(
            "alice",
            {"alice": ("127.0.0.1", ports[0]), "bob": ("127.0.0.1", ports[1])},
            certs.tls_config("alice"),
            connect_timeout=20,
            listener=listeners["alice"],
        )
        try:
            alice.send_bytes("bob", b"abc")
            assert alice.recv_bytes("bob", 10) == b"cba"
            raises_within(5, PeerDisconnectedError, lambda: alice.recv_bytes("bob", 30))
        finally:
            alice.close()
        assert child.wait(10) == 3
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# -- mutual TLS refusals ----------------------------------------------------------------


def refused_connection(alice_tls: TlsConfig, bob_tls: TlsConfig):
    """alice dials bob with these TLS configurations, 1 s to connect; any transport that came
    up is closed. Returns ``connect_concurrently``'s ``(results, elapsed)``."""
    results, elapsed = connect_concurrently(
        {"alice": {"tls": alice_tls}, "bob": {"tls": bob_tls}}, connect_timeout=1.0
    )
    close_all(results)
    return results, elapsed


def test_client_with_certificate_from_another_ca_is_refused(certs, rogue_certs):
    # alice trusts the right CA, but her certificate was signed by another one
    forged = TlsConfig(certs.ca_cert, rogue_certs.certs["alice"], rogue_certs.keys["alice"])
    results, elapsed = refused_connection(forged, certs.tls_config("bob"))
    assert isinstance(results["alice"], AuthenticationError | PeerDisconnectedError)
    assert "refused" in str(results["alice"])
    assert isinstance(results["bob"], AuthenticationError)
    assert "refused" in str(results["bob"]) and "certificate" in str(results["bob"])
    assert max(elapsed.values()) < 1.0 + 1.0


@pytest.mark.parametrize(
    "rogue",
    [
        pytest.param("alice", id="client_trusting_another_ca_refuses_the_server"),
        pytest.param("bob", id="server_with_certificate_from_another_ca_is_refused"),
    ],
)
def test_a_party_of_another_ca_is_refused(certs, rogue_certs, rogue):
    # alice (the client) or bob (the server) holds another CA's certificate and trusts it
    results, elapsed = refused_connection(
        *((rogue_certs if n == rogue else certs).tls_config(n) for n in ("alice", "bob"))
    )
    assert isinstance(results["alice"], AuthenticationError)
    assert isinstance(results["bob"], AuthenticationError | PeerDisconnectedError)
    assert max(elapsed.values()) < 2.0


def test_valid_certificate_for_the_wrong_party_is_refused(certs):
    # mallory holds a certificate from the right CA, but claims to be alice
    results, elapsed = refused_connection(certs.tls_config("mallory"), certs.tls_config("bob"))
    assert isinstance(results["alice"], AuthenticationError)
    assert "mallory" in str(results["alice"])  # bob's refusal reason reached the client
    assert isinstance(results["bob"], AuthenticationError)
    assert max(elapsed.values()) < 2.0


def test_server_presenting_another_partys_certificate_is_refused(certs):
    # the process listening at bob's address holds trent's (valid) certificate
    results, elapsed = refused_connection(certs.tls_config("alice"), certs.tls_config("trent"))
    assert isinstance(results["alice"], AuthenticationError)
    assert "trent" in str(results["alice"])
    assert isinstance(results["bob"], AuthenticationError | PeerDisconnectedError)
    assert max(elapsed.values()) < 2.0


def test_plain_client_and_certless_tls_client_are_refused(certs):
    import ssl

    lst = bound_listener()
    port = lst.getsockname()[1]
    addresses = {"alice": ("127.0.0.1", 9), "bob": ("127.0.0.1", port)}
    thread, out = listen_in_thread("bob", addresses, certs.tls_config("bob"), 1.0, lst)
    hello = msgpack.packb({"v": 1, "from": "alice", "to": "bob"})
    framed = len(hello).to_bytes(4, "big") + hello
    # 1. a plain-TCP client speaking our hello
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(framed)
        s.settimeout(2)
        try:
            answer = s.recv(100)
        except ConnectionResetError:
            answer = b""
        assert answer == b""  # dropped without an answer
    # 2. a TLS client that trusts the CA but has no certificate
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=str(certs.ca_cert))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
        pytest.raises((ssl.SSLError, ConnectionError)),
        ctx.wrap_socket(raw) as s,
    ):
        s.sendall(framed)
        s.settimeout(2)
        if not s.recv(100):
            raise ConnectionError("closed")
    thread.join(5)
    assert isinstance(out["bob"], AuthenticationError)
    assert "refused" in str(out["bob"])


# -- frame size limits ------------------------------------------------------------------


def test_frame_limit_enforced_by_receiver_and_sender(tls):
    results, _ = connect_concurrently(
        {
            "alice": {"tls": tls["alice"], "max_frame_bytes": 2**20},
            "bob": {"tls": tls["bob"], "max_frame_bytes": 1024},
        }
    )
    alice, bob = results["alice"], results["bob"]
    try:
        with pytest.raises(FrameTooLargeError):
            alice.send_bytes("bob", b"x" * (2**20 + 1))  # over alice's own limit
        alice.send_bytes("bob", b"x" * 1024)  # exactly at bob's limit
        assert len(bob.recv_bytes("alice", 5)) == 1024
        alice.send_bytes("bob", b"x" * 5000)  # over bob's limit
        with pytest.raises(FrameTooLargeError):
            bob.recv_bytes("alice", 5)
        with pytest.raises(FrameTooLargeError):  # the link stays broken
            bob.recv_bytes("alice", 5)
        # bob hung up on alice: she learns it promptly
        with pytest.raises(PeerDisconnectedError):
            alice.recv_bytes("bob", 5)
    finally:
        close_all(results)


def test_declared_length_is_checked_before_the_body():
    """A peer declaring a 4 GB frame is cut off at once, without waiting for the body."""
    lst = bound_listener()
    port = lst.getsockname()[1]
    addresses = {"alice": ("127.0.0.1", 9), "bob": ("127.0.0.1", port)}
    out = {}

    def serve():
        out["bob"] = tcp_transport(
            "bob", addresses, connect_timeout=5, listener=lst, max_frame_bytes=10_000
        )

    thread = threading.Thread(target=serve)
    thread.start()
    hello = msgpack.packb({"v": 1, "from": "alice", "to": "bob"})
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(len(hello).to_bytes(4, "big") + hello)
        reply = s.recv(100)
        assert msgpack.unpackb(reply[4:]) == {"ok": True}
        thread.join(5)
        bob = out["bob"]
        try:
            s.sendall(b"\xff\xff\xff\xff" + b"only a few bytes")
            raises_within(1, FrameTooLargeError, lambda: bob.recv_bytes("alice", 5))
        finally:
            bob.close()


# -- backpressure: bounded queues and budgets ----------------------------------------------------


def test_a_full_inbox_stops_the_reading_until_the_receiver_takes_a_frame():
    """The receiver holds at most its inbox budget; the rest waits in the sender's outbox
    (slowed down by TCP flow control) and arrives in order once the receiver reads."""
    budget = ConnectionBudget(inbox_frames=4, inbox_bytes=2**20)
    net = TcpNetwork(["alice", "bob"], budget=budget)
    try:
        alice, bob = net.transport("alice"), net.transport("bob")
        frame = 256 * 1024
        for i in range(64):  # 16 MiB, far beyond what the sockets buffer
            alice.send_bytes("bob", i.to_bytes(4, "big") * (frame // 4))
        time.sleep(0.5)
        inbox = bob._conns["alice"].inbox
        assert len(inbox._items) <= 4 and inbox._bytes <= 2**20 + frame
        assert alice._conns["bob"]._out_bytes > 8 * frame  # the sender is held back
        for i in range(64):
            assert bob.recv_bytes("alice", 10)[:4] == i.to_bytes(4, "big")
    finally:
        net.close()


def test_a_peer_that_does_not_read_fills_the_outbox_then_the_send_fails():
    budget = ConnectionBudget(outbox_bytes=2**20, send_timeout=0.5, inbox_frames=1)
    net = TcpNetwork(["alice", "bob"], budget=budget)
    try:
        alice = net.transport("alice")
        t0 = time.monotonic()
        with pytest.raises(BackpressureError, match="outbox_bytes"):
            for _ in range(1000):  # bob never reads: kernel buffers, then the outbox fill up
                alice.send_bytes("bob", bytes(256 * 1024))
        assert time.monotonic() - t0 < 30
    finally:
        net.close()


def test_connection_budgets_are_validated():
    for bad in ({"inbox_frames": 0}, {"inbox_bytes": -1}, {"outbox_bytes": 1.5}):
        with pytest.raises(InvalidInputError):
            ConnectionBudget(**bad)
    with pytest.raises(InvalidInputError):
        ConnectionBudget(send_timeout=0)


@pytest.mark.parametrize(
    "budget, match",
    [
        ({"max_buffered_messages": 3}, "max_buffered_messages = 3"),
        ({"max_buffered_bytes": 10_000}, "max_buffered_bytes = 10000"),
    ],
)
def test_a_channel_drops_a_peer_beyond_its_budget_of_unrequested_messages(budget, match):
    net = TcpNetwork(["alice", "bob"])
    try:
        codec = WireCodec()
        sender = Channel(net.transport("alice"), codec)
        receiver = Channel(net.transport("bob"), codec, timeout=5, **budget)
        for _ in range(3):
            sender.send("bob", "noise", b"x" * 3000)  # 3 messages, ~9 KB: within both budgets
        sender.send("bob", "wanted", 1)
        assert receiver.recv("alice", "wanted") == 1  # the one asked for is never refused
        assert receiver.pending() == {"alice": {"noise": 3}}
        for _ in range(3):
            sender.send("bob", "noise", b"x" * 3000)
        sender.send("bob", "wanted", 2)
        with pytest.raises(BackpressureError, match=match):
            receiver.recv("alice", "wanted")
    finally:
        net.close()


def test_abort_drops_the_connection_without_waiting_for_the_peer():
    net = TcpNetwork(["alice", "bob"], close_timeout=30.0)
    try:
        alice, bob = net.transport("alice"), net.transport("bob")
        for _ in range(4):
            alice.send_bytes("bob", bytes(2**20))  # bob reads none of it
        t0 = time.monotonic()
        bob.abort()
        assert time.monotonic() - t0 < 5  # no flush, no wait for alice's end
        with pytest.raises(PeerDisconnectedError):
            alice.recv_bytes("bob", 5)
    finally:
        net.close()


# -- a party's listener under silent connections ------------------------------------------


def test_silent_connections_do_not_delay_the_peer_that_speaks(certs):
    """Connections that never start their TLS handshake (an attacker's, or stale ones) each
    hold the listener for up to HANDSHAKE_TIMEOUT = 10 s if handshakes run one at a time;
    with concurrent handshakes the real peer gets in at once, and the silent ones are
    dropped when the listener is done."""
    from smc_hmm.transport.tcp import HANDSHAKE_TIMEOUT

    lst = bound_listener()
    port = lst.getsockname()[1]
    alice_lst = bound_listener()
    addresses = {"alice": ("127.0.0.1", alice_lst.getsockname()[1]), "bob": ("127.0.0.1", port)}
    alice_lst.close()
    silent = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
    t0 = time.monotonic()
    thread, out = listen_in_thread("bob", addresses, certs.tls_config("bob"), 30, lst)
    try:
        alice = tcp_transport("alice", addresses, certs.tls_config("alice"), connect_timeout=30)
        elapsed = time.monotonic() - t0
        thread.join(30)
        assert not isinstance(out["bob"], Exception), out["bob"]
        carries_then_close(alice, out["bob"], b"through")
        # one silent connection served first would have cost HANDSHAKE_TIMEOUT; four, 4x that;
        # and bob does not wait out the silent ones' handshakes once his peers are in
        assert elapsed < HANDSHAKE_TIMEOUT / 2
        assert out["seconds"] < HANDSHAKE_TIMEOUT / 2
        for s in silent:  # the listener dropped every silent connection when it was done
            s.settimeout(5)
            assert s.recv(1) == b""
    finally:
        for s in silent:
            s.close()


def test_a_second_connection_claiming_an_admitted_peer_is_refused(certs):
    lst = bound_listener()
    port = lst.getsockname()[1]
    addresses = {"alice": ("127.0.0.1", 9), "bob": ("127.0.0.1", 9), "trent": ("127.0.0.1", port)}
    thread, out = listen_in_thread("trent", addresses, certs.tls_config("trent"), 1.5, lst)
    ctx = certs.tls_config("alice").client_context()
    hello = msgpack.packb({"v": 1, "from": "alice", "to": "trent"})
    answers = []
    for _ in range(2):
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            ctx.wrap_socket(raw) as s,
        ):
            s.sendall(len(hello).to_bytes(4, "big") + hello)
            s.settimeout(5)
            size = int.from_bytes(s.recv(4), "big")
            answers.append(msgpack.unpackb(s.recv(size)))
    thread.join(5)
    assert answers[0] == {"ok": True}
    assert answers[1]["ok"] is False and "duplicate" in answers[1]["reason"]
    assert isinstance(out["trent"], AuthenticationError)  # bob never came; a refusal on record
    assert "duplicate" in str(out["trent"])
