import threading

import gmpy2
import pytest
from gmpy2 import mpz

from smc_hmm.crypto import (
    CipherArray,
    DJNRandomizer,
    FixedBaseTable,
    NthPowerRandomizer,
    PublicKey,
    RandomizerPool,
    Rng,
)
from smc_hmm.errors import InvalidInputError


def _is_nth_residue(x, sk):
    """x is an n-th residue mod n^2 iff it encrypts 0."""
    return sk.decrypt_ints([x]) == [0]


def test_fixed_base_table_matches_powmod():
    mod = mpz(1000003) * mpz(999983)
    table = FixedBaseTable(mpz(12345), mod, bits=100, window=5)
    for e in (0, 1, 31, 32, 2**99 + 12345, 2**100 - 1):
        assert table.pow(e) == gmpy2.powmod(12345, e, mod)
    with pytest.raises(InvalidInputError):
        table.pow(2**100)


@pytest.mark.parametrize("alpha_bits", [None, 160])
@pytest.mark.parametrize("with_primes", [False, True])
def test_djn_randomizers_are_nth_residues(keypair_512, alpha_bits, with_primes):
    pk, sk = keypair_512
    primes = (mpz(sk.p), mpz(sk.q)) if with_primes else None
    r = DJNRandomizer(pk.n_mpz, Rng.seeded(1), alpha_bits, window=4, primes=primes)
    values = r.draw(5)
    assert len(set(values)) == 5
    assert all(_is_nth_residue(v, sk) for v in values)


def test_djn_crt_and_plain_tables_agree(keypair_512):
    pk, sk = keypair_512
    plain = DJNRandomizer(pk.n_mpz, Rng.seeded(3), 160, window=4)
    crt = DJNRandomizer(pk.n_mpz, Rng.seeded(3), 160, window=4, primes=(sk.p, sk.q), h_s=plain.h_s)
    plain.rng, crt.rng = Rng.seeded(9), Rng.seeded(9)
    assert plain.draw(4) == crt.draw(4)


def test_djn_rejects_short_exponents(keypair_512):
    with pytest.raises(InvalidInputError):
        DJNRandomizer(keypair_512[0].n_mpz, Rng.seeded(1), alpha_bits=64)


@pytest.mark.parametrize("with_primes", [False, True])
def test_full_randomizer_equals_r_to_the_n(keypair_512, with_primes):
    pk, sk = keypair_512
    primes = (sk.p, sk.q) if with_primes else None
    got = NthPowerRandomizer(pk.n_mpz, Rng.seeded(5), primes).draw(3)
    rng = Rng.seeded(5)
    expect = [gmpy2.powmod(rng.unit_mod(pk.n_mpz), pk.n_mpz, pk.nsquare_mpz) for _ in range(3)]
    assert got == expect


def test_encryption_with_every_randomizer_decrypts(keypair_512):
    pk, sk = keypair_512
    key = PublicKey(pk.n)
    for use in (key.use_full_randomness, key.use_djn, lambda: key.use_djn(alpha_bits=128)):
        use()
        assert CipherArray.encrypt(key, [-3, 0, 9]).decrypt_ints(sk).tolist() == [-3, 0, 9]


def test_pool_offline_fill_then_online_draws(keypair_512):
    pk, sk = keypair_512
    source = DJNRandomizer(pk.n_mpz, Rng.seeded(2), 128, window=4)
    pool = RandomizerPool(source, capacity=8)
    pool.fill()
    assert len(pool) == 8
    got = pool.draw(10)
    assert len(got) == 10 and pool.hits == 8 and pool.misses == 2
    assert len(set(got)) == 10  # each value handed out once
    assert all(_is_nth_residue(v, sk) for v in got)


def test_pool_background_thread_refills_and_stops(keypair_512):
    pk, _ = keypair_512
    pool = RandomizerPool(
        DJNRandomizer(pk.n_mpz, Rng.seeded(2), 128, window=4), capacity=6, chunk=2
    )
    before = threading.active_count()
    with pool:
        for _ in range(200):
            if len(pool) >= 6:
                break
            threading.Event().wait(0.01)
        assert len(pool) == 6
        pool.draw(4)
    assert threading.active_count() == before


def test_pool_rejects_bad_capacity(keypair_512):
    with pytest.raises(InvalidInputError):
        RandomizerPool(DJNRandomizer(keypair_512[0].n_mpz, Rng.seeded(1)), capacity=0)


def test_seeded_rng_is_marked_insecure():
    assert Rng.seeded(1).insecure and not Rng.system().insecure
    with pytest.raises(InvalidInputError):
        Rng.seeded("x")


def test_a_pool_accepts_randomizers_computed_elsewhere(keypair_512):
    """offer(): values from another process fill the pool (up to its capacity) and are
    drawn before any is computed."""
    from smc_hmm.crypto import DJNRandomizer, RandomizerPool, Rng

    pk, sk = keypair_512
    elsewhere = DJNRandomizer(pk.n_mpz, Rng.seeded(3)).draw(5)
    pool = RandomizerPool(DJNRandomizer(pk.n_mpz, Rng.seeded(4)), capacity=4)
    pool.offer([int(v) for v in elsewhere])
    assert len(pool) == 4
    drawn = pool.draw(5)
    assert drawn[:4] == elsewhere[:4] and pool.misses == 1
    c = pk.encrypt_ints([7], randomizers=drawn[:1])
    assert sk.decrypt_ints(c) == [7]


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [1, 2])
def test_precompute_spreads_the_offline_phase_and_encryption_draws_from_it(keypair_512, lanes):
    """precompute() draws over the lanes into a pool; a batch the pool covers takes its
    randomizers from it, a larger one falls back to the key's own randomizer."""
    from smc_hmm.compute import Compute
    from smc_hmm.crypto.randomness import precompute

    pk, sk = keypair_512
    key = PublicKey(pk.n)
    source = DJNRandomizer(key.n_mpz, Rng.system(), 128, window=4)
    with Compute.processes(lanes) as compute:
        pool = precompute(source, 96, compute)
        assert len(pool) == 96
        assert all(_is_nth_residue(v, sk) for v in list(pool._values)[::19])
        assert len(set(pool._values)) == 96
        key.use_randomizer(pool)
        values = list(range(-35, 35))
        enc = CipherArray.encrypt_encoded(key, values, 0, compute=compute)
        assert enc.decrypt_ints(sk).tolist() == values and len(pool) == 26
        enc = CipherArray.encrypt_encoded(key, values, 0, compute=compute)  # 70 > 26 left
        assert enc.decrypt_ints(sk).tolist() == values
    assert len(pool) == 0  # the rest came from the source (in one lane or both)


def test_precompute_refuses_a_negative_count(keypair_512):
    from smc_hmm.crypto.randomness import precompute

    with pytest.raises(InvalidInputError):
        precompute(DJNRandomizer(keypair_512[0].n_mpz, Rng.seeded(1), 128), -1)


def test_a_peers_key_shares_one_randomizer_per_modulus(keypair_512):
    """A public key received anew (each session) reuses the process's randomizer for its
    modulus, and with it the fixed-base table; the key holder's CRT randomizer and a
    seeded (test) key keep their own."""
    pk, sk = keypair_512
    first, second = PublicKey(pk.n), PublicKey(pk.n)
    assert first.randomizer is second.randomizer
    assert first.randomizer is not pk.randomizer  # the owner's knows the primes
    assert PublicKey(pk.n, rng=Rng.seeded(5)).randomizer is not first.randomizer
    assert all(_is_nth_residue(v, sk) for v in second.randomizer.draw(3))


def test_kept_randomizers_are_bounded_and_rebuilt_when_dropped(keypair_512):
    """Worker lanes keep at most TABLES_KEPT randomizers (a long-lived server sees many
    keys); one dropped is rebuilt from its parameters and still draws n-th residues."""
    from smc_hmm.crypto import randomness

    pk, sk = keypair_512
    params = [DJNRandomizer(pk.n_mpz, Rng.system(), 128, window=4).params() for _ in range(6)]
    kept = randomness._FROM_PARAMS
    for p in params:
        randomness.draw_from_params(p, 1)
    assert len(kept) == randomness.TABLES_KEPT
    again = randomness.draw_from_params(params[0], 2)  # dropped, rebuilt
    assert len(kept) == randomness.TABLES_KEPT
    assert all(_is_nth_residue(mpz(v), sk) for v in again)
    assert randomness.randomizer_from_params(params[0]) is randomness.randomizer_from_params(
        params[0]
    )


def test_pow_many_cuts_the_digits_of_a_batch_as_pow_does_one():
    mod = mpz(1000003) * mpz(999983)
    for window in (3, 8, 10):
        table = FixedBaseTable(mpz(777), mod, bits=100, window=window)
        exps = [0, 1, 2**window - 1, 2**window, 2**99 + 5, 2**100 - 1]
        assert table.pow_many(exps) == [table.pow(e) for e in exps]
        assert table.pow_many(exps) == [gmpy2.powmod(777, e, mod) for e in exps]
    assert table.pow_many([]) == []
    with pytest.raises(InvalidInputError):
        table.pow_many([1, 2**100])


def test_table_window_widens_only_the_key_holders_tables_within_the_budget():
    from smc_hmm.crypto.randomness import TABLE_BUDGET_BYTES, table_window

    n2048, n4096 = mpz(1) << 2047, mpz(1) << 4095
    primes = (mpz(3), mpz(5))
    assert table_window(n2048, 1024, primes) == 10  # 2 x 103 rows x 1024 x 288 B < 64 MB
    assert table_window(n2048, 1024) == 8  # modulo n^2: a peer's key
    assert table_window(n4096, 2048, primes) == 8  # neither 10 nor 9 fits the budget
    assert TABLE_BUDGET_BYTES >= 2 * 103 * (256 + 32) << 10
