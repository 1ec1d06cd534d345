"""The DPHMM release loop (Algorithm 2), composition (Theorems 6.3, 7.1, 7.2), the grid world."""

import math

import numpy as np
import pytest

from smc_hmm.dp.dphmm import DPHMM, CompositionLedger, constrained_epsilon
from smc_hmm.dp.evaluation.gridworld import GridWorld, evaluate, learn_markov_model, run_benchmark
from smc_hmm.dp.knorm import KNormMechanism
from smc_hmm.dp.policy import (
    categorical_graph,
    complete_graph,
    graph_from_edges,
    protectable_graph,
    sensitivity_hull,
    utility_graph,
)
from smc_hmm.errors import (
    DPHMMParameterError,
    ExposedStateError,
    PrivacyBudgetError,
    PrivacyError,
    StateOutsideConstraintError,
    UnknownStateError,
)

F = np.array([[1, 2, 3, 0, 4, 1], [0, 1, 0, 1, 2, 2]], dtype=float).T  # Example 3.2
GRAPH = categorical_graph(["cafe", "school", "school", "grocery", "grocery", "grocery"])
# a random walk on the 6 locations of Figure 3(a) (stay or move to an adjacent location)
ADJ = np.array(
    [
        [1, 1, 0, 1, 0, 0],
        [1, 1, 1, 0, 1, 0],
        [0, 1, 1, 0, 0, 1],
        [1, 0, 0, 1, 1, 0],
        [0, 1, 0, 1, 1, 1],
        [0, 0, 1, 0, 1, 1],
    ],
    dtype=float,
)
M = ADJ / ADJ.sum(axis=1, keepdims=True)


def onehot(i, n=6):
    v = np.zeros(n)
    v[i] = 1.0
    return v


def test_example_5_2_inside_the_release_loop():
    """C_1 = {s2, s3, s5} (identity transition): s5 is exposed and repaired (Algorithm 1
    connects it to its nearest state; s2 and s3 tie at sqrt(5), the lower index wins)."""
    init = np.array([0, 0.4, 0.3, 0, 0.3, 0])
    mech = DPHMM(np.eye(6), F, GRAPH, 1.0, initial=init, rng=np.random.default_rng(0))
    (rec,) = mech.release(4)  # s5
    assert rec.constraint.tolist() == [1, 2, 4]
    assert rec.exposed.tolist() == [4]
    assert rec.added_edges.tolist() == [[4, 1]]
    assert rec.rank == 2 and rec.sampler.startswith("exact simplex")
    assert rec.private.dop == 2 and rec.private.true_state == 4
    assert rec.private.error == pytest.approx(np.linalg.norm(rec.z - F[4]))
    with pytest.raises(ExposedStateError):  # without repair the release would expose s5
        DPHMM(np.eye(6), F, GRAPH, 1.0, initial=init, repair="none").release(4)


def test_min_area_repair_in_the_loop_example_6_1():
    init = np.array([0, 0, 0.25, 0.25, 0.25, 0.25])
    mech = DPHMM(np.eye(6), F, GRAPH, 1.0, initial=init, repair="min_area")
    (rec,) = mech.release(2)
    assert rec.added_edges.tolist() == [[2, 3]] and rec.volume == pytest.approx(14.0)


def test_posterior_is_bayes_with_the_k_norm_likelihood():
    rng = np.random.default_rng(1)
    mech = DPHMM(M, F, GRAPH, 0.8, initial=onehot(0), rng=rng)
    post = mech.posterior
    for s in [1, 2, 5, 4, 4, 3]:
        prior = post @ M
        (rec,) = mech.release(s)
        body = sensitivity_hull(protectable_graph(GRAPH.constrain(rec.constraint), F).graph, F)
        lik = np.exp(KNormMechanism(body, 0.8).log_density(rec.z, F))
        want = prior * lik
        assert np.allclose(mech.posterior, want / want.sum())
        assert rec.constraint.tolist() == np.flatnonzero(prior > 0).tolist()  # Def. 4.1
        post = mech.posterior


def test_flat_hull_removes_states_from_the_support():
    """Two parallel segments: K is flat, every state has DoP = 2, and a release on one line
    tells the adversary which line (likelihood 0 off span K), as Definition 4.4 allows."""
    f = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 5.0], [1.0, 5.0]])
    g = graph_from_edges(4, [(0, 1), (2, 3)])
    mech = DPHMM(np.eye(4), f, g, 1.0, rng=np.random.default_rng(2))
    (rec,) = mech.release(2)
    assert rec.rank == 1 and rec.exposed.size == 0
    assert math.isinf(rec.constrained_epsilon)  # Theorem 6.3: s0 vs s2 is not protected
    assert mech.support.tolist() == [False, False, True, True]
    (rec2,) = mech.release(3)
    assert rec2.constraint.tolist() == [2, 3] and rec2.constrained_epsilon == pytest.approx(1.0)


def test_singleton_constraint_releases_the_known_answer():
    mech = DPHMM(np.eye(6), F, GRAPH, 1.0, initial=onehot(3))
    (rec,) = mech.release(3)
    assert rec.rank == 0 and np.array_equal(rec.z, F[3]) and rec.constrained_epsilon == 0.0


def test_true_state_outside_c_t():
    mech = DPHMM(M, F, GRAPH, 1.0, initial=onehot(0))
    with pytest.raises(StateOutsideConstraintError):  # s6 is not reachable from s1
        mech.release(5)
    assert mech.t == 0  # nothing was released
    base = DPHMM.location_set_baseline(
        M, F, 1.0, delta=0.4, initial=onehot(0), rng=np.random.default_rng(3)
    )
    (rec,) = base.release(3)  # s4: outside the 0.4-location set {s1, s2}? use a surrogate
    assert 3 not in rec.constraint.tolist()
    assert rec.private.released_state in rec.constraint.tolist()
    near = rec.constraint[np.argmin(np.linalg.norm(F[rec.constraint] - F[3], axis=1))]
    assert rec.private.released_state == near


def test_composition_theorems():
    """Theorem 7.1: at one timestamp the eps_i and the constrained terms add up; Theorem 7.2:
    over timestamps the constrained terms add up."""
    queries = {"f": F, "g": F[:, ::-1] * 2.0}
    eps = {"f": 0.5, "g": 0.25}
    mech = DPHMM(M, queries, GRAPH, eps, initial=onehot(0), rng=np.random.default_rng(4))
    total = 0.0
    for t, s in enumerate([1, 4, 5, 5], start=1):
        recs = mech.release(s)
        assert [r.query for r in recs] == ["f", "g"] and all(r.t == t for r in recs)
        assert recs[-1].timestamp_epsilon == pytest.approx(0.75)
        c = [r.constrained_epsilon for r in recs]
        assert recs[-1].timestamp_constrained_epsilon == pytest.approx(sum(c))
        total += sum(c)
        assert recs[-1].sequence_constrained_epsilon == pytest.approx(total)
        for r, name in zip(recs, ["f", "g"]):  # Theorem 6.3 term, brute force over C_t
            q = queries[name]
            rep = protectable_graph(GRAPH.constrain(r.constraint), q)
            diffs = q[r.constraint][:, None, :] - q[r.constraint][None, :, :]
            want = eps[name] * np.max(rep.body.gauge(diffs))
            assert r.constrained_epsilon == pytest.approx(want)
    assert mech.ledger.sequence("f") + mech.ledger.sequence("g") == pytest.approx(total)
    assert mech.ledger.epsilon_sum() == pytest.approx(4 * 0.75)


def test_ledger_arithmetic_and_budget():
    led = CompositionLedger(budget=3.0)
    led.record(1, "f", 0.5, 1.0)
    led.record(1, "g", 0.25, 0.5)
    led.record(2, "f", 0.5, 1.25)
    assert led.timestamp(1) == pytest.approx((0.75, 1.5))
    assert led.timestamp(2) == pytest.approx((0.5, 1.25))
    assert led.sequence() == pytest.approx(2.75) and led.sequence("f") == pytest.approx(2.25)
    led.check(0.25)
    with pytest.raises(PrivacyBudgetError):
        led.check(0.5)
    led.record(3, "f", 0.5, math.inf)
    assert math.isinf(led.sequence()) and math.isinf(led.timestamp(3)[1])
    with pytest.raises(DPHMMParameterError):
        led.record(4, "f", 0.0, 1.0)
    with pytest.raises(DPHMMParameterError):
        led.record(4, "f", 1.0, -1.0)
    with pytest.raises(DPHMMParameterError):
        CompositionLedger(budget=-1.0)


def test_budget_refuses_before_drawing_noise():
    rng = np.random.default_rng(5)
    mech = DPHMM(np.eye(6), F, GRAPH, 1.0, rng=rng)  # C_t = all states at every t
    (rec,) = mech.release(4)
    per_release = rec.constrained_epsilon
    assert per_release > 0 and math.isfinite(per_release)
    mech = DPHMM(np.eye(6), F, GRAPH, 1.0, rng=rng, budget=2.5 * per_release)
    mech.run([4, 4])
    state, post = rng.bit_generator.state, mech.posterior.copy()
    with pytest.raises(PrivacyBudgetError):
        mech.release(4)
    assert mech.t == 2 and rng.bit_generator.state == state
    assert np.array_equal(mech.posterior, post)
    assert mech.ledger.sequence() == pytest.approx(2 * per_release)


def test_constrained_epsilon_matches_all_pairs():
    rng = np.random.default_rng(6)
    f = rng.normal(size=(20, 2))
    body = sensitivity_hull(utility_graph(f, 1.0), f)
    c = np.flatnonzero(rng.random(20) < 0.6)
    diffs = f[c][:, None, :] - f[c][None, :, :]
    assert constrained_epsilon(0.3, body, f, c) == pytest.approx(0.3 * body.gauge(diffs).max())


def test_release_loop_statistics_on_the_running_example():
    """With a fixed C_t (identity transition on all states) the release noise has
    ||z - f(s*)||_K ~ Gamma(2, 1/eps): the loop calls the mechanism correctly."""
    from scipy import stats

    eps = 1.5
    k = sensitivity_hull(protectable_graph(GRAPH, F).graph, F)
    g = []
    for i in range(150):
        mech = DPHMM(np.eye(6), F, GRAPH, eps, rng=np.random.default_rng([7, i]))
        for rec in mech.run([4] * 5):
            g.append(float(k.gauge(rec[0].z - F[4])))
    assert stats.kstest(g, stats.gamma(2, scale=1 / eps).cdf).pvalue > 1e-3


# -- typed errors ----------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.0, -1.0, math.nan, math.inf])
def test_bad_eps(eps):
    with pytest.raises(PrivacyError):
        DPHMM(M, F, GRAPH, eps)
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, {"f": F}, GRAPH, {"f": eps})


def test_bad_arguments():
    with pytest.raises(UnknownStateError):  # the graph names states 6..7
        DPHMM(M, F, complete_graph(8), 1.0)
    with pytest.raises(UnknownStateError):
        DPHMM(M, F, GRAPH, 1.0).release(6)
    with pytest.raises(UnknownStateError):
        DPHMM(M, F, GRAPH, 1.0).release(-1)
    with pytest.raises(UnknownStateError):
        DPHMM(M, F, GRAPH, 1.0).release(1.5)
    with pytest.raises(DPHMMParameterError):
        DPHMM(M * 2, F, GRAPH, 1.0)  # rows do not sum to 1
    with pytest.raises(DPHMMParameterError):
        DPHMM(M[:5], F, GRAPH, 1.0)
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, F[:5], GRAPH, 1.0)
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, F, GRAPH, 1.0, initial=np.zeros(6))
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, F, GRAPH, 1.0, repair="best")
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, F, GRAPH, 1.0, outside="ignore")
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, F, GRAPH, 1.0, delta=1.0)
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, {"f": F}, GRAPH, {"g": 1.0})
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, {}, GRAPH, 1.0)
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, F, "graph", 1.0)
    with pytest.raises(DPHMMParameterError):
        DPHMM(M, F, GRAPH, 1.0, rng=0)


# -- the grid world --------------------------------------------------------------------


def test_gridworld_walk_and_learned_model():
    grid = GridWorld(width=6, height=5)
    rng = np.random.default_rng(8)
    trajs = grid.simulate_many(40, 60, rng)
    assert trajs.shape == (40, 61) and trajs.min() >= 0 and trajs.max() < 30
    nb = grid.neighbourhood()
    assert np.all(nb[trajs[:, :-1], trajs[:, 1:]])  # only 3 x 3 moves
    m = learn_markov_model(trajs, grid.n_states, allowed=nb)
    assert np.allclose(m.sum(axis=1), 1.0) and np.array_equal(m > 0, nb)
    # momentum: continuing straight is more likely than turning back
    xy = grid.coords
    steps = xy[trajs[:, 1:]] - xy[trajs[:, :-1]]
    moving = np.any(steps != 0, axis=2)
    same = np.all(steps[:, 1:] == steps[:, :-1], axis=2) & moving[:, 1:] & moving[:, :-1]
    assert same.sum() / (moving[:, 1:] & moving[:, :-1]).sum() > 0.5
    with pytest.raises(DPHMMParameterError):
        GridWorld(width=1)
    with pytest.raises(DPHMMParameterError):
        GridWorld(p_stay=1.0)
    with pytest.raises(DPHMMParameterError):
        learn_markov_model([[0, 99]], 30)


def test_gridworld_evaluation_small():
    res = evaluate(GridWorld(width=8, height=8), n_sequences=2, n_steps=15, r=1.0, seed=1)
    assert set(res) == {"util", "trs", "dpls"}
    for r in res.values():
        assert r.dop.shape == (2, 15) and np.all(r.dop >= 1) and np.all(r.error >= 0)
    assert res["util"].dop.max() <= 5  # r = 1: the cell and its 4 neighbours
    assert res["trs"].dop.max() <= 25  # 3 x 3 moves: cells within Chebyshev distance 2
    assert np.all(res["dpls"].dop <= res["dpls"].c_size)  # complete graph on the set
    out = run_benchmark(8, n_sequences=1, n_steps=5)
    assert out["n_states"] == 64 and out["methods"]["util"]["releases"] == 5
    assert out["methods"]["trs"]["ms_per_release_median"] > 0
