"""Base OT, IKNP correlated OT extension and the KOS check: correctness at several sizes,
several extensions on one base setup, a cheating receiver caught, the GF(2^128) helpers
against a slow reference, and every malformed message or out-of-order call typed."""

from __future__ import annotations

import numpy as np
import pytest
from nacl import bindings as na

from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import InvalidInputError, OtConsistencyError, ProtocolError
from smc_hmm.gc import ot
from smc_hmm.gc.garble import new_delta
from smc_hmm.gc.hashing import prg, random_blocks

IDENTITY = bytes([1]) + bytes(31)
ORDER_TWO = (2**255 - 20).to_bytes(32, "little")  # (0, -1)
ORDER_FOUR = bytes(32)  # y = 0


def _pair(seed: int = 1) -> tuple[ot.OtExtSender, ot.OtExtReceiver]:
    """A sender and receiver after the base OTs."""
    rs, rr = Rng.seeded(seed), Rng.seeded(seed + 1000)
    sender, receiver = ot.OtExtSender(new_delta(rs), rs), ot.OtExtReceiver(rr)
    receiver.base_finish(sender.base_choose(receiver.base_start()))
    return sender, receiver


def _run(sender, receiver, choices, tamper=None):
    u = receiver.extend(choices)
    if tamper is not None:
        u = tamper(u)
    challenge = sender.extend_receive(len(choices), u)
    proof = receiver.extend_prove(challenge)
    return sender.extend_check(proof), receiver.labels()


def _expect_correlated(q, t, choices, delta) -> None:
    mask = (np.uint64(0) - np.asarray(choices, np.uint64))[:, None]
    np.testing.assert_array_equal(t, q ^ (mask & delta))


def _int(block) -> int:
    return int(block[0]) | int(block[1]) << 64


def _choices(seed: int, m: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, m).astype(np.uint8)


# -- base OT ------------------------------------------------------------------------------


def test_base_ot_receiver_gets_the_chosen_key_only():
    rng = Rng.seeded(3)
    choices = [0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1]
    a, a_point = ot.base_sender_point(rng)
    points, keys = ot.base_receive(a_point, choices, rng)
    assert len(points) == len(choices) * ot.BASE_POINT_BYTES
    k0, k1 = ot.base_sender_keys(a, a_point, points)
    for i, c in enumerate(choices):
        assert keys[i] == (k1[i] if c else k0[i])
        assert keys[i] != (k0[i] if c else k1[i])
        assert len(keys[i]) == 16
    assert len(set(k0) | set(k1)) == 2 * len(choices)  # keys differ per index


def test_base_ot_rejects_invalid_points():
    rng = Rng.seeded(4)
    a, a_point = ot.base_sender_point(rng)
    points, _ = ot.base_receive(a_point, [0, 1], rng)
    not_in_subgroup = na.crypto_core_ed25519_add(a_point, ORDER_TWO)
    for bad in (b"\xff" * 32, IDENTITY, ORDER_TWO, ORDER_FOUR, not_in_subgroup):
        with pytest.raises(ProtocolError):
            ot.base_receive(bad, [0], rng)
        with pytest.raises(ProtocolError):
            ot.base_sender_keys(a, a_point, points[:32] + bad)
    with pytest.raises(ProtocolError):  # B_i = A: B_i - A is the identity
        ot.base_sender_keys(a, a_point, a_point)
    with pytest.raises(ProtocolError):
        ot.base_sender_keys(a, a_point, points[:31])
    with pytest.raises(InvalidInputError):
        ot.base_receive(a_point, [0, 2], rng)


# -- the extension --------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 7, 1000, 70000])
def test_extension_is_correlated_and_random(m):
    sender, receiver = _pair(m)
    choices = _choices(m, m)
    q, t = _run(sender, receiver, choices)
    assert q.shape == t.shape == (m, 2) and q.dtype == t.dtype == np.uint64
    _expect_correlated(q, t, choices, sender.delta)
    assert len(np.unique(q, axis=0)) == m  # no two equal rows
    if m >= 1000:
        ones = np.unpackbits(q.view(np.uint8)).mean()
        assert abs(ones - 0.5) < 0.02
        assert not np.any(np.all(q == sender.delta, axis=1))


def test_bool_choices_and_all_equal_choices():
    sender, receiver = _pair(5)
    for choices in (np.ones(300, bool), np.zeros(300, np.int64), np.ones(129, np.uint8)):
        q, t = _run(sender, receiver, choices)
        _expect_correlated(q, t, choices, sender.delta)


def test_two_extensions_on_one_base_setup():
    sender, receiver = _pair(6)
    c1, c2 = _choices(1, 500), _choices(2, 500)
    q1, t1 = _run(sender, receiver, c1)
    q2, t2 = _run(sender, receiver, c2)
    _expect_correlated(q1, t1, c1, sender.delta)
    _expect_correlated(q2, t2, c2, sender.delta)
    rows1 = {tuple(r) for r in q1.tolist()}
    assert not rows1 & {tuple(r) for r in q2.tolist()}  # fresh PRG bytes per extension


def test_sizes():
    for m in (1, 88, 89, 1000, 1 << 20):
        mp = ot.extended_count(m)
        assert mp % 128 == 0 and mp >= m + ot.KAPPA + ot.SIGMA > mp - 128
        assert ot.u_bytes(m) == ot.KAPPA * mp // 8
    assert (ot.PROOF_BYTES, ot.CHALLENGE_BYTES, ot.BASE_POINT_BYTES, ot.KAPPA) == (32, 16, 32, 128)
    with pytest.raises(InvalidInputError):
        ot.u_bytes(0)


def test_stream_reads_on_after_an_offset():
    seed = bytes(range(16))
    whole = prg(seed, 4096)
    assert ot._stream(seed, 0, 4096).tobytes() == whole
    assert ot._stream(seed, 1024, 2048).tobytes() == whole[1024:3072]


def test_transpose_against_bit_by_bit():
    rng = np.random.default_rng(7)
    cols = rng.integers(0, 256, (ot.KAPPA, 48), dtype=np.uint8)
    rows = ot._transpose(cols)
    bits = np.unpackbits(cols, axis=1, bitorder="little")  # (128, 384)
    for j in (0, 1, 7, 8, 200, 383):
        assert _int(rows[j]) == sum(int(bits[k, j]) << k for k in range(ot.KAPPA))


# -- the KOS check ------------------------------------------------------------------------------


def _flip(column: int, rows: list[int], m: int):
    nbytes = ot.extended_count(m) // 8

    def tamper(u: bytes) -> bytes:
        raw = bytearray(u)
        for j in rows:
            raw[column * nbytes + j // 8] ^= 1 << (j % 8)
        return bytes(raw)

    return tamper


def test_inconsistent_choices_in_a_column_are_caught():
    """Flipping u in column k (a different choice vector there) changes Q exactly where
    Delta's bit k is 1: the check then fails, every trial."""
    gen = np.random.default_rng(8)
    for trial in range(6):
        sender, receiver = _pair(100 + trial)
        bits = _int(sender.delta)
        ones = [k for k in range(ot.KAPPA) if bits >> k & 1]
        column = ones[trial % len(ones)] if trial else 0  # 0: Delta's lsb, always 1
        m = 400
        rows = sorted(set(gen.integers(0, m, 1 + trial).tolist()))
        with pytest.raises(OtConsistencyError):
            _run(sender, receiver, _choices(trial, m), _flip(column, rows, m))
        with pytest.raises(ProtocolError):  # aborted: no retry, no second guess
            sender.extend_receive(m, bytes(ot.u_bytes(m)))


def test_a_flip_where_delta_is_zero_changes_nothing():
    """The honest KOS bound: in a column where Delta's bit is 0 the sender ignores u, so
    the cheat passes (and tells the receiver that bit) but the output is unchanged."""
    sender, receiver = _pair(9)
    bits = _int(sender.delta)
    column = next(k for k in range(ot.KAPPA) if not bits >> k & 1)
    choices = _choices(9, 300)
    q, t = _run(sender, receiver, choices, _flip(column, [3, 100], 300))
    _expect_correlated(q, t, choices, sender.delta)


def test_a_wrong_proof_is_caught():
    sender, receiver = _pair(10)
    receiver_u = receiver.extend(_choices(10, 200))
    proof = bytearray(receiver.extend_prove(sender.extend_receive(200, receiver_u)))
    proof[20] ^= 1
    with pytest.raises(OtConsistencyError):
        sender.extend_check(bytes(proof))


def test_honest_runs_never_raise():
    for seed in range(8):
        sender, receiver = _pair(200 + seed)
        choices = _choices(seed, 50 + 37 * seed)
        q, t = _run(sender, receiver, choices)
        _expect_correlated(q, t, choices, sender.delta)


# -- GF(2^128) ------------------------------------------------------------------------------------


def _slow_mul(a: int, b: int) -> int:
    """Shift-and-add with a reduction at every doubling."""
    acc = 0
    for i in range(127, -1, -1):
        acc <<= 1
        if acc >> 128:
            acc = (acc ^ (1 << 128)) ^ 0x87
        if b >> i & 1:
            acc ^= a
    return acc


def test_gf128_mul_against_reference_and_laws():
    rng = Rng.seeded(11)
    one, x = 1, 2
    assert ot.gf128_mul(1 << 127, x) == 0x87  # x^128 = x^7 + x^2 + x + 1
    for _ in range(40):
        a, b, c = (rng.randbits(128) for _ in range(3))
        assert ot.gf128_mul(a, b) == _slow_mul(a, b)
        assert ot.gf128_mul(a, one) == a and ot.gf128_mul(a, 0) == 0
        assert ot.gf128_mul(a, b) == ot.gf128_mul(b, a)
        assert ot.gf128_mul(a, b ^ c) == ot.gf128_mul(a, b) ^ ot.gf128_mul(a, c)
        assert ot.gf128_mul(ot.gf128_mul(a, b), c) == ot.gf128_mul(a, ot.gf128_mul(b, c))
    with pytest.raises(InvalidInputError):
        ot.gf128_mul(1 << 128, 1)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("n", [0, 1, 5, 300])
def test_gf128_inner_against_reference(n, wide, monkeypatch):
    """Byte windows, and the 16-bit windows of many rows (forced here on few)."""
    if wide:
        monkeypatch.setattr(ot, "_WIDE_WINDOWS_FROM", 1)
    rng = Rng.seeded(12 + n)
    chi, rows = random_blocks(rng, n), random_blocks(rng, n)
    slow = 0
    for j in range(n):
        slow ^= _slow_mul(_int(chi[j]), _int(rows[j]))
    assert ot.gf128_inner(chi, rows) == slow
    if n:
        ones = np.ones((n, 2), np.uint64)  # rows of value x^0 + x^64
        assert ot.gf128_inner(chi, np.zeros_like(ones)) == 0
        expected = 0
        for j in range(n):
            expected ^= ot.gf128_mul(_int(chi[j]), 1 | 1 << 64)
        assert ot.gf128_inner(chi, ones) == expected
    with pytest.raises(InvalidInputError):
        ot.gf128_inner(chi, random_blocks(rng, n + 1))


# -- bad input and out-of-order calls --------------------------------------------------------


def test_bad_delta():
    rng = Rng.seeded(13)
    even = new_delta(rng)
    even[0] ^= np.uint64(1)
    for bad in (even, np.zeros(3, np.uint64), np.zeros((1, 2), np.uint64), np.ones(2, float)):
        with pytest.raises(InvalidInputError):
            ot.OtExtSender(bad, rng)


def test_bad_choices():
    _, receiver = _pair(14)
    for bad in (
        np.zeros(0, np.uint8),
        np.array([0, 1, 2]),
        np.ones((2, 3), np.uint8),
        np.array([0.0, 1.0]),
    ):
        with pytest.raises(InvalidInputError):
            receiver.extend(bad)
    u = receiver.extend(np.ones(10, np.uint8))  # still usable after local errors
    assert len(u) == ot.u_bytes(10)


def test_wrong_lengths_raise_protocol_errors():
    sender, receiver = _pair(15)
    u = receiver.extend(_choices(15, 100))
    for bad in (u[:-1], u + b"\0", b""):
        s, _ = _pair(15)
        with pytest.raises(ProtocolError):
            s.extend_receive(100, bad)
    with pytest.raises(ProtocolError):  # u for another m
        _pair(15)[0].extend_receive(1000, u)
    challenge = sender.extend_receive(100, u)
    with pytest.raises(ProtocolError):
        _pair(16)[1].extend_prove(challenge)  # no extension to prove
    with pytest.raises(ProtocolError):
        receiver.extend_prove(challenge[:-1])
    with pytest.raises(ProtocolError):
        sender.extend_check(bytes(ot.PROOF_BYTES - 1))
    with pytest.raises(InvalidInputError):
        _pair(17)[0].extend_receive(0, b"")


def test_base_messages_are_checked():
    rng = Rng.seeded(18)
    a_point = ot.OtExtReceiver(rng).base_start()
    for bad in (a_point[:-1], a_point + a_point, b"\xff" * 32, IDENTITY, ORDER_TWO):
        with pytest.raises(ProtocolError):
            ot.OtExtSender(new_delta(rng), rng).base_choose(bad)
    points = ot.OtExtSender(new_delta(rng), rng).base_choose(a_point)
    assert len(points) == ot.KAPPA * ot.BASE_POINT_BYTES
    for bad in (
        points[:-32],
        points + points[:32],
        points[:-32] + ORDER_FOUR,
        points[:-32] + b"\xff" * 32,
    ):
        receiver = ot.OtExtReceiver(rng)
        receiver.base_start()
        with pytest.raises(ProtocolError):
            receiver.base_finish(bad)
        with pytest.raises(ProtocolError):  # aborted
            receiver.extend(np.ones(4, np.uint8))


def test_out_of_order_calls():
    rng = Rng.seeded(19)
    sender, receiver = ot.OtExtSender(new_delta(rng), rng), ot.OtExtReceiver(rng)
    with pytest.raises(ProtocolError):
        receiver.base_finish(bytes(ot.KAPPA * ot.BASE_POINT_BYTES))
    with pytest.raises(ProtocolError):
        receiver.extend(np.ones(4, np.uint8))
    with pytest.raises(ProtocolError):
        receiver.labels()
    with pytest.raises(ProtocolError):
        sender.extend_receive(4, bytes(ot.u_bytes(4)))
    with pytest.raises(ProtocolError):
        sender.extend_check(bytes(ot.PROOF_BYTES))
    a_point = receiver.base_start()
    with pytest.raises(ProtocolError):
        receiver.base_start()
    points = sender.base_choose(a_point)
    with pytest.raises(ProtocolError):
        sender.base_choose(a_point)
    receiver.base_finish(points)
    with pytest.raises(ProtocolError):
        receiver.base_finish(points)
    with pytest.raises(ProtocolError):
        receiver.labels()  # no extension yet
    with pytest.raises(ProtocolError):
        receiver.extend_prove(bytes(ot.CHALLENGE_BYTES))
    choices = _choices(19, 20)
    u = receiver.extend(choices)
    with pytest.raises(ProtocolError):
        receiver.extend(choices)  # the previous one is not proved
    with pytest.raises(ProtocolError):
        receiver.labels()
    with pytest.raises(ProtocolError):
        sender.extend_check(bytes(ot.PROOF_BYTES))  # no u yet
    challenge = sender.extend_receive(20, u)
    with pytest.raises(ProtocolError):
        sender.extend_receive(20, u)  # the previous one is not checked
    q = sender.extend_check(receiver.extend_prove(challenge))
    _expect_correlated(q, receiver.labels(), choices, sender.delta)
    with pytest.raises(ProtocolError):
        sender.extend_check(bytes(ot.PROOF_BYTES))  # already checked
