"""Session-wide fixtures: small, explicitly INSECURE keys so the suite runs fast."""

import warnings

import pytest

from smc_hmm.crypto import Rng, generate_keypair
from smc_hmm.errors import InsecureKeyWarning
from smc_hmm.transport import free_loopback_ports


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


@pytest.fixture
def ports():
    """A function returning k free loopback ports."""
    return free_loopback_ports
