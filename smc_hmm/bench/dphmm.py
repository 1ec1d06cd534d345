"""``smc-hmm bench dphmm``: runtime per release of the DPHMM release loop (grid world).

Runs :func:`smc_hmm.dp.evaluation.gridworld.run_benchmark` (DPHMM paper, section 8;
``docs/dphmm.md``) on a ``--grid`` x ``--grid`` grid world: ``--sequences`` simulated
traces of ``--steps`` releases each, the same traces for every method:

- ``util``: DPHMM with the utility graph G_util(r) (``--r``);
- ``trs``: DPHMM with the one-step-transition graph G_trs;
- ``dpls``: the delta-location-set baseline of [27] (delta = 0.01, complete graph).

It reports the time per release (the whole Algorithm 2 step: prior, C_t, repair,
sensitivity hull, K-norm sample, posterior), median and 95th percentile, and the mean
degree of protection (DoP) of the true state and mean error ||z_t - f(s*_t)||_2.  The
noise is seeded (``--seed``): a benchmark, not a release.  No baseline ratio: the table's
"baseline" column holds the DPLS figure next to each DPHMM one for comparison.
"""

from __future__ import annotations

from smc_hmm.bench.common import BenchResult, Row, add_json_argument, bounded, finish

LABELS = {
    "util": "utility graph G_util(r)",
    "trs": "one-step transition graph G_trs",
    "dpls": "delta-location set (DPLS baseline)",
}


def run(
    grid: int = 20,
    sequences: int = 4,
    steps: int = 50,
    eps: float = 1.0,
    r: float = 2.0,
    seed: int = 0,
) -> BenchResult:
    from smc_hmm.dp.evaluation.gridworld import run_benchmark

    res = run_benchmark(grid, n_sequences=sequences, n_steps=steps, eps=eps, r=r, seed=seed)
    methods = res["methods"]
    rows: list[Row] = []
    for name in ("util", "trs", "dpls"):
        m = methods[name]
        label = LABELS[name] if name != "util" else f"utility graph G_util(r={r:g})"
        rows.append(
            Row(
                f"{label}: time per release, median",
                m["ms_per_release_median"] / 1e3,
                None,
                "s",
                note=f"p95 {m['ms_per_release_p95']:.3g} ms, mean "
                f"{m['ms_per_release_mean']:.3g} ms, {m['releases']} releases",
            )
        )
        rows.append(
            Row(f"{label}: time per release, p95", m["ms_per_release_p95"] / 1e3, None, "s")
        )
        rows.append(
            Row(
                f"{label}: mean DoP of the true state",
                m["dop_mean"],
                None,
                "states",
                note=f"mean |C_t| {m['c_size_mean']:.1f}",
            )
        )
        rows.append(
            Row(
                f"{label}: mean error ||z - f(s*)||_2",
                m["error_mean"],
                None,
                "cells",
                note=f"rms {m['error_rms']:.3g}",
            )
        )
    return BenchResult(
        "dphmm",
        0,
        rows,
        {**res["params"], "grid": res["grid"], "n_states": res["n_states"]},
        extra={
            "methods": methods,
            "wall_seconds": res["wall_seconds"],
            "machine_detail": res["machine"],
        },
    )


def add_arguments(parser) -> None:
    # the grid's side s gives s^2 states and an s^2 x s^2 utility graph: 60 is 13 million
    # entries; each trace holds its releases
    parser.add_argument(
        "--grid", type=bounded(2, 60), default=20, help="grid side (default 20: 400 states)"
    )
    parser.add_argument("--sequences", type=bounded(1, 1000), default=4, help="traces (default 4)")
    parser.add_argument(
        "--steps", type=bounded(1, 100_000), default=50, help="releases per trace (default 50)"
    )
    parser.add_argument("--eps", type=float, default=1.0, help="eps per release (default 1)")
    parser.add_argument("--r", type=float, default=2.0, help="utility-graph radius (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    add_json_argument(parser)


def main(args) -> int:
    from rich.table import Table

    from smc_hmm.console import console as make_console
    from smc_hmm.console import table_console

    console = table_console(150)
    make_console(stderr=True).print(
        f"[dim]... DPHMM on a {args.grid}x{args.grid} grid world: {args.sequences} traces x "
        f"{args.steps} releases, eps {args.eps:g}, r {args.r:g}[/]"
    )
    result = run(args.grid, args.sequences, args.steps, args.eps, args.r, args.seed)
    table = Table(
        title=f"dphmm benchmark: {args.grid}x{args.grid} grid "
        f"({result.params['n_states']} states), eps {args.eps:g}, "
        f"{args.sequences} x {args.steps} releases per method"
    )
    for col in (
        "method",
        "median ms/release",
        "p95 ms/release",
        "mean DoP",
        "mean error",
        "mean |C_t|",
    ):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, label in LABELS.items():
        m = result.extra["methods"][name]
        if name == "util":
            label = f"utility graph G_util(r={args.r:g})"
        table.add_row(
            label,
            f"{m['ms_per_release_median']:.3g}",
            f"{m['ms_per_release_p95']:.3g}",
            f"{m['dop_mean']:.2f}",
            f"{m['error_mean']:.3g}",
            f"{m['c_size_mean']:.1f}",
        )
    console.print(table)
    console.print(f"[dim]wall time {result.extra['wall_seconds']:.1f} s[/]")
    return finish(args, result, console)
