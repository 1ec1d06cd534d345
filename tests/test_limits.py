"""smc_hmm.limits: every bound on a peer-chosen parameter refuses a value beyond it, names
the bound, and does so before any work or allocation for the value (tracemalloc shows
that nothing of its size was allocated)."""

from __future__ import annotations

import tracemalloc
import warnings

import pytest
from party_support import alice_declaring_a_length

from protocols import forward
from smc_hmm import limits
from smc_hmm.crypto import PublicKey
from smc_hmm.crypto.dgk import DGKPublicKey, generate_dgk_keypair
from smc_hmm.errors import (
    CryptoError,
    InsecureKeyWarning,
    InsecurePeerKeyError,
    InvalidInputError,
    ParameterBoundError,
    ProtocolError,
)
from smc_hmm.runtime import simulate
from smc_hmm.runtime.context import PartyContext
from smc_hmm.transport import LocalNetwork
from smc_hmm.wire import WireCodec


@pytest.fixture(scope="module")
def dgk_wire():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        pk, _ = generate_dgk_keypair(512, insecure=True)
    return pk.to_wire()


def refused(bound: str, call, *, below_bytes: int = 2**20) -> ParameterBoundError:
    """``call()`` raises ParameterBoundError naming ``bound``, having allocated less than
    ``below_bytes`` on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(ParameterBoundError) as info:
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    error = info.value
    assert error.bound == bound and bound in str(error)
    assert peak < below_bytes
    return error


def test_check_at_most_names_the_bound_and_its_numbers():
    assert limits.check_at_most("max_x", 5, 5, "x") == 5
    error = refused("max_x", lambda: limits.check_at_most("max_x", 6, 5, "the peer's x"))
    assert (error.value, error.limit) == (6, 5) and "the peer's x is 6" in str(error)
    assert isinstance(error, ProtocolError) and isinstance(error, ValueError)


# -- key sizes ------------------------------------------------------------------------------------


def _contexts(**bob):
    net = LocalNetwork(["alice", "bob"])
    codec = WireCodec()
    alice = PartyContext("alice", net.channel("alice", codec, timeout=5))
    return net, alice, PartyContext("bob", net.channel("bob", WireCodec(), timeout=5), **bob)


def test_a_peer_key_above_max_key_bits_is_refused_before_it_is_adopted():
    net, alice, bob = _contexts(min_key_bits=512)
    try:
        huge = PublicKey((1 << (limits.MAX_KEY_BITS + 1)) + 1)  # 8194 bits; never a real key
        alice.send("bob", "key", huge)
        refused("max_key_bits", lambda: bob.recv("alice", "key"))
        assert bob.keys == {}  # no randomizer, no table: nothing computed with it
    finally:
        net.close()


def test_max_key_bits_is_the_partys_to_raise_or_lower():
    net, alice, bob = _contexts(min_key_bits=512, max_key_bits=1024)
    try:
        alice.send("bob", "key", PublicKey((1 << 1100) + 1))
        refused("max_key_bits", lambda: bob.recv("alice", "key"))
        alice.send("bob", "key", PublicKey((1 << 1000) + 1))
        assert bob.recv("alice", "key").bits == 1001
        alice.send("bob", "key", PublicKey((1 << 300) + 1))
        with pytest.raises(InsecurePeerKeyError, match="min_key_bits"):  # the lower bound
            bob.recv("alice", "key")
    finally:
        net.close()
    with pytest.raises(InvalidInputError):
        _contexts(min_key_bits=2048, max_key_bits=1024)


# -- DGK ------------------------------------------------------------------------------------------


def test_dgk_t_above_its_bound_is_refused_before_the_table_of_h(dgk_wire):
    n, g, h, u, _ = dgk_wire
    # t = 2^20 would ask for a table of about 23 GiB at 2048 bits
    refused("max_dgk_t", lambda: DGKPublicKey.from_wire([n, g, h, u, 2**20]))
    assert DGKPublicKey.from_wire([n, g, h, u, limits.MAX_DGK_T]).t == limits.MAX_DGK_T


def test_dgk_u_above_its_bound_is_refused_before_its_primality_test(dgk_wire):
    n, g, h, _, t = dgk_wire
    refused("max_dgk_u_bits", lambda: DGKPublicKey.from_wire([n, g, h, 2**4096 + 1, t]))
    with pytest.raises(CryptoError):  # within the bound, the other checks still apply
        DGKPublicKey.from_wire([n, g, h, 2**31 + 1, t])  # not a prime


def test_dgk_modulus_above_max_key_bits_is_refused(dgk_wire):
    _, g, h, u, t = dgk_wire
    refused("max_key_bits", lambda: DGKPublicKey.from_wire([(1 << 9000) + 1, g, h, u, t]))
    refused("max_key_bits", lambda: DGKPublicKey.from_wire(dgk_wire, max_bits=500))
    assert DGKPublicKey.from_wire(dgk_wire, max_bits=512).bits == 512


# -- sizes a forward-algorithm peer declares ------------------------------------------------------


def test_a_forward_spec_beyond_width_or_states_is_refused():
    params = forward.ForwardParams()

    def spec(width, states, topology=None):
        return {"kind": "gaussian", "width": width, "states": states, "topology": topology}

    refused("max_width", lambda: forward.ForwardSpec.from_wire(spec(10**9, [2]), 1024, params))
    many = [limits.MAX_STATES // 2 + 1] * 2
    refused("max_states", lambda: forward.ForwardSpec.from_wire(spec(3, many), 1024, params))
    edges = [[[0, 0], [0, 1], [1, 1]], [[0, 0], [1, 1], [2, 2]]]  # the public topology (v2)
    ok = forward.ForwardSpec.from_wire(spec(3, [2, 3], edges), 1024, params)
    assert ok.total == 5
    with pytest.raises(ProtocolError, match="malformed"):  # not positive: malformed, as before
        forward.ForwardSpec.from_wire(spec(3, [0]), 1024, params)


def test_a_sequence_longer_than_its_bound_is_refused_before_the_observations(keypair_1024):
    from smc_hmm.hmm import DiscreteHMM

    model = DiscreteHMM([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]], [[0.7, 0.3], [0.4, 0.6]])
    with pytest.raises(ParameterBoundError, match="max_sequence_length") as info:
        simulate(
            {"alice": alice_declaring_a_length, "bob": forward.bob},
            args={"alice": (limits.MAX_SEQUENCE_LENGTH + 1,), "bob": ([model],)},
            keys={"alice": keypair_1024},
            timeout=10,
            join_timeout=20,
            min_key_bits=512,
        )
    assert info.value.limit == limits.MAX_SEQUENCE_LENGTH


def test_the_key_size_bounds_the_command_line_reads_without_crypto_are_the_crypto_ones():
    """smc_hmm.limits repeats two constants of smc_hmm.crypto so that ``smc-hmm --help``
    need not import the crypto layer; they must stay equal."""
    from smc_hmm import limits
    from smc_hmm.crypto import keys

    assert (limits.MIN_KEY_BITS, limits.MAX_KEY_BITS) == (keys.MIN_KEY_BITS, keys.MAX_KEY_BITS)


def test_the_certificate_validity_the_help_names_is_the_checked_one():
    from smc_hmm.certs import MAX_CERT_DAYS
    from smc_hmm.cli import certs

    assert certs.MAX_DAYS == MAX_CERT_DAYS
