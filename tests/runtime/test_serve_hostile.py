"""A serving Bob under a fast, small version of ``smc-hmm bench serve --hostile``.

Thirty hostile connections of every kind of :mod:`smc_hmm.bench.hostile` (silent
sockets, slow TLS handshakes, junk bytes and frames, oversized frames, a certificate of
another CA, floods, disconnects in mid-protocol; from two loopback addresses other than
the clients') attack an in-process server (512-bit INSECURE keys, 3 models, 5 frames)
for a few seconds while two legitimate clients run their sessions.  Every legitimate
decision must be correct, every kind of attack must have been met by the limit meant
for it, and once the attack stops the server's pending connections, open descriptors
and threads must return to their baseline within 10 s.  Throughput and memory figures
are the benchmark's (``docs/serving.md``), not this test's.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest
from serve_harness import client, keypair, resources, utterances, write_serve_config

from smc_hmm.bench.hostile import MIX, HostileLoad, HostileTarget
from smc_hmm.certs import make_certificates
from smc_hmm.runtime import load_config
from smc_hmm.runtime.serve import Server, ServeSettings
from smc_hmm.transport.tcp import TlsConfig

pytestmark = pytest.mark.slow

HOSTILE = 30
SOURCES = ("127.0.0.2", "127.0.0.3")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    directory = tmp_path_factory.mktemp("serve-hostile")
    config = load_config(write_serve_config(directory))
    certs = directory / "certs"
    rogue = make_certificates(directory / "rogue", ["bob"], clients=["mallory"])
    settings = ServeSettings(handshake_timeout=1.0, max_sessions=4, workers=1)
    with Server(config, "bob", settings=settings, port=0) as srv:
        target = HostileTarget(
            address=srv.address,
            client=TlsConfig(certs / "ca.pem", certs / "mallory.pem", certs / "mallory.key"),
            client_name="mallory",
            rogue=TlsConfig(certs / "ca.pem", rogue.certs["mallory"], rogue.keys["mallory"]),
            key_n=keypair(77)[0].n,
        )
        yield srv, certs, target


def _settled(baseline: dict, srv, seconds: float = 10.0) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        now = resources(os.getpid())
        back = now["fds"] <= baseline["fds"] and now["threads"] <= baseline["threads"]
        if (back and srv.pending == 0) or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def test_legitimate_clients_are_served_correctly_under_a_mixed_attack(served, caplog):
    srv, certs, target = served
    caplog.set_level(logging.INFO, logger="smc_hmm.serve")
    cases = utterances(6)
    client(srv.address, certs, cases[0][0], "alice")  # warm-up: imports and caches
    baseline = resources(os.getpid())
    load = HostileLoad(target, HOSTILE, sources=SOURCES, pause=0.1, hold=5.0, seed=7)
    results: dict = {}

    def legitimate(name: str, mine) -> None:
        kp = keypair(hash(name) % 997)
        results[name] = [client(srv.address, certs, f, name, kp=kp)["keyword"] for f, _ in mine]

    load.start()
    try:
        time.sleep(1.5)  # the attack is under way: pending connections, refusals, sessions
        assert sum(load.attempts.values()) >= HOSTILE  # every connection has attacked
        workers = [
            threading.Thread(target=legitimate, args=("alice", cases[:3])),
            threading.Thread(target=legitimate, args=("carol", cases[3:])),
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        time.sleep(1.5)  # long enough for every slow kind to meet its timeout
    finally:
        report = load.stop()
    assert results["alice"] == [want for _, want in cases[:3]]
    assert results["carol"] == [want for _, want in cases[3:]]
    assert set(report) == {kind for kind, _ in MIX}  # every kind attacked
    counts = srv.counts
    assert counts["throttled"] > 0  # each source address reconnects faster than its rate
    assert counts["dropped"] > 0  # silent and slow sockets: the handshake timeout
    assert counts["refused"] > 0  # junk, wrong certificates (and mallory over its share)
    assert counts["failed"] > 0  # junk / oversized frames, floods, disconnects
    logged = " ".join(r.getMessage() for r in caplog.records if "mallory" in r.getMessage())
    for error in ("WireError", "FrameTooLargeError", "PeerDisconnectedError"):
        assert error in logged  # junk frames, oversized frames, disconnects in mid-protocol
    after = _settled(baseline, srv)
    assert srv.pending == 0 and srv.active == 0
    assert after["fds"] <= baseline["fds"], (baseline, after)
    assert after["threads"] <= baseline["threads"], (baseline, after)
