"""``smc-hmm bench lmgmm-synthetic`` and ``lmgmm-speaker``: DP large-margin GMM classifiers
(thesis 003, section 4.1.2) -- test error against eps, beside the non-private classifiers.

``lmgmm-synthetic`` reproduces Figure 4.4: 500 training and 500 test points in 10
dimensions, 5 classes from unit-variance Gaussians (class means drawn once from N(0, I)),
scaled into the unit ball by the public radius ``--radius`` (rows beyond it are clipped),
lambda = 0.01, h = 0.5, ``--runs`` perturbations per eps (100 in the thesis).  One data set,
fresh noise per run, as in the thesis.  Rows check the figure's claims: the error falls as
eps grows and ends within 1 percentage point of the non-private classifier, and the whole
sweep takes less than ``--time-limit`` seconds.  ``--thesis`` adds the thesis's own
perturbation (one b shared by all classes: no guarantee) for comparison.

``lmgmm-speaker`` identifies the 5 speakers of the bundled Free Spoken Digit Dataset
features (:mod:`smc_hmm.data.speaker_features`: mean and standard deviation of 13 MFCCs per
utterance), trained on recordings 0-24 and tested on 25-49 of every digit and speaker.  The
features are standardised and scaled into the unit ball with constants from the *test*
recordings' unlabelled features (public data: the training records' privacy owes nothing
to them); the radius is their median norm (rows beyond it are clipped).  Accuracy against
eps beside the non-private large-margin classifier, a generative Gaussian per speaker on
the same features, and the frame-level 8-component GMM recorded when the file was made.

Both print eps' = eps + k next to eps (Theorem 4.1.2; ``docs/lmgmm.md``).  The noise is
seeded (``--seed``, INSECURE streams of :mod:`smc_hmm.dp.random`): a benchmark, not a
release.  ``--jobs`` lanes (default 2) share the runs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from smc_hmm.bench.common import (
    HIGHER,
    LOWER,
    BenchResult,
    Row,
    add_json_argument,
    bounded,
    bounded_float,
    finish,
    load_average,
    verdict,
)

SYNTHETIC_EPS = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)
SPEAKER_EPS = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)


@dataclass(frozen=True)
class Split:
    """Training and test points (features already in the unit ball)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def synthetic_split(
    seed: int = 44,
    n_train: int = 500,
    n_test: int = 500,
    dim: int = 10,
    n_classes: int = 5,
    radius: float = 8.0,
) -> Split:
    """Figure 4.4's data: class means ~ N(0, I), unit-variance classes, equal class sizes,
    rows divided by the public ``radius`` and clipped into the unit ball."""
    from smc_hmm.dp.lmgmm import into_unit_ball

    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_classes, dim))

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = np.arange(n) % n_classes
        return into_unit_ball(means[y] + rng.normal(size=(n, dim)), radius), y

    (xtr, ytr), (xte, yte) = draw(n_train), draw(n_test)
    return Split(xtr, ytr, xte, yte)


def speaker_split() -> tuple[Split, dict]:
    """The bundled speaker features, split by recording index, in the unit ball."""
    from smc_hmm.data.speaker_features import load_speaker_features
    from smc_hmm.dp.lmgmm import into_unit_ball

    data = load_speaker_features()
    train = data.index < 25
    test = ~train
    public = data.features[test]  # unlabelled test recordings: public constants
    centre, scale = public.mean(axis=0), public.std(axis=0)
    standard = (data.features - centre) / scale
    radius = float(np.median(np.linalg.norm(standard[test], axis=1)))
    x = into_unit_ball(standard, radius)
    split = Split(x[train], data.speaker[train], x[test], data.speaker[test])
    info = {
        "speakers": list(data.speakers),
        "radius": radius,
        "clipped_train": int(np.sum(np.linalg.norm(standard[train], axis=1) > radius)),
        "frame_gmm": data.metadata.get("frame_gmm", {}),
    }
    return split, info


def _run_tasks(
    tasks, split: Split, lam: float, h: float, phi0: np.ndarray
) -> tuple[list[float], float]:
    """Test error of one DP training per task (mode, eps, seed), and the CPU seconds the
    lane spent (what its wall time would be on an idle core)."""
    from smc_hmm.dp.lmgmm import train_dp
    from smc_hmm.dp.random import DPRandom

    cpu = time.process_time()
    errors = []
    for mode, eps, seed in tasks:
        release = train_dp(
            split.x_train,
            split.y_train,
            eps,
            lam=lam,
            h=h,
            rng=DPRandom.insecure_seeded(seed),
            perturbation=mode,
            phi0=phi0,
        )
        errors.append(release.model.error_rate(split.x_test, split.y_test))
    return errors, time.process_time() - cpu


def sweep(
    split: Split,
    eps_values,
    runs: int,
    *,
    lam: float = 0.01,
    h: float = 0.5,
    seed: int = 0,
    jobs: int = 2,
    thesis: bool = False,
) -> dict:
    """Test errors of ``runs`` DP trainings per eps (and mode), and the non-private ones."""
    from smc_hmm.dp.lmgmm import generative_classifier, guarantee, train

    start = time.perf_counter()
    model, solution = train(split.x_train, split.y_train, lam=lam, h=h)
    modes = ["objective"] + (["thesis"] if thesis else [])
    errors, lane_cpu = _dp_errors(split, modes, eps_values, runs, lam, h, seed, jobs, solution.phi)
    n, c, d = len(split.y_train), int(split.y_train.max()) + 1, split.x_train.shape[1]

    def eps_total(eps: float) -> float:
        return guarantee(n, c, d, eps, lam=lam, h=h).epsilon_total

    return {
        "non_private_error": model.error_rate(split.x_test, split.y_test),
        "generative_error": generative_classifier(split.x_train, split.y_train).error_rate(
            split.x_test, split.y_test
        ),
        "curves": {
            mode: _curve(errors[j], eps_values, eps_total if mode == "objective" else None)
            for j, mode in enumerate(modes)
        },
        "jacobian_term": guarantee(n, c, d, 1.0, lam=lam, h=h).jacobian_term,
        "wall_seconds": time.perf_counter() - start,
        "lane_cpu_seconds": lane_cpu,
        "n_train": n,
        "n_classes": c,
        "dim": d,
    }


def _dp_errors(split: Split, modes, eps_values, runs: int, lam, h, seed: int, jobs: int, phi0):
    """(test errors by mode, eps and run: an array; each lane's CPU seconds): every DP
    training seeded by (seed, eps, run, mode), shared by ``jobs`` lanes."""
    from smc_hmm.compute import Compute

    tasks = [
        (mode, float(eps), int(np.random.SeedSequence([seed, i, r, j]).generate_state(1)[0]))
        for j, mode in enumerate(modes)
        for i, eps in enumerate(eps_values)
        for r in range(runs)
    ]
    # interleave so that every lane gets a share of the slow (small-eps) runs
    order = np.random.default_rng(seed).permutation(len(tasks))
    with Compute.processes(jobs, preload=("smc_hmm.dp.lmgmm",)) as compute:
        chunks = compute.chunks([tasks[k] for k in order])
        parts = compute.map(
            _run_tasks,
            chunks,
            [split] * len(chunks),
            [lam] * len(chunks),
            [h] * len(chunks),
            [phi0] * len(chunks),
        )
    errors = np.empty(len(tasks))
    errors[order] = [e for part, _ in parts for e in part]
    return errors.reshape(len(modes), len(eps_values), runs), [cpu for _, cpu in parts]


def _curve(errors: np.ndarray, eps_values, eps_total=None) -> list[dict]:
    """One mode's points: per eps (``errors`` by eps and run) the mean error, its standard
    error and every run's; ``eps_total(eps)`` the guarantee where the mode has one."""
    runs = errors.shape[1]
    return [
        {
            "eps": float(eps),
            "eps_total": eps_total(eps) if eps_total is not None else None,
            "error_mean": float(errors[i].mean()),
            "error_sem": float(errors[i].std(ddof=1) / math.sqrt(runs)) if runs > 1 else 0.0,
            "errors": errors[i].tolist(),
        }
        for i, eps in enumerate(eps_values)
    ]


PLATEAU_PP = 0.5
"""Within this many percentage points of the non-private error the curve has arrived: a
step there may wobble (the perturbation sometimes helps) without counting as a rise."""


def _rises(curve: list[dict], non_private: float) -> int:
    """Steps where the mean error grows by more than two standard errors while above the
    non-private error by more than PLATEAU_PP, plus one if it ends no lower than it started
    without having reached that band: 0 when the error falls with eps down to the
    non-private one."""
    means = [p["error_mean"] for p in curve]
    sems = [p["error_sem"] for p in curve]
    rises = sum(
        b > a + 2 * math.hypot(sa, sb) and 100 * (b - non_private) > PLATEAU_PP
        for a, b, sa, sb in zip(means, means[1:], sems, sems[1:])
    )
    above = 100 * (means[-1] - non_private) > PLATEAU_PP
    return rises + int(len(means) > 1 and means[-1] >= means[0] and above)


def _table(console, title: str, res: dict, as_accuracy: bool) -> None:
    from rich.table import Table

    def fmt(err: float) -> str:
        return f"{100 * (1 - err if as_accuracy else err):.2f}"

    unit = "accuracy %" if as_accuracy else "test error %"
    table = Table(title=title)
    for col in ("eps", "eps'", f"DP {unit}", "+-", "thesis's b (no guarantee)"):
        table.add_column(col, justify="right")
    thesis = res["curves"].get("thesis")
    for i, p in enumerate(res["curves"]["objective"]):
        table.add_row(
            f"{p['eps']:g}",
            f"{p['eps_total']:.4g}",
            fmt(p["error_mean"]),
            f"{100 * p['error_sem']:.2f}",
            fmt(thesis[i]["error_mean"]) if thesis else "-",
        )
    console.print(table)
    console.print(
        f"non-private large-margin GMM: {fmt(res['non_private_error'])} {unit}; "
        f"generative Gaussian per class: {fmt(res['generative_error'])} {unit}"
    )


def _load() -> str:
    """The machine's load averages, for the record (timings on a busy machine)."""
    return load_average()


def _timing_rows(res: dict, jobs: int, limit: float | None = None) -> list[Row]:
    """The sweep's wall time (with the load it ran under) and its busiest lane's CPU time."""
    return [
        Row(
            "whole sweep, wall time",
            res["wall_seconds"],
            None,
            "s",
            limit=limit,
            note=f"{jobs} lanes; {_load()}",
        ),
        Row(
            "busiest lane, CPU time",
            max(res["lane_cpu_seconds"]),
            None,
            "s",
            note="the DP trainings of the busiest lane: its wall time on an idle core",
        ),
    ]


def _eps_list(text: str | None, default) -> tuple[float, ...]:
    from smc_hmm.errors import ConfigError

    if not text:
        return tuple(default)
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError as exc:
        raise ConfigError(f"--eps must be a comma-separated list of numbers: {exc}") from None
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise ConfigError("every eps must be finite and > 0")
    return tuple(sorted(values))


def _common_arguments(parser, runs: int, eps) -> None:
    parser.add_argument(
        "--runs", type=bounded(1, 10_000), default=runs, help=f"perturbations per eps ({runs})"
    )
    parser.add_argument(
        "--eps",
        metavar="E1,E2,...",
        help="noise parameters eps (default " + ",".join(f"{e:g}" for e in eps) + ")",
    )
    parser.add_argument(
        "--lam", type=bounded_float(1e-9, 1e6), default=0.01, help="lambda (default 0.01)"
    )
    parser.add_argument(
        "--huber", type=bounded_float(1e-6, 10.0), default=0.5, help="Huber parameter h (0.5)"
    )
    parser.add_argument(
        "--jobs", type=bounded(1, 256), default=2, help="parallel lanes (default 2)"
    )
    parser.add_argument(
        "--seed", type=bounded(0, 2**63 - 1), default=0, help="INSECURE noise seed (0)"
    )
    parser.add_argument(
        "--thesis",
        action="store_true",
        help="also run the thesis's shared perturbation (no guarantee)",
    )
    add_json_argument(parser)


def _sweep_with(split: Split, args, default_eps) -> tuple[tuple[float, ...], dict]:
    """:func:`sweep` with the common options (checked first)."""
    from smc_hmm.errors import ConfigError

    if args.runs < 1 or args.jobs < 1:
        raise ConfigError("--runs and --jobs must be >= 1")
    eps = _eps_list(args.eps, default_eps)
    options = dict(lam=args.lam, h=args.huber, seed=args.seed, jobs=args.jobs)
    return eps, sweep(split, eps, args.runs, thesis=args.thesis, **options)


def add_synthetic_arguments(parser) -> None:
    _common_arguments(parser, 100, SYNTHETIC_EPS)
    parser.add_argument(
        "--radius",
        type=bounded_float(1e-6, 1e6),
        default=8.0,
        help="public radius that scales the points into the unit ball (8)",
    )
    parser.add_argument(
        "--data-seed", type=bounded(0, 2**63 - 1), default=44, help="seed of the data set (44)"
    )
    parser.add_argument(
        "--time-limit",
        type=bounded_float(1e-12, 86_400.0),
        default=600.0,
        help="the sweep's time target in seconds (600)",
    )


def add_speaker_arguments(parser) -> None:
    _common_arguments(parser, 20, SPEAKER_EPS)


def run_synthetic(args) -> BenchResult:
    split = synthetic_split(seed=args.data_seed, radius=args.radius)
    eps, res = _sweep_with(split, args, SYNTHETIC_EPS)
    curve = res["curves"]["objective"]
    gap = 100 * (curve[-1]["error_mean"] - res["non_private_error"])
    rows = [
        Row(
            f"test error at eps = {p['eps']:g} (eps' = {p['eps_total']:.4g})",
            100 * p["error_mean"],
            100 * res["non_private_error"],
            "% error",
            note=f"+- {100 * p['error_sem']:.2f} (s.e.), {args.runs} runs",
            better=LOWER,
        )
        for p in curve
    ]
    rows.append(
        Row(
            "steps where the error rises with eps",
            float(_rises(curve, res["non_private_error"])),
            None,
            "steps",
            limit=0.0,
            note=f"beyond 2 s.e. and {PLATEAU_PP} pp above non-private; "
            "+1 if it ends no lower, above that band",
        )
    )
    rows.append(
        Row(f"gap to non-private at eps = {curve[-1]['eps']:g}", gap, None, "pp", limit=1.0)
    )
    rows += _timing_rows(res, args.jobs, args.time_limit)
    params = {
        "runs": args.runs,
        "eps": list(eps),
        "lam": args.lam,
        "h": args.huber,
        "radius": args.radius,
        "data_seed": args.data_seed,
        "seed": args.seed,
        "jobs": args.jobs,
        "randomness": "PCG64 seeded (INSECURE: a benchmark)",
    }
    return BenchResult("lmgmm-synthetic", 0, rows, params, extra={"results": res})


def run_speaker(args) -> BenchResult:
    split, info = speaker_split()
    eps, res = _sweep_with(split, args, SPEAKER_EPS)
    rows = [
        Row(
            f"accuracy at eps = {p['eps']:g} (eps' = {p['eps_total']:.4g})",
            100 * (1 - p["error_mean"]),
            100 * (1 - res["non_private_error"]),
            "% accuracy",
            note=f"+- {100 * p['error_sem']:.2f} (s.e.), {args.runs} runs",
            better=HIGHER,
        )
        for p in res["curves"]["objective"]
    ]
    rows.append(
        Row(
            "non-private large-margin GMM", 100 * (1 - res["non_private_error"]), None, "% accuracy"
        )
    )
    rows.append(
        Row(
            "generative Gaussian per speaker (utterance features)",
            100 * (1 - res["generative_error"]),
            None,
            "% accuracy",
        )
    )
    frame = info["frame_gmm"]
    if frame:
        rows.append(
            Row(
                f"generative {frame.get('components')}-component GMM on frames (recorded)",
                100 * frame["accuracy"],
                None,
                "% accuracy",
                note=frame.get("features", ""),
            )
        )
    rows += _timing_rows(res, args.jobs)
    params = {
        "runs": args.runs,
        "eps": list(eps),
        "lam": args.lam,
        "h": args.huber,
        "seed": args.seed,
        "jobs": args.jobs,
        **info,
        "randomness": "PCG64 seeded (INSECURE: a benchmark)",
    }
    return BenchResult("lmgmm-speaker", 0, rows, params, extra={"results": res})


def _main(run, title, as_accuracy, args) -> int:
    from smc_hmm.console import table_console

    console = table_console(120)
    result = run(args)
    res = result.extra["results"]
    _table(console, title.format(**res, runs=args.runs), res, as_accuracy)
    frame = result.params.get("frame_gmm")
    if frame:
        console.print(
            f"generative {frame['components']}-component GMM on frames (recorded when the "
            f"features were made): {100 * frame['accuracy']:.2f} accuracy %"
        )
    for row in result.rows:
        if row.limit is not None:
            console.print(
                f"{row.name}: {row.ours:.3g} {row.unit} (target {row.goal}) {verdict(row.met)}"
            )
    console.print(
        f"[dim]wall time {res['wall_seconds']:.1f} s ({_load()}); CPU per lane "
        + ", ".join(f"{c:.1f} s" for c in res["lane_cpu_seconds"])
        + "[/]"
    )
    return finish(args, result, console)


def synthetic(args) -> int:
    """Figure 4.4: test error against eps on synthetic Gaussian classes."""
    return _main(
        run_synthetic,
        "Figure 4.4: {n_classes} classes, {dim} dims, {n_train} training points, "
        "{runs} runs per eps (error %, mean and standard error)",
        False,
        args,
    )


def speaker(args) -> int:
    """DP speaker identification on the bundled FSDD utterance features."""
    return _main(
        run_speaker,
        "DP speaker identification: {n_classes} speakers, {dim} features, {n_train} "
        "training utterances, {runs} runs per eps (accuracy %)",
        True,
        args,
    )


synthetic.add_arguments = add_synthetic_arguments
speaker.add_arguments = add_speaker_arguments
