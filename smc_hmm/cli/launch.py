"""``smc-hmm launch --config parties.toml``: every party as its own OS process here."""

from __future__ import annotations

import argparse
import json

from smc_hmm.cli.common import Output, add_json_argument, check_json_path
from smc_hmm.options import TIMEOUT
from smc_hmm.progress import status

HELP = "start every party of a parties.toml as its own process on this machine"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the run's configuration file (TOML)")
    p.add_argument(
        "--timeout",
        type=TIMEOUT,
        default=None,
        help="kill every party after this many seconds (default: run.deadline)",
    )
    add_json_argument(p, "the outputs and the merged cost")


def run(args) -> int:
    from smc_hmm.runtime import launch, load_config

    config = load_config(args.config)
    check_json_path(args.json)
    output = Output(args.json)
    with status(
        output.err, f"running {len(config.parties)} parties of {config.protocol} as processes"
    ) as shown:
        result = launch(config, timeout=args.timeout, progress=lambda msg: shown.update(msg))
    lines = [
        f"{name} (pid {result.pids[name]}, exit {result.returncodes[name]}): {json.dumps(value)}"
        for name, value in result.outputs.items()
    ]
    output.finish(result.to_dict(), result.cost, lines)  # the file, the tables, the outputs
    return 0
