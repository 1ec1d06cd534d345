"""Load and fault tests against one ``smc-hmm serve`` process (512-bit INSECURE keys, 3
bundled models, 5 frames; all traffic on loopback, every wait bounded).

* 50 sequential and 8 concurrent keyword sessions: every result correct; the server's
  threads and open file descriptors return exactly to their baseline and its resident
  memory to within 32 MB of it (tolerance for allocator pools and caches), measured in
  /proc/PID after 2 warm-up sessions;
* a client killed at every message index of the keyword protocol while another client
  runs: the other finishes correctly, the server keeps serving, resources back;
* garbage frames and a certificate of another CA against the process: refused or ended,
  the server unaffected;
* SIGTERM with a session still running: exit 0 within the shutdown bound.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from serve_harness import (
    KillAt,
    client,
    message_count,
    resources,
    utterances,
    write_serve_config,
)

from smc_hmm.certs import make_certificates
from smc_hmm.errors import (
    AuthenticationError,
    InjectedFaultError,
    PeerDisconnectedError,
    SmcHmmError,
)
from smc_hmm.runtime import load_config

pytestmark = pytest.mark.slow

RSS_TOLERANCE_KB = 32 * 1024
SHUTDOWN_GRACE = 2.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    directory = tmp_path_factory.mktemp("serve-load")
    path = write_serve_config(
        directory,
        serve={
            "max_sessions": 8,
            "max_sessions_per_client": 8,  # one client name runs the 8 concurrent sessions
            "session_rate_per_client": 50.0,  # and sessions back to back
            # every client connects from 127.0.0.1: the per-address throttle (tested on
            # its own in test_serve.py) would otherwise cap the loops below at
            # 10 connections a second once sessions are quick
            "connect_rate_per_address": 1000.0,
            "connect_burst_per_address": 1000,
            "shutdown_grace": SHUTDOWN_GRACE,
            "session_timeout": 60.0,
        },
    )
    config = load_config(path)
    address = config.party("bob").address
    log = directory / "bob.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "smc_hmm.cli", "serve", "--role", "bob", "--config", str(path)]
        + ["--log", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            try:
                socket.create_connection(address, timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "smc-hmm serve did not start listening"
                time.sleep(0.1)
        yield proc, address, directory / "certs", log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _settled(pid: int, baseline: dict, seconds: float = 15.0) -> dict:
    """The server's resources once its threads are back to the baseline (bounded wait)."""
    deadline = time.monotonic() + seconds
    while True:
        now = resources(pid)
        if (now["threads"], now["fds"]) == (baseline["threads"], baseline["fds"]):
            return now
        if time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def _concurrently(jobs) -> list:
    results: list = [None] * len(jobs)

    def run(i, job):
        try:
            results[i] = job()
        except BaseException as exc:  # reported by the caller
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    return results


def test_50_sequential_and_8_concurrent_sessions_leave_no_trace(served):
    proc, address, certs, log = served
    cases = utterances(10)
    for frames, want in cases[:2]:  # warm-up: imports, caches, the first TLS contexts
        assert client(address, certs, frames)["keyword"] == want
    time.sleep(0.5)
    baseline = resources(proc.pid)
    for i in range(50):
        frames, want = cases[i % len(cases)]
        assert client(address, certs, frames, ("alice", "carol", "dave")[i % 3])["keyword"] == want
    results = _concurrently(
        [lambda c=cases[i]: client(address, certs, c[0])["keyword"] for i in range(8)]
    )
    assert results == [cases[i][1] for i in range(8)]
    after = _settled(proc.pid, baseline)
    print(f"server resources: baseline {baseline}, after 58 sessions {after}")
    assert after["threads"] == baseline["threads"]
    assert after["fds"] == baseline["fds"]
    assert after["rss_kb"] - baseline["rss_kb"] < RSS_TOLERANCE_KB
    assert proc.poll() is None


def test_a_client_killed_at_every_message_index(served):
    proc, address, certs, log = served
    cases = utterances(4)
    count = message_count(address, certs, cases[0][0])
    assert count >= 10  # key, spec, observations, per-step emissions/exps/sums, labels, argmax
    time.sleep(0.3)
    baseline = resources(proc.pid)
    for index in range(count):
        killer = {}

        def wrap(transport, index=index, killer=killer):
            killer["t"] = KillAt(transport, index)
            return killer["t"]

        good, bad = cases[1 + index % 3], cases[0]
        results = _concurrently(
            [
                lambda g=good: client(address, certs, g[0], "carol")["keyword"],
                lambda b=bad: client(address, certs, b[0], "erin", wrap=wrap),
            ]
        )
        assert results[0] == good[1], (index, results)
        assert isinstance(results[1], InjectedFaultError) and killer["t"].killed, (index, results)
    assert client(address, certs, cases[0][0])["keyword"] == cases[0][1]
    after = _settled(proc.pid, baseline)
    assert (after["threads"], after["fds"]) == (baseline["threads"], baseline["fds"])
    lines = [x for x in log.read_text().splitlines() if "client=erin" in x and " s; cost " in x]
    assert len(lines) == count  # every killed session ended, with its outcome in Bob's log
    typed = [x for x in lines if "Error: " in x]
    # a client killed after Bob's last send (receiving the labels or the argmax) ends
    # nothing of Bob's: his session completed; every earlier kill is a typed error
    assert len(typed) >= count - 2 and not any("internal error" in x for x in lines)


def test_garbage_and_a_foreign_certificate_leave_the_process_serving(served, tmp_path):
    from smc_hmm.runtime.client import client_tls
    from smc_hmm.transport.tcp import TlsConfig, recv_hello, send_hello

    proc, address, certs, log = served
    cases = utterances(1)
    tls, _ = client_tls(certs, "alice")
    sock = tls.client_context().wrap_socket(socket.create_connection(address, timeout=10))
    send_hello(sock, {"v": 1, "from": "alice", "to": "bob"})
    assert recv_hello(sock)["ok"] is True
    sock.sendall(b"\x00\x00\x00\x07garbage")
    sock.settimeout(10)
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass
    sock.close()
    other = make_certificates(tmp_path / "other", ["bob"], clients=["alice"])
    foreign = TlsConfig(tls.ca_cert, other.certs["alice"], other.keys["alice"])
    from smc_hmm.runtime.client import run_client_session

    with pytest.raises((AuthenticationError, PeerDisconnectedError)):
        run_client_session("keyword", "alice", cases[0][0], server=address, tls=foreign, name="a")
    assert client(address, certs, cases[0][0])["keyword"] == cases[0][1]
    time.sleep(0.3)
    text = log.read_text()
    assert "TLS handshake failed" in text and "WireError" in text


def test_sigterm_with_a_running_session_exits_0_within_the_bound(served):
    from smc_hmm.runtime.client import client_tls
    from smc_hmm.transport.tcp import recv_hello, send_hello

    proc, address, certs, log = served
    tls, _ = client_tls(certs, "alice")
    sock = tls.client_context().wrap_socket(socket.create_connection(address, timeout=10))
    send_hello(sock, {"v": 1, "from": "alice", "to": "bob"})
    assert recv_hello(sock)["ok"] is True  # a session that never speaks
    start = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(SHUTDOWN_GRACE + 20) == 0
    assert time.monotonic() - start < SHUTDOWN_GRACE + 20
    sock.close()
    assert "ServerShutdownError" in log.read_text()


def _start_serving(path, log):
    config = load_config(path)
    address = config.party("bob").address
    proc = subprocess.Popen(
        [sys.executable, "-m", "smc_hmm.cli", "serve", "--role", "bob", "--config", str(path)]
        + ["--log", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, proc.stderr.read().decode()
        try:
            socket.create_connection(address, timeout=1).close()
            return proc, address
        except OSError:
            assert time.monotonic() < deadline, "smc-hmm serve did not start listening"
            time.sleep(0.1)


def test_the_frame_budget_survives_a_killed_server(tmp_path):
    """[serve] budget_file: the frames a client certificate spent are on disk after every
    charge, written atomically, so SIGKILL and a restart do not give the client a fresh
    budget; the file is keyed on the certificate's SHA-256 fingerprint, not on a name."""
    import json

    cases = utterances(3)
    frames = len(cases[0][0])
    budget = tmp_path / "budget.json"
    path = write_serve_config(
        tmp_path,
        serve={"max_frames_per_client": 2 * frames, "budget_file": str(budget)},
    )
    log = tmp_path / "bob.log"
    proc, address = _start_serving(path, log)
    try:
        for data, label in cases[:2]:
            assert client(address, tmp_path / "certs", data)["keyword"] == label
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        spent = json.loads(budget.read_text())["spent"]
        assert len(spent) == 1
        (key,) = spent
        assert len(key) == 64 and int(key, 16) >= 0 and "alice" not in key
        assert sum(n for _, n, _ in spent[key]) == 2 * frames
        assert sum(k for _, _, k in spent[key]) == 2  # the sessions too
        proc, address = _start_serving(path, log)
        with pytest.raises(SmcHmmError):  # refused on its public length: BudgetError
            client(address, tmp_path / "certs", cases[2][0])
        deadline = time.monotonic() + 10  # the server logs it just after the client ends
        while "BudgetError" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "BudgetError" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
