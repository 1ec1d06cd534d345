"""``smc-hmm release trace``: its options and the command, which releases a state trace
with :func:`smc_hmm.dp.release.release_trace_states` (the chain model, the policy graphs
and what neighbouring traces are: :mod:`smc_hmm.dp.release`, ``docs/dp-release.md``)."""

from __future__ import annotations

import argparse

from smc_hmm.cli.release.shared import EPS, describe, print_json, warn, write_json_file
from smc_hmm.dp.params import check_epsilon, check_sensitivity
from smc_hmm.dp.release import TraceReleaseOptions, release_trace_states
from smc_hmm.options import add_checked, check_output_path

__all__ = ["TRACE_DESCRIPTION", "add_trace_arguments", "release_trace"]

TRACE_DESCRIPTION = (
    "Release a state trace of a public Markov chain under a policy graph (DPHMM, papers "
    "001/004: the K-norm mechanism on a sensitivity hull, per timestamp)."
)


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``smc-hmm release trace`` (and its description and help format)."""
    describe(parser, TRACE_DESCRIPTION)
    a = parser.add_argument
    a("--model", required=True, metavar="MODEL.npz", help="the public model (a model file)")
    a("--model-index", type=int, default=0, metavar="I", help="which model of the file")
    a("--trace", required=True, metavar="FILE", help=".json list of state indices")
    a(
        "--graph",
        required=True,
        metavar="KIND",
        help="policy graph: complete | categorical | utility | transition | FILE.json (edges)",
    )
    a("--eps", type=EPS, default=1.0, metavar="E", help="eps per release")
    add_checked(
        a,
        "--r",
        check_sensitivity,
        default=1.0,
        metavar="R",
        help="radius of the utility graph",
    )
    a("--metric", choices=("l2", "l1", "linf"), default="l2", help="utility-graph metric")
    a(
        "--coords",
        metavar="FILE",
        help="query f: .json/.npy (n_states, d) (without it: f(s) = s, the state index)",
    )
    a("--categories", metavar="FILE", help="categorical graph: .json list of n labels")
    a(
        "--repair",
        choices=("greedy", "min_area", "none"),
        default="greedy",
        help="how exposed states are protected: greedy (Algorithm 1), min_area "
        "(Algorithm 3, 2-D) or none (refuse)",
    )
    add_checked(
        a,
        "--budget",
        check_epsilon,
        metavar="B",
        help="cap on the Theorem 7.2 total (without it: none)",
    )
    a("--json", metavar="PATH", help="write the releases as JSON")
    a(
        "--seed",
        type=int,
        metavar="S",
        help="INSECURE seeded noise (reproducible experiments only; default: the OS CSPRNG)",
    )


def options(args: argparse.Namespace) -> TraceReleaseOptions:
    """The release's choices from the command line."""
    return TraceReleaseOptions(
        model=args.model,
        trace=args.trace,
        graph=args.graph,
        model_index=args.model_index,
        eps=args.eps,
        r=args.r,
        metric=args.metric,
        coords=args.coords,
        categories=args.categories,
        repair=args.repair,
        budget=args.budget,
        seed=args.seed,
    )


def release_trace(args: argparse.Namespace, console=None) -> int:
    """Run ``smc-hmm release trace`` (:mod:`smc_hmm.dp.release`); returns 0."""
    check_epsilon(args.eps, "--eps")
    check_output_path(args.json)
    out = release_trace_states(options(args))
    if out["insecure"]:
        warn(
            console, f"INSECURE: --seed {args.seed} makes the noise reproducible (experiments only)"
        )
    if console is not None:
        _trace_table(console, out)
    if args.json:
        write_json_file(console, args.json, out)
    elif console is None:
        print_json(None, out)
    return 0


def _trace_table(console, out: dict) -> None:
    from rich.table import Table

    table = Table(
        title=f"DPHMM release: {out['graph']} graph, eps {out['eps']:g}, query {out['query']}"
    )
    for col in ("t", "z", "eps", "constrained eps", "cumulative (Thm 7.2)", "|C_t|", "repairs"):
        table.add_column(col, justify="right")
    for r in out["releases"]:
        z = ", ".join(f"{v:.3f}" for v in r["z"])
        rep = f"exposed {r['exposed']} + {len(r['repair_edges'])} edges" if r["exposed"] else "-"
        c = r["constrained_epsilon"]
        cum = r["cumulative_constrained_epsilon"]
        table.add_row(
            str(r["t"]),
            z,
            f"{r['epsilon']:g}",
            c if isinstance(c, str) else f"{c:.4g}",
            cum if isinstance(cum, str) else f"{cum:.4g}",
            str(r["constraint_size"]),
            rep,
        )
    console.print(table)
