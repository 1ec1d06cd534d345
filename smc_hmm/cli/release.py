"""``smc-hmm release hmm|trace``: differentially private releases (:mod:`smc_hmm.dp.release`)."""

from __future__ import annotations

import argparse

from smc_hmm.cli.common import check_output_path, console

HELP = "release differentially private models and traces (smc-hmm release hmm|trace)"


def configure(p: argparse.ArgumentParser) -> None:
    from smc_hmm.dp.release import add_hmm_arguments, add_trace_arguments

    what = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    add_hmm_arguments(
        what.add_parser(
            "hmm", help="train and release a differentially private HMM (DP Baum-Welch)"
        )
    )
    add_trace_arguments(
        what.add_parser("trace", help="release a state trace under a policy graph (DPHMM, K-norm)")
    )


def run(args) -> int:
    from smc_hmm.dp.release import release_hmm, release_trace

    check_output_path(args.json)  # release hmm checks --out itself, before any work
    release = release_hmm if args.what == "hmm" else release_trace
    return int(release(args, console()) or 0)
