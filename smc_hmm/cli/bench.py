"""``smc-hmm bench NAME``: run a registered benchmark (docs/benchmarks.md).

Benchmarks are plugins of the ``smc_hmm.benchmarks`` entry-point group
(:mod:`smc_hmm.bench`): ``fn(args) -> exit code``, optionally with an
``add_arguments(parser)`` for their own options; ``--help`` lists them all.
"""

from __future__ import annotations

import argparse
import sys

from smc_hmm.cli import common
from smc_hmm.errors import ConfigError

HELP = "run a registered benchmark"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="benchmark to run (--list shows all)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    common.add_large_keys_argument(p)


def epilog() -> str:
    """Every benchmark with its own options, for ``smc-hmm bench --help``."""
    parts = []
    for name in sorted(common.plugins(common.BENCH_GROUP)):
        try:
            fn, add = common.resolve_entry(common.BENCH_GROUP, "benchmark", name)
        except ConfigError as e:
            parts.append(f"{name}: unavailable ({e})")
            continue
        sub = argparse.ArgumentParser(
            prog=f"smc-hmm bench {name}",
            add_help=False,
            description=(sys.modules[fn.__module__].__doc__ or "").strip().split("\n")[0],
        )
        if add is not None:
            add(sub)
        parts.append(sub.format_help().rstrip())
    return "benchmarks:\n\n" + "\n\n".join(parts)


def run(args) -> int:
    if args.list or not args.name:
        out = common.console()
        for name in sorted(common.plugins(common.BENCH_GROUP)):
            out.print(name)
        return 0
    fn, _ = common.resolve_entry(common.BENCH_GROUP, "benchmark", args.name)
    common.check_output_path(getattr(args, "json", None))
    return int(fn(args) or 0)
