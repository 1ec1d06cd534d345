"""In-process transport: one thread per party, frames passed through queues.

:class:`LocalNetwork` is what ``simulate(...)`` runs on.  A party that fails
must not leave its peers waiting for the full timeout: closing its transport
(or calling :meth:`LocalNetwork.abort`) marks it gone, and every peer blocked
in ``recv_bytes`` on it raises :class:`~smc_hmm.errors.PeerDisconnectedError`
at once (after the frames it did send have been delivered).
"""

from __future__ import annotations

import threading
import time
from collections import deque

from smc_hmm.errors import (
    InvalidInputError,
    PeerDisconnectedError,
    PeerTimeoutError,
    TransportError,
)
from smc_hmm.transport.base import Network, Transport

__all__ = ["LocalNetwork", "LocalTransport"]


def _check_names(names) -> list[str]:
    names = list(names)
    if len(names) < 2:
        raise InvalidInputError("a network needs at least two parties")
    for n in names:
        if type(n) is not str or not n:
            raise InvalidInputError(f"party names must be non-empty str, got {n!r}")
    if len(set(names)) != len(names):
        raise InvalidInputError(f"party names must be unique: {names}")
    return names


class LocalTransport(Transport):
    """One party's end of a :class:`LocalNetwork`."""

    def __init__(self, network: LocalNetwork, name: str):
        self._network = network
        self.name = name
        self.peers = [p for p in network.names if p != name]
        self._cond = threading.Condition()
        self._inbox: dict[str, deque[bytes]] = {p: deque() for p in self.peers}
        self._closed = False
        self._close_reason: str | None = None

    # called by peers (under their own locks only briefly) ------------------------

    def _deliver(self, sender: str, frame: bytes) -> None:
        with self._cond:
            if self._closed:
                raise PeerDisconnectedError(
                    f"{sender}: peer {self.name} is gone ({self._close_reason})"
                )
            self._inbox[sender].append(frame)
            self._cond.notify_all()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # Transport API ----------------------------------------------------------------

    def send_bytes(self, peer: str, frame: bytes) -> None:
        self._check_peer(peer)
        if not isinstance(frame, bytes | bytearray | memoryview):
            raise InvalidInputError("frames must be bytes")
        if self._closed:
            raise TransportError(f"{self.name}: transport is closed ({self._close_reason})")
        self._network._transports[peer]._deliver(self.name, bytes(frame))

    def recv_bytes(self, peer: str, timeout: float) -> bytes:
        self._check_peer(peer)
        deadline = time.monotonic() + max(0.0, float(timeout))
        other = self._network._transports[peer]
        with self._cond:
            while True:
                if self._closed:
                    raise TransportError(f"{self.name}: transport is closed ({self._close_reason})")
                inbox = self._inbox[peer]
                if inbox:
                    return inbox.popleft()
                if other._closed:
                    raise PeerDisconnectedError(
                        f"{self.name}: peer {peer} disconnected ({other._close_reason})"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PeerTimeoutError(
                        f"{self.name}: no frame from {peer} within {float(timeout):g} s"
                    )
                self._cond.wait(remaining)

    def close(self, reason: str = "closed") -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._close_reason = reason
            self._cond.notify_all()
        for peer in self.peers:
            self._network._transports[peer]._wake()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<LocalTransport {self.name} peers={self.peers}>"


class LocalNetwork(Network):
    """In-process network of named parties (use one thread per party)."""

    def __init__(self, names):
        self.names = _check_names(names)
        self._transports = {name: LocalTransport(self, name) for name in self.names}

    def transport(self, name: str) -> LocalTransport:
        try:
            return self._transports[name]
        except KeyError:
            raise InvalidInputError(f"no party {name!r} in {self.names}") from None

    def abort(self, name: str, reason: str = "aborted") -> None:
        """Mark party ``name`` as dead: its peers' receives fail fast with
        PeerDisconnectedError (after the frames it already sent)."""
        self.transport(name).close(reason)

    def close(self) -> None:
        for t in self._transports.values():
            t.close()

    def __repr__(self) -> str:
        return f"<LocalNetwork {self.names}>"
