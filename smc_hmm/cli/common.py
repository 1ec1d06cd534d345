"""What every ``smc-hmm`` command shares: the console, JSON output and the check of
output paths, plugin lookup, key-size options and checks, and the one-line error.

Command modules (:mod:`smc_hmm.cli.demo`, :mod:`smc_hmm.cli.bench`, ...) import this
module and never one another, so adding a command touches one new module and one line
of :data:`smc_hmm.cli.COMMANDS`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from smc_hmm.bench.common import KEY_FLAGS, check_key_bits
from smc_hmm.crypto import MAX_KEY_BITS
from smc_hmm.errors import ConfigError
from smc_hmm.options import check_output_path

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


def add_key_arguments(p, insecure_help: str = "tests and reproductions only") -> None:
    """``--key-bits``, ``--insecure`` and ``--allow-large-keys``, spelled alike everywhere;
    :func:`check_key_bits` applies them."""
    p.add_argument("--key-bits", type=int, default=2048, help="Paillier modulus size")
    p.add_argument(
        "--insecure", action="store_true", help=f"allow keys below 2048 bits ({insecure_help})"
    )
    add_large_keys_argument(p)


def add_large_keys_argument(p) -> None:
    p.add_argument(
        "--allow-large-keys",
        action="store_true",
        help=f"allow keys above {MAX_KEY_BITS} bits (generating one can take hours)",
    )


__all__ = [
    "BENCH_GROUP",
    "KEY_FLAGS",
    "DEFAULT_DEMO",
    "DEMO_GROUP",
    "add_key_arguments",
    "add_large_keys_argument",
    "check_key_bits",
    "check_output_path",
    "console",
    "one_line",
    "plugins",
    "resolve_entry",
    "write_json",
]


def one_line(exc: BaseException) -> str:
    """The error's message on one line (typed errors print as one line, exit code 2)."""
    return " ".join(str(exc).split()) or type(exc).__name__
