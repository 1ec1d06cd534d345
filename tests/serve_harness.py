"""Shared set-up of the serve tests: a keyword configuration with a serving Bob, small
INSECURE keys (512 bits), three bundled digit models and short utterances (5 frames), so
one session takes about 0.1 s; and a client whose connection can be killed at any
message index."""

from __future__ import annotations

import contextlib
import socket
import threading
import warnings
from pathlib import Path

import numpy as np

from smc_hmm.crypto import Rng, generate_keypair
from smc_hmm.errors import InjectedFaultError, InsecureKeyWarning
from smc_hmm.hmm import log_likelihood
from smc_hmm.transport.base import Transport

KEY_BITS = 512
FRAMES = 5
MODELS = 3
#: client certificates; "mallory" is the hostile client of the attack tests
CLIENTS = ["alice", "carol", "dave", "erin", "mallory"]


def keypair(seed: int = 5120):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(KEY_BITS, insecure=True, rng=Rng.seeded(seed))


def write_serve_config(directory: Path, *, serve=None, compute=None, timeout=10.0) -> Path:
    """parties.toml of a serving Bob (3 bundled models) and client certificates."""
    from smc_hmm.data import load_bundled_models
    from smc_hmm.hmm.io import save_models
    from smc_hmm.runtime import write_config

    models, labels = load_bundled_models("diag")
    save_models(directory / "keywords.npz", models[:MODELS], labels=labels[:MODELS])
    return write_config(
        directory / "parties.toml",
        "keyword",
        {"alice": {"kind": "alice"}, "bob": {"kind": "bob", "models": "keywords.npz"}},
        params={"mode": "fast"},
        key_bits=KEY_BITS,
        insecure=True,
        timeout=timeout,
        connect_timeout=20,
        serve={"party": "bob", "max_sessions": 4, **(serve or {})},
        compute={"workers": 1, **(compute or {})},
        clients=CLIENTS,
    )


def write_served_config(path: Path, protocol: str, bob: dict, params: dict, *, timeout, serve=None):
    """parties.toml of a Bob (``kind = "bob"`` and the entries of ``bob``) who serves
    ``protocol`` to the clients alice and carol: INSECURE KEY_BITS keys, at most two
    sessions at once (and ``serve``'s other [serve] entries), one worker."""
    from smc_hmm.runtime import write_config

    return write_config(
        path,
        protocol,
        {"alice": {"kind": "alice"}, "bob": {"kind": "bob", **bob}},
        params=params,
        key_bits=KEY_BITS,
        insecure=True,
        timeout=timeout,
        connect_timeout=20,
        serve={"party": "bob", "max_sessions": 2, **(serve or {})},
        compute={"workers": 1},
        clients=["alice", "carol"],
    )


def utterances(count: int):
    """(frames, expected label) of ``count`` bundled test utterances, cut to FRAMES."""
    from smc_hmm.data import load_bundled_models, load_test_utterances

    models, labels = load_bundled_models("diag")
    out = []
    for u in load_test_utterances()[:count]:
        frames = np.asarray(u.features)[:FRAMES]
        scores = [log_likelihood(m, frames) for m in models[:MODELS]]
        out.append((frames, labels[int(np.argmax(scores))]))
    return out


def session(protocol: str, server, certs: Path, data, name: str, *, timeout, **options) -> dict:
    """One client session of ``protocol`` as Alice, with client ``name``'s certificate
    from ``certs`` and an INSECURE KEY_BITS key, to the server at address ``server``;
    ``options`` go to ``run_client_session``, whose result this is."""
    from smc_hmm.runtime.client import run_alice_session

    return run_alice_session(
        protocol,
        data,
        certs,
        name,
        server=server,
        key_bits=KEY_BITS,
        insecure=True,
        timeout=timeout,
        **options,
    )


def client(server, certs: Path, frames, name="alice", *, wrap=None, timeout=10.0, kp=None):
    """One keyword session as client ``name``; returns Alice's output."""
    result = session(
        "keyword",
        server,
        certs,
        frames,
        name,
        timeout=timeout,
        connect_timeout=30.0,
        keypair=kp or keypair(),
        wrap_transport=wrap,
    )
    return result["output"]


class KillAt(Transport):
    """Kills the client's connection at message ``index`` (sends and receives counted
    together, from 0): the socket is shut down without a goodbye, as if the process died."""

    def __init__(self, inner, index: int):
        self.inner = inner
        self.name = inner.name
        self.peers = list(inner.peers)
        self.index = index
        self.count = 0
        self.killed = False
        self._lock = threading.Lock()

    def _tick(self) -> None:
        with self._lock:
            hit = self.count == self.index
            self.count += 1
        if hit:
            self.killed = True
            for conn in self.inner._conns.values():
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
            raise InjectedFaultError(f"client killed at message {self.index}")

    def send_bytes(self, peer: str, frame: bytes) -> None:
        self._tick()
        self.inner.send_bytes(peer, frame)

    def recv_bytes(self, peer: str, timeout: float) -> bytes:
        frame = self.inner.recv_bytes(peer, timeout)
        self._tick()
        return frame

    def close(self) -> None:
        self.inner.close()


def message_count(server, certs: Path, frames) -> int:
    """How many messages one keyword session of these sizes has (client's view)."""
    counter = {}

    def wrap(transport):
        counter["t"] = KillAt(transport, index=10**9)
        return counter["t"]

    client(server, certs, frames, wrap=wrap)
    return counter["t"].count


def resources(pid: int) -> dict:
    """Threads, open file descriptors and resident memory (kB) of process ``pid``."""
    from smc_hmm.bench.serve import process_resources

    return process_resources(pid)
