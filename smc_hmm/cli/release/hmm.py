"""``smc-hmm release hmm``: its options and the command, which trains and writes a DP HMM
with :func:`smc_hmm.dp.release.release_hmm_model` (what is released and what is refused:
:mod:`smc_hmm.dp.release`, ``docs/dp-release.md``), or, with ``--keyword-models``, DP
keyword HMMs (:mod:`smc_hmm.cli.release.keyword_models`)."""

from __future__ import annotations

import argparse

from smc_hmm.cli.release import keyword_models
from smc_hmm.cli.release.shared import EPS, bounded, describe, print_json, warn, write_json_file
from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.release import (
    SAMPLERS,
    TOPOLOGIES,
    HmmReleaseOptions,
    check_out,
    metadata_path,
    release_hmm_model,
)
from smc_hmm.limits import MAX_RELEASE_STATES, MAX_SEQUENCE_LENGTH, MAX_WIDTH
from smc_hmm.options import add_checked, check_output_path

__all__ = ["HMM_DESCRIPTION", "add_hmm_arguments", "release_hmm"]

HMM_DESCRIPTION = (
    "Train an HMM on the sequences of a data file from a public skeleton and release it "
    "with eps-differential privacy (DP Baum-Welch, paper 000: Laplace noise on the expected "
    "counts in every EM iteration, OpenDP's hardened sampler)."
)


def add_hmm_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``smc-hmm release hmm`` (and its description and help format)."""
    describe(parser, HMM_DESCRIPTION)
    _add_data_arguments(parser)
    _add_mode_arguments(parser)
    _add_model_arguments(parser)
    _add_noise_and_output_arguments(parser)
    keyword_models.add_arguments(parser)


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The data set, the budget and the public sizes."""
    a = parser.add_argument
    a(
        "--data",
        required=True,
        metavar="FILE",
        help='sequences: .json (e.g. [[0, 1, 5], [3, 3]] or {"sequences": [...], '
        '"n_symbols": 6}) or .npz (one array per sequence)',
    )
    a("--eps", type=EPS, required=True, metavar="E", help="total privacy budget (> 0)")
    add_checked(
        a,
        "--states",
        bounded(MAX_RELEASE_STATES),
        convert=int,
        metavar="N",
        help=f"hidden states (default 3; 5 with --keyword-models), at most {MAX_RELEASE_STATES:,}",
    )
    add_checked(
        a,
        "--max-length",
        bounded(MAX_SEQUENCE_LENGTH),
        convert=int,
        metavar="L",
        help="declared maximum sequence length (required: a public bound), at most "
        f"{MAX_SEQUENCE_LENGTH:,}",
    )


def _add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the noise goes (every EM iteration, or -- not DP -- the last only)."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--every-iteration",
        action="store_true",
        help="noise in every EM iteration, eps/K each: eps-DP on the data set (the default "
        "mode; the flag only spells it out)",
    )
    mode.add_argument(
        "--not-dp-last-iteration",
        action="store_true",
        help="paper 000's experiment 1: plain EM, then noise in the last iteration only. "
        "NOT differentially private: no guarantee is claimed (the privacy JSON has "
        "guarantee null); for reproducing the paper only",
    )
    parser.add_argument(
        "--truncate",
        action="store_true",
        help="kept for older command lines: a sequence longer than L is always cut to its "
        "first L observations (a refusal would reveal that it is there)",
    )


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The public skeleton: the kind of records, their bound and shape, the EM rounds."""
    a = parser.add_argument
    add_checked(
        a,
        "--feature-bound",
        check_epsilon,
        metavar="R",
        help="frames are clipped to ||x||_2 <= R (required for feature frames)",
    )
    add_checked(
        a,
        "--dimension",
        bounded(MAX_WIDTH),
        convert=int,
        metavar="D",
        help="the public dimension of feature frames (required for them unless --init "
        "gives it; frames of another dimension are dropped)",
    )
    a(
        "--iterations",
        type=int,
        metavar="K",
        help="noisy EM iterations (default 5); with --not-dp-last-iteration the cap on "
        "plain EM iterations (default 80)",
    )
    a("--topology", choices=TOPOLOGIES, default="ergodic", help="the public skeleton's shape")
    a("--covariance", choices=("diag", "full"), default="diag", help="Gaussian covariances")
    add_checked(
        a,
        "--symbols",
        bounded(MAX_WIDTH),
        convert=int,
        metavar="M",
        help="alphabet size of symbol sequences (without it: the file's n_symbols; never "
        "taken from the data; symbols outside 0..M-1 drop their sequence)",
    )
    a(
        "--init",
        metavar="MODEL.npz",
        help="public skeleton: model 0 of this model file (sequences it gives probability "
        "zero add no counts)",
    )


def _add_noise_and_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The neighbouring relation, the noise's sampler and seed, and the output files."""
    a = parser.add_argument
    a(
        "--neighbouring",
        choices=("add_remove", "substitute"),
        default="add_remove",
        help="neighbouring data sets: one sequence added/removed, or replaced",
    )
    a(
        "--sampler",
        choices=SAMPLERS,
        help="Laplace sampler: opendp (the default: hardened, OpenDP's CSPRNG) or float "
        "(NOT hardened against floating-point attacks; the sampler of --seed, since "
        "OpenDP cannot be seeded)",
    )
    a("--out", default="released_hmm.npz", metavar="MODEL.npz", help="released model file")
    a("--json", metavar="PATH", help="also write the release summary as JSON")
    a(
        "--seed",
        type=int,
        metavar="S",
        help="INSECURE seeded noise with the float sampler (reproducible experiments only)",
    )


def options(args: argparse.Namespace) -> HmmReleaseOptions:
    """The release's choices from the command line (``--states`` defaults to 3 here; a
    Namespace without the newer options reads them as not given)."""
    return HmmReleaseOptions(
        data=args.data,
        eps=args.eps,
        max_length=args.max_length,
        states=3 if args.states is None else args.states,
        every_iteration=getattr(args, "every_iteration", False),
        not_dp_last_iteration=getattr(args, "not_dp_last_iteration", False),
        iterations=args.iterations,
        feature_bound=getattr(args, "feature_bound", None),
        dimension=getattr(args, "dimension", None),
        symbols=getattr(args, "symbols", None),
        init=getattr(args, "init", None),
        topology=args.topology,
        covariance=args.covariance,
        neighbouring=args.neighbouring,
        sampler=args.sampler,
        out=args.out,
        seed=args.seed,
    )


def release_hmm(args: argparse.Namespace, console=None) -> int:
    """Run ``smc-hmm release hmm`` (:mod:`smc_hmm.dp.release`); returns 0."""
    check_output_path(args.json)
    if getattr(args, "keyword_models", False):
        guarantee_path = metadata_path(check_out(args.out, metadata=True))
        return keyword_models.release_command(args, console, guarantee_path)
    summary, warnings = release_hmm_model(options(args))
    for text in warnings:
        warn(console, text)
    print_json(console, summary)
    if args.json:
        write_json_file(console, args.json, summary)
    return 0
