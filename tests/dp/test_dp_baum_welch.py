"""DP Baum-Welch (paper 000): noise scales, post-processing, modes, Gaussian statistics."""

import math

import numpy as np
import pytest
from scipy import stats

from smc_hmm.dp.accountant import PrivacyAccountant
from smc_hmm.dp.baum_welch import (
    count_sensitivities,
    counts_to_model,
    discrete_expected_counts,
    dp_baum_welch,
    dp_em_step,
    dp_expected_counts,
    prepare_sequences,
    split_budget,
    train_discrete,
)
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import (
    InvalidInputError,
    PrivacyBudgetError,
    PrivacyParameterError,
    SensitivityBoundError,
)
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, expected_counts, reestimate

SEEDED = DPRandom.insecure_seeded

CASINO = DiscreteHMM(  # paper 000, Table 1 (loaded die: 1/2 on six, see docs/dp-layer.md)
    startprob=[0.5, 0.5],
    transmat=[[0.95, 0.05], [0.1, 0.9]],
    emissionprob=[[1 / 6] * 6, [0.1] * 5 + [0.5]],
)
SKELETON = DiscreteHMM(
    startprob=[0.5, 0.5],
    transmat=[[0.8, 0.2], [0.2, 0.8]],
    emissionprob=[[0.2, 0.16, 0.16, 0.16, 0.16, 0.16], [0.12, 0.12, 0.12, 0.12, 0.12, 0.4]],
)


def _sequences(model, count, length, seed):
    rng = np.random.default_rng(seed)
    return [model.sample(length, rng)[0] for _ in range(count)]


def test_fast_e_step_matches_the_reference_e_step():
    rng = np.random.default_rng(0)
    sequences = [CASINO.sample(int(rng.integers(1, 25)), rng)[0] for _ in range(60)]
    fast = discrete_expected_counts(SKELETON, sequences)
    reference = expected_counts(SKELETON, sequences)
    for name in ("initial", "transitions", "occupancy", "emissions"):
        np.testing.assert_allclose(getattr(fast, name), getattr(reference, name), rtol=1e-10)
    assert fast.log_likelihood == pytest.approx(reference.log_likelihood, rel=1e-12)


def test_fast_e_step_reports_impossible_sequences():
    model = DiscreteHMM([1.0, 0.0], [[0.5, 0.5], [0.5, 0.5]], [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(InvalidInputError, match="sequence 1"):
        discrete_expected_counts(model, [[0, 1], [1, 0]])


FORBIDS_SIX = DiscreteHMM(  # every state forbids symbol 5: a public structural zero
    startprob=[0.5, 0.5],
    transmat=[[0.8, 0.2], [0.2, 0.8]],
    emissionprob=[[0.2, 0.2, 0.2, 0.2, 0.2, 0.0], [0.1, 0.1, 0.2, 0.3, 0.3, 0.0]],
)


def test_dp_paths_drop_an_impossible_sequence_as_if_it_were_absent():
    """A sequence the public skeleton rules out (symbol 5 at position 3, so its forward
    variables are non-zero before it dies) adds exactly nothing."""
    rng = np.random.default_rng(5)
    allowed = [rng.integers(0, 5, size=8) for _ in range(12)]
    forbidden = np.array([0, 1, 2, 5, 1, 0, 3, 4])
    without = discrete_expected_counts(FORBIDS_SIX, allowed)
    with_it = discrete_expected_counts(FORBIDS_SIX, [*allowed, forbidden], skip_impossible=True)
    for name in ("initial", "transitions", "occupancy", "emissions", "log_likelihood"):
        np.testing.assert_allclose(getattr(with_it, name), getattr(without, name), rtol=1e-12)
    with pytest.raises(InvalidInputError, match="sequence 12"):  # the plain E-step still says
        discrete_expected_counts(FORBIDS_SIX, [*allowed, forbidden])
    for mode in ("every", "last"):  # the DP releases run, present or absent
        for data in (allowed, [*allowed, forbidden], [forbidden]):
            result = dp_baum_welch(
                FORBIDS_SIX, list(data), 1.0, max_length=8, mode=mode, n_iter=2, rng=SEEDED(2)
            )
            assert np.all(result.model.emissionprob[:, 5] == 0)
    plain = train_discrete(FORBIDS_SIX, [*allowed, forbidden], n_iter=3, skip_impossible=True)
    reference = train_discrete(FORBIDS_SIX, allowed, n_iter=3)
    np.testing.assert_allclose(plain.model.transmat, reference.model.transmat, rtol=1e-10)


def test_train_discrete_matches_reestimate_loop():
    sequences = _sequences(CASINO, 40, 20, 1)
    fast = train_discrete(SKELETON, sequences, n_iter=5, tol=0.0).model
    model = SKELETON
    for _ in range(5):
        model = reestimate(model, expected_counts(model, sequences))
    np.testing.assert_allclose(fast.transmat, model.transmat, rtol=1e-9)
    np.testing.assert_allclose(fast.emissionprob, model.emissionprob, rtol=1e-9)


def test_sensitivities_and_default_split():
    sens = count_sensitivities(SKELETON, 20)
    assert sens == {"initial": 1.0, "transitions": 19.0, "emissions": 20.0}
    doubled = count_sensitivities(SKELETON, 20, neighbouring="substitute")
    assert doubled == {name: 2 * value for name, value in sens.items()}
    epsilons = split_budget(1.0, sens)
    assert math.fsum(epsilons.values()) == pytest.approx(1.0)
    scales = {name: sens[name] / epsilons[name] for name in sens}
    assert all(scale == pytest.approx(40.0) for scale in scales.values())  # 2L / eps
    custom = split_budget(1.0, sens, {"initial": 1, "transitions": 1, "emissions": 2})
    assert custom == pytest.approx({"initial": 0.25, "transitions": 0.25, "emissions": 0.5})
    assert split_budget(1.0, count_sensitivities(SKELETON, 1))["transitions"] == 0.0


def test_gaussian_sensitivities():
    diag = GaussianHMM([0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]], np.zeros((2, 4)), np.ones((2, 4)))
    sens = count_sensitivities(diag, 10, feature_bound=2.0)
    assert sens["occupancy"] == 10 and sens["obs_sum"] == pytest.approx(10 * 2 * 2.0)
    assert sens["obs_sq_sum"] == pytest.approx(10 * 4.0)
    full = GaussianHMM(
        [0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]], np.zeros((2, 4)), np.stack([np.eye(4)] * 2), "full"
    )
    assert count_sensitivities(full, 10, feature_bound=2.0)["obs_sq_sum"] == pytest.approx(
        10 * 5 * 4.0 / 2
    )
    with pytest.raises(PrivacyParameterError):
        count_sensitivities(diag, 10)


@pytest.mark.parametrize("split", [None, {"initial": 1, "transitions": 1, "emissions": 1}])
def test_noise_on_the_counts_has_scale_sensitivity_over_epsilon(split):
    """The noise added to each count is Lap(Delta_c / eps_c); with the paper's equal
    weighting of A and E per count this is L / eps_c per count (KS test)."""
    n_symbols, length, epsilon = 40, 12, 1.5
    rng = np.random.default_rng(3)
    model = DiscreteHMM(
        [0.5, 0.5], [[0.7, 0.3], [0.4, 0.6]], rng.dirichlet(np.ones(n_symbols), size=2)
    )
    sequences = [rng.integers(0, n_symbols, size=length) for _ in range(4)]
    clean = discrete_expected_counts(model, sequences)
    parent = SEEDED(17)
    noise = {"initial": [], "transitions": [], "emissions": []}
    for _ in range(125):  # 125 x 80 = 10,000 emission-count noises
        noisy = dp_expected_counts(
            model, sequences, epsilon, max_length=length, rng=parent, split=split
        )
        for name in noise:
            noise[name].append((getattr(noisy.counts, name) - getattr(clean, name)).ravel())
    sens = count_sensitivities(model, length)
    epsilons = split_budget(epsilon, sens, split)
    assert noisy.epsilon == pytest.approx(epsilon)
    for name, values in noise.items():
        scale = sens[name] / epsilons[name]
        assert noisy.scales[name] == pytest.approx(scale)
        assert noisy.releases[name].scale == pytest.approx(scale)
        assert stats.kstest(np.concatenate(values), "laplace", args=(0, scale)).pvalue > 1e-3
    if split is not None:  # equal split: emissions get eps/3 and sensitivity L
        assert noisy.scales["emissions"] == pytest.approx(length / (epsilon / 3))


def test_structural_zeros_get_no_noise_and_stay_zero():
    model = DiscreteHMM(
        [1.0, 0.0], [[0.6, 0.4], [0.0, 1.0]], [[0.5, 0.5, 0.0], [0.0, 0.3, 0.7]]
    )  # left-to-right, with forbidden symbols
    sequences = _sequences(model, 30, 10, 5)
    noisy = dp_expected_counts(model, sequences, 0.5, max_length=10, rng=SEEDED(1))
    assert noisy.counts.initial[1] == 0 and noisy.counts.transitions[1, 0] == 0
    assert noisy.counts.emissions[0, 2] == 0 and noisy.counts.emissions[1, 0] == 0
    released = counts_to_model(model, noisy.counts)
    assert released.startprob[1] == 0 and released.transmat[1, 0] == 0
    assert released.emissionprob[0, 2] == 0 and released.emissionprob[1, 0] == 0


def test_post_processing_gives_stochastic_matrices_even_from_garbage():
    counts = discrete_expected_counts(SKELETON, _sequences(CASINO, 5, 5, 2))
    garbage = type(counts)(
        initial=np.array([-3.0, -1.0]),
        transitions=np.array([[-1.0, 5.0], [-2.0, -2.0]]),
        occupancy=counts.occupancy,
        log_likelihood=math.nan,
        emissions=np.array([[-1.0, 2.0, 0.0, 0.0, 0.0, 0.0], [1.0] * 6]),
    )
    model = counts_to_model(SKELETON, garbage, min_prob=1e-3)
    np.testing.assert_allclose(model.startprob, [0.5, 0.5])  # all-negative row: uniform
    np.testing.assert_allclose(model.transmat[1], [0.5, 0.5])
    assert model.transmat[0, 0] == pytest.approx(1e-3 / (1 + 1e-3))
    assert np.all(model.emissionprob >= 1e-3 / (1 + 6e-3))
    np.testing.assert_allclose(model.emissionprob.sum(axis=1), 1.0)


@pytest.mark.parametrize("mode", ["every", "last"])
def test_dp_baum_welch_outputs_valid_models_and_reports_its_budget(mode):
    sequences = _sequences(CASINO, 100, 10, 7)
    result = dp_baum_welch(
        SKELETON, sequences, 2.0, max_length=10, mode=mode, n_iter=4, rng=SEEDED(4)
    )
    model = result.model
    for matrix in (model.startprob[None, :], model.transmat, model.emissionprob):
        assert np.all(matrix > 0)
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0)
    assert result.epsilon == pytest.approx(2.0)
    assert result.accountant.spent == pytest.approx(2.0)
    expected_steps = 4 if mode == "every" else 1
    assert result.n_noisy_iterations == expected_steps
    assert len(result.releases) == 3 * expected_steps
    assert result.formal_guarantee is (mode == "every")
    assert all(r.insecure and r.sampler == "float" for r in result.releases)
    assert result.scales["emissions"] == pytest.approx(2 * 10 / (2.0 / expected_steps))
    labels = [s.label for s in result.accountant.history]
    assert labels[0] == f"iteration 1/{expected_steps}: initial"


def test_dp_baum_welch_is_reproducible_with_a_test_seed():
    sequences = _sequences(CASINO, 50, 10, 8)
    first = dp_baum_welch(SKELETON, sequences, 1.0, max_length=10, rng=SEEDED(12)).model
    second = dp_baum_welch(SKELETON, sequences, 1.0, max_length=10, rng=SEEDED(12)).model
    third = dp_baum_welch(SKELETON, sequences, 1.0, max_length=10, rng=SEEDED(13)).model
    np.testing.assert_array_equal(first.transmat, second.transmat)
    np.testing.assert_array_equal(first.emissionprob, second.emissionprob)
    assert not np.array_equal(first.emissionprob, third.emissionprob)


def test_large_epsilon_recovers_the_plain_model():
    sequences = _sequences(CASINO, 200, 20, 9)
    plain = train_discrete(SKELETON, sequences).model
    result = dp_em_step(plain, sequences, 1e5, max_length=20, rng=SEEDED(1))
    np.testing.assert_allclose(result.model.emissionprob, plain.emissionprob, atol=1e-3)
    assert result.mode == "step" and result.formal_guarantee


def test_long_sequences_raise_or_are_truncated():
    sequences = [np.zeros(12, dtype=int), np.zeros(5, dtype=int)]
    with pytest.raises(SensitivityBoundError, match="sequence 0 has length 12"):
        dp_expected_counts(SKELETON, sequences, 1.0, max_length=10, rng=SEEDED(1))
    prepared = prepare_sequences(SKELETON, sequences, 10, long_sequences="truncate")
    assert [p.shape[0] for p in prepared] == [10, 5]
    noisy = dp_expected_counts(
        SKELETON, sequences, 1.0, max_length=10, long_sequences="truncate", rng=SEEDED(1)
    )
    assert noisy.epsilon == pytest.approx(1.0)


def test_budget_is_refused_before_any_noise():
    accountant = PrivacyAccountant(1.0)
    accountant.spend(0.5, "earlier release")
    with pytest.raises(PrivacyBudgetError):
        dp_baum_welch(
            SKELETON, _sequences(CASINO, 5, 5, 1), 1.0, max_length=5, accountant=accountant
        )
    assert accountant.spent == pytest.approx(0.5)  # refused up front: nothing spent
    assert [s.label for s in accountant.history] == ["earlier release"]
    result = dp_baum_welch(
        SKELETON,
        _sequences(CASINO, 5, 5, 1),
        0.5,
        max_length=5,
        n_iter=2,
        accountant=accountant,
        rng=SEEDED(1),
    )
    assert result.epsilon == pytest.approx(0.5) and accountant.remaining == pytest.approx(0.0)
    with pytest.raises(PrivacyBudgetError):
        dp_expected_counts(
            SKELETON, _sequences(CASINO, 5, 5, 1), 0.1, max_length=5, accountant=accountant
        )
    assert len(accountant.history) == 1 + 2 * 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0},
        {"epsilon": math.nan},
        {"max_length": 0},
        {"max_length": 2.5},
        {"mode": "first"},
        {"n_iter": 0},
        {"neighbouring": "bounded"},
        {"long_sequences": "drop"},
        {"sampler": "snapping"},
        {"split": {"initial": 1, "transitions": 0, "emissions": 1}},
        {"split": {"unknown": 1}},
        {"feature_bound": 1.0},
        {"min_prob": 1.5},
    ],
)
def test_bad_parameters_are_refused(kwargs):
    arguments = {"epsilon": 1.0, "max_length": 10, "rng": SEEDED(1)}
    arguments.update(kwargs)
    epsilon = arguments.pop("epsilon")
    with pytest.raises(PrivacyParameterError):
        dp_baum_welch(SKELETON, _sequences(CASINO, 3, 5, 1), epsilon, **arguments)


# --- Gaussian ---------------------------------------------------------------------------


def _gaussian(covariance_type):
    means = np.array([[-1.0, 0.0, 0.5], [1.0, 0.5, -0.5]])
    covars = np.full((2, 3), 0.3) if covariance_type == "diag" else np.stack([0.3 * np.eye(3)] * 2)
    return GaussianHMM([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]], means, covars, covariance_type)


def test_gaussian_frames_are_clipped_to_the_bound():
    model = _gaussian("diag")
    frames = np.array([[3.0, 4.0, 0.0], [0.3, 0.4, 0.0]])
    (clipped,) = prepare_sequences(model, [frames], 5, feature_bound=1.0)
    np.testing.assert_allclose(clipped, [[0.6, 0.8, 0.0], [0.3, 0.4, 0.0]])


def test_gaussian_noise_scales_follow_the_declared_bound():
    model = _gaussian("diag")
    rng = np.random.default_rng(4)
    sequences = [model.sample(8, rng)[0] for _ in range(3)]
    bound, epsilon = 2.0, 1.0
    clipped = prepare_sequences(model, sequences, 8, feature_bound=bound)
    clean = expected_counts(model, clipped)
    parent = SEEDED(5)
    noise = []
    for _ in range(800):  # 800 x 6 = 4,800 obs_sum noises
        noisy = dp_expected_counts(
            model, sequences, epsilon, max_length=8, feature_bound=bound, rng=parent
        )
        noise.append((noisy.counts.obs_sum - clean.obs_sum).ravel())
    sens = count_sensitivities(model, 8, feature_bound=bound)
    scale = sum(sens.values()) / epsilon  # proportional split: one common scale
    assert noisy.scales["obs_sum"] == pytest.approx(scale)
    assert stats.kstest(np.concatenate(noise), "laplace", args=(0, scale)).pvalue > 1e-3


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_gaussian_dp_baum_welch_outputs_a_valid_bounded_model(covariance_type):
    model = _gaussian(covariance_type)
    rng = np.random.default_rng(6)
    sequences = [model.sample(10, rng)[0] for _ in range(12)]
    result = dp_baum_welch(
        model, sequences, 1.0, max_length=10, n_iter=2, feature_bound=3.0, rng=SEEDED(2)
    )
    released = result.model
    assert isinstance(released, GaussianHMM) and released.covariance_type == covariance_type
    assert np.all(np.linalg.norm(released.means, axis=1) <= 3.0 + 1e-12)
    variances = (
        released.covars if covariance_type == "diag" else np.linalg.eigvalsh(released.covars)
    )
    assert np.all(variances >= 1e-3 - 1e-12) and np.all(variances <= 9.0 + 1e-9)
    assert result.epsilon == pytest.approx(1.0) and len(result.releases) == 2 * 5
    strong = dp_em_step(model, sequences, 1e6, max_length=10, feature_bound=3.0, rng=SEEDED(3))
    plain = reestimate(model, expected_counts(model, sequences))
    np.testing.assert_allclose(strong.model.means, plain.means, atol=1e-3)


def test_opendp_sampler_is_the_default_and_reports_itself():
    sequences = _sequences(CASINO, 20, 10, 11)
    result = dp_baum_welch(SKELETON, sequences, 1.0, max_length=10, n_iter=2)
    assert all(r.sampler == "opendp" for r in result.releases)
    assert "opendp" in result.mechanism
    assert result.epsilon == pytest.approx(1.0, rel=1e-9)
    np.testing.assert_allclose(result.model.emissionprob.sum(axis=1), 1.0)
