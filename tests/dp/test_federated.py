"""smc_hmm.dp.federated: federated DP Baum-Welch over the noisy secure sum."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.aggregate import secure_count_aggregator
from smc_hmm.dp import federated as fed
from smc_hmm.dp.accountant import PrivacyAccountant
from smc_hmm.dp.baum_welch import (
    count_sensitivities,
    discrete_expected_counts,
    dp_expected_counts,
    train_discrete,
)
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import AggregateInputError, PrivacyBudgetError, PrivacyParameterError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM
from smc_hmm.hmm.training import expected_counts

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")

TRUE = DiscreteHMM([0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]], [[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
SKELETON = DiscreteHMM([0.5, 0.5], [[0.8, 0.2], [0.2, 0.8]], [[0.4, 0.3, 0.3], [0.3, 0.3, 0.4]])
L = 12


def owners(k, per_owner=20, seed=0):
    rng = np.random.default_rng(seed)
    return [[TRUE.sample(L, rng)[0] for _ in range(per_owner)] for _ in range(k)]


def test_flatten_round_trip_discrete_and_gaussian():
    data = owners(1)[0]
    counts = discrete_expected_counts(SKELETON, data)
    vec = fed.flatten_counts(SKELETON, counts)
    back = fed.unflatten_counts(SKELETON, vec)
    assert np.allclose(back.transitions, counts.transitions)
    assert np.allclose(back.emissions, counts.emissions)
    g = GaussianHMM([1.0, 0.0], [[0.5, 0.5], [0.0, 1.0]], np.zeros((2, 2)), np.ones((2, 2)), "diag")
    obs = [np.random.default_rng(1).normal(size=(6, 2))]
    gc = expected_counts(g, obs)
    gv = fed.flatten_counts(g, gc)
    gb = fed.unflatten_counts(g, gv)
    assert np.allclose(gb.obs_sum, gc.obs_sum) and np.allclose(gb.obs_sq_sum, gc.obs_sq_sum)
    assert gv.size == 1 + 3 + 2 + 4 + 4  # structural zeros (pi_2, a_21) are not sent
    with pytest.raises(AggregateInputError):
        fed.unflatten_counts(g, gv[:-1])


def test_noise_scales_are_the_centralised_ones():
    scales = fed.noise_scales(SKELETON, 0.3, max_length=L)
    noisy = dp_expected_counts(SKELETON, owners(1)[0], 0.3, max_length=L)
    expected = np.concatenate(
        [
            np.full(n, noisy.scales[c])
            for c, n in (("initial", 2), ("transitions", 4), ("emissions", 6))
        ]
    )
    assert np.allclose(scales, expected)
    assert np.allclose(scales, sum(count_sensitivities(SKELETON, L).values()) / 0.3)


def test_sum_of_owner_counts_is_the_pooled_count():
    data = owners(3)
    pooled = fed.flatten_counts(SKELETON, discrete_expected_counts(SKELETON, sum(data, [])))
    total = sum(fed.owner_counts(SKELETON, d, max_length=L) for d in data)
    assert np.allclose(total, pooled)


def test_without_noise_federated_em_is_pooled_em():
    data = owners(3)
    res = fed.federated_dp_baum_welch(
        SKELETON, data, 1e12, max_length=L, n_iter=5, rng=DPRandom.insecure_seeded(0)
    )
    pooled = train_discrete(SKELETON, sum(data, []), n_iter=5, tol=0.0).model
    assert np.allclose(res.model.transmat, pooled.transmat, atol=1e-6)
    assert np.allclose(res.model.emissionprob, pooled.emissionprob, atol=1e-6)
    assert res.accountant.spent == pytest.approx(1e12) and len(res.models) == 5


def test_secure_aggregation_gives_the_same_model(keypair_512):
    data = owners(2, per_owner=10)
    aggregate = secure_count_aggregator(
        keypair_512, max_abs=fed.count_bound(SKELETON, 10, L), min_key_bits=512, timeout=30
    )
    secure = fed.federated_dp_baum_welch(
        SKELETON, data, 1e12, max_length=L, n_iter=2, aggregate=aggregate
    )
    plain = fed.federated_dp_baum_welch(SKELETON, data, 1e12, max_length=L, n_iter=2)
    assert np.allclose(secure.model.emissionprob, plain.model.emissionprob, atol=1e-5)
    assert len(aggregate.results) == 2  # one protocol run per E-step
    ledger = aggregate.results[0]
    assert ledger.outputs["trent"].shape == (12,)


def test_accountant_tracks_and_refuses():
    acc = PrivacyAccountant(1.0)
    res = fed.federated_dp_baum_welch(
        SKELETON,
        owners(2),
        0.6,
        max_length=L,
        n_iter=3,
        accountant=acc,
        rng=DPRandom.insecure_seeded(1),
    )
    assert acc.spent == pytest.approx(0.6) and len(acc.history) == 3
    assert res.epsilon == pytest.approx(0.6)
    with pytest.raises(PrivacyBudgetError):
        fed.federated_dp_baum_welch(SKELETON, owners(2), 0.6, max_length=L, accountant=acc)
    assert acc.spent == pytest.approx(0.6)  # refused up front, nothing spent


def test_typed_errors():
    with pytest.raises(AggregateInputError):
        fed.federated_dp_baum_welch(SKELETON, [], 1.0, max_length=L)
    with pytest.raises(AggregateInputError):
        fed.federated_dp_baum_welch(SKELETON, [owners(1)[0], []], 1.0, max_length=L)
    for eps in (0.0, float("nan"), -1.0):
        with pytest.raises(PrivacyParameterError):
            fed.federated_dp_baum_welch(SKELETON, owners(2), eps, max_length=L)
    with pytest.raises(PrivacyParameterError):
        fed.laplace_vector(np.array([1.0, np.nan]))


def test_gaussian_federated_runs_with_bounded_features():
    rng = np.random.default_rng(4)
    g = GaussianHMM([1.0, 0.0], [[0.5, 0.5], [0.0, 1.0]], np.zeros((2, 2)), np.ones((2, 2)), "diag")
    data = [[rng.normal(size=(8, 2)) + 3 for _ in range(5)] for _ in range(2)]
    res = fed.federated_dp_baum_welch(
        g, data, 1e9, max_length=8, n_iter=3, feature_bound=5.0, rng=DPRandom.insecure_seeded(2)
    )
    assert np.all(np.linalg.norm(res.model.means, axis=1) <= 5.0 + 1e-9)
    assert res.model.means.mean() > 1.5  # moved towards the data without noise
