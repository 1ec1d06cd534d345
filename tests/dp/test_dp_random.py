"""The DP randomness source: CSPRNG by default, seeded streams only on request."""

import numpy as np
import pytest
from scipy import stats

from smc_hmm.dp.random import DPRandom, _bit_length, resolve_rng
from smc_hmm.errors import PrivacyParameterError


def test_system_stream_is_the_default_and_secure():
    rng = resolve_rng(None)
    assert not rng.insecure
    assert rng.description == "os.urandom CSPRNG"
    words = rng.words(1000)
    assert words.dtype == np.uint64 and words.shape == (1000,)
    assert np.unique(words).size == 1000


def test_seeded_stream_is_reproducible_and_marked_insecure():
    first = DPRandom.insecure_seeded(7)
    second = DPRandom.insecure_seeded(7)
    assert first.insecure and "INSECURE" in first.description
    np.testing.assert_array_equal(first.uniform(50), second.uniform(50))
    assert not np.array_equal(DPRandom.insecure_seeded(8).uniform(50), first.uniform(50))


def test_spawned_streams_are_distinct_and_deterministic():
    parent = DPRandom.insecure_seeded(3)
    children = [resolve_rng(parent) for _ in range(3)]
    draws = [child.uniform(20) for child in children]
    assert not np.array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[1], draws[2])
    again = DPRandom.insecure_seeded(3)
    np.testing.assert_array_equal(resolve_rng(again).uniform(20), draws[0])
    assert not resolve_rng(DPRandom.system()).insecure


def test_uniform_is_open_interval_and_uniform():
    values = DPRandom.insecure_seeded(1).uniform((100, 100))
    assert values.shape == (100, 100)
    assert values.min() > 0 and values.max() < 1
    assert stats.kstest(values.ravel(), "uniform").pvalue > 1e-3


def test_uniform_full_reaches_small_binades_with_the_right_mass():
    values = DPRandom.insecure_seeded(2).uniform_full(20000)
    assert values.min() > 0 and values.max() < 1
    assert stats.kstest(values, "uniform").pvalue > 1e-3
    # the binade [2^-(k+1), 2^-k) has probability 2^-(k+1)
    exponents = -np.floor(np.log2(values)).astype(int) - 1
    counts = np.bincount(exponents, minlength=4)[:4]
    expected = 20000 * 0.5 ** np.arange(1, 5)
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))
    # full resolution: values below 2^-53 carry mantissa bits a 53-bit grid would lose
    tiny = DPRandom.insecure_seeded(5).uniform_full(200) * 2.0**-40
    assert np.unique(tiny).size == 200


def test_signs_are_fair():
    signs = DPRandom.insecure_seeded(4).signs(20000)
    assert set(np.unique(signs)) == {-1.0, 1.0}
    assert abs(signs.mean()) < 0.03


def test_bit_length_is_exact():
    words = np.array([0, 1, 2, 3, 2**52 - 1, 2**60 - 1, 2**63, 2**64 - 1], dtype=np.uint64)
    expected = [int(w).bit_length() for w in words.tolist()]
    np.testing.assert_array_equal(_bit_length(words), expected)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "1"])
def test_bad_seed_is_refused(seed):
    with pytest.raises(PrivacyParameterError):
        DPRandom.insecure_seeded(seed)


def test_resolve_rng_refuses_other_generators():
    with pytest.raises(PrivacyParameterError):
        resolve_rng(np.random.default_rng(0))
    with pytest.raises(PrivacyParameterError):
        resolve_rng(42)


@pytest.mark.parametrize("make", [DPRandom.system, lambda: DPRandom.insecure_seeded(17)])
def test_exponential_and_normal_transforms_have_their_laws(make):
    """The K-norm mechanism's draws (smc_hmm.dp.knorm) come from these transforms."""
    rng = make()
    exponential = rng.exponential(20_000)
    assert np.all(exponential > 0) and np.all(np.isfinite(exponential))
    assert stats.kstest(exponential, "expon").pvalue > 1e-3
    normal = rng.standard_normal((100, 200))
    assert normal.shape == (100, 200)
    assert stats.kstest(normal.ravel(), "norm").pvalue > 1e-3


def test_categorical_follows_its_weights_and_never_picks_a_zero_weight():
    rng = DPRandom.insecure_seeded(5)
    p = np.array([0.0, 0.2, 0.0, 0.5, 0.3, 0.0])
    picks = rng.categorical(p, 50_000)
    counts = np.bincount(picks, minlength=p.size)
    assert np.all(counts[p == 0] == 0)
    assert stats.chisquare(counts[p > 0], p[p > 0] * picks.size).pvalue > 1e-3
    for bad in (np.array([]), np.array([0.5, -0.1]), np.zeros(3), np.array([[0.5, 0.5]])):
        with pytest.raises(PrivacyParameterError):
            rng.categorical(bad, 3)
