"""The ``smc-hmm`` command line.

Subcommands::

    smc-hmm demo [NAME] [--key-bits B] [--insecure] [--json PATH]   run a named demo in-process
    smc-hmm party --role NAME --config parties.toml [--json PATH]   run one party (its own process)
    smc-hmm launch --config parties.toml [--json PATH]              all parties as OS processes
    smc-hmm serve --role bob --config parties.toml [--scheduler A]  serve many clients (mTLS)
    smc-hmm bench NAME [...]                                        a registered benchmark
    smc-hmm cost REPORT.json [--run N] [--bits B ...]               show / extrapolate a cost report
    smc-hmm certs --out DIR --parties alice,bob,trent [--force]     CA + party certificates (mTLS)
    smc-hmm release hmm --data FILE --eps E [...]                   a DP HMM (DP Baum-Welch)
    smc-hmm release trace --model M --trace FILE --graph KIND [...] a DPHMM state-trace release

Protocols, demos and benchmarks are plugins found through entry points
(``smc_hmm.protocols``, ``smc_hmm.demos``, ``smc_hmm.benchmarks``; see
``docs/adding-a-protocol.md``): a demo is ``fn(args, console) -> exit
code``, a benchmark ``fn(args) -> exit code``; either may come with an
``add_arguments(parser)`` (an attribute of the function or of its module)
for its own options.  Further subcommands register in :data:`COMMANDS`.

Typed errors (:class:`~smc_hmm.errors.SmcHmmError`) print one line, without a
traceback, and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from smc_hmm.errors import ConfigError, InvalidInputError, SmcHmmError

DEFAULT_DEMO = "keyword"
DEMO_GROUP = "smc_hmm.demos"
BENCH_GROUP = "smc_hmm.benchmarks"


def _plugins(group: str) -> dict:
    """Entry points of ``group`` by name (loaded only when used)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=group)}


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr)  # tables adapt to the width (terminal, COLUMNS, else 80)


def _resolve_entry(group: str, kind: str, name: str) -> tuple[Callable, Callable | None]:
    """(run, add_arguments or None) of the plugin ``name`` in entry-point ``group``."""
    plugins = _plugins(group)
    if name not in plugins:
        raise ConfigError(f"unknown {kind} {name!r} (known: {', '.join(sorted(plugins))})")
    try:
        fn = plugins[name].load()
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{kind} {name!r} failed to load: {e}") from e
    if not callable(fn):
        raise ConfigError(f"{kind} {name!r} is not callable")
    add = getattr(fn, "add_arguments", None)
    if add is None:
        add = getattr(sys.modules.get(getattr(fn, "__module__", ""), None), "add_arguments", None)
    return fn, add


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
        for name in sorted(_plugins(DEMO_GROUP)):
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
    fn, _ = _resolve_entry(DEMO_GROUP, "demo", args.name)
    return int(fn(args, console) or 0)


# -- party / launch ------------------------------------------------------------------------


def _configure_party(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", required=True, help="this process's party name in the config")
    p.add_argument("--config", required=True, help="the run's configuration file (TOML)")
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
    from smc_hmm.runtime.serve import serving_party

    server = serving_party(config)
    if server is not None and args.role != server:  # a client of the serving party
        from smc_hmm.runtime.client import run_party_client

        result = run_party_client(args.role, config, result_path=args.json)
    else:
        if server is not None:
            raise ConfigError(
                f"{args.role} serves in {args.config}: start it with smc-hmm serve --role "
                f"{args.role}"
            )
        result = run_party(args.role, config, result_path=args.json)
    if not args.quiet:
        console = _console()
        console.print(
            f"{args.role}: done in {result['elapsed']:.3f} s, output: "
            f"{json.dumps(result['output'])}"
        )
    return 0


def _configure_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", default="bob", help="the serving party's name in the config")
    p.add_argument("--config", required=True, help="the configuration file (TOML)")
    p.add_argument(
        "--scheduler",
        help="a Dask scheduler (tcp://HOST:8786) for the heavy work (default: [compute] "
        "scheduler, else local process lanes)",
    )
    p.add_argument("--workers", type=int, help="local lanes (default: [compute] workers, cores)")
    p.add_argument("--max-sessions", type=int, help="concurrent sessions ([serve] max_sessions)")
    p.add_argument(
        "--when-busy", choices=("wait", "refuse"), help="excess clients wait or are refused"
    )
    p.add_argument("--log", metavar="PATH", help="append the session log here (default: stderr)")


def _run_serve(args) -> int:
    import logging

    from smc_hmm.runtime import load_config
    from smc_hmm.runtime.serve import ServeSettings, serve

    config = load_config(args.config)
    settings = ServeSettings.from_config(
        config,
        scheduler=args.scheduler,
        workers=args.workers,
        max_sessions=args.max_sessions,
        when_busy=args.when_busy,
    )
    handler = logging.FileHandler(args.log) if args.log else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("smc_hmm.serve")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    if config.insecure:
        logger.warning("%d-bit keys with run.insecure = true are INSECURE", config.key_bits)
    return serve(config, args.role, settings=settings)


def _configure_launch(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the run's configuration file (TOML)")
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


def _bench_epilog() -> str:
    """Every benchmark with its own options, for ``smc-hmm bench --help``."""
    parts = []
    for name in sorted(_plugins(BENCH_GROUP)):
        try:
            fn, add = _resolve_entry(BENCH_GROUP, "benchmark", name)
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


def _run_bench(args) -> int:
    if args.list or not args.name:
        console = _console()
        for name in sorted(_plugins(BENCH_GROUP)):
            console.print(name)
        return 0
    fn, _ = _resolve_entry(BENCH_GROUP, "benchmark", args.name)
    return int(fn(args) or 0)


def _throwaway_keypair(bits: int):
    """A key pair used only to time operations (small sizes allowed: nothing is protected)."""
    from smc_hmm.bench.common import throwaway_keypair

    return throwaway_keypair(bits)


# -- cost -------------------------------------------------------------------------------------


def _configure_cost(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "report",
        help="a cost JSON: the --json file of `smc-hmm demo` (every demo), `launch` or "
        "`party` (that party's costs only), or a saved cost report",
    )
    p.add_argument(
        "--run",
        type=int,
        metavar="N",
        help="a file with several runs (the forward demo writes one per model): show and "
        "predict only run N (1-based; default: every run, one after another)",
    )
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
    p.add_argument(
        "--json",
        metavar="PATH",
        help="write the prediction as JSON (several runs: a list under 'runs')",
    )


def _load_report(path: str) -> list[tuple[str, object]]:
    """``[(label, CostReport), ...]`` from a cost JSON: one entry per run it holds.

    Accepted (what the other commands write): a bare report (``version``, ``parties``);
    ``{"cost": report}`` (``demo secure-sum``, ``launch``); ``{"runs": [{"cost":
    report, "model": ...}, ...]}`` (``demo forward``, one run per model); and
    ``{"party": name, "cost": snapshot}`` (``party``: that one party's costs).
    Anything else, a binary or non-JSON file included, is a :class:`ConfigError`.
    """
    from smc_hmm.cost import CostReport

    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(
            f"{path} is not a cost report: it is a binary file, not JSON (expected the "
            "--json output of smc-hmm demo, launch or party)"
        ) from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise ConfigError(f"{path} is not valid JSON: {e}") from None
    expected = "expected the --json output of smc-hmm demo, launch or party, or a saved cost report"
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds no cost report ({expected})")

    def report(d, where: str, party=None) -> CostReport:
        if isinstance(d, dict) and "parties" in d:
            return CostReport.from_dict(d)
        if isinstance(d, dict) and isinstance(d.get("ops"), dict):  # one party's snapshot
            name = d.get("party", party)
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{path}: the cost in {where} does not name its party")
            meta = {"mode": "party"}
            if isinstance(data.get("protocol"), str):
                meta["protocol"] = data["protocol"]
            return CostReport({name: d}, meta=meta)
        raise ConfigError(f"{path}: {where} is not a cost report ({expected})")

    def with_path(fn, *args):
        try:
            return fn(*args)
        except ConfigError as e:
            text = str(e)
            raise ConfigError(text if text.startswith(str(path)) else f"{path}: {text}") from e

    if "parties" in data or ("version" in data and not {"cost", "runs"} & set(data)):
        # a bare report (CostReport.save / to_dict)
        return [("", with_path(CostReport.from_dict, data))]
    if isinstance(data.get("runs"), list):
        if not data["runs"]:
            raise ConfigError(f"{path} holds an empty list of runs: no cost to show")
        runs = []
        for i, run in enumerate(data["runs"], 1):
            if not isinstance(run, dict) or "cost" not in run:
                raise ConfigError(f"{path}: run {i} holds no 'cost'")
            label = run.get("model") or run.get("name") or run.get("label") or ""
            runs.append((f"run {i}" + (f": {label}" if label else ""), run["cost"]))
        return [(label, with_path(report, cost, label)) for label, cost in runs]
    if "cost" in data:
        return [("", with_path(report, data["cost"], "'cost'", data.get("party")))]
    if data.get("ok") is False and isinstance(data.get("error"), dict):
        who = f"party {data['party']}" if isinstance(data.get("party"), str) else "a run"
        error = data["error"]
        raise ConfigError(
            f"{path} records a failed run of {who} ({error.get('type', 'error')}: "
            f"{error.get('message', '')}): it holds no cost"
        )
    keys = ", ".join(sorted(str(k) for k in data)[:8]) or "none"
    raise ConfigError(f"{path} holds no cost report (top-level keys: {keys}; {expected})")


def _run_cost(args) -> int:
    from smc_hmm.bench.rates import measure_rates
    from smc_hmm.cost import CostModel, PrimitiveRates

    runs = _load_report(args.report)
    if args.run is not None:
        if not 1 <= args.run <= len(runs):
            raise ConfigError(
                f"--run {args.run}: {args.report} holds "
                + (f"runs 1 to {len(runs)}" if len(runs) > 1 else "a single run (--run 1)")
            )
        runs = [(args.run, *runs[args.run - 1])]
    else:
        runs = [(i, *run) for i, run in enumerate(runs, 1)]
    rates = None
    if args.rates:  # read before printing anything: a bad file is an error, not a half output
        try:
            rates = PrimitiveRates.from_dict(json.loads(Path(args.rates).read_bytes()))
        except OSError as e:
            raise ConfigError(f"cannot read rates {args.rates}: {e.strerror or e}") from e
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise ConfigError(f"rates {args.rates} are not valid JSON: {e}") from None
    console = _console()
    for _, label, report in runs:
        try:
            tables = report.tables(console.width)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            where = f" ({label})" if label else ""
            raise ConfigError(
                f"malformed cost report in {args.report}{where}: {type(e).__name__}: {e}"
            ) from e
        if label:
            console.print(f"[bold]{label}[/]")
        for table in tables:
            console.print(table)
    wants_model = any(
        v is not None
        for v in (args.bits, args.latency_ms, args.bandwidth_mbps, args.input_scale, args.rates)
    )
    if not wants_model:
        return 0
    if rates is None:
        bits = runs[0][2].key_bits or 2048
        with console.status(f"measuring primitive rates at {bits} bits"):
            rates = measure_rates(*_throwaway_keypair(bits))
    model = CostModel(rates)
    predictions = []
    for number, label, report in runs:
        prediction = model.predict(
            report,
            bits=args.bits,
            latency=(args.latency_ms or 0.0) / 1e3,
            bandwidth=None if args.bandwidth_mbps is None else args.bandwidth_mbps * 1e6 / 8,
            input_scale=args.input_scale or 1.0,
        )
        if label and len(runs) > 1:
            console.print(f"[bold]{label}[/]")
        console.print(prediction.table())
        predictions.append({"run": number, "label": label, "prediction": prediction.to_dict()})
    if len(predictions) == 1:
        out = {"prediction": predictions[0]["prediction"], "rates": rates.to_dict()}
    else:
        out = {"runs": predictions, "rates": rates.to_dict()}
    _write_json(args.json, out, console)
    return 0


# -- certs ------------------------------------------------------------------------------------


def _configure_certs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="directory for ca.pem, NAME.pem, NAME.key")
    p.add_argument("--parties", required=True, help="comma-separated party names")
    p.add_argument(
        "--clients",
        default="",
        help="comma-separated client names: certificates with the client role, for clients "
        "of a serving party (smc-hmm serve)",
    )
    p.add_argument("--days", type=int, default=365, help="validity in days")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a certificate set already in --out: its ca.pem and the certificates "
        "it issued (with their keys) are removed first, so none is left stale",
    )


def _run_certs(args) -> int:
    from smc_hmm.certs import make_certificates

    certs = make_certificates(
        args.out, args.parties, days=args.days, force=args.force, clients=args.clients
    )
    console = _console()
    for path in certs.removed:
        console.print(f"removed stale {path} (from the replaced certificate set)")
    console.print(f"CA certificate: {certs.ca_cert}")
    for name in certs.certs:
        console.print(f"{name}: {certs.certs[name]} (key {certs.keys[name]}, mode 0600)")
    return 0


# -- release -----------------------------------------------------------------------------------


def _configure_release(p: argparse.ArgumentParser) -> None:
    from smc_hmm.dp.release import add_hmm_arguments, add_trace_arguments

    what = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    add_hmm_arguments(
        what.add_parser(
            "hmm", help="train and release a differentially private HMM (DP Baum-Welch)"
        )
    )
    add_trace_arguments(
        what.add_parser("trace", help="release a state trace under a policy graph (DPHMM, K-norm)")
    )


def _run_release(args) -> int:
    from smc_hmm.dp.release import release_hmm, release_trace

    run = release_hmm if args.what == "hmm" else release_trace
    return int(run(args, _console()) or 0)


# -- keyword ---------------------------------------------------------------------------------


def _configure_keyword(p: argparse.ArgumentParser) -> None:
    from smc_hmm.runtime.keyword_command import add_arguments

    add_arguments(p)


def _run_keyword(args) -> int:
    from smc_hmm.runtime.keyword_command import run

    return run(args, _console())


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
    "serve": (
        "serve one protocol session per authenticated client (mutual TLS), until SIGTERM",
        _configure_serve,
        _run_serve,
    ),
    "keyword": (
        "recognise the keyword of one WAV recording securely (Alice and Bob in-process)",
        _configure_keyword,
        _run_keyword,
    ),
    "bench": ("run a registered benchmark", _configure_bench, _run_bench),
    "cost": (
        "print a saved cost report; predict other key sizes and networks",
        _configure_cost,
        _run_cost,
    ),
    "certs": ("make a CA and per-party certificates for mutual TLS", _configure_certs, _run_certs),
    "release": (
        "release differentially private models and traces (smc-hmm release hmm|trace)",
        _configure_release,
        _run_release,
    ),
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
    plugins = _plugins(group)
    named = [a for a in argv[argv.index(command) + 1 :] if a in plugins]
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
            group, kind, _ = _REGISTRIES[name]
            _, add_arguments = _resolve_entry(group, kind, entry)
            if add_arguments is not None:
                add_arguments(p.add_argument_group(f"options of {kind} {entry}"))
        elif name == command == "bench" and {"-h", "--help"} & set(argv or []):
            p.formatter_class = argparse.RawDescriptionHelpFormatter
            p.epilog = _bench_epilog()
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
