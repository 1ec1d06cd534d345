"""``smc-hmm release hmm|trace|lmgmm``: differentially private releases.

One module per subcommand, each holding its options and the command that calls the
library (:mod:`smc_hmm.dp`, which knows no command line): :mod:`~smc_hmm.cli.release.hmm`
(with :mod:`~smc_hmm.cli.release.keyword_models` for ``--keyword-models``),
:mod:`~smc_hmm.cli.release.trace` and :mod:`~smc_hmm.cli.release.lmgmm`;
:mod:`~smc_hmm.cli.release.shared` holds their help format and printing."""

from __future__ import annotations

import argparse

from smc_hmm.cli.common import check_output_path, console

HELP = "release differentially private models and traces (smc-hmm release hmm|trace|lmgmm)"
GUIDE = (
    "data-file formats (JSON, npz), the chain model of release trace and the guarantee of "
    "each mode: docs/dp-release.md"
)
LMGMM_GUIDE = "data format, the guarantee eps' = eps + k and its derivation: docs/lmgmm.md"


def configure(p: argparse.ArgumentParser) -> None:
    from smc_hmm.cli.release.hmm import add_hmm_arguments
    from smc_hmm.cli.release.trace import add_trace_arguments

    p.epilog = GUIDE
    what = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    hmm = "train and release a differentially private HMM (DP Baum-Welch)"
    add_hmm_arguments(what.add_parser("hmm", help=hmm, description=hmm, epilog=GUIDE))
    trace = "release a state trace under a policy graph (DPHMM, K-norm)"
    add_trace_arguments(what.add_parser("trace", help=trace, description=trace, epilog=GUIDE))
    from smc_hmm.cli.release import lmgmm

    classifier = "train and release a DP large-margin GMM classifier (objective perturbation)"
    lmgmm.add_arguments(
        what.add_parser("lmgmm", help=classifier, description=classifier, epilog=LMGMM_GUIDE)
    )


def run(args) -> int:
    from smc_hmm.cli.release.hmm import release_hmm
    from smc_hmm.cli.release.trace import release_trace
    from smc_hmm.dp.release import metadata_path

    # every output path, before any data is read or any noise drawn
    check_output_path(args.json)
    if args.what != "trace":
        check_output_path(args.out, "--out")
    if args.what == "hmm":  # and the privacy metadata beside the model file
        check_output_path(metadata_path(args.out), "--out's privacy metadata")
    if args.what == "lmgmm":
        from smc_hmm.cli.release import lmgmm

        return int(lmgmm.run(args, console()) or 0)
    release = release_hmm if args.what == "hmm" else release_trace
    return int(release(args, console()) or 0)
