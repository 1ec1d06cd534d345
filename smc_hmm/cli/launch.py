"""``smc-hmm launch --config parties.toml``: every party as its own OS process here."""

from __future__ import annotations

import argparse
import json

from smc_hmm.cli.common import check_output_path, console, write_json
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
    p.add_argument("--json", metavar="PATH", help="write outputs and the merged cost as JSON")


def run(args) -> int:
    from smc_hmm.runtime import launch, load_config

    config = load_config(args.config)
    check_output_path(args.json)
    out = console()
    err = console(stderr=True)
    with status(
        err, f"running {len(config.parties)} parties of {config.protocol} as processes"
    ) as shown:
        result = launch(config, timeout=args.timeout, progress=lambda msg: shown.update(msg))
    for name, output in result.outputs.items():
        out.print(
            f"{name} (pid {result.pids[name]}, exit {result.returncodes[name]}): "
            f"{json.dumps(output)}"
        )
    result.cost.render(out)
    write_json(args.json, result.to_dict(), out)
    return 0
