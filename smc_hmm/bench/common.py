"""Shared benchmark plumbing: median timing, result rows, table and JSON output."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field


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
    """One comparison: ``ratio`` = how many times better ours is than the baseline."""

    name: str
    ours: float
    baseline: float | None
    unit: str
    target: float | None = None  # ratio must reach at least this
    note: str = ""
    limit: float | None = None  # or: ours must stay at most this (errors)
    ratio: float | None = field(init=False)

    def __post_init__(self):
        self.ratio = None
        if self.baseline is not None and self.ours > 0:
            lower_is_better = self.unit.startswith(("s", "ms", "us"))
            self.ratio = self.baseline / self.ours if lower_is_better else self.ours / self.baseline

    @property
    def met(self) -> bool | None:
        if self.limit is not None:
            return self.ours <= self.limit
        if self.target is None or self.ratio is None:
            return None
        return self.ratio >= self.target

    @property
    def goal(self) -> str:
        if self.limit is not None:
            return f"<= {self.limit:g}"
        return "-" if self.target is None else f">= {self.target:g}x"


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
            "rows": [asdict(r) for r in self.rows],
            **self.extra,
        }

    def write_json(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2)
            fh.write("\n")

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
