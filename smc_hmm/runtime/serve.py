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
``[serve]``: ``max_sessions`` sessions run at once; a further client waits for
a slot (``when_busy = "wait"``, at most ``max_waiting`` of them, each at most
``wait_timeout`` seconds) or is refused at once (``"refuse"``) with
:class:`~smc_hmm.errors.ServerBusyError` in its hello reply.  Every receive of a
session is bounded by ``[run] timeout``, every session by ``session_timeout``
(:class:`~smc_hmm.errors.SessionTimeoutError`), every handshake by
``handshake_timeout``.  SIGTERM / SIGINT: no new client is accepted, running
sessions get ``shutdown_grace`` seconds to finish, the rest are ended
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
import itertools
import logging
import os
import signal
import socket
import ssl
import threading
import time
from dataclasses import dataclass, fields

from smc_hmm.certs import CLIENT_ROLE_URI
from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger
from smc_hmm.errors import (
    AuthenticationError,
    ConfigError,
    EndpointError,
    PeerTimeoutError,
    ServerBusyError,
    ServerShutdownError,
    SessionTimeoutError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.protocol import find
from smc_hmm.runtime.config import RunConfig, load_config
from smc_hmm.runtime.context import PartyContext
from smc_hmm.runtime.party import _private_input, _tls_for
from smc_hmm.transport.base import Channel
from smc_hmm.transport.tcp import (
    HELLO_VERSION,
    TcpTransport,
    peer_identity,
    recv_hello,
    send_hello,
)
from smc_hmm.wire import WireCodec

__all__ = ["Server", "ServeSettings", "serve"]

log = logging.getLogger("smc_hmm.serve")

WHEN_BUSY = ("wait", "refuse")


@dataclass(frozen=True)
class ServeSettings:
    """``[serve]`` and ``[compute]`` of a parties.toml (command-line options override)."""

    max_sessions: int = 4
    when_busy: str = "wait"
    max_waiting: int = 16
    wait_timeout: float = 30.0
    session_timeout: float = 600.0
    handshake_timeout: float = 10.0
    shutdown_grace: float = 10.0
    #: a Dask scheduler address (tcp://host:8786); None: the local process lanes
    scheduler: str | None = None
    #: local lanes (caller + worker processes); default: every core
    workers: int | None = None

    def __post_init__(self):
        for name in ("max_sessions", "max_waiting"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"serve.{name} must be a non-negative integer")
        if self.max_sessions < 1:
            raise ConfigError("serve.max_sessions must be >= 1")
        if self.when_busy not in WHEN_BUSY:
            raise ConfigError(f"serve.when_busy must be one of {WHEN_BUSY}")
        for name in ("wait_timeout", "session_timeout", "handshake_timeout", "shutdown_grace"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"serve.{name} must be a positive number of seconds")
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise ConfigError("compute.scheduler must be an address like tcp://host:8786")
        if self.workers is not None and (
            isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1
        ):
            raise ConfigError("compute.workers must be a positive integer")

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
        values = {**serve, **compute}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


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


class Server:
    """A serving party: ``Server(config, "bob").start()`` listens; :meth:`stop` ends it.

    ``compute`` overrides where Bob computes (default: a Dask cluster if the
    settings name a scheduler, else ``Compute.processes(workers)``); ``port``
    overrides the configured port (0: any free port, see :attr:`address`).
    """

    def __init__(
        self,
        config: RunConfig | str,
        party: str = "bob",
        *,
        settings: ServeSettings | None = None,
        compute: Compute | None = None,
        port: int | None = None,
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
        self.tls = _tls_for(config, party)
        self._server_ctx = self.tls.server_context()
        self.private = _private_input(self.role, pc, config)
        self.host = pc.host
        self.port = pc.port if port is None else port
        self._own_compute = compute is None
        self.compute = compute if compute is not None else self._make_compute()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._cond = threading.Condition()
        self._active = 0
        self._waiting = 0
        self._handlers: set[threading.Thread] = set()
        self._sessions: dict[int, _Session] = {}
        self._numbers = itertools.count(1)
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        #: outcome counts: ok, failed (a session's typed error), refused
        self.counts = {"ok": 0, "failed": 0, "refused": 0}
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
        """Bind the listener and start accepting in a background thread."""
        lst = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            lst.bind((self.host, self.port))
            lst.listen(64)
        except OSError as exc:
            lst.close()
            raise EndpointError(
                f"{self.party}: cannot listen on {self.host}:{self.port}: {exc}"
            ) from exc
        lst.settimeout(0.2)
        self._listener = lst
        self.address = lst.getsockname()[:2]
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"smc-serve-{self.party}", daemon=True
        )
        self._acceptor.start()
        log.info(
            "%s serving %s on %s:%d (max %d sessions, when busy: %s; compute: %r)",
            self.party,
            self.descriptor.name,
            *self.address,
            self.settings.max_sessions,
            self.settings.when_busy,
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
        if self._acceptor is not None:
            self._acceptor.join()
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
        """Start, serve until SIGTERM / SIGINT, shut down within the bound; returns 0."""
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

    # -- accepting ---------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        lst = self._listener
        cap = self.settings.max_sessions + self.settings.max_waiting + 8
        try:
            while not self._stopping.is_set():
                self._watchdog()
                try:
                    raw, addr = lst.accept()
                except TimeoutError:
                    continue
                except OSError as exc:
                    if not self._stopping.is_set():
                        log.error("%s: accept failed: %s", self.party, exc)
                        time.sleep(0.1)
                    continue
                where = f"{addr[0]}:{addr[1]}"
                self._handlers = {t for t in self._handlers if t.is_alive()}
                if len(self._handlers) >= cap:
                    self._count("refused")
                    log.warning("refused %s: ServerBusyError: %d connections open", where, cap)
                    with contextlib.suppress(OSError):
                        raw.close()
                    continue
                thread = threading.Thread(
                    target=self._handle,
                    args=(raw, where),
                    name=f"smc-serve-session-{where}",
                    daemon=True,
                )
                self._handlers.add(thread)
                thread.start()
        finally:
            lst.close()

    def _watchdog(self) -> None:
        """End sessions that ran past ``session_timeout``."""
        limit = self.settings.session_timeout
        now = time.monotonic()
        for session in list(self._sessions.values()):
            if session.ended is None and now - session.started > limit:
                error = SessionTimeoutError(f"session {session.number} ran longer than {limit:g} s")
                session.ended = error
                # closing waits briefly for the peer: not in the accepting thread
                threading.Thread(
                    target=session.end, args=(error,), name="smc-serve-end", daemon=True
                ).start()

    def _refuse(self, sock, where: str, client: str, error: SmcHmmError) -> None:
        self._count("refused")
        log.warning("refused client=%s from %s: %s: %s", client, where, type(error).__name__, error)
        with contextlib.suppress(OSError, SmcHmmError):
            send_hello(sock, {"ok": False, "error": type(error).__name__, "reason": str(error)})
        with contextlib.suppress(OSError):
            sock.close()

    def _authenticate(self, raw, where: str):
        """TLS handshake and hello: (socket, client name), or None after a refusal."""
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(self.settings.handshake_timeout)
        try:
            sock = self._server_ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            self._count("refused")
            log.warning(
                "refused %s: AuthenticationError: TLS handshake failed: %s", where, _one_line(exc)
            )
            with contextlib.suppress(OSError):
                raw.close()
            return None
        try:
            hello = recv_hello(sock)
        except (OSError, SmcHmmError) as exc:
            error = exc if isinstance(exc, SmcHmmError) else AuthenticationError(str(exc))
            self._refuse(sock, where, "?", AuthenticationError(f"no valid hello: {error}"))
            return None
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
            return None
        return sock, claimed

    def _acquire(self) -> SmcHmmError | None:
        """A session slot, by the busy policy; the error to refuse with otherwise."""
        s = self.settings
        with self._cond:
            if self._stopping.is_set():
                return ServerShutdownError(f"{self.party} is shutting down")
            if self._active < s.max_sessions:
                self._active += 1
                return None
            if s.when_busy == "refuse" or self._waiting >= s.max_waiting:
                return ServerBusyError(
                    f"{self.party} is busy: {self._active} sessions running"
                    + (f", {self._waiting} clients waiting" if s.when_busy == "wait" else "")
                )
            self._waiting += 1
            deadline = time.monotonic() + s.wait_timeout
            try:
                while self._active >= s.max_sessions and not self._stopping.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return ServerBusyError(
                            f"{self.party} is busy: no session slot within {s.wait_timeout:g} s"
                        )
                    self._cond.wait(min(remaining, 0.5))
                if self._stopping.is_set():
                    return ServerShutdownError(f"{self.party} is shutting down")
                self._active += 1
                return None
            finally:
                self._waiting -= 1

    def _release(self) -> None:
        with self._cond:
            self._active -= 1
            self._cond.notify()

    def _handle(self, raw, where: str) -> None:
        try:
            accepted = self._authenticate(raw, where)
            if accepted is None:
                return
            sock, client = accepted
            refusal = self._acquire()
            if refusal is not None:
                self._refuse(sock, where, client, refusal)
                return
            try:
                self._session(sock, client, where)
            finally:
                self._release()
        except BaseException:  # noqa: BLE001 - a handler never takes the server down
            log.exception("%s: unexpected error handling %s", self.party, where)
            with contextlib.suppress(OSError):
                raw.close()

    # -- one session ---------------------------------------------------------------------------

    def _session(self, sock, client: str, where: str) -> None:
        session = _Session(next(self._numbers), client, where)
        session.thread = threading.current_thread()
        config = self.config
        try:
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
                },
            )
            transport = TcpTransport.over_socket(
                self.party,
                self.client_party,
                sock,
                max_frame_bytes=config.max_frame_bytes,
                close_timeout=2.0,
            )
        except (OSError, SmcHmmError) as exc:
            self._count("failed")
            log.warning(
                "session %d client=%s from %s: failed before it started: %s",
                session.number,
                client,
                where,
                _one_line(exc),
            )
            with contextlib.suppress(OSError):
                sock.close()
            return
        session.transport = transport
        self._sessions[session.number] = session
        log.info("session %d client=%s from %s: started", session.number, client, where)
        ledger = CostLedger(self.party)
        outcome = "ok"
        try:
            channel = Channel(
                transport,
                WireCodec(max_frame_bytes=config.max_frame_bytes),
                timeout=config.timeout,
                observer=ledger,
                strict=True,
            )
            with self.compute.session() as compute:
                ctx = PartyContext(
                    self.party,
                    channel,
                    ledger=ledger,
                    compute=compute,
                    min_key_bits=config.min_key_bits,
                )
                with ledger.running():
                    self.role.run(ctx, self.private, self.params)
                channel.close()
            if session.ended is not None:
                raise session.ended
            self._count("ok")
        except BaseException as exc:  # noqa: BLE001 - the session ends, the server does not
            self._count("failed")
            error = session.ended or exc  # a timeout or shutdown explains the transport error
            if isinstance(error, TransportError | PeerTimeoutError | SmcHmmError):
                outcome = f"{type(error).__name__}: {_one_line(error)}"
            else:
                outcome = f"internal error {type(error).__name__}: {_one_line(error)}"
                log.debug("session %d traceback", session.number, exc_info=error)
        finally:
            with contextlib.suppress(Exception):
                transport.close()
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


def serve(
    config: RunConfig | str, party: str = "bob", *, settings: ServeSettings | None = None
) -> int:
    """``smc-hmm serve``: serve until SIGTERM / SIGINT; returns the exit code (0)."""
    return Server(config, party, settings=settings).serve_forever()
