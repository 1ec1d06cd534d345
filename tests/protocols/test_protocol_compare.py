"""protocols.compare: DGK/Veugen secure comparison and the secure argmax tournament.

Small, insecure keys (512-bit Paillier and DGK, t = 32) keep this fast.  Every
result is checked against Python's own comparison; the transcript harness
checks that frames depend only on public sizes (DGK ciphertexts travel as
declared ``OpaqueCiphertexts`` fields, which the harness masks like Paillier
ciphertexts while still comparing frame lengths).
"""

from __future__ import annotations

import random
import warnings
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis_support import with_fixtures
from transcript_harness import RecordingTransport, assert_same_transcripts

from protocols import compare as cmp
from protocols.compare import ArgmaxParams, CompareSpec, Params
from protocols.stages import circuits, dgk
from smc_hmm.crypto import CipherArray
from smc_hmm.crypto.dgk import DGKPublicKey, dgk_keypair_for
from smc_hmm.errors import (
    ConfigError,
    InsecureKeyWarning,
    InsecurePeerKeyError,
    InvalidInputError,
    KeyMismatchError,
    PrecisionError,
    ProtocolError,
    ScaleMismatchError,
    ShapeMismatchError,
)
from smc_hmm.runtime import run_protocol, simulate

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")

PARTIES = ("alice", "bob")


def compare(keypair, a, b, bits, reveal_to="bob", comparison="garbled", **kwargs):
    params = {"bits": bits, "count": len(a), "reveal_to": reveal_to, "comparison": comparison}
    result = run_protocol(
        cmp.PROTOCOL,
        params,
        {"alice": ("key_holder", None), "bob": ("evaluator", (a, b))},
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=30,
        **kwargs,
    )
    return result


def bits_for(keypair, a, b, bits, reveal_to="bob", comparison="garbled"):
    result = compare(keypair, a, b, bits, reveal_to, comparison)
    if reveal_to == "none":
        enc = result.outputs["bob"]
        return [bool(v) for v in enc.decrypt_ints(keypair[1])]
    return result.outputs[reveal_to]


def argmax(keypair, values, reveal_to="alice", **params):
    count = len(values[0]) if isinstance(values, tuple) else len(values)
    p = {"bits": params.pop("bits", 16), "count": count, "reveal_to": reveal_to, **params}
    return run_protocol(
        cmp.ARGMAX,
        p,
        {"alice": ("key_holder", None), "bob": ("evaluator", values)},
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=30,
    )


# -- comparison: correctness -------------------------------------------------------------


COMPARISONS = pytest.mark.parametrize("comparison", ["garbled", "dgk"])


@COMPARISONS
@pytest.mark.parametrize("bits", [1, 2, 3])
@pytest.mark.parametrize("reveal_to", ["bob", "alice", "none"])
def test_exhaustive_small_l(keypair_512, bits, reveal_to, comparison):
    top = (1 << (bits - 1)) - 1
    pairs = [(x, y) for x in range(-top, top + 1) for y in range(-top, top + 1)]
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    assert bits_for(keypair_512, a, b, bits, reveal_to, comparison) == [x < y for x, y in pairs]


@COMPARISONS
@pytest.mark.parametrize("bits", [8, 16, 64])
def test_edge_cases(keypair_512, bits, comparison):
    top = (1 << (bits - 1)) - 1
    cases = [
        (0, 0), (1, 1), (-1, -1), (top, top), (-top, -top),  # equal
        (5, 6), (6, 5), (-6, -5), (-5, -6), (0, 1), (1, 0), (0, -1), (-1, 0),  # a = b +- 1
        (top, -top), (-top, top), (top - 1, top), (top, top - 1),  # extremes
        (-top, -top + 1), (-top + 1, -top), (0, top), (0, -top), (top, 0), (-top, 0),
    ]  # fmt: skip
    a, b = [c[0] for c in cases], [c[1] for c in cases]
    for reveal_to in ("bob", "alice"):
        got = bits_for(keypair_512, a, b, bits, reveal_to, comparison)
        assert got == [x < y for x, y in cases]


@pytest.mark.parametrize("count", [1, 3, 7])
def test_odd_and_single_batches(keypair_512, count):
    rng = random.Random(count)
    a = [rng.randrange(-100, 100) for _ in range(count)]
    b = [rng.randrange(-100, 100) for _ in range(count)]
    assert bits_for(keypair_512, a, b, 8) == [x < y for x, y in zip(a, b)]


@with_fixtures(12)
@given(
    bits=st.integers(2, 70),
    data=st.data(),
)
def test_random_against_python(keypair_512, bits, data):
    top = (1 << (bits - 1)) - 1
    value = st.integers(-top, top)
    pairs = data.draw(st.lists(st.tuples(value, value), min_size=1, max_size=6))
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    assert bits_for(keypair_512, a, b, bits) == [x < y for x, y in pairs]


def test_float_and_numpy_inputs(keypair_512):
    a = np.array([3.0, -2.0, 7.0])
    b = np.array([3, 5, -1], dtype=np.int64)
    assert bits_for(keypair_512, a, b, 8) == [False, True, False]


def test_rounds_and_messages(keypair_512):
    for reveal_to, rounds in (("bob", 7), ("alice", 6), ("none", 5)):
        cost = compare(keypair_512, [1, 2, 3], [3, 2, 1], 16, reveal_to, "dgk").cost
        assert cost.rounds == rounds
        assert cost.totals()["ops"]["compare"] == 3
    # batching: the same number of messages for 1 and 20 pairs
    one = compare(keypair_512, [1], [2], 16, comparison="dgk").cost
    many = compare(keypair_512, list(range(20)), list(range(20, 0, -1)), 16, comparison="dgk").cost
    assert one.rounds == many.rounds
    assert one.messages_total == many.messages_total == 8


def test_the_garbled_comparisons_rounds_messages_and_gates(keypair_512):
    """The key and base OT, the OT extension (the share travels beside it), Alice's padded
    choices, then -- on bound shares (``bob``, ``alice``) -- the MAC key message and her
    choices of D_A, the tables, then her labels back (``bob``) or E(b ^ m) (``none``,
    plain shares).  AND gates: l a comparison on plain shares; on bound ones the whole
    slot's sum (w - 1, w = l + 1 + 41), the range check (w - l - 2), the gate on ok, and
    once the MAC check (61) and the AND of the range bits."""
    for reveal_to, rounds in (("bob", 9), ("alice", 8), ("none", 7)):
        cost = compare(keypair_512, [1, 2, 3], [3, 2, 1], 16, reveal_to).cost
        assert cost.rounds == rounds
        ops = cost.totals()["ops"]
        # a small batch takes the log-depth adder; large ones l AND gates a comparison
        assert ops["and_gates"] == circuits.compare_circuit(3, 16, reveal_to).and_gates
        w = 16 + 1 + 41
        if reveal_to == "none":
            assert circuits.compare_circuit(200, 16, reveal_to).and_gates == 200 * 16
            assert ops["cot"] == 3 * 17  # Bob counts the random OTs: l + 1 bits a share
        else:
            gates = 200 * (w - 1) + 200 * (w - 17 - 1) + 200 + 199 + 61
            assert circuits.compare_circuit(200, 16, reveal_to).and_gates == gates
            assert ops["cot"] == 3 * w + 61  # her whole slots, then D_A
    one = compare(keypair_512, [1], [2], 16).cost
    many = compare(keypair_512, list(range(20)), list(range(20, 0, -1)), 16).cost
    assert one.rounds == many.rounds and one.messages_total == many.messages_total


def _shift_first_share(monkeypatch, delta: int) -> None:
    """The deviating key holder: her software adds ``delta`` to her share of value 0."""
    from protocols.stages import bound as bd

    real = bd.AliceShares.bits

    def shifted(self):
        y = list(self.y)
        y[0] = (y[0] + delta) % (1 << self.plan.width)
        return real(bd.AliceShares(self.plan, y, self.z))

    monkeypatch.setattr(bd.AliceShares, "bits", shifted)


def test_a_key_holder_who_shifts_her_share_cannot_force_bobs_bit(keypair_512, monkeypatch):
    """Deviation: Alice adds 10 to her share of d_0 = a_0 - b_0 = -5, which would turn
    [a_0 < b_0] from 1 to 0.  Her shares are bound: the circuit's check fails and Bob
    raises instead of reading a forced bit.  The control, the same circuit without the
    MAC check, hands Bob the forced bit; ``none`` (plain shares, her E(b ^ m) back) stays
    the semi-honest mode docs/security.md states."""
    from protocols.stages import bound as bd

    a, b = [1, 7, 3], [6, 2, 3]
    assert bits_for(keypair_512, a, b, 16) == [True, False, False]
    _shift_first_share(monkeypatch, 10)
    with pytest.raises(ProtocolError, match="binding check"):
        compare(keypair_512, a, b, 16)
    monkeypatch.setattr(bd, "check_equal", lambda c, x, y: np.int64(1))
    circuits.compare_circuit.cache_clear()
    try:
        assert bits_for(keypair_512, a, b, 16) == [False, False, False]
    finally:
        circuits.compare_circuit.cache_clear()


def test_a_key_holder_who_shifts_her_share_cannot_move_the_argmax(keypair_512, monkeypatch):
    """The same deviation on the standalone argmax (Bob learns the winner): refused."""
    values = [3, 9, -4]
    assert argmax(keypair_512, values, reveal_to="bob").outputs["bob"] == 1
    _shift_first_share(monkeypatch, 10)
    with pytest.raises(ProtocolError, match="binding check"):
        argmax(keypair_512, values, reveal_to="bob")


# -- comparison: the lower-level functions ---------------------------------------------------


def _moved(ctx, enc):
    return CipherArray(ctx.adopt_key(enc.public_key), enc.data, enc.scale, enc.bound)


def test_lower_level_functions(keypair_512):
    pk, sk = keypair_512
    dgk_pk, dgk_sk = dgk_keypair_for(pk, 24)
    a, b = [-5, 0, 9, 4], [3, 0, -9, 4]
    enc_a = CipherArray.encrypt_encoded(pk, a, 0)
    enc_b = CipherArray.encrypt_encoded(pk, b, 0)
    spec = CompareSpec(24, 4)

    def bob(ctx):
        return dgk.bob_compare(ctx, _moved(ctx, enc_a), _moved(ctx, enc_b), dgk_pk, spec)

    def alice(ctx):
        return dgk.alice_compare(ctx, dgk_sk, spec)

    result = simulate(
        {"alice": alice, "bob": bob}, keys={"alice": keypair_512}, min_key_bits=512, timeout=30
    )
    lt = result.outputs["bob"]
    assert lt.shape == (4,) and lt.bound == 1 and lt.scale == 0
    assert [int(v) for v in lt.decrypt_ints(sk)] == [1, 0, 0, 0]


def test_scaled_operands_compare_as_integers(keypair_512):
    pk, sk = keypair_512
    dgk_pk, dgk_sk = dgk_keypair_for(pk, 24)
    enc_a = CipherArray.encrypt(pk, [0.5, -1.25], 4)  # 8, -20 at scale 4
    enc_b = CipherArray.encrypt(pk, [0.75, -1.5], 4)  # 12, -24

    def bob(ctx):
        return dgk.bob_compare(
            ctx, _moved(ctx, enc_a), _moved(ctx, enc_b), dgk_pk, CompareSpec(24, 2)
        )

    result = simulate(
        {"alice": lambda ctx: dgk.alice_compare(ctx, dgk_sk, CompareSpec(24, 2)), "bob": bob},
        keys={"alice": keypair_512},
        min_key_bits=512,
        timeout=30,
    )
    assert [int(v) for v in result.outputs["bob"].decrypt_ints(sk)] == [1, 0]


# -- the metadata rule ---------------------------------------------------------------------


def _run_and_sizes(keypair, sizes, protocol, params, bob_input):
    def run(private, wrap):
        def both(name, transport):
            inner = wrap(name, transport)
            return RecordingTransport(inner, sizes[id(private)])

        run_protocol(
            protocol,
            params,
            {"alice": ("key_holder", None), "bob": ("evaluator", bob_input(private))},
            keys={"alice": keypair},
            min_key_bits=512,
            timeout=30,
            wrap_transport=both,
        )

    return run


def _same_lengths(sizes):
    runs = list(sizes.values())
    for other in runs[1:]:
        assert set(other) == set(runs[0])
        for link, frames in runs[0].items():
            assert [len(f) for f in frames] == [len(f) for f in other[link]], link


@COMPARISONS
@pytest.mark.parametrize("reveal_to", ["bob", "alice", "none"])
def test_transcripts_do_not_depend_on_inputs(keypair_512, reveal_to, comparison):
    bits = 16
    top = (1 << (bits - 1)) - 1
    inputs = [
        ([0, 0, 0, 0, 0], [0, 0, 0, 0, 0]),
        ([top, -top, 5, -1, 7], [-top, top, 5, 0, -100]),
        ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
    ]
    params = Params(bits=bits, count=5, reveal_to=reveal_to, comparison=comparison)
    sizes = defaultdict(lambda: defaultdict(list))
    run = _run_and_sizes(keypair_512, sizes, cmp.PROTOCOL, params, lambda p: p)
    frames = assert_same_transcripts(run, inputs, params.messages().values(), keys=[keypair_512])
    assert ("alice", "bob") in frames and ("bob", "alice") in frames
    _same_lengths(sizes)


@pytest.mark.parametrize(
    "params",
    [
        ArgmaxParams(
            bits=16, count=5, reveal_to="bob", tie_break="random", with_max=True, comparison="dgk"
        ),
        ArgmaxParams(bits=16, count=5, reveal_to="bob", tie_break="random"),
    ],
    ids=["dgk", "garbled-random"],  # garbled to Alice, the default: the conformance suite
)
def test_argmax_transcripts_do_not_depend_on_inputs(keypair_512, params):
    inputs = [[0, 0, 0, 0, 0], [-30000, 12, 30000, 5, 5], [9, 8, 7, 6, 5]]
    sizes = defaultdict(lambda: defaultdict(list))
    run = _run_and_sizes(keypair_512, sizes, cmp.ARGMAX, params, lambda p: p)
    assert_same_transcripts(run, inputs, params.messages(), keys=[keypair_512])
    _same_lengths(sizes)


# -- argmax ----------------------------------------------------------------------------------


@COMPARISONS
@pytest.mark.parametrize("count", [2, 3, 5, 8])
def test_argmax_lowest_index_wins_ties(keypair_512, count, comparison):
    rng = random.Random(count)
    for values in (
        [rng.randrange(-50, 50) for _ in range(count)],
        [7] * count,
        [1, 9, 9, 3, 9, 0, 9, 2][:count],
    ):
        result = argmax(keypair_512, values, comparison=comparison)
        assert result.outputs["alice"] == values.index(max(values)), values
        assert result.outputs["bob"] is None


@COMPARISONS
def test_argmax_random_ties(keypair_512, comparison):
    values = [4, -3, 4, 4, 1]
    winners = set()
    for _ in range(14):
        winner = argmax(keypair_512, values, tie_break="random", comparison=comparison)
        winner = winner.outputs["alice"]
        assert values[winner] == 4
        winners.add(winner)
    assert len(winners) >= 2  # all the same index has probability 3 (1/3)^14
    distinct = [3, 10, -7, 2, 0]
    winner = argmax(keypair_512, distinct, tie_break="random", comparison=comparison)
    assert winner.outputs["alice"] == 1


def test_argmax_extremes_max_and_labels(keypair_512):
    top = (1 << 63) - 1
    values = [-top, top - 1, top, 0, top, -1]
    result = argmax(keypair_512, values, reveal_to="bob", bits=64, with_max=True, comparison="dgk")
    out = result.outputs["bob"]
    assert out["label"] == 2
    assert [int(v) for v in out["max"].decrypt_ints(keypair_512[1])] == [top]
    for comparison in ("dgk", "garbled"):
        labelled = argmax(
            keypair_512,
            (values, [10, 11, 12, 13, 14, 15]),
            bits=64,
            label_bound=20,
            comparison=comparison,
        ).outputs["alice"]
        assert labelled == 12
    assert argmax(keypair_512, values, reveal_to="bob", bits=64).outputs["bob"] == 2


def test_argmax_reveal_none_keeps_ciphertexts(keypair_512):
    result = argmax(keypair_512, [3, 8, 1], reveal_to="none", with_max=True, comparison="dgk")
    out = result.outputs["bob"]
    sk = keypair_512[1]
    assert int(out["label"].decrypt_ints(sk)[0]) == 1
    assert int(out["max"].decrypt_ints(sk)[0]) == 8
    assert result.outputs["alice"] is None


def test_argmax_rounds_grow_with_log_k(keypair_512):
    rounds = {
        k: argmax(keypair_512, list(range(k)), comparison="dgk").cost.rounds for k in (2, 4, 5, 8)
    }
    # keys (1) + 6 per tournament round (compare 4, multiply 2) + reveal (1)
    assert rounds == {2: 8, 4: 14, 5: 20, 8: 20}
    assert ArgmaxParams(count=10).rounds == [5, 2, 1, 1]
    # garbled: one circuit, whatever k
    garbled = {k: argmax(keypair_512, list(range(k))).cost.rounds for k in (2, 8)}
    assert garbled[2] == garbled[8]


# -- typed errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bits": 0},
        {"bits": -3},
        {"bits": 2.5},
        {"bits": True},
        {"count": 0},
        {"sigma": 39},
        {"reveal_to": "trent"},
        {"key_holder": "bob"},
        {"dgk_bits": 10},
        {"dgk_t": 3},
    ],
)
def test_bad_params(kwargs):
    with pytest.raises(InvalidInputError):
        Params(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bits": 0},
        {"count": 0},
        {"tie_break": "highest"},
        {"with_max": 1},
        {"label_bound": -1},
        {"reveal_to": "x"},
    ],
)
def test_bad_argmax_params(kwargs):
    with pytest.raises(InvalidInputError):
        ArgmaxParams(**kwargs)


def test_config():
    assert Params.from_config({"bits": 8, "count": 2, "name": "compare"}) == Params(8, 2)
    with pytest.raises(ConfigError):
        Params.from_config({"bits": 8, "colour": 1})
    with pytest.raises(ConfigError):
        Params.from_config({"bits": 0})
    with pytest.raises(ConfigError):
        ArgmaxParams.from_config({"count": 3, "ties": "random"})
    assert ArgmaxParams.from_config({"count": 3}).count == 3


@pytest.mark.parametrize(
    ("a", "b", "error"),
    [
        ([128], [0], InvalidInputError),  # |a| >= 2^(l-1) for l = 8
        ([0], [-128], InvalidInputError),
        ([1.5], [0], InvalidInputError),
        ([float("nan")], [0], InvalidInputError),
        (["3"], [0], InvalidInputError),
        ([True], [0], InvalidInputError),
        ([1, 2], [0], ShapeMismatchError),
    ],
)
def test_bad_inputs(keypair_512, a, b, error):
    with pytest.raises(error):
        compare(keypair_512, a, b, 8)


def test_bad_input_shape(keypair_512):
    with pytest.raises(InvalidInputError):
        run_protocol(
            cmp.PROTOCOL,
            {"bits": 8, "count": 1},
            {"alice": ("key_holder", None), "bob": ("evaluator", [1, 2, 3])},
            keys={"alice": keypair_512},
            min_key_bits=512,
            timeout=10,
        )


def test_l_too_large_for_the_key(keypair_512):
    with pytest.raises(PrecisionError):
        compare(keypair_512, [1], [2], 480)


def _bob_only(keypair, body):
    """Run ``body(ctx)`` as Bob against an Alice that just waits for nothing."""
    return simulate(
        {"alice": lambda ctx: None, "bob": body},
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=10,
    )


def test_bob_compare_checks_operands(keypair_512, other_keypair_512):
    pk = keypair_512[0]
    dgk_pk, _ = dgk_keypair_for(pk, 16)
    spec = CompareSpec(16, 2)
    good = CipherArray.encrypt_encoded(pk, [1, 2], 0)
    cases = [
        (CipherArray.encrypt_encoded(other_keypair_512[0], [1, 2], 0), good, KeyMismatchError),
        (CipherArray.encrypt_encoded(pk, [1, 2, 3], 0), good, ShapeMismatchError),
        (CipherArray.encrypt_encoded(pk, [1 << 15, 2], 0), good, PrecisionError),
        (good.with_bound(1 << 20), good, PrecisionError),
        (CipherArray.encrypt_encoded(pk, [1, 2], 3), good, ScaleMismatchError),
        ([1, 2], good, InvalidInputError),
    ]
    for enc_a, enc_b, error in cases:
        with pytest.raises(error):
            _bob_only(
                keypair_512, lambda ctx, a=enc_a, b=enc_b: dgk.bob_compare(ctx, a, b, dgk_pk, spec)
            )
    with pytest.raises(InvalidInputError):
        _bob_only(keypair_512, lambda ctx: dgk.bob_compare(ctx, good, good, "dgk", spec))


def _rogue_alice(send):
    def alice(ctx, private, params):
        pk, _ = ctx.keypair
        msg = params.messages()
        ctx.send("bob", msg["pk"], pk)
        send(ctx, msg)

    return alice


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (lambda w: w[:3], ProtocolError),
        (lambda w: [w[0], w[1], w[2], 5, w[4]], ProtocolError),  # u too small for l = 16
        (lambda w: [*w[:4], "t"], ProtocolError),
    ],
)
def test_bob_rejects_bad_dgk_keys(keypair_512, wire, error):
    dgk_pk, _ = dgk_keypair_for(keypair_512[0], 16)
    alice = _rogue_alice(lambda ctx, msg: ctx.send("bob", msg["dgk"], wire(dgk_pk.to_wire())))
    params = Params(bits=16, count=1, comparison="dgk")
    with pytest.raises(error):
        simulate(
            {"alice": alice, "bob": cmp.bob},
            args={"alice": (None, params), "bob": (([1], [2]), params)},
            keys={"alice": keypair_512},
            min_key_bits=512,
            timeout=10,
        )


def test_bob_rejects_small_dgk_key_and_wrong_size(keypair_512, keypair_1024):
    small, _ = dgk_keypair_for(keypair_512[0], 16)
    params = Params(bits=16, count=1, comparison="dgk")
    alice = _rogue_alice(lambda ctx, msg: ctx.send("bob", msg["dgk"], small.to_wire()))
    # Bob accepts 1024-bit keys and more: a 512-bit DGK key is refused
    with pytest.raises(InsecurePeerKeyError):
        simulate(
            {"alice": alice, "bob": cmp.bob},
            args={"alice": (None, params), "bob": (([1], [2]), params)},
            keys={"alice": keypair_1024},
            min_key_bits=1024,
            timeout=10,
        )
    agreed = Params(bits=16, count=1, dgk_bits=1024, comparison="dgk")
    with pytest.raises(ProtocolError):
        simulate(
            {"alice": alice, "bob": cmp.bob},
            args={"alice": (None, agreed), "bob": (([1], [2]), agreed)},
            keys={"alice": keypair_512},
            min_key_bits=512,
            timeout=10,
        )


def test_malformed_dgk_ciphertexts(keypair_512):
    """A peer sending garbage DGK ciphertexts gets a ProtocolError, never a wrong bit."""
    dgk_pk, dgk_sk = dgk_keypair_for(keypair_512[0], 16)
    spec = CompareSpec(16, 1)

    def alice(ctx):
        pk, _ = ctx.keypair
        msg = spec.with_width(dgk_pk.width).messages()
        ctx.recv("bob", msg["masked"])
        high = CipherArray.encrypt_encoded(pk, [0], 0, spec.high_bound)
        ctx.send("bob", msg["bits"], [high, b"\x00" * (16 * dgk_pk.width)])

    enc = CipherArray.encrypt_encoded(keypair_512[0], [1], 0)
    with pytest.raises(ProtocolError):
        simulate(
            {
                "alice": alice,
                "bob": lambda ctx: dgk.bob_compare(
                    ctx, _moved(ctx, enc), _moved(ctx, enc), dgk_pk, spec
                ),
            },
            keys={"alice": keypair_512},
            min_key_bits=512,
            timeout=10,
        )


def test_dgk_field_checks():
    field = dgk.dgk_ciphertexts(count=2, width=4)
    assert field.outgoing(b"x" * 8, "t") == b"x" * 8
    with pytest.raises(InvalidInputError):
        field.outgoing(b"x" * 7, "t")
    with pytest.raises(ProtocolError):
        field.incoming([1, 2], "t")
    assert dgk.dgk_ciphertexts().incoming(b"any", "t") == b"any"


@pytest.mark.parametrize(
    ("values", "params", "error"),
    [
        ([1, 2], {"count": 3}, ShapeMismatchError),
        ([1, 1 << 20, 3], {"count": 3}, InvalidInputError),
        (([1, 2, 3], [0, 1, 9]), {"count": 3}, InvalidInputError),  # label > k - 1
        (([1, 2, 3], [0, 1]), {"count": 3}, InvalidInputError),
        (([1, 2, 3], [0, -1, 2]), {"count": 3, "label_bound": 5}, InvalidInputError),
    ],
)
def test_argmax_bad_inputs(keypair_512, values, params, error):
    with pytest.raises(error):
        argmax(keypair_512, values, **params)


def test_bob_argmax_checks_operands(keypair_512):
    pk = keypair_512[0]
    dgk_pk, _ = dgk_keypair_for(pk, 16)
    params = ArgmaxParams(bits=16, count=3)
    with pytest.raises(ShapeMismatchError):
        _bob_only(
            keypair_512,
            lambda ctx: dgk.bob_argmax(
                ctx, CipherArray.encrypt_encoded(pk, [1, 2], 0), dgk_pk, params
            ),
        )
    with pytest.raises(PrecisionError):
        _bob_only(
            keypair_512,
            lambda ctx: dgk.bob_argmax(
                ctx, CipherArray.encrypt_encoded(pk, [1, 2, 1 << 16], 0), dgk_pk, params
            ),
        )


def test_descriptors():
    assert cmp.PROTOCOL.name == "compare" and cmp.ARGMAX.name == "argmax"
    tags = {m.tag for m in cmp.PROTOCOL.messages(Params(comparison="dgk"), 512)}
    assert {"cmp.pk", "cmp.dgk", "cmp.masked", "cmp.bits", "cmp.blinded", "cmp.delta"} <= tags
    tags = {m.tag for m in cmp.PROTOCOL.messages(Params(), 512)}
    bound = {"cmp.share", "cmp.key", "gc.check"}  # the default's bound shares
    assert {"cmp.pk", "gc.base_a", "gc.ext_u", "gc.choice", "gc.tables"} | bound <= tags
    tags = {m.tag for m in cmp.PROTOCOL.messages(Params(reveal_to="none"), 512)}
    assert "gc.share" in tags and not bound & tags
    assert isinstance(DGKPublicKey, type)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureKeyWarning)
        assert Params().spec().input_bound == (1 << 31) - 1


# -- as two OS processes, and the benchmark ---------------------------------------------------


def test_bench_smoke(tmp_path, capsys):
    from bench_support import bench_parser, run_bench

    from smc_hmm.bench import compare as bench

    code, data = run_bench(
        bench,
        [
            "--key-bits", "512", "--insecure", "--bits", "8", "--batch", "3", "--repeats", "1",
            "--argmax", "3", "--no-tno", "--protocol", "protocols.compare:PROTOCOL",
            "--garbled-batches", "1", "4",
            "--argmax-protocol", "protocols.compare:ARGMAX",
        ],
        tmp_path / "compare.json",
    )  # fmt: skip
    assert code == 0
    assert data["benchmark"] == "compare" and data["tno"] == {"skipped": "--no-tno"}
    assert data["ours"]["8"]["rounds"] == 5 and data["argmax"]["k"] == 3
    assert data["ours"]["8"]["batched_ms_per_comparison"] > 0
    garbled = data["ours"]["8"]["garbled"]
    assert set(garbled) == {"1", "4"} and garbled["4"]["ms_per_comparison"] > 0
    names = [r["name"] for r in data["rows"]]
    assert "garbled vs DGK: compare l=8, k=4" in names
    with pytest.raises(SystemExit):  # refused while the command line is parsed (H5)
        bench_parser(bench).parse_args(["--key-bits", "512", "--insecure", "--batch", "0"])
    capsys.readouterr()


def test_an_argmax_needs_at_least_two_values():
    with pytest.raises(InvalidInputError):
        ArgmaxParams(bits=8, count=1)


# -- the offline plan in every mode (the conformance suite runs the defaults) -------------


@COMPARISONS
@pytest.mark.parametrize("reveal_to", ["alice", "bob", "none"])
def test_the_comparisons_randomizer_budget_is_exact_in_every_mode(
    keypair_512, comparison, reveal_to
):
    """The descriptor's plan covers a run with nothing left, whatever reveals the bits."""
    from party_support import exact_offline_pools

    a, b = [3, -7, 0, 5], [4, -7, -1, 9]
    params = Params(8, 4, reveal_to=reveal_to, comparison=comparison)
    need = cmp.PROTOCOL.randomizers(params, keypair_512[0].bits, {"bob": (a, b)})
    with exact_offline_pools(keypair_512[0], need) as randomizers:
        result = compare(keypair_512, a, b, 8, reveal_to, comparison, randomizers=randomizers)
    if reveal_to != "none":
        assert result.outputs[reveal_to] == [x < y for x, y in zip(a, b)]


@pytest.mark.parametrize(
    "comparison, reveal_to", [("garbled", "alice"), ("garbled", "bob"), ("dgk", "alice"),
                              ("dgk", "bob"), ("dgk", "none")],
)  # fmt: skip
def test_the_argmaxs_randomizer_budget_is_exact_in_every_mode(keypair_512, comparison, reveal_to):
    values = [5, -3, 9, 9, 0]
    params = ArgmaxParams(16, 5, reveal_to=reveal_to, comparison=comparison)
    need = cmp.ARGMAX.randomizers(params, keypair_512[0].bits, {"bob": values})
    from party_support import exact_offline_pools

    with exact_offline_pools(keypair_512[0], need) as randomizers:
        result = run_protocol(
            cmp.ARGMAX, params, {"alice": ("key_holder", None), "bob": ("evaluator", values)},
            keys={"alice": keypair_512}, min_key_bits=512, timeout=30, randomizers=randomizers,
        )  # fmt: skip
    if reveal_to != "none":
        assert result.outputs[reveal_to] == 2
