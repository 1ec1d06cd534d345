"""The ``smc-hmm`` command line.

Subcommands::

    smc-hmm demo [NAME] [--key-bits B] [--insecure] [--json PATH]   run a named demo in-process
    smc-hmm party --role NAME --config parties.toml [--json PATH]   run one party (its own process)
    smc-hmm launch --config parties.toml [--json PATH]              all parties as OS processes
    smc-hmm bench NAME [...]                                        a registered benchmark
    smc-hmm cost REPORT.json [--bits B --latency-ms L ...]          show / extrapolate a cost report
    smc-hmm certs --out DIR --parties alice,bob,trent               CA + party certificates (mTLS)

Demos and benchmarks are registries (:data:`DEMOS`, :data:`BENCHMARKS`): a
value is a callable or an import reference ``"module:function"`` /
``"module"`` (which must then provide ``main(args)``), resolved only when
used; a callable may carry an ``add_arguments(parser)`` attribute (a module
may define ``add_arguments``) for its own options.  Further subcommands (e.g.
``release``) register in :data:`COMMANDS` the same way.

Typed errors (:class:`~smc_hmm.errors.SmcHmmError`) print one line, without a
traceback, and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from smc_hmm.errors import ConfigError, InsecureKeyWarning, InvalidInputError, SmcHmmError

#: demo name -> callable(args, console) -> exit code, or an import reference
DEMOS: dict[str, Callable | str] = {
    "forward": "parties.demos:forward_demo",
    "secure-sum": "parties.demos:secure_sum_demo",
}
DEFAULT_DEMO = "forward"

#: benchmark name -> callable(args) -> exit code, or an import reference
BENCHMARKS: dict[str, Callable | str] = {
    "crypto": "smc_hmm.bench.crypto",
    "forward": "smc_hmm.bench.forward",
}


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, width=None if sys.stdout.isatty() else 160)


def _resolve_entry(registry: dict, kind: str, name: str) -> tuple[Callable, Callable | None]:
    """(run, add_arguments or None) for a registry entry."""
    if name not in registry:
        raise ConfigError(f"unknown {kind} {name!r} (known: {', '.join(sorted(registry))})")
    entry = registry[name]
    if isinstance(entry, str):
        from smc_hmm.runtime import resolve

        obj = resolve(entry)
        if ":" not in entry:  # a module: main(args) and optionally add_arguments(parser)
            main_fn = getattr(obj, "main", None)
            if main_fn is None:
                raise ConfigError(f"{kind} module {entry!r} has no main(args)")
            return main_fn, getattr(obj, "add_arguments", None)
        entry = obj
    if not callable(entry):
        raise ConfigError(f"{kind} {name!r} is not callable")
    return entry, getattr(entry, "add_arguments", None)


def _write_json(path: str | None, data, console) -> None:
    if not path:
        return
    try:
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e
    console.print(f"wrote {path}")


# -- demo ---------------------------------------------------------------------------------


def _configure_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "name",
        nargs="?",
        default=DEFAULT_DEMO,
        help=f"demo to run (default {DEFAULT_DEMO}; --list shows all)",
    )
    p.add_argument("--list", action="store_true", help="list the demos and exit")
    p.add_argument("--key-bits", type=int, default=2048, help="Paillier modulus size")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow keys below 2048 bits (tests and reproductions only)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="per-receive timeout, seconds")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed inputs and keys (INSECURE, reproducible runs only)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the result and cost as JSON")


def _run_demo(args) -> int:
    console = _console()
    if args.list:
        for name in sorted(DEMOS):
            console.print(name + (" (default)" if name == DEFAULT_DEMO else ""))
        return 0
    if args.key_bits < 2048 and not args.insecure:
        raise InvalidInputError(
            f"{args.key_bits}-bit keys are insecure: add --insecure (tests and reproductions only)"
        )
    if args.seed is not None and not args.insecure:
        raise InvalidInputError(
            "--seed draws keys from a non-cryptographic generator: add --insecure "
            "(reproducible runs only)"
        )
    fn, _ = _resolve_entry(DEMOS, "demo", args.name)
    return int(fn(args, console) or 0)


# -- party / launch ------------------------------------------------------------------------


def _configure_party(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", required=True, help="this process's party name in the config")
    p.add_argument("--config", required=True, help="parties.toml")
    p.add_argument("--json", metavar="PATH", help="write this party's result and cost as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")


def _run_party(args) -> int:
    from smc_hmm.runtime import load_config, run_party

    config = load_config(args.config)
    if config.insecure:
        print(
            f"smc-hmm: warning: {config.key_bits}-bit keys with run.insecure = true are "
            "INSECURE (tests and reproductions only)",
            file=sys.stderr,
        )
    result = run_party(args.role, config, result_path=args.json)
    if not args.quiet:
        console = _console()
        console.print(
            f"{args.role}: done in {result['elapsed']:.3f} s, output: "
            f"{json.dumps(result['output'])}"
        )
    return 0


def _configure_launch(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="parties.toml")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="kill every party after this many seconds (default: run.deadline)",
    )
    p.add_argument("--json", metavar="PATH", help="write outputs and the merged cost as JSON")


def _run_launch(args) -> int:
    from smc_hmm.runtime import launch, load_config

    config = load_config(args.config)
    console = _console()
    err = _console(stderr=True)
    with err.status(
        f"running {len(config.parties)} parties of {config.protocol} as processes"
    ) as status:
        result = launch(config, timeout=args.timeout, progress=lambda msg: status.update(msg))
    for name, output in result.outputs.items():
        console.print(
            f"{name} (pid {result.pids[name]}, exit {result.returncodes[name]}): "
            f"{json.dumps(output)}"
        )
    result.cost.render(console)
    _write_json(args.json, result.to_dict(), console)
    return 0


# -- bench ------------------------------------------------------------------------------------


def _configure_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="benchmark to run (--list shows all)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")


def _run_bench(args) -> int:
    if args.list or not args.name:
        console = _console()
        for name in sorted(BENCHMARKS):
            console.print(name)
        return 0
    fn, _ = _resolve_entry(BENCHMARKS, "benchmark", args.name)
    return int(fn(args) or 0)


def _bench_primitives_arguments(parser) -> None:
    parser.add_argument("--key-bits", type=int, default=2048, help="Paillier modulus size")
    parser.add_argument(
        "--scalar-bits",
        type=int,
        default=64,
        help="bits of scalars and multi-exponentiation weights",
    )
    parser.add_argument(
        "--min-seconds", type=float, default=0.2, help="minimum timing per operation"
    )
    parser.add_argument(
        "--json", metavar="PATH", help="write the rates (input of `smc-hmm cost --rates`)"
    )


def bench_primitives(args) -> int:
    """Measure single-thread primitive rates for the cost model."""
    from rich.table import Table

    from smc_hmm.cost import measure_rates

    console = _console()
    with console.status(f"generating a throw-away {args.key_bits}-bit key pair"):
        pk, sk = _throwaway_keypair(args.key_bits)
    with console.status("timing encrypt, decrypt, add, scalar multiply, multiexp, rerandomize"):
        rates = measure_rates(pk, sk, scalar_bits=args.scalar_bits, min_seconds=args.min_seconds)
    table = Table(
        title=f"primitive rates, {rates.bits}-bit keys, one thread "
        f"({rates.scalar_bits}-bit scalars)"
    )
    for col in ("operation", "per second", "us each", "scales as bits^"):
        table.add_column(col, justify="left" if col == "operation" else "right")
    for op, rate in sorted(rates.rates.items()):
        table.add_row(op, f"{rate:,.0f}", f"{1e6 / rate:.1f}", f"{rates.exponents[op]:g}")
    console.print(table)
    _write_json(args.json, rates.to_dict(), console)
    return 0


bench_primitives.add_arguments = _bench_primitives_arguments
BENCHMARKS["primitives"] = bench_primitives


def _throwaway_keypair(bits: int):
    """A key pair used only to time operations (small sizes allowed: nothing is protected)."""
    from smc_hmm.crypto import generate_keypair

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(bits, insecure=bits < 2048)


# -- cost -------------------------------------------------------------------------------------


def _configure_cost(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", help="a cost JSON (from --json of demo, launch or party)")
    p.add_argument("--bits", type=int, help="predict for this key size")
    p.add_argument("--latency-ms", type=float, help="one-way network latency per round, ms")
    p.add_argument(
        "--bandwidth-mbps",
        type=float,
        help="network bandwidth, megabits per second (default: unlimited)",
    )
    p.add_argument(
        "--input-scale",
        type=float,
        default=None,
        help="inputs this many times larger (operations and bytes scale linearly)",
    )
    p.add_argument(
        "--rates",
        metavar="PATH",
        help="primitive rates from `smc-hmm bench primitives --json` "
        "(default: measure now at the report's key size)",
    )
    p.add_argument("--json", metavar="PATH", help="write the prediction as JSON")


def _load_report(path: str):
    from smc_hmm.cost import CostReport

    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not valid JSON: {e}") from e
    if isinstance(data, dict) and "parties" not in data and isinstance(data.get("cost"), dict):
        data = data["cost"]  # demo / launch output wraps the report
    return CostReport.from_dict(data)


def _run_cost(args) -> int:
    from smc_hmm.cost import CostModel, PrimitiveRates, measure_rates

    report = _load_report(args.report)
    console = _console()
    report.render(console)
    wants_model = any(
        v is not None
        for v in (args.bits, args.latency_ms, args.bandwidth_mbps, args.input_scale, args.rates)
    )
    if not wants_model:
        return 0
    if args.rates:
        try:
            rates = PrimitiveRates.from_dict(json.loads(Path(args.rates).read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f"cannot read rates {args.rates}: {e}") from e
    else:
        bits = report.key_bits or 2048
        with console.status(f"measuring primitive rates at {bits} bits"):
            rates = measure_rates(*_throwaway_keypair(bits))
    model = CostModel(rates)
    prediction = model.predict(
        report,
        bits=args.bits,
        latency=(args.latency_ms or 0.0) / 1e3,
        bandwidth=None if args.bandwidth_mbps is None else args.bandwidth_mbps * 1e6 / 8,
        input_scale=args.input_scale or 1.0,
    )
    console.print(prediction.table())
    _write_json(args.json, {"prediction": prediction.to_dict(), "rates": rates.to_dict()}, console)
    return 0


# -- certs ------------------------------------------------------------------------------------


def _configure_certs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="directory for ca.pem, NAME.pem, NAME.key")
    p.add_argument("--parties", required=True, help="comma-separated party names")
    p.add_argument("--days", type=int, default=365, help="validity in days")


def _run_certs(args) -> int:
    from smc_hmm.certs import make_certificates

    certs = make_certificates(args.out, args.parties, days=args.days)
    console = _console()
    console.print(f"CA certificate: {certs.ca_cert}")
    for name in certs.certs:
        console.print(f"{name}: {certs.certs[name]} (key {certs.keys[name]}, mode 0600)")
    return 0


#: subcommand -> (help, configure(parser), run(args) -> exit code)
COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "demo": ("run a named demo in-process and print the cost table", _configure_demo, _run_demo),
    "party": (
        "run one party of a parties.toml in this process (TCP + mutual TLS)",
        _configure_party,
        _run_party,
    ),
    "launch": (
        "start every party of a parties.toml as its own process on this machine",
        _configure_launch,
        _run_launch,
    ),
    "bench": ("run a registered benchmark", _configure_bench, _run_bench),
    "cost": (
        "print a saved cost report; predict other key sizes and networks",
        _configure_cost,
        _run_cost,
    ),
    "certs": ("make a CA and per-party certificates for mutual TLS", _configure_certs, _run_certs),
}
#: subcommands whose first positional names a registry entry with its own options
_REGISTRIES = {"demo": (DEMOS, "demo", DEFAULT_DEMO), "bench": (BENCHMARKS, "benchmark", None)}


def _entry_name(argv: list[str]) -> tuple[str | None, str | None]:
    """(subcommand, registry entry named on the command line or the default)."""
    positional = [a for a in argv if not a.startswith("-")]
    if not positional:
        return None, None
    command = positional[0]
    if command not in _REGISTRIES:
        return command, None
    registry, _, default = _REGISTRIES[command]
    named = [a for a in argv[argv.index(command) + 1 :] if a in registry]
    return command, named[0] if named else default


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; a demo or benchmark named in ``argv`` adds its own options."""
    parser = argparse.ArgumentParser(
        prog="smc-hmm", description="Privacy-preserving HMM inference with Paillier encryption."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    command, entry = _entry_name(list(argv or []))
    for name, (help_text, configure, _) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        configure(p)
        if name == command and entry is not None:
            registry, kind, _ = _REGISTRIES[name]
            _, add_arguments = _resolve_entry(registry, kind, entry)
            if add_arguments is not None:
                add_arguments(p.add_argument_group(f"options of {kind} {entry}"))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``smc-hmm`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(argv).parse_args(argv)
        return COMMANDS[args.command][2](args)
    except SystemExit as e:  # argparse: usage errors (2) and --help (0)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except SmcHmmError as e:
        print(f"smc-hmm: error: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("smc-hmm: interrupted", file=sys.stderr)
        return 130


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
