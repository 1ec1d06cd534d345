"""DP large-margin GMM classifiers (smc_hmm.dp.lmgmm, thesis 003 section 4.1.2, appendix A.2).

Derivatives against finite differences, the first-order solver against cvxpy, the
perturbation's law (Kolmogorov-Smirnov tests), the sensitivity and Jacobian bounds of the
privacy analysis on random adjacent data sets, the attack on the thesis's shared
perturbation, and the typed refusals of a release.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from smc_hmm.dp import lmgmm as lm
from smc_hmm.dp.accountant import PrivacyAccountant
from smc_hmm.dp.lmgmm import loss as lm_loss
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import (
    InvalidInputError,
    ModelError,
    PrivacyBudgetError,
    PrivacyError,
    PrivacyParameterError,
    SensitivityBoundError,
    ShapeMismatchError,
)
from smc_hmm.hmm.gaussian_forms import quadratic_form_matrix

#: significance of every Kolmogorov-Smirnov test below: a correct sampler fails one with
#: probability 1e-3 over the seed; the seeds are fixed, so the outcome is deterministic
KS_LEVEL = 1e-3


def _blobs(n_per_class, n_classes, dim, seed, spread=1.0, radius=4.0, means_seed=None):
    """Unit-variance Gaussian classes (means from ``means_seed``, default ``seed``) scaled
    into the unit ball by a fixed radius."""
    rng = np.random.default_rng(seed)
    means = np.random.default_rng(seed if means_seed is None else means_seed).normal(
        0.0, spread, (n_classes, dim)
    )
    y = np.repeat(np.arange(n_classes), n_per_class)
    x = means[y] + rng.normal(size=(len(y), dim))
    return lm.into_unit_ball(x, radius), y


def _random_psd(rng, shape, scale=1.0):
    a = rng.normal(size=shape) * scale
    return a @ a.swapaxes(-1, -2) / shape[-1]


def _data(n_per_class=8, n_classes=3, dim=2, n_components=1, seed=0):
    x, y = _blobs(n_per_class, n_classes, dim, seed)
    comps = np.arange(len(y)) % n_components if n_components > 1 else None
    return lm.training_data(x, y, n_components=n_components, components=comps, min_per_class=1)


# -- derivatives ------------------------------------------------------------------------------


def test_huber_hinge_is_the_moreau_envelope_with_matching_derivatives():
    h = 0.3
    u = np.linspace(-1, 1, 201)
    value, first, second = lm.huber_hinge(u, h)
    # the Moreau envelope of max(0, v) with parameter 2h, evaluated at v = u + h
    w = np.linspace(-2, 2, 8001)
    env = np.min(np.maximum(w, 0)[None] + (u[:, None] + h - w[None]) ** 2 / (4 * h), axis=1)
    assert np.allclose(value, env, atol=1e-6)
    eps = 1e-6
    fd = (lm.huber_hinge(u + eps, h)[0] - lm.huber_hinge(u - eps, h)[0]) / (2 * eps)
    assert np.allclose(first, fd, atol=1e-6)
    inside = np.abs(np.abs(u) - h) > 1e-3
    fd2 = (lm.huber_hinge(u + eps, h)[1] - lm.huber_hinge(u - eps, h)[1]) / (2 * eps)
    assert np.allclose(second[inside], fd2[inside], atol=1e-4)


@pytest.mark.parametrize("n_components", [1, 2])
def test_objective_gradient_matches_finite_differences(n_components):
    data = _data(n_components=n_components, seed=3)
    rng = np.random.default_rng(4)
    shape = (3, n_components, 3, 3)
    phi = _random_psd(rng, shape, 2.0)
    b = rng.normal(size=shape)
    b = b + b.swapaxes(2, 3)
    value, grad = lm.objective_and_gradient(phi, data, 0.05, 0.4, b)
    for _ in range(5):
        v = rng.normal(size=shape)
        v = v + v.swapaxes(2, 3)
        t = 1e-6
        fd = (
            lm.objective(phi + t * v, data, 0.05, 0.4, b)
            - lm.objective(phi - t * v, data, 0.05, 0.4, b)
        ) / (2 * t)
        assert fd == pytest.approx(np.vdot(grad, v), rel=1e-6, abs=1e-8)
    # the per-record gradients add up to the loss gradient
    per = lm.example_gradients(phi, data, 0.4).sum(axis=0) / data.n
    _, reg_grad = lm_loss._regulariser(phi)
    assert np.allclose(per + 0.05 * reg_grad + b / data.n, grad, atol=1e-12)


@pytest.mark.parametrize("n_components", [1, 3])
def test_example_hessians_match_finite_differences_of_the_gradient(n_components):
    data = _data(n_per_class=6, n_components=n_components, seed=5)
    rng = np.random.default_rng(6)
    shape = (3, n_components, 3, 3)
    phi = _random_psd(rng, shape, 1.5)
    hess = lm.example_hessians(phi, data, 0.5)
    z_outer = np.einsum("nd,ne->nde", data.z, data.z)
    t = 1e-6
    for _ in range(3):
        v = rng.normal(size=shape)
        v = v + v.swapaxes(2, 3)
        dgrad = (
            lm.example_gradients(phi + t * v, data, 0.5)
            - lm.example_gradients(phi - t * v, data, 0.5)
        ) / (2 * t)
        quad_fd = np.einsum("ncmde,cmde->n", dgrad, v)
        da = np.einsum("nde,cmde->ncm", z_outer, v).reshape(data.n, -1)
        quad = np.einsum("nk,nkl,nl->n", da, hess, da)
        assert np.allclose(quad, quad_fd, rtol=1e-5, atol=1e-6)


# -- the solver -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_components", "psd", "perturbed", "solver"),
    [
        (1, True, False, "CLARABEL"),
        (1, True, True, "CLARABEL"),
        (1, False, True, "CLARABEL"),
        (2, True, True, "CLARABEL"),
        (1, True, True, "SCS"),
    ],
)
def test_first_order_solver_agrees_with_cvxpy(n_components, psd, perturbed, solver):
    data = _data(n_per_class=10, n_classes=3, dim=2, n_components=n_components, seed=7)
    shape = (3, n_components, 3, 3)
    b = None
    if perturbed:
        g = lm.guarantee(data.n, 3, 2, 5.0, lam=0.05, h=0.5, n_components=n_components)
        b = lm.sample_perturbation(
            3, n_components, 2, 5.0, g.sensitivity, DPRandom.insecure_seeded(8)
        )
        assert b.shape == shape
    fista = lm.solve(data, lam=0.05, h=0.5, perturbation=b, psd=psd, tol=1e-9)
    with warnings.catch_warnings():  # the reference must end "optimal", not "inaccurate"
        warnings.simplefilter("error")
        ref = lm.solve(
            data, lam=0.05, h=0.5, perturbation=b, psd=psd, method="cvxpy", cvxpy_solver=solver
        )
    assert fista.converged
    assert abs(fista.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    if psd:
        assert np.linalg.eigvalsh(fista.phi).min() >= -1e-10


def test_the_minimiser_does_not_depend_on_the_start():
    data = _data(seed=9)
    a = lm.solve(data, lam=0.05, h=0.5, tol=1e-9)
    b = lm.solve(data, lam=0.05, h=0.5, tol=1e-9, phi0=np.tile(np.eye(3) * 5, (3, 1, 1, 1)))
    assert np.abs(a.phi - b.phi).max() < 1e-6


# -- the perturbation's law ------------------------------------------------------------------


def test_perturbation_norm_and_direction_follow_the_stated_laws():
    c, m, d, eps, delta = 2, 1, 2, 0.7, 3.0
    k = c * m * (d + 1) * (d + 2) // 2  # 12
    rng = DPRandom.insecure_seeded(2024)
    draws = np.stack([lm.sample_perturbation(c, m, d, eps, delta, rng) for _ in range(2000)])
    assert np.allclose(draws, draws.swapaxes(3, 4))
    norms = np.linalg.norm(draws.reshape(len(draws), -1), axis=1)
    assert stats.kstest(norms, stats.gamma(k, scale=delta / eps).cdf).pvalue > KS_LEVEL
    # uniform direction on the sphere of R^k (svec coordinates): each coordinate t of the
    # unit vector has (t + 1)/2 ~ Beta((k-1)/2, (k-1)/2); test a diagonal and an
    # off-diagonal coordinate, and that the coordinates are uncorrelated
    unit = draws / norms[:, None, None, None, None]
    beta = stats.beta((k - 1) / 2, (k - 1) / 2)
    diag = unit[:, 1, 0, 2, 2]
    off = unit[:, 0, 0, 0, 1] * math.sqrt(2)
    for t in (diag, off):
        assert stats.kstest((t + 1) / 2, beta.cdf).pvalue > KS_LEVEL
    assert abs(np.corrcoef(diag, off)[0, 1]) < 4 / math.sqrt(len(draws))
    # the thesis's b: one general (d+1) x (d+1) matrix, ||b|| ~ Gamma((d+1)^2, 2/eps)
    thesis = np.stack([lm.sample_thesis_perturbation(d, eps, rng) for _ in range(2000)])
    tn = np.linalg.norm(thesis.reshape(len(thesis), -1), axis=1)
    assert stats.kstest(tn, stats.gamma((d + 1) ** 2, scale=2 / eps).cdf).pvalue > KS_LEVEL


def test_seeded_perturbations_are_reproducible_and_streams_independent():
    a = lm.sample_perturbation(2, 1, 2, 1.0, 1.0, DPRandom.insecure_seeded(1))
    b = lm.sample_perturbation(2, 1, 2, 1.0, 1.0, DPRandom.insecure_seeded(1))
    assert np.array_equal(a, b)
    parent = DPRandom.insecure_seeded(1)
    assert not np.array_equal(
        lm.sample_perturbation(2, 1, 2, 1.0, 1.0, parent),
        lm.sample_perturbation(2, 1, 2, 1.0, 1.0, parent),
    )


# -- the privacy analysis ---------------------------------------------------------------------


def _adjacent_pairs(rng, n_classes, dim, count):
    """Random pairs of records (x, y), (x', y') with ||x||, ||x'|| in [0.2, 1]."""
    for _ in range(count):
        xs = rng.normal(size=(2, dim))
        xs *= rng.uniform(0.2, 1.0, (2, 1)) / np.linalg.norm(xs, axis=1, keepdims=True)
        yield xs, rng.integers(0, n_classes, 2)


@pytest.mark.parametrize("n_components", [1, 2])
def test_lemma_a21_sensitivity_on_random_adjacent_data_sets(n_components):
    """The gradients of the losses of two data sets that differ in one record differ by at
    most Delta = 4 sqrt(C (C - 1)); the thesis's bound 2 holds blockwise for one margin
    term only when z = [x; 1] is itself in the unit ball, and fails for the whole gradient."""
    rng = np.random.default_rng(11)
    c, d = 4, 3
    delta = lm.sensitivity(c)
    assert delta == pytest.approx(4 * math.sqrt(12))
    worst = 0.0
    for xs, ys in _adjacent_pairs(rng, c, d, 200):
        base, _ = _blobs(3, c, d, int(rng.integers(1 << 30)))
        base_y = np.repeat(np.arange(c), 3)
        phi = _random_psd(rng, (c, n_components, d + 1, d + 1), rng.uniform(0.1, 3.0))
        base_comps = rng.integers(0, n_components, len(base_y))
        grads = []
        for x_last, y_last in zip(xs, ys):
            x = np.vstack([base, x_last])
            y = np.append(base_y, y_last)
            # mixture labels are part of each record: the neighbours share all but the last
            comps = np.append(base_comps, rng.integers(0, n_components))
            data = lm.training_data(
                x, y, n_classes=c, n_components=n_components, components=comps, min_per_class=1
            )
            grads.append(lm.example_gradients(phi, data, 0.5).sum(0))
        gap = float(np.linalg.norm(grads[0] - grads[1]))
        worst = max(worst, gap)
        assert gap <= delta + 1e-9
    assert worst > 2.0  # the thesis's 2 is exceeded on these random neighbours
    # a witness near the bound: Phi = 0 puts every margin in the linear zone (H' = 1), the
    # same x on the sphere with two labels: ||z||^2 ||v_1 - v_2|| = 2 sqrt(2) C
    x = np.zeros((2, d))
    x[:, 0] = 1.0
    data = lm.training_data(x, [0, 1], n_classes=c, min_per_class=0)
    g = lm.example_gradients(np.zeros((c, 1, d + 1, d + 1)), data, 0.5)
    assert np.linalg.norm(g[0] - g[1]) == pytest.approx(2 * math.sqrt(2) * c)
    # the thesis's literal claim: one margin term, one block, ||z|| <= 1
    z = np.append(x[0], 1.0) / math.sqrt(2)
    for first in np.linspace(0, 1, 5):
        for pi in np.linspace(0, 1, 5):
            block = first * pi * np.outer(z, z)
            assert np.linalg.norm(block - (-block)) <= 2 + 1e-12


@pytest.mark.parametrize(("n_components", "h"), [(1, 0.5), (1, 0.1), (2, 0.5), (3, 0.2)])
def test_jacobian_term_bounds_log_det_of_random_record_hessians(n_components, h):
    """log det(I + H/(n lam)) <= k for the loss Hessian H of one record, H = ||z||^4 G in
    the distances (example_hessians); for M = 1 the bound is reached."""
    rng = np.random.default_rng(12)
    c, d, n, lam = 4, 2, 50, 0.02
    k, alpha = lm.jacobian_term(n, lam, h, c, n_components)
    worst = -1.0
    for _ in range(60):
        data = _data(
            n_per_class=4,
            n_classes=c,
            dim=d,
            n_components=n_components,
            seed=int(rng.integers(1 << 30)),
        )
        phi = _random_psd(rng, (c, n_components, d + 1, d + 1), rng.uniform(0.01, 0.5))
        hess = lm.example_hessians(phi, data, h)
        z4 = np.sum(data.z**2, axis=1) ** 2
        for i in range(data.n):
            eig = np.linalg.eigvalsh(hess[i]) * z4[i]
            assert eig.max() <= alpha + 1e-9
            worst = max(worst, float(np.sum(np.log1p(eig / (n * lam)))))
    assert worst <= k + 1e-9
    if n_components == 1:
        # ||x|| = 1 and every margin in the quadratic zone: Phi_own = 0 and competitors
        # with z^T Phi z = 1, so that u = 0
        x = np.zeros((1, d))
        x[0, 0] = 1.0
        data = lm.training_data(x, [0], n_classes=c, min_per_class=0)
        phi = np.zeros((c, 1, d + 1, d + 1))
        phi[1:, 0] = np.eye(d + 1) / 2.0  # z^T Phi z = ||z||^2 / 2 = 1
        eig = np.linalg.eigvalsh(lm.example_hessians(phi, data, h)[0]) * 4.0
        assert np.sum(np.log1p(eig / (n * lam))) == pytest.approx(k, rel=1e-12)


def test_guarantee_and_noise_epsilon():
    g = lm.guarantee(500, 5, 10, 1.0, lam=0.01, h=0.5)
    t = 4.0 / (2 * 0.5 * 5.0)
    assert g.jacobian_term == pytest.approx(math.log1p(5 * t) + 3 * math.log1p(t))
    assert g.epsilon_total == pytest.approx(1.0 + g.jacobian_term)
    assert g.alpha == pytest.approx(20.0)
    assert g.thesis_jacobian_term == pytest.approx(math.log(1 + 2 * 20 / 5 + (20 / 5) ** 2))
    assert g.dimension == 5 * 66 and g.noise_scale == pytest.approx(g.sensitivity)
    eps = lm.noise_epsilon(10.0, 500, 5, lam=0.01, h=0.5)
    assert lm.guarantee(500, 5, 10, eps, lam=0.01, h=0.5).epsilon_total == pytest.approx(10.0)
    with pytest.raises(PrivacyParameterError, match="Jacobian term"):
        lm.noise_epsilon(3.0, 500, 5, lam=0.01, h=0.5)
    for bad in (0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(PrivacyParameterError):
            lm.guarantee(500, 5, 10, bad, lam=0.01, h=0.5)


# -- the attack on the thesis's shared perturbation -------------------------------------------


def _stationarity_spread(phi, data, lam, h):
    """How far the per-class gradients of J_0 are from being equal (unconstrained case)."""
    _, grad = lm.objective_and_gradient(phi, data, lam, h)
    return float(np.abs(grad - grad.mean(axis=0, keepdims=True)).max())


def test_shared_perturbation_reveals_the_data_set_and_ours_does_not():
    """With one b shared by all classes the release satisfies grad_c J_0 = -b/n for every
    class: a data-dependent equation that the neighbouring data set violates, so an
    observer tells D from D' with certainty.  Per-class perturbations leave no such trace."""
    x, y = _blobs(10, 3, 2, seed=13)
    y_prime = y.copy()
    y_prime[0] = 1  # the neighbour: record 0 with another label
    d, d_prime = lm.training_data(x, y), lm.training_data(x, y_prime)
    for seed in range(3):
        rel = lm.train_dp(
            x,
            y,
            2.0,
            lam=0.05,
            psd=False,
            perturbation="thesis",
            tol=1e-10,
            rng=DPRandom.insecure_seeded(seed),
        )
        assert rel.formal_guarantee is False and rel.guarantee is None
        phi = rel.model.phi
        assert _stationarity_spread(phi, d, 0.05, 0.5) < 1e-8
        assert _stationarity_spread(phi, d_prime, 0.05, 0.5) > 1e-4
        ours = lm.train_dp(
            x, y, 2.0, lam=0.05, psd=False, tol=1e-10, rng=DPRandom.insecure_seeded(seed)
        ).model.phi
        # the perturbations that explain our release under D and under D' differ by one
        # record's gradient difference, at most Delta: both are plausible
        gap = (
            lm.objective_and_gradient(ours, d, 0.05, 0.5)[1]
            - lm.objective_and_gradient(ours, d_prime, 0.05, 0.5)[1]
        ) * d.n
        assert np.linalg.norm(gap) <= lm.sensitivity(3)
        assert _stationarity_spread(ours, d, 0.05, 0.5) > 1e-4


# -- training, release and refusals -----------------------------------------------------------


def test_training_beats_chance_and_noise_shrinks_with_eps():
    x, y = _blobs(40, 3, 2, seed=14, spread=2.0)
    xt, yt = _blobs(40, 3, 2, seed=15, spread=2.0, means_seed=14)
    model, sol = lm.train(x, y, lam=0.01)
    assert sol.converged and model.error_rate(xt, yt) < 0.3
    dists = []
    for eps in (1.0, 100.0, 1e4):
        rel = lm.train_dp(x, y, eps, lam=0.01, rng=DPRandom.insecure_seeded(3))
        assert rel.insecure and rel.formal_guarantee
        dists.append(np.linalg.norm(rel.model.phi - model.phi))
    assert dists[0] > dists[1] > dists[2]


def test_accountant_is_charged_eps_total_and_budget_refuses_before_sampling():
    x, y = _blobs(5, 2, 2, seed=16)
    g = lm.guarantee(10, 2, 2, 1.0, lam=0.1, h=0.5)
    acc = PrivacyAccountant(g.epsilon_total * 1.5)
    rel = lm.train_dp(x, y, 1.0, lam=0.1, accountant=acc, rng=DPRandom.insecure_seeded(0))
    assert acc.spent == pytest.approx(g.epsilon_total)
    assert rel.guarantee == g
    with pytest.raises(PrivacyBudgetError):  # a second one does not fit
        lm.train_dp(x, y, 1.0, lam=0.1, accountant=acc, rng=DPRandom.insecure_seeded(0))
    assert acc.spent == pytest.approx(g.epsilon_total)
    with pytest.raises(PrivacyBudgetError, match="eps'"):
        lm.train_dp(x, y, 1.0, lam=0.1, budget=g.epsilon_total * 0.99)
    with pytest.raises(PrivacyError, match="no privacy guarantee"):
        lm.train_dp(x, y, 1.0, lam=0.1, budget=100.0, perturbation="thesis")


def test_typed_refusals():
    x, y = _blobs(5, 2, 2, seed=17)
    with pytest.raises(SensitivityBoundError, match="unit L2 ball"):
        lm.train_dp(x * 3, y, 1.0)
    with pytest.raises(ShapeMismatchError):
        lm.train_dp(x[:, 0], y, 1.0)
    with pytest.raises(ShapeMismatchError):
        lm.train_dp(x, y[:-1], 1.0)
    for bad_eps in (0.0, -2.0, math.nan):
        with pytest.raises(PrivacyParameterError):
            lm.train_dp(x, y, bad_eps)
    with pytest.raises(InvalidInputError, match="at least 2 training points"):
        lm.train_dp(x[:6], y[:6], 1.0)  # class 1 has one point
    with pytest.raises(InvalidInputError, match="integers"):
        lm.train_dp(x, y + 0.5, 1.0)
    with pytest.raises(InvalidInputError, match="mixture label"):
        lm.train_dp(x, y, 1.0, n_components=2)
    with pytest.raises(InvalidInputError):
        lm.train_dp(np.where(np.isfinite(x), np.nan, x), y, 1.0)


def test_into_unit_ball_and_assign_components():
    x = np.array([[3.0, 4.0], [0.3, 0.4], [1.0, 1.0]])
    out = lm.into_unit_ball(x, 2.0, centre=[1.0, 1.0])
    assert np.allclose(out[0], np.array([2.0, 3.0]) / math.sqrt(13))  # (2, 3)/2, clipped
    assert np.allclose(out[1], [-0.35, -0.3])  # inside: unchanged
    assert np.allclose(out[2], 0.0)
    centres = np.array([[[0.0, 0.0], [1.0, 1.0]], [[5.0, 5.0], [-5.0, -5.0]]])
    assert lm.assign_components(x, [0, 1, 0], centres).tolist() == [1, 0, 1]


def test_generative_classifier_is_gaussian_maximum_likelihood():
    x, y = _blobs(30, 3, 2, seed=18)
    model = lm.generative_classifier(x, y, reg=0.0)
    pts = x[y == 1]
    w = quadratic_form_matrix(pts.mean(0), np.cov(pts, rowvar=False, bias=True))
    z = np.hstack([x, np.ones((len(x), 1))])
    assert np.allclose(model.distances(x)[:, 1], -np.einsum("nd,de,ne->n", z, w, z))
    logpdf = np.stack(
        [
            stats.multivariate_normal(
                x[y == c].mean(0), np.cov(x[y == c], rowvar=False, bias=True)
            ).logpdf(x)
            for c in range(3)
        ],
        axis=1,
    )
    assert np.array_equal(model.predict(x), np.argmax(logpdf, axis=1))


def test_release_file_round_trip_and_malformed_files(tmp_path):
    x, y = _blobs(5, 2, 2, seed=19)
    rel = lm.train_dp(x, y, 3.0, lam=0.1, rng=DPRandom.insecure_seeded(0))
    path = tmp_path / "model.npz"
    lm.save_release(path, rel)
    model, meta = lm.load_release(path)
    assert np.array_equal(model.phi, rel.model.phi)
    assert meta["epsilon"] == 3.0 and meta["epsilon_total"] == rel.guarantee.epsilon_total
    assert meta["guarantee"]["n"] == 10 and meta["guarantee"]["lam"] == 0.1
    assert "INSECURE" in meta["randomness"]
    bad = tmp_path / "bad.npz"
    np.savez(bad, phi=model.phi)
    with pytest.raises(ModelError):
        lm.load_release(bad)
    np.savez(bad, phi=np.array([object()], dtype=object), metadata=np.array("{}"))
    with pytest.raises(ModelError):
        lm.load_release(bad)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelError):
        lm.load_release(tmp_path / "junk.npz")


# -- the release command and the benchmarks ---------------------------------------------------


def _release(argv, tmp_path):
    import argparse
    import io

    from rich.console import Console

    from smc_hmm.cli.release import lmgmm as command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(argv)
    out = io.StringIO()
    assert command.run(args, Console(file=out, width=200)) == 0
    return out.getvalue()


def test_release_command_writes_the_model_and_its_guarantee(tmp_path):
    import json

    rng = np.random.default_rng(20)
    y = np.arange(45) % 3
    x = rng.normal(size=(45, 3)) + 2.0 * np.eye(3)[y]
    np.savez(tmp_path / "d.npz", x=x, y=y)
    (tmp_path / "c.json").write_text(json.dumps([0.5, 0.5, 0.5]))
    out = tmp_path / "m.npz"
    argv = [
        "--data",
        str(tmp_path / "d.npz"),
        "--eps-total",
        "9",
        "--radius",
        "5",
        "--centre",
        str(tmp_path / "c.json"),
        "--classes",
        "3",
        "--seed",
        "4",
        "--out",
        str(out),
        "--json",
        str(tmp_path / "s.json"),
    ]
    printed = _release(argv, tmp_path)
    assert "INSECURE" in printed
    model, meta = lm.load_release(out)
    summary = json.loads((tmp_path / "s.json").read_text())
    assert meta["epsilon_total"] == pytest.approx(9.0) == summary["epsilon_total"]
    g = meta["guarantee"]
    assert (g["n"], g["n_classes"], g["dim"], g["lam"], g["h"]) == (45, 3, 3, 0.01, 0.5)
    assert meta["epsilon"] == pytest.approx(9.0 - g["jacobian_term"])
    assert meta["scaling"] == {"radius": 5.0, "centre": [0.5, 0.5, 0.5]}
    assert meta["classes_from_data"] is False and meta["records"] == lm.RECORD_RULE
    assert set(meta["solver"]) == {"method", "tol", "converged"}  # nothing data-dependent
    assert model.phi.shape == (3, 1, 4, 4) and np.linalg.eigvalsh(model.phi).min() > -1e-9
    # the same data as JSON, a mixture with public centres, over the budget
    (tmp_path / "d.json").write_text(json.dumps({"x": (x / 10).tolist(), "y": y.tolist()}))
    np.save(tmp_path / "centres.npy", np.zeros((3, 2, 3)) + np.array([[[0.1], [-0.1]]]))
    from_json = ["--data", str(tmp_path / "d.json"), "--eps", "50", "--classes", "3"]
    centres = ["--components", "2", "--centres", str(tmp_path / "centres.npy")]
    _release([*from_json, *centres, "--out", str(out)], tmp_path)
    assert lm.load_release(out)[0].n_components == 2
    with pytest.raises(PrivacyBudgetError):
        _release([*from_json, "--dimension", "3", "--budget", "50", "--out", str(out)], tmp_path)


GOOD = {"x": [[0.1, 0.2]] * 4, "y": [0, 1, 0, 1]}
DECLARED = ["--classes", "2", "--dimension", "2"]


@pytest.mark.parametrize(
    ("content", "extra", "error"),
    [
        ({**GOOD, "z": [1]}, DECLARED, "ConfigError"),
        ({"x": GOOD["x"], "y": [0, 1, 0]}, DECLARED, "ShapeMismatchError"),
        ({"x": 5, "y": []}, DECLARED, "ConfigError"),
        (GOOD, ["--dimension", "2"], "ConfigError"),  # --classes is required
        (GOOD, ["--classes", "2"], "ConfigError"),  # JSON: the dimension is declared
        (GOOD, [*DECLARED, "--components", "2"], "ConfigError"),
        (GOOD, [*DECLARED, "--centre", "c.json"], "ConfigError"),
        (GOOD, [*DECLARED, "--radius", "-1"], "PrivacyParameterError"),
        (GOOD, [*DECLARED, "--eps", "0"], "PrivacyParameterError"),
        (GOOD, [*DECLARED, "--eps", "-1"], "PrivacyParameterError"),
        (GOOD, [*DECLARED, "--eps", "nan"], "PrivacyParameterError"),
    ],
)
def test_release_command_refuses_bad_input_with_one_line(tmp_path, capsys, content, extra, error):
    """Options and the file's format are refused; records never are (the neighbouring
    test below)."""
    import json

    from smc_hmm.cli import main

    (tmp_path / "d.json").write_text(json.dumps(content))
    eps = [] if "--eps" in extra else ["--eps", "1"]
    data = ["--data", str(tmp_path / "d.json"), "--out", str(tmp_path / "m.npz")]
    assert main(["release", "lmgmm", *data, *eps, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and error in err
    assert not (tmp_path / "m.npz").exists()


def test_release_command_refuses_a_dimension_declared_twice_differently(tmp_path, capsys):
    from smc_hmm.cli import main

    np.savez(tmp_path / "d.npz", x=np.zeros((3, 2)), y=np.array([0, 1, 0]))
    argv = ["release", "lmgmm", "--data", str(tmp_path / "d.npz"), "--eps", "1"]
    argv += ["--classes", "2", "--dimension", "3", "--out", str(tmp_path / "m.npz")]
    assert main(argv) == 2
    assert "declared differently" in capsys.readouterr().err


def _lmgmm_outcome(capsys, tmp_path, data, *options):
    """Release ``data`` through the CLI: its exit code must be 0; the public shape of the
    classifier and its metadata (the guarantee's n and what depends on it apart)."""
    from smc_hmm.cli import main

    out = tmp_path / "released.npz"
    argv = ["release", "lmgmm", "--data", str(data), "--eps", "2", "--lam", "0.1"]
    code = main([*argv, "--seed", "3", "--out", str(out), *options])
    err = capsys.readouterr().err
    assert code == 0, err
    model, meta = lm.load_release(out)
    assert np.all(np.isfinite(model.phi))
    n = meta["guarantee"].pop("n")
    for depends_on_n in ("jacobian_term", "thesis_jacobian_term", "epsilon_total"):
        meta["guarantee"].pop(depends_on_n)
    meta.pop("epsilon_total")
    meta["mechanism"] = meta["mechanism"].split("eps' = eps + ")[0]  # + k, k from n
    return n, (model.phi.shape, model.n_classes, model.dim), meta


def test_neighbouring_data_sets_release_the_same_public_shape(tmp_path, capsys):
    """Removing or adding one record -- the only record of a class (which leaves a class
    empty or with one point), the last record of the file, a point far outside the unit
    ball, NaN or inf features, features of another length, a label outside the declared
    classes, a non-integer or boolean label -- always releases (exit 0) a classifier of
    the declared C classes and d features, with the same metadata apart from n; and
    replacing a record by a malformed one keeps n and every byte of the metadata.  All of
    these used to be refused (too few points per class, SensitivityBoundError,
    InvalidInputError) or changed C (1 + the largest label)."""
    import json

    rows = [[0.2, 0.1], [-0.3, 0.2], [0.1, -0.4], [0.5, 0.5]]
    labels = [0, 1, 2, 0]  # class 1 and class 2 have one record each
    extra = [
        ([40.0, -3.0], 1),  # far outside the ball: scaled onto its sphere
        ([float("nan"), 0.1], 0),
        ([1e400, 0.1], 0),  # inf once read
        ([0.1, 0.2, 0.3], 0),  # another dimension
        ([0.1], 1),
        ("0.1 0.2", 1),
        ([0.1, 0.2], 3),  # a label outside 0..C-1
        ([0.1, 0.2], -1),
        ([0.1, 0.2], 1.5),
        ([0.1, 0.2], True),
        ([0.1, 0.2], "b"),
        ([0.1, 0.2], None),
    ]
    options = ["--classes", "3", "--dimension", "2"]

    def outcome(pairs):
        data = tmp_path / "d.json"
        text = json.dumps({"x": [r for r, _ in pairs], "y": [y for _, y in pairs]})
        data.write_text(text.replace("Infinity", "1e400"))
        return _lmgmm_outcome(capsys, tmp_path, data, *options)

    results = []
    for base in (list(zip(rows, labels)), [(rows[1], 1)], []):
        results.append(outcome(base))
        for i in range(len(base)):  # remove one record
            results.append(outcome(base[:i] + base[i + 1 :]))
        for record in extra:  # add one
            results.append(outcome([*base, record]))
        if base:  # replace the first record: n and the whole metadata stay
            same = outcome(base)
            for record in extra:
                assert outcome([record, *base[1:]]) == same
    shape, meta = results[0][1], results[0][2]
    assert shape == ((3, 1, 3, 3), 3, 2) and meta["records"] == lm.RECORD_RULE
    assert all(r[1] == shape and r[2] == meta for r in results)
    assert sorted({r[0] for r in results}) == [1, 2, 3, 4, 5]  # n: the file's records, >= 1


def test_public_records_and_null_records_add_no_loss():
    x, y, w = lm.public_records([[0.1, 0.2], [np.nan, 0.0], [0.3]], [1, 0, 0], 2, 2)
    assert w.tolist() == [1.0, 0.0, 0.0] and y.tolist() == [1, 0, 0]
    assert np.array_equal(x[1:], np.zeros((2, 2)))
    x0, y0, w0 = lm.public_records([], [], 3, 4)  # the empty data set: one null record
    assert x0.shape == (1, 4) and w0.tolist() == [0.0]
    rng = np.random.default_rng(5)
    pts, lab = _blobs(4, 2, 2, seed=5)
    phi = rng.normal(size=(2, 1, 3, 3))
    phi = phi + phi.swapaxes(2, 3)
    plain = lm.training_data(pts, lab, min_per_class=0)
    padded = lm.training_data(
        np.vstack([pts, np.zeros((2, 2))]),
        np.concatenate([lab, [0, 1]]),
        min_per_class=0,
        weights=np.concatenate([np.ones(len(pts)), [0.0, 0.0]]),
    )
    # the same summed loss (lam ~ 0: no regulariser), two more records in n
    n, m = plain.n, padded.n
    loss = lm.objective(phi, plain, 1e-300, 0.5) * n
    assert loss > 0 and lm.objective(phi, padded, 1e-300, 0.5) * m == pytest.approx(loss)
    assert np.all(lm.example_gradients(phi, padded, 0.5)[n:] == 0)
    assert np.all(lm.example_hessians(phi, padded, 0.5)[n:] == 0)


@pytest.mark.slow
def test_benchmarks_run_with_small_options(tmp_path):
    import argparse
    import json

    from smc_hmm.bench import lmgmm as bench

    parser = argparse.ArgumentParser()
    bench.add_synthetic_arguments(parser)
    args = parser.parse_args(
        [
            "--runs",
            "2",
            "--eps",
            "30,3000",
            "--jobs",
            "1",
            "--thesis",
            "--json",
            str(tmp_path / "s.json"),
        ]
    )
    assert bench.synthetic(args) == 0
    data = json.loads((tmp_path / "s.json").read_text())
    curve = data["results"]["curves"]["objective"]
    assert [p["eps"] for p in curve] == [30.0, 3000.0]
    assert curve[1]["error_mean"] <= curve[0]["error_mean"]
    assert len(data["results"]["curves"]["thesis"]) == 2
    assert 0.05 < data["results"]["non_private_error"] < 0.3
    split, info = bench.speaker_split()
    assert split.x_train.shape == (1250, 26) and split.x_test.shape == (1250, 26)
    assert np.bincount(split.y_train).tolist() == [250] * 5
    assert np.linalg.norm(split.x_train, axis=1).max() <= 1 + 1e-12
    assert info["frame_gmm"]["accuracy"] > 0.95
