"""Merged cost reports: validation, deterministic JSON, and tables that fit the console.

One responsibility: *report* the costs of every party of one run.  See
``docs/architecture.md`` ("The cost ledger").  :class:`CostReport` merges the
ledgers of all parties (in-process, or the JSON snapshots of separate OS
processes) and renders rich tables or deterministic JSON (sorted keys; every
known operation always present).

Tables are laid out for the console they are printed on: a table that fits is
printed whole; one that does not is split into several narrower tables that
repeat its key columns (party, phase, link) and each carry whole groups of the
other columns (operations, traffic, time), so that every column name and every
number is shown in full at 80 columns, on a terminal or piped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from smc_hmm.cost.ledger import OPS, CostLedger, critical_path, ops_dict
from smc_hmm.errors import ConfigError, parse_json

REPORT_VERSION = 1

_SHORT = {
    "encrypt": "enc",
    "decrypt": "dec",
    "add": "add",
    "scalar_mul": "s.mul",
    "multiexp_terms": "mexp",
    "rerandomize": "rerand",
    "ot": "OT",
    "compare": "cmp",
}
_TRAFFIC_COLUMNS = ("msgs out/in", "bytes out/in")
_TIME_COLUMNS = ("wall s", "cpu s", "compute s", "wait s")


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise ConfigError(f"malformed cost report: {what}")


def _validate_party(name: str, d) -> dict:
    _require(isinstance(d, dict), f"party {name!r} is not an object")
    for key in ("ops", "traffic", "messages", "bytes", "time", "phases"):
        _require(isinstance(d.get(key), dict), f"party {name!r} lacks {key!r}")
    _require(isinstance(d.get("rounds"), int), f"party {name!r} lacks integer 'rounds'")
    for op, v in d["ops"].items():
        _require(
            isinstance(op, str) and isinstance(v, int) and v >= 0,
            f"party {name!r} has a bad count for {op!r}",
        )
    for key in ("wall", "cpu", "wait", "compute"):
        _require(isinstance(d["time"].get(key), (int, float)), f"party {name!r} lacks time.{key}")
    return d


class CostReport:
    """The merged costs of every party of one run: tables (rich) and JSON."""

    def __init__(
        self,
        parties: Mapping[str, dict],
        meta: Mapping | None = None,
        critical_path: float | None = None,
    ):
        self.parties: dict[str, dict] = {
            name: _validate_party(name, d) for name, d in sorted(parties.items())
        }
        self.meta: dict = dict(sorted((meta or {}).items()))
        #: seconds with one machine per party (:func:`~smc_hmm.cost.ledger.critical_path`);
        #: None where the run's timelines are not known (parties in separate processes)
        self.critical_path = critical_path

    @classmethod
    def from_ledgers(cls, ledgers: Iterable[CostLedger], meta: Mapping | None = None):
        ledgers = list(ledgers)
        return cls({lg.party: lg.snapshot() for lg in ledgers}, meta, critical_path(ledgers))

    @classmethod
    def from_dict(cls, d) -> CostReport:
        _require(isinstance(d, dict), "top level is not an object")
        _require(d.get("version") == REPORT_VERSION, f"unsupported version {d.get('version')!r}")
        _require(isinstance(d.get("parties"), dict), "no 'parties' object")
        meta = d.get("meta", {})
        _require(isinstance(meta, dict), "'meta' is not an object")
        path = d.get("totals", {}).get("critical_path")
        _require(path is None or isinstance(path, int | float), "'critical_path' is not a number")
        return cls(d["parties"], meta, path)

    @classmethod
    def from_json(cls, text: str) -> CostReport:
        return cls.from_dict(parse_json(text, "cost report"))

    @classmethod
    def load(cls, path) -> CostReport:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ConfigError(f"cannot read cost report {path}: {e.strerror or e}") from e
        return cls.from_json(text)

    # -- aggregates ----------------------------------------------------------------------

    @property
    def rounds(self) -> int:
        """Rounds of the protocol: the largest causal depth any party saw."""
        return max((p["rounds"] for p in self.parties.values()), default=0)

    @property
    def bytes_total(self) -> int:
        """Encoded bytes sent by all parties (each message counted once)."""
        return sum(p["bytes"]["sent"] for p in self.parties.values())

    @property
    def messages_total(self) -> int:
        return sum(p["messages"]["sent"] for p in self.parties.values())

    @property
    def key_bits(self) -> int | None:
        bits = {p.get("key_bits") for p in self.parties.values()} - {None}
        return bits.pop() if len(bits) == 1 else None

    def ops(self, party: str | None = None) -> dict[str, int]:
        """Operation counts of one party, or summed over all parties."""
        if party is not None:
            return dict(self.parties[party]["ops"])
        total: Counter = Counter()
        for p in self.parties.values():
            total.update(p["ops"])
        return ops_dict(total)

    def totals(self) -> dict:
        return {
            "ops": self.ops(),
            "messages": self.messages_total,
            "bytes": self.bytes_total,
            "rounds": self.rounds,
            "wall_max": max((p["time"]["wall"] for p in self.parties.values()), default=0.0),
            "cpu_sum": sum(p["time"]["cpu"] for p in self.parties.values()),
            "critical_path": self.critical_path,
        }

    # -- output --------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "version": REPORT_VERSION,
            "key_bits": self.key_bits,
            "meta": self.meta,
            "parties": self.parties,
            "totals": self.totals(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    def save(self, path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    def _grids(self) -> list[_Grid]:
        """The content of the three tables: per party, per party and phase, per link."""
        return [self._party_grid(), self._phase_grid(), self._link_grid()]

    def _party_grid(self) -> _Grid:
        """Per party (and in all) the operations, traffic, rounds and times."""
        op_cols = list(OPS)
        op_cols += sorted({op for p in self.parties.values() for op in p["ops"]} - set(OPS))
        note = f"{self.key_bits}-bit keys, {self.rounds} rounds" if self.key_bits else ""
        parties = _Grid(
            "cost per party",
            [
                _Column("party", justify="left", style="bold"),
                *[_Column(_SHORT.get(op, op), "operations") for op in op_cols],
                *[_Column(c, "traffic") for c in (*_TRAFFIC_COLUMNS, "rounds")],
                *[_Column(c, "time") for c in _TIME_COLUMNS],
            ],
            note,
        )
        for name, p in self.parties.items():
            parties.add_row(
                name,
                *[str(p["ops"].get(op, 0)) for op in op_cols],
                *_traffic_cells(p),
                str(p["rounds"]),
                *_time_cells(p["time"]),
            )
        t = self.totals()
        parties.add_row(
            "total",
            *[str(t["ops"].get(op, 0)) for op in op_cols],
            str(t["messages"]),
            str(t["bytes"]),
            str(t["rounds"]),
            f"{t['wall_max']:.3f}",
            f"{t['cpu_sum']:.3f}",
            "",
            "",
            style="italic",
        )
        return parties

    def _phase_grid(self) -> _Grid:
        """Per party and phase the operations, traffic and times."""
        phases = _Grid(
            "cost per phase",
            [
                *_key_columns("party", "phase"),
                _Column("operations", "operations", justify="left", wrap=True),
                *[_Column(c, "traffic") for c in _TRAFFIC_COLUMNS],
                *[_Column(c, "time") for c in _TIME_COLUMNS],
            ],
        )
        for name, p in self.parties.items():
            for phase, s in p["phases"].items():
                ops = ", ".join(f"{_SHORT.get(op, op)} {v}" for op, v in s["ops"].items() if v)
                phases.add_row(name, phase, ops or "-", *_traffic_cells(s), *_time_cells(s))
        return phases

    def _link_grid(self) -> _Grid:
        """Per link (sender, receiver) the messages and bytes sent."""
        links = _Grid(
            "traffic per link",
            [
                *_key_columns("from", "to"),
                _Column("messages", "traffic"),
                _Column("bytes", "traffic"),
            ],
        )
        for name, p in self.parties.items():
            for peer, t in p["traffic"].items():
                if t["sent"]["messages"]:
                    links.add_row(name, peer, str(t["sent"]["messages"]), str(t["sent"]["bytes"]))
        return links

    def tables(self, width: int | None = None) -> list:
        """rich Tables: per party, per party and phase, and traffic per link.

        Without ``width``: the three wide tables.  With ``width`` (a console's
        width), a table wider than that is split into several that repeat its
        key columns and carry whole column groups (operations, traffic, time),
        so that no column name or number is cut.
        """
        return [table for grid in self._grids() for table in grid.layout(width)]

    def render(self, console=None) -> None:
        """Print the tables, laid out for ``console.width`` (default: a new Console)."""
        from rich.console import Console

        console = console or Console()
        for table in self.tables(console.width):
            console.print(table)
        if self.critical_path is not None:
            console.print(
                f"critical path: {self.critical_path:.3f} s with one machine per party "
                f"(the slowest party's wall here: {self.totals()['wall_max']:.3f} s)"
            )

    def to_text(self, width: int = 160) -> str:
        """The tables as plain text laid out for ``width`` columns (for logs and tests)."""
        from rich.console import Console

        console = Console(
            width=width, record=True, color_system=None, force_terminal=False, file=_NullFile()
        )
        self.render(console)
        return console.export_text()


class _NullFile:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


def _traffic_cells(d: dict) -> list[str]:
    return [
        f"{d['messages']['sent']}/{d['messages']['recv']}",
        f"{d['bytes']['sent']}/{d['bytes']['recv']}",
    ]


def _time_cells(t: dict) -> list[str]:
    return [f"{t['wall']:.3f}", f"{t['cpu']:.3f}", f"{t['compute']:.3f}", f"{t['wait']:.3f}"]


# -- layout ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Column:
    name: str
    #: column group; "" marks a key column, repeated in every part of a split table
    group: str = ""
    justify: str = "right"
    style: str | None = None
    #: free text (lists of operations) that may wrap between words; other cells never wrap
    wrap: bool = False


def _key_columns(*names: str) -> list[_Column]:
    """Key columns (left-justified text, repeated in every part of a split table)."""
    return [_Column(name, justify="left") for name in names]


@dataclass
class _Grid:
    """One table's content before layout: columns and rows of plain strings."""

    title: str
    columns: list[_Column]
    #: shown in parentheses after the title (of the first part, when split)
    note: str = ""
    rows: list[tuple[list[str], str | None]] = field(default_factory=list)

    def add_row(self, *cells: str, style: str | None = None) -> None:
        self.rows.append((list(cells), style))

    def _min_width(self, i: int) -> int:
        """Narrowest width of column ``i`` with its name on one line and no cell cut."""
        from rich.cells import cell_len

        col = self.columns[i]
        cells = [cells[i] for cells, _ in self.rows]
        if col.wrap:
            cells = [word for cell in cells for word in cell.split()]
        return max([cell_len(col.name), *map(cell_len, cells)])

    def _fits(self, idx: list[int], width: int) -> bool:
        # rich's default box: one rule per column edge and one space of padding each side
        return sum(self._min_width(i) for i in idx) + 3 * len(idx) + 1 <= width

    def _table(self, idx: list[int], title: str, fits: bool = True):
        from rich.cells import cell_len
        from rich.table import Table

        table = Table(title=title)
        for i in idx:
            col = self.columns[i]
            table.add_column(
                col.name,
                justify=col.justify,
                style=col.style,
                min_width=cell_len(col.name),  # the name on one line
                no_wrap=fits and not col.wrap,  # only free text gives way (too narrow: fold)
                overflow="fold",
            )
        for cells, style in self.rows:
            table.add_row(*(cells[i] for i in idx), style=style)
        return table

    def layout(self, width: int | None) -> list:
        """The table whole if it fits ``width`` (or no width), else split by column group."""
        everything = list(range(len(self.columns)))
        note = f" ({self.note})" if self.note else ""
        if width is None or self._fits(everything, width):
            return [self._table(everything, self.title + note)]
        keys = [i for i in everything if not self.columns[i].group]
        groups: dict[str, list[int]] = {}
        for i in everything:
            if self.columns[i].group:
                groups.setdefault(self.columns[i].group, []).append(i)
        parts: list[tuple[list[str], list[int]]] = []  # (group labels, column indices)
        for name, idx in groups.items():
            if parts and self._fits(keys + parts[-1][1] + idx, width):
                parts[-1][0].append(name)
                parts[-1][1].extend(idx)
            elif self._fits(keys + idx, width):
                parts.append(([name], list(idx)))
            else:  # the group alone is too wide: as many of its columns per part as fit
                first = len(parts)
                for i in idx:
                    if len(parts) > first and self._fits(keys + parts[-1][1] + [i], width):
                        parts[-1][1].append(i)
                    else:
                        label = name if len(parts) == first else f"{name}, continued"
                        parts.append(([label], [i]))
        if not parts:  # nothing but key columns
            return [self._table(everything, self.title + note, fits=False)]
        tables = []
        for n, (labels, idx) in enumerate(parts):
            cols = sorted(keys + idx)
            title = f"{self.title}: {', '.join(labels)}" + (note if n == 0 else "")
            tables.append(self._table(cols, title, fits=self._fits(cols, width)))
        return tables
