"""Session-wide fixtures: small, explicitly INSECURE keys so the suite runs fast."""

import socket
import warnings

import pytest

from smc_hmm.crypto import Rng, generate_keypair
from smc_hmm.errors import InsecureKeyWarning


def _insecure_keypair(bits: int, seed: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(bits, insecure=True, rng=Rng.seeded(seed))


@pytest.fixture(scope="session")
def keypair_512():
    """A 512-bit key pair: INSECURE, for tests only."""
    return _insecure_keypair(512, 512)


@pytest.fixture(scope="session")
def keypair_1024():
    """A 1024-bit key pair: INSECURE, for tests only."""
    return _insecure_keypair(1024, 1024)


@pytest.fixture(scope="session")
def other_keypair_512():
    """A second, unrelated 512-bit key pair (key-mismatch tests)."""
    return _insecure_keypair(512, 4242)


def free_ports(k: int) -> list[int]:
    """k currently free TCP ports on 127.0.0.1 (for configs of loopback runs)."""
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture
def ports():
    """A function returning k free loopback ports."""
    return free_ports
