"""Running one session of a serving party: what is served (:class:`Served`, the protocol
and the serving party's role, checked once), and each session's reply, transport, role
run, log line and results record (:class:`SessionRunner`); a watchdog ends sessions that
run past ``session_timeout``."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import threading
import time
from dataclasses import dataclass

from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger
from smc_hmm.errors import (
    AuthenticationError,
    BudgetError,
    ConfigError,
    PeerTimeoutError,
    SessionTimeoutError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.protocol import find
from smc_hmm.runtime.budget import FrameBudget
from smc_hmm.runtime.config import RunConfig
from smc_hmm.runtime.context import PartyContext, party_channel
from smc_hmm.runtime.serve.records import (
    Counts,
    Results,
    cost_summary,
    one_line,
    result_fields,
    utc,
)
from smc_hmm.runtime.serve.settings import ServeSettings
from smc_hmm.transport.tcp import TcpTransport, TlsConfig, send_hello

__all__ = ["Served", "Session", "SessionRunner"]

log = logging.getLogger("smc_hmm.serve")


@dataclass(frozen=True)
class Served:
    """What serving party ``party`` serves: the protocol, its parameters, the party's role
    and private input, and the role (and configured party name) its clients play."""

    config: RunConfig
    party: str
    descriptor: object
    params: object
    role: object
    client_party: str
    client_role: object
    tls: TlsConfig
    private: object

    @classmethod
    def of(cls, config: RunConfig, party: str) -> Served:
        """Checked: a two-party protocol in which ``party`` uses its clients' keys."""
        pc = config.party(party)
        descriptor = find(config.protocol)
        params = descriptor.params(config.params)
        role = descriptor.assign(params, party, pc.kind, pc.role)
        if role.holds_key:
            raise ConfigError(
                f"{party} holds the key pair in {descriptor.name!r}: a serving party "
                "must be the one that uses its clients' keys"
            )
        others = [
            (name, descriptor.assign(params, name, p.kind, p.role))
            for name, p in config.parties.items()
            if name != party
        ]
        if len(descriptor.roles) != 2 or len(others) != 1:
            raise ConfigError(
                "serve runs two-party protocols: the configuration needs exactly one other "
                f"party (the client's role), got {[n for n, _ in others]}"
            )
        (client_party, client_role), tls = others[0], config.tls_for(party)
        private = config.private_input(role, pc)
        return cls(config, party, descriptor, params, role, client_party, client_role, tls, private)


class Session:
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


def certificate_fingerprint(sock) -> str:
    """The SHA-256 fingerprint (hex) of the client certificate on a TLS socket: the key of
    its frame budget (a name the client sends could be anyone's)."""
    der = sock.getpeercert(binary_form=True)
    if not der:
        raise AuthenticationError("the client presented no certificate")
    return hashlib.sha256(der).hexdigest()


class SessionRunner:
    """Runs the sessions of a serving party, one per admitted client, each in its
    client's thread (:meth:`run`), on ``compute``, with the client's frame budget
    (``frames``); counts their outcomes and records their results."""

    def __init__(
        self,
        served: Served,
        settings: ServeSettings,
        compute: Compute,
        results: Results,
        counts: Counts,
        max_frame_bytes: int,
        frames: FrameBudget | None,
    ):
        self.served, self.settings, self.compute = served, settings, compute
        self.results, self.counts = results, counts
        self.max_frame_bytes, self.frames = max_frame_bytes, frames
        #: the sessions running, by number
        self.sessions: dict[int, Session] = {}
        self._numbers = itertools.count(1)

    def watchdog(self) -> None:
        """End sessions that ran past ``session_timeout``."""
        limit = self.settings.session_timeout
        now = time.monotonic()
        for session in list(self.sessions.values()):
            if session.ended is None and now - session.started > limit:
                error = SessionTimeoutError(f"session {session.number} ran longer than {limit:g} s")
                session.ended = error
                # closing waits briefly for the peer: not in the front door's thread
                threading.Thread(
                    target=session.end, args=(error,), name="smc-serve-end", daemon=True
                ).start()

    def _charge(self, client: str, fingerprint: str):
        """The session's length bound and frame budget (the certificate's: keyed on its
        fingerprint), checked by the protocol on the run's public length T before any work
        on its data."""

        def charge(frames: int) -> None:
            if frames > self.settings.max_frames:
                raise BudgetError(
                    f"client {client!r} asked for a run of {frames:,} frames, above this "
                    f"server's [serve] max_frames = {self.settings.max_frames:,}"
                )
            if self.frames is not None:
                self.frames.charge(fingerprint, frames, name=client)

        return charge

    def run(self, sock, client: str, where: str) -> None:
        session = Session(next(self._numbers), client, where)
        session.thread = threading.current_thread()
        try:
            fingerprint = certificate_fingerprint(sock)
            transport = self._open(sock, session)
        except (OSError, SmcHmmError) as exc:
            log.warning(
                "session %d client=%s from %s: failed before it started: %s",
                session.number,
                client,
                where,
                one_line(exc),
            )
            with contextlib.suppress(OSError):
                sock.close()
            self._record(session, None, f"{type(exc).__name__}: {one_line(exc)}")
            self.counts.add("failed")
            return
        session.transport = transport
        self.sessions[session.number] = session
        log.info("session %d client=%s from %s: started", session.number, client, where)
        ledger = CostLedger(self.served.party)
        outcome, output = self._serve(session, transport, ledger, client, fingerprint)
        elapsed = time.monotonic() - session.started
        log.log(
            logging.INFO if outcome == "ok" else logging.WARNING,
            "session %d client=%s from %s: %s in %.3f s; cost %s",
            session.number,
            client,
            where,
            outcome,
            elapsed,
            cost_summary(ledger.snapshot()),
        )
        self._record(session, output, outcome)
        self.counts.add("ok" if outcome == "ok" else "failed")  # once logged: what counts is told

    def _serve(
        self, session: Session, transport, ledger: CostLedger, client: str, fingerprint: str
    ) -> tuple[str, object]:
        """Run the session's role and close its transport (abort it if the session
        failed); ``("ok", output)``, or a one-line outcome naming the error and None.
        The error ends the session, never the server."""
        outcome, output = "ok", None
        try:
            output = self._run_role(transport, ledger, client, fingerprint)
            if session.ended is not None:
                raise session.ended
        except BaseException as exc:  # the session ends, the server does not
            error = session.ended or exc  # a timeout or shutdown explains the transport error
            if isinstance(error, TransportError | PeerTimeoutError | SmcHmmError):
                outcome = f"{type(error).__name__}: {one_line(error)}"
            else:
                outcome = f"internal error {type(error).__name__}: {one_line(error)}"
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
            self.sessions.pop(session.number, None)
        return outcome, output

    def _open(self, sock, session: Session) -> TcpTransport:
        """The session's reply (its number, the protocol and its public parameters, what
        this server records and the smallest client key it accepts), then its transport."""
        config, s = self.served.config, self.settings
        sock.settimeout(s.handshake_timeout)
        send_hello(
            sock,
            {
                "ok": True,
                "session": session.number,
                "protocol": self.served.descriptor.name,
                "params": config.params,
                "server": self.served.party,
                "you": self.served.client_party,
                "role": self.served.client_role.name,
                "results": self.results.enabled,
                # the smallest client key this server accepts: a client with a weaker one
                # is told why before its role sends anything
                "min_key_bits": config.min_key_bits,
            },
        )
        return TcpTransport.over_socket(
            self.served.party,
            self.served.client_party,
            sock,
            max_frame_bytes=self.max_frame_bytes,
            close_timeout=2.0,
            budget=s.budget(),
        )

    def _run_role(self, transport, ledger: CostLedger, client: str, fingerprint: str):
        """The serving party's role over the session's channel, on this session's compute,
        with the client's frame budget; returns the role's output."""
        config, s = self.served.config, self.settings
        channel = party_channel(
            transport,
            ledger,
            timeout=config.timeout,
            max_frame_bytes=self.max_frame_bytes,
            max_buffered_messages=s.max_buffered_messages,
            max_buffered_bytes=s.max_buffered_bytes,
        )
        if self.frames is not None:  # one session charged before any of its work
            self.frames.charge_session(fingerprint, name=client)
        with self.compute.session() as compute:
            ctx = PartyContext(
                self.served.party,
                channel,
                ledger=ledger,
                compute=compute,
                min_key_bits=config.min_key_bits,
                max_key_bits=s.max_key_bits,
                budget=self._charge(client, fingerprint),
            )
            with ledger.running():
                output = ctx.run(self.served.role.run, self.served.private, self.served.params)
            channel.close()
        return output

    def _record(self, session: Session, output, outcome: str) -> None:
        """The session's results record (package docstring), if the operator keeps one."""
        if not self.results.enabled:
            return
        now = time.time()
        elapsed = time.monotonic() - session.started
        record = {
            "session": session.number,
            "client": session.client,
            "address": session.address,
            "protocol": self.served.descriptor.name,
            "mode": getattr(self.served.params, "mode", None),
            "outcome": outcome,
            **result_fields(output if outcome == "ok" else None, outcome),
            "started": utc(now - elapsed),
            "time": utc(now),
            "seconds": round(elapsed, 3),
        }
        self.results.add(record)
