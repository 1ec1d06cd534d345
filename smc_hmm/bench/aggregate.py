"""``smc-hmm bench aggregate``: the DP aggregate classifier and federated DP Baum-Welch.

Thesis 003, 4.1.3 (Figure 4.6) on scikit-learn's bundled breast-cancer data (569
instances, 30 features; the thesis used UCI Adult, which is a download: the project
runs without network access, and breast cancer is the bundled binary task closest in
kind, a tabular record-level data set) and federated DP Baum-Welch on the dice HMM of
seed 000.  ``docs/aggregate.md`` explains the results.

Three parts (``--part``):

* ``cost``: one run of the secure protocol ``aggregate`` per number of owners K
  (``--owners``, default 2 and 4) at ``--key-bits`` (2048 unless ``--insecure``), on
  the real data; per party: wall and CPU seconds, bytes sent, Paillier operations.  And
  one run of ``dp_sum`` (an E-step of the discrete federated DP Baum-Welch).
* ``classifier``: test error against eps for even and uneven splits of the training set
  among 2 and 4 owners, averaged over ``--splits`` random train/test splits x ``--noise``
  noise draws; baselines: the non-private classifier on the pooled data, its DP version
  (one owner with everything, the same L2 noise at n), the non-private aggregate.  The
  DP aggregate is computed as the protocol publishes it (mean of the local classifiers
  plus the L2 K-norm noise of the smallest owner: the ``aggregate`` protocol's output
  up to its 2^-32 rounding, which the protocol tests check); reports the smallest eps
  on the grid at which the mean error is within 5 points of the pooled classifier.
* ``hmm``: federated DP Baum-Welch on the 2-state dice HMM: held-out log-likelihood per
  symbol and Viterbi state accuracy against eps, for K owners sharing a fixed pool of
  sequences, against one owner alone (1/K of the data) and against every owner adding
  its own noise (no secure sum: K times the noise variance).

Seeded (``--seed``): a benchmark, not a release.  Timings depend on the host's load:
the table notes ``os.getloadavg()``.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from smc_hmm.bench import common

EPS_GRID = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
SPLITS = {
    "2 owners, even": (0.5, 0.5),
    "2 owners, uneven": (0.25, 0.75),
    "4 owners, even": (0.25, 0.25, 0.25, 0.25),
    "4 owners, uneven": (0.1, 0.2, 0.3, 0.4),
}
LAMBDA = 1.0  # the thesis's choice (Figure 4.6)
TEST_FRACTION = 0.3


# -- data ---------------------------------------------------------------------------------


def breast_cancer(seed: int, test_fraction: float = TEST_FRACTION):
    """A stratified random train/test split of scikit-learn's breast-cancer data, each row
    standardised (training statistics, treated as public like the thesis's
    discretisation of Adult), with a constant feature, scaled to unit L2 norm (a
    per-record map).  Returns (X_train, y_train, X_test, y_test), labels +-1."""
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    y = np.where(y == 1, 1, -1)
    rng = np.random.default_rng(seed)
    test = np.zeros(y.size, dtype=bool)
    for label in (-1, 1):
        idx = np.flatnonzero(y == label)
        test[rng.choice(idx, int(round(test_fraction * idx.size)), replace=False)] = True
    mean, std = x[~test].mean(axis=0), x[~test].std(axis=0)
    z = np.hstack([(x - mean) / std, np.ones((y.size, 1))])
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    return z[~test], y[~test], z[test], y[test]


def split_owners(x, y, fractions, rng) -> list[tuple[np.ndarray, np.ndarray]]:
    """A random partition of the training set into owners of the given size fractions."""
    order = rng.permutation(y.size)
    cuts = np.round(np.cumsum(fractions) * y.size).astype(int)[:-1]
    return [(x[p], y[p]) for p in np.split(order, cuts)]


def error(w, x, y) -> float:
    from smc_hmm.dp.classifier import classify

    return float(np.mean(classify(w, x) != y))


# -- the classifier sweep -----------------------------------------------------------------


def classifier_sweep(
    eps_grid=EPS_GRID,
    splits=SPLITS,
    *,
    lam: float = LAMBDA,
    n_splits: int = 10,
    n_noise: int = 20,
    seed: int = 0,
) -> dict:
    """Mean test error (over splits x noise draws) per configuration and eps."""
    from smc_hmm.dp.classifier import train_local

    t0 = time.perf_counter()
    shape = (n_splits, len(eps_grid), n_noise)
    curves = {name: np.zeros(shape) for name in splits}
    curves[POOLED_DP] = np.zeros(shape)
    thesis = {name: np.zeros(shape) for name in splits}
    pooled_err, agg_err, sizes = [], {name: [] for name in splits}, {}
    for s in range(n_splits):
        x, y, xt, yt = breast_cancer(seed + s)
        rng = np.random.default_rng(10_000 + seed + s)
        w_pool = train_local(x, y, lam)
        pooled_err.append(error(w_pool, xt, yt))
        noisy = _noisy_errors(w_pool, y.size, (xt, yt), eps_grid, n_noise, lam, rng)
        curves[POOLED_DP][s] = noisy[0]
        for name, fractions in splits.items():
            owners = split_owners(x, y, fractions, rng)
            sizes[name] = [o[1].size for o in owners]
            mean = np.mean([train_local(ox, oy, lam) for ox, oy in owners], axis=0)
            agg_err[name].append(error(mean, xt, yt))
            noisy = _noisy_errors(
                mean, min(sizes[name]), (xt, yt), eps_grid, n_noise, lam, rng, thesis=True
            )
            curves[name][s], thesis[name][s] = noisy
    pooled = float(np.mean(pooled_err))
    out = {
        "eps": list(eps_grid),
        "lambda": lam,
        "n_splits": n_splits,
        "n_noise": n_noise,
        "train_size": int(x.shape[0]),
        "test_size": int(xt.shape[0]),
        "dim": int(x.shape[1]),
        "owner_sizes": sizes,
        "pooled_error": pooled,
        "aggregate_error_no_noise": {k: float(np.mean(v)) for k, v in agg_err.items()},
        "mean_error": {k: v.mean(axis=(0, 2)).tolist() for k, v in curves.items()},
        "std_error": {k: v.std(axis=(0, 2)).tolist() for k, v in curves.items()},
        "thesis_laplace_error": {k: v.mean(axis=(0, 2)).tolist() for k, v in thesis.items()},
        "seconds": time.perf_counter() - t0,
    }
    out["smallest_eps_within_5_points"] = {
        k: next((e for e, m in zip(eps_grid, v) if m <= pooled + 0.05), None)
        for k, v in out["mean_error"].items()
    }
    return out


#: the baseline of one owner holding all the training data, with the same L2 noise
POOLED_DP = "pooled, DP (one owner with all data)"


def _noisy_errors(w, n: int, test, eps_grid, n_noise: int, lam: float, rng, thesis=False):
    """Test errors of ``w`` plus the L2 K-norm noise of ``n`` records, per eps and noise
    draw (an array eps x draws); with ``thesis`` also (drawn after each L2 draw) those
    with the thesis's Laplace noise: (L2 errors, Laplace errors)."""
    from smc_hmm.dp.classifier import l2_noise, laplace_noise_thesis

    xt, yt = test
    l2, laplace = np.zeros((len(eps_grid), n_noise)), np.zeros((len(eps_grid), n_noise))
    for i, eps in enumerate(eps_grid):
        for r in range(n_noise):
            l2[i, r] = error(w + l2_noise(w.size, n, eps, lam, rng), xt, yt)
            if thesis:
                lap = laplace_noise_thesis(w.size, n, eps, lam, rng)
                laplace[i, r] = error(w + lap, xt, yt)
    return l2, laplace


# -- the federated HMM sweep --------------------------------------------------------------


def dice_models():
    from smc_hmm.hmm import DiscreteHMM

    fair, loaded = [1 / 6] * 6, [0.1] * 5 + [0.5]
    true = DiscreteHMM([0.5, 0.5], [[0.95, 0.05], [0.1, 0.9]], [fair, loaded])
    skeleton = DiscreteHMM(
        [0.5, 0.5],
        [[0.8, 0.2], [0.2, 0.8]],
        [[0.2, 0.16, 0.16, 0.16, 0.16, 0.16], [0.12, 0.12, 0.12, 0.12, 0.12, 0.4]],
    )
    return true, skeleton


def _sample(model, count, length, rng):
    pairs = [model.sample(length, rng) for _ in range(count)]
    return [p[0] for p in pairs], np.array([p[1] for p in pairs])


def _scores(model, test_obs, test_states) -> tuple[float, float]:
    from smc_hmm.hmm import log_likelihood, viterbi

    ll = sum(log_likelihood(model, o) for o in test_obs) / test_states.size
    acc = np.mean([np.mean(viterbi(model, o)[0] == s) for o, s in zip(test_obs, test_states)])
    return float(ll), float(acc)


def _local_noise_aggregate(rng):
    """Every owner adds its own full-scale noise before an (insecure) sum: no secure sum."""
    from smc_hmm.dp.federated import laplace_vector

    def aggregate(vectors, scales):
        return sum(np.asarray(v) + laplace_vector(scales, rng) for v in vectors)

    return aggregate


def hmm_sweep(
    eps_grid=(0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, math.inf),
    owners=(2, 5, 10),
    *,
    total: int = 400,
    length: int = 20,
    n_iter: int = 5,
    reps: int = 5,
    seed: int = 0,
) -> dict:
    """Held-out log-likelihood per symbol and Viterbi state accuracy of federated DP
    Baum-Welch (noise once on the secure total; its distribution does not depend on K),
    one owner alone (total / K sequences) and per-owner noise, per K and eps."""
    from smc_hmm.dp.federated import federated_dp_baum_welch
    from smc_hmm.dp.random import DPRandom

    t0 = time.perf_counter()
    true, skeleton = dice_models()
    rng = np.random.default_rng(seed)
    test_obs, test_states = _sample(true, 200, length, rng)
    res: dict = {"eps": [("inf" if math.isinf(e) else e) for e in eps_grid], "curves": {}}
    res["true_model"] = dict(zip(("ll", "acc"), _scores(true, test_obs, test_states)))
    res["skeleton"] = dict(zip(("ll", "acc"), _scores(skeleton, test_obs, test_states)))

    def run(data, eps, rep, aggregate=None):
        e = 1e15 if math.isinf(eps) else eps
        r = DPRandom.insecure_seeded(seed * 7919 + rep)
        agg = aggregate(r) if aggregate else None
        fit = federated_dp_baum_welch(
            skeleton, data, e, max_length=length, n_iter=n_iter, rng=r, aggregate=agg
        )
        return _scores(fit.model, test_obs, test_states)

    def curve(name, make_data, aggregate=None):
        ll = np.zeros((reps, len(eps_grid)))
        acc = np.zeros_like(ll)
        for rep in range(reps):
            data = make_data(np.random.default_rng(1000 * seed + rep))
            for i, eps in enumerate(eps_grid):
                ll[rep, i], acc[rep, i] = run(data, eps, 100 * rep + i, aggregate)
        res["curves"][name] = {"ll": ll.mean(0).tolist(), "acc": acc.mean(0).tolist()}

    def pool(k):
        def make(r):
            obs, _ = _sample(true, total, length, r)
            return [obs[j::k] for j in range(k)]

        return make

    curve(f"federated (any K, {total} sequences in all)", pool(1))
    for k in owners:
        curve(f"one owner alone ({total // k} sequences)", lambda r, k=k: [pool(k)(r)[0]])
        curve(f"K = {k}, each owner adds its own noise", pool(k), _local_noise_aggregate)
    res.update(
        total=total, length=length, n_iter=n_iter, reps=reps, seconds=time.perf_counter() - t0
    )
    return res


# -- protocol cost ------------------------------------------------------------------------


def protocol_costs(key_bits: int = 2048, owners=(2, 4), *, seed: int = 0) -> dict:
    """One secure run of ``aggregate`` per K (uneven split of the real data) and one
    ``dp_sum`` E-step of the dice HMM: per-party time, bytes and operations."""
    x, y, _, _ = breast_cancer(seed)
    out: dict = {"key_bits": key_bits, "aggregate": {}, "load": os.getloadavg()}
    lead_key, curator_key = common.throwaway_keypair(key_bits), common.throwaway_keypair(key_bits)
    keys = {"p1": lead_key, "trent": curator_key}
    for k in owners:
        out["aggregate"][k] = _aggregate_cost(k, (x, y), keys, min(key_bits, 2048), seed)
    out["dp_sum"] = _dp_sum_cost(curator_key, min(key_bits, 2048), seed)
    return out


def _aggregate_cost(k: int, train, keys: dict, min_bits: int, seed: int) -> dict:
    """One secure run of ``aggregate`` among ``k`` owners of the training set ``train``."""
    from smc_hmm.runtime import run_protocol

    x, y = train
    fractions = SPLITS[f"{k} owners, uneven"] if k in (2, 4) else (1 / k,) * k
    data = split_owners(x, y, fractions, np.random.default_rng(seed))
    names = tuple(f"p{i + 1}" for i in range(k))
    params = {
        "owners": list(names),
        "dim": int(x.shape[1]),
        "eps": 1.0,
        "lam": LAMBDA,
        "max_size": 1 << 20,
    }
    parties = {names[0]: ("lead", data[0])}
    parties.update({n: ("owner", d) for n, d in zip(names[1:], data[1:])})
    parties.update({"trent": ("curator", None), "dave": ("user", None)})
    t0 = time.perf_counter()
    result = run_protocol(
        "aggregate", params, parties, keys=keys, min_key_bits=min_bits, timeout=600
    )
    return {
        "elapsed": time.perf_counter() - t0,
        "totals": result.cost.totals(),
        "parties": _parties(result.cost),
    }


def _dp_sum_cost(curator_key, min_bits: int, seed: int) -> dict:
    """One secure run of ``dp_sum``: an E-step of the dice HMM's federated DP Baum-Welch
    among 4 owners."""
    from smc_hmm.dp.federated import count_bound, noise_scales, owner_counts
    from smc_hmm.runtime import run_protocol

    true, skeleton = dice_models()
    rng = np.random.default_rng(seed)
    data = [_sample(true, 100, 20, rng)[0] for _ in range(4)]
    vectors = [owner_counts(skeleton, d, max_length=20) for d in data]
    scales = noise_scales(skeleton, 0.2, max_length=20)
    names = ("p1", "p2", "p3", "p4")
    params = {
        "owners": list(names),
        "length": int(scales.size),
        "noise_scales": [float(s) for s in scales],
        "max_abs": count_bound(skeleton, 100, 20),
    }
    parties = {names[0]: ("lead", vectors[0])}
    parties.update({n: ("owner", v) for n, v in zip(names[1:], vectors[1:])})
    parties["trent"] = ("curator", None)
    t0 = time.perf_counter()
    result = run_protocol(
        "dp_sum", params, parties, keys={"trent": curator_key}, min_key_bits=min_bits, timeout=600
    )
    return {
        "owners": 4,
        "length": int(scales.size),
        "elapsed": time.perf_counter() - t0,
        "totals": result.cost.totals(),
        "parties": _parties(result.cost),
    }


def _parties(cost) -> dict:
    return {
        name: {
            "wall": p["time"]["wall"],
            "cpu": p["time"]["cpu"],
            "bytes_sent": p["bytes"]["sent"],
            "messages_sent": p["messages"]["sent"],
            "ops": dict(p["ops"]),
        }
        for name, p in cost.parties.items()
    }


# -- the command --------------------------------------------------------------------------


def add_arguments(parser) -> None:
    parser.add_argument("--part", choices=("all", "cost", "classifier", "hmm"), default="all")
    with common.common_arguments(parser):
        parser.add_argument("--owners", type=common.bounded(2, 64), nargs="+", default=[2, 4])
        parser.add_argument(
            "--splits",
            type=common.bounded(1, 1000),
            default=10,
            help="train/test splits (default 10)",
        )
        parser.add_argument(
            "--noise", type=common.bounded(1, 10_000), default=20, help="noise draws per split (20)"
        )
        parser.add_argument(
            "--reps", type=common.bounded(1, 1000), default=5, help="HMM data sets per point (5)"
        )
        parser.add_argument("--quick", action="store_true", help="few splits and repetitions")
        parser.add_argument("--seed", type=common.bounded(0, 2**63 - 1), default=0)


def run(args) -> common.BenchResult:
    if args.part in ("all", "cost"):
        common.check_key_bits(args)
    extra: dict = {"load_before": os.getloadavg()}
    rows: list[common.Row] = []
    if args.part in ("all", "cost"):
        extra["cost"] = protocol_costs(args.key_bits, tuple(args.owners), seed=args.seed)
        rows += _cost_rows(extra["cost"])
    if args.part in ("all", "classifier"):
        n_splits, n_noise = (3, 5) if args.quick else (args.splits, args.noise)
        extra["classifier"] = classifier_sweep(n_splits=n_splits, n_noise=n_noise, seed=args.seed)
        rows += _classifier_rows(extra["classifier"])
    if args.part in ("all", "hmm"):
        reps = 2 if args.quick else args.reps
        extra["hmm"] = hmm_sweep(reps=reps, seed=args.seed)
        rows += [
            common.Row(
                f"HMM {name}: held-out LL/symbol at eps=1",
                c["ll"][1],
                None,
                "nats",
                note=f"eps=inf {c['ll'][-1]:.3f}",
            )
            for name, c in extra["hmm"]["curves"].items()
        ]
    extra["load_after"] = os.getloadavg()
    return common.BenchResult("aggregate", args.key_bits, rows, vars(args) | {}, extra=extra)


def _cost_rows(costs: dict) -> list[common.Row]:
    """Per K each party's wall time and all parties' bytes; the dp_sum run's wall time."""
    rows: list[common.Row] = []
    for k, c in costs["aggregate"].items():
        for name, p in c["parties"].items():
            rows.append(
                common.Row(
                    f"aggregate K={k}: {name} wall",
                    p["wall"],
                    None,
                    "s",
                    note=f"cpu {p['cpu']:.2f} s, sent {p['bytes_sent'] / 1e3:.1f} kB",
                )
            )
        rows.append(
            common.Row(
                f"aggregate K={k}: bytes, all parties",
                c["totals"]["bytes"],
                None,
                "B",
                note=f"{c['totals']['rounds']} rounds",
            )
        )
    c = costs["dp_sum"]
    rows.append(
        common.Row(
            f"dp_sum (4 owners, {c['length']} counts): wall",
            c["elapsed"],
            None,
            "s",
            note=f"{c['totals']['bytes'] / 1e3:.1f} kB",
        )
    )
    return rows


def _classifier_rows(sweep: dict) -> list[common.Row]:
    """The pooled classifier's error; per configuration the smallest eps within 5 points."""
    rows = [
        common.Row(
            "pooled non-private classifier: test error", sweep["pooled_error"], None, "error"
        )
    ]
    for name, e in sweep["smallest_eps_within_5_points"].items():
        rows.append(
            common.Row(
                f"{name}: smallest eps within 5 points",
                math.inf if e is None else e,
                None,
                "eps",
                note="on the grid" if e is not None else "none on the grid",
            )
        )
    return rows


def main(args) -> int:
    from smc_hmm.console import table_console

    console = table_console(140)
    result = run(args)
    result.print_table(console)
    console.print(
        f"[dim]load average before {result.extra['load_before']}, after "
        f"{result.extra['load_after']}[/]"
    )
    return common.finish(args, result, console)
