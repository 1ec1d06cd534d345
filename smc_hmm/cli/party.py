"""``smc-hmm party --role NAME --config parties.toml``: one party in this process.

The party connects to its peers over TCP with mutual TLS (:mod:`smc_hmm.runtime`);
against a serving party (``smc-hmm serve``) it runs as that party's client.
"""

from __future__ import annotations

import argparse
import json
import sys

from smc_hmm.cli.common import check_output_path, console
from smc_hmm.errors import ConfigError
from smc_hmm.options import check_output_dir

HELP = "run one party of a parties.toml in this process (TCP + mutual TLS)"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", required=True, help="this process's party name in the config")
    p.add_argument("--config", required=True, help="the run's configuration file (TOML)")
    p.add_argument("--json", metavar="PATH", help="write this party's result and cost as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.add_argument(
        "--views",
        metavar="DIR",
        help="write what this party received (decrypted where it holds the key) to "
        "DIR/<role>.json (docs/views.md)",
    )


def run(args) -> int:
    from smc_hmm.runtime import load_config, run_party

    config = load_config(args.config)
    check_output_path(args.json)
    check_output_dir(args.views, "--views")
    if config.insecure:
        print(
            f"smc-hmm: warning: {config.key_bits}-bit keys with run.insecure = true are "
            "INSECURE (tests and reproductions only)",
            file=sys.stderr,
        )
    from smc_hmm.runtime.serve import serving_party

    server = serving_party(config)
    if server is not None and args.role != server:  # a client of the serving party
        from smc_hmm.runtime.client import run_party_client

        if args.views:
            raise ConfigError("--views: a client of a serving party records no views yet")
        result = run_party_client(args.role, config, result_path=args.json)
    else:
        if server is not None:
            raise ConfigError(
                f"{args.role} serves in {args.config}: start it with smc-hmm serve --role "
                f"{args.role}"
            )
        result = run_party(args.role, config, result_path=args.json, views=args.views)
    if not args.quiet:
        console().print(
            f"{args.role}: done in {result['elapsed']:.3f} s, output: "
            f"{json.dumps(result['output'])}"
        )
    return 0
