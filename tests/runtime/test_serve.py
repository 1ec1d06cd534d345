"""smc_hmm.runtime.serve: one Bob serving many keyword clients over mutual TLS.

An in-process server (port 0, inline compute, 512-bit INSECURE keys, 3 models, 5 frames):
correct results, what Bob logs, refusals (another CA, no client role, busy), isolation
from garbage frames, stalls and disconnects, session timeouts and shutdown; the client
commands (``smc-hmm keyword --server``, ``smc-hmm party --role alice``)."""

from __future__ import annotations

import logging
import re
import socket
import ssl
import threading
import time

import numpy as np
import pytest
from serve_harness import (
    client,
    keypair,
    session,
    utterances,
    write_serve_config,
    write_served_config,
)

from smc_hmm.certs import make_certificates
from smc_hmm.errors import (
    AuthenticationError,
    ConfigError,
    InsecurePeerKeyError,
    PeerDisconnectedError,
    ServerBusyError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.runtime import load_config
from smc_hmm.runtime.serve import Server, ServeSettings
from smc_hmm.transport.tcp import TcpTransport, recv_hello, send_hello
from smc_hmm.wire import WireCodec


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    directory = tmp_path_factory.mktemp("serve")
    path = write_serve_config(directory)
    return load_config(path), directory / "certs", utterances(3)


@pytest.fixture
def server(setup):
    config, _, _ = setup
    with Server(config, "bob", port=0) as srv:
        yield srv


def _ok(server, certs, cases, name="alice"):
    for frames, want in cases:
        assert client(server.address, certs, frames, name)["keyword"] == want


def test_sessions_are_correct_and_logged_without_private_data(setup, server, caplog):
    _, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    _ok(server, certs, cases, "carol")
    _wait_for(
        lambda: server.counts == {"ok": 3, "failed": 0, "refused": 0, "dropped": 0, "throttled": 0}
    )

    def carol():
        return [r.getMessage() for r in caplog.records if "client=carol" in r.getMessage()]

    _wait_for(lambda: sum(" ok in " in line for line in carol()) == 3)  # logged after closing
    lines = carol()
    done = [line for line in lines if " ok in " in line]
    assert len(done) == 3 and all("messages=" in x and "multiexp_terms=" in x for x in done)
    # who / when (the log record's time) / cost / outcome -- never a label or a score
    for frames, want in cases:
        assert not any(want in line for line in lines)
        assert not any(f"{frames[0, 0]:.3f}" in line for line in lines)


def _wait_for(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert predicate()


def test_a_certificate_from_another_ca_is_refused(setup, server, tmp_path, caplog):
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    from smc_hmm.runtime.client import run_client_session
    from smc_hmm.transport.tcp import TlsConfig

    other = make_certificates(tmp_path / "other", ["bob"], clients=["alice"])
    # trusts the server's CA, presents a client certificate of another CA
    tls = TlsConfig(config.ca_cert, other.certs["alice"], other.keys["alice"])
    with pytest.raises((AuthenticationError, PeerDisconnectedError)) as refused:
        run_client_session(
            "keyword", "alice", cases[0][0], server=server.address, tls=tls, name="alice"
        )
    # said in words: the server refused the certificate (not "EOF occurred in violation")
    assert "certificate" in str(refused.value) and "violation of protocol" not in str(refused.value)
    _wait_for(lambda: server.counts["refused"] == 1)
    assert any("TLS handshake failed" in r.getMessage() for r in caplog.records)
    # a client that trusts only the other CA refuses the server itself
    with pytest.raises((AuthenticationError, PeerDisconnectedError)):
        client(server.address, other.ca_cert.parent, cases[0][0])
    _ok(server, certs, cases[:1])  # the server is unaffected
    _wait_for(lambda: server.counts["ok"] == 1)


def test_party_certificate_without_client_role_is_refused(tmp_path):
    path = write_serve_config(tmp_path)
    config = load_config(path)
    from smc_hmm.runtime.client import run_client_session
    from smc_hmm.transport.tcp import TlsConfig

    # "bob" is a party (not a client) certificate of the server's own CA
    pc = config.party("bob")
    tls = TlsConfig(config.ca_cert, pc.cert, pc.key)
    frames, _ = utterances(1)[0]
    with Server(config, "bob", port=0) as srv:
        with pytest.raises(AuthenticationError, match="client role"):
            run_client_session("keyword", "alice", frames, server=srv.address, tls=tls, name="bob")
        _wait_for(lambda: srv.counts["refused"] == 1)


def _raw_session(server, certs, name="dave"):
    """TLS + hello by hand: the session's socket, for sending garbage."""
    from smc_hmm.runtime.client import client_tls

    tls, _ = client_tls(certs, name)
    raw = socket.create_connection(server.address, timeout=10)
    sock = tls.client_context().wrap_socket(raw)
    send_hello(sock, {"v": 1, "from": name, "to": "bob"})
    reply = recv_hello(sock)
    assert reply["ok"] is True and reply["protocol"] == "keyword"
    return sock


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x05hello",  # a frame that is not msgpack
        b"\x00\x00\x00\x03\x93\x01\x02",  # msgpack, not a message
        b"\xff\xff\xff\xff",  # a declared length beyond the frame limit
    ],
)
def test_garbage_frames_end_only_that_session(setup, server, caplog, garbage):
    _, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    sock = _raw_session(server, certs)
    sock.sendall(garbage)
    sock.settimeout(10)
    try:  # Bob ends the session: our side sees the end of the stream
        while sock.recv(4096):
            pass
    except (OSError, ssl.SSLError):
        pass
    sock.close()
    _ok(server, certs, cases[:1])
    _wait_for(lambda: server.counts["failed"] == 1 and server.counts["ok"] == 1)
    failed = [r.getMessage() for r in caplog.records if "client=dave" in r.getMessage()]
    assert any(("WireError" in m or "FrameTooLarge" in m or "Error:" in m) for m in failed)


def test_stalled_and_vanished_clients_end_their_own_sessions(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    path = write_serve_config(tmp_path, timeout=1.0)
    config = load_config(path)
    certs = tmp_path / "certs"
    cases = utterances(2)
    with Server(config, "bob", port=0) as srv:
        stalled = _raw_session(srv, certs)  # never sends its key: Bob's receive times out
        gone = _raw_session(srv, certs, "carol")
        gone.close()  # disconnects right after the hello
        _ok(srv, certs, cases)
        _wait_for(lambda: srv.counts["failed"] == 2 and srv.counts["ok"] == 2)
        stalled.close()
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "PeerTimeoutError" in messages and "PeerDisconnectedError" in messages


def test_a_weak_client_key_is_refused_by_the_session(setup, server):
    _, certs, cases = setup
    import warnings

    from smc_hmm.crypto import generate_keypair
    from smc_hmm.errors import InsecureKeyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        tiny = generate_keypair(256, insecure=True)
    # the server says why (its minimum travels in the session reply), and the client
    # refuses before its role sends anything, its key included
    with pytest.raises(InsecurePeerKeyError, match="accepts client keys of 512 bits or more"):
        client(server.address, certs, cases[0][0], kp=tiny)
    _wait_for(lambda: server.counts["failed"] == 1)
    _ok(server, certs, cases[:1])


def test_a_server_that_never_speaks_tls_is_detected_within_the_handshake_bound(setup):
    """A listener that accepts TCP and then says nothing: the client ends with a typed
    error naming the likely cause within its bound, not a traceback after a minute."""
    from smc_hmm.errors import PeerTimeoutError
    from smc_hmm.runtime.client import client_tls, connect

    _, certs, _ = setup
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        tls, name = client_tls(certs, "alice")
        start = time.monotonic()
        with pytest.raises(PeerTimeoutError, match="no TLS handshake within 1 s"):
            connect(listener.getsockname(), tls, name, timeout=1.0)
        assert time.monotonic() - start < 5


def _hold_a_slot(server, certs):
    """A client that authenticates and then sits in its session (until closed)."""
    return _raw_session(server, certs, "carol")


@pytest.mark.parametrize("policy", ["refuse", "wait"])
def test_excess_clients_wait_or_are_refused(setup, policy):
    config, certs, cases = setup
    settings = ServeSettings(max_sessions=1, when_busy=policy, wait_timeout=0.5, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        holder = _hold_a_slot(srv, certs)
        with pytest.raises(ServerBusyError, match="busy"):
            client(srv.address, certs, cases[0][0])
        holder.close()
        _wait_for(lambda: srv.active == 0)
        _ok(srv, certs, cases[:1])
        if policy == "wait":  # a waiting client gets the slot when it frees up
            holder = _hold_a_slot(srv, certs)
            out = {}
            t = threading.Thread(
                target=lambda: out.update(r=client(srv.address, certs, cases[1][0]))
            )
            t.start()
            time.sleep(0.2)
            holder.close()
            t.join(20)
            assert out["r"]["keyword"] == cases[1][1]


def test_session_timeout_and_shutdown_bound(setup, caplog):
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    settings = ServeSettings(session_timeout=2.0, shutdown_grace=0.5, workers=1)
    srv = Server(config, "bob", settings=settings, port=0).start()
    stuck = _raw_session(srv, certs)  # never speaks; the session bound ends it first
    _ok(srv, certs, cases[:1])
    _wait_for(lambda: srv.counts["failed"] == 1)
    assert "SessionTimeoutError" in " ".join(r.getMessage() for r in caplog.records)
    stuck2 = _raw_session(srv, certs)
    start = time.monotonic()
    srv.stop()
    assert time.monotonic() - start < 5
    assert not any(t.name.startswith("smc-serve") for t in threading.enumerate())
    with pytest.raises(TransportError):
        client(srv.address, certs, cases[0][0])
    stuck.close()
    stuck2.close()


def test_keyword_command_against_a_server(setup, server, tmp_path, capsys):
    """smc-hmm keyword --audio FILE.wav --server HOST:PORT --certs DIR."""
    import json

    from scipy.io import wavfile

    from smc_hmm.cli import main

    _, certs, _ = setup
    rng = np.random.default_rng(4)
    t = np.arange(800) / 8000
    voice = np.sin(2 * np.pi * 300 * t) * np.hanning(t.size) + 0.05 * rng.normal(size=t.size)
    wav, out = tmp_path / "hello.wav", tmp_path / "kw.json"
    wavfile.write(wav, 8000, (voice * 12000).astype(np.int16))
    host, port = server.address
    argv = ["keyword", "--audio", str(wav), "--server", f"{host}:{port}", "--certs", str(certs)]
    argv += ["--name", "alice", "--key-bits", "512", "--insecure", "--json", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    # the recursion's progress, steps done of T, as in-process (it used to show one line)
    assert re.search(
        r"secure keyword recognition: forward recursion \d+/\d+", capsys.readouterr().err
    )
    data = json.loads(out.read_text())
    assert data["secure"]["keyword"] in ("zero", "one", "two") and data["session"] >= 1
    assert data["result"] == data["secure"] and data["plaintext"] is None and data["agree"] is None
    _wait_for(lambda: server.counts["ok"] == 1)


def test_party_alice_against_a_server(setup, server, tmp_path):
    """smc-hmm party --role alice with a [serve] configuration: a client session."""
    import json

    from smc_hmm.cli import main

    config, _, cases = setup
    frames, want = cases[0]
    np.save(tmp_path / "frames.npy", frames)
    text = config.path.read_text().replace(
        "[parties.alice]\n", f'[parties.alice]\nfeatures = "{tmp_path / "frames.npy"}"\n'
    )
    port = config.party("bob").port
    text = text.replace(f"port = {port}\n", f"port = {server.address[1]}\n")
    path = config.path.parent / "client.toml"
    path.write_text(text)
    out = tmp_path / "alice.json"
    assert main(["party", "--role", "alice", "--config", str(path), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["output"]["keyword"] == want


def test_settings_are_validated(setup):
    # 0 sessions was refused as "must be >= 1", read by some as "0 means unlimited":
    # the refusal now says it is a bound and that 0 is not unlimited
    with pytest.raises(ConfigError, match="0 does not mean unlimited"):
        ServeSettings(max_sessions=0)
    with pytest.raises(ConfigError):
        ServeSettings(when_busy="maybe")
    for bad in (
        {"max_pending": 0},
        {"max_pending_per_address": -1},
        {"max_sessions_per_client": 0},
        {"inbox_bytes": 1.5},
        {"max_buffered_messages": True},
        {"max_frame_bytes": 2**32},
    ):
        with pytest.raises(ConfigError):
            ServeSettings(**bad)
    config, _, _ = setup
    config.serve["bogus"] = 1
    try:
        with pytest.raises(ConfigError, match="bogus"):
            ServeSettings.from_config(config)
    finally:
        del config.serve["bogus"]
    assert TcpTransport.over_socket  # the transport a session runs on
    assert keypair  # harness import used by other tests


def test_client_certificates_carry_the_client_role_and_nothing_more(tmp_path):
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from smc_hmm.certs import CLIENT_ROLE_URI
    from smc_hmm.cli import main

    assert main(["certs", "--out", str(tmp_path), "--parties", "bob", "--clients", "c1,c2"]) == 0

    def read(name):
        cert = x509.load_pem_x509_certificate((tmp_path / f"{name}.pem").read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        return san.get_values_for_type(x509.UniformResourceIdentifier), list(eku)

    def names(name):
        cert = x509.load_pem_x509_certificate((tmp_path / f"{name}.pem").read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return san.get_values_for_type(x509.DNSName), san.get_values_for_type(x509.IPAddress)

    assert read("c1") == ([CLIENT_ROLE_URI], [ExtendedKeyUsageOID.CLIENT_AUTH])
    # a client's certificate names the client alone: no localhost, a second identity
    assert names("c1") == (["c1"], []) and names("c2") == (["c2"], [])
    assert "localhost" in names("bob")[0]  # a party serves on loopback too
    uris, eku = read("bob")
    assert uris == [] and ExtendedKeyUsageOID.SERVER_AUTH in eku
    with pytest.raises(ConfigError, match="both party and client"):
        make_certificates(tmp_path / "x", ["bob"], clients=["bob"])


# -- the limits: the front door, the session budget, each session's connection ------------------


def _connect(address, source="127.0.0.1"):
    """A TCP connection that never speaks (a silent socket)."""
    return socket.create_connection(address, timeout=10, source_address=(source, 0))


def _closed_by_server(sock, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_silent_sockets_wait_without_a_thread_and_are_dropped_after_the_handshake_timeout(
    setup, caplog
):
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    settings = ServeSettings(handshake_timeout=4.0, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        threads = threading.active_count()
        silent = [_connect(srv.address, "127.0.0.2") for _ in range(20)]
        _wait_for(lambda: srv.pending == 20)
        assert threading.active_count() == threads  # pending connections hold no thread
        _ok(srv, certs, cases[:1])  # served while they wait: the front door never blocks
        assert not _closed_by_server(silent[0], 0.01)
        assert all(_closed_by_server(s, 10) for s in silent)
        _wait_for(lambda: srv.counts["dropped"] == 20 and srv.pending == 0)
        for s in silent:
            s.close()
    assert "handshake_timeout" in " ".join(r.getMessage() for r in caplog.records)


def test_pending_caps_close_the_oldest_connection_of_the_heaviest_address(setup):
    config, certs, cases = setup
    settings = ServeSettings(
        max_pending=4, max_pending_per_address=2, handshake_timeout=30.0, workers=1
    )
    with Server(config, "bob", settings=settings, port=0) as srv:
        a1, a2 = _connect(srv.address, "127.0.0.2"), _connect(srv.address, "127.0.0.2")
        _wait_for(lambda: srv.pending == 2)
        a3 = _connect(srv.address, "127.0.0.2")  # a third from one address: its oldest goes
        assert _closed_by_server(a1, 5) and not _closed_by_server(a2, 0.2)
        b1, b2 = _connect(srv.address, "127.0.0.3"), _connect(srv.address, "127.0.0.3")
        _wait_for(lambda: srv.pending == 4)
        c1 = _connect(srv.address, "127.0.0.4")  # over the total: the heaviest address's oldest
        assert _closed_by_server(a2, 5) and not _closed_by_server(b1, 0.2)
        _ok(srv, certs, cases[:1])  # a client still gets through the full front door
        assert srv.counts["dropped"] >= 3 and srv.pending <= 4
        for s in (a1, a2, a3, b1, b2, c1):
            s.close()


def test_an_address_opening_connections_too_fast_is_throttled_before_tls(setup):
    config, certs, cases = setup
    settings = ServeSettings(
        connect_rate_per_address=1.0, connect_burst_per_address=3, handshake_timeout=30.0
    )
    with Server(config, "bob", settings=settings, port=0) as srv:
        flood = [_connect(srv.address, "127.0.0.2") for _ in range(6)]
        _wait_for(lambda: srv.counts["throttled"] >= 2)
        assert sum(_closed_by_server(s, 2) for s in flood) >= 2  # closed on arrival
        assert srv.pending <= 4
        _ok(srv, certs, cases[:1])  # another address is not held back
        for s in flood:
            s.close()
    with pytest.raises(ConfigError):
        ServeSettings(connect_rate_per_address=0)


def test_a_client_name_starting_sessions_too_fast_is_refused(setup):
    config, certs, cases = setup
    settings = ServeSettings(session_rate_per_client=0.2, session_burst_per_client=2, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        _ok(srv, certs, cases[:2], "carol")  # the burst
        with pytest.raises(ServerBusyError, match="session_rate_per_client"):
            client(srv.address, certs, cases[2][0], "carol")
        _ok(srv, certs, cases[:1], "alice")  # another name has its own bucket
    with pytest.raises(ConfigError):
        ServeSettings(session_rate_per_client=-1.0)


def test_one_client_name_runs_at_most_its_share_of_the_sessions(setup):
    config, certs, cases = setup
    settings = ServeSettings(
        max_sessions=3, max_sessions_per_client=1, when_busy="refuse", workers=1
    )
    with Server(config, "bob", settings=settings, port=0) as srv:
        holder = _raw_session(srv, certs, "carol")
        with pytest.raises(ServerBusyError, match="carol"):
            client(srv.address, certs, cases[0][0], "carol")
        _ok(srv, certs, cases[:1], "alice")  # a free slot is not carol's to take
        holder.close()
    settings = ServeSettings(max_sessions=3, max_sessions_per_client=1, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        holder = _raw_session(srv, certs, "carol")
        out = {}
        waiter = threading.Thread(
            target=lambda: out.update(r=client(srv.address, certs, cases[1][0], "carol"))
        )
        waiter.start()
        _wait_for(lambda: srv.waiting == 1)
        _ok(srv, certs, cases[:1], "alice")  # carol's waiter ahead does not hold alice back
        holder.close()
        waiter.join(30)
        assert out["r"]["keyword"] == cases[1][1]


def _failed_with(caplog, client_name: str, error: str) -> bool:
    return any(
        f"client={client_name}" in r.getMessage() and error in r.getMessage()
        for r in caplog.records
    )


def _failed_once_then_serves(setup, srv, caplog, client_name: str, *errors: str, sock=None):
    """Bob's first session fails, and its log line names ``client_name`` and each of
    ``errors``; then (the failed client's ``sock`` closed) he still serves a client."""
    _, certs, cases = setup
    _wait_for(lambda: srv.counts["failed"] == 1)
    for error in errors:
        assert _failed_with(caplog, client_name, error)
    if sock is not None:
        sock.close()
    _ok(srv, certs, cases[:1])


def test_a_declared_frame_above_the_session_limit_is_refused_at_its_length_prefix(setup, caplog):
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    settings = ServeSettings(max_frame_bytes=2**16, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        assert srv.max_frame_bytes == 2**16  # the smaller of [serve] and [run]
        sock = _raw_session(srv, certs)
        sock.sendall((2**16 + 1).to_bytes(4, "big") + b"and only a little of the body")
        _failed_once_then_serves(setup, srv, caplog, "dave", "FrameTooLargeError", sock=sock)


def test_a_flooding_client_is_slowed_down_then_dropped(setup, caplog):
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    settings = ServeSettings(
        inbox_frames=4, inbox_bytes=2**18, max_buffered_messages=8, max_buffered_bytes=2**20
    )
    with Server(config, "bob", settings=settings, port=0) as srv:
        sock = _raw_session(srv, certs)
        frame = WireCodec().encode({"t": "flood", "d": 1, "b": bytes(2**16)})
        sent = 0
        with pytest.raises(OSError):  # until Bob drops the connection
            sock.settimeout(10)
            for _ in range(10_000):  # 640 MiB: far more than Bob ever holds
                sock.sendall(len(frame).to_bytes(4, "big") + frame)
                sent += 1
        assert sent < 10_000
        _failed_once_then_serves(
            setup, srv, caplog, "dave", "BackpressureError: bob: alice sent 9 messages", sock=sock
        )


def test_a_client_key_above_max_key_bits_ends_its_session(setup, caplog):
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    import warnings

    from smc_hmm.crypto import generate_keypair
    from smc_hmm.errors import InsecureKeyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        big = generate_keypair(768, insecure=True)
    settings = ServeSettings(max_key_bits=640, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        with pytest.raises(SmcHmmError):
            client(srv.address, certs, cases[0][0], kp=big)
        _failed_once_then_serves(
            setup, srv, caplog, "alice", "ParameterBoundError", "max_key_bits = 640"
        )


def test_an_oversized_hello_is_refused(setup, server):
    from smc_hmm.runtime.client import client_tls

    _, certs, _ = setup
    tls, _ = client_tls(certs, "carol")
    raw = socket.create_connection(server.address, timeout=10)
    with tls.client_context().wrap_socket(raw) as sock:
        sock.sendall((5000).to_bytes(4, "big") + b"x" * 100)
        reply = recv_hello(sock)
    assert reply["ok"] is False and "oversized hello" in reply["reason"]
    _wait_for(lambda: server.counts["refused"] == 1)


def test_an_unexpected_error_at_the_front_door_drops_one_connection_only(setup, monkeypatch):
    config, certs, cases = setup
    from smc_hmm.runtime.serve.admission import Admission

    original = Admission.authenticate
    calls = []

    def broken_once(self, sock, hello, where):
        calls.append(where)
        if len(calls) == 1:
            raise RuntimeError("a bug met by one connection")
        return original(self, sock, hello, where)

    monkeypatch.setattr(Admission, "authenticate", broken_once)
    with Server(config, "bob", settings=ServeSettings(workers=1), port=0) as srv:
        with pytest.raises(SmcHmmError):
            client(srv.address, certs, cases[0][0])
        _ok(srv, certs, cases[:1])  # the door is still open
        assert srv.counts["dropped"] == 1 and len(calls) == 2


def test_a_client_beyond_its_frame_budget_is_refused_before_any_work(setup, caplog):
    """Bob's bound on what one identity learns (smc_hmm.runtime.budget): 10 frames a day
    is two 5-frame utterances; the third ends with BudgetError on its public length,
    and another name keeps its own budget."""
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    settings = ServeSettings(max_frames_per_client=10, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        _ok(srv, certs, cases[:2], "carol")
        with pytest.raises(SmcHmmError):
            client(srv.address, certs, cases[2][0], "carol")
        _wait_for(lambda: _failed_with(caplog, "carol", "BudgetError"))
        _ok(srv, certs, cases[:1], "alice")
    # derived from the hiding target: with the default 20-nat blinds, 1 nat is 9 frames
    assert ServeSettings(hiding_nats=1.0).frame_limit(20.0) == 9
    assert ServeSettings(hiding_nats=1.0, max_frames_per_client=5).frame_limit(20.0) == 5
    assert ServeSettings().frame_limit(20.0) == 200_000  # on by default
    assert ServeSettings(client_budget=False).frame_limit(20.0) is None
    with pytest.raises(ConfigError):
        ServeSettings(hiding_nats=0.0)
    with pytest.raises(ConfigError):
        ServeSettings(max_frames_per_client=0)


def test_a_run_longer_than_max_frames_is_refused_on_its_public_length(setup, caplog):
    """[serve] max_frames bounds one session's length (30 s of audio by default, as the
    keyword command's --max-frames); a longer run ends before any work on its data."""
    config, certs, cases = setup
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    with Server(config, "bob", settings=ServeSettings(max_frames=4, workers=1), port=0) as srv:
        with pytest.raises(SmcHmmError):
            client(srv.address, certs, cases[0][0], "carol")  # 5 frames
        _wait_for(lambda: _failed_with(caplog, "carol", "max_frames = 4"))
    assert ServeSettings().max_frames == 3000
    with pytest.raises(ConfigError):
        ServeSettings(max_frames=0)


def test_the_frame_budget_slides_with_its_period():
    from smc_hmm.errors import BudgetError
    from smc_hmm.runtime.budget import FrameBudget

    now = [0.0]
    budget = FrameBudget(10, 60.0, clock=lambda: now[0])
    budget.charge("carol", 6)
    with pytest.raises(BudgetError, match="6 of its 10"):
        budget.charge("carol", 5)
    assert budget.spent("carol") == 6  # a refused run charges nothing
    budget.charge("dave", 10)
    now[0] = 61.0
    budget.charge("carol", 10)  # the first charge left the window
    assert budget.spent("carol") == 10


def test_a_budget_file_keeps_the_spent_frames_and_refuses_a_damaged_one(tmp_path):
    import json

    from smc_hmm.errors import BudgetError
    from smc_hmm.runtime.budget import FrameBudget

    now = [1000.0]
    path = tmp_path / "budget.json"
    first = FrameBudget(10, 60.0, clock=lambda: now[0], path=path)
    first.charge("ab" * 32, 6, name="carol")
    again = FrameBudget(10, 60.0, clock=lambda: now[0], path=path)  # a restarted server
    assert again.spent("ab" * 32) == 6
    with pytest.raises(BudgetError, match="'carol' has used 6 of its 10"):
        again.charge("ab" * 32, 5, name="carol")
    assert not list(tmp_path.glob(".budget-*"))  # no temporary file left behind
    assert json.loads(path.read_text())["version"] == 2
    now[0] += 61.0
    again.charge("ab" * 32, 10)  # the old charge left the window
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read"):
        FrameBudget(10, 60.0, path=path)
    with pytest.raises(ConfigError, match="budget_file"):
        ServeSettings(budget_file=str(tmp_path / "missing" / "budget.json"))


def test_sessions_are_counted_per_period_and_the_budget_is_on_by_default(tmp_path):
    """The default budget: 2,000 sessions and 200,000 frames a day per certificate, kept in
    budget.json beside the parties.toml; a session beyond is refused before any work."""
    from smc_hmm.errors import BudgetError
    from smc_hmm.runtime import load_config
    from smc_hmm.runtime.budget import FrameBudget

    now = [0.0]
    budget = FrameBudget(100, 60.0, clock=lambda: now[0], sessions=2)
    budget.charge_session("carol")
    budget.charge_session("carol")
    with pytest.raises(BudgetError, match="run 2 of its 2 sessions"):
        budget.charge_session("carol")
    assert budget.sessions_spent("carol") == 2 and budget.spent("carol") == 0
    now[0] = 61.0
    budget.charge_session("carol")  # the window slid
    with pytest.raises(ConfigError):
        ServeSettings(max_sessions_per_period=0)
    from serve_harness import write_serve_config

    settings = ServeSettings.from_config(load_config(write_serve_config(tmp_path)))
    assert settings.client_budget and settings.max_sessions_per_period == 2_000
    assert settings.budget_file == str(tmp_path / "budget.json")


# -- speaker sessions: the operator's results record, the client's mode check ----------------


def _speaker_config(directory, mode: str, *, models="small", serve=None, timeout=20.0):
    """parties.toml of a serving Bob with speaker models: three small random GMMs and a
    UBM over 4 features (fast), or the bundled five FSDD speakers (``models="bundled"``)."""
    from smc_hmm.data.speakers import gmm, load_speaker_models
    from smc_hmm.hmm.io import save_models

    if models == "bundled":
        gmms, labels = load_speaker_models()
    else:
        rng = np.random.default_rng(38)

        def one(shift):
            w = rng.dirichlet(np.ones(3))
            return gmm(w, rng.normal(shift, 1.0, (3, 4)), rng.uniform(0.5, 1.5, (3, 4)))

        gmms, labels = [one(1.5 * k) for k in range(3)] + [one(0.0)], ["s0", "s1", "s2", "ubm"]
    save_models(directory / "speakers.npz", gmms, labels=labels)
    path = write_served_config(
        directory / "parties.toml",
        "speaker",
        {"models": "speakers.npz"},
        {"mode": mode},
        timeout=timeout,
        serve=serve,
    )
    return path, gmms, labels


def _speaker_client(server, certs, utterance, name="carol", **kwargs):
    return session(
        "speaker", server.address, certs, utterance, name, timeout=20, keypair=keypair(), **kwargs
    )


@pytest.mark.parametrize("mode", ["verify", "anonymous", "identify"])
def test_served_speaker_results_reach_the_operators_record_over_tls(tmp_path, mode):
    """[serve] results = FILE (JSON lines) and the on_result hook get one record per
    session over mutual TLS: session, client identity, protocol, mode, the decision when
    the server learned it (verify, anonymous), or that the client did (identify)."""
    import json
    from datetime import datetime

    from smc_hmm.data.speakers import identify, scores, verify

    path, models, labels = _speaker_config(tmp_path, mode, serve={"results": "results.jsonl"})
    hooked = []
    rng = np.random.default_rng(380)
    frames = [rng.normal(1.5, 1.0, (5, 4)), rng.normal(0.0, 1.0, (5, 4))]
    claims = ["s1", "s0"]
    with Server(load_config(path), "bob", port=0, on_result=hooked.append) as srv:
        for x, claim in zip(frames, claims):
            utterance = x if mode == "identify" else (x, claim)
            out = _speaker_client(srv, tmp_path / "certs", utterance)
            assert out["records"] is True
            plain = scores(models, x)
            if mode == "identify":
                assert out["output"]["speaker"] == identify(plain, labels, "ubm", -2.0, 5)
            else:
                assert out["output"] is None
        _wait_for(lambda: len(hooked) == 2)
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert lines == hooked
    for record, x, claim in zip(lines, frames, claims):
        assert record["client"] == "carol" and record["protocol"] == "speaker"
        assert record["mode"] == mode and record["outcome"] == "ok"
        assert record["session"] in (1, 2) and record["seconds"] >= 0
        assert datetime.fromisoformat(record["time"]) >= datetime.fromisoformat(record["started"])
        plain = scores(models, x)
        if mode == "identify":  # the label went to the client only, and the record says so
            assert record["learned_by"] == "client" and record["decision"] is None
            continue
        want = verify(plain[labels.index(claim)], plain[-1], 0.0, 5)
        assert record["learned_by"] == "server" and record["decision"]["accept"] is want
        assert ("claim" in record["decision"]) is (mode == "verify")  # anonymous: never
        assert claim not in json.dumps(record) or mode == "verify"


def test_a_failed_session_is_recorded_and_a_broken_hook_is_contained(tmp_path, caplog):
    """A session that fails is recorded with its typed error and no decision; a hook that
    raises is logged, and neither the session nor the server is affected."""
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    path, _, _ = _speaker_config(tmp_path, "verify")
    records = []

    def hook(record):
        records.append(record)
        raise RuntimeError("the application's bug")

    x = np.random.default_rng(381).normal(size=(5, 4))
    settings = ServeSettings(workers=1, results=str(tmp_path / "r.jsonl"))
    from smc_hmm.runtime.client import client_tls, connect

    with Server(load_config(path), "bob", settings=settings, port=0, on_result=hook) as srv:
        tls, _ = client_tls(tmp_path / "certs", "alice")
        transport, _ = connect(srv.address, tls, "alice")
        transport.close()  # a client that vanishes after the hello
        _wait_for(lambda: len(records) == 1)
        _speaker_client(srv, tmp_path / "certs", (x, "s0"))
        _wait_for(lambda: len(records) == 2)
    assert [r["outcome"] == "ok" for r in records] == [False, True]
    assert records[0]["learned_by"] is None and records[0]["decision"] is None
    assert "Error" in records[0]["outcome"]
    assert any("on_result hook failed" in r.getMessage() for r in caplog.records)
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 2
    with pytest.raises(ConfigError, match="callable"):
        Server(load_config(path), "bob", settings=settings, port=0, on_result="print")
    with pytest.raises(ConfigError, match="results"):
        ServeSettings(results=3)


def _never_sends():
    """A transport wrapper that records whether the client's role ever sent a frame."""
    sent = []

    def wrap(transport):
        class Watch:
            name, peers = transport.name, transport.peers

            def send_bytes(self, peer, frame):
                sent.append(frame)
                transport.send_bytes(peer, frame)

            def recv_bytes(self, peer, timeout):
                return transport.recv_bytes(peer, timeout)

            def close(self):
                transport.close()

        return Watch()

    return sent, wrap


def test_a_client_refuses_a_server_of_another_mode_before_sending_anything(tmp_path, caplog):
    """smc-hmm speaker anonymous --claim s0 against a server configured for verify: the
    client compares the declared protocol and mode with its own and refuses
    (ServedProtocolError) before its role sends a frame -- the claim never leaves -- and
    Bob's session received nothing.  The same for another threshold, and for a client that
    asks for the right mode."""
    from smc_hmm.errors import ServedProtocolError

    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    path, _, _ = _speaker_config(tmp_path, "verify", serve={"results": "results.jsonl"})
    x = np.random.default_rng(382).normal(size=(5, 4))
    with Server(load_config(path), "bob", port=0) as srv:
        for expect, says in (
            ({"mode": "anonymous"}, "mode = 'verify' (asked for 'anonymous')"),
            ({"mode": "verify", "threshold": 1.0}, "threshold = 0.0 (asked for 1.0)"),
        ):
            sent, wrap = _never_sends()
            with pytest.raises(ServedProtocolError, match="refused before sending") as err:
                _speaker_client(
                    srv, tmp_path / "certs", (x, "s0"), expect=expect, wrap_transport=wrap
                )
            assert sent == [] and "\n" not in str(err.value) and says in str(err.value)
        ok = _speaker_client(srv, tmp_path / "certs", (x, "s0"), expect={"mode": "verify"})
        assert ok["output"] is None
        _wait_for(lambda: srv.counts["failed"] == 2 and srv.counts["ok"] == 1)
    refused = [r.getMessage() for r in caplog.records if "client=carol" in r.getMessage()]
    failed = [m for m in refused if "PeerDisconnectedError" in m or "Error" in m]
    assert len(failed) == 2 and all("messages=0/0" in m for m in failed)  # Bob got nothing


def test_the_speaker_command_checks_the_servers_mode_and_says_who_learned(tmp_path, capsys):
    """The command line: a mode mismatch is one line and exit 2 before any private value
    leaves; a matching anonymous session reports that the server learned (and records)
    the decision."""
    import json

    from smc_hmm.cli import main

    path, _, _ = _speaker_config(tmp_path, "anonymous", models="bundled", timeout=60.0)
    from scipy.io import wavfile

    rng = np.random.default_rng(4)
    t = np.arange(1600) / 8000
    voice = np.sin(2 * np.pi * 180 * t) * np.hanning(t.size) + 0.05 * rng.normal(size=t.size)
    wavfile.write(tmp_path / "v.wav", 8000, (voice * 12000).astype(np.int16))
    with Server(load_config(path), "bob", port=0) as srv:
        host, port = srv.address
        base = ["--audio", str(tmp_path / "v.wav"), "--server", f"{host}:{port}",
                "--certs", str(tmp_path / "certs"), "--name", "carol",
                "--key-bits", "512", "--insecure"]  # fmt: skip
        assert main(["speaker", "verify", "--claim", "theo", *base]) == 2
        err = capsys.readouterr().err
        assert "mode = 'anonymous' (asked for 'verify')" in err and "Traceback" not in err
        assert main(["speaker", "anonymous", "--claim", "theo", "--threshold", "1", *base]) == 2
        assert "threshold" in capsys.readouterr().err
        assert main(["speaker", "anonymous", "--claim", "theo", *base, "--json", "-"]) == 0
        captured = capsys.readouterr()
        report = json.loads(captured.out)  # --json -: the report alone
        assert "secure speaker anonymous: decision (phase 3 of 3)" in captured.err
        assert report["secure"] == {"learned_by": "server", "recorded_by_server": False}
        assert report["claim"] == "theo" and report["mode"] == "anonymous"


def test_keyword_and_party_clients_check_the_servers_mode(setup, server, tmp_path, capsys):
    """Every served protocol: the keyword client that asks for the private argmax refuses
    a server of the fast one (here the harness's), from Python and from the command line;
    smc-hmm party --role alice compares its configuration's [protocol] table."""
    from smc_hmm.cli import main
    from smc_hmm.errors import ServedProtocolError
    from smc_hmm.runtime.client import client_tls, run_client_session

    config, certs, cases = setup
    tls, name = client_tls(certs, "alice")
    with pytest.raises(ServedProtocolError, match="mode = 'fast' \\(asked for 'private'\\)"):
        run_client_session("keyword", "alice", cases[0][0], server=server.address, tls=tls,
                           name=name, key_bits=512, insecure=True, keypair=keypair(),
                           expect={"mode": "private"})  # fmt: skip
    with pytest.raises(ServedProtocolError, match="serves 'keyword', not 'speaker'"):
        run_client_session("speaker", "alice", cases[0][0], server=server.address, tls=tls,
                           name=name, key_bits=512, insecure=True, keypair=keypair())  # fmt: skip
    from scipy.io import wavfile

    t = np.arange(800) / 8000
    wavfile.write(tmp_path / "w.wav", 8000, (np.sin(2 * np.pi * 300 * t) * 9000).astype(np.int16))
    host, port = server.address
    argv = ["keyword", "--audio", str(tmp_path / "w.wav"), "--server", f"{host}:{port}",
            "--certs", str(certs), "--name", "alice", "--key-bits", "512",
            "--insecure"]  # fmt: skip
    assert main([*argv, "--mode", "private"]) == 2
    assert "asked for 'private'" in capsys.readouterr().err
    np.save(tmp_path / "frames.npy", cases[0][0])
    text = config.path.read_text().replace(
        "[parties.alice]\n", f'[parties.alice]\nfeatures = "{tmp_path / "frames.npy"}"\n'
    )
    text = text.replace(f"port = {config.party('bob').port}\n", f"port = {port}\n")
    client_toml = config.path.parent / "client-private.toml"
    client_toml.write_text(text.replace('mode = "fast"', 'mode = "private"'))
    assert main(["party", "--role", "alice", "--config", str(client_toml)]) == 2
    assert "asked for 'private'" in capsys.readouterr().err
    _wait_for(lambda: server.counts["failed"] == 4)


def test_counts_agree_with_their_nouns():
    """The busy refusals said "1 sessions running"."""
    from smc_hmm.runtime.serve.records import counted

    assert counted(1, "session") == "1 session" and counted(2, "session") == "2 sessions"
    assert counted(0, "client") == "0 clients" and counted(1200, "frame") == "1,200 frames"


def test_serve_on_a_port_in_use_says_so_without_a_stopped_line(setup, capsys, caplog):
    """``smc-hmm serve`` on a port already in use logged "bob stopped: {}" before its
    error, as if it had served: now the error alone, one line, exit 2."""
    from smc_hmm.cli import main

    config, certs, _ = setup
    bob = config.party("bob")
    with socket.socket() as taken:
        # a port this test holds (the config's own may have gone to another test since)
        taken.bind((bob.host, 0))
        taken.listen()
        toml = (certs.parent / "parties.toml").read_text()
        held = toml.replace(f"port = {bob.port}\n", f"port = {taken.getsockname()[1]}\n")
        assert held != toml
        path = certs.parent / "parties-port-held.toml"
        path.write_text(held)
        with caplog.at_level(logging.INFO, logger="smc_hmm.serve"):
            code = main(["serve", "--role", "bob", "--config", str(path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "in use" in err and "Traceback" not in err
    assert not [r for r in caplog.records if "stopped" in r.getMessage()]


def test_max_sessions_zero_on_the_command_line_is_refused_in_words(capsys):
    from smc_hmm.cli import main

    assert main(["serve", "--role", "bob", "--config", "x.toml", "--max-sessions", "0"]) == 2
    err = capsys.readouterr().err
    assert "--max-sessions must be at least 1" in err and "not mean unlimited" in err
    assert len(err.strip().splitlines()) == 1
