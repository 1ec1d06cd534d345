"""One connected socket of the TCP transport: its I/O thread, its length-prefixed frames
and its bounded queues.

Frames are length-prefixed (4-byte big-endian length, checked against
``max_frame_bytes`` as soon as the header is in, before the body is read:
:class:`~smc_hmm.errors.FrameTooLargeError`).  One I/O thread per connection
reads frames into a per-peer inbox and writes queued frames, so both directions
flow at once.  Both queues are bounded (:class:`ConnectionBudget`, backpressure):
when the inbox holds its budget of frames or bytes the I/O thread stops reading the
socket, so a peer that sends faster than the protocol reads is slowed down by TCP
flow control; a send waits while the peer leaves the outbox full, then raises
BackpressureError.  When the socket closes, the inbox ends with a
:class:`ConnectionEnd` (after every frame that did arrive).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass

from smc_hmm.errors import (
    BackpressureError,
    FrameTooLargeError,
    InvalidInputError,
    PeerDisconnectedError,
    TransportError,
)
from smc_hmm.transport.tcp.hello import HEADER_BYTES

__all__ = ["Connection", "ConnectionBudget", "ConnectionEnd"]

log = logging.getLogger("smc_hmm.transport.tcp")

_READ_CHUNK = 1 << 18
_WRITE_CHUNK = 1 << 20


@dataclass(frozen=True)
class ConnectionBudget:
    """What one connection may hold besides the frame being read (backpressure).

    ``inbox_frames`` / ``inbox_bytes``: frames read from the peer that the receiver has
    not taken yet.  When either is reached the I/O thread stops reading the socket, so
    TCP flow control slows the peer down, until the receiver takes a frame (one frame
    may overshoot ``inbox_bytes``: a frame up to ``max_frame_bytes`` is always
    accepted).  ``outbox_bytes``: frames this party queued for the peer but not yet
    written; beyond it a send waits for the peer to read, at most ``send_timeout``
    seconds, then raises :class:`~smc_hmm.errors.BackpressureError` (a single frame
    larger than the budget is queued once the outbox is empty).  Memory per connection
    is therefore at most ``inbox_bytes + 2 * max_frame_bytes + outbox_bytes`` plus one
    read chunk.
    """

    inbox_frames: int = 64
    inbox_bytes: int = 64 * 2**20
    outbox_bytes: int = 256 * 2**20
    send_timeout: float = 60.0

    def __post_init__(self):
        for name in ("inbox_frames", "inbox_bytes", "outbox_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
        if not self.send_timeout > 0:
            raise InvalidInputError("send_timeout must be a positive number of seconds")


class ConnectionEnd:
    """Inbox sentinel: the connection ended; ``kind(message)`` is raised on recv."""

    def __init__(self, kind: type[Exception], message: str):
        self.kind = kind
        self.message = message

    def error(self) -> Exception:
        return self.kind(self.message)


class _Inbox:
    """The frames read from one peer and not yet taken by the receiver, bounded.

    :meth:`pause_if_full` (I/O thread) and :meth:`get` (receiver) share one lock, so
    a frame taken from a full inbox always wakes the paused I/O thread.
    """

    def __init__(self, budget: ConnectionBudget, wake):
        self._budget = budget
        self._wake = wake
        self._items: deque = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._paused = False

    def _full(self) -> bool:
        b = self._budget
        return len(self._items) >= b.inbox_frames or self._bytes >= b.inbox_bytes

    def pause_if_full(self) -> bool:
        """True (and remember to wake the I/O thread) if no further frame may be read now."""
        with self._cond:
            self._paused = self._full()
            return self._paused

    def put(self, item) -> None:
        with self._cond:
            self._items.append(item)
            if isinstance(item, bytes):
                self._bytes += len(item)
            self._cond.notify()

    def get(self, timeout: float):
        """The next frame or the end sentinel (which stays: later gets fail the same way)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout):
                raise queue.Empty
            item = self._items[0]
            if isinstance(item, ConnectionEnd):
                return item
            self._items.popleft()
            self._bytes -= len(item)
            resume = self._paused and not self._full()
            if resume:
                self._paused = False
        if resume:
            self._wake()
        return item


class Connection:
    """A connected socket (plain or TLS) with one I/O thread and bounded queues."""

    def __init__(
        self,
        owner: str,
        peer: str,
        sock,
        max_frame_bytes: int,
        close_timeout: float,
        budget: ConnectionBudget,
    ):
        self.owner = owner
        self.peer = peer
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self.close_timeout = close_timeout
        self.budget = budget
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.inbox = _Inbox(budget, self._wake)
        self._chunk = memoryview(bytearray(_READ_CHUNK))
        self._out: deque = deque()
        self._out_bytes = 0
        self._out_cond = threading.Condition()
        self._end: ConnectionEnd | None = None
        self._closing = threading.Event()
        self._aborting = False
        self.thread = threading.Thread(
            target=self._run, name=f"smc-tcp-io-{owner}-{peer}", daemon=True
        )

    def start(self) -> None:
        self.sock.setblocking(False)
        self.thread.start()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def send(self, frame: bytes) -> None:
        """Queue ``frame``; waits (bounded) while the peer leaves the outbox full."""
        header = len(frame).to_bytes(HEADER_BYTES, "big")
        size = HEADER_BYTES + len(frame)
        budget = self.budget
        deadline = time.monotonic() + budget.send_timeout
        with self._out_cond:
            while self._out_bytes and self._out_bytes + size > budget.outbox_bytes:
                if self._end is not None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BackpressureError(
                        f"{self.owner}: {self.peer} did not read {self._out_bytes} queued bytes "
                        f"within {budget.send_timeout:g} s (outbox_bytes = {budget.outbox_bytes})"
                    )
                self._out_cond.wait(min(remaining, 0.5))
            end = self._end
            if end is not None:
                raise PeerDisconnectedError(
                    f"{self.owner}: cannot send to {self.peer}: {end.message}"
                )
            self._out.append(header)
            if frame:
                self._out.append(frame)
            self._out_bytes += size
        self._wake()

    def _pop_out(self) -> memoryview | None:
        with self._out_cond:
            if not self._out:
                return None
            chunk = self._out.popleft()
            self._out_bytes -= len(chunk)
            self._out_cond.notify_all()
            return memoryview(chunk)

    def begin_close(self, abort: bool = False) -> None:
        """Start closing: flush, half-close and wait for the peer's end (bounded), or with
        ``abort`` drop the connection at once (a peer this party gave up on)."""
        if abort:
            self._aborting = True
        self._closing.set()
        self._wake()

    def finish(self) -> None:
        """After the thread ended: release the wake-up sockets."""
        self._wake_r.close()
        self._wake_w.close()

    # -- the I/O thread ------------------------------------------------------------

    def _run(self) -> None:
        end = ConnectionEnd(PeerDisconnectedError, f"connection to {self.peer} closed")
        try:
            end = self._loop()
        except FrameTooLargeError as exc:
            end = ConnectionEnd(FrameTooLargeError, f"{self.owner}: frame from {self.peer}: {exc}")
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            end = ConnectionEnd(
                PeerDisconnectedError,
                f"{self.owner}: connection to {self.peer} failed: {type(exc).__name__}: {exc}",
            )
        except BaseException as exc:  # never die silently
            log.exception("I/O thread %s-%s crashed", self.owner, self.peer)
            end = ConnectionEnd(TransportError, f"{self.owner}: I/O thread crashed: {exc!r}")
        finally:
            with self._out_cond:
                self._end = end
                self._out.clear()
                self._out_bytes = 0
                self._out_cond.notify_all()
            with contextlib.suppress(OSError):
                self.sock.close()
            self.inbox.put(end)

    def _pending_tls(self) -> bool:
        sock = self.sock
        return isinstance(sock, ssl.SSLSocket) and sock.pending() > 0

    def _loop(self) -> ConnectionEnd:
        sock = self.sock
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            sel.register(sock, selectors.EVENT_READ, "sock")
            rbuf = bytearray()
            wbuf: memoryview | None = None
            shut_wr = False
            close_deadline: float | None = None
            registered = selectors.EVENT_READ
            first = True
            while True:
                if wbuf is None:
                    wbuf = self._pop_out()
                if self._aborting:
                    return ConnectionEnd(TransportError, f"{self.owner}: transport aborted")
                if self._closing.is_set():
                    if close_deadline is None:
                        close_deadline = time.monotonic() + self.close_timeout
                    if wbuf is None and not shut_wr:
                        # everything is flushed: half-close, then wait for the peer's end
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_WR)
                        shut_wr = True
                # backpressure: a full inbox stops the reading (discarding after our
                # half-close never stops: it only waits for the peer's end)
                may_read = shut_wr or not self.inbox.pause_if_full()
                want = (selectors.EVENT_READ if may_read else 0) | (
                    selectors.EVENT_WRITE if wbuf is not None else 0
                )
                registered = self._watch(sel, registered, want)
                timeout = None
                if close_deadline is not None:
                    timeout = max(0.0, close_deadline - time.monotonic())
                buffered = may_read and (first or self._pending_tls())
                if buffered:
                    timeout = 0.0
                readable, writable = self._select(sel, timeout, buffered)
                first = False
                if readable and self._read(rbuf, discard=shut_wr):
                    if self._closing.is_set():
                        return ConnectionEnd(TransportError, f"{self.owner}: transport closed")
                    return ConnectionEnd(
                        PeerDisconnectedError, f"{self.owner}: peer {self.peer} disconnected"
                    )
                if writable and wbuf is not None:
                    wbuf = self._write(wbuf)
                if close_deadline is not None and time.monotonic() >= close_deadline:
                    return ConnectionEnd(TransportError, f"{self.owner}: transport closed (forced)")
        finally:
            sel.close()

    def _watch(self, sel: selectors.BaseSelector, registered: int, want: int) -> int:
        """Have ``sel`` watch the socket for the events ``want`` (0: not at all) instead
        of ``registered``; the events now watched."""
        if want != registered:
            if registered and want:
                sel.modify(self.sock, want, "sock")
            elif want:
                sel.register(self.sock, want, "sock")
            else:
                sel.unregister(self.sock)
        return want

    def _select(
        self, sel: selectors.BaseSelector, timeout: float | None, buffered: bool
    ) -> tuple[bool, bool]:
        """Wait up to ``timeout`` for the socket or a wake-up (drained here); whether to
        read (also when TLS holds ``buffered`` bytes) and whether to write."""
        readable = buffered
        writable = False
        for key, mask in sel.select(timeout):
            if key.data == "wake":
                with contextlib.suppress(OSError):
                    while self._wake_r.recv(4096):
                        pass
            else:
                readable |= bool(mask & selectors.EVENT_READ)
                writable |= bool(mask & selectors.EVENT_WRITE)
        return readable, writable

    def _read(self, rbuf: bytearray, discard: bool) -> bool:
        """Read what is available while the inbox has room; queue complete frames.
        True at end of stream."""
        sock, chunk = self.sock, self._chunk
        for _ in range(64):
            try:
                n = sock.recv_into(chunk)  # one reused buffer: no allocation per read
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                return False
            if not n:
                return True
            if discard:
                continue
            rbuf += chunk[:n]
            self._parse(rbuf)
            if self.inbox.pause_if_full():
                return False
        return False

    def _parse(self, rbuf: bytearray) -> None:
        """Queue the complete frames of ``rbuf``; a declared length above the limit is
        refused as soon as its 4-byte header is in, before its body is read."""
        while len(rbuf) >= HEADER_BYTES:
            length = int.from_bytes(rbuf[:HEADER_BYTES], "big")
            if length > self.max_frame_bytes:
                raise FrameTooLargeError(
                    f"declared length {length} exceeds the limit of {self.max_frame_bytes} "
                    "(max_frame_bytes)"
                )
            end = HEADER_BYTES + length
            if len(rbuf) < end:
                return
            with memoryview(rbuf) as view:  # one copy of the body, not two
                frame = bytes(view[HEADER_BYTES:end])
            self.inbox.put(frame)
            del rbuf[:end]

    def _write(self, wbuf: memoryview) -> memoryview | None:
        sock = self.sock
        while True:
            try:
                sent = sock.send(wbuf[:_WRITE_CHUNK])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                return wbuf
            wbuf = wbuf[sent:]
            if len(wbuf):
                continue
            wbuf = self._pop_out()
            if wbuf is None:
                return None
