"""Bob's bound on what one client identity can learn: a budget of frames per period.

Every frame a client sends gives it one blinded copy of every state's (or component's)
log-density at that frame (``protocols.stages``); repeating a frame narrows the blinds
like R / (6.4 sqrt(k)) (:mod:`smc_hmm.leakage`).  ``smc-hmm serve`` therefore charges each
session's public length T against the client certificate's budget before any work on
its data, and refuses a session that would exceed it (:class:`~smc_hmm.errors.BudgetError`,
a public fact: T is public).  The budget is ``[serve] max_frames_per_client`` frames per
``budget_period`` seconds, or the number that keeps a client's best estimate of any
blinded value at least ``[serve] hiding_nats`` away from exact
(:func:`smc_hmm.leakage.samples_for_error`).  ``docs/serving.md`` ("Bounding what a
client learns") and ``docs/security.md`` explain the choice.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from smc_hmm.errors import BudgetError, ConfigError


class FrameBudget:
    """Frames per client name within a sliding window of ``period`` seconds."""

    def __init__(self, limit: int, period: float, clock=time.monotonic):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError("a frame budget must be a positive integer")
        if not (isinstance(period, int | float) and period > 0):
            raise ConfigError("a budget period must be a positive number of seconds")
        self.limit, self.period, self._clock = limit, float(period), clock
        self._spent: dict[str, deque] = {}
        self._lock = threading.Lock()

    def spent(self, client: str) -> int:
        with self._lock:
            return self._prune(client, self._clock())

    def _prune(self, client: str, now: float) -> int:
        events = self._spent.get(client)
        if not events:
            return 0
        while events and events[0][0] <= now - self.period:
            events.popleft()
        if not events:
            del self._spent[client]
            return 0
        return sum(n for _, n in events)

    def charge(self, client: str, frames: int) -> None:
        """Charge ``frames`` to ``client`` or raise BudgetError (nothing charged then)."""
        now = self._clock()
        with self._lock:
            spent = self._prune(client, now)
            if spent + frames > self.limit:
                raise BudgetError(
                    f"client {client!r} has used {spent} of its {self.limit} frames in the last "
                    f"{self.period:g} s; a run of {frames} frames would exceed the server's "
                    "budget ([serve] max_frames_per_client / hiding_nats)"
                )
            self._spent.setdefault(client, deque()).append((now, frames))
