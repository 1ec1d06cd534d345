"""What a serving party logs and records: the one-line forms of errors and costs in its
log lines (logger ``smc_hmm.serve``) and the operator's results record (package
docstring, "What the service gets")."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from smc_hmm.errors import ConfigError, SmcHmmError
from smc_hmm.options import check_output_path

__all__ = ["Counts", "Results", "cost_summary", "one_line", "result_fields", "utc"]

log = logging.getLogger("smc_hmm.serve")


def cost_summary(snapshot: dict) -> str:
    ops = ",".join(f"{k}={v}" for k, v in sorted(snapshot["ops"].items()) if v)
    t = snapshot["time"]
    return (
        f"messages={snapshot['messages']['sent']}/{snapshot['messages']['recv']} "
        f"bytes={snapshot['bytes']['sent']}/{snapshot['bytes']['recv']} "
        f"rounds={snapshot['rounds']} ops[{ops or '-'}] "
        f"wall={t['wall']:.3f}s compute={t['compute']:.3f}s wait={t['wait']:.3f}s"
    )


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in agreement: "1 session", "2 sessions"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


class Results:
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


def result_fields(output, outcome: str) -> dict:
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


class Counts(dict):
    """A server's outcome counts: ok and failed sessions, refused clients (with a reason,
    or a failed TLS handshake), dropped pending connections (timeout or a cap), and
    throttled ones (closed on arrival: their address opened too many too fast).  A dict,
    each count added under a lock."""

    def __init__(self):
        super().__init__(ok=0, failed=0, refused=0, dropped=0, throttled=0)
        self._lock = threading.Lock()

    def add(self, outcome: str) -> None:
        with self._lock:
            self[outcome] += 1
