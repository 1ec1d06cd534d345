"""A latency and bandwidth model around another network, for WAN estimates.

``SimulatedNetwork(inner, latency_s, bandwidth_bytes_per_s)`` delays every
frame so that it becomes available to the receiver at

    deliver_at = start + size / bandwidth + latency,   start = max(now, link free)

where "link free" is when the previous frame on the same directed link
(sender -> receiver) finished transmitting.  So frames on one link queue behind
each other (bandwidth), frames to different peers are sent in parallel, and
the sender never blocks (the wait happens in the receiver's ``recv_bytes``,
which really sleeps).  ``size`` is the frame length plus an 8-byte header that
carries ``deliver_at``.  The defaults (no latency, infinite bandwidth) add no
delay.  Clocks: ``time.monotonic``, so sender and receiver must share a host
(in-process networks, or processes on one machine).
"""

from __future__ import annotations

import math
import struct
import threading
import time

from smc_hmm.errors import InvalidInputError, PeerTimeoutError, WireError
from smc_hmm.transport.base import Network, Transport

__all__ = ["SimulatedNetwork", "SimulatedTransport"]

_HEADER = struct.Struct(">d")


class SimulatedTransport(Transport):
    """Wraps a transport; see the module docstring for the delay model."""

    def __init__(self, inner: Transport, latency_s: float, bandwidth_bytes_per_s: float):
        self.inner = inner
        self.name = inner.name
        self.peers = list(inner.peers)
        self.latency_s = latency_s
        self.bandwidth = bandwidth_bytes_per_s
        self._link_free = {p: 0.0 for p in self.peers}
        self._held: dict[str, tuple[float, bytes]] = {}
        self._lock = threading.Lock()

    def transmission_seconds(self, nbytes: int) -> float:
        return 0.0 if math.isinf(self.bandwidth) else nbytes / self.bandwidth

    def send_bytes(self, peer: str, frame: bytes) -> None:
        self._check_peer(peer)
        size = len(frame) + _HEADER.size
        with self._lock:
            start = max(time.monotonic(), self._link_free[peer])
            done = start + self.transmission_seconds(size)
            self._link_free[peer] = done
        self.inner.send_bytes(peer, _HEADER.pack(done + self.latency_s) + bytes(frame))

    def recv_bytes(self, peer: str, timeout: float) -> bytes:
        self._check_peer(peer)
        deadline = time.monotonic() + max(0.0, float(timeout))
        held = self._held.pop(peer, None)
        if held is None:
            data = self.inner.recv_bytes(peer, max(0.0, deadline - time.monotonic()))
            if len(data) < _HEADER.size:
                raise WireError(f"{self.name}: simulated frame from {peer} lacks its header")
            (deliver_at,) = _HEADER.unpack_from(data)
            if not math.isfinite(deliver_at):
                raise WireError(f"{self.name}: bad delivery time from {peer}")
            held = (deliver_at, data[_HEADER.size :])
        deliver_at, frame = held
        wait = deliver_at - time.monotonic()
        if wait > 0:
            if deliver_at > deadline:
                time.sleep(max(0.0, deadline - time.monotonic()))
                self._held[peer] = held
                raise PeerTimeoutError(
                    f"{self.name}: frame from {peer} still in flight after {float(timeout):g} s"
                )
            time.sleep(wait)
        return frame

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return (
            f"<SimulatedTransport {self.name} latency={self.latency_s}s "
            f"bandwidth={self.bandwidth}B/s>"
        )


class SimulatedNetwork(Network):
    """Every transport of ``inner`` wrapped in a :class:`SimulatedTransport`."""

    def __init__(
        self,
        inner: Network,
        latency_s: float = 0.0,
        bandwidth_bytes_per_s: float = math.inf,
    ):
        latency_s = float(latency_s)
        bandwidth = float(bandwidth_bytes_per_s)
        if not (math.isfinite(latency_s) and latency_s >= 0):
            raise InvalidInputError("latency_s must be finite and >= 0")
        if not bandwidth > 0 or math.isnan(bandwidth):
            raise InvalidInputError("bandwidth_bytes_per_s must be > 0 (math.inf for unlimited)")
        self.inner = inner
        self.names = list(inner.names)
        self.latency_s = latency_s
        self.bandwidth_bytes_per_s = bandwidth
        self._transports: dict[str, SimulatedTransport] = {}
        self._lock = threading.Lock()

    def transport(self, name: str) -> SimulatedTransport:
        with self._lock:
            if name not in self._transports:
                self._transports[name] = SimulatedTransport(
                    self.inner.transport(name), self.latency_s, self.bandwidth_bytes_per_s
                )
            return self._transports[name]

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"<SimulatedNetwork latency={self.latency_s}s over {self.inner!r}>"
