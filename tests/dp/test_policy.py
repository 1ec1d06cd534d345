"""Policy graphs, sensitivity hulls, DoP and protectable graphs: the paper's running example
first (Example 3.2, Figure 3(b), Examples 5.1, 5.2, 5.3, 6.1, Figure 9), then an LP oracle."""

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from smc_hmm.dp.knorm import ConvexBody, KNormMechanism
from smc_hmm.dp.policy import (
    PolicyGraph,
    categorical_graph,
    complete_graph,
    constraint_set,
    degree_of_protection,
    delta_location_set,
    exposed_states,
    graph_from_edges,
    l1_sensitivity,
    protectable_graph,
    sensitivity_hull,
    sensitivity_points,
    transition_graph,
    utility_graph,
)
from smc_hmm.errors import (
    DPHMMParameterError,
    EmptyConstraintError,
    ExposedStateError,
    UnknownStateError,
)

# Example 3.2: f(s) = [[1 2 3 0 4 1], [0 1 0 1 2 2]] s^T (temperature, noise level)
F = np.array([[1, 2, 3, 0, 4, 1], [0, 1, 0, 1, 2, 2]], dtype=float).T
# Figure 3(b): cafeteria {s1}, school {s2, s3}, grocery {s4, s5, s6}
CATEGORIES = ["cafeteria", "school", "school", "grocery", "grocery", "grocery"]
S = {i + 1: i for i in range(6)}  # paper's 1-based names -> indices


def running_graph():
    return categorical_graph(CATEGORIES)


def area_with(graph, i, j):
    return sensitivity_hull(graph.with_edges([(i, j)]), F).volume


# -- the running example -------------------------------------------------------------


def test_figure_3b_graph():
    g = running_graph()
    assert g.edges.tolist() == [[1, 2], [3, 4], [3, 5], [4, 5]]  # s2s3, s4s5, s4s6, s5s6
    assert g.isolated.tolist() == [0]  # s1 alone in its category


def test_example_5_1_delta_f_and_l1_sensitivity():
    g = running_graph()
    delta_f = np.array([[-1, 1, -4, 4, -1, 1, 3, -3], [1, -1, -1, 1, -1, 1, 0, 0]]).T
    got = sensitivity_points(g, F)
    assert sorted(map(tuple, got)) == sorted(map(tuple, delta_f.astype(float)))
    assert l1_sensitivity(g, F) == 5.0  # ||f(s4) - f(s5)||_1
    k = sensitivity_hull(g, F)
    assert k.rank == 2
    # Corollary 5.1: the cross polytope of radius S_f contains K
    assert np.all(np.abs(k.vertices @ k.basis.T).sum(axis=1) <= 5.0 + 1e-12)


def test_example_5_2_exposure_under_c_235():
    c = [S[2], S[3], S[5]]
    gc = running_graph().constrain(c)
    assert gc.edges.tolist() == [[S[2], S[3]]]  # s4s5 and s5s6 disappear with s4, s6
    assert l1_sensitivity(gc, F) == 2.0
    # Laplace with S_f = 2 at z = f(s5): Pr(A(s5) = z) / Pr(A(s3) = z) = e^{3 eps / 2}
    eps = 0.9
    ratio = eps / 2 * np.abs(F[S[5]] - F[S[3]]).sum()
    assert ratio == pytest.approx(1.5 * eps)
    ratio2 = eps / 2 * np.abs(F[S[5]] - F[S[2]]).sum()
    assert ratio2 == pytest.approx(1.5 * eps)
    # K-norm: K = Conv(f(s2) - f(s3), f(s3) - f(s2)) is a segment
    k = sensitivity_hull(gc, F)
    assert k.rank == 1
    mech = KNormMechanism(k, eps)
    ld = mech.log_density(F[S[5]], F[[S[3], S[5]]])
    assert ld[0] == -np.inf and np.isfinite(ld[1])  # Pr(A(s3) = f(s5)) = 0
    assert degree_of_protection(gc, F).tolist() == [2, 2, 1]
    assert exposed_states(gc, F).tolist() == [S[5]]


def test_figure_9a_disconnected_but_protected():
    c = [S[2], S[4], S[5], S[6]]
    gc = running_graph().constrain(c)
    assert gc.isolated.tolist() == [S[2]]
    k = sensitivity_hull(gc, F)
    inside = k.contains(F[[S[4], S[5], S[6]]] - F[S[2]])
    assert inside.tolist() == [True, True, False]  # f(s4), f(s5) in f(s2) + K; f(s6) not
    assert degree_of_protection(gc, F, [S[2]]).tolist() == [3]
    assert exposed_states(gc, F).size == 0
    assert protectable_graph(gc, F).added.size == 0


def test_example_6_1_and_figure_9_repair():
    c = [S[3], S[4], S[5], S[6]]
    gc = running_graph().constrain(c)
    assert exposed_states(gc, F).tolist() == [S[3]]  # f(s3) + K contains no other node
    assert degree_of_protection(gc, F, [S[3]]).tolist() == [1]
    # Figure 9(c)-(e): the hull areas after adding s3s4, s3s6, s3s5
    assert area_with(gc, S[3], S[4]) == pytest.approx(14.0)
    assert area_with(gc, S[3], S[6]) == pytest.approx(20.0)
    assert area_with(gc, S[3], S[5]) == pytest.approx(16.0)
    assert sensitivity_hull(gc, F).volume == pytest.approx(9.0)
    best = protectable_graph(gc, F, "min_area")  # Algorithm 3: the optimal graph adds s3s4
    assert best.added.tolist() == [[S[3], S[4]]]
    assert best.body.volume == pytest.approx(14.0)
    assert exposed_states(best.graph, F).size == 0
    greedy = protectable_graph(gc, F, "greedy")  # Algorithm 1: nearest node in L2 is s5
    assert greedy.added.tolist() == [[S[3], S[5]]]
    assert greedy.body.volume == pytest.approx(16.0)
    assert greedy.exposed.tolist() == [S[3]]
    with pytest.raises(ExposedStateError):
        protectable_graph(gc, F, "none")


def test_example_5_3_blowfish_k_norms():
    """Delta f = [[1 -1 -1 1], [0 1 0 -1]]^T; with the K-norm mechanism the unbounded DP of
    s1..s6 is {eps, 0, eps, 2 eps, eps, 2 eps} (appendix 10.2)."""
    k = ConvexBody.from_points(np.array([[1, -1, -1, 1], [0, 1, 0, -1]], dtype=float).T)
    added = np.array([[1, 0], [0, 0], [1, 0], [0, 1], [1, 0], [0, 1]], dtype=float)
    assert k.gauge(added).tolist() == pytest.approx([1, 0, 1, 2, 1, 2])
    assert not k.contains([0.0, 1.0]) and k.contains([1.0, 0.0])


# -- graph semantics -----------------------------------------------------------------


def test_constrained_graph_does_not_reconnect_through_removed_nodes():
    path = graph_from_edges(4, [(0, 1), (1, 2), (2, 3)])
    gc = path.constrain([0, 2, 3])
    assert gc.edges.tolist() == [[2, 3]]
    assert gc.isolated.tolist() == [0]
    assert gc.constrain([0, 1]).active.tolist() == [0]  # constraining twice intersects


def test_graph_constructors():
    g = complete_graph(5)
    assert g.n_edges == 10 and g.cliques[0].tolist() == [0, 1, 2, 3, 4]
    xy = np.array([(x, y) for y in range(3) for x in range(3)], dtype=float)
    assert utility_graph(xy, 1.0).neighbours(4).tolist() == [1, 3, 5, 7]
    assert utility_graph(xy, 1.0, "linf").neighbours(4).size == 8
    assert utility_graph(xy, 2.0, "l1").neighbours(0).tolist() == [1, 2, 3, 4, 6]
    d = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    assert utility_graph(None, 1.0, distances=d).edges.tolist() == [[0, 1], [1, 2], [2, 3]]
    cat = categorical_graph(["a", "b", "a", "c"])
    assert cat.edges.tolist() == [[0, 2]]


def test_transition_graph_matches_its_definition():
    rng = np.random.default_rng(0)
    m = rng.random((7, 7)) * (rng.random((7, 7)) < 0.3)
    m[np.arange(7), rng.integers(7, size=7)] += 0.1
    m /= m.sum(axis=1, keepdims=True)
    g = transition_graph(m)
    for j in range(7):
        for k in range(7):
            want = j != k and any(m[i, j] > 0 and m[i, k] > 0 for i in range(7))
            assert g.adjacency[j, k] == want


def test_clique_fast_path_equals_explicit_edges():
    rng = np.random.default_rng(1)
    f = rng.normal(size=(30, 2))
    labels = rng.integers(3, size=30)
    fast = categorical_graph(labels.tolist())
    slow = PolicyGraph(fast.adjacency)  # same edges, no clique hint
    c = rng.random(30) < 0.7
    for a, b in ((fast, slow), (fast.constrain(c), slow.constrain(c))):
        ka, kb = sensitivity_hull(a, f), sensitivity_hull(b, f)
        assert ka.volume == pytest.approx(kb.volume)
        x = rng.normal(size=(100, 2))
        assert np.allclose(ka.gauge(x), kb.gauge(x))
    kc = sensitivity_hull(complete_graph(30), f)
    pts = f[:, None, :] - f[None, :, :]
    assert np.all(kc.contains(pts.reshape(-1, 2)))


def test_constraint_and_delta_location_sets():
    p = np.array([0.0, 0.5, 0.3, 0.0, 0.15, 0.05])
    assert constraint_set(p).tolist() == [False, True, True, False, True, True]
    assert np.flatnonzero(delta_location_set(p, 0.1)).tolist() == [1, 2, 4]
    assert np.flatnonzero(delta_location_set(p, 0.0)).tolist() == [1, 2, 4, 5]
    assert np.flatnonzero(delta_location_set(p, 0.5)).tolist() == [1]
    with pytest.raises(EmptyConstraintError):
        constraint_set(np.zeros(4))
    with pytest.raises(EmptyConstraintError):
        delta_location_set(np.zeros(4), 0.1)
    with pytest.raises(DPHMMParameterError):
        delta_location_set(p, 1.0)
    with pytest.raises(DPHMMParameterError):
        constraint_set([0.5, -0.1])


# -- DoP against an LP oracle ---------------------------------------------------------


def lp_in_hull(points, v):
    """Is v a convex combination of the rows of ``points``? (Equation (6) as an LP.)"""
    m = len(points)
    a_eq = np.vstack([points.T, np.ones((1, m))])
    res = linprog(np.zeros(m), A_eq=a_eq, b_eq=np.append(v, 1.0), bounds=(0, None))
    return res.status == 0


@pytest.mark.parametrize("case", ["2d", "3d", "line-in-2d", "plane-in-3d"])
def test_membership_and_dop_match_lp_oracle(case):
    rng = np.random.default_rng({"2d": 1, "3d": 2, "line-in-2d": 3, "plane-in-3d": 4}[case])
    d = 3 if "3d" in case else 2
    basis = {"line-in-2d": np.array([[1.0, 2.0]]), "plane-in-3d": rng.normal(size=(2, 3))}
    n = 12
    if case in basis:  # states whose answers lie on a line / plane through the origin
        f = rng.normal(size=(n, basis[case].shape[0])) @ basis[case]
        f[-3:] += rng.normal(size=(3, d)) * 0.5  # a few states off the flat set
    else:
        f = rng.normal(size=(n, d))
    edges = [(i, j) for i in range(n - 3) for j in range(i + 1, n - 3) if rng.random() < 0.3]
    g = graph_from_edges(n, edges)
    k = sensitivity_hull(g, f)
    pts = sensitivity_points(g, f)
    assert (k.rank < d) == (case in basis)
    checked = 0
    for i in range(n):
        for j in range(n):
            v = f[j] - f[i]
            gauge = float(k.gauge(v))
            if abs(gauge - 1.0) < 1e-6:
                continue  # on the boundary: both answers are right
            assert bool(k.contains(v)) == lp_in_hull(pts, v), (i, j, gauge)
            checked += 1
    assert checked > n * n * 0.9
    dop = degree_of_protection(g, f)
    want = [sum(lp_in_hull(pts, f[j] - f[i]) or i == j for j in range(n)) for i in range(n)]
    assert dop.tolist() == want


def test_repair_makes_random_graphs_protectable():
    rng = np.random.default_rng(7)
    for trial in range(10):
        n = 15
        f = rng.normal(size=(n, 2)) * 3
        g = graph_from_edges(n, [(i, i + 1) for i in range(0, n - 1, 3)])
        c = rng.random(n) < 0.6
        c[:2] = True
        gc = g.constrain(c)
        for method in ("greedy", "min_area"):
            rep = protectable_graph(gc, f, method)
            assert exposed_states(rep.graph, f).size == 0, (trial, method)
            assert np.all(degree_of_protection(rep.graph, f) > 1)
            assert set(rep.added[:, 0].tolist()) <= set(rep.exposed.tolist())
            assert rep.graph.n_edges == gc.n_edges + len(rep.added)
        greedy = protectable_graph(gc, f, "greedy")
        for s, j in greedy.added:  # Algorithm 1 connects to the nearest active state
            others = [x for x in gc.active if x != s]
            dist = np.linalg.norm(f[others] - f[s], axis=1)
            assert np.linalg.norm(f[j] - f[s]) == pytest.approx(dist.min())


def test_point_hull_and_duplicate_answers():
    f = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    g = graph_from_edges(3, [])
    k = sensitivity_hull(g, f)
    assert k.rank == 0
    assert degree_of_protection(g, f).tolist() == [2, 2, 1]  # identical answers protect
    assert exposed_states(g, f).tolist() == [2]


# -- typed errors ----------------------------------------------------------------------


def test_unknown_states_raise():
    with pytest.raises(UnknownStateError):
        graph_from_edges(3, [(0, 3)])
    with pytest.raises(UnknownStateError):
        graph_from_edges(3, [(-1, 2)])
    with pytest.raises(UnknownStateError):
        graph_from_edges(3, [(0, 1.5)])
    g = complete_graph(4)
    with pytest.raises(UnknownStateError):
        g.constrain([0, 4])
    with pytest.raises(UnknownStateError):
        g.with_edges([(0, 9)])
    with pytest.raises(UnknownStateError):
        g.constrain([0, 1]).with_edges([(0, 3)])  # 3 is not in C
    with pytest.raises(UnknownStateError):
        degree_of_protection(g, np.zeros((4, 1)), [5])
    with pytest.raises(UnknownStateError):
        g.neighbours(7)


def test_bad_inputs_raise():
    with pytest.raises(DPHMMParameterError):
        complete_graph(0)
    with pytest.raises(DPHMMParameterError):
        utility_graph(np.zeros((3, 2)), -1.0)
    with pytest.raises(DPHMMParameterError):
        utility_graph(np.zeros((3, 2)), math.nan)
    with pytest.raises(DPHMMParameterError):
        utility_graph(np.zeros((3, 2)), 1.0, "cosine")
    with pytest.raises(DPHMMParameterError):
        utility_graph(None, 1.0, distances=np.array([[0.0, 1.0], [2.0, 0.0]]))
    with pytest.raises(DPHMMParameterError):
        transition_graph(-np.eye(3))
    with pytest.raises(DPHMMParameterError):
        sensitivity_hull(complete_graph(3), np.zeros((4, 2)))  # query rows != states
    with pytest.raises(DPHMMParameterError):
        sensitivity_hull(complete_graph(2), [[0.0, math.nan], [1.0, 1.0]])
    with pytest.raises(DPHMMParameterError):
        protectable_graph(complete_graph(2), np.zeros((2, 1)), "optimal")
    with pytest.raises(DPHMMParameterError):
        sensitivity_points("graph", F)
    with pytest.raises(DPHMMParameterError):
        PolicyGraph(np.zeros((2, 3)))
