"""protocols.aggregate: the DP aggregate classifier (thesis 4.1.3) and the noisy secure sum.

Small, insecure keys (512-bit Paillier and DGK, t = 32).  The published classifier is
checked against the plaintext mean of the owners' classifiers plus the noise of the
smallest owner (each owner returns its own noise, a local value); the selection is
checked at the comparison's edge cases (sizes 1 and max_size, ties); the transcript
harness runs on every role; the noise is tested statistically (KS) against
Gamma(d, 2/(n eps lambda)) and a uniform direction.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats
from transcript_harness import RecordingTransport, assert_same_transcripts

from protocols import aggregate as agg
from protocols.aggregate import Params, SumParams
from smc_hmm.crypto import Rng
from smc_hmm.errors import AggregateInputError, ConfigError, PrivacyParameterError
from smc_hmm.runtime import run_protocol

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")

MAX_SIZE = 1000


def dataset(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = agg.clip_rows(rng.normal(size=(n, d)))
    y = np.where(x[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return x, y


def params(k=3, d=3, **kw):
    base = {"dim": d, "eps": 1.0, "lam": 0.1, "max_size": MAX_SIZE, "dgk_bits": 512, "dgk_t": 32}
    return Params(owners=tuple(f"p{i + 1}" for i in range(k)), **(base | kw))


def run(keys, data, p, **kw):
    return agg.run_aggregate(data, p, keys, min_key_bits=512, timeout=60, **kw)


@pytest.fixture(scope="module")
def keys(keypair_512, other_keypair_512):
    return {"p1": keypair_512, "trent": other_keypair_512}


def selected_owner(result, p):
    """The owners whose noise explains the published classifier, and the residual."""
    outs = [result.outputs[o] for o in p.owners]
    mean = np.mean([o["w"] for o in outs], axis=0)
    published = result.outputs[p.user]
    errors = [np.abs(published - mean - o["noise"]).max() for o in outs]
    return int(np.argmin(errors)), min(errors)


# -- correctness -------------------------------------------------------------------------


def test_aggregate_is_mean_plus_the_smallest_owners_noise(keys):
    p = params(k=3)
    data = [dataset(40, seed=1), dataset(9, seed=2), dataset(25, seed=3)]
    result = run(keys, data, p)
    outs = [result.outputs[o] for o in p.owners]
    assert [o["n"] for o in outs] == [40, 9, 25]
    published = result.outputs["dave"]
    expected = np.mean([o["w"] for o in outs], axis=0) + outs[1]["noise"]
    # fixed point: each of the K + 1 summands is rounded at 2^-32
    assert np.abs(published - expected).max() < 4 * 2.0**-32 * 3
    # the noises differ, so the match identifies the owner
    assert (
        min(
            np.abs(published - expected - o["noise"] + outs[1]["noise"]).max()
            for o in (outs[0], outs[2])
        )
        > 1e-6
    )
    # the curator learnt a position in pi_2 pi_1 order, nothing he can map to p2
    assert 0 <= result.outputs["trent"]["index"] < 3


@pytest.mark.parametrize(
    "sizes",
    [(1, 2), (2, 1), (MAX_SIZE, MAX_SIZE - 1), (MAX_SIZE, 1, MAX_SIZE), (7, 7, 7), (5, 3, 3, 9)],
)
def test_smallest_is_selected_at_edge_cases(keys, sizes):
    p = params(k=len(sizes), d=2)
    data = [dataset(n, d=2, seed=10 + i) for i, n in enumerate(sizes)]
    result = run(keys, data, p)
    j, residual = selected_owner(result, p)
    assert residual < 1e-8
    assert sizes[j] == min(sizes), (sizes, j)


def test_local_training_matches_scikit_learn():
    sklearn = pytest.importorskip("sklearn.linear_model")
    x, y = dataset(200, d=4, seed=5)
    lam = 0.05
    w = agg.train_local(x, y, lam)
    ref = sklearn.LogisticRegression(C=1 / (len(y) * lam), fit_intercept=False, tol=1e-10)
    ref.fit(x, y)
    assert np.allclose(w, ref.coef_[0], atol=1e-5)
    assert np.linalg.norm(w) <= 1 / lam  # the public bound B_w rests on this


def test_classify_and_published_classifier_work(keys):
    p = params(k=2, d=3, eps=1e6)  # almost no noise: the aggregate of two good classifiers
    data = [dataset(300, seed=21), dataset(200, seed=22)]
    w = run(keys, data, p).outputs["dave"]
    xt, yt = dataset(500, seed=23)
    assert np.mean(agg.classify(w, xt) == yt) > 0.8


def test_the_curators_index_does_not_name_the_smallest_owner(keys):
    """pi_1 is uniform and unknown to Trent: the position he learns is uniform over the
    K slots although p2 is always the smallest owner."""
    p = params(k=3, d=2)
    data = [dataset(30, d=2, seed=1), dataset(4, d=2, seed=2), dataset(20, d=2, seed=3)]
    seen = [run(keys, data, p, rng=Rng.seeded(i)).outputs["trent"]["index"] for i in range(18)]
    counts = np.bincount(seen, minlength=3)
    assert stats.chisquare(counts).pvalue > 0.001, counts
    assert np.count_nonzero(counts) == 3


# -- metadata rule: the transcript harness on every role ---------------------------------


def test_transcripts_do_not_depend_on_private_inputs(keys):
    p = params(k=3, d=2)
    inputs = [
        [dataset(5, d=2, seed=1), dataset(MAX_SIZE, d=2, seed=2), dataset(1, d=2, seed=3)],
        [dataset(60, d=2, seed=4), dataset(60, d=2, seed=5), dataset(60, d=2, seed=6)],
    ]
    sizes = defaultdict(lambda: defaultdict(list))

    def go(private, wrap):
        def both(name, transport):
            return RecordingTransport(wrap(name, transport), sizes[id(private)])

        run(keys, private, p, wrap_transport=both)

    frames = assert_same_transcripts(go, inputs, p.messages().values(), keys=keys.values())
    roles = {"p1", "p2", "p3", "trent", "dave"}
    assert {receiver for receiver, _ in frames} == roles  # every role received frames
    runs = list(sizes.values())
    for link, fs in runs[0].items():  # revealed shares are fixed width: lengths match too
        assert [len(f) for f in fs] == [len(f) for f in runs[1][link]], link


# -- typed errors --------------------------------------------------------------------------


def test_one_owner_is_a_typed_error():
    with pytest.raises(AggregateInputError, match="K >= 2"):
        Params(owners=("p1",), dim=2)
    with pytest.raises(ConfigError):
        Params.from_config({"owners": ["p1"], "dim": 2})


@pytest.mark.parametrize("eps", [0.0, -1.0, math.nan, math.inf])
def test_bad_epsilon_is_a_typed_error(eps):
    with pytest.raises(PrivacyParameterError):
        params(eps=eps)
    with pytest.raises(PrivacyParameterError):
        agg.l2_noise(3, 10, eps, 0.1)


def test_bad_data_are_typed_errors(keys):
    p = params(k=2, d=3)
    x, y = dataset(10)
    for bad in [
        (np.zeros((0, 3)), np.zeros(0)),  # empty
        (x[:, :2], y),  # mismatched dimension
        (x, y[:-1]),  # mismatched labels
        (x * 5, y),  # rows outside the unit ball
        (np.where(x > 0, np.nan, x), y),
        (x, y + 3),  # labels
    ]:
        with pytest.raises(AggregateInputError):
            agg.check_data(bad, 3)
    with pytest.raises(AggregateInputError):  # the same through the protocol: typed, bounded
        run(keys, [(x[:, :2], y), dataset(10)], p)
    with pytest.raises(AggregateInputError, match="max_size"):
        agg.check_data(dataset(20), 3, max_size=10)
    with pytest.raises(AggregateInputError):
        agg.run_aggregate([dataset(10)], p, keys)


# -- the noise ---------------------------------------------------------------------------


def test_noise_radius_is_gamma_and_direction_uniform():
    d, n, eps, lam = 5, 50, 0.5, 0.1
    rng = np.random.default_rng(2024)
    eta = agg.l2_noise(d, n, eps, lam, rng, size=4000)
    radius = np.linalg.norm(eta, axis=1)
    scale = 2 / (n * eps * lam)
    assert stats.kstest(radius, stats.gamma(d, scale=scale).cdf).pvalue > 0.01
    # the thesis's Laplace coordinates have a different radius law: the test has power
    lap = rng.laplace(0, scale, size=(4000, d))
    assert stats.kstest(np.linalg.norm(lap, axis=1), stats.gamma(d, scale=scale).cdf).pvalue < 1e-6
    # uniform direction: each coordinate of u, (u_i + 1)/2 ~ Beta((d-1)/2, (d-1)/2)
    u = eta / radius[:, None]
    beta = stats.beta((d - 1) / 2, (d - 1) / 2)
    for i in range(d):
        assert stats.kstest((u[:, i] + 1) / 2, beta.cdf).pvalue > 0.001
    assert np.abs(u.mean(axis=0)).max() < 0.05
    # radius and direction independent: the radius does not depend on the orthant
    assert stats.ks_2samp(radius[u[:, 0] > 0], radius[u[:, 0] <= 0]).pvalue > 0.001


def test_per_coordinate_laplace_is_only_sqrt_d_eps_dp():
    """The privacy loss at the worst neighbour: sqrt(d) eps for the thesis, eps for ours."""
    d, n, eps, lam = 16, 100, 1.0, 0.1
    sens = 2 / (n * lam)  # the L2 sensitivity bound
    delta = np.full(d, sens / math.sqrt(d))  # ||delta||_2 = sens, ||delta||_1 = sqrt(d) sens
    b = agg.noise_scale(n, eps, lam)
    z = np.zeros(d)  # loss of Laplace: (||z - f'||_1 - ||z - f||_1) / b, worst at z = f
    loss_laplace = (np.abs(z - delta).sum() - np.abs(z).sum()) / b
    loss_l2 = (np.linalg.norm(z - delta) - np.linalg.norm(z)) / b
    assert loss_laplace == pytest.approx(math.sqrt(d) * eps)
    assert loss_l2 == pytest.approx(eps)


def test_noise_cut_is_public_and_negligible():
    p = params(d=4, eps=0.01, lam=0.01)
    r = p.noise_radius
    assert stats.gamma.sf(r, 4, scale=2 / (0.01 * 0.01)) == pytest.approx(2.0**-64, rel=1e-3)
    assert p.noise_bound < 2**100  # fits any Paillier key


# -- the noisy secure sum (federated DP Baum-Welch) -------------------------------------


def sum_run(keypair, vectors, scales, **kw):
    names = tuple(f"p{i + 1}" for i in range(len(vectors)))
    p = SumParams(names, "trent", len(scales), tuple(scales), max_abs=100.0)
    parties = {names[0]: ("lead", vectors[0])}
    parties.update({n: ("owner", v) for n, v in zip(names[1:], vectors[1:])})
    parties["trent"] = ("curator", None)
    result = run_protocol(
        agg.DP_SUM, p, parties, keys={"trent": keypair}, min_key_bits=512, timeout=30, **kw
    )
    return result, p


def test_dp_sum_is_the_sum_plus_bounded_noise(keypair_512):
    vectors = [np.array([1.5, 2.0, 0.0]), np.array([3.0, -1.0, 7.25]), np.array([0.5, 0, 1])]
    result, _ = sum_run(keypair_512, vectors, [0.0, 0.0, 0.0])
    assert np.allclose(result.outputs["trent"], np.sum(vectors, axis=0), atol=1e-6)
    assert all(result.outputs[o] is None for o in ("p1", "p2", "p3"))
    result, p = sum_run(keypair_512, vectors, [0.5, 0.5, 2.0])
    noise = result.outputs["trent"] - np.sum(vectors, axis=0)
    assert np.all(noise != 0) and np.all(np.abs(noise) <= p.clip * np.array(p.noise_scales))


def test_dp_sum_noise_is_laplace():
    from smc_hmm.dp.random import DPRandom

    p = SumParams(("a", "b"), "trent", 3000, (0.7,) * 3000, max_abs=1.0)
    noise = agg.count_noise(p, DPRandom.insecure_seeded(3))
    assert stats.kstest(noise, stats.laplace(scale=0.7).cdf).pvalue > 0.01


def test_dp_sum_parameters_are_checked():
    """(Transcripts and bad vectors: the conformance suite.)"""
    with pytest.raises(AggregateInputError):
        SumParams(("p1",), "trent", 1, (1.0,))
    with pytest.raises(PrivacyParameterError):
        SumParams(("p1", "p2"), "trent", 1, (math.nan,))


def test_bench_smoke(tmp_path):
    from bench_support import bench_parser, run_bench

    pytest.importorskip("sklearn")
    from smc_hmm.bench import aggregate as bench

    code, data = run_bench(
        bench,
        ["--part", "cost", "--key-bits", "512", "--insecure", "--owners", "2"],
        tmp_path / "aggregate.json",
    )
    assert code == 0
    cost = data["cost"]["aggregate"]["2"]
    assert set(cost["parties"]) == {"p1", "p2", "trent", "dave"}
    assert cost["parties"]["trent"]["ops"]["decrypt"] >= 31  # eta + s, d = 31
    assert data["cost"]["dp_sum"]["length"] == 2 + 4 + 12
    with pytest.raises(Exception, match="insecure"):
        bench.main(bench_parser(bench).parse_args(["--part", "cost", "--key-bits", "512"]))


# -- faults and OS processes ------------------------------------------------------------


@pytest.mark.parametrize("party, index", [("p2", 0), ("p1", 3), ("trent", 1), ("p3", 2)])
def test_a_lost_message_fails_every_party_within_the_timeout(keys, party, index):
    import threading
    import time

    from smc_hmm.errors import TransportError
    from smc_hmm.transport.faults import FaultyTransport

    p = params(k=3, d=2)
    data = [dataset(10, d=2, seed=s) for s in range(3)]

    def wrap(name, inner):
        return FaultyTransport(inner, fail_at=index, mode="drop") if name == party else inner

    before = set(threading.enumerate())
    t0 = time.monotonic()
    with pytest.raises(TransportError):
        agg.run_aggregate(data, p, keys, min_key_bits=512, timeout=0.5, wrap_transport=wrap)
    assert time.monotonic() - t0 < 0.5 + 3.0
    time.sleep(0.05)
    assert set(threading.enumerate()) == before
