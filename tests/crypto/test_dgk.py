"""DGK keys (smc_hmm.crypto.dgk): structure, zero test, homomorphism, wire form, cache.

Small, explicitly insecure keys (512 bits, t = 32) keep the suite fast; one
test generates a 1024-bit key and checks its size.
"""

from __future__ import annotations

import math
import time
import warnings

import gmpy2
import pytest

from smc_hmm.crypto import Rng
from smc_hmm.crypto.dgk import (
    DGKKeyCache,
    DGKPrivateKey,
    DGKPublicKey,
    default_t,
    dgk_keypair_for,
    generate_dgk_keypair,
    min_u,
)
from smc_hmm.errors import (
    CryptoError,
    InsecureKeyWarning,
    InvalidCiphertextError,
    InvalidInputError,
)
from smc_hmm.wire import WireCodec


def _small(bits=512, seed=7, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_dgk_keypair(bits, insecure=True, rng=Rng.seeded(seed), **kwargs)


@pytest.fixture(scope="module")
def dgk():
    return _small()


def test_key_structure(dgk):
    pk, sk = dgk
    assert pk.bits == 512 and pk.t == default_t(512) == 32
    assert gmpy2.is_prime(pk.u) and pk.u >= min_u(64)
    for prime, v in ((sk.p, sk.v_p), (sk.q, sk.v_q)):
        assert gmpy2.is_prime(prime) and gmpy2.is_prime(v) and v.bit_length() == pk.t
        assert (prime - 1) % (pk.u * v) == 0
    # g has order u v_p v_q, h order v_p v_q
    order = pk.u * sk.v_p * sk.v_q
    assert gmpy2.powmod(pk.g, order, pk.n) == 1
    for f in (pk.u, sk.v_p, sk.v_q):
        assert gmpy2.powmod(pk.g, order // f, pk.n) != 1
    assert gmpy2.powmod(pk.h, sk.v_p * sk.v_q, pk.n) == 1
    assert gmpy2.powmod(pk.h, sk.v_p, pk.n) != 1 and gmpy2.powmod(pk.h, sk.v_q, pk.n) != 1
    assert pk.r_bits == math.ceil(2.5 * pk.t)


@pytest.mark.parametrize("holder", [False, True])
def test_zero_test_and_decrypt(dgk, holder):
    pk, sk = dgk
    rng = Rng.seeded(1)
    values = [0, 1, 2, 5, pk.u - 1, pk.u, 2 * pk.u, -1, -2]
    cts = sk.encrypt(values, rng) if holder else pk.encrypt(values, rng)
    assert sk.is_zero(cts) == [v % pk.u == 0 for v in values]
    assert sk.decrypt(cts) == [v % pk.u for v in values]
    # fresh randomness: two encryptions of 0 differ
    again = sk.encrypt([0], rng) if holder else pk.encrypt([0], rng)
    assert again[0] != cts[0]


def test_homomorphic_helpers(dgk):
    pk, sk = dgk
    rng = Rng.seeded(2)
    c3, c5 = pk.encrypt([3, 5], rng)
    assert sk.decrypt([pk.add(c3, c5)]) == [8]
    assert sk.decrypt([pk.neg(c3)]) == [pk.u - 3]
    assert sk.decrypt([pk.scalar_mul(c3, 4), pk.scalar_mul(c3, -1)]) == [12, pk.u - 3]
    assert sk.decrypt([pk.constant(7), pk.constant(-2)]) == [7, pk.u - 2]
    (fresh,) = pk.rerandomize([c3], rng)
    assert fresh != c3 and sk.decrypt([fresh]) == [3]
    assert sk.is_zero([pk.add(c3, pk.constant(-3))]) == [True]
    assert sk.is_zero([]) == []


def test_wire_round_trip(dgk):
    pk, _ = dgk
    codec = WireCodec()
    wire = codec.decode(codec.encode(pk.to_wire()))
    back = DGKPublicKey.from_wire(wire)
    assert back == pk and back.fingerprint == pk.fingerprint and hash(back) == hash(pk)
    assert all(isinstance(x, int) for x in pk.to_wire())
    cts = pk.encrypt([1, 0, 4], Rng.seeded(3))
    blob = pk.pack(cts)
    assert isinstance(blob, bytes) and len(blob) == 3 * pk.width
    assert back.unpack(blob, 3) == cts


@pytest.mark.parametrize(
    "mutate",
    [
        lambda w: w[:4],
        lambda w: "nope",
        lambda w: [w[0] + 1, *w[1:]],  # even modulus
        lambda w: [w[0], w[1], w[2], 91, w[4]],  # u not prime
        lambda w: [w[0], 1, w[2], w[3], w[4]],  # g = 1
        lambda w: [w[0], w[1], w[0] + 5, w[3], w[4]],  # h >= n
        lambda w: [w[0], w[1], w[2], w[3], -1],
        lambda w: [w[0], True, w[2], w[3], w[4]],
    ],
)
def test_malformed_public_key(dgk, mutate):
    with pytest.raises(CryptoError):
        DGKPublicKey.from_wire(mutate(dgk[0].to_wire()))


def test_unpack_rejects_bad_ciphertexts(dgk):
    pk, sk = dgk
    good = pk.pack(pk.encrypt([1], Rng.seeded(4)))
    with pytest.raises(InvalidCiphertextError):
        pk.unpack(good, 2)  # wrong count
    with pytest.raises(InvalidCiphertextError):
        pk.unpack(good + b"\x00", 1)
    with pytest.raises(InvalidCiphertextError):
        pk.unpack(b"\x00" * pk.width, 1)  # zero
    with pytest.raises(InvalidCiphertextError):
        pk.unpack(int(sk.p).to_bytes(pk.width, "big"), 1)  # not a unit
    units = pk.pack(pk.encrypt([1, 0, 1, 1], Rng.seeded(5)))
    assert len(pk.unpack(units, 4)) == 4
    for i in range(4):  # one non-unit anywhere in a batch (the check is one gcd per batch)
        w = pk.width
        bad = units[: i * w] + int(sk.q).to_bytes(w, "big") + units[(i + 1) * w :]
        with pytest.raises(InvalidCiphertextError, match="not a unit"):
            pk.unpack(bad, 4)
    with pytest.raises(InvalidCiphertextError):
        pk.unpack(b"\xff" * pk.width, 1)  # >= n
    with pytest.raises(InvalidCiphertextError):
        pk.unpack("text", 1)


def test_private_key_checks(dgk):
    pk, sk = dgk
    with pytest.raises(CryptoError):
        DGKPrivateKey(pk, sk.p, sk.q + 2, sk.v_p, sk.v_q)
    with pytest.raises(CryptoError):
        DGKPrivateKey(pk, sk.p, sk.q, sk.v_q, sk.v_p)
    with pytest.raises(InvalidInputError):
        DGKPrivateKey("pk", sk.p, sk.q, sk.v_p, sk.v_q)
    other_pk, _ = _small(seed=99)
    with pytest.raises(InvalidCiphertextError):
        sk.decrypt(other_pk.encrypt([1], Rng.seeded(5)))


def test_keygen_arguments():
    with pytest.raises(InvalidInputError):
        generate_dgk_keypair(512)  # insecure without the flag
    with pytest.raises(InvalidInputError):
        generate_dgk_keypair(2048, t=80)  # short t is insecure too
    with pytest.raises(InvalidInputError):
        _small(bits=511)
    with pytest.raises(InvalidInputError):
        _small(bits=100)
    with pytest.raises(InvalidInputError):
        _small(u=91)  # not prime
    with pytest.raises(InvalidInputError):
        _small(u=97, l_bits=64)  # prime but < 3 l
    with pytest.raises(InvalidInputError):
        _small(bits=256, t=120)  # no room for u and v
    with pytest.raises(InvalidInputError):
        _small(l_bits=0)
    with pytest.warns(InsecureKeyWarning):
        generate_dgk_keypair(256, insecure=True, rng=Rng.seeded(8))


def test_u_follows_l():
    pk, _ = _small(bits=256, l_bits=200)
    assert pk.u >= 600 and gmpy2.is_prime(pk.u)
    pk, _ = _small(bits=256, u=211)
    assert pk.u == 211


def test_keygen_1024_bits_is_quick():
    start = time.perf_counter()
    pk, sk = _small(bits=1024, seed=11)
    assert pk.bits == 1024 and pk.t == 64
    assert sk.is_zero(sk.encrypt([0, 1], Rng.seeded(1))) == [True, False]
    assert time.perf_counter() - start < 30


def test_cache_reuses_per_fingerprint(keypair_512, other_keypair_512):
    cache = DGKKeyCache(maxsize=2)
    first = dgk_keypair_for(keypair_512[0], 16, cache=cache, rng=Rng.seeded(1))
    again = dgk_keypair_for(keypair_512[0], 32, cache=cache)
    assert again is first and cache.generated == 1
    assert first[0].bits == 512 and first[0].u >= min_u(64)
    other = dgk_keypair_for(other_keypair_512[0], 16, cache=cache, rng=Rng.seeded(2))
    assert other[0] != first[0] and cache.generated == 2
    # a larger l needs a larger u: replaced, not reused
    big = dgk_keypair_for(keypair_512[0], 100, cache=cache, rng=Rng.seeded(3))
    assert big[0].u >= min_u(100) and big is not first and cache.generated == 3
    assert dgk_keypair_for(keypair_512[0], 8, cache=cache) is big
    # LRU: a third key evicts the least recently used one
    dgk_keypair_for(keypair_512[0], 8, bits=256, cache=cache, rng=Rng.seeded(4))
    assert len(cache) == 2
    dgk_keypair_for(other_keypair_512[0], 16, cache=cache, rng=Rng.seeded(5))
    assert cache.generated == 5
    cache.clear()
    assert len(cache) == 0


def test_process_cache(keypair_512):
    a = dgk_keypair_for(keypair_512[0], 16)
    assert dgk_keypair_for(keypair_512[0], 16) is a


def test_cache_arguments(keypair_512):
    with pytest.raises(InvalidInputError):
        dgk_keypair_for("not a key", 16)
    with pytest.raises(InvalidInputError):
        DGKKeyCache(maxsize=0)

    class Big:  # a 2048-bit Paillier key must not get a small DGK key
        fingerprint = b"x" * 16
        bits = 2048

    with pytest.raises(InvalidInputError):
        dgk_keypair_for(Big(), 16, bits=512, cache=DGKKeyCache())


def test_threaded_zero_tests_agree(dgk):
    pk, sk = dgk
    values = [i % 3 for i in range(150)]
    cts = sk.encrypt(values, Rng.seeded(6))
    expected = [v == 0 for v in values]
    try:
        for threads in (1, 2, 3):
            sk.threads = threads
            assert sk.is_zero(cts) == expected
    finally:
        sk.threads = 2


def _traced_encrypt(sk, bits, seed: int) -> list:
    """The sequence of (line, C function) events of one encryption inside the library:
    the code path (other libraries' hooks, e.g. on the random module, are left out)."""
    import sys
    from pathlib import Path

    import smc_hmm

    root = str(Path(smc_hmm.__file__).parent)
    events = []

    def tracer(frame, event, arg):
        if not frame.f_code.co_filename.startswith(root):
            return tracer
        if event == "c_call":
            events.append(("call", getattr(arg, "__qualname__", str(arg))))
        elif event == "line":
            events.append(("line", frame.f_code.co_filename, frame.f_lineno))
        return tracer

    sk.encrypt([0], Rng.seeded(0))  # build the tables outside the trace
    sys.settrace(tracer)
    sys.setprofile(tracer)
    try:
        sk.encrypt(bits, Rng.seeded(seed))
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    return events


def test_encrypting_a_secret_bit_takes_the_same_operations_for_0_and_1(dgk):
    """No branch on a secret: all-zero and all-one inputs run the same lines and the same
    C calls (a timing attack on the comparison's bits finds no difference in the path)."""
    _, sk = dgk
    zeros = _traced_encrypt(sk, [0] * 16, seed=1)
    ones = _traced_encrypt(sk, [1] * 16, seed=1)
    assert zeros == ones and len(zeros) > 16


def test_the_table_encryption_stays_exactly_decryptable(dgk):
    pk, sk = dgk
    values = [0, 1, 2, pk.u - 1]
    cts = sk.encrypt(values, Rng.seeded(3))
    assert sk.is_zero(cts) == [True, False, False, False]
    assert sk.is_zero(pk.encrypt(values, Rng.seeded(4))) == [True, False, False, False]
