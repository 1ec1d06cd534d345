"""Who gets a session, and when: a serving party's session budget.

An authenticated connection's hello is checked against its certificate (the client role,
the name it claims); then the session rate of its client name (``session_rate_per_client``)
and the caps on admitted connections (``max_sessions + max_waiting`` in all,
``2 * max_sessions_per_client`` of one name) decide whether it gets a thread of its own,
which waits for a session slot by the busy policy (``when_busy``), in arrival order, and
runs the session; any other connection is refused with a reason in its hello reply.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable

from smc_hmm.certs import CLIENT_ROLE_URI
from smc_hmm.errors import (
    AuthenticationError,
    ServerBusyError,
    ServerShutdownError,
    SmcHmmError,
)
from smc_hmm.runtime.serve.limiter import RateLimiter
from smc_hmm.runtime.serve.records import Counts, counted
from smc_hmm.runtime.serve.settings import ServeSettings
from smc_hmm.transport.tcp import HELLO_VERSION, peer_identity, send_refusal

__all__ = ["Admission"]

log = logging.getLogger("smc_hmm.serve")


class Admission:
    """The session budget of serving party ``party``.  ``run_session(sock, client, where)``
    runs one admitted client's session in its thread, once it has a slot; ``stopping`` is
    set when the server shuts down (waiting clients are refused)."""

    def __init__(
        self,
        party: str,
        settings: ServeSettings,
        run_session: Callable[[object, str, str], None],
        counts: Counts,
        stopping: threading.Event,
    ):
        self.party, self.settings, self.run_session = party, settings, run_session
        self.counts, self.stopping = counts, stopping
        self.cond = threading.Condition()
        #: sessions running, in all and per client certificate name
        self.active = 0
        self.running: Counter[str] = Counter()
        #: clients waiting for a slot, in arrival order: (ticket, name)
        self.queue: deque[tuple[object, str]] = deque()
        #: authenticated connections with a thread (waiting or in a session), per name
        self.admitted: Counter[str] = Counter()
        self.handlers: set[threading.Thread] = set()
        s = settings
        self._session_rate = RateLimiter(s.session_rate_per_client, s.session_burst_per_client)

    def authenticate(self, sock, hello: dict, where: str) -> None:
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
            self.refuse(sock, where, str(claimed), AuthenticationError(reason))
            return
        s = self.settings
        if not self._session_rate.allow(claimed, time.monotonic()):
            self.refuse(
                sock,
                where,
                claimed,
                ServerBusyError(
                    f"{claimed!r} starts sessions faster than session_rate_per_client = "
                    f"{s.session_rate_per_client:g} a second"
                ),
            )
            return
        with self.cond:
            full = sum(self.admitted.values()) >= s.max_sessions + s.max_waiting
            mine = self.admitted[claimed] >= 2 * s.max_sessions_per_client
            if not (full or mine):
                self.admitted[claimed] += 1
        if full or mine:
            self.refuse(
                sock,
                where,
                claimed,
                ServerBusyError(
                    f"{self.party} is busy: "
                    + (
                        f"{claimed!r} has {counted(self.admitted[claimed], 'session')} running "
                        "or waiting"
                        if mine
                        else f"{counted(sum(self.admitted.values()), 'session')} running or waiting"
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
        self.handlers = {t for t in self.handlers if t.is_alive()}
        self.handlers.add(thread)
        thread.start()

    def refuse(self, sock, where: str, client: str, error: SmcHmmError) -> None:
        """Refuse with a reason in the hello reply (a short write: never waits for the client)."""
        log.warning("refused client=%s from %s: %s: %s", client, where, type(error).__name__, error)
        send_refusal(sock, {"ok": False, "error": type(error).__name__, "reason": str(error)})
        self.counts.add("refused")  # counted once logged and closed

    # -- the session budget ----------------------------------------------------------------

    def _may_start(self, client: str) -> bool:
        s = self.settings
        return self.active < s.max_sessions and self.running[client] < s.max_sessions_per_client

    def _first_eligible(self):
        """The ticket of the longest-waiting client that may start now, if any."""
        for ticket, client in self.queue:
            if self._may_start(client):
                return ticket
        return None

    def _acquire(self, client: str) -> SmcHmmError | None:
        """A session slot, by the busy policy and in arrival order; the error to refuse
        with otherwise."""
        s = self.settings
        with self.cond:
            if self.stopping.is_set():
                return ServerShutdownError(f"{self.party} is shutting down")
            if self._first_eligible() is None and self._may_start(client):
                self._start_slot(client)
                return None
            waiting_mine = sum(1 for _, c in self.queue if c == client)
            if (
                s.when_busy == "refuse"
                or len(self.queue) >= s.max_waiting
                or waiting_mine >= s.max_sessions_per_client
            ):
                return ServerBusyError(
                    f"{self.party} is busy: {counted(self.active, 'session')} running "
                    f"({self.running[client]} of {client!r})"
                    + (
                        f", {counted(len(self.queue), 'client')} waiting"
                        if s.when_busy == "wait"
                        else ""
                    )
                )
            ticket = object()
            self.queue.append((ticket, client))
            deadline = time.monotonic() + s.wait_timeout
            try:
                while not self.stopping.is_set() and self._first_eligible() is not ticket:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return ServerBusyError(
                            f"{self.party} is busy: no session slot within {s.wait_timeout:g} s"
                        )
                    self.cond.wait(min(remaining, 0.5))
                if self.stopping.is_set():
                    return ServerShutdownError(f"{self.party} is shutting down")
                self._start_slot(client)
                return None
            finally:
                self.queue.remove((ticket, client))
                self.cond.notify_all()  # the next eligible waiter may be another client

    def _start_slot(self, client: str) -> None:
        self.active += 1
        self.running[client] += 1

    def _release(self, client: str) -> None:
        with self.cond:
            self.active -= 1
            self.running[client] -= 1
            if not self.running[client]:
                del self.running[client]
            self.cond.notify_all()

    def _handle(self, sock, client: str, where: str) -> None:
        try:
            refusal = self._acquire(client)
            if refusal is not None:
                self.refuse(sock, where, client, refusal)
                return
            try:
                self.run_session(sock, client, where)
            finally:
                self._release(client)
        except BaseException:  # a handler never takes the server down
            log.exception("%s: unexpected error handling %s", self.party, where)
            with contextlib.suppress(OSError):
                sock.close()
        finally:
            with self.cond:
                self.admitted[client] -= 1
                if not self.admitted[client]:
                    del self.admitted[client]
