"""The optional IFMA kernel (smc_hmm.crypto.native) against gmpy2, and its switch.

The kernel is built at install where a compiler is present and runs where the CPU has
AVX-512 IFMA; the tests that need it skip elsewhere, and the fallback tests run
everywhere."""

import random
from collections import Counter

import gmpy2
import pytest
from gmpy2 import mpz

from smc_hmm.cost.model import CostModel, PrimitiveRates
from smc_hmm.crypto import CipherArray, Meter, generate_keypair, native
from smc_hmm.crypto.multiexp import combine_parts, naive_multiexp, shared_base_parts
from smc_hmm.errors import InvalidInputError

KERNEL = native.kernel()
needs_kernel = pytest.mark.skipif(
    KERNEL is None, reason="the IFMA kernel is not built here or this CPU lacks AVX-512 IFMA"
)


def _reference(bases, rows, m):
    return [naive_multiexp(bases, row, m) for row in rows]


def _modulus(rng, bits):
    p = gmpy2.next_prime(mpz(rng.getrandbits(bits // 2)) | (mpz(1) << (bits // 2 - 1)))
    q = gmpy2.next_prime(mpz(rng.getrandbits(bits // 2)) | (mpz(1) << (bits // 2 - 1)))
    return p * p * q * q  # a Paillier-like n^2 of about 2 * bits


@needs_kernel
@pytest.mark.parametrize("key_bits", [512, 1024, 2048])
def test_kernel_equals_gmpy2_on_random_rows(key_bits):
    rng = random.Random(key_bits)
    m = _modulus(rng, key_bits)
    for terms, nrows, bits in [(1, 1, 1), (3, 4, 64), (9, 1, 209), (26, 5, 300), (2, 2, 900)]:
        bases = [mpz(rng.getrandbits(m.bit_length() + 8)) for _ in range(terms)]
        rows = [[rng.getrandbits(rng.randint(1, bits)) for _ in range(terms)] for _ in range(nrows)]
        rows[0][0] = 0
        assert KERNEL.multiexp_rows(bases, rows, m) == _reference(bases, rows, m)


@needs_kernel
def test_kernel_edge_values():
    rng = random.Random(7)
    m = _modulus(rng, 1024)
    bases = [mpz(0), mpz(1), m - 1, m, m + 3]  # reduced first: 0, 1, -1, 0, 3
    rows = [[0] * 5, [1, 1, 1, 1, 1], [5, 0, 3, 0, (1 << 100) + 1], [0, 2, 0, 0, 0]]
    assert KERNEL.multiexp_rows(bases, rows, m) == _reference([b % m for b in bases], rows, m)
    assert KERNEL.multiexp_rows([], [[]], m) == [1]
    assert KERNEL.multiexp_rows(bases, [], m) == []


@needs_kernel
def test_kernel_rejects_what_it_cannot_take():
    m = _modulus(random.Random(1), 512)
    with pytest.raises(ValueError, match="nonnegative"):
        KERNEL.multiexp_rows([mpz(3)], [[-1]], m)
    with pytest.raises(ValueError, match="one weight per base"):
        KERNEL.multiexp_rows([mpz(3), mpz(5)], [[1]], m)
    assert not KERNEL.fits(m + 1)  # even
    assert not KERNEL.fits(mpz(1) << 8000 | 1)  # larger than the build takes
    with pytest.raises(ValueError, match="odd moduli"):
        KERNEL.multiexp_rows([mpz(3)], [[1]], m + 1)


@needs_kernel
def test_montgomery_product_is_a_b_over_r():
    rng = random.Random(2)
    m = _modulus(rng, 2048)
    a, b = mpz(rng.getrandbits(4000)), mpz(rng.getrandbits(4000))
    r = mpz(1) << (416 * -(-(m.bit_length() + 2) // 416))
    assert KERNEL.montgomery_product(a, b, m) == a * b * gmpy2.invert(r, m) % m
    assert KERNEL.montgomery_product(a, b, m, 3) == a * b**3 * gmpy2.invert(r**3, m) % m


@pytest.mark.parametrize("use_native", [None, False])
def test_shared_base_parts_same_either_way(use_native):
    """Signed weights (the kernel inverts those bases), zero rows, one base."""
    rng = random.Random(11)
    m = _modulus(rng, 1024)
    for terms, nrows in [(1, 3), (5, 1), (9, 4), (26, 6)]:
        bases = [mpz(rng.getrandbits(2000)) % m for _ in range(terms)]
        rows = [
            [rng.choice([-1, 1, 0]) * rng.getrandbits(rng.randint(1, 150)) for _ in range(terms)]
            for _ in range(nrows)
        ]
        rows[-1] = [0] * terms
        parts = shared_base_parts(bases, rows, m, use_native=use_native)
        got = [combine_parts([p], m) for p in parts]
        want = [combine_parts([p], m) for p in shared_base_parts(bases, rows, m, use_native=False)]
        assert got == want == _reference(bases, rows, m)


def test_switch_turns_the_kernel_off(monkeypatch):
    monkeypatch.setenv(native.SWITCH, "off")
    assert native.kernel() is None
    rng = random.Random(4)
    m = _modulus(rng, 512)
    bases = [mpz(rng.getrandbits(900)) % m for _ in range(4)]
    rows = [[rng.getrandbits(60) for _ in range(4)]]
    assert [p for p, _ in shared_base_parts(bases, rows, m)] == _reference(bases, rows, m)


def test_missing_library_gives_no_kernel(tmp_path):
    assert native.load_kernel(str(tmp_path / "no-such-library.so")) is None


@needs_kernel
def test_ledger_meters_the_kernel_apart_and_the_model_prices_it():
    class Counts(Meter):
        def __init__(self):
            self.ops = Counter()

        def count(self, op, k=1):
            self.ops[op] += k

    pk, _ = generate_keypair(512, insecure=True)
    meter = Counts()
    x = CipherArray.encrypt(pk.with_meter(meter), [1, 2, 3])
    x.lincomb([[5, 6, 7], [1, 0, 2]])
    counts = meter.ops
    assert counts.get("native_mults", 0) > 0
    assert counts.get("multiexp_mults", 0) == 0
    assert counts.get("invert", 0) == 0
    x.lincomb([[5, -6, 7], [1, 0, -2]])  # two bases with a negative weight: two inversions
    assert counts["invert"] == 2
    rates = {"encrypt": 1e3, "decrypt": 1e3, "add": 1e5, "scalar_mul": 1e4,
             "multiexp_terms": 1e4, "rerandomize": 1e3}  # fmt: skip
    without = CostModel(PrimitiveRates(512, dict(rates))).compute_seconds({"native_mults": 1000})
    priced = CostModel(PrimitiveRates(512, {**rates, "native_mul": 4e5}))
    assert without == pytest.approx(1000 / 1e5)
    assert priced.compute_seconds({"native_mults": 1000}) == pytest.approx(1000 / 4e5)


@needs_kernel
@pytest.mark.parametrize("bits", [128, 512, 1024, 2048])
def test_constant_time_pair_equals_pow(bits):
    """The constant-time exponentiation at every size the kernel takes (the backend sends
    only the larger moduli to it), bases up to R^2 and the edge exponents."""
    rng = random.Random(bits)
    p = gmpy2.next_prime(mpz(rng.getrandbits(bits // 2)) | (mpz(1) << (bits // 2 - 1)))
    q = gmpy2.next_prime(mpz(rng.getrandbits(bits // 2)) | (mpz(1) << (bits // 2 - 1)))
    m1, m2 = p * p, q * q
    top = KERNEL.secret_bound(m1)
    cases = [(mpz(rng.getrandbits(2 * bits)), p - 1, mpz(rng.getrandbits(2 * bits)), q - 1),
             (top - 1, mpz(0), mpz(0), mpz(1)), (m1, mpz(3), m2 - 1, (q - 1) * 7),
             (mpz(1), mpz(rng.getrandbits(300)), mpz(2), mpz(rng.getrandbits(5)))]  # fmt: skip
    for b1, e1, b2, e2 in cases:
        got = KERNEL.secret_powmod_x2((b1, e1, m1), (b2, e2, m2))
        assert got == (pow(b1, e1, m1), pow(b2, e2, m2))


@needs_kernel
@pytest.mark.parametrize("bits", [512, 1024, 4096])
def test_comb_table_equals_the_gmpy2_table(bits, monkeypatch):
    """A fixed-base table on the kernel and on gmpy2 (switched off) give g^e alike."""
    from smc_hmm.crypto.randomness import FixedBaseTable

    rng = random.Random(bits)
    m = gmpy2.next_prime(mpz(rng.getrandbits(bits)) | (mpz(1) << (bits - 1)))
    g = mpz(rng.getrandbits(bits)) % m
    exps = [0, 1, (1 << 200) - 1] + [rng.getrandbits(rng.randint(1, 200)) for _ in range(20)]
    on = FixedBaseTable(g, m, bits=200, window=7)
    monkeypatch.setenv(native.SWITCH, "off")
    off = FixedBaseTable(g, m, bits=200, window=7)
    assert on.native is not None and off.native is None
    want = [gmpy2.powmod(g, e, m) for e in exps]
    assert on.pow_many(exps) == off.pow_many(exps) == want
    assert [on.pow(e) for e in exps[:4]] == want[:4]
    with pytest.raises(InvalidInputError):
        on.pow_many([1 << 200])


@pytest.mark.parametrize("use_native", [None, False])
def test_signed_parts_same_either_way_and_by_window_chunks(use_native):
    """Pippenger's buckets on the kernel (where it runs) and on gmpy2, whole and split
    into window chunks as the lanes split them."""
    from smc_hmm.crypto.multiexp import merge_window_parts, signed_parts, window_plan

    rng = random.Random(17)
    m = _modulus(rng, 1024)
    for terms, bits in [(40, 40), (70, 130), (33, 3)]:
        bases = [mpz(rng.getrandbits(2100)) % m for _ in range(terms)]
        exps = [rng.choice([-1, 0, 1]) * rng.getrandbits(bits) for _ in range(terms)]
        negative = _reference(bases, [[max(-e, 0) for e in exps]], m)[0]
        want = _reference(bases, [[max(e, 0) for e in exps]], m)[0] * gmpy2.invert(negative, m) % m
        whole = combine_parts([signed_parts(bases, exps, m, use_native=use_native)], m)
        assert whole == want
        c, windows = window_plan(exps)
        chunks = [
            (lo, signed_parts(bases, exps, m, window=c, lo=lo, hi=lo + 2, use_native=use_native))
            for lo in range(0, windows, 2)
        ]
        assert combine_parts([merge_window_parts(chunks, c, m)], m) == want
    assert signed_parts([mpz(5)], [0], m, use_native=use_native) == (1, 1)


@needs_kernel
@pytest.mark.parametrize("key_bits", [512, 1024, 2048])
def test_horner_packing_equals_the_gmpy2_path(key_bits, monkeypatch, keypair_1024):
    """Groups of ``per`` ciphertexts (the last one shorter), one ciphertext alone."""
    from smc_hmm.crypto.packing import horner_pack

    rng = random.Random(key_bits)
    m = _modulus(rng, key_bits)
    bases = [mpz(rng.getrandbits(2 * key_bits)) % m for _ in range(11)]
    for per, shift in [(4, 58), (11, 7), (1, 3), (3, 106)]:
        want = []
        for start in range(0, len(bases), per):
            acc = mpz(1)
            for i, b in enumerate(bases[start : start + per]):
                acc = acc * gmpy2.powmod(b, mpz(1) << (shift * i), m) % m
            want.append(acc)
        assert KERNEL.horner_pack(bases, per, shift, m) == want
    pk, sk = keypair_1024
    enc = CipherArray.encrypt_encoded(pk, list(range(1, 10)), 0, 9)
    on = horner_pack(enc, 20, 4)
    monkeypatch.setenv(native.SWITCH, "off")
    off = horner_pack(enc, 20, 4)
    assert [int(v) for v in on.decrypt_ints(sk)] == [int(v) for v in off.decrypt_ints(sk)]
    assert on.bound == off.bound
    assert [int(v) for v in on.decrypt_ints(sk)][0] == sum((i + 1) << (20 * i) for i in range(4))
