"""The K-norm mechanism: gauge, membership, exact uniform sampling, Gamma radius, density."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.spatial import ConvexHull, QhullError

from smc_hmm.dp.knorm import ConvexBody, KNormMechanism, check_epsilon
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import DPHMMParameterError, InvalidConvexBodyError, PrivacyError

N = 20_000
ALPHA = 1e-3  # fixed seeds: a failure at this level is a real discrepancy

#: the two ways to seed the K-norm noise: a caller's numpy Generator, or the DP layer's own
#: stream (the default's exact transforms of CSPRNG uniforms, here on a seeded stream)
SOURCES = {"numpy": np.random.default_rng, "dprandom": DPRandom.insecure_seeded}


def symmetric_points(rng, m, d):
    p = rng.normal(size=(m, d))
    return np.vstack([p, -p])


def flat_points(rng, m, basis):
    """Symmetric points spanning the rows of ``basis`` only (a flat body in R^d)."""
    c = rng.normal(size=(m, basis.shape[0]))
    p = c @ basis
    return np.vstack([p, -p])


PLANE = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, -1.0]])  # a 2-D plane in R^3
LINE = np.array([[2.0, 1.0]])  # a line in R^2


def bodies():
    rng = np.random.default_rng(11)
    return {
        "polytope-2d": ConvexBody.from_points(symmetric_points(rng, 12, 2)),
        "polytope-3d": ConvexBody.from_points(symmetric_points(rng, 15, 3)),
        "flat-plane-in-3d": ConvexBody.from_points(flat_points(rng, 10, PLANE)),
        "flat-segment-in-2d": ConvexBody.from_points(flat_points(rng, 5, LINE)),
        "l1-ball": ConvexBody.ball("l1", 3, 2.0),
        "l2-ball": ConvexBody.ball("l2", 3, 0.5),
        "linf-ball": ConvexBody.ball("linf", 2, 1.5),
    }


BODIES = bodies()


# -- geometry ------------------------------------------------------------------------


def test_gauge_of_balls_is_the_scaled_norm():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    assert np.allclose(ConvexBody.ball("l1", 3, 2.0).gauge(x), np.abs(x).sum(1) / 2)
    assert np.allclose(ConvexBody.ball("l2", 3, 0.5).gauge(x), np.linalg.norm(x, axis=1) / 0.5)
    assert np.allclose(ConvexBody.ball("linf", 3).gauge(x), np.abs(x).max(1))


def test_gauge_of_polytopes_matches_the_norm_they_represent():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(100, 2))
    square = ConvexBody.from_points([[1, 1], [1, -1], [-1, 1], [-1, -1]])
    diamond = ConvexBody.from_points([[2, 0], [-2, 0], [0, 2], [0, -2]])
    assert np.allclose(square.gauge(x), np.abs(x).max(1))
    assert np.allclose(diamond.gauge(x), np.abs(x).sum(1) / 2)
    assert square.volume == pytest.approx(4.0) and diamond.volume == pytest.approx(8.0)
    assert square.sampler.startswith("exact simplex decomposition")


def test_gauge_is_positively_homogeneous_and_subadditive():
    rng = np.random.default_rng(2)
    body = BODIES["polytope-3d"]
    x, y = rng.normal(size=(200, 3)), rng.normal(size=(200, 3))
    t = rng.uniform(0, 5, size=(200, 1))
    assert np.allclose(body.gauge(t * x), t[:, 0] * body.gauge(x))
    assert np.all(body.gauge(x + y) <= body.gauge(x) + body.gauge(y) + 1e-9)


def test_ball_volumes():
    assert ConvexBody.ball("l2", 2, 2.0).volume == pytest.approx(4 * math.pi)
    assert ConvexBody.ball("l2", 3).volume == pytest.approx(4 / 3 * math.pi)
    assert ConvexBody.ball("l1", 3, 2.0).volume == pytest.approx(2**3 * 2**3 / 6)
    assert ConvexBody.ball("linf", 2, 1.5).volume == pytest.approx(9.0)


def test_flat_body_where_qhull_fails_in_the_ambient_space():
    rng = np.random.default_rng(3)
    pts = flat_points(rng, 10, PLANE)
    with pytest.raises(QhullError):  # QH6154: initial simplex is flat
        ConvexHull(pts)
    body = ConvexBody.from_points(pts)
    assert body.dim == 3 and body.rank == 2
    inside = body.sample_uniform(rng, 500)
    assert np.all(body.contains(inside))
    off = inside + 1e-3 * np.cross(PLANE[0], PLANE[1])  # leave the plane
    assert np.all(np.isinf(body.gauge(off))) and not np.any(body.contains(off))
    # the k-volume equals the hull area computed in plane coordinates
    q, _ = np.linalg.qr(PLANE.T)
    assert body.volume == pytest.approx(ConvexHull(pts @ q).volume)


def test_segment_body_and_point_body():
    seg = ConvexBody.from_points([[2.0, 1.0], [-4.0, -2.0]])
    assert seg.rank == 1 and seg.volume == pytest.approx(math.sqrt(5) * 3)
    assert seg.gauge([[2.0, 1.0], [-2.0, -1.0], [1.0, 0.0]]).tolist()[:2] == pytest.approx(
        [1.0, 0.5]
    )
    assert np.isinf(seg.gauge([1.0, 0.0]))
    point = ConvexBody.from_points(np.zeros((3, 2)))
    assert point.rank == 0
    assert point.gauge([[0.0, 0.0], [1.0, 0.0]]).tolist() == [0.0, math.inf]


def test_contains_boundary_with_tolerance():
    square = ConvexBody.from_points([[1, 1], [1, -1], [-1, 1], [-1, -1]])
    edge = np.array([[1.0, 0.3], [1.0 + 1e-12, -0.2], [1.0 + 1e-6, 0.0]])
    assert square.contains(edge).tolist() == [True, True, False]
    assert square.contains(edge, tol=1e-5).tolist() == [True, True, True]


def test_facet_cones_partition_the_polytope():
    for name in ("polytope-2d", "polytope-3d", "flat-plane-in-3d", "flat-segment-in-2d"):
        body = BODIES[name]
        assert body.facet_cone_volumes().sum() == pytest.approx(body.volume), name


# -- the mechanism: radius, direction, density ----------------------------------------


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", list(BODIES))
def test_knorm_of_noise_is_gamma_k(name, source):
    body = BODIES[name]
    eps = 0.7
    mech = KNormMechanism(body, eps, SOURCES[source](100))
    g = body.gauge(mech.sample_noise(N))
    k = body.rank
    assert stats.kstest(g, stats.gamma(k, scale=1 / eps).cdf).pvalue > ALPHA
    # the shape is k, not k + 1: the test has the power to tell them apart
    assert stats.kstest(g, stats.gamma(k + 1, scale=1 / eps).cdf).pvalue < 1e-6


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", list(BODIES))
def test_uniform_sample_has_beta_k_1_gauge(name, source):
    """For U uniform in a k-dim K, P(||U||_K <= t) = t^k."""
    body = BODIES[name]
    u = body.sample_uniform(SOURCES[source](101), N)
    assert np.all(body.contains(u))
    g = body.gauge(u)
    assert stats.kstest(g**body.rank, "uniform").pvalue > ALPHA


def _chi2(counts, probs):
    exp = probs / probs.sum() * counts.sum()
    assert exp.min() >= 5
    return stats.chisquare(counts, exp).pvalue


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize(
    "name", ["polytope-2d", "polytope-3d", "flat-plane-in-3d", "flat-segment-in-2d"]
)
def test_direction_is_uniform_over_facet_cones(name, source):
    """The normalised noise (Z - f) / ||Z - f||_K falls in each facet cone with probability
    vol(cone) / vol(K): the sampler (Delaunay) and the partition (facets) are independent."""
    body = BODIES[name]
    noise = KNormMechanism(body, 2.0, SOURCES[source](102)).sample_noise(N)
    facet = body.facet_of(noise)
    vols = body.facet_cone_volumes()
    counts = np.bincount(facet, minlength=len(vols)).astype(float)
    # merge tiny cones so every expected count is >= 5
    order = np.argsort(vols)
    small = order[: np.searchsorted(np.cumsum(vols[order]) / vols.sum() * N, 50)]
    big = np.setdiff1d(np.arange(len(vols)), small)
    c = np.append(counts[big], counts[small].sum())
    p = np.append(vols[big], vols[small].sum())
    if small.size == 0:
        c, p = counts, vols
    assert _chi2(c, p) > ALPHA


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", ["l1-ball", "l2-ball", "linf-ball"])
def test_ball_direction_is_uniform(name, source):
    body = BODIES[name]
    noise = KNormMechanism(body, 1.0, SOURCES[source](103)).sample_noise(N)
    d = body.dim
    orthant = (noise > 0).astype(int) @ (1 << np.arange(d))
    if name == "linf-ball":  # facets of the cube: which coordinate is extreme, and its sign
        j = np.argmax(np.abs(noise), axis=1)
        cell = 2 * j + (noise[np.arange(N), j] > 0)
        assert _chi2(np.bincount(cell, minlength=2 * d).astype(float), np.ones(2 * d)) > ALPHA
    if name == "l2-ball":  # angular sectors in the first two coordinates (rotation invariance)
        ang = np.arctan2(noise[:, 1], noise[:, 0])
        sector = np.floor((ang + np.pi) / (2 * np.pi) * 12).astype(int) % 12
        assert _chi2(np.bincount(sector, minlength=12).astype(float), np.ones(12)) > ALPHA
    counts = np.bincount(orthant, minlength=2**d).astype(float)
    assert _chi2(counts, np.ones(2**d)) > ALPHA


def test_release_reports_privacy_and_sampler():
    body = BODIES["polytope-2d"]
    mech = KNormMechanism(body, 0.5, np.random.default_rng(4))
    f = np.array([3.0, -1.0])
    rel = mech.release(f)
    assert rel.epsilon == 0.5 and rel.rank == 2
    assert rel.sampler == mech.sampler and "simplex" in rel.sampler
    assert np.allclose(rel.value, f + rel.noise)
    assert rel.radius == pytest.approx(float(body.gauge(rel.noise)))
    mech.release(f)
    assert mech.spent == pytest.approx(1.0) and mech.releases == 2
    assert KNormMechanism(BODIES["l2-ball"], 1.0).sampler.startswith("L2 ball")
    assert KNormMechanism(BODIES["l1-ball"], 1.0).sampler.startswith("L1 ball")
    assert KNormMechanism(BODIES["linf-ball"], 1.0).sampler.startswith("Linf ball")


def test_default_randomness_is_fresh():
    body = BODIES["l2-ball"]
    a = KNormMechanism(body, 1.0).sample_noise(4)
    b = KNormMechanism(body, 1.0).sample_noise(4)
    assert not np.allclose(a, b)
    for make in SOURCES.values():
        seeded = [KNormMechanism(body, 1.0, make(9)).sample_noise(4) for _ in "ab"]
        assert np.array_equal(*seeded)


@pytest.mark.parametrize("name", list(BODIES))
def test_default_draws_come_from_the_os_csprng_and_no_numpy_generator(name, monkeypatch):
    """The hardened path for K-norm randomness: os.urandom through DPRandom, never a numpy
    bit generator (PCG64 seeded from secrets was the default before)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a numpy generator was built for DP noise")

    monkeypatch.setattr(np.random, "default_rng", refuse)
    monkeypatch.setattr(np.random, "PCG64", refuse)
    monkeypatch.setattr(np.random, "Generator", refuse)
    body = BODIES[name]
    release = KNormMechanism(body, 1.0).release(np.zeros(body.dim))
    assert release.randomness == "os.urandom CSPRNG" and not release.insecure
    assert np.all(np.isfinite(release.value)) and release.radius > 0


def test_knorm_states_its_floating_point_exception():
    """The stated exception of docs/dp-layer.md: secure randomness, but a floating-point
    output that no hardened sampler covers; every release says so, seeded ones too."""
    body = BODIES["polytope-2d"]
    default = KNormMechanism(body, 1.0).release(np.zeros(2))
    assert default.hardened is False and default.insecure is False
    for make in SOURCES.values():
        seeded = KNormMechanism(body, 1.0, make(1)).release(np.zeros(2))
        assert seeded.insecure and "INSECURE" in seeded.randomness and not seeded.hardened


def test_log_density_normalises_in_one_and_two_dimensions():
    eps = 1.3
    seg = KNormMechanism(ConvexBody.from_points([[0.5], [-2.0]]), eps)
    x = np.linspace(-40, 40, 400_001)[:, None]
    dens = np.exp(seg.log_density(np.zeros(1), x))
    assert np.trapezoid(dens, x[:, 0]) == pytest.approx(1.0, rel=1e-4)
    body = ConvexBody.from_points([[1, 0.5], [-1, -0.5], [0.2, 1], [-0.2, -1], [1, -1], [-1, 1]])
    mech = KNormMechanism(body, eps)
    g = np.linspace(-20, 20, 601)
    xx, yy = np.meshgrid(g, g)
    pts = np.stack([xx.ravel(), yy.ravel()], axis=1)
    dens = np.exp(mech.log_density(np.zeros(2), pts)).reshape(xx.shape)
    integral = np.trapezoid(np.trapezoid(dens, g, axis=1), g)
    assert integral == pytest.approx(1.0, rel=2e-3)


def test_density_ratio_is_bounded_by_eps_times_k_norm():
    rng = np.random.default_rng(5)
    body = BODIES["polytope-3d"]
    mech = KNormMechanism(body, 0.8, rng)
    z, f1, f2 = rng.normal(size=(3, 200, 3))
    ratio = np.array(
        [mech.log_density(zi, a) - mech.log_density(zi, b) for zi, a, b in zip(z, f1, f2)]
    )
    assert np.all(np.abs(ratio) <= 0.8 * body.gauge(f1 - f2) + 1e-9)


def test_flat_body_density_is_zero_off_its_span():
    body = BODIES["flat-segment-in-2d"]
    mech = KNormMechanism(body, 1.0, np.random.default_rng(6))
    z = mech.release(np.array([1.0, 1.0])).value
    ld = mech.log_density(z, np.array([[1.0, 1.0], [1.0, 1.5]]), normalised=False)
    assert np.isfinite(ld[0]) and ld[1] == -np.inf


# -- typed errors ----------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0, -1.0, math.nan, math.inf, "1", True, None])
def test_bad_epsilon(eps):
    with pytest.raises(DPHMMParameterError):
        KNormMechanism(BODIES["l2-ball"], eps)
    with pytest.raises(PrivacyError):
        check_epsilon(eps)


@pytest.mark.parametrize(
    "points",
    [
        [],
        np.zeros((0, 2)),
        [[1.0, math.nan], [-1.0, 0.0]],
        [[1.0, math.inf]],
        [[1.0, 0.0], [2.0, 1.0]],  # origin outside the hull
        [[1.0, 0.0], [2.0, 0.0]],  # flat, origin outside the segment
        [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],  # origin on a vertex, not interior
        "abc",
    ],
)
def test_bad_bodies(points):
    with pytest.raises(InvalidConvexBodyError):
        ConvexBody.from_points(points)


def test_bad_ball_and_other_arguments():
    with pytest.raises(InvalidConvexBodyError):
        ConvexBody.ball("l3", 2)
    with pytest.raises(InvalidConvexBodyError):
        ConvexBody.ball("l2", 0)
    with pytest.raises(DPHMMParameterError):
        ConvexBody.ball("l2", 2, radius=-1.0)
    with pytest.raises(InvalidConvexBodyError):  # zero-dimensional body: no noise possible
        KNormMechanism(ConvexBody.from_points([[0.0, 0.0]]), 1.0)
    with pytest.raises(InvalidConvexBodyError):
        KNormMechanism("not a body", 1.0)
    with pytest.raises(DPHMMParameterError):
        KNormMechanism(BODIES["l2-ball"], 1.0, rng=42)
    mech = KNormMechanism(BODIES["l2-ball"], 1.0, np.random.default_rng(0))
    with pytest.raises(DPHMMParameterError):
        mech.release([1.0, 2.0])  # wrong dimension
    with pytest.raises(DPHMMParameterError):
        mech.release([1.0, 2.0, math.nan])
    with pytest.raises(DPHMMParameterError):
        BODIES["l2-ball"].gauge([1.0, 2.0])
    with pytest.raises(DPHMMParameterError):
        ConvexBody.from_points([[1.0], [-1.0]], tol=-1)
    with pytest.raises(DPHMMParameterError):
        BODIES["l2-ball"].sample_uniform(np.random.default_rng(0), -1)


@pytest.mark.parametrize(("jitter", "rank"), [(1e-13, 1), (1e-4, 2)])
def test_rank_decision_agrees_with_membership(jitter, rank):
    """A near-flat cloud of many points: rank and membership tolerance are consistent."""
    rng = np.random.default_rng(12)
    t = rng.normal(size=(5000, 1))
    pts = t * np.array([[3.0, 1.0]]) + jitter * rng.normal(size=(5000, 2))
    pts = np.vstack([pts, -pts])
    body = ConvexBody.from_points(pts)
    assert body.rank == rank
    assert np.all(body.contains(pts))
