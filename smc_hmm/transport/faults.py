"""Fault injection for tests: a transport that misbehaves on its k-th send.

``FaultyTransport(inner, fail_at=k, mode=...)`` counts the frames this party
sends (over all peers, starting at 0) and on send number ``k``:

``"drop"``
    silently discards that frame and carries on (peers waiting for it time out);
``"disconnect"``
    closes the inner transport instead of sending (the party "crashes": its
    peers see :class:`~smc_hmm.errors.PeerDisconnectedError`) and raises
    :class:`InjectedFaultError` in the faulty party;
``"stall"``
    blocks without sending (the party "hangs") until :meth:`close` is called
    or ``stall_seconds`` pass, then raises :class:`InjectedFaultError`.
"""

from __future__ import annotations

import threading

from smc_hmm.errors import InjectedFaultError, InvalidInputError
from smc_hmm.transport.base import Transport

__all__ = ["FAULT_MODES", "FaultyTransport", "InjectedFaultError"]

FAULT_MODES = ("drop", "disconnect", "stall")


class FaultyTransport(Transport):
    """Wraps ``inner`` and misbehaves on send number ``fail_at`` (0-based)."""

    def __init__(
        self,
        inner: Transport,
        fail_at: int,
        mode: str = "disconnect",
        *,
        stall_seconds: float | None = None,
    ):
        if mode not in FAULT_MODES:
            raise InvalidInputError(f"mode must be one of {FAULT_MODES}, got {mode!r}")
        if type(fail_at) is not int or fail_at < 0:
            raise InvalidInputError("fail_at must be a non-negative int")
        self.inner = inner
        self.name = inner.name
        self.peers = list(inner.peers)
        self.fail_at = fail_at
        self.mode = mode
        self.stall_seconds = stall_seconds
        self.sent = 0
        self.triggered = False
        self._lock = threading.Lock()
        self._released = threading.Event()

    def send_bytes(self, peer: str, frame: bytes) -> None:
        with self._lock:
            index = self.sent
            self.sent += 1
        if index != self.fail_at:
            self.inner.send_bytes(peer, frame)
            return
        self.triggered = True
        if self.mode == "drop":
            return
        if self.mode == "disconnect":
            self.inner.close()
            raise InjectedFaultError(f"{self.name}: injected disconnect at send {index}")
        self._released.wait(self.stall_seconds)
        raise InjectedFaultError(f"{self.name}: injected stall at send {index}")

    def recv_bytes(self, peer: str, timeout: float) -> bytes:
        return self.inner.recv_bytes(peer, timeout)

    def close(self) -> None:
        self._released.set()
        self.inner.close()

    def __repr__(self) -> str:
        return f"<FaultyTransport {self.name} {self.mode} at {self.fail_at}>"
