"""Cost accounting: a ledger per party, merged reports, and a cost model.

Counting happens *outside* protocol code (DESIGN 3):

* :class:`CostLedger` is both a crypto :class:`~smc_hmm.crypto.Meter` (each
  party's metered key view, ``public_key.with_meter(ledger)``, reports
  encryptions, decryptions, homomorphic additions, scalar multiplications,
  multi-exponentiation terms and re-randomisations) and a transport
  :class:`~smc_hmm.transport.base.ChannelObserver` (the channel reports every
  message with its real encoded size and causal depth, and how long each
  receive waited).  Protocol primitives count composite invocations such as
  oblivious transfers and secure comparisons through the party context
  (``ctx.count("ot")``), never by touching the ledger themselves.
* Rounds are the causal depth: a message carries its sender's depth + 1 and a
  receive raises the receiver's depth to at least the message's, so parallel
  sends count once.  A party's ``rounds`` is the largest depth it saw; the
  protocol's rounds are the maximum over parties.
* ``with ledger.phase("name"):`` times a phase: wall time, CPU time of the
  party's own thread (:func:`time.thread_time`), and waiting (the sum of the
  channel's reported receive waits).  ``compute = wall - wait``.  Phases nest;
  time is *exclusive* (an inner phase's time is not also counted in the outer
  one), so the phases of a party add up to its total.  Everything outside any
  named phase is accounted to the phase ``"other"``.  CPU time covers only the
  party's thread: work handed to a :class:`~smc_hmm.compute.Compute` process
  pool shows up as compute wall time, not CPU time.

:class:`CostReport` merges the ledgers of all parties (in-process, or the JSON
snapshots of separate OS processes) and renders a rich table or deterministic
JSON (sorted keys; every known operation always present).

:class:`CostModel` predicts running time from measured primitive rates
(:func:`measure_rates`), a report, a target key size, an input-size factor and
a network (latency, bandwidth).  Scaling assumption, measured here with gmpy2
between 1024- and 2048-bit keys and stated in :data:`SCALING_EXPONENTS`:

* operations that are a modular exponentiation with an exponent as long as the
  key (encryption -- the DJN randomizer h_s^alpha with |alpha| = bits/2 --,
  CRT decryption, re-randomisation) cost ~ bits^2.7 (bits multiplications of
  cost ~ bits^1.6 each; GMP's sub-quadratic multiplication);
* a homomorphic addition is one multiplication mod n^2: ~ bits^1.6;
* a scalar multiplication or multi-exponentiation term with a fixed-size
  (e.g. 64-bit fixed-point) exponent costs a fixed number of multiplications
  plus reductions: ~ bits^1.75;
* OT and comparison invocations cost nothing extra in the model: their
  encryptions, decryptions and exponentiations are counted as primitive
  operations already.

Network time is ``latency * rounds + bytes / bandwidth``.  Encoded bytes are
scaled linearly with the key size (ciphertexts and keys dominate the traffic)
and, like operation counts, linearly with the input-size factor; rounds do not
change with either.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from smc_hmm.crypto.keys import Meter
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.transport.base import ChannelObserver

#: Operations every ledger and report lists (zeros included), in display order.
OPS: tuple[str, ...] = (
    "encrypt",
    "decrypt",
    "add",
    "scalar_mul",
    "multiexp_terms",
    "rerandomize",
    "ot",
    "compare",
)
#: Primitive crypto operations with a cost in the model (OT and comparison are composites).
CRYPTO_OPS: tuple[str, ...] = OPS[:6]
#: The phase that collects everything outside a named phase.
ROOT_PHASE = "other"
#: Cost of one operation ~ bits ** exponent (measured 1024 -> 2048 bits, gmpy2 2.3).
SCALING_EXPONENTS: dict[str, float] = {
    "encrypt": 2.7,
    "decrypt": 2.7,
    "rerandomize": 2.7,
    "add": 1.6,
    "scalar_mul": 1.75,
    "multiexp_terms": 1.75,
}
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


def _check_op(op: str, k: int) -> int:
    if not isinstance(op, str) or not op:
        raise InvalidInputError(f"operation name must be a non-empty string, got {op!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidInputError(f"operation count must be an integer >= 0, got {k!r}")
    return k


def _ops_dict(counter: Mapping[str, int]) -> dict[str, int]:
    """All known operations (zeros included) plus any extra ones, sorted by name."""
    out = {op: 0 for op in OPS}
    out.update({op: int(v) for op, v in counter.items()})
    return dict(sorted(out.items()))


class _PhaseStats:
    __slots__ = ("wall", "cpu", "wait", "ops", "sent", "recv", "entries")

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.wait = 0.0
        self.ops: Counter = Counter()
        self.sent = [0, 0]  # messages, bytes
        self.recv = [0, 0]
        self.entries = 0

    def to_dict(self) -> dict:
        return {
            "wall": self.wall,
            "cpu": self.cpu,
            "wait": self.wait,
            "compute": max(0.0, self.wall - self.wait),
            "ops": _ops_dict(self.ops),
            "messages": {"sent": self.sent[0], "recv": self.recv[0]},
            "bytes": {"sent": self.sent[1], "recv": self.recv[1]},
            "entries": self.entries,
        }


class CostLedger(Meter, ChannelObserver):
    """One party's costs: crypto operations, traffic per peer, rounds, time per phase.

    Thread-safe for counting.  Phases must be entered and left on the party's
    own thread (CPU time is that thread's :func:`time.thread_time`).
    """

    def __init__(self, party: str, *, key_bits: int | None = None):
        if not isinstance(party, str) or not party:
            raise InvalidInputError("a ledger needs a party name")
        self.party = party
        self.key_bits = key_bits
        self._lock = threading.Lock()
        self._ops: Counter = Counter()
        self._traffic: dict[tuple[str, str], list[int]] = {}
        self._rounds = 0
        self._phases: dict[str, _PhaseStats] = {}
        # stack of [name, wall_start, cpu_start] for the open phases (innermost last)
        self._stack: list[list] = []

    # -- Meter: crypto operations (and OT / comparison invocations) --------------

    def count(self, op: str, k: int = 1) -> None:
        k = _check_op(op, k)
        with self._lock:
            self._ops[op] += k
            self._current_stats().ops[op] += k

    # -- ChannelObserver: messages, bytes, depth, waiting --------------------------

    def on_send(self, peer: str, tag: str, nbytes: int, depth: int) -> None:
        with self._lock:
            entry = self._traffic.setdefault((peer, "sent"), [0, 0])
            entry[0] += 1
            entry[1] += int(nbytes)
            stats = self._current_stats()
            stats.sent[0] += 1
            stats.sent[1] += int(nbytes)
            self._rounds = max(self._rounds, int(depth))

    def on_recv(self, peer: str, tag: str, nbytes: int, depth: int, waited_seconds: float) -> None:
        with self._lock:
            entry = self._traffic.setdefault((peer, "recv"), [0, 0])
            entry[0] += 1
            entry[1] += int(nbytes)
            stats = self._current_stats()
            stats.recv[0] += 1
            stats.recv[1] += int(nbytes)
            stats.wait += max(0.0, float(waited_seconds))
            self._rounds = max(self._rounds, int(depth))

    # -- phases ----------------------------------------------------------------------

    def _current_stats(self) -> _PhaseStats:
        name = self._stack[-1][0] if self._stack else ROOT_PHASE
        stats = self._phases.get(name)
        if stats is None:
            stats = self._phases[name] = _PhaseStats()
        return stats

    def _flush_top(self, wall: float, cpu: float) -> None:
        """Add the innermost open phase's time since its (re)start; restart its clock."""
        top = self._stack[-1]
        stats = self._phases.setdefault(top[0], _PhaseStats())
        stats.wall += wall - top[1]
        stats.cpu += cpu - top[2]
        top[1], top[2] = wall, cpu

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase (exclusive of nested phases); ops and traffic inside count to it."""
        if not isinstance(name, str) or not name:
            raise InvalidInputError("a phase needs a non-empty name")
        with self._lock:
            wall, cpu = time.perf_counter(), time.thread_time()
            if self._stack:
                self._flush_top(wall, cpu)
            self._stack.append([name, wall, cpu])
            self._phases.setdefault(name, _PhaseStats()).entries += 1
        try:
            yield
        finally:
            with self._lock:
                wall, cpu = time.perf_counter(), time.thread_time()
                self._flush_top(wall, cpu)
                self._stack.pop()
                if self._stack:
                    self._stack[-1][1], self._stack[-1][2] = wall, cpu

    @contextmanager
    def running(self) -> Iterator[None]:
        """Time a whole run: time outside named phases goes to :data:`ROOT_PHASE`."""
        with self.phase(ROOT_PHASE):
            yield

    # -- read-out ----------------------------------------------------------------------

    @property
    def ops(self) -> dict[str, int]:
        with self._lock:
            return _ops_dict(self._ops)

    @property
    def rounds(self) -> int:
        return self._rounds

    def traffic(self, peer: str, direction: str) -> tuple[int, int]:
        """(messages, bytes) exchanged with ``peer``; ``direction`` is "sent" or "recv"."""
        if direction not in ("sent", "recv"):
            raise InvalidInputError("direction must be 'sent' or 'recv'")
        with self._lock:
            m, b = self._traffic.get((peer, direction), (0, 0))
        return m, b

    def snapshot(self) -> dict:
        """A JSON-ready dict of everything counted so far (open phases included so far)."""
        with self._lock:
            phases = {name: s.to_dict() for name, s in self._phases.items()}
            traffic: dict[str, dict] = {}
            for (peer, direction), (m, b) in sorted(self._traffic.items()):
                traffic.setdefault(
                    peer, {"sent": {"messages": 0, "bytes": 0}, "recv": {"messages": 0, "bytes": 0}}
                )
                traffic[peer][direction] = {"messages": m, "bytes": b}
            ops = _ops_dict(self._ops)
            rounds = self._rounds
        return _party_dict(self.party, self.key_bits, ops, traffic, rounds, phases)


def _party_dict(party, key_bits, ops, traffic, rounds, phases) -> dict:
    wall = sum(p["wall"] for p in phases.values())
    cpu = sum(p["cpu"] for p in phases.values())
    wait = sum(p["wait"] for p in phases.values())
    sent = [sum(t["sent"][k] for t in traffic.values()) for k in ("messages", "bytes")]
    recv = [sum(t["recv"][k] for t in traffic.values()) for k in ("messages", "bytes")]
    return {
        "party": party,
        "key_bits": key_bits,
        "ops": ops,
        "traffic": traffic,
        "messages": {"sent": sent[0], "recv": recv[0]},
        "bytes": {"sent": sent[1], "recv": recv[1]},
        "rounds": rounds,
        "time": {"wall": wall, "cpu": cpu, "wait": wait, "compute": max(0.0, wall - wait)},
        "phases": dict(sorted(phases.items())),
    }


# -- reports ------------------------------------------------------------------------------


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
    """The merged costs of every party of one run: table (rich) and JSON."""

    def __init__(self, parties: Mapping[str, dict], meta: Mapping | None = None):
        self.parties: dict[str, dict] = {
            name: _validate_party(name, d) for name, d in sorted(parties.items())
        }
        self.meta: dict = dict(sorted((meta or {}).items()))

    @classmethod
    def from_ledgers(cls, ledgers: Iterable[CostLedger], meta: Mapping | None = None):
        return cls({lg.party: lg.snapshot() for lg in ledgers}, meta)

    @classmethod
    def from_dict(cls, d) -> CostReport:
        _require(isinstance(d, dict), "top level is not an object")
        _require(d.get("version") == REPORT_VERSION, f"unsupported version {d.get('version')!r}")
        _require(isinstance(d.get("parties"), dict), "no 'parties' object")
        meta = d.get("meta", {})
        _require(isinstance(meta, dict), "'meta' is not an object")
        return cls(d["parties"], meta)

    @classmethod
    def from_json(cls, text: str) -> CostReport:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"cost report is not valid JSON: {e}") from e
        return cls.from_dict(data)

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
        return _ops_dict(total)

    def totals(self) -> dict:
        return {
            "ops": self.ops(),
            "messages": self.messages_total,
            "bytes": self.bytes_total,
            "rounds": self.rounds,
            "wall_max": max((p["time"]["wall"] for p in self.parties.values()), default=0.0),
            "cpu_sum": sum(p["time"]["cpu"] for p in self.parties.values()),
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

    def tables(self) -> list:
        """rich Tables: per party, per party and phase, and traffic per link."""
        from rich.table import Table

        op_cols = [op for op in OPS]
        extra = sorted({op for p in self.parties.values() for op in p["ops"]} - set(OPS))
        op_cols += extra
        title = "cost per party"
        if self.key_bits:
            title += f" ({self.key_bits}-bit keys, {self.rounds} rounds)"
        parties = Table(title=title)
        parties.add_column("party", style="bold")
        for op in op_cols:
            parties.add_column(_SHORT.get(op, op), justify="right")
        for col in (
            "msgs out/in",
            "bytes out/in",
            "rounds",
            "wall s",
            "cpu s",
            "compute s",
            "wait s",
        ):
            parties.add_column(col, justify="right")
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

        phases = Table(title="cost per phase")
        for col in (
            "party",
            "phase",
            "operations",
            "msgs out/in",
            "bytes out/in",
            "wall s",
            "cpu s",
            "compute s",
            "wait s",
        ):
            phases.add_column(
                col, justify="left" if col in ("party", "phase", "operations") else "right"
            )
        for name, p in self.parties.items():
            for phase, s in p["phases"].items():
                ops = ", ".join(f"{_SHORT.get(op, op)} {v}" for op, v in s["ops"].items() if v)
                phases.add_row(name, phase, ops or "-", *_traffic_cells(s), *_time_cells(s))

        links = Table(title="traffic per link")
        for col in ("from", "to", "messages", "bytes"):
            links.add_column(col, justify="right" if col in ("messages", "bytes") else "left")
        for name, p in self.parties.items():
            for peer, t in p["traffic"].items():
                if t["sent"]["messages"]:
                    links.add_row(name, peer, str(t["sent"]["messages"]), str(t["sent"]["bytes"]))
        return [parties, phases, links]

    def render(self, console=None) -> None:
        from rich.console import Console

        console = console or Console()
        for table in self.tables():
            console.print(table)

    def to_text(self, width: int = 160) -> str:
        """The tables as plain text (for logs and tests)."""
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


# -- cost model ---------------------------------------------------------------------------


@dataclass
class PrimitiveRates:
    """Measured operations per second at one key size (single thread)."""

    bits: int
    rates: dict[str, float]
    scalar_bits: int = 64
    exponents: dict[str, float] = field(default_factory=lambda: dict(SCALING_EXPONENTS))

    def __post_init__(self) -> None:
        if not isinstance(self.bits, int) or self.bits < 2:
            raise InvalidInputError(f"bits must be a positive integer, got {self.bits!r}")
        for op in CRYPTO_OPS:
            rate = self.rates.get(op)
            if not isinstance(rate, (int, float)) or not (rate > 0 and math.isfinite(rate)):
                raise InvalidInputError(
                    f"rate for {op!r} must be a finite number > 0, got {rate!r}"
                )
            if op not in self.exponents:
                raise InvalidInputError(f"no scaling exponent for {op!r}")

    def seconds_per(self, op: str, bits: int | None = None) -> float:
        """Seconds for one ``op`` at ``bits`` (scaled as (bits / measured)^exponent)."""
        if op not in CRYPTO_OPS:
            return 0.0  # composite (OT, comparison): its primitives are counted separately
        base = 1.0 / self.rates[op]
        if bits is None or bits == self.bits:
            return base
        return base * (bits / self.bits) ** self.exponents[op]

    def at(self, bits: int) -> PrimitiveRates:
        """The predicted rates at another key size."""
        return PrimitiveRates(
            bits,
            {op: 1.0 / self.seconds_per(op, bits) for op in CRYPTO_OPS},
            self.scalar_bits,
            dict(self.exponents),
        )

    def to_dict(self) -> dict:
        return {
            "bits": self.bits,
            "rates": dict(sorted(self.rates.items())),
            "scalar_bits": self.scalar_bits,
            "exponents": dict(sorted(self.exponents.items())),
        }

    @classmethod
    def from_dict(cls, d) -> PrimitiveRates:
        try:
            return cls(
                int(d["bits"]),
                {k: float(v) for k, v in d["rates"].items()},
                int(d.get("scalar_bits", 64)),
                {k: float(v) for k, v in d.get("exponents", SCALING_EXPONENTS).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"malformed primitive rates: {e}") from e


def _rate(fn, batch: int, min_seconds: float) -> float:
    """Operations per second of ``fn()`` (which performs ``batch`` ops), best of >= 3 runs."""
    fn()  # warm up (tables, caches)
    best = math.inf
    runs = 0
    start = time.perf_counter()
    while runs < 3 or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return batch / max(best, 1e-9)


def measure_rates(
    public_key, private_key, *, scalar_bits: int = 64, batch: int = 8, min_seconds: float = 0.05
) -> PrimitiveRates:
    """Measure single-thread rates of the primitive operations for this key pair.

    Uses the real crypto paths: encryption and re-randomisation as a party
    holding only the public key does them (the default randomizer, after its
    tables are built: building them is a one-off cost per party and key that
    the model leaves out), CRT decryption in batches below the threading
    threshold, ``scalar_bits``-bit scalars and multi-exponentiation weights.
    Takes about ``6 * min_seconds`` plus one warm-up of each operation.
    """
    import gmpy2
    from gmpy2 import mpz

    from smc_hmm.crypto.cipherarray import CipherArray
    from smc_hmm.crypto.keys import PublicKey

    sk = private_key
    if sk.public_key.n != public_key.n:
        raise InvalidInputError("the private key does not belong to the public key")
    pk = PublicKey(public_key.n, rng=public_key.rng)  # public-key-only encryptor, unmetered
    rng = pk.rng
    n2 = pk.nsquare_mpz
    values = [rng.randbits(32) for _ in range(batch)]
    cts = pk.encrypt_ints(values)
    scalars = [rng.randbits(scalar_bits) | 1 for _ in range(batch)]
    terms = 64
    bases = CipherArray.encrypt(pk, [v & 0xFF for v in (values * terms)[:terms]])
    weights = [rng.randbits(scalar_bits) for _ in range(terms)]
    old_threads = getattr(sk, "decrypt_threads", 1)
    rates = {}
    rates["encrypt"] = _rate(lambda: pk.encrypt_ints(values), batch, min_seconds)
    try:
        sk.decrypt_threads = 1
        rates["decrypt"] = _rate(lambda: sk.decrypt_ints(cts), batch, min_seconds)
    finally:
        sk.decrypt_threads = old_threads
    rates["add"] = _rate(lambda: [a * b % n2 for a in cts for b in cts], batch * batch, min_seconds)
    rates["scalar_mul"] = _rate(
        lambda: [gmpy2.powmod(c, mpz(k), n2) for c, k in zip(cts, scalars)], batch, min_seconds
    )
    rates["multiexp_terms"] = _rate(lambda: bases.lincomb(weights), terms, min_seconds)
    rates["rerandomize"] = _rate(lambda: pk.rerandomize(cts), batch, min_seconds)
    return PrimitiveRates(pk.bits, rates, scalar_bits)


@dataclass
class Prediction:
    """Predicted time of one run: per-party compute, network, and two totals."""

    bits: int
    compute: dict[str, float]
    network_seconds: float
    rounds: int
    bytes_total: int
    latency: float
    bandwidth: float | None
    #: every party computes in turn and every byte crosses the network one after another
    serial_seconds: float
    #: the busiest party's compute and link, perfectly overlapped with everyone else
    parallel_seconds: float

    def to_dict(self) -> dict:
        return {
            "bits": self.bits,
            "compute": dict(sorted(self.compute.items())),
            "network_seconds": self.network_seconds,
            "rounds": self.rounds,
            "bytes_total": self.bytes_total,
            "latency": self.latency,
            "bandwidth": self.bandwidth,
            "serial_seconds": self.serial_seconds,
            "parallel_seconds": self.parallel_seconds,
        }

    def table(self):
        from rich.table import Table

        net = "no bandwidth limit" if self.bandwidth is None else f"{self.bandwidth / 1e6:g} MB/s"
        t = Table(title=f"predicted at {self.bits} bits\n{self.latency * 1e3:g} ms, {net}")
        t.add_column("item")
        t.add_column("seconds", justify="right")
        for party, s in sorted(self.compute.items()):
            t.add_row(f"compute {party}", f"{s:.4f}")
        t.add_row(
            f"network ({self.rounds} rounds, {self.bytes_total} bytes)",
            f"{self.network_seconds:.4f}",
        )
        t.add_row("total, parties in turn", f"{self.serial_seconds:.4f}", style="bold")
        t.add_row("total, fully overlapped", f"{self.parallel_seconds:.4f}")
        return t


class CostModel:
    """Predicts running time from primitive rates and a ledger (see module docstring)."""

    def __init__(self, rates: PrimitiveRates):
        if not isinstance(rates, PrimitiveRates):
            raise InvalidInputError("CostModel needs PrimitiveRates (see measure_rates)")
        self.rates = rates

    def compute_seconds(self, ops: Mapping[str, int], bits: int | None = None) -> float:
        """Time for these operation counts at ``bits`` (default: the measured size)."""
        bits = self.rates.bits if bits is None else bits
        return sum(int(k) * self.rates.seconds_per(op, bits) for op, k in ops.items())

    @staticmethod
    def network_seconds(
        rounds: int, nbytes: float, latency: float, bandwidth: float | None
    ) -> float:
        """``latency * rounds + bytes / bandwidth`` (no bandwidth: unlimited)."""
        if latency < 0 or (bandwidth is not None and bandwidth <= 0):
            raise InvalidInputError("latency must be >= 0 and bandwidth > 0")
        return latency * rounds + (0.0 if bandwidth is None else nbytes / bandwidth)

    def predict(
        self,
        report: CostReport,
        *,
        bits: int | None = None,
        latency: float = 0.0,
        bandwidth: float | None = None,
        input_scale: float = 1.0,
        measured_bits: int | None = None,
    ) -> Prediction:
        """Predict the run of ``report`` at ``bits`` with inputs ``input_scale`` times larger.

        Operation counts and bytes scale linearly with ``input_scale``; bytes
        scale linearly with the key size relative to the report's
        (``measured_bits``, default ``report.key_bits``, else the rates' size).
        """
        if not (input_scale > 0 and math.isfinite(input_scale)):
            raise InvalidInputError("input_scale must be a finite number > 0")
        bits = self.rates.bits if bits is None else int(bits)
        source_bits = measured_bits or report.key_bits or self.rates.bits
        byte_scale = input_scale * bits / source_bits
        compute = {
            name: input_scale * self.compute_seconds(p["ops"], bits)
            for name, p in report.parties.items()
        }
        total_bytes = report.bytes_total * byte_scale
        busiest = (
            max(
                (max(p["bytes"]["sent"], p["bytes"]["recv"]) for p in report.parties.values()),
                default=0,
            )
            * byte_scale
        )
        rounds = report.rounds
        serial_net = self.network_seconds(rounds, total_bytes, latency, bandwidth)
        parallel_net = self.network_seconds(rounds, busiest, latency, bandwidth)
        return Prediction(
            bits=bits,
            compute=compute,
            network_seconds=serial_net,
            rounds=rounds,
            bytes_total=round(total_bytes),
            latency=latency,
            bandwidth=bandwidth,
            serial_seconds=sum(compute.values()) + serial_net,
            parallel_seconds=max(compute.values(), default=0.0) + parallel_net,
        )
