"""A long-running serving party: ``smc-hmm serve --role bob --config parties.toml``.

One Bob (the model owner) serves many clients.  The server listens on its
``[parties.NAME]`` address with mutual TLS and runs one protocol session per
authenticated client connection, with the same role code as every other run
mode (the protocol is found through the plugin registry, :func:`smc_hmm.protocol.find`).
The client side is :mod:`smc_hmm.runtime.client` (``smc-hmm keyword --server``,
``smc-hmm party --role alice`` against a configuration with a ``[serve]`` table).

Who may connect
---------------
A client is any holder of a certificate issued by the configured CA
(``[tls] ca_cert``) that carries the *client role*
(:data:`smc_hmm.certs.CLIENT_ROLE_URI`, made by ``smc-hmm certs --clients``) and
names itself in the hello as its certificate says (CN / SAN).  A certificate from
another CA fails the TLS handshake; a party certificate without the client role,
a hello naming somebody else or another server is refused with a reason.  In the
session the client plays the protocol's other role under the name that role's
party has in the configuration (``alice``), so the role functions run unchanged.

Limits
------
Unauthenticated and authenticated connections have separate budgets, so that load
of the first kind never starves the second (``docs/serving.md``, "Limits"):

* **The front door** (one thread) accepts, runs every TLS handshake and hello
  without blocking (non-blocking sockets on one selector), and never waits for a
  client.  At most ``max_pending`` connections may be pending (accepted, not yet
  authenticated) at once, at most ``max_pending_per_address`` from one source
  address; a connection beyond either cap closes the *oldest* pending connection
  of its own address, or of the address with the most pending connections, at
  once.  A connection that has not finished its TLS handshake and hello within
  ``handshake_timeout`` seconds is closed.  None of them holds a thread.  One source
  address may open ``connect_rate_per_address`` new connections a second (bursts of
  ``connect_burst_per_address``); a further one is closed on arrival, before any TLS
  work.
* **Sessions**: ``max_sessions`` run at once, at most ``max_sessions_per_client``
  of them for one client certificate name; a further client waits for a slot, in
  arrival order (``when_busy = "wait"``, at most ``max_waiting`` clients and
  ``max_sessions_per_client`` of one name, each at most ``wait_timeout`` seconds)
  or is refused at once (``"refuse"``) with :class:`~smc_hmm.errors.ServerBusyError`
  in its hello reply.  One client name may start ``session_rate_per_client`` sessions
  a second (bursts of ``session_burst_per_client``); beyond, it is refused the same
  way (a session costs Bob work before its client sends anything useful).
* **What one client learns**: every frame gives a client one blinded copy of each of
  Bob's log-densities at that frame, and repeated frames narrow the blinds
  (:mod:`smc_hmm.leakage`).  ``max_frames_per_client`` frames per ``budget_period``
  seconds, or the budget derived from ``hiding_nats`` (a client's best estimate of any
  blinded value stays that many nats from exact), bound it per certificate name
  (:mod:`smc_hmm.runtime.budget`); the protocol charges each run's public length
  before any work on its data, and a run beyond the budget ends with BudgetError.
* **Each session's connection** has a frame limit (``max_frame_bytes``, refused
  at the length prefix), a bounded inbox (``inbox_frames``, ``inbox_bytes``: the
  transport stops reading, so a fast sender is slowed down), a bounded outbox and
  a budget of messages the protocol has not asked for yet
  (``max_buffered_messages``, ``max_buffered_bytes``: beyond it the client is
  dropped with :class:`~smc_hmm.errors.BackpressureError`); a client's key above
  ``max_key_bits`` or any peer-chosen parameter beyond its bound
  (:mod:`smc_hmm.limits`) ends the session with
  :class:`~smc_hmm.errors.ParameterBoundError`.
* Every receive of a session is bounded by ``[run] timeout``, every session by
  ``session_timeout`` (:class:`~smc_hmm.errors.SessionTimeoutError`).  SIGTERM /
  SIGINT: no new client is accepted, running sessions get ``shutdown_grace``
  seconds to finish, the rest are ended
  (:class:`~smc_hmm.errors.ServerShutdownError`), every thread is joined and the
  process exits 0.

Isolation
---------
Each session has its own socket, I/O thread, channel, cost ledger, random
generator and (with Dask) cache of scattered inputs; Bob's private models are
loaded once and only read.  A client that disconnects, stalls, sends a malformed
or oversized frame, a key below the configured minimum or anything the protocol's
declarations reject ends *its own* session with a typed error (transport, wire,
protocol or crypto error); other sessions and the listener are untouched, and an
unexpected exception in a session is contained the same way.  After a session its
socket, thread and buffers are released: threads and open files return to their
baseline (``tests/runtime/test_serve_load.py`` measures threads, descriptors and
resident memory over 58 sessions).

What Bob logs
-------------
Logger ``smc_hmm.serve``, one line per event: a session's number, the client's
certificate name and address, its start, its outcome (``ok`` or the typed
error's class and message) and its cost summary (messages, bytes, rounds,
homomorphic operation counts, wall / compute / wait seconds); refusals with their
reason.  Never a private input, a plaintext, a ciphertext or an output: the
messages of typed errors describe transport and protocol conditions only.

What the service gets: the results record
------------------------------------------
A session's result belongs to the party the protocol gives it to.  When it is the
serving party (speaker ``verify`` and ``anonymous``: the decision bit), Bob's role
returns it, and the server hands it to the operator: ``[serve] results = "FILE"`` or
``smc-hmm serve --results FILE`` appends one JSON line per session (its number, the
client's certificate name and address, the protocol and mode, the outcome, the result
and who learned it, the start and end times in UTC and the seconds), and an application
that embeds the server passes ``on_result`` (a callable, called with the same record
once the session has ended; its exceptions are logged and contained).  When the result
goes to the client only (speaker ``identify``, keyword recognition), the record says so
(``"learned_by": "client"``, ``"decision": null``): the server never has it.  A session
that failed is recorded with its typed error and no result.  The session reply tells the
client whether the server keeps such a record (``"results": true``).  The log lines
above never carry a result; the record does, by the operator's choice.

Adversary model
---------------
As the protocol's (``docs/security.md``): semi-honest clients for privacy (a
malicious client learns at most what the protocol reveals to its role per
session, and may run many sessions -- rate limits are the deployment's), and any
client -- malicious or broken -- for availability of the *other* sessions, which
the isolation above protects within the limits above.  Bob's compute cluster
(``[compute] scheduler``) is Bob's own and trusted: Dask's worker traffic carries
Bob's ciphertexts and weights with its own pickle-based protocol and must run on
Bob's network with Dask's TLS settings (:mod:`smc_hmm.compute_dask`).  Nothing is
pickled across the protocol network.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import json
import logging
import os
import selectors
import signal
import socket
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

from smc_hmm.certs import CLIENT_ROLE_URI
from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger
from smc_hmm.errors import (
    AuthenticationError,
    BudgetError,
    ConfigError,
    EndpointError,
    PeerDisconnectedError,
    PeerTimeoutError,
    ServerBusyError,
    ServerShutdownError,
    SessionTimeoutError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.leakage import samples_for_error
from smc_hmm.limits import DEFAULT_MAX_FRAMES, MAX_KEY_BITS
from smc_hmm.options import check_output_path
from smc_hmm.protocol import find
from smc_hmm.runtime.budget import FrameBudget
from smc_hmm.runtime.config import RunConfig, load_config
from smc_hmm.runtime.context import PartyContext, party_channel
from smc_hmm.transport.tcp import (
    HEADER_BYTES,
    HELLO_VERSION,
    MAX_LENGTH,
    ConnectionBudget,
    TcpTransport,
    decode_hello,
    hello_length,
    peer_identity,
    send_hello,
)

__all__ = ["Server", "ServeSettings", "serve"]

log = logging.getLogger("smc_hmm.serve")

WHEN_BUSY = ("wait", "refuse")
#: the protocols' default blind width (``blind_nats``) when the config names none
DEFAULT_BLIND_NATS = 20.0


@dataclass(frozen=True)
class ServeSettings:
    """``[serve]`` and ``[compute]`` of a parties.toml (command-line options override).

    Every limit is described in the module docstring and, with its default and how to
    change it, in ``docs/serving.md`` ("Limits").
    """

    max_sessions: int = 4
    when_busy: str = "wait"
    max_waiting: int = 16
    wait_timeout: float = 30.0
    session_timeout: float = 600.0
    handshake_timeout: float = 10.0
    shutdown_grace: float = 10.0
    #: connections accepted but not yet authenticated (TLS handshake and hello), in total
    max_pending: int = 256
    #: of them from one source address
    max_pending_per_address: int = 64
    #: new connections one source address may open per second (a token bucket) ...
    connect_rate_per_address: float = 10.0
    #: ... and at once, after a quiet spell
    connect_burst_per_address: int = 20
    #: sessions one client certificate name runs at once (and clients of it waiting)
    max_sessions_per_client: int = 2
    #: sessions one client certificate name may start per second (a token bucket) ...
    session_rate_per_client: float = 2.0
    #: ... and at once, after a quiet spell
    session_burst_per_client: int = 10
    #: the largest Paillier (and DGK) modulus a client may bring, bits
    max_key_bits: int = MAX_KEY_BITS
    #: the largest frame of a session (and at most ``[run] max_frame_bytes``)
    max_frame_bytes: int = 16 * 2**20
    #: frames read from a client and not yet taken by the protocol: reading stops beyond
    inbox_frames: int = 16
    inbox_bytes: int = 2**20
    #: frames queued for a client that does not read: a send waits beyond, then fails
    outbox_bytes: int = 16 * 2**20
    #: messages a client sent that the protocol has not asked for yet: dropped beyond
    max_buffered_messages: int = 16
    max_buffered_bytes: int = 4 * 2**20
    #: a Dask scheduler address (tcp://host:8786); None: the local process lanes
    scheduler: str | None = None
    #: local lanes (caller + worker processes); default: every core
    workers: int | None = None
    #: frames one client name may send per budget_period (smc_hmm.runtime.budget) ...
    max_frames_per_client: int | None = None
    #: ... or the budget that keeps every blinded value at least this many nats from its
    #: client's best estimate (smc_hmm.leakage.samples_for_error with the protocol's
    #: blind_nats); None and no max_frames_per_client: no budget
    hiding_nats: float | None = None
    budget_period: float = 86400.0
    #: the longest run (frames) one session may have: DEFAULT_MAX_FRAMES, 30 s of audio,
    #: as smc-hmm keyword's --max-frames
    max_frames: int = DEFAULT_MAX_FRAMES
    #: append one JSON line per session here (the results record); None: no record
    results: str | None = None

    _COUNTS = (
        "max_sessions",
        "max_waiting",
        "max_pending",
        "max_pending_per_address",
        "connect_burst_per_address",
        "max_sessions_per_client",
        "session_burst_per_client",
        "max_key_bits",
        "max_frame_bytes",
        "inbox_frames",
        "inbox_bytes",
        "outbox_bytes",
        "max_buffered_messages",
        "max_buffered_bytes",
        "max_frames",
    )
    _SECONDS = (
        "wait_timeout",
        "session_timeout",
        "handshake_timeout",
        "shutdown_grace",
        "budget_period",
    )
    _RATES = ("connect_rate_per_address", "session_rate_per_client")

    def __post_init__(self):
        for name in self._COUNTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"serve.{name} must be a non-negative integer")
            if name != "max_waiting" and value < 1:
                raise ConfigError(f"serve.{name} must be >= 1")
        if self.max_frame_bytes > MAX_LENGTH:
            raise ConfigError(f"serve.max_frame_bytes must be at most {MAX_LENGTH}")
        if self.when_busy not in WHEN_BUSY:
            raise ConfigError(f"serve.when_busy must be one of {WHEN_BUSY}")
        for name in self._SECONDS + self._RATES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                unit = "of seconds" if name in self._SECONDS else "per second"
                raise ConfigError(f"serve.{name} must be a positive number {unit}")
        if self.max_frames_per_client is not None and (
            isinstance(self.max_frames_per_client, bool)
            or not isinstance(self.max_frames_per_client, int)
            or self.max_frames_per_client < 1
        ):
            raise ConfigError("serve.max_frames_per_client must be a positive integer")
        if self.hiding_nats is not None and (
            isinstance(self.hiding_nats, bool)
            or not isinstance(self.hiding_nats, int | float)
            or not 0 < self.hiding_nats < 1e6
        ):
            raise ConfigError("serve.hiding_nats must be a positive number of nats")
        if self.results is not None and (not isinstance(self.results, str) or not self.results):
            raise ConfigError("serve.results must be the path of a file (JSON lines)")
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise ConfigError("compute.scheduler must be an address like tcp://host:8786")
        if self.workers is not None and (
            isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1
        ):
            raise ConfigError("compute.workers must be a positive integer")

    def frame_limit(self, blind_nats: float) -> int | None:
        """Frames per client and period: the explicit limit, or the one derived from
        ``hiding_nats`` for blinds of ``blind_nats`` (the smaller if both are set)."""
        limits = []
        if self.max_frames_per_client is not None:
            limits.append(self.max_frames_per_client)
        if self.hiding_nats is not None:
            limits.append(samples_for_error(blind_nats, self.hiding_nats))
        return min(limits) if limits else None

    def budget(self) -> ConnectionBudget:
        """The transport budget of one session's connection."""
        return ConnectionBudget(
            inbox_frames=self.inbox_frames,
            inbox_bytes=self.inbox_bytes,
            outbox_bytes=self.outbox_bytes,
        )

    @classmethod
    def from_config(cls, config: RunConfig, **overrides) -> ServeSettings:
        serve = dict(config.serve)
        serve.pop("party", None)
        compute = dict(config.compute)
        known = {f.name for f in fields(cls)}
        bad = (set(serve) - known - {"scheduler", "workers"}) | (
            set(compute) - {"scheduler", "workers"}
        )
        if bad or {"scheduler", "workers"} & set(serve):
            raise ConfigError(
                f"unknown keys in [serve]/[compute]: {sorted(bad or {'scheduler', 'workers'})} "
                "([compute] takes scheduler and workers)"
            )
        if isinstance(serve.get("results"), str) and config.path is not None:
            serve["results"] = str(config.path.parent / serve["results"])  # the file's folder
        values = {**serve, **compute}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


#: glibc's mallopt parameters; the size from which a serving process maps buffers, and
#: the allocation arenas its threads share
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8
BIG_BUFFER_BYTES = 256 * 1024
ARENAS = 2


def bound_allocator() -> bool:
    """Keep what peers make a serving process allocate from staying resident (glibc).

    Peers decide how many large buffers a server holds (frames up to the session's
    limit, read chunks, decoded payloads), and glibc's default moves its mmap threshold
    up to the largest block freed so far, so such bursts are later carved from the
    session threads' arenas and stay resident after the sessions end; and every new
    thread may open an arena of its own (up to eight per core), each keeping its
    high-water mark.  A fixed threshold of 256 KiB returns large buffers to the system as
    soon as they are freed, and two arenas shared by every thread keep the rest compact
    (threads of one Python process mostly take turns anyway).  True if both were set
    (False off glibc: nothing changes).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mapped = mallopt(_M_MMAP_THRESHOLD, BIG_BUFFER_BYTES)
    shared = mallopt(_M_ARENA_MAX, ARENAS)
    return bool(mapped and shared)


def serving_party(config: RunConfig) -> str | None:
    """The name of the configuration's serving party (``[serve] party``), if it has one."""
    if not config.serve:  # [compute] alone does not make a configuration a served one
        return None
    party = config.serve.get("party", "bob")
    if not isinstance(party, str) or party not in config.parties:
        raise ConfigError(f"serve.party = {party!r} is not a party of the configuration")
    return party


class _Session:
    """One client's session: its transport, thread and end reason."""

    def __init__(self, number: int, client: str, address: str):
        self.number = number
        self.client = client
        self.address = address
        self.started = time.monotonic()
        self.transport: TcpTransport | None = None
        self.thread: threading.Thread | None = None
        #: set by the watchdog: why the session was ended from outside
        self.ended: SmcHmmError | None = None

    def end(self, error: SmcHmmError) -> None:
        if self.ended is None:
            self.ended = error
        transport = self.transport
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()


class _Rate:
    """A token bucket per key (a source address, a client name): ``rate`` events a second,
    ``burst`` at once.  Buckets that are full again are forgotten once there are many keys."""

    def __init__(self, rate: float, burst: int, max_keys: int = 4096):
        self.rate, self.burst, self.max_keys = float(rate), int(burst), max_keys
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, key: str, now: float) -> bool:
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > self.max_keys:
            full = self.burst / self.rate
            self._buckets = {k: b for k, b in self._buckets.items() if now - b[1] < full}
        return allowed


class _Pending:
    """An accepted connection whose TLS handshake or hello has not finished."""

    __slots__ = ("sock", "address", "where", "deadline", "stage", "buf")

    def __init__(self, sock, address: str, where: str, deadline: float):
        self.sock = sock  # a non-blocking SSLSocket, handshake not done
        self.address = address
        self.where = where
        self.deadline = deadline
        self.stage = "TLS handshake"
        self.buf = bytearray()


def _cost_summary(snapshot: dict) -> str:
    ops = ",".join(f"{k}={v}" for k, v in sorted(snapshot["ops"].items()) if v)
    t = snapshot["time"]
    return (
        f"messages={snapshot['messages']['sent']}/{snapshot['messages']['recv']} "
        f"bytes={snapshot['bytes']['sent']}/{snapshot['bytes']['recv']} "
        f"rounds={snapshot['rounds']} ops[{ops or '-'}] "
        f"wall={t['wall']:.3f}s compute={t['compute']:.3f}s wait={t['wait']:.3f}s"
    )


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


class _Results:
    """The operator's record of session results: JSON lines appended to a file (each line
    written whole and flushed to disk under a lock) and/or a hook called with each record."""

    def __init__(self, path: str | None, hook: Callable[[dict], object] | None):
        if hook is not None and not callable(hook):
            raise ConfigError("on_result must be callable (it is called with each record)")
        check_output_path(path, "serve.results")
        self.path = None if path is None else Path(path)
        self.hook = hook
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.path is not None or self.hook is not None

    def add(self, record: dict) -> None:
        if self.path is not None:
            line = json.dumps(record, sort_keys=True) + "\n"
            try:
                with self._lock, open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(line)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:
                log.error("session %s: cannot append to %s: %s", record["session"], self.path, exc)
        if self.hook is not None:
            try:
                self.hook(dict(record))
            except Exception:  # the application's hook never takes a session or the server down
                log.exception("session %s: the on_result hook failed", record["session"])


def _result_fields(output, outcome: str) -> dict:
    """Who learned the session's result and, if the server did, the result itself."""
    from smc_hmm.runtime.party import jsonable

    if outcome != "ok":
        return {"learned_by": None, "decision": None}
    if output is None:  # the protocol gave the result to the client only
        return {"learned_by": "client", "decision": None}
    try:
        return {"learned_by": "server", "decision": jsonable(output)}
    except SmcHmmError:
        return {"learned_by": "server", "decision": repr(type(output).__name__)}


class Server:
    """A serving party: ``Server(config, "bob").start()`` listens; :meth:`stop` ends it.

    ``compute`` overrides where Bob computes (default: a Dask cluster if the
    settings name a scheduler, else ``Compute.processes(workers)``); ``port``
    overrides the configured port (0: any free port, see :attr:`address`).
    ``on_result``: a callable the server calls with each session's record once the
    session has ended (module docstring, "the results record"), beside or instead of
    ``settings.results``.
    """

    def __init__(
        self,
        config: RunConfig | str,
        party: str = "bob",
        *,
        settings: ServeSettings | None = None,
        compute: Compute | None = None,
        port: int | None = None,
        on_result: Callable[[dict], object] | None = None,
    ):
        if not isinstance(config, RunConfig):
            config = load_config(config)
        self.config = config
        self.party = party
        self.settings = settings or ServeSettings.from_config(config)
        pc = config.party(party)
        self.descriptor = find(config.protocol)
        self.params = self.descriptor.params(config.params)
        self.role = self.descriptor.assign(self.params, party, pc.kind, pc.role)
        if self.role.holds_key:
            raise ConfigError(
                f"{party} holds the key pair in {self.descriptor.name!r}: a serving party "
                "must be the one that uses its clients' keys"
            )
        others = [
            (name, self.descriptor.assign(self.params, name, p.kind, p.role))
            for name, p in config.parties.items()
            if name != party
        ]
        if len(self.descriptor.roles) != 2 or len(others) != 1:
            raise ConfigError(
                "serve runs two-party protocols: the configuration needs exactly one other "
                f"party (the client's role), got {[n for n, _ in others]}"
            )
        self.client_party, self.client_role = others[0]
        self.tls = config.tls_for(party)
        self._server_ctx = self.tls.server_context()
        self._server_ctx.num_tickets = 0  # clients never resume: no tickets to make per handshake
        self.private = config.private_input(self.role, pc)
        self.results = _Results(self.settings.results, on_result)
        self.host = pc.host
        self.port = pc.port if port is None else port
        #: a session's frame limit: the smaller of [serve] and [run] max_frame_bytes
        self.max_frame_bytes = min(self.settings.max_frame_bytes, config.max_frame_bytes)
        self._own_compute = compute is None
        self.compute = compute if compute is not None else self._make_compute()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._cond = threading.Condition()
        self._active = 0
        #: sessions running per client certificate name
        self._running: Counter[str] = Counter()
        #: clients waiting for a slot, in arrival order: (ticket, name)
        self._queue: deque[tuple[object, str]] = deque()
        #: authenticated connections with a thread (waiting or in a session), per name
        self._admitted: Counter[str] = Counter()
        self._handlers: set[threading.Thread] = set()
        self._sessions: dict[int, _Session] = {}
        self._numbers = itertools.count(1)
        #: the front door's pending connections, oldest first, overall and per address
        self._pending: dict[_Pending, None] = {}
        self._per_address: dict[str, dict[_Pending, None]] = {}
        s = self.settings
        self._connect_rate = _Rate(s.connect_rate_per_address, s.connect_burst_per_address)
        self._session_rate = _Rate(s.session_rate_per_client, s.session_burst_per_client)
        limit = s.frame_limit(float(config.params.get("blind_nats", DEFAULT_BLIND_NATS)))
        self._frames = None if limit is None else FrameBudget(limit, s.budget_period)
        self._listener: socket.socket | None = None
        self._door: threading.Thread | None = None
        #: outcome counts: ok and failed sessions, refused clients (with a reason, or a
        #: failed TLS handshake), dropped pending connections (timeout or a cap), and
        #: throttled ones (closed on arrival: their address opened too many too fast)
        self.counts = {"ok": 0, "failed": 0, "refused": 0, "dropped": 0, "throttled": 0}
        self.address: tuple[str, int] = (self.host, self.port)

    def _make_compute(self) -> Compute:
        if self.settings.scheduler:
            from smc_hmm.compute_dask import DaskCompute

            compute = DaskCompute.connect(self.settings.scheduler)
        else:
            compute = Compute.processes(self.settings.workers or os.cpu_count() or 1)
        compute.warm_up()
        return compute

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> Server:
        """Bind the listener and start the front door in a background thread."""
        lst = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            lst.bind((self.host, self.port))
            lst.listen(socket.SOMAXCONN)
        except OSError as exc:
            lst.close()
            raise EndpointError(
                f"{self.party}: cannot listen on {self.host}:{self.port}: {exc}"
            ) from exc
        lst.setblocking(False)
        self._listener = lst
        self.address = lst.getsockname()[:2]
        self._door = threading.Thread(
            target=self._front_door, name=f"smc-serve-{self.party}", daemon=True
        )
        self._door.start()
        s = self.settings
        log.info(
            "%s serving %s on %s:%d (max %d sessions, %d per client, when busy: %s; "
            "max %d pending connections, %d per address; compute: %r)",
            self.party,
            self.descriptor.name,
            *self.address,
            s.max_sessions,
            s.max_sessions_per_client,
            s.when_busy,
            s.max_pending,
            s.max_pending_per_address,
            self.compute,
        )
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting, give running sessions ``grace`` seconds, end the rest, join all."""
        if self._stopped.is_set():
            return
        grace = self.settings.shutdown_grace if grace is None else grace
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        if self._door is not None:
            self._door.join()
        deadline = time.monotonic() + grace
        for thread in list(self._handlers):
            thread.join(max(0.0, deadline - time.monotonic()))
        for session in list(self._sessions.values()):
            session.end(ServerShutdownError(f"{self.party} shut down after {grace:g} s"))
        for thread in list(self._handlers):
            thread.join(30.0)
        if self._own_compute:
            self.compute.close()
        self._stopped.set()
        log.info("%s stopped: %s", self.party, self.counts)

    def serve_forever(self) -> int:
        """Start, serve until SIGTERM / SIGINT, shut down within the bound; returns 0.

        The serving process first bounds its allocator (:func:`bound_allocator`), so that
        a client's burst of large frames goes back to the system when its session ends.
        """
        bound_allocator()
        stop = threading.Event()
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        try:
            self.start()
            while not stop.wait(0.5):
                pass
            log.info("%s: signal received, shutting down", self.party)
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _count(self, outcome: str) -> None:
        with self._cond:
            self.counts[outcome] += 1

    @property
    def active(self) -> int:
        return self._active

    @property
    def pending(self) -> int:
        """Connections accepted and not yet authenticated."""
        return len(self._pending)

    # -- the front door: accepting and authenticating without blocking ------------------------

    def _front_door(self) -> None:
        """One thread: accept, advance every pending TLS handshake and hello as its socket
        becomes ready, close pending connections past their deadline, hand authenticated
        clients to the session budget, and end sessions past ``session_timeout``."""
        lst = self._listener
        sel = selectors.DefaultSelector()
        sel.register(lst, selectors.EVENT_READ, None)
        try:
            while not self._stopping.is_set():
                timeout = 0.2
                if self._pending:
                    first = next(iter(self._pending))
                    timeout = min(timeout, max(0.0, first.deadline - time.monotonic()))
                for key, _ in sel.select(timeout):
                    try:
                        if key.data is None:
                            self._accept_ready(sel)
                        elif key.data in self._pending:
                            self._advance(sel, key.data)
                    except Exception:  # one connection never shuts the door
                        log.exception("%s: unexpected error at the front door", self.party)
                        if key.data is not None:
                            self._drop(sel, key.data, "internal error")
                self._expire(sel)
                self._watchdog()
        except BaseException:  # the door must not die silently
            log.exception("%s: the front door failed", self.party)
            raise
        finally:
            for pending in list(self._pending):
                self._forget(sel, pending)
                with contextlib.suppress(OSError):
                    pending.sock.close()
            sel.close()
            lst.close()

    def _accept_ready(self, sel) -> None:
        for _ in range(64):  # then let the pending handshakes advance
            try:
                raw, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE) and self._pending:
                    # out of descriptors: the oldest pending connection makes room
                    self._drop(sel, next(iter(self._pending)), f"out of file descriptors: {exc}")
                    continue
                log.error("%s: accept failed: %s", self.party, exc)
                return
            if not self._connect_rate.allow(addr[0], time.monotonic()):
                # before any TLS work: an address that floods us costs an accept and a close
                log.debug("throttled %s:%s: connect_rate_per_address", addr[0], addr[1])
                with contextlib.suppress(OSError):
                    raw.close()
                self._count("throttled")
                continue
            self._admit_pending(sel, raw, addr)

    def _admit_pending(self, sel, raw, addr) -> None:
        """Enforce the pending caps (closing the oldest of the heaviest address), then
        start the TLS handshake of ``raw`` without blocking."""
        s = self.settings
        address, where = addr[0], f"{addr[0]}:{addr[1]}"
        same = self._per_address.get(address)
        if same and len(same) >= s.max_pending_per_address:
            self._drop(sel, next(iter(same)), "max_pending_per_address reached")
        elif len(self._pending) >= s.max_pending:
            heaviest = max(self._per_address.values(), key=len)
            self._drop(sel, next(iter(heaviest)), "max_pending reached")
        try:
            raw.setblocking(False)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = self._server_ctx.wrap_socket(
                raw, server_side=True, do_handshake_on_connect=False
            )
        except (OSError, ssl.SSLError) as exc:
            log.info("dropped %s before its TLS handshake: %s", where, _one_line(exc))
            with contextlib.suppress(OSError):
                raw.close()
            self._count("dropped")
            return
        pending = _Pending(sock, address, where, time.monotonic() + s.handshake_timeout)
        self._pending[pending] = None
        self._per_address.setdefault(address, {})[pending] = None
        sel.register(sock, selectors.EVENT_READ, pending)

    def _forget(self, sel, pending: _Pending) -> None:
        """No longer pending (authenticated, refused or dropped)."""
        self._pending.pop(pending, None)
        same = self._per_address.get(pending.address)
        if same is not None:
            same.pop(pending, None)
            if not same:
                del self._per_address[pending.address]
        with contextlib.suppress(KeyError, ValueError, OSError):
            sel.unregister(pending.sock)

    def _drop(self, sel, pending: _Pending, reason: str) -> None:
        self._forget(sel, pending)
        log.info("dropped %s during its %s: %s", pending.where, pending.stage, reason)
        with contextlib.suppress(OSError):
            pending.sock.close()
        self._count("dropped")

    def _expire(self, sel) -> None:
        """Close pending connections past ``handshake_timeout`` (oldest first: deadlines
        follow the order of arrival)."""
        now, limit = time.monotonic(), self.settings.handshake_timeout
        while self._pending:
            pending = next(iter(self._pending))
            if pending.deadline > now:
                return
            self._drop(sel, pending, f"not authenticated within handshake_timeout = {limit:g} s")

    def _advance(self, sel, pending: _Pending) -> None:
        """Advance one pending connection as far as its socket allows."""
        try:
            if pending.stage == "TLS handshake":
                pending.sock.do_handshake()
                pending.stage = "hello"
            hello = self._read_hello(pending)
        except ssl.SSLWantReadError:
            sel.modify(pending.sock, selectors.EVENT_READ, pending)
            return
        except ssl.SSLWantWriteError:
            sel.modify(pending.sock, selectors.EVENT_WRITE, pending)
            return
        except (OSError, SmcHmmError) as exc:  # ssl.SSLError is an OSError
            self._forget(sel, pending)
            if pending.stage == "TLS handshake":
                log.warning(
                    "refused %s: AuthenticationError: TLS handshake failed: %s",
                    pending.where,
                    _one_line(exc),
                )
                with contextlib.suppress(OSError):
                    pending.sock.close()
                self._count("refused")
            else:
                if not isinstance(exc, AuthenticationError):
                    exc = AuthenticationError(f"no valid hello: {_one_line(exc)}")
                self._refuse(pending.sock, pending.where, "?", exc)
            return
        self._forget(sel, pending)
        self._authenticated(pending.sock, hello, pending.where)

    @staticmethod
    def _read_hello(pending: _Pending) -> dict:
        """The hello once it is complete (SSLWantReadError until then); reads no further."""
        buf = pending.buf
        while True:
            if len(buf) < HEADER_BYTES:
                need = HEADER_BYTES - len(buf)
            else:
                need = HEADER_BYTES + hello_length(buf[:HEADER_BYTES]) - len(buf)
                if need == 0:
                    return decode_hello(bytes(buf[HEADER_BYTES:]))
            data = pending.sock.recv(need)
            if not data:
                raise PeerDisconnectedError(f"connection closed during the {pending.stage}")
            buf += data

    def _authenticated(self, sock, hello: dict, where: str) -> None:
        """Check the hello against the certificate; admit the client to the session budget
        (a thread of its own) or refuse it at once."""
        claimed = hello.get("from")
        names, uris = peer_identity(sock)
        reason = None
        if hello.get("v") != HELLO_VERSION or hello.get("to") != self.party:
            reason = f"bad hello (version {hello.get('v')!r}, to {hello.get('to')!r})"
        elif type(claimed) is not str or claimed not in names:
            reason = f"hello names {claimed!r}, the certificate {sorted(names)}"
        elif CLIENT_ROLE_URI not in uris:
            reason = f"the certificate of {claimed!r} does not carry the client role"
        if reason is not None:
            self._refuse(sock, where, str(claimed), AuthenticationError(reason))
            return
        s = self.settings
        if not self._session_rate.allow(claimed, time.monotonic()):
            self._refuse(
                sock,
                where,
                claimed,
                ServerBusyError(
                    f"{claimed!r} starts sessions faster than session_rate_per_client = "
                    f"{s.session_rate_per_client:g} a second"
                ),
            )
            return
        with self._cond:
            full = sum(self._admitted.values()) >= s.max_sessions + s.max_waiting
            mine = self._admitted[claimed] >= 2 * s.max_sessions_per_client
            if not (full or mine):
                self._admitted[claimed] += 1
        if full or mine:
            self._refuse(
                sock,
                where,
                claimed,
                ServerBusyError(
                    f"{self.party} is busy: "
                    + (
                        f"{claimed!r} has {self._admitted[claimed]} sessions running or waiting"
                        if mine
                        else f"{sum(self._admitted.values())} sessions running or waiting"
                    )
                ),
            )
            return
        thread = threading.Thread(
            target=self._handle,
            args=(sock, claimed, where),
            name=f"smc-serve-session-{where}",
            daemon=True,
        )
        self._handlers = {t for t in self._handlers if t.is_alive()}
        self._handlers.add(thread)
        thread.start()

    def _watchdog(self) -> None:
        """End sessions that ran past ``session_timeout``."""
        limit = self.settings.session_timeout
        now = time.monotonic()
        for session in list(self._sessions.values()):
            if session.ended is None and now - session.started > limit:
                error = SessionTimeoutError(f"session {session.number} ran longer than {limit:g} s")
                session.ended = error
                # closing waits briefly for the peer: not in the front door's thread
                threading.Thread(
                    target=session.end, args=(error,), name="smc-serve-end", daemon=True
                ).start()

    def _refuse(self, sock, where: str, client: str, error: SmcHmmError) -> None:
        """Refuse with a reason in the hello reply (a short write: never waits for the client)."""
        log.warning("refused client=%s from %s: %s: %s", client, where, type(error).__name__, error)
        with contextlib.suppress(OSError, SmcHmmError):
            sock.setblocking(False)
            send_hello(sock, {"ok": False, "error": type(error).__name__, "reason": str(error)})
        with contextlib.suppress(OSError):
            sock.close()
        self._count("refused")  # counted once logged and closed

    # -- the session budget ----------------------------------------------------------------------

    def _may_start(self, client: str) -> bool:
        s = self.settings
        return self._active < s.max_sessions and self._running[client] < s.max_sessions_per_client

    def _first_eligible(self):
        """The ticket of the longest-waiting client that may start now, if any."""
        for ticket, client in self._queue:
            if self._may_start(client):
                return ticket
        return None

    def _acquire(self, client: str) -> SmcHmmError | None:
        """A session slot, by the busy policy and in arrival order; the error to refuse
        with otherwise."""
        s = self.settings
        with self._cond:
            if self._stopping.is_set():
                return ServerShutdownError(f"{self.party} is shutting down")
            if self._first_eligible() is None and self._may_start(client):
                self._start_slot(client)
                return None
            waiting_mine = sum(1 for _, c in self._queue if c == client)
            if (
                s.when_busy == "refuse"
                or len(self._queue) >= s.max_waiting
                or waiting_mine >= s.max_sessions_per_client
            ):
                return ServerBusyError(
                    f"{self.party} is busy: {self._active} sessions running "
                    f"({self._running[client]} of {client!r})"
                    + (f", {len(self._queue)} clients waiting" if s.when_busy == "wait" else "")
                )
            ticket = object()
            self._queue.append((ticket, client))
            deadline = time.monotonic() + s.wait_timeout
            try:
                while not self._stopping.is_set() and self._first_eligible() is not ticket:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return ServerBusyError(
                            f"{self.party} is busy: no session slot within {s.wait_timeout:g} s"
                        )
                    self._cond.wait(min(remaining, 0.5))
                if self._stopping.is_set():
                    return ServerShutdownError(f"{self.party} is shutting down")
                self._start_slot(client)
                return None
            finally:
                self._queue.remove((ticket, client))
                self._cond.notify_all()  # the next eligible waiter may be another client

    def _start_slot(self, client: str) -> None:
        self._active += 1
        self._running[client] += 1

    def _release(self, client: str) -> None:
        with self._cond:
            self._active -= 1
            self._running[client] -= 1
            if not self._running[client]:
                del self._running[client]
            self._cond.notify_all()

    def _handle(self, sock, client: str, where: str) -> None:
        try:
            refusal = self._acquire(client)
            if refusal is not None:
                self._refuse(sock, where, client, refusal)
                return
            try:
                self._session(sock, client, where)
            finally:
                self._release(client)
        except BaseException:  # a handler never takes the server down
            log.exception("%s: unexpected error handling %s", self.party, where)
            with contextlib.suppress(OSError):
                sock.close()
        finally:
            with self._cond:
                self._admitted[client] -= 1
                if not self._admitted[client]:
                    del self._admitted[client]

    # -- one session ---------------------------------------------------------------------------

    def _charge(self, client: str):
        """The session's length bound and frame budget, checked by the protocol on the
        run's public length T before any work on its data."""

        def charge(frames: int) -> None:
            if frames > self.settings.max_frames:
                raise BudgetError(
                    f"client {client!r} asked for a run of {frames:,} frames, above this "
                    f"server's [serve] max_frames = {self.settings.max_frames:,}"
                )
            if self._frames is not None:
                self._frames.charge(client, frames)

        return charge

    def _session(self, sock, client: str, where: str) -> None:
        session = _Session(next(self._numbers), client, where)
        session.thread = threading.current_thread()
        try:
            transport = self._open(sock, session)
        except (OSError, SmcHmmError) as exc:
            log.warning(
                "session %d client=%s from %s: failed before it started: %s",
                session.number,
                client,
                where,
                _one_line(exc),
            )
            with contextlib.suppress(OSError):
                sock.close()
            self._record(session, None, f"{type(exc).__name__}: {_one_line(exc)}")
            self._count("failed")
            return
        session.transport = transport
        self._sessions[session.number] = session
        log.info("session %d client=%s from %s: started", session.number, client, where)
        ledger = CostLedger(self.party)
        outcome, output = "ok", None
        try:
            output = self._run_role(transport, ledger, client)
            if session.ended is not None:
                raise session.ended
        except BaseException as exc:  # the session ends, the server does not
            error = session.ended or exc  # a timeout or shutdown explains the transport error
            if isinstance(error, TransportError | PeerTimeoutError | SmcHmmError):
                outcome = f"{type(error).__name__}: {_one_line(error)}"
            else:
                outcome = f"internal error {type(error).__name__}: {_one_line(error)}"
                log.debug("session %d traceback", session.number, exc_info=error)
            # the traceback holds this frame, which would hold the error: a cycle that keeps
            # the session's buffers (a flooding client's megabytes) until a garbage collection
            del error
            session.ended = None
        finally:
            with contextlib.suppress(Exception):
                # a failed session's client is not read any further (a flood would
                # otherwise be read and discarded until the close timeout)
                if outcome == "ok":
                    transport.close()
                else:
                    transport.abort()
            self._sessions.pop(session.number, None)
        elapsed = time.monotonic() - session.started
        log.log(
            logging.INFO if outcome == "ok" else logging.WARNING,
            "session %d client=%s from %s: %s in %.3f s; cost %s",
            session.number,
            client,
            where,
            outcome,
            elapsed,
            _cost_summary(ledger.snapshot()),
        )
        self._record(session, output, outcome)
        self._count("ok" if outcome == "ok" else "failed")  # once logged: what counts is told

    def _open(self, sock, session: _Session) -> TcpTransport:
        """The session's reply (its number, the protocol and its public parameters, what
        this server records and the smallest client key it accepts), then its transport."""
        config, s = self.config, self.settings
        sock.settimeout(s.handshake_timeout)
        send_hello(
            sock,
            {
                "ok": True,
                "session": session.number,
                "protocol": self.descriptor.name,
                "params": config.params,
                "server": self.party,
                "you": self.client_party,
                "role": self.client_role.name,
                "results": self.results.enabled,
                # the smallest client key this server accepts: a client with a weaker one
                # is told why before its role sends anything
                "min_key_bits": config.min_key_bits,
            },
        )
        return TcpTransport.over_socket(
            self.party,
            self.client_party,
            sock,
            max_frame_bytes=self.max_frame_bytes,
            close_timeout=2.0,
            budget=s.budget(),
        )

    def _run_role(self, transport, ledger: CostLedger, client: str):
        """The serving party's role over the session's channel, on this session's compute,
        with the client's frame budget; returns the role's output."""
        config, s = self.config, self.settings
        channel = party_channel(
            transport,
            ledger,
            timeout=config.timeout,
            max_frame_bytes=self.max_frame_bytes,
            max_buffered_messages=s.max_buffered_messages,
            max_buffered_bytes=s.max_buffered_bytes,
        )
        with self.compute.session() as compute:
            ctx = PartyContext(
                self.party,
                channel,
                ledger=ledger,
                compute=compute,
                min_key_bits=config.min_key_bits,
                max_key_bits=s.max_key_bits,
                budget=self._charge(client),
            )
            with ledger.running():
                output = ctx.run(self.role.run, self.private, self.params)
            channel.close()
        return output

    def _record(self, session: _Session, output, outcome: str) -> None:
        """The session's results record (module docstring), if the operator keeps one."""
        if not self.results.enabled:
            return
        now = time.time()
        elapsed = time.monotonic() - session.started
        record = {
            "session": session.number,
            "client": session.client,
            "address": session.address,
            "protocol": self.descriptor.name,
            "mode": getattr(self.params, "mode", None),
            "outcome": outcome,
            **_result_fields(output if outcome == "ok" else None, outcome),
            "started": _utc(now - elapsed),
            "time": _utc(now),
            "seconds": round(elapsed, 3),
        }
        self.results.add(record)


def serve(
    config: RunConfig | str,
    party: str = "bob",
    *,
    settings: ServeSettings | None = None,
    on_result: Callable[[dict], object] | None = None,
) -> int:
    """``smc-hmm serve``: serve until SIGTERM / SIGINT; returns the exit code (0).
    ``on_result``: called with each session's results record (:class:`Server`)."""
    return Server(config, party, settings=settings, on_result=on_result).serve_forever()
