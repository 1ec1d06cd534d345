"""The serving party: :class:`Server` composes the front door (:mod:`.frontdoor`), the
session budget (:mod:`.admission`) and the sessions (:mod:`.session`) of one Bob serving
many clients, with its life cycle (start, stop within ``shutdown_grace``, serve until
SIGTERM / SIGINT); :func:`serve` is ``smc-hmm serve``."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from smc_hmm.compute import Compute
from smc_hmm.errors import ServerShutdownError
from smc_hmm.runtime.budget import FrameBudget
from smc_hmm.runtime.config import RunConfig, load_config
from smc_hmm.runtime.serve.admission import Admission
from smc_hmm.runtime.serve.allocator import bound_allocator
from smc_hmm.runtime.serve.frontdoor import FrontDoor
from smc_hmm.runtime.serve.records import Counts, Results
from smc_hmm.runtime.serve.session import Served, SessionRunner
from smc_hmm.runtime.serve.settings import DEFAULT_BLIND_NATS, ServeSettings

__all__ = ["Server", "serve"]

log = logging.getLogger("smc_hmm.serve")


class Server:
    """A serving party: ``Server(config, "bob").start()`` listens; :meth:`stop` ends it.

    ``compute`` overrides where Bob computes (default: a Dask cluster if the
    settings name a scheduler, else ``Compute.processes(workers)``); ``port``
    overrides the configured port (0: any free port, see :attr:`address`).
    ``on_result``: a callable the server calls with each session's record once the
    session has ended (package docstring, "the results record"), beside or instead of
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
        self.settings = s = settings or ServeSettings.from_config(config)
        self.served = Served.of(config, party)
        self.descriptor, self.params = self.served.descriptor, self.served.params
        self.tls = self.served.tls
        context = self.tls.server_context()
        context.num_tickets = 0  # clients never resume: no tickets to make per handshake
        self.results = Results(s.results, on_result)
        pc = config.party(party)
        self.host = pc.host
        self.port = pc.port if port is None else port
        #: a session's frame limit: the smaller of [serve] and [run] max_frame_bytes
        self.max_frame_bytes = min(s.max_frame_bytes, config.max_frame_bytes)
        self._own_compute = compute is None
        self.compute = compute if compute is not None else self._make_compute()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        #: outcome counts (:class:`~smc_hmm.runtime.serve.records.Counts`)
        self.counts = Counts()
        limit = s.frame_limit(float(config.params.get("blind_nats", DEFAULT_BLIND_NATS)))
        frames = None
        if limit is not None:
            sessions = s.max_sessions_per_period
            frames = FrameBudget(limit, s.budget_period, path=s.budget_file, sessions=sessions)
        self.sessions = SessionRunner(
            self.served, s, self.compute, self.results, self.counts, self.max_frame_bytes, frames
        )
        self.admission = Admission(party, s, self.sessions.run, self.counts, self._stopping)
        self.door = FrontDoor(
            party, s, context, self.admission, self.counts, self._stopping, self.sessions.watchdog
        )
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
        self.address = self.door.start(self.host, self.port)
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
        admission = self.admission
        with admission.cond:
            admission.cond.notify_all()
        self.door.join()
        deadline = time.monotonic() + grace
        for thread in list(admission.handlers):
            thread.join(max(0.0, deadline - time.monotonic()))
        for session in list(self.sessions.sessions.values()):
            session.end(ServerShutdownError(f"{self.party} shut down after {grace:g} s"))
        for thread in list(admission.handlers):
            thread.join(30.0)
        if self._own_compute:
            self.compute.close()
        self._stopped.set()
        log.info("%s stopped: %s", self.party, dict(self.counts))

    def serve_forever(self) -> int:
        """Start, serve until SIGTERM / SIGINT, shut down within the bound; returns 0.

        The serving process first bounds its allocator (:func:`bound_allocator`), so that
        a client's burst of large frames goes back to the system when its session ends.
        """
        bound_allocator()
        try:
            self.start()
        except BaseException:  # never served (a port in use): no "stopped" line
            self._close_unstarted()
            raise
        stop = threading.Event()
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        try:
            while not stop.wait(0.5):
                pass
            log.info("%s: signal received, shutting down", self.party)
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def _close_unstarted(self) -> None:
        """Release what a server that never started holds (its own compute lanes)."""
        if self._own_compute:
            self.compute.close()
        self._stopped.set()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def active(self) -> int:
        """Sessions running."""
        return self.admission.active

    @property
    def pending(self) -> int:
        """Connections accepted and not yet authenticated."""
        return self.door.pending

    @property
    def waiting(self) -> int:
        """Clients waiting for a session slot."""
        return len(self.admission.queue)


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
