"""Bob's bound on what one client identity can learn: a budget of sessions and frames
per period.

In the default modes a client learns only each session's declared output (a label, or
nothing), so what she can learn of Bob's models grows with her *sessions*: at most
log2(outputs) bits each (``docs/security.md``, "What the outputs alone reveal").  In the
thesis's modes she also decrypts blinded values, one per frame and state:

Every frame a client sends gives it one blinded copy of every state's (or component's)
log-density at that frame (``protocols.stages``); repeating a frame narrows the blinds
like R / (6.4 sqrt(k)) (:mod:`smc_hmm.leakage`).  ``smc-hmm serve`` therefore charges each
session's public length T against the client certificate's budget before any work on
its data, and refuses a session that would exceed it
(:class:`~smc_hmm.errors.BudgetError`, a public fact: T is public).  The budget belongs
to the certificate (its SHA-256 fingerprint), and with ``[serve] budget_file`` it
survives restarts.  The budget is ``[serve] max_frames_per_client`` frames per
``budget_period`` seconds, or the number that keeps a client's best estimate of any
blinded value at least ``[serve] hiding_nats`` away from exact
(:func:`smc_hmm.leakage.samples_for_error`).  ``docs/serving.md`` ("Bounding what a
client learns") and ``docs/security.md`` explain the choice.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from smc_hmm.errors import BudgetError, ConfigError

#: the version of a budget file's layout (2: sessions counted beside frames)
FILE_VERSION = 2


class FrameBudget:
    """Frames per client within a sliding window of ``period`` seconds, keyed on what the
    server knows of the client for sure -- its certificate's SHA-256 fingerprint -- never
    on a name the client sends.

    With ``path`` (``[serve] budget_file``) the spent frames survive a restart: they are
    read when the server starts and written after every charge, atomically (a temporary
    file in the same folder, flushed to disk, then renamed over the old one), so a server
    killed at any moment leaves the last complete state.  Their times are then wall-clock
    seconds (``time.time``): a monotonic clock restarts with the process."""

    def __init__(
        self,
        limit: int,
        period: float,
        clock=None,
        path: str | Path | None = None,
        sessions: int | None = None,
    ):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError("a frame budget must be a positive integer")
        if sessions is not None and (
            isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1
        ):
            raise ConfigError("a session budget must be a positive integer")
        self.sessions = sessions
        if not (isinstance(period, int | float) and period > 0):
            raise ConfigError("a budget period must be a positive number of seconds")
        clock = clock or (time.time if path is not None else time.monotonic)
        self.limit, self.period, self._clock = limit, float(period), clock
        self._spent: dict[str, deque] = {}
        self._lock = threading.Lock()
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") != FILE_VERSION or not isinstance(data.get("spent"), dict):
                raise ValueError("not a budget file of this version")
            for key, events in data["spent"].items():
                self._spent[str(key)] = deque((float(t), int(n), int(k)) for t, n, k in events)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise ConfigError(f"budget file {self.path} cannot be read: {e}") from e

    def _save(self) -> None:
        """Write every client's spent frames (the caller holds the lock)."""
        data = {
            "version": FILE_VERSION,
            "limit": self.limit,
            "sessions": self.sessions,
            "period": self.period,
            "spent": {k: [list(e) for e in v] for k, v in self._spent.items()},
        }
        folder = self.path.parent
        fd, tmp = tempfile.mkstemp(prefix=".budget-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def spent(self, client: str) -> int:
        """Frames ``client`` spent in the window."""
        with self._lock:
            return self._prune(client, self._clock())[0]

    def sessions_spent(self, client: str) -> int:
        """Sessions ``client`` started in the window."""
        with self._lock:
            return self._prune(client, self._clock())[1]

    def _prune(self, client: str, now: float) -> tuple[int, int]:
        events = self._spent.get(client)
        if not events:
            return 0, 0
        while events and events[0][0] <= now - self.period:
            events.popleft()
        if not events:
            del self._spent[client]
            return 0, 0
        return sum(e[1] for e in events), sum(e[2] for e in events)

    def charge(self, client: str, frames: int, name: str | None = None) -> None:
        """Charge ``frames`` to ``client`` (its key: the certificate's fingerprint) or raise
        BudgetError (nothing charged then); ``name`` is what the message calls it."""
        self._charge(client, frames, 0, name)

    def charge_session(self, client: str, name: str | None = None) -> None:
        """Charge one session to ``client`` (when the budget counts sessions) or raise
        BudgetError before any of its work."""
        if self.sessions is not None:
            self._charge(client, 0, 1, name)

    def _charge(self, client: str, frames: int, sessions: int, name: str | None) -> None:
        now = self._clock()
        with self._lock:
            spent, started = self._prune(client, now)
            who = name or client
            if spent + frames > self.limit:
                raise BudgetError(
                    f"client {who!r} has used {spent} of its {self.limit} frames in the last "
                    f"{self.period:g} s; a run of {frames} frames would exceed the server's "
                    "budget ([serve] max_frames_per_client / hiding_nats)"
                )
            if sessions and started + sessions > self.sessions:
                raise BudgetError(
                    f"client {who!r} has run {started} of its {self.sessions} sessions in the "
                    f"last {self.period:g} s ([serve] max_sessions_per_period)"
                )
            self._spent.setdefault(client, deque()).append((now, frames, sessions))
            if self.path is not None:
                self._save()
