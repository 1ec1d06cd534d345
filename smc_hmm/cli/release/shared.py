"""What the ``smc-hmm release`` commands share: the help format (every default shown,
except where there is none), the ``--eps`` type, the one-line warnings and the printed
JSON."""

from __future__ import annotations

import argparse
import json
import sys

from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.release import check_count
from smc_hmm.errors import ConfigError
from smc_hmm.options import option_type

__all__ = [
    "EPS",
    "HELP_EPILOG",
    "HelpFormatter",
    "bounded",
    "describe",
    "print_json",
    "warn",
    "write_json_file",
]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, except where there is none (``None``, an off flag):
    there the help text says what happens without the option."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


HELP_EPILOG = (
    "The commands, data formats and modes: docs/dp-release.md; the guarantees: docs/dp-layer.md."
)
#: the largest ``--eps`` a release takes: far beyond any meaningful guarantee (e^1000
#: bounds nothing), and small enough that every budget derived from it stays finite
MAX_EPS = 1000.0


def _check_release_epsilon(value, name: str = "--eps", **kwargs) -> float:
    eps = check_epsilon(value, name, **kwargs)
    if eps > MAX_EPS:
        raise ConfigError(
            f"{name} {value} is above {MAX_EPS:g}: a guarantee of e^{MAX_EPS:g} bounds nothing"
        )
    return eps


EPS = option_type(_check_release_epsilon, "--eps")
"""``type=`` of ``--eps``: checked while the command line is parsed (at most
:data:`MAX_EPS`)."""


def bounded(maximum: int):
    """A check for :func:`~smc_hmm.options.option_type`: an integer from 1 to ``maximum``."""
    return lambda value, name: check_count(value, name, 1, maximum)


def describe(parser: argparse.ArgumentParser, description: str) -> None:
    """A release command's description, epilog and help format."""
    parser.description = description
    parser.epilog = HELP_EPILOG
    parser.formatter_class = HelpFormatter


def print_json(console, data: dict) -> None:
    text = json.dumps(data, indent=2, sort_keys=True)
    if console is None:
        print(text)
    else:
        console.print(text, markup=False, highlight=False, soft_wrap=True)


def write_json_file(console, path: str, data: dict) -> None:
    """``--json PATH``: ``data`` written to ``path``, and (with a console) a note saying so."""
    from smc_hmm.dp.release import write_json

    write_json(path, data)
    if console is not None:
        console.print(f"wrote {path}")


def warn(console, text: str) -> None:
    """A one-line warning, always on standard error (standard output carries the result
    alone); styled like ``console`` when there is one."""
    if console is None:
        print(f"warning: {text}", file=sys.stderr)
        return
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, no_color=console.no_color)
    err.print(f"[yellow]warning:[/] {escape(text)}", highlight=False, soft_wrap=True)
