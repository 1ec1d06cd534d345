"""Bad inputs to the secure forward algorithm fail fast with typed errors (no hang).

Each run uses ``timeout=10`` per receive; the assertion on the elapsed time
shows that the failing party's error stops the other party at once (its
transport is closed) instead of letting it wait for the timeout.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from party_support import alice_declaring_a_length

from protocols import forward
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError, ProtocolError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM
from smc_hmm.messages import Ciphertexts, Message
from smc_hmm.runtime import simulate

PROMPT = 5.0  # seconds: far below the 10 s receive timeout


def discrete(n_states=2, n_symbols=3) -> DiscreteHMM:
    rng = np.random.default_rng(n_states * 10 + n_symbols)
    return DiscreteHMM(
        rng.dirichlet(np.ones(n_states)),
        rng.dirichlet(np.ones(n_states), size=n_states),
        rng.dirichlet(np.ones(n_symbols), size=n_states),
    )


def gaussian(n_states=2, n_features=3) -> GaussianHMM:
    rng = np.random.default_rng(n_states * 10 + n_features)
    return GaussianHMM(
        rng.dirichlet(np.ones(n_states)),
        rng.dirichlet(np.ones(n_states), size=n_states),
        rng.normal(size=(n_states, n_features)),
        rng.uniform(0.5, 2.0, size=(n_states, n_features)),
    )


def expect_failure(keypair, error, alice_role, alice_args, bob_role, bob_args, match=None):
    t0 = time.monotonic()
    with pytest.raises(error, match=match) as info:
        simulate(
            {"alice": alice_role, "bob": bob_role},
            args={"alice": alice_args, "bob": bob_args},
            keys={"alice": keypair},
            timeout=10,
            join_timeout=20,
            min_key_bits=512,
        )
    assert time.monotonic() - t0 < PROMPT
    return info.value


@pytest.mark.parametrize(
    "obs, match",
    [
        (np.array([0, 1, 3]), r"\[0, 3\)"),  # symbol out of range (M = 3)
        (np.array([0, -1]), r"\[0, 3\)"),
        (np.array([0.0, 1.0]), "int"),  # floats are not symbols
        (np.array([[0, 1]]), "1-D"),
        (np.array([], dtype=np.int64), "non-empty"),
    ],
)
def test_bad_discrete_observations(keypair_1024, obs, match):
    err = expect_failure(
        keypair_1024, InvalidInputError, forward.alice, (obs,), forward.bob, ([discrete()],), match
    )
    assert any("alice" in note for note in getattr(err, "__notes__", []))


@pytest.mark.parametrize(
    "obs, match",
    [
        (np.zeros((4, 2)), r"\(T, 3\)"),  # wrong feature dimension (d = 3)
        (np.zeros(3), r"\(T, 3\)"),  # one frame must still be 2-D
        (np.zeros((0, 3)), r"\(T, 3\)"),
        (np.array([[0.0, np.nan, 1.0]]), "NaN"),
        (np.array([[0.0, np.inf, 1.0]]), "NaN or infinity"),
    ],
)
def test_bad_gaussian_observations(keypair_1024, obs, match):
    expect_failure(
        keypair_1024, InvalidInputError, forward.alice, (obs,), forward.bob, ([gaussian()],), match
    )


@pytest.mark.parametrize(
    "models, match",
    [
        ([discrete(), gaussian()], "all DiscreteHMM or all GaussianHMM"),
        ([discrete(2, 3), discrete(3, 4)], "share the observation space"),
        ([gaussian(2, 3), gaussian(2, 2)], "share the observation space"),
        ([], "at least one"),
        (["not a model"], "all DiscreteHMM or all GaussianHMM"),
    ],
)
def test_bad_model_batches(keypair_1024, models, match):
    err = expect_failure(
        keypair_1024,
        InvalidInputError,
        forward.alice,
        (np.array([0, 1]),),
        forward.bob,
        (models,),
        match,
    )
    assert any("bob" in note for note in getattr(err, "__notes__", []))


# -- a peer that breaks the protocol -------------------------------------------------------


def bob_sending_bad_spec(ctx):
    ctx.recv("alice", "fw.key")
    ctx.send("alice", "fw.spec", {"kind": "discrete", "width": 3, "states": [2, -1]})
    ctx.recv("alice", "fw.obs")  # Alice never sends it: her ProtocolError closes us down


def test_malformed_spec_from_bob_is_a_protocol_error(keypair_1024):
    expect_failure(
        keypair_1024,
        ProtocolError,
        forward.alice,
        (np.array([0, 1]),),
        bob_sending_bad_spec,
        (),
        "spec",
    )


def alice_sending_wrong_observations(ctx):
    pk, _ = ctx.keypair
    ctx.send("bob", "fw.key", pk)
    ctx.recv("bob", "fw.spec")
    ctx.send("bob", "fw.length", 2)
    any_shape = Message("fw.obs", Ciphertexts(0, 1))
    ctx.send("bob", any_shape, CipherArray.encrypt_encoded(pk, np.zeros((2, 5), dtype=object), 0))
    ctx.recv("bob", "fw.emit")


@pytest.mark.parametrize("length", [0, -3, forward.MAX_LENGTH + 1])
def test_a_length_outside_the_public_limits_is_a_protocol_error(keypair_1024, length):
    expect_failure(
        keypair_1024,
        ProtocolError,
        alice_declaring_a_length,
        (length,),
        forward.bob,
        ([discrete()],),
        "sequence length",
    )


def alice_sending_no_key(ctx):
    ctx.send("bob", "fw.key", {"n": 12345})


def test_wrong_observation_shape_from_alice_is_a_protocol_error(keypair_1024):
    expect_failure(
        keypair_1024,
        ProtocolError,
        alice_sending_wrong_observations,
        (),
        forward.bob,
        ([discrete()],),
        "fw.obs: ciphertexts of shape",
    )


def test_missing_public_key_is_a_protocol_error(keypair_1024):
    expect_failure(
        keypair_1024,
        ProtocolError,
        alice_sending_no_key,
        (),
        forward.bob,
        ([discrete()],),
        "public key",
    )
