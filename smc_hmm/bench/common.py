"""Shared benchmark plumbing: the common options, the console, throw-away keys and compute
lanes, two-party runs with their offline phase, median timing, result rows with their
targets, the table, and :func:`finish` (the JSON file and the exit code) that every
benchmark ends with."""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.options import WORKERS

#: a row's direction: the smaller value is the better one (times, errors) ...
LOWER = "lower"
#: ... or the larger one (accuracies, counts of agreements, throughput)
HIGHER = "higher"


# -- the options every benchmark spells alike ---------------------------------------------


#: Alice's DJN exponent with --short-randomness (2 kappa for kappa = 112)
SHORT_ALPHA_BITS = 224


def add_key_arguments(parser, help: str = "Paillier modulus size") -> None:
    """``--key-bits`` (2048) and ``--insecure`` (keys below 2048 bits); the command line
    adds ``--allow-large-keys``, and :func:`check_key_bits` checks all three."""
    parser.add_argument("--key-bits", type=int, default=2048, help=help)
    parser.add_argument(
        "--insecure", action="store_true", help="allow keys below 2048 bits (quick runs only)"
    )


def add_workers_argument(
    parser, default: int | None = 2, help: str = "compute lanes per party"
) -> None:
    """``--workers``: how many processes (compute lanes) the benchmark's heavy work uses,
    checked while the command line is parsed (:data:`smc_hmm.options.WORKERS`)."""
    parser.add_argument("--workers", type=WORKERS, default=default, help=help)


def add_json_argument(parser, help: str = "also write the results as JSON") -> None:
    """``--json PATH``: where :func:`finish` writes the results."""
    parser.add_argument("--json", metavar="PATH", help=help)


def bounded(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi], else one line naming the range (a bench
    parameter sizes what it allocates: ``--states 100000`` asked for 74.5 GiB)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"must be an integer in [{lo:,}, {hi:,}], got {value:,}"
            )
        return value

    return parse


def bounded_float(lo: float, hi: float):
    """An argparse type: a finite number in [lo, hi], else one line naming the range (a
    bench's seconds, rates and parameters)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (math.isfinite(value) and lo <= value <= hi):
            raise argparse.ArgumentTypeError(f"must be a number in [{lo:g}, {hi:g}], got {text}")
        return value

    return parse


def load_average() -> str:
    """The machine's load, for the record beside timings, in words: ``load average 1.2
    / 0.9 / 0.8 (1 / 5 / 15 min) on 2 cores`` (not Python's raw tuple)."""
    import os

    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return "load average unknown"
    return (
        f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min) on "
        f"{os.cpu_count()} cores"
    )


@contextmanager
def common_arguments(
    parser,
    *,
    key_help: str = "Paillier modulus size",
    workers: bool = False,
    workers_default: int | None = 2,
    workers_help: str = "compute lanes per party",
    short_randomness: str | None = None,
    json_help: str = "also write the results as JSON",
) -> Iterator[None]:
    """The options a benchmark shares with the others around its own (added in the
    ``with`` block): the key options first, then ``--workers`` (with ``workers``, its
    default and help as given), ``--short-randomness`` (where ``short_randomness`` is
    given: the end of its help) and ``--json`` last, so ``--help`` reads alike everywhere."""
    add_key_arguments(parser, help=key_help)
    yield
    if workers:
        add_workers_argument(parser, default=workers_default, help=workers_help)
    if short_randomness is not None:
        parser.add_argument(
            "--short-randomness",
            action="store_true",
            help=f"Alice's encryptions with {SHORT_ALPHA_BITS}-bit DJN exponents instead of "
            "bits(n)/2 (faster; rests on the stronger short-exponent assumption, see "
            f"smc_hmm/crypto/randomness.py{short_randomness})",
        )
    add_json_argument(parser, help=json_help)


def start(args, width: int = 150):
    """The first step of a benchmark on the command line: the key sizes checked
    (:func:`check_key_bits`), the console of its table on standard output (``COLUMNS``
    wide if set, the terminal's width on one, else ``width``), the warning that
    ``--short-randomness`` (where a benchmark has it) rests on a stronger assumption.
    Returns (console, say): ``say(msg)`` prints progress, dimmed, on standard error (the
    convention of every command, docs/running.md)."""
    from smc_hmm.console import console as make_console
    from smc_hmm.console import table_console

    check_key_bits(args)
    err = make_console(stderr=True)
    if getattr(args, "short_randomness", False):
        err.print("[yellow]warning: --short-randomness rests on the short-exponent assumption[/]")
    return table_console(width), lambda msg: err.print(f"[dim]... {msg}[/]")


def bench_keypair(args, say=lambda msg: None):
    """A throw-away key pair of ``--key-bits``; with ``--short-randomness`` Alice's
    encryptions use :data:`SHORT_ALPHA_BITS`-bit DJN exponents."""
    say(f"generating a {args.key_bits}-bit key pair")
    keypair = throwaway_keypair(args.key_bits)
    if getattr(args, "short_randomness", False):
        keypair[0].use_djn(alpha_bits=SHORT_ALPHA_BITS)
    return keypair


@contextmanager
def lanes(workers: int | None):
    """``workers`` compute lanes (processes), warmed up before anything is timed."""
    from smc_hmm.compute import Compute

    with Compute.processes(workers) as compute:
        compute.warm_up()
        yield compute


# -- two-party runs in-process ------------------------------------------------------------


def two_party_run(
    name: str,
    params: dict,
    alice,
    bob,
    keypair,
    compute,
    *,
    timeout: float,
    bob_compute=None,
    offline: bool = False,
    strict: bool = False,
):
    """One in-process run of the registered protocol ``name`` between Alice (``alice``:
    her input; she holds ``keypair``) and Bob (``bob``), each on ``compute`` (Bob on
    ``bob_compute`` if given).  With ``offline``, after its offline phase
    (:func:`offline_randomizers`; ``strict``: a randomizer its plan missed is an error).
    Returns (result, offline seconds, online seconds)."""
    from smc_hmm.runtime import run_protocol

    pk = keypair[0]
    if offline:
        drawing = offline_randomizers(name, params, alice, bob, pk, compute, strict=strict)
    else:
        drawing = nullcontext()
    with drawing as drawn:
        t0 = time.perf_counter()
        result = run_protocol(
            name,
            params,
            {"alice": ("alice", alice), "bob": ("bob", bob)},
            keys={"alice": keypair},
            compute={"alice": compute, "bob": bob_compute or compute},
            timeout=timeout,
            min_key_bits=min(2048, pk.bits),
            randomizers=drawn.randomizers(pk) if offline else None,
        )
        online = time.perf_counter() - t0
    return result, drawn.seconds if offline else 0.0, online


def launched_run(
    name: str,
    params: dict,
    parties: dict[str, dict],
    workdir: Path,
    key_bits: int,
    workers: int | None,
    *,
    inputs: dict,
    pin: bool = False,
):
    """One run of the registered protocol ``name`` as two OS processes over mutual TLS
    (``smc-hmm launch``), the parties' tables ``parties`` (their inputs as files in
    ``workdir``; ``inputs``: the same in memory, for the plan); ``pin``: each party on a
    core of its own, as two machines.  Alice precomputes the randomizers the protocol
    plans from the public sizes in an offline phase (``[compute] randomizers``), as the
    in-process runs do.  Returns the run's result; its cost report holds the protocol's
    own wall time (the processes also start and generate keys)."""
    from smc_hmm.protocol import find
    from smc_hmm.runtime import launch, write_config

    descriptor = find(name)
    need = descriptor.randomizers(descriptor.params(params), key_bits, inputs)
    compute = {"workers": workers, "randomizers": need["alice"]}
    config = write_config(
        workdir / "parties.toml",
        name,
        parties,
        params=params,
        key_bits=key_bits,
        insecure=key_bits < 2048,
        compute=compute,
        timeout=600,
        connect_timeout=60,
    )
    return launch(config, timeout=1800, affinity=pinned_cores(list(parties)) if pin else None)


def pinned_cores(parties) -> dict[str, list[int]]:
    """One core of this machine per party, in order (``--pin``)."""
    import os

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < len(parties):
        raise InvalidInputError(f"--pin needs {len(parties)} cores, this process has {len(cores)}")
    return {party: [core] for party, core in zip(parties, cores)}


def phase_wall(cost, party: str, phase: str) -> float:
    """One party's wall seconds in one phase of a cost report (0 if it has none)."""
    return float(cost.parties.get(party, {}).get("phases", {}).get(phase, {}).get("wall", 0.0))


@contextmanager
def offline_randomizers(name: str, params: dict, alice, bob, public_key, compute, *, strict=False):
    """The offline phase of one run of ``name``: every randomizer its plan asks for, drawn
    once the key is known (:func:`smc_hmm.runtime.offline.offline_phase`); yields the
    phase, with Alice's pool on ``public_key`` until the block ends (then her own
    randomizer again).  ``strict``: a randomizer the plan missed is an error."""
    from smc_hmm.runtime.offline import offline_phase

    base = public_key.randomizer
    phase = offline_phase(name, params, {"alice": alice, "bob": bob}, public_key, compute, base)
    public_key.use_randomizer(phase.alice)
    try:
        yield phase
    finally:
        public_key.use_randomizer(base)
    if strict and phase.misses:
        raise InvalidInputError(
            f"the offline phase of {name} precomputed too few randomizers (misses: Alice "
            f"{phase.alice.misses}, Bob {phase.bob.misses})"
        )


def phase_rows(cost, prefix: str, *, traffic: bool = True) -> list[Row]:
    """A row per party and phase of a run's cost ledger (``cost``): its wall seconds, its
    compute seconds, bytes out and in (with ``traffic``) and the operations it counted;
    each named ``{prefix}{party} / {phase}``; first a row per party (wall, compute and CPU
    of its thread) and the run's critical path with one machine per party
    (:func:`smc_hmm.cost.ledger.critical_path`), what two machines would take."""
    rows = []
    for party, data in cost.parties.items():
        t = data["time"]
        rows.append(
            Row(
                f"{prefix}{party}",
                float(t["wall"]),
                None,
                "s",
                note=f"compute {t['compute']:.2f} s, CPU of its thread {t['cpu']:.2f} s, "
                f"waiting {t['wait']:.2f} s",
            )
        )
    if cost.critical_path is not None:
        rows.append(
            Row(
                f"{prefix}critical path, one machine per party",
                float(cost.critical_path),
                None,
                "s",
                note="the parties' timelines replayed without sharing cores (no latency)",
            )
        )
    for party, data in cost.parties.items():
        for phase, p in data.get("phases", {}).items():
            ops = {k: v for k, v in p["ops"].items() if v}
            sent = f"bytes out/in {p['bytes']['sent']:,}/{p['bytes']['recv']:,}; "
            rows.append(
                Row(
                    f"{prefix}{party} / {phase}",
                    float(p["wall"]),
                    None,
                    "s",
                    note=f"compute {p['compute']:.2f} s; "
                    + (sent if traffic else "")
                    + ", ".join(f"{k} {v:,}" for k, v in ops.items()),
                )
            )
    return rows


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved_medians(
    fns: dict[str, Callable[[], object]], rounds: int, warmup: int = 1
) -> dict[str, float]:
    """Median wall time of each function, timed in alternation round by round.

    On a noisy machine a slow spell then hits every contender of a round rather
    than whichever happened to be running, so ratios of the medians stay fair.
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


@dataclass
class Row:
    """One comparison: ``ratio`` = how many times better ours is than the baseline.

    A row with a baseline says which way is better: ``better=LOWER`` (times, errors: the
    ratio is baseline / ours) or ``better=HIGHER`` (the ratio is ours / baseline).
    """

    name: str
    ours: float
    baseline: float | None
    unit: str
    target: float | None = None  # ratio must reach at least this
    note: str = ""
    limit: float | None = None  # or: ours must stay at most this (errors)
    ratio: float | None = field(init=False)
    better: str | None = field(default=None, kw_only=True)

    def __post_init__(self):
        if self.better not in (None, LOWER, HIGHER):
            raise InvalidInputError(f"Row.better is {LOWER!r} or {HIGHER!r}, not {self.better!r}")
        if self.baseline is not None and self.better is None:
            raise InvalidInputError(
                f"row {self.name!r} has a baseline: say whether lower or higher is better"
            )
        self.ratio = None
        if self.baseline is not None and self.ours > 0:
            lower = self.better == LOWER
            self.ratio = self.baseline / self.ours if lower else self.ours / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the row met its limit or target (a plain bool: ``ours`` may be a numpy
        scalar); None without one."""
        if self.limit is not None:
            return bool(self.ours <= self.limit)
        if self.target is None or self.ratio is None:
            return None
        return bool(self.ratio >= self.target)

    @property
    def goal(self) -> str:
        if self.limit is not None:
            return f"<= {self.limit:g}"
        return "-" if self.target is None else f">= {self.target:g}x"

    def to_dict(self) -> dict:
        """The row as JSON-ready data (its direction is in its ratio)."""
        out = asdict(self)
        del out["better"]
        return out


@dataclass
class BenchResult:
    benchmark: str
    key_bits: int
    rows: list[Row]
    params: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # benchmark-specific top-level JSON keys

    def to_dict(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "key_bits": self.key_bits,
            "machine": {
                "python": platform.python_version(),
                "cpu": platform.processor() or platform.machine(),
            },
            "params": self.params,
            "rows": [r.to_dict() for r in self.rows],
            **self.extra,
        }

    @property
    def targets_met(self) -> bool:
        """Whether every row with a target or a limit met it."""
        return all(r.met is not False for r in self.rows)

    def write_json(self, path: str) -> None:
        write_json(path, self.to_dict())

    def print_table(self, console=None) -> None:
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        table = Table(
            title=f"{self.benchmark} benchmark, {self.key_bits}-bit keys "
            "(medians; ratio = times better than baseline)"
        )
        for col in ("operation", "ours", "baseline", "unit", "ratio", "target", "note"):
            table.add_column(col, justify="left" if col in ("operation", "note") else "right")
        for r in self.rows:
            mark = "" if r.met is None else " " + verdict(r.met)
            ratio = (
                "-"
                if r.ratio is None
                else (f"{r.ratio:.1f}x" if r.ratio >= 0.1 else f"{r.ratio:.2e}x")
            )
            table.add_row(
                r.name, _fmt(r.ours), _fmt(r.baseline), r.unit, ratio + mark, r.goal, r.note
            )
        console.print(table)


def verdict(met: bool) -> str:
    """A target met or missed, as the tables print it."""
    return "[green]ok[/]" if met else "[red]MISSED[/]"


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}"


def write_json(path, data, **options) -> None:
    """``data`` as indented JSON at ``path`` (``options`` go to :func:`json.dumps`)."""
    try:
        Path(path).write_text(json.dumps(data, indent=2, **options) + "\n")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e


def finish(
    args, result, console=None, *, met: bool = True, table: bool = False, **json_options
) -> int:
    """The last step of every benchmark: write ``result`` (a :class:`BenchResult` or
    JSON-ready data) to ``--json`` if given (and say so on standard error), then print the
    table on ``console`` (with ``table``; files first, docs/running.md), then the exit
    code: 1 when a target was missed -- a row's, or ``met`` is false (the benchmark's
    targets outside its rows) -- else 0."""
    data = result.to_dict() if isinstance(result, BenchResult) else result
    path = getattr(args, "json", None)
    if path:
        from smc_hmm.console import console as make_console

        write_json(path, data, **json_options)
        if console is not None:
            make_console(stderr=True).print(f"wrote {path}")
    if table:
        result.print_table(console)
    rows_met = result.targets_met if isinstance(result, BenchResult) else True
    return 0 if met and rows_met else 1


def main_with_checks(args, run) -> int:
    """``main`` of a benchmark whose ``run(args, say)`` gives a :class:`BenchResult` with
    named checks besides its rows (``extra["checks"]``: name -> met) and their verdict
    (``extra["targets_met"]``): the table, a line per check, then :func:`finish`."""
    console, say = start(args)
    result = run(args, say)
    result.print_table(console)
    for name, ok in result.extra["checks"].items():
        console.print(f"{name}: {verdict(ok)}")
    return finish(args, result, console, met=result.extra["targets_met"])


def throwaway_keypair(bits: int):
    """A key pair used only to time operations (small sizes allowed: nothing is protected)."""
    import warnings

    from smc_hmm.crypto import generate_keypair
    from smc_hmm.errors import InsecureKeyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(bits, insecure=bits < 2048)


def check_key_bits(args) -> None:
    """The key sizes every command takes (:func:`smc_hmm.crypto.check_key_bits`): below
    2048 bits only with --insecure, above 8192 only with --allow-large-keys."""
    from smc_hmm.crypto import check_key_bits as check

    check(
        args.key_bits,
        insecure=getattr(args, "insecure", False),
        allow_large=getattr(args, "allow_large_keys", False),
        hints=KEY_FLAGS,
    )


#: how a command-line user grants small and large keys (the options every command spells alike)
KEY_FLAGS = ("--insecure", "--allow-large-keys")
