"""Constant-time exponentiation with secret exponents (smc_hmm.crypto.consttime).

Every path -- the native IFMA kernel, OpenSSL's BN_mod_exp_mont_consttime through
ctypes, the gmpy2.powmod_sec fallback, and what runs on them (Paillier CRT decryption and
phe's h_p, DGK's zero test and decryption, shared-key partial decryptions, CRT r^n
randomizers) -- is checked against Python's plain ``pow`` on random inputs at 512, 1024
and 2048 bits; the fallback is forced once as a process without OpenSSL would see it; two
threads hammer one backend.
"""

from __future__ import annotations

import ctypes.util
import pickle
import random
import threading
import warnings

import gmpy2
import phe
import pytest
from gmpy2 import mpz

from smc_hmm.crypto import Rng, consttime, generate_keypair
from smc_hmm.crypto.dgk import generate_dgk_keypair
from smc_hmm.crypto.randomness import NthPowerRandomizer
from smc_hmm.crypto.threshold import combine, deal_shares
from smc_hmm.errors import CryptoError, InsecureKeyWarning, InvalidInputError

SIZES = (512, 1024, 2048)
try:
    OPENSSL = consttime.backend_by_name("openssl")  # the process's, as the keys use it
except CryptoError:
    OPENSSL = None


try:
    IFMA = consttime.backend_by_name("ifma")  # the native kernel, where it runs
except CryptoError:
    IFMA = None


def backends():
    out = [pytest.param(consttime.GMPY2_SEC, id="gmpy2")]
    out.append(
        pytest.param(
            IFMA,
            id="ifma",
            marks=pytest.mark.skipif(IFMA is None, reason="no IFMA kernel here"),
        )
    )
    out.append(
        pytest.param(
            OPENSSL,
            id="openssl",
            marks=pytest.mark.skipif(OPENSSL is None, reason="no OpenSSL symbols here"),
        )
    )
    return out


@pytest.fixture(scope="module")
def keys():
    """A key pair per size (seeded: reproducible; 2048 bits takes about half a second)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return {bits: generate_keypair(bits, insecure=True, rng=Rng.seeded(bits)) for bits in SIZES}


def _prime(bits: int, rnd: random.Random) -> mpz:
    return gmpy2.next_prime(mpz(rnd.getrandbits(bits)) | (mpz(1) << (bits - 1)))


def _reference_decrypt(c: int, p: int, q: int) -> int:
    """Textbook Paillier (g = n + 1) with plain pow: m = L(c^lambda mod n^2) mu mod n."""
    n = p * q
    lam = (p - 1) * (q - 1) // gmpy2.gcd(p - 1, q - 1)
    mu = pow(int((pow(n + 1, int(lam), n * n) - 1) // n), -1, n)
    m = (pow(c, int(lam), n * n) - 1) // n * mu % n
    return int(m - n) if m > n // 2 else int(m)


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("bits", SIZES)
def test_powmod_equals_pow_on_random_inputs(backend, bits):
    rnd = random.Random(bits)
    p = _prime(bits // 2, rnd)
    count = 3 if bits == 2048 else 12
    for modulus, exponent in ((p * p, p - 1), (p, mpz(rnd.getrandbits(160))), (p * p, mpz(0))):
        bases = [mpz(rnd.getrandbits(2 * bits)) for _ in range(count)]  # beyond the modulus
        bases += [mpz(0), mpz(1), modulus - 1, modulus, mpz(-5)]
        expect = [pow(int(b), int(exponent), int(modulus)) for b in bases]
        assert backend.powmod_list(bases, exponent, modulus) == expect
    e = mpz(rnd.getrandbits(bits))  # a random exponent as long as the modulus
    assert backend.powmod(mpz(7), e, p * p) == pow(7, int(e), int(p * p))


@pytest.mark.parametrize("backend", backends())
def test_bad_arguments_are_refused(backend):
    with pytest.raises(InvalidInputError, match="odd"):
        backend.powmod_list([3], 5, 1 << 64)
    with pytest.raises(InvalidInputError, match="non-negative"):
        backend.powmod_list([3], -1, 101)
    assert backend.powmod_list([], 5, 101) == []


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("bits", SIZES)
def test_crt_decryption_equals_textbook_decryption(keys, backend, bits, monkeypatch):
    pk, sk = keys[bits]
    monkeypatch.setattr(sk, "secret_powmod", backend)
    rnd = random.Random(bits + 1)
    count = 4 if bits == 2048 else 20
    values = [rnd.randrange(-(pk.max_plain), pk.max_plain) for _ in range(count)] + [0, -1, 1]
    cts = pk.encrypt_ints(values)
    assert sk.decrypt_ints(cts) == values
    assert sk.decrypt_ints(cts) == [_reference_decrypt(int(c), sk.p, sk.q) for c in cts]
    # the one-ciphertext path (two halves on two threads) and one thread
    assert sk.decrypt_ints(cts[:1]) == values[:1]
    monkeypatch.setattr(sk, "decrypt_threads", 1)
    assert sk.decrypt_ints(cts) == values


@pytest.mark.parametrize("bits", SIZES)
def test_phe_paths_use_the_constant_time_exponentiation(keys, bits):
    pk, sk = keys[bits]
    plain = phe.PaillierPrivateKey(phe.PaillierPublicKey(pk.n), sk.p, sk.q)
    assert (sk.hp, sk.hq) == (plain.hp, plain.hq)  # h_function, in constant time
    c = pk.raw_encrypt(12345)
    assert sk.raw_decrypt(c) == plain.raw_decrypt(c) == 12345
    assert sk.decrypt(pk.encrypt(-2.5)) == -2.5
    with pytest.raises(TypeError):
        sk.raw_decrypt("12")


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("bits", (512, 1024))
def test_dgk_zero_test_and_decryption_equal_pow(backend, bits):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        dpk, dsk = generate_dgk_keypair(bits, insecure=True, rng=Rng.seeded(bits))
    dsk.secret_powmod = backend
    rng = Rng.seeded(bits + 2)
    values = [0, 1, 2, dpk.u - 1, 0] + [rng.randbelow(dpk.u) for _ in range(70)]
    cts = dpk.encrypt(values, rng) + dsk.encrypt(values[:5], rng)
    expect = [pow(int(c), int(dsk.v_p), int(dsk.p)) == 1 for c in cts]
    assert dsk.is_zero(cts) == expect == [v == 0 for v in values + values[:5]]
    assert dsk.decrypt(cts[:20]) == values[:20]


def test_dgk_zero_test_at_2048_bits():
    dpk, dsk = generate_dgk_keypair(2048, rng=Rng.system())
    cts = dpk.encrypt([0, 5, 0], Rng.system())
    assert dsk.is_zero(cts) == [pow(int(c), int(dsk.v_p), int(dsk.p)) == 1 for c in cts]
    assert dsk.is_zero(cts) == [True, False, True]


@pytest.mark.parametrize("bits", (512, 1024))
def test_shared_key_partials_equal_pow(keys, bits):
    pk, sk = keys[bits]
    shares = deal_shares(sk, 3, rng=Rng.seeded(3))
    assert any(s.exponent < 0 for s in shares)  # the last share is negative
    values = [5, -7, 0, 123456789]
    cts = pk.encrypt_ints(values)
    n2 = int(pk.nsquare_mpz)
    partials = [s.partial(cts) for s in shares]
    for share, part in zip(shares, partials):
        assert part == [pow(int(c), share.exponent, n2) for c in cts]
    assert combine(pk, partials) == values


@pytest.mark.parametrize("bits", SIZES)
def test_crt_nth_power_randomizers_equal_pow(keys, bits):
    pk, sk = keys[bits]
    n = pk.n_mpz
    crt = NthPowerRandomizer(n, Rng.seeded(9), (sk._p, sk._q))
    plain = NthPowerRandomizer(n, Rng.seeded(9))  # the same r, without the primes
    assert crt.draw(3) == plain.draw(3)
    rs = NthPowerRandomizer(n, Rng.seeded(9), (sk._p, sk._q))
    r = Rng.seeded(9).unit_mod(n)
    assert rs.draw(1) == [pow(int(r), int(n), int(n * n))]


def test_powmod_jobs_splits_and_reassembles():
    rnd = random.Random(5)
    p, q = _prime(512, rnd), _prime(512, rnd)
    bases = [mpz(rnd.getrandbits(2048)) for _ in range(7)]
    jobs = [(bases, p - 1, p * p), (bases[:3], q - 1, q * q), ([], q, q * q)]
    expect = [[pow(int(b), int(e), int(m)) for b in bs] for bs, e, m in jobs]
    for threads in (1, 2, 3, 8):
        assert consttime.powmod_jobs(jobs, threads) == expect
        assert consttime.powmod_jobs(jobs, threads, consttime.GMPY2_SEC) == expect


def test_fallback_is_used_without_openssl(keys, monkeypatch):
    """A process whose Python has no usable libcrypto and no native kernel: every
    candidate fails, the default is gmpy2.powmod_sec, and decryption (via the default
    backend) still equals pow's."""
    monkeypatch.setenv("SMC_HMM_NATIVE", "off")
    monkeypatch.setattr(consttime, "libcrypto_candidates", lambda: ["/nonexistent/libcrypto.so"])
    monkeypatch.setattr(consttime, "_openssl", False)
    monkeypatch.setattr(consttime, "_ifma", False)
    monkeypatch.setattr(consttime, "_default", None)
    assert consttime.load_openssl() is None
    assert consttime.default_backend() is consttime.GMPY2_SEC
    with pytest.raises(CryptoError, match="not available"):
        consttime.backend_by_name("openssl")
    for bits in (512, 1024):
        pk, sk = keys[bits]
        assert sk.secret_powmod is None  # the default, i.e. the fallback now
        values = [3, -4, 0, pk.max_plain]
        cts = pk.encrypt_ints(values)
        assert sk.decrypt_ints(cts) == values
        assert sk.decrypt_ints(cts) == [_reference_decrypt(int(c), sk.p, sk.q) for c in cts]


def test_a_library_without_the_symbols_is_skipped():
    libc = ctypes.util.find_library("c")
    if libc is None:
        pytest.skip("no libc to try")
    assert consttime.load_openssl([libc]) is None


@pytest.mark.skipif(OPENSSL is None, reason="no OpenSSL symbols here")
def test_the_default_is_the_kernel_else_openssl_of_the_ssl_module():
    import ssl

    assert consttime.default_backend() is (IFMA or OPENSSL)
    assert OPENSSL.version == ssl.OPENSSL_VERSION_NUMBER
    assert "BN_mod_exp_mont_consttime" in OPENSSL.describe()


@pytest.mark.skipif(IFMA is None, reason="no IFMA kernel here")
def test_kernel_pairs_halves_and_hands_what_it_cannot_take_to_its_fallback():
    rnd = random.Random(21)
    p, q, small = _prime(1024, rnd), _prime(1024, rnd), _prime(100, rnd)  # small: fallback
    huge = mpz(1) << 5000  # above R^2: the fallback takes it
    jobs = [([mpz(rnd.getrandbits(4096)), huge, mpz(-3)], p - 1, p * p),
            ([mpz(rnd.getrandbits(4096))], q - 1, q * q),
            ([mpz(5), mpz(6), mpz(7)], small - 1, small * small)]  # fmt: skip
    expect = [[pow(int(b), int(e), int(m)) for b in bs] for bs, e, m in jobs]
    for threads in (1, 2, 4):
        assert consttime.powmod_jobs(jobs, threads, IFMA) == expect
    assert IFMA.powmod_list([huge, mpz(2)], q, p * p) == [
        pow(int(huge), int(q), int(p * p)),
        pow(2, int(q), int(p * p)),
    ]
    assert IFMA.fallback in (OPENSSL, consttime.GMPY2_SEC)


@pytest.mark.skipif(IFMA is None, reason="no IFMA kernel here")
def test_kernel_two_threads_many_moduli():
    rnd = random.Random(12)
    moduli = [_prime(768, rnd) ** 2 for _ in range(10)]  # more than the kernel keeps
    errors: list = []

    def hammer(seed: int) -> None:
        local = random.Random(seed)
        for i in range(60):
            m = moduli[(i * 7 + seed) % len(moduli)]
            e, bases = mpz(local.getrandbits(256)), [mpz(local.getrandbits(600)) for _ in range(3)]
            if IFMA.powmod_list(bases, e, m) != [pow(int(b), int(e), int(m)) for b in bases]:
                errors.append((seed, i))

    threads = [threading.Thread(target=hammer, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("backend", backends())
def test_backends_pickle_by_name(backend):
    assert pickle.loads(pickle.dumps(backend)) is backend
    with pytest.raises(InvalidInputError):
        consttime.backend_by_name("nope")


@pytest.mark.skipif(OPENSSL is None, reason="no OpenSSL symbols here")
def test_two_threads_many_calls_share_the_cached_contexts(monkeypatch):
    """Two threads, many calls each, over more moduli than the cache keeps (contexts
    evicted while the other thread may be using them) and one shared modulus."""
    monkeypatch.setattr(consttime, "MODULI_KEPT", 3)
    rnd = random.Random(11)
    primes = [_prime(256, rnd) for _ in range(6)]
    shared = primes[0] * primes[0]
    errors: list = []

    def hammer(seed: int) -> None:
        local = random.Random(seed)
        try:
            for i in range(300):
                p = primes[i % len(primes)] if i % 2 else primes[0]
                m = p * p if i % 2 else shared
                e = mpz(local.getrandbits(256))
                bases = [mpz(local.getrandbits(600)) for _ in range(3)]
                got = OPENSSL.powmod_list(bases, e, m)
                if got != [pow(int(b), int(e), int(m)) for b in bases]:
                    errors.append((seed, i))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(OPENSSL._moduli) <= 3


@pytest.mark.skipif(OPENSSL is None, reason="no OpenSSL symbols here")
def test_two_threads_decrypting_with_one_key(keys):
    pk, sk = keys[1024]
    values = [[random.Random(s).randrange(-(10**30), 10**30) for _ in range(20)] for s in (1, 2)]
    cts = [pk.encrypt_ints(v) for v in values]
    results: dict = {}

    def run(i: int) -> None:
        results[i] = all(sk.decrypt_ints(cts[i]) == values[i] for _ in range(15))

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: True, 1: True}
