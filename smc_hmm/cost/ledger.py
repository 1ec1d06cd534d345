"""The per-party cost ledger: operation counts, traffic, rounds and time per phase.

One responsibility: *count* what one party does.  See ``docs/architecture.md``
("The cost ledger").  Counting happens *outside* protocol code:

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

:meth:`CostLedger.snapshot` is the JSON-ready per-party dict that
:class:`~smc_hmm.cost.report.CostReport` merges.

The critical path.  A ledger also keeps its run's *timeline*: per message sent or received,
its peer, tag and the compute since the previous one (wall time minus the receive's wait).
:func:`critical_path` replays the timelines of all parties of one in-process run as if
each party had a machine of its own and the network no latency: a receive waits for the
matching send (the k-th message of a tag from a peer), compute segments add up.  It is what
two (or more) machines would take, from one run on one machine (``docs/cost-model.md``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from smc_hmm.crypto.keys import Meter
from smc_hmm.errors import InvalidInputError
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
#: The phase that collects everything outside a named phase.
ROOT_PHASE = "other"


def _check_op(op: str, k: int) -> int:
    if not isinstance(op, str) or not op:
        raise InvalidInputError(f"operation name must be a non-empty string, got {op!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidInputError(f"operation count must be an integer >= 0, got {k!r}")
    return k


def ops_dict(counter: Mapping[str, int]) -> dict[str, int]:
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
            "ops": ops_dict(self.ops),
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
        # the run's timeline: (kind, peer, tag, compute seconds before it); see critical_path
        self.timeline: list[tuple[str, str | None, str | None, float]] = []
        self._last_event: float | None = None

    # -- Meter: crypto operations (and OT / comparison invocations) --------------

    def count(self, op: str, k: int = 1) -> None:
        k = _check_op(op, k)
        with self._lock:
            self._ops[op] += k
            self._current_stats().ops[op] += k

    # -- ChannelObserver: messages, bytes, depth, waiting --------------------------

    def _mark(self, kind: str, peer, tag, waited: float = 0.0) -> None:
        """Append one timeline event (under the lock; only while a run is timed)."""
        if self._last_event is None:
            return
        now = time.perf_counter()
        self.timeline.append((kind, peer, tag, max(0.0, now - self._last_event - waited)))
        self._last_event = now

    def on_send(self, peer: str, tag: str, nbytes: int, depth: int) -> None:
        with self._lock:
            self._mark("send", peer, tag)
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
            self._mark("recv", peer, tag, max(0.0, float(waited_seconds)))

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
        """Time a whole run: time outside named phases goes to :data:`ROOT_PHASE`; the
        run's timeline (:func:`critical_path`) starts and ends with it."""
        with self._lock:
            self.timeline, self._last_event = [], time.perf_counter()
        try:
            with self.phase(ROOT_PHASE):
                yield
        finally:
            with self._lock:
                self._mark("end", None, None)
                self._last_event = None

    # -- read-out ----------------------------------------------------------------------

    @property
    def ops(self) -> dict[str, int]:
        with self._lock:
            return ops_dict(self._ops)

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
            ops = ops_dict(self._ops)
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


def critical_path(ledgers: Iterable[CostLedger]) -> float | None:
    """Seconds the run would take with one machine per party and no network latency:
    every party's timeline replayed, a receive starting no earlier than its matching send
    (module docstring).  None if a timeline is missing or does not match up."""
    lines = {lg.party: list(lg.timeline) for lg in ledgers}
    if not lines or any(not t or t[-1][0] != "end" for t in lines.values()):
        return None
    clock = dict.fromkeys(lines, 0.0)
    at = dict.fromkeys(lines, 0)
    sent: dict[tuple, list[float]] = {}
    taken: Counter = Counter()
    progress = True
    while progress:
        progress = False
        for party, events in lines.items():
            while at[party] < len(events):
                kind, peer, tag, compute = events[at[party]]
                if kind == "recv":
                    key = (peer, party, tag)
                    times = sent.get(key, [])
                    if taken[key] >= len(times):
                        break  # its send is not replayed yet
                    # the compute comes first, then the wait for the message
                    clock[party] = max(clock[party] + compute, times[taken[key]])
                    taken[key] += 1
                else:
                    clock[party] += compute
                    if kind == "send":
                        sent.setdefault((party, peer, tag), []).append(clock[party])
                at[party] += 1
                progress = True
    if any(at[p] < len(e) for p, e in lines.items()):
        return None  # a receive without its send: not one run's timelines
    return max(clock.values())
