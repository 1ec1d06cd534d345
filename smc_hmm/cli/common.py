"""What every ``smc-hmm`` command shares: the console, JSON output, plugin lookup,
key-size checks and the one-line error.

Command modules (:mod:`smc_hmm.cli.demo`, :mod:`smc_hmm.cli.bench`, ...) import this
module and never one another, so adding a command touches one new module and one line
of :data:`smc_hmm.cli.COMMANDS`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from smc_hmm.errors import ConfigError, InvalidInputError

DEFAULT_DEMO = "keyword"
DEMO_GROUP = "smc_hmm.demos"
BENCH_GROUP = "smc_hmm.benchmarks"


def console(stderr: bool = False):
    """A rich console; tables adapt to the width (terminal, COLUMNS, else 80)."""
    from rich.console import Console

    return Console(stderr=stderr)


def plugins(group: str) -> dict:
    """Entry points of ``group`` by name (loaded only when used)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=group)}


def resolve_entry(group: str, kind: str, name: str) -> tuple[Callable, Callable | None]:
    """(run, add_arguments or None) of the plugin ``name`` in entry-point ``group``."""
    found = plugins(group)
    if name not in found:
        raise ConfigError(f"unknown {kind} {name!r} (known: {', '.join(sorted(found))})")
    try:
        fn = found[name].load()
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{kind} {name!r} failed to load: {e}") from e
    if not callable(fn):
        raise ConfigError(f"{kind} {name!r} is not callable")
    add = getattr(fn, "add_arguments", None)
    if add is None:
        add = getattr(sys.modules.get(getattr(fn, "__module__", ""), None), "add_arguments", None)
    return fn, add


def write_json(path: str | None, data, out) -> None:
    """Write ``data`` as indented JSON to ``path`` (nothing if ``path`` is empty)."""
    if not path:
        return
    try:
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e
    out.print(f"wrote {path}")


def check_key_bits(args, purpose: str = "tests and reproductions only") -> None:
    """Keys below 2048 bits need ``--insecure``."""
    if args.key_bits < 2048 and not getattr(args, "insecure", False):
        raise InvalidInputError(
            f"{args.key_bits}-bit keys are insecure: add --insecure ({purpose})"
        )


def one_line(exc: BaseException) -> str:
    """The error's message on one line (typed errors print as one line, exit code 2)."""
    return " ".join(str(exc).split()) or type(exc).__name__
