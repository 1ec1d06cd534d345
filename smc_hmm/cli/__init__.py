"""The ``smc-hmm`` command line.

Subcommands::

    smc-hmm demo [NAME] [--key-bits B] [--insecure] [--json PATH]   run a named demo in-process
    smc-hmm party --role NAME --config parties.toml [--json PATH]   run one party (its own process)
    smc-hmm launch --config parties.toml [--json PATH]              all parties as OS processes
    smc-hmm serve --role bob --config parties.toml [--scheduler A]  serve many clients (mTLS)
    smc-hmm keyword --audio FILE.wav [--models M] [--json PATH]     keyword of one recording
    smc-hmm speaker identify|verify|anonymous --audio FILE.wav      speaker of one recording
    smc-hmm spot --audio FILE.wav --keyword seven [--json PATH]     where a keyword occurs
    smc-hmm digits --audio FILE.wav [--pin 1234] [--json PATH]      a spoken digit string
    smc-hmm match --audio SNIPPET.wav [--collection DIR|FILE.npz]   which recording holds it
    smc-hmm bench NAME [...]                                        a registered benchmark
    smc-hmm cost REPORT.json [--run N] [--bits B ...]               show / extrapolate a cost report
    smc-hmm certs --out DIR --parties alice,bob,trent [--force]     CA + party certificates (mTLS)
    smc-hmm release hmm --data FILE --eps E [...]                   a DP HMM (DP Baum-Welch)
    smc-hmm release trace --model M --trace FILE --graph KIND [...] a DPHMM state-trace release
    smc-hmm release lmgmm --data FILE --eps E [...]                 a DP large-margin GMM classifier

Each command is one module of this package exporting ``HELP``, ``configure(parser)``
and ``run(args) -> exit code``; the modules share :mod:`smc_hmm.cli.common` and never
import one another.  Adding a command is one module and one line of :data:`COMMANDS`.

Protocols, demos and benchmarks are plugins found through entry points
(``smc_hmm.protocols``, ``smc_hmm.demos``, ``smc_hmm.benchmarks``; see ``docs/adding-a-
protocol.md``): a demo is ``fn(args, output) -> exit code`` (``output``:
:class:`smc_hmm.cli.common.Output`), a benchmark ``fn(args) -> exit code``; either may
come with an ``add_arguments(parser)`` (an attribute of the function or of its module)
for its own options.

Typed errors (:class:`~smc_hmm.errors.SmcHmmError`) print one line, without a
traceback, and exit with code 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from types import ModuleType

from smc_hmm.cli import (
    bench,
    certs,
    common,
    cost,
    demo,
    digits,
    keyword,
    launch,
    match,
    party,
    release,
    serve,
    speaker,
    spot,
)
from smc_hmm.cli.common import BENCH_GROUP, DEFAULT_DEMO, DEMO_GROUP
from smc_hmm.errors import SmcHmmError
from smc_hmm.options import ArgumentParser

__all__ = ["BENCH_GROUP", "COMMANDS", "DEFAULT_DEMO", "DEMO_GROUP", "build_parser", "main"]

#: subcommand -> its module (``HELP``, ``configure(parser)``, ``run(args)``), in help order
COMMANDS: dict[str, ModuleType] = {
    "demo": demo,
    "party": party,
    "launch": launch,
    "serve": serve,
    "keyword": keyword,
    "speaker": speaker,
    "spot": spot,
    "digits": digits,
    "match": match,
    "bench": bench,
    "cost": cost,
    "certs": certs,
    "release": release,
}
#: subcommands whose first positional names a registry entry with its own options
_REGISTRIES = {
    "demo": (DEMO_GROUP, "demo", DEFAULT_DEMO),
    "bench": (BENCH_GROUP, "benchmark", None),
}


def _entry_name(argv: list[str]) -> tuple[str | None, str | None]:
    """(subcommand, registry entry named on the command line or the default)."""
    positional = [a for a in argv if not a.startswith("-")]
    if not positional:
        return None, None
    command = positional[0]
    if command not in _REGISTRIES:
        return command, None
    group, _, default = _REGISTRIES[command]
    plugins = common.plugins(group)
    named = [a for a in argv[argv.index(command) + 1 :] if a in plugins]
    return command, named[0] if named else default


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; a demo or benchmark named in ``argv`` adds its own options."""
    parser = ArgumentParser(
        prog="smc-hmm", description="Privacy-preserving HMM inference with Paillier encryption."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    command, entry = _entry_name(list(argv or []))
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(p)
        if name == command and entry is not None:
            group, kind, _ = _REGISTRIES[name]
            _, add_arguments = common.resolve_entry(group, kind, entry)
            if add_arguments is not None:
                add_arguments(p.add_argument_group(f"options of {kind} {entry}"))
        elif name == command == "bench" and {"-h", "--help"} & set(argv or []):
            p.formatter_class = argparse.RawDescriptionHelpFormatter
            p.epilog = bench.epilog()
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on standard error, without the source line Python's default
    format adds (``protocols/keyword.py:178: WeakerModeWarning: ...`` and the code)."""
    print(f"smc-hmm: warning: {common.one_line(message)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``smc-hmm`` console script; returns the exit code.  As the
    script (no ``argv``), an interrupt that comes after the command returned -- while the
    interpreter joins worker processes and threads -- still says "interrupted" and exits
    with code 130 (it used to die of the signal without a word)."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        code = _main(argv)
    if argv is None:
        signal.signal(signal.SIGINT, _interrupted_while_exiting)
    return code


def _interrupted_while_exiting(signum, frame) -> None:
    """SIGINT after the command's result: every file is written and the output flushed,
    so the process ends at once, with the line every interrupt prints."""
    print("smc-hmm: interrupted", file=sys.stderr, flush=True)
    os._exit(130)


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(argv).parse_args(argv)
        code = COMMANDS[args.command].run(args)
        common.write_stdout("")  # flush now: a reader gone by now is no error either
        return code
    except BrokenPipeError:  # standard output closed by its reader: the output ends there
        if not common.stdout_closed():
            raise  # another pipe (a peer's socket): not the end of our output
        common.end_stdout()
        return 0
    except SystemExit as e:  # argparse: usage errors (2) and --help (0)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except SmcHmmError as e:
        print(f"smc-hmm: error: {type(e).__name__}: {common.one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("smc-hmm: interrupted", file=sys.stderr)
        return 130
