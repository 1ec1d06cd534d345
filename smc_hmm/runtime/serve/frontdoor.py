"""A serving party's front door: one thread that accepts, runs every TLS handshake and
hello without blocking on the shared :class:`~smc_hmm.transport.tcp.Handshaker` (within
``handshake_timeout``, at most ``max_pending`` in flight and ``max_pending_per_address``
of one source address), throttles addresses that connect too fast
(``connect_rate_per_address``, before any TLS work), hands each complete hello to the
session budget (:mod:`.admission`) and runs the sessions' watchdog."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable

from smc_hmm.errors import AuthenticationError
from smc_hmm.runtime.serve.admission import Admission
from smc_hmm.runtime.serve.limiter import RateLimiter
from smc_hmm.runtime.serve.records import Counts, one_line
from smc_hmm.runtime.serve.settings import ServeSettings
from smc_hmm.transport.tcp import Handshake, HandshakeHandler, Handshaker, bind_listener

__all__ = ["FrontDoor"]

log = logging.getLogger("smc_hmm.serve")

#: seconds between two rounds of the watchdog (and checks for a shutdown) at the latest
TICK = 0.2


class FrontDoor(HandshakeHandler):
    """The front door of serving party ``party``: :meth:`start` binds ``host:port`` and runs
    the door in a thread until ``stopping`` is set; ``tick`` runs after every step (the
    sessions' watchdog)."""

    def __init__(
        self,
        party: str,
        settings: ServeSettings,
        context: ssl.SSLContext,
        admission: Admission,
        counts: Counts,
        stopping: threading.Event,
        tick: Callable[[], None],
    ):
        self.party, self.settings, self.context = party, settings, context
        self.admission, self.counts, self.stopping, self.tick = admission, counts, stopping, tick
        s = settings
        self._connect_rate = RateLimiter(s.connect_rate_per_address, s.connect_burst_per_address)
        self._handshaker: Handshaker | None = None
        self.thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Connections accepted and not yet authenticated."""
        return 0 if self._handshaker is None else len(self._handshaker)

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind the listener and start the door's thread; returns the bound address."""
        listener = bind_listener(self.party, host, port, socket.SOMAXCONN)
        s = self.settings
        self._handshaker = Handshaker(
            listener,
            self.context,
            self,
            timeout=s.handshake_timeout,
            max_pending=s.max_pending,
            max_pending_per_address=s.max_pending_per_address,
        )
        self.thread = threading.Thread(
            target=self._run, name=f"smc-serve-{self.party}", daemon=True
        )
        self.thread.start()
        return listener.getsockname()[:2]

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        """Step the handshaker and the watchdog until the server stops; then close every
        pending connection and the listener."""
        handshaker = self._handshaker
        try:
            while not self.stopping.is_set():
                handshaker.step(TICK)
                self.tick()
        except BaseException:  # the door must not die silently
            log.exception("%s: the front door failed", self.party)
            raise
        finally:
            handshaker.close()
            handshaker.listener.close()

    # -- the handshaker's events -------------------------------------------------------------

    def allow(self, address: str) -> bool:
        if self._connect_rate.allow(address, time.monotonic()):
            return True
        # before any TLS work: an address that floods us costs an accept and a close
        log.debug("throttled %s: connect_rate_per_address", address)
        self.counts.add("throttled")
        return False

    def hello(self, handshake: Handshake, hello: dict) -> None:
        self.admission.authenticate(handshake.sock, hello, handshake.where)

    def failed(self, handshake: Handshake, error: Exception) -> None:
        if handshake.stage == "TLS handshake":
            log.warning(
                "refused %s: AuthenticationError: TLS handshake failed: %s",
                handshake.where,
                one_line(error),
            )
            with contextlib.suppress(OSError):
                handshake.sock.close()
            self.counts.add("refused")
            return
        if not isinstance(error, AuthenticationError):
            error = AuthenticationError(f"no valid hello: {one_line(error)}")
        self.admission.refuse(handshake.sock, handshake.where, "?", error)

    def dropped(self, handshake: Handshake, reason: str) -> None:
        log.info("dropped %s during its %s: %s", handshake.where, handshake.stage, reason)
        self.counts.add("dropped")

    def accept_failed(self, error: OSError) -> None:
        log.error("%s: accept failed: %s", self.party, error)
