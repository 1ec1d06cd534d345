"""Laplace, geometric and truncated geometric mechanisms: scales, supports, validation."""

import math

import numpy as np
import pytest
from scipy import stats

from smc_hmm.dp.accountant import PrivacyAccountant
from smc_hmm.dp.mechanisms import (
    FloatSamplerWarning,
    GeometricMechanism,
    LaplaceMechanism,
    TruncatedGeometricMechanism,
    geometric,
    laplace,
)
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import (
    InvalidInputError,
    PrivacyBudgetError,
    PrivacyParameterError,
    SamplerUnavailableError,
)

SEEDED = DPRandom.insecure_seeded


def _discrete_laplace_pmf(k: np.ndarray, alpha: float) -> np.ndarray:
    return (1 - alpha) / (1 + alpha) * alpha ** np.abs(k)


# --- Laplace ----------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(0.5, 1.0), (2.0, 3.0), (1.0, 30.0)])
def test_laplace_noise_has_scale_sensitivity_over_epsilon(epsilon, sensitivity):
    mechanism = LaplaceMechanism(epsilon, sensitivity, rng=SEEDED(11))
    release = mechanism.release(np.full(20000, 5.0))
    noise = release.value - 5.0
    scale = sensitivity / epsilon
    assert release.scale == pytest.approx(scale)
    assert stats.kstest(noise, "laplace", args=(0, scale)).pvalue > 1e-3
    assert release.epsilon == epsilon and release.sampler == "float"
    assert release.mechanism == "laplace" and release.insecure


def test_laplace_scalar_and_vector_shapes():
    mechanism = LaplaceMechanism(1.0, 1.0, rng=SEEDED(1))
    scalar = mechanism.release(3.0)
    assert isinstance(scalar.value, float)
    matrix = mechanism.release(np.zeros((3, 4)))
    assert matrix.value.shape == (3, 4) and not matrix.value.flags.writeable
    assert np.unique(matrix.value).size == 12


def test_laplace_zero_sensitivity_adds_no_noise():
    release = laplace([1.0, 2.0], 1.0, 0.0, rng=SEEDED(1))
    np.testing.assert_array_equal(release.value, [1.0, 2.0])
    assert release.scale == 0.0


def test_laplace_default_is_opendp_and_float_on_the_csprng_is_warned():
    release = laplace(0.0, 1.0, 1.0)
    assert release.sampler == "opendp" and release.hardened and not release.insecure
    with pytest.warns(FloatSamplerWarning, match="not hardened"):
        explicit = laplace(0.0, 1.0, 1.0, sampler="float")
    assert explicit.randomness == "os.urandom CSPRNG" and not explicit.insecure
    assert not explicit.hardened


def test_laplace_is_reproducible_with_a_seed_and_streams_are_not_shared():
    first = laplace(np.zeros(5), 1.0, 1.0, rng=SEEDED(9)).value
    second = laplace(np.zeros(5), 1.0, 1.0, rng=SEEDED(9)).value
    np.testing.assert_array_equal(first, second)
    parent = SEEDED(9)
    one = LaplaceMechanism(1.0, 1.0, rng=parent).release(np.zeros(5)).value
    two = LaplaceMechanism(1.0, 1.0, rng=parent).release(np.zeros(5)).value
    assert not np.array_equal(one, two)


BAD_EPSILONS = [0, 0.0, -1.0, math.nan, math.inf, -math.inf, "1", None, True]
BAD_SENSITIVITIES = [-1.0, -1e-12, math.nan, math.inf, "1", None, False]


@pytest.mark.parametrize("epsilon", BAD_EPSILONS)
def test_bad_epsilon_is_refused_by_every_mechanism(epsilon):
    for build in (
        lambda: LaplaceMechanism(epsilon, 1.0),
        lambda: GeometricMechanism(epsilon, 1),
        lambda: TruncatedGeometricMechanism(epsilon, 0, 2),
    ):
        with pytest.raises(PrivacyParameterError):
            build()


@pytest.mark.parametrize("sensitivity", BAD_SENSITIVITIES)
def test_bad_sensitivity_is_refused_by_every_mechanism(sensitivity):
    for build in (
        lambda: LaplaceMechanism(1.0, sensitivity),
        lambda: GeometricMechanism(1.0, sensitivity),
        lambda: TruncatedGeometricMechanism(1.0, 0, 2, sensitivity),
    ):
        with pytest.raises(PrivacyParameterError):
            build()


def test_parameter_errors_are_also_input_errors():
    with pytest.raises(InvalidInputError):
        LaplaceMechanism(0.0, 1.0)
    with pytest.raises(ValueError):
        LaplaceMechanism(1.0, -1.0)


def test_bad_values_samplers_and_scales_are_refused():
    mechanism = LaplaceMechanism(1.0, 1.0, rng=SEEDED(1))
    for value in (math.nan, [1.0, math.inf], "x", [[1.0], [1.0, 2.0]]):
        with pytest.raises(PrivacyParameterError):
            mechanism.release(value)
    with pytest.raises(PrivacyParameterError):
        LaplaceMechanism(1.0, 1.0, sampler="gaussian")
    with pytest.raises(PrivacyParameterError):
        LaplaceMechanism(1.0, 1.0, bound=10.0)  # bound without snapping
    with pytest.raises(PrivacyParameterError):
        LaplaceMechanism(1e-300, 1.0)  # scale beyond MAX_SCALE
    with pytest.raises(PrivacyParameterError):
        LaplaceMechanism(1.0, 1.0, rng=np.random.default_rng(0))


# --- snapping ---------------------------------------------------------------------------


def test_snapping_output_is_clamped_on_the_power_of_two_grid():
    mechanism = LaplaceMechanism(0.5, 1.0, sampler="snapping", bound=1000.0, rng=SEEDED(2))
    release = mechanism.release(np.full(20000, 7.0))
    lam, grid = mechanism.snapping_parameters(20000)
    assert grid == 4.0 and 2.0 <= lam < 2.0 * (1 + 1e-6)
    values = release.value
    assert np.all(np.abs(values) <= 1000.0)
    np.testing.assert_array_equal(values / grid, np.round(values / grid))
    assert release.sampler == "snapping" and "Mironov" in release.details
    assert release.epsilon == 0.5
    # the snapped noise is Laplace(lambda) rounded to the grid: mean and variance agree
    noise = values - 7.0
    assert abs(noise.mean()) < 0.1
    assert np.var(noise) == pytest.approx(2 * lam**2 + grid**2 / 12, rel=0.05)


def test_snapping_clamps_inputs_and_scales_with_sensitivity():
    mechanism = LaplaceMechanism(1.0, 4.0, sampler="snapping", bound=400.0, rng=SEEDED(3))
    release = mechanism.release(np.full(5000, 10_000.0))
    assert np.all(release.value <= 400.0)
    lam, grid = mechanism.snapping_parameters(5000)
    np.testing.assert_array_equal(release.value / (4 * grid), np.round(release.value / (4 * grid)))


def test_snapping_needs_a_valid_bound():
    with pytest.raises(PrivacyParameterError):
        LaplaceMechanism(1.0, 1.0, sampler="snapping")
    for bound in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(PrivacyParameterError):
            LaplaceMechanism(1.0, 1.0, sampler="snapping", bound=bound)
    too_small = LaplaceMechanism(0.1, 1.0, sampler="snapping", bound=5.0)  # B < lambda
    with pytest.raises(PrivacyParameterError):
        too_small.release(1.0)


# --- geometric --------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(math.log(2), 1), (0.5, 2), (2.0, 1)])
def test_geometric_noise_matches_the_discrete_laplace(epsilon, sensitivity):
    mechanism = GeometricMechanism(epsilon, sensitivity, rng=SEEDED(21))
    release = mechanism.release(np.full(20000, 100, dtype=np.int64))
    noise = release.value - 100
    assert noise.dtype == np.int64
    alpha = math.exp(-epsilon / sensitivity)
    assert mechanism.alpha == pytest.approx(alpha)
    support = np.arange(-8, 9)
    observed = np.array([(noise == k).sum() for k in support] + [(np.abs(noise) > 8).sum()])
    pmf = _discrete_laplace_pmf(support, alpha)
    expected = 20000 * np.append(pmf, 1 - pmf.sum())
    keep = expected > 5
    chi2 = stats.chisquare(
        observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()
    )
    assert chi2.pvalue > 1e-3
    assert np.var(noise) == pytest.approx(2 * alpha / (1 - alpha) ** 2, rel=0.06)


def test_geometric_accepts_integers_only():
    mechanism = GeometricMechanism(1.0, rng=SEEDED(1))
    assert isinstance(mechanism.release(3).value, int)
    assert isinstance(geometric(3.0, 1.0, rng=SEEDED(1)).value, int)
    for value in (1.5, [1, math.nan], "a", True, 2.0**70):
        with pytest.raises(PrivacyParameterError):
            mechanism.release(value)


# --- truncated geometric ----------------------------------------------------------------


def test_truncated_half_geometric_matrix_is_paper_002_figure():
    mechanism = TruncatedGeometricMechanism(math.log(2), 0, 2)
    expected = np.array([[4, 1, 1], [2, 2, 2], [1, 1, 4]]) / 6
    np.testing.assert_allclose(mechanism.matrix(), expected, atol=1e-15)
    assert mechanism.alpha == pytest.approx(0.5)


def test_truncated_geometric_matrix_is_stochastic_and_single_point_range():
    matrix = TruncatedGeometricMechanism(0.3, -2, 5).matrix()
    assert matrix.shape == (8, 8)
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-14)
    np.testing.assert_array_equal(TruncatedGeometricMechanism(1.0, 3, 3).matrix(), [[1.0]])


def test_truncated_geometric_samples_follow_the_matrix():
    mechanism = TruncatedGeometricMechanism(math.log(2), 0, 2, rng=SEEDED(31))
    matrix = mechanism.matrix()
    for value in (0, 1, 2):
        outputs = mechanism.release(np.full(12000, value)).value
        assert set(np.unique(outputs)) <= {0, 1, 2}
        counts = np.bincount(outputs, minlength=3)
        assert stats.chisquare(counts, 12000 * matrix[value]).pvalue > 1e-3


def test_truncated_geometric_validates_range_and_inputs():
    with pytest.raises(PrivacyParameterError):
        TruncatedGeometricMechanism(1.0, 3, 2)
    for lower, upper in ((0.0, 2), (0, "2"), (True, 2), (0, 10**7)):
        with pytest.raises(PrivacyParameterError):
            TruncatedGeometricMechanism(1.0, lower, upper)
    mechanism = TruncatedGeometricMechanism(1.0, 0, 2, rng=SEEDED(1))
    for value in (-1, 3, [0, 5]):
        with pytest.raises(PrivacyParameterError):
            mechanism.release(value)
    release = mechanism.release([0, 1, 2])
    assert release.mechanism == "truncated-geometric" and "clamped to [0, 2]" in release.details


# --- accountant integration ---------------------------------------------------------------


def test_refused_release_draws_no_noise_and_spends_nothing():
    accountant = PrivacyAccountant(1.0)
    mechanism = LaplaceMechanism(0.6, 1.0, rng=SEEDED(5))
    twin = LaplaceMechanism(0.6, 1.0, rng=SEEDED(5))
    first = mechanism.release(0.0, accountant=accountant, label="first")
    assert first.value == twin.release(0.0).value
    with pytest.raises(PrivacyBudgetError):
        mechanism.release(0.0, accountant=accountant, label="second")
    assert accountant.spent == pytest.approx(0.6)
    assert [s.label for s in accountant.history] == ["first"]
    # the refused release consumed no randomness: the streams are still in step
    assert mechanism.release(0.0).value == twin.release(0.0).value


# --- OpenDP -----------------------------------------------------------------------------


def test_opendp_laplace_reports_its_sampler_and_privacy_map():
    accountant = PrivacyAccountant(2.0)
    mechanism = LaplaceMechanism(1.0, 2.0, sampler="opendp")
    release = mechanism.release(np.zeros(10000), accountant=accountant, label="opendp")
    assert release.sampler == "opendp" and "make_laplace" in release.details
    assert release.randomness == "OpenDP internal CSPRNG"
    assert release.epsilon == pytest.approx(1.0, rel=1e-9) and release.epsilon >= 1.0
    assert accountant.spent == release.epsilon
    # unseeded (OpenDP draws its own bits): 4 standard errors of the sample variance
    assert np.var(release.value) == pytest.approx(2 * 2.0**2, rel=0.1)
    scalar = mechanism.release(3.0)
    assert isinstance(scalar.value, float)


def test_opendp_geometric_reports_its_sampler():
    mechanism = GeometricMechanism(math.log(2), 1, sampler="opendp")
    release = mechanism.release(np.full(10000, 50))
    noise = release.value - 50
    assert release.sampler == "opendp" and "make_geometric" in release.details
    assert release.epsilon == pytest.approx(math.log(2), rel=1e-9)
    assert np.var(noise) == pytest.approx(2 * 0.5 / 0.25, rel=0.1)  # 2a/(1-a)^2 = 4
    truncated = TruncatedGeometricMechanism(math.log(2), 0, 2, sampler="opendp")
    assert set(np.unique(truncated.release(np.ones(500, dtype=int)).value)) <= {0, 1, 2}
    with pytest.raises(SamplerUnavailableError):
        GeometricMechanism(1.0, 1.5, sampler="opendp")


def test_missing_opendp_raises_a_typed_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("opendp"):
            raise ImportError("no opendp here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(SamplerUnavailableError, match="dependency of smc-hmm"):
        LaplaceMechanism(1.0, 1.0, sampler="opendp")
