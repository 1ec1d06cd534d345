"""Transports (byte pipes between named parties) and Channels (typed, tagged messages).

Layers
------
* :class:`Transport` moves opaque frames (``bytes``) between one party and its
  named peers.  Implementations: :class:`~smc_hmm.transport.local.LocalNetwork`
  (in-process queues), :mod:`~smc_hmm.transport.tcp` (TCP + mutual TLS),
  :class:`~smc_hmm.transport.simulated.SimulatedNetwork` (latency/bandwidth
  model around another network), :class:`~smc_hmm.transport.faults.FaultyTransport`
  (fault injection for tests).
* :class:`Channel` sits on a transport and a :class:`~smc_hmm.wire.WireCodec`:
  ``send(peer, tag, payload)`` / ``recv(peer, tag)``.  Messages with other tags
  are buffered, so the order between *different* tags does not matter.  Each
  message carries a causal depth (sender's depth + 1; a receive takes the max),
  so the number of rounds of a run is the largest depth over all parties and
  parallel sends count once.  A :class:`ChannelObserver` sees every message
  with its real encoded size (the cost ledger subclasses it).
* :class:`Network` hands out one transport per party name.

Writing a new transport (e.g. over a message broker)
-----------------------------------------------------
Subclass :class:`Transport` and guarantee:

``name`` / ``peers``
    This party's name and the names of every peer it can talk to (not itself).
``send_bytes(peer, frame)``
    Deliver ``frame`` (bytes, possibly empty) to ``peer`` exactly once,
    **in order** with respect to every other frame this party sends to that
    same peer.  It may return before the peer has received the frame
    (buffered), but must never reorder, duplicate or corrupt frames.  If the
    peer is known to be gone, raise :class:`~smc_hmm.errors.PeerDisconnectedError`;
    an unknown peer name is a :class:`~smc_hmm.errors.InvalidInputError`;
    sending on a closed transport raises :class:`~smc_hmm.errors.TransportError`.
``recv_bytes(peer, timeout)``
    Return the next frame from ``peer`` (frames from different peers are
    independent).  Block at most ``timeout`` seconds, then raise
    :class:`~smc_hmm.errors.PeerTimeoutError`.  Frames the peer sent before it
    closed are still delivered; after that, raise
    :class:`~smc_hmm.errors.PeerDisconnectedError` *promptly* (not after the
    timeout) once the transport knows the peer closed or died.  A frame larger
    than the transport's limit raises :class:`~smc_hmm.errors.FrameTooLargeError`.
    Must be callable concurrently for different peers, and concurrently with
    ``send_bytes``.
``close()``
    Idempotent and thread-safe.  Deliver (best effort) frames already sent,
    tell every peer this party is gone (so their ``recv_bytes`` raise
    :class:`PeerDisconnectedError`), wake any local caller blocked in
    ``recv_bytes`` (it raises :class:`TransportError`), and release every
    resource: no thread or socket is left behind when ``close()`` returns.

Only raise :class:`~smc_hmm.errors.TransportError` subclasses (or
``WireError``/``InvalidInputError`` as described) from these methods: the
layers above rely on typed errors to tear a run down cleanly.
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from collections.abc import Iterator

from smc_hmm.errors import (
    BackpressureError,
    InvalidInputError,
    PeerTimeoutError,
    ProtocolError,
    TransportError,
    WireError,
)
from smc_hmm.wire import WireCodec

__all__ = [
    "Channel",
    "ChannelObserver",
    "Network",
    "Transport",
    "close_quietly",
    "closed_on_failure",
]

#: the largest causal depth an envelope may claim (guards against absurd values)
MAX_DEPTH = 2**40
#: default budget of messages one peer may have waiting in a channel, unrequested
MAX_BUFFERED_MESSAGES = 1024
#: default budget of their encoded bytes
MAX_BUFFERED_BYTES = 2**30


class Transport(ABC):
    """A party's byte pipe to its named peers (see the module docstring for the contract)."""

    name: str
    peers: list[str]

    @abstractmethod
    def send_bytes(self, peer: str, frame: bytes) -> None:
        """Queue ``frame`` for ``peer``; frames to one peer arrive in order."""

    @abstractmethod
    def recv_bytes(self, peer: str, timeout: float) -> bytes:
        """The next frame from ``peer``; PeerTimeoutError / PeerDisconnectedError."""

    @abstractmethod
    def close(self) -> None:
        """Release everything; peers see PeerDisconnectedError. Idempotent."""

    def _check_peer(self, peer: str) -> None:
        if peer not in self.peers:
            raise InvalidInputError(f"{self.name}: unknown peer {peer!r} (peers: {self.peers})")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def close_quietly(transport: Transport) -> None:
    """Close ``transport`` and swallow any error: tearing down after a failure, the
    failure is the error to report, not what closing then raises."""
    with contextlib.suppress(Exception):
        transport.close()


@contextlib.contextmanager
def closed_on_failure(transport: Transport) -> Iterator[Transport]:
    """Run the body; if it raises (anything, interrupts included), close ``transport``
    quietly (:func:`close_quietly`) and let the error go on."""
    try:
        yield transport
    except BaseException:
        close_quietly(transport)
        raise


class ChannelObserver:
    """Sees every message a :class:`Channel` sends or delivers. Methods are no-ops;
    the cost ledger subclasses this.

    ``nbytes`` is the length of the encoded frame (envelope included), ``depth``
    the causal depth the message carries, ``waited_seconds`` the time the
    ``recv`` call that delivered the message spent blocked on the transport.
    """

    def on_send(self, peer: str, tag: str, nbytes: int, depth: int) -> None:
        pass

    def on_recv(self, peer: str, tag: str, nbytes: int, depth: int, waited_seconds: float) -> None:
        pass


def _check_tag(tag) -> str:
    if type(tag) is not str or not tag:
        raise InvalidInputError(f"a message tag must be a non-empty str, got {tag!r}")
    return tag


class Channel:
    """Typed, tagged messages over a :class:`Transport`.

    ``send(peer, tag, payload)`` encodes ``{"t": tag, "d": depth + 1, "b": payload}``
    with ``codec``; ``recv(peer, tag)`` returns the payload of the next message
    from ``peer`` with that tag, buffering messages with other tags.  Messages
    with the *same* tag from one peer are delivered in the order sent.

    ``depth`` is this party's causal depth: it starts at 0, is unchanged by
    sends and becomes ``max(depth, message depth)`` on every delivered receive.

    With ``strict=True``, :meth:`close` raises :class:`ProtocolError` if
    messages were received but never asked for (a protocol mismatch).

    Backpressure: a peer may have at most ``max_buffered_messages`` messages of
    at most ``max_buffered_bytes`` encoded bytes waiting here that the protocol
    has not asked for yet (messages read while looking for another tag); one
    more raises :class:`~smc_hmm.errors.BackpressureError` naming the budget, and
    the caller drops the peer.  The transport below bounds what it holds itself.
    """

    def __init__(
        self,
        transport: Transport,
        codec: WireCodec,
        *,
        timeout: float = 30.0,
        observer: ChannelObserver | None = None,
        strict: bool = False,
        max_buffered_messages: int = MAX_BUFFERED_MESSAGES,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
    ):
        if not isinstance(codec, WireCodec):
            raise InvalidInputError("Channel needs a WireCodec")
        if not timeout > 0:
            raise InvalidInputError("timeout must be positive")
        self.transport = transport
        self.codec = codec
        self.timeout = float(timeout)
        self.observer = observer if observer is not None else ChannelObserver()
        self.strict = strict
        if not (int(max_buffered_messages) >= 1 and int(max_buffered_bytes) >= 1):
            raise InvalidInputError("channel buffer budgets must be positive")
        self.max_buffered_messages = int(max_buffered_messages)
        self.max_buffered_bytes = int(max_buffered_bytes)
        #: per peer: [messages, bytes] buffered and not yet requested
        self._buffered: dict[str, list[int]] = {p: [0, 0] for p in transport.peers}
        self.depth = 0
        self._buffers: dict[str, dict[str, deque]] = defaultdict(lambda: defaultdict(deque))
        self._recv_locks: dict[str, threading.Lock] = {p: threading.Lock() for p in transport.peers}
        self._depth_lock = threading.Lock()
        self._closed = False

    @property
    def name(self) -> str:
        return self.transport.name

    @property
    def peers(self) -> list[str]:
        return list(self.transport.peers)

    # -- sending ----------------------------------------------------------------

    def send(self, peer: str, tag: str, payload) -> int:
        """Send ``payload`` to ``peer`` under ``tag``; returns the encoded size."""
        _check_tag(tag)
        self.transport._check_peer(peer)
        if self._closed:
            raise TransportError(f"{self.name}: channel is closed")
        depth = self.depth + 1
        frame = self.codec.encode({"t": tag, "d": depth, "b": payload})
        self.transport.send_bytes(peer, frame)
        self.observer.on_send(peer, tag, len(frame), depth)
        return len(frame)

    def broadcast(self, peers, tag: str, payload) -> None:
        """Send the same payload to several peers (encoded once per peer)."""
        for peer in peers:
            self.send(peer, tag, payload)

    # -- receiving --------------------------------------------------------------

    def recv(self, peer: str, tag: str, timeout: float | None = None):
        """The payload of the next message from ``peer`` tagged ``tag``.

        Raises PeerTimeoutError if it does not arrive within ``timeout``
        (default: the channel's timeout), PeerDisconnectedError if the peer
        left, WireError if it sent a malformed frame.
        """
        _check_tag(tag)
        self.transport._check_peer(peer)
        if self._closed:
            raise TransportError(f"{self.name}: channel is closed")
        timeout = self.timeout if timeout is None else float(timeout)
        start = time.monotonic()
        deadline = start + timeout
        waited = 0.0
        with self._recv_locks[peer]:
            queue = self._buffers[peer][tag]
            while not queue:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PeerTimeoutError(
                        f"{self.name}: no {tag!r} message from {peer} within {timeout:g} s"
                    )
                t0 = time.monotonic()
                try:
                    frame = self.transport.recv_bytes(peer, remaining)
                finally:
                    waited += time.monotonic() - t0
                msg_tag, msg_depth, body = self._open(peer, frame)
                self._buffers[peer][msg_tag].append((msg_depth, body, len(frame)))
                self._hold(peer, len(frame), waited_for=msg_tag == tag)
            msg_depth, body, nbytes = queue.popleft()
            self._buffered[peer][0] -= 1
            self._buffered[peer][1] -= nbytes
        with self._depth_lock:
            if msg_depth > self.depth:
                self.depth = msg_depth
        self.observer.on_recv(peer, tag, nbytes, msg_depth, waited)
        return body

    def _hold(self, peer: str, nbytes: int, waited_for: bool) -> None:
        """Count one more buffered message from ``peer``; BackpressureError beyond the budget
        (the message the caller waits for is counted too, but taken at once: never refused)."""
        held = self._buffered[peer]
        held[0] += 1
        held[1] += nbytes
        if waited_for:
            return
        if held[0] > self.max_buffered_messages or held[1] > self.max_buffered_bytes:
            raise BackpressureError(
                f"{self.name}: {peer} sent {held[0]} messages ({held[1]} bytes) the protocol "
                f"has not asked for, beyond the budget max_buffered_messages = "
                f"{self.max_buffered_messages} / max_buffered_bytes = {self.max_buffered_bytes}"
            )

    def _open(self, peer: str, frame: bytes):
        envelope = self.codec.decode(frame)
        if type(envelope) is not dict or set(envelope) != {"t", "d", "b"}:
            raise WireError(f"{self.name}: frame from {peer} is not a message envelope")
        tag, depth = envelope["t"], envelope["d"]
        if type(tag) is not str or not tag:
            raise WireError(f"{self.name}: envelope from {peer} has an invalid tag")
        if type(depth) is not int or not 1 <= depth <= MAX_DEPTH:
            raise WireError(f"{self.name}: envelope from {peer} has an invalid depth")
        return tag, depth, envelope["b"]

    def pending(self) -> dict[str, dict[str, int]]:
        """Messages read from the transport but not yet requested: peer -> tag -> count."""
        return {
            peer: {tag: len(q) for tag, q in tags.items() if q}
            for peer, tags in self._buffers.items()
            if any(tags.values())
        }

    # -- lifetime ---------------------------------------------------------------

    def close(self) -> None:
        """Close the transport. With ``strict``, unrequested messages raise ProtocolError."""
        if self._closed:
            return
        self._closed = True
        leftover = self.pending()
        self.transport.close()
        if self.strict and leftover:
            raise ProtocolError(f"{self.name}: messages never received: {leftover}")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Channel {self.name} -> {self.peers} depth={self.depth}>"


class Network(ABC):
    """Hands out one :class:`Transport` per party name."""

    names: list[str]

    @abstractmethod
    def transport(self, name: str) -> Transport:
        """The transport of party ``name`` (the same object on every call)."""

    def channel(self, name: str, codec: WireCodec, **kwargs) -> Channel:
        """A :class:`Channel` over ``transport(name)``."""
        return Channel(self.transport(name), codec, **kwargs)

    @abstractmethod
    def close(self) -> None:
        """Close every transport this network created. Idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
