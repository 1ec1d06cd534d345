"""The secure-sum protocol in-process: correctness, views, exact cost, party objects."""

import numpy as np
import pytest

from parties import Alice, Bob, DataOwner, Party, Trent, simulate
from protocols import secure_sum as ss
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.errors import ConfigError, InvalidInputError, ProtocolError
from smc_hmm.runtime import simulate as run_roles
from smc_hmm.wire import WireCodec


def _vectors(names, length, seed=0):
    gen = np.random.default_rng(seed)
    return {n: np.round(gen.uniform(-500, 500, length), 3) for n in names}


def _parties(keypair, vectors, owners=(), trent_input=True):
    return [
        Alice("alice", vectors["alice"], keypair=keypair),
        Bob("bob", vectors["bob"]),
        Trent("trent", vectors["trent"] if trent_input else None),
        *[DataOwner(n, vectors[n]) for n in owners],
    ]


@pytest.mark.parametrize("owners,trent_input", [((), False), ((), True), (("o1", "o2"), True)])
def test_alice_gets_the_plaintext_sum(keypair_512, owners, trent_input):
    params = ss.Params(contributors=("bob", *owners), length=5, scale=20, max_abs=1000)
    vectors = _vectors(["alice", "bob", "trent", *owners], 5)
    result = simulate(
        _parties(keypair_512, vectors, owners, trent_input), ss.NAME, params, min_key_bits=512
    )
    included = [n for n in vectors if trent_input or n != "trent"]
    expected = sum(vectors[n] for n in included)
    assert np.allclose(result["alice"], expected, atol=len(included) * 2.0**-20)
    assert all(result[n] is None for n in result.outputs if n != "alice")


def test_integer_inputs_are_exact(keypair_512):
    params = ss.Params(contributors=("bob",), length=3, scale=0, max_abs=2**40)
    a, b, c = [2**39, -7, 0], [2**39 - 1, 8, 1], [-(2**38), 1, -1]
    parties = [Alice("alice", a, keypair=keypair_512), Bob("bob", b), Trent("trent", c)]
    result = simulate(parties, ss.NAME, params, min_key_bits=512)
    assert result["alice"].tolist() == [float(x + y + z) for x, y, z in zip(a, b, c)]


def test_each_party_sees_only_keys_and_ciphertexts(keypair_512):
    params = ss.Params(contributors=("bob", "o1"), length=4, scale=16, max_abs=1000)
    vectors = _vectors(["alice", "bob", "trent", "o1"], 4, seed=3)
    result = simulate(
        _parties(keypair_512, vectors, ("o1",)),
        ss.NAME,
        params,
        record_views=True,
        min_key_bits=512,
    )
    views = result.views
    # Alice receives exactly one message: the final ciphertext, freshly re-randomised
    assert [(p, t) for p, t, _ in views["alice"]] == [("trent", "aggregate")]
    ((_, _, final),) = views["alice"]
    assert isinstance(final, CipherArray)
    trent_received = {(p, t): x for p, t, x in views["trent"]}
    assert set(trent_received) == {("alice", "pk"), ("bob", "share"), ("o1", "share")}
    for share in (trent_received[("bob", "share")], trent_received[("o1", "share")]):
        assert isinstance(share, CipherArray)
        assert not set(map(int, share.ciphertexts())) & set(map(int, final.ciphertexts()))
    for name in ("bob", "o1"):
        assert [(p, t) for p, t, _ in views[name]] == [("alice", "pk")]
    for name in ("trent", "bob", "o1"):
        for _, _, payload in views[name]:
            assert isinstance(payload, PublicKey | CipherArray)
    # Trent, Bob and the owner never hold a private key
    assert all(
        not isinstance(p, Alice) and p.keypair is None
        for p in _parties(keypair_512, vectors, ("o1",))[1:]
    )


def _frame(tag, depth, payload):
    return len(WireCodec().encode({"t": tag, "d": depth, "b": payload}))


def _placeholder(pk, length, scale, bound):
    data = np.empty(length, dtype=object)
    data[:] = [1] * length
    return CipherArray(pk, data, scale, bound)


@pytest.mark.parametrize(
    "length,owners,trent_input",
    [(1, (), False), (6, ("o1",), True), (9, ("o1", "o2", "o3"), False)],
)
def test_bytes_rounds_and_ops_match_the_formula(keypair_512, length, owners, trent_input):
    pk = keypair_512[0]
    params = ss.Params(contributors=("bob", *owners), length=length, scale=16, max_abs=1000)
    vectors = _vectors(["alice", "bob", "trent", *owners], length)
    result = simulate(
        _parties(keypair_512, vectors, owners, trent_input), ss.NAME, params, min_key_bits=512
    )
    cost = result.cost
    k = len(params.contributors)
    summed = k + (1 if trent_input else 0)
    pk_bytes = _frame("pk", 1, pk)
    share_bytes = _frame("share", 2, _placeholder(pk, length, 16, params.bound))
    agg_bytes = _frame("aggregate", 3, _placeholder(pk, length, 16, summed * params.bound))
    # the ciphertext blob is fixed-width: 2 * bits / 8 bytes per entry (compared within one
    # msgpack length class: blobs of 256..65535 bytes carry a 2-byte length)
    m = max(length, 2)
    assert (
        _frame("share", 2, _placeholder(pk, m + 1, 16, params.bound))
        - _frame("share", 2, _placeholder(pk, m, 16, params.bound))
        == 2 * pk.bits // 8
    )
    assert pk_bytes < 100 and share_bytes > length * 2 * pk.bits // 8

    assert cost.rounds == 3
    assert cost.messages_total == 2 * k + 2
    assert cost.bytes_total == (k + 1) * pk_bytes + k * share_bytes + agg_bytes
    alice = cost.parties["alice"]
    assert alice["bytes"] == {"sent": (k + 1) * pk_bytes, "recv": agg_bytes}
    assert alice["traffic"]["trent"]["recv"] == {"messages": 1, "bytes": agg_bytes}
    trent = cost.parties["trent"]
    assert trent["bytes"] == {"sent": agg_bytes, "recv": pk_bytes + k * share_bytes}
    assert trent["rounds"] == 3
    for name in params.contributors:
        party = cost.parties[name]
        assert party["bytes"] == {"sent": share_bytes, "recv": pk_bytes}
        assert party["traffic"]["trent"]["sent"] == {"messages": 1, "bytes": share_bytes}
        assert party["rounds"] == 2
    for name, expected in ss.expected_counts(params, trent_has_input=trent_input).items():
        ops = cost.ops(name)
        for op, count in expected.items():
            assert ops[op] == count, (name, op)
        assert sum(ops.values()) == sum(expected.values()), name


@pytest.mark.parametrize(
    "bob_input, error", [([1, 2, 11], "bound"), ([1, 2], "shape"), ([1, np.nan, 2], "NaN")]
)
def test_bad_inputs_fail_the_whole_run_with_typed_errors(keypair_512, bob_input, error):
    params = ss.Params(contributors=("bob",), length=3, scale=16, max_abs=10)
    good = [1.0, 2.0, 3.0]
    with pytest.raises(InvalidInputError, match=error):
        simulate(
            [Alice("alice", good, keypair=keypair_512), Bob("bob", bob_input), Trent("trent")],
            ss.NAME,
            params,
            timeout=5,
            min_key_bits=512,
        )


def test_a_peer_sending_the_wrong_type_is_a_protocol_error(keypair_512):
    params = ss.Params(contributors=("bob",), length=2, scale=8, max_abs=10)

    def rogue_bob(ctx):
        ctx.recv("alice", "pk")
        ctx.send("trent", "share", [1, 2])  # plaintext instead of a CipherArray

    with pytest.raises(ProtocolError, match="expected ciphertexts"):
        run_roles(
            {"alice": ss.alice, "trent": ss.trent, "bob": rogue_bob},
            {"alice": ([1, 2], params), "trent": (None, params)},
            keys={"alice": keypair_512},
            timeout=5,
            min_key_bits=512,
        )


def test_params_validation():
    with pytest.raises(InvalidInputError):
        ss.Params(contributors=())
    with pytest.raises(InvalidInputError):
        ss.Params(contributors=("alice",))
    with pytest.raises(InvalidInputError):
        ss.Params(length=0)
    with pytest.raises(InvalidInputError):
        ss.Params(max_abs=float("inf"))
    with pytest.raises(InvalidInputError):
        ss.Params(contributors="bob")
    assert ss.Params.from_config({"length": 2, "contributors": ["bob", "o1"]}).contributors == (
        "bob",
        "o1",
    )
    with pytest.raises(ConfigError):
        ss.Params.from_config({"contributors": ["bob"]})
    with pytest.raises(ConfigError):
        ss.Params.from_config({"length": 2, "colour": "red"})
    with pytest.raises(ConfigError):
        ss.Params.from_config({"length": -2})


def test_party_objects_keep_private_state_private(keypair_512):
    alice = Alice("alice", [1, 2], keypair=keypair_512)
    assert "1" not in repr(alice) and "PrivateKey" not in repr(alice)
    with pytest.raises(InvalidInputError):
        Trent("trent", keypair=keypair_512)
    with pytest.raises(InvalidInputError):
        Party("bad name!")
    with pytest.raises(ConfigError, match="none of key_holder"):
        Party("p").play(ss.PROTOCOL, ss.Params())
    with pytest.raises(ConfigError, match="needs its 'vector'"):
        Bob("bob").play(ss.PROTOCOL, ss.Params())
    with pytest.raises(InvalidInputError):
        simulate([Bob("x"), Bob("x")], ss.NAME, ss.Params(), min_key_bits=512)


def test_transcripts_do_not_depend_on_private_vectors(keypair_512):
    """The metadata rule on every link, with a data owner beside Bob and the extreme
    vectors (all zeros, all at max_abs), which the conformance suite's example does not
    take: Alice, Bob, Trent and the owner see the same frames whatever the vectors."""
    from transcript_harness import assert_same_transcripts

    params = ss.Params(contributors=("bob", "o1"), length=3, scale=16, max_abs=1000)
    names = ["alice", "bob", "trent", "o1"]
    inputs = [
        _vectors(names, 3, seed=1),
        {n: np.zeros(3) for n in names},
        {n: np.full(3, 1000.0) for n in names},
    ]

    def run(vectors, wrap):
        simulate(
            _parties(keypair_512, vectors, ("o1",)),
            ss.NAME,
            params,
            wrap_transport=wrap,
            min_key_bits=512,
        )

    frames = assert_same_transcripts(run, inputs, params.messages().values(), keys=[keypair_512])
    assert {("trent", "bob"), ("trent", "o1"), ("alice", "trent")} <= set(frames)
