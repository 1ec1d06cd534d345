"""Fixtures of the transport tests: certificates and a thread-leak guard."""

from __future__ import annotations

import threading

import pytest
from transport_support import PARTIES

from smc_hmm.certs import make_certificates


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """One CA with certificates for alice, bob, trent and mallory."""
    return make_certificates(tmp_path_factory.mktemp("pki"), PARTIES + ["mallory"])


@pytest.fixture(scope="session")
def rogue_certs(tmp_path_factory):
    """A different CA that issues certificates with the same party names."""
    return make_certificates(tmp_path_factory.mktemp("rogue-pki"), PARTIES)


@pytest.fixture
def tls(certs):
    return {name: certs.tls_config(name) for name in PARTIES}


def live_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


@pytest.fixture
def no_thread_leak():
    """Fails the test if any thread it started is still alive when it returns.

    Transports join their threads in ``close()``, so there is no grace period.
    """
    before = live_threads()
    yield
    leaked = live_threads() - before
    if leaked:
        pytest.fail(f"threads left behind: {sorted(t.name for t in leaked)}")
