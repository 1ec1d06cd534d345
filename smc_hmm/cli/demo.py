"""``smc-hmm demo [NAME]``: run a registered demo in-process and print its cost table.

Demos are plugins of the ``smc_hmm.demos`` entry-point group (the bundled ones live
in the top-level ``demos`` package): ``fn(args, output) -> exit code``, optionally
with an ``add_arguments(parser)`` for their own options; ``output`` is a
:class:`smc_hmm.cli.common.Output`: result lines on standard output, tables and
progress on its ``err`` console, the ``--json`` report through ``finish``.
"""

from __future__ import annotations

import argparse

from smc_hmm.cli import common
from smc_hmm.errors import InvalidInputError
from smc_hmm.options import TIMEOUT, check_output_dir

HELP = "run a named demo in-process and print the cost table"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "name",
        nargs="?",
        default=common.DEFAULT_DEMO,
        help=f"demo to run (default {common.DEFAULT_DEMO}; --list shows all)",
    )
    p.add_argument("--list", action="store_true", help="list the demos and exit")
    common.add_key_arguments(p)
    p.add_argument("--timeout", type=TIMEOUT, default=60.0, help="per-receive timeout, seconds")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed inputs and keys (INSECURE, reproducible runs only)",
    )
    common.add_json_argument(p, "the result and cost")
    p.add_argument(
        "--views",
        metavar="DIR",
        help="keyword demo: write what each party received per utterance to "
        "DIR/utterance-N/<party>.json (docs/views.md)",
    )


def run(args) -> int:
    out = common.console()
    if args.list:
        for name in sorted(common.plugins(common.DEMO_GROUP)):
            out.print(name + (" (default)" if name == common.DEFAULT_DEMO else ""))
        return 0
    common.check_key_bits(args)
    if args.seed is not None and not args.insecure:
        raise InvalidInputError(
            "--seed draws keys from a non-cryptographic generator: add --insecure "
            "(reproducible runs only)"
        )
    common.check_json_path(args.json)
    if args.views and args.name != common.DEFAULT_DEMO:
        raise InvalidInputError(
            f"--views records the keyword demo's runs; the {args.name} demo does not (use "
            "smc-hmm party --views for any protocol)"
        )
    check_output_dir(args.views, "--views")
    fn, _ = common.resolve_entry(common.DEMO_GROUP, "demo", args.name)
    return int(fn(args, common.Output(args.json)) or 0)
