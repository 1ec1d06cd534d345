"""Shared benchmark plumbing: the common options, median timing, result rows with their
targets, the table, and :func:`finish` (the JSON file and the exit code) that every
benchmark ends with."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.options import WORKERS

#: a row's direction: the smaller value is the better one (times, errors) ...
LOWER = "lower"
#: ... or the larger one (accuracies, counts of agreements, throughput)
HIGHER = "higher"


# -- the options every benchmark spells alike ---------------------------------------------


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
            mark = "" if r.met is None else (" [green]ok[/]" if r.met else " [red]MISSED[/]")
            ratio = (
                "-"
                if r.ratio is None
                else (f"{r.ratio:.1f}x" if r.ratio >= 0.1 else f"{r.ratio:.2e}x")
            )
            table.add_row(
                r.name, _fmt(r.ours), _fmt(r.baseline), r.unit, ratio + mark, r.goal, r.note
            )
        console.print(table)


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


def finish(args, result, console=None, *, met: bool = True, **json_options) -> int:
    """The last step of every benchmark: write ``result`` (a :class:`BenchResult` or
    JSON-ready data) to ``--json`` if given (and say so on ``console``), then the exit
    code: 1 when a target was missed -- a row's, or ``met`` is false (the benchmark's
    targets outside its rows) -- else 0."""
    data = result.to_dict() if isinstance(result, BenchResult) else result
    path = getattr(args, "json", None)
    if path:
        write_json(path, data, **json_options)
        if console is not None:
            console.print(f"wrote {path}")
    rows_met = result.targets_met if isinstance(result, BenchResult) else True
    return 0 if met and rows_met else 1


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
