"""TCP transport between OS processes, with mutual TLS.

Each pair of parties shares one TCP connection.  The party whose name sorts
*lower* dials, the higher one listens, so any number of parties form a full
mesh from one table ``name -> (host, port)``.  A party dials with retries
until ``connect_timeout`` (its peer may start later) and accepts until the
same deadline, running the handshakes of the connections it accepts concurrently
(``MAX_PENDING_HANDSHAKES``, ``HANDSHAKE_TIMEOUT`` each) so that a silent one delays
no peer (``docs/running.md``).

Frames are length-prefixed (4-byte big-endian length, checked against
``max_frame_bytes`` as soon as the header is in, before the body is read:
:class:`~smc_hmm.errors.FrameTooLargeError`).  One I/O thread per connection
reads frames into a per-peer inbox and writes queued frames, so both directions
flow at once; ``recv_bytes`` waits on the inbox with a timeout.  Both queues are
bounded (:class:`ConnectionBudget`, backpressure): when the inbox holds its
budget of frames or bytes the I/O thread stops reading the socket, so a peer
that sends faster than the protocol reads is slowed down by TCP flow control
(the channel above drops it with :class:`~smc_hmm.errors.BackpressureError` once
it has sent more unread messages than the channel's budget); a send waits while
the peer leaves the outbox full, then raises BackpressureError.  When the socket
closes, the peer's inbox ends with :class:`~smc_hmm.errors.PeerDisconnectedError`
(after every frame that did arrive).  :meth:`TcpTransport.close` flushes pending
frames, half-closes, waits briefly for the peer's end, closes the sockets and
joins every thread.

Mutual TLS (:class:`TlsConfig`, certificates from :func:`smc_hmm.certs.make_certificates`):
TLS 1.3 only, ``CERT_REQUIRED`` on both sides, and each side checks that the
peer's certificate names the party it claims to be (subject CN or SAN DNS
name).  Inside the TLS session the dialer sends a hello ``{"v", "from", "to"}``
and the listener answers ``{"ok": true}`` or refuses with a reason.  Without
``tls`` the same hello runs over plain TCP and nobody is authenticated: use it
only on a trusted loopback.

A serving party (``smc-hmm serve``, :mod:`smc_hmm.runtime.serve`) runs its own
accept loop and hello (:func:`send_hello`, :func:`recv_hello`,
:func:`peer_identity`), then wraps each accepted client socket in a one-peer
transport with :meth:`TcpTransport.over_socket`.
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import msgpack

from smc_hmm.errors import (
    AuthenticationError,
    BackpressureError,
    ConfigError,
    EndpointError,
    FrameTooLargeError,
    InvalidInputError,
    PeerDisconnectedError,
    PeerTimeoutError,
    TransportError,
)
from smc_hmm.transport.base import Network, Transport
from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES

__all__ = [
    "ConnectionBudget",
    "TcpNetwork",
    "TcpTransport",
    "TlsConfig",
    "free_loopback_ports",
    "hello_errors",
    "peer_identity",
    "recv_hello",
    "send_hello",
    "tcp_transport",
]

log = logging.getLogger(__name__)

HEADER_BYTES = 4
MAX_LENGTH = 2 ** (8 * HEADER_BYTES) - 1
HELLO_VERSION = 1
HELLO_MAX_BYTES = 4096
_READ_CHUNK = 1 << 18
_WRITE_CHUNK = 1 << 20


# -- TLS ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsConfig:
    """Paths of the CA certificate, this party's certificate and its private key."""

    ca_cert: str | Path
    cert: str | Path
    key: str | Path

    def _context(self, purpose: int) -> ssl.SSLContext:
        ctx = ssl.SSLContext(purpose)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.verify_mode = ssl.CERT_REQUIRED
        if purpose == ssl.PROTOCOL_TLS_CLIENT:
            ctx.check_hostname = False  # we check the party name ourselves (CN / SAN)
        try:
            ctx.load_verify_locations(cafile=str(self.ca_cert))
            ctx.load_cert_chain(certfile=str(self.cert), keyfile=str(self.key))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load TLS files {self}: {exc}") from exc
        return ctx

    def server_context(self) -> ssl.SSLContext:
        return self._context(ssl.PROTOCOL_TLS_SERVER)

    def client_context(self) -> ssl.SSLContext:
        return self._context(ssl.PROTOCOL_TLS_CLIENT)


def free_loopback_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that were free a moment ago.

    For writing parties.toml files of local trials and tests; another process
    may still take a port before a party binds it.
    """
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _cert_names(cert: dict | None) -> set[str]:
    """Subject CNs and SAN DNS names of a verified peer certificate."""
    names: set[str] = set()
    if not cert:
        return names
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                names.add(value)
    for kind, value in cert.get("subjectAltName", ()):
        if kind == "DNS":
            names.add(value)
    return names


def peer_identity(sock) -> tuple[set[str], set[str]]:
    """(names, URIs) of the verified peer certificate of a TLS socket (empty if plain)."""
    if not isinstance(sock, ssl.SSLSocket):
        return set(), set()
    cert = sock.getpeercert()
    uris = {v for k, v in (cert or {}).get("subjectAltName", ()) if k == "URI"}
    return _cert_names(cert), uris


def _check_identity(sock, expected: str) -> None:
    if not isinstance(sock, ssl.SSLSocket):
        return
    names = _cert_names(sock.getpeercert())
    if expected not in names:
        raise AuthenticationError(
            f"peer certificate names {sorted(names)}, expected party {expected!r}"
        )


# -- blocking framing (hello only) -----------------------------------------------------


def _read_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise PeerDisconnectedError("connection closed during the hello")
        buf += chunk
    return bytes(buf)


def _send_small(sock, obj) -> None:
    body = msgpack.packb(obj, use_bin_type=True)
    sock.sendall(len(body).to_bytes(HEADER_BYTES, "big") + body)


def hello_length(header: bytes) -> int:
    """The body length a hello's 4-byte header declares (AuthenticationError above 4096)."""
    length = int.from_bytes(header, "big")
    if length > HELLO_MAX_BYTES:
        raise AuthenticationError(f"oversized hello ({length} bytes, at most {HELLO_MAX_BYTES})")
    return length


def decode_hello(body: bytes) -> dict:
    """A hello's msgpack body as a dict (AuthenticationError if it is anything else)."""
    try:
        obj = msgpack.unpackb(body, raw=False)
    except Exception as exc:  # malformed hello
        raise AuthenticationError(f"malformed hello: {exc}") from exc
    if not isinstance(obj, dict):
        raise AuthenticationError("malformed hello")
    return obj


def _recv_small(sock) -> dict:
    length = hello_length(_read_exact(sock, HEADER_BYTES))
    return decode_hello(_read_exact(sock, length))


def send_hello(sock, obj: dict) -> None:
    """One small msgpack frame of the set-up (hello or its reply), blocking."""
    _send_small(sock, obj)


def recv_hello(sock) -> dict:
    """The peer's hello or reply (at most 4096 bytes; AuthenticationError if malformed)."""
    return _recv_small(sock)


@contextlib.contextmanager
def hello_errors(name: str, peer: str):
    """The dialling party ``name``'s hello exchange with ``peer``: a TLS error or a closed
    connection in it becomes the transport error it most likely means."""
    try:
        yield
    except ssl.SSLError as exc:
        # TLS 1.3: a rejected client certificate surfaces after the handshake
        raise AuthenticationError(f"{name}: {peer} refused us: {exc}") from exc
    except ConnectionError as exc:
        raise PeerDisconnectedError(
            f"{name}: {peer} closed the connection during the hello "
            f"(it may have refused our certificate): {exc}"
        ) from exc


# -- one connection -----------------------------------------------------------------


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


class _End:
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
            if isinstance(item, _End):
                return item
            self._items.popleft()
            self._bytes -= len(item)
            resume = self._paused and not self._full()
            if resume:
                self._paused = False
        if resume:
            self._wake()
        return item


class _Connection:
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
        self._end: _End | None = None
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
        end = _End(PeerDisconnectedError, f"connection to {self.peer} closed")
        try:
            end = self._loop()
        except FrameTooLargeError as exc:
            end = _End(FrameTooLargeError, f"{self.owner}: frame from {self.peer}: {exc}")
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            end = _End(
                PeerDisconnectedError,
                f"{self.owner}: connection to {self.peer} failed: {type(exc).__name__}: {exc}",
            )
        except BaseException as exc:  # never die silently
            log.exception("I/O thread %s-%s crashed", self.owner, self.peer)
            end = _End(TransportError, f"{self.owner}: I/O thread crashed: {exc!r}")
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

    def _loop(self) -> _End:
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
                    return _End(TransportError, f"{self.owner}: transport aborted")
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
                if want != registered:
                    if registered and want:
                        sel.modify(sock, want, "sock")
                    elif want:
                        sel.register(sock, want, "sock")
                    else:
                        sel.unregister(sock)
                    registered = want
                timeout = None
                if close_deadline is not None:
                    timeout = max(0.0, close_deadline - time.monotonic())
                buffered = may_read and (first or self._pending_tls())
                if buffered:
                    timeout = 0.0
                ready = sel.select(timeout)
                readable = buffered
                writable = False
                first = False
                for key, mask in ready:
                    if key.data == "wake":
                        with contextlib.suppress(OSError):
                            while self._wake_r.recv(4096):
                                pass
                    else:
                        readable |= bool(mask & selectors.EVENT_READ)
                        writable |= bool(mask & selectors.EVENT_WRITE)
                if readable and self._read(rbuf, discard=shut_wr):
                    if self._closing.is_set():
                        return _End(TransportError, f"{self.owner}: transport closed")
                    return _End(
                        PeerDisconnectedError, f"{self.owner}: peer {self.peer} disconnected"
                    )
                if writable and wbuf is not None:
                    wbuf = self._write(wbuf)
                if close_deadline is not None and time.monotonic() >= close_deadline:
                    return _End(TransportError, f"{self.owner}: transport closed (forced)")
        finally:
            sel.close()

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


# -- the transport ------------------------------------------------------------------


#: seconds an accepted connection has for its TLS handshake and hello (party listeners)
HANDSHAKE_TIMEOUT = 10.0
#: a party listener's handshakes in flight at once; a new connection beyond drops the oldest
MAX_PENDING_HANDSHAKES = 32


class _Held:
    """The socket of one handshake in flight (the TLS socket once wrapped, before its
    handshake), which the listener shuts down, waking the handshake's thread, unless its
    peer was admitted."""

    def __init__(self, sock):
        self.sock, self.admitted = sock, False
        self._lock = threading.Lock()

    def replace(self, sock):
        with self._lock:
            self.sock = sock
        return sock

    def shut(self) -> None:
        """Shut the connection down (the handshake's thread wakes, fails and closes it).
        The plain socket's shutdown, also for a TLS socket: ``SSLSocket.shutdown`` and
        ``close`` would pull the TLS object from under the thread's handshake."""
        with self._lock:
            if not self.admitted:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(self.sock, socket.SHUT_RDWR)


class _HandshakeGate:
    """The missing peers of a party's listener, shared by its concurrent handshakes: the
    first authenticated connection of each is admitted (its hello answered ``ok``),
    under one lock so that two connections claiming one peer cannot both be."""

    def __init__(self, missing: set[str], sockets: dict):
        self._missing, self._sockets = missing, sockets
        self._lock = threading.Lock()
        self.refusals: list[str] = []

    def expects(self, peer: str) -> bool:
        with self._lock:
            return peer in self._missing

    def admit(self, peer: str, held: _Held) -> bool:
        """Answer ``ok`` and keep the socket for ``peer`` unless another connection won."""
        with self._lock, held._lock:
            if peer not in self._missing:
                return False
            _send_small(held.sock, {"ok": True})
            held.sock.settimeout(None)
            held.admitted = True
            self._missing.discard(peer)
            self._sockets[peer] = held.sock
            return True

    def refuse(self, reason: str) -> None:
        with self._lock:
            self.refusals.append(reason)

    def missing(self) -> set[str]:
        with self._lock:
            return set(self._missing)

    def complete(self) -> bool:
        with self._lock:
            return not self._missing


def _check_addresses(name: str, addresses: Mapping[str, tuple[str, int]]) -> dict:
    if not isinstance(addresses, Mapping) or name not in addresses:
        raise ConfigError(f"addresses must map every party name, including {name!r}")
    if len(addresses) < 2:
        raise ConfigError("a network needs at least two parties")
    out = {}
    for party, addr in addresses.items():
        if type(party) is not str or not party or party == "localhost":
            raise ConfigError(f"invalid party name {party!r}")
        try:
            host, port = addr
        except (TypeError, ValueError):
            raise ConfigError(f"address of {party!r} must be (host, port)") from None
        if not isinstance(host, str) or type(port) is not int or not 0 <= port < 65536:
            raise ConfigError(f"invalid address {addr!r} for {party!r}")
        out[party] = (host, port)
    return out


class TcpTransport(Transport):
    """One party's TCP (+ TLS) connections to every peer.

    The constructor blocks until the full mesh is connected (or raises
    PeerTimeoutError / AuthenticationError by ``connect_timeout``).  ``listener``
    is an optional already-bound listening socket for this party (the transport
    takes ownership); otherwise one is bound to ``addresses[name]`` if any peer
    sorts lower than ``name``.
    """

    def __init__(
        self,
        name: str,
        addresses: Mapping[str, tuple[str, int]],
        tls: TlsConfig | None = None,
        connect_timeout: float = 30.0,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        close_timeout: float = 5.0,
        listener: socket.socket | None = None,
        budget: ConnectionBudget | None = None,
    ):
        self.addresses = _check_addresses(name, addresses)
        if not 0 < max_frame_bytes <= MAX_LENGTH:
            raise InvalidInputError(f"max_frame_bytes must be in (0, {MAX_LENGTH}]")
        self.name = name
        self.peers = sorted(p for p in self.addresses if p != name)
        self.tls = tls
        self.max_frame_bytes = int(max_frame_bytes)
        self.close_timeout = float(close_timeout)
        self.budget = budget if budget is not None else ConnectionBudget()
        self._server_ctx = tls.server_context() if tls is not None else None
        self._client_ctx = tls.client_context() if tls is not None else None
        self._conns: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._close_done = False
        self._listener = listener
        sockets: dict[str, socket.socket] = {}
        try:
            self._establish(float(connect_timeout), sockets)
        except BaseException:
            for s in sockets.values():
                with contextlib.suppress(OSError):
                    s.close()
            raise
        finally:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        for peer in self.peers:
            self._conns[peer] = _Connection(
                name, peer, sockets[peer], self.max_frame_bytes, self.close_timeout, self.budget
            )
        for conn in self._conns.values():
            conn.start()

    @classmethod
    def over_socket(
        cls,
        name: str,
        peer: str,
        sock,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        close_timeout: float = 5.0,
        budget: ConnectionBudget | None = None,
    ) -> TcpTransport:
        """A one-peer transport over a socket whose TLS handshake and hello are done.

        For a serving party's sessions: the caller authenticated ``sock`` (and
        named its peer ``peer``); the transport takes ownership of it.
        """
        if not 0 < max_frame_bytes <= MAX_LENGTH:
            raise InvalidInputError(f"max_frame_bytes must be in (0, {MAX_LENGTH}]")
        self = cls.__new__(cls)
        self.addresses = {}
        self.name = name
        self.peers = [peer]
        self.tls = None
        self.max_frame_bytes = int(max_frame_bytes)
        self.close_timeout = float(close_timeout)
        self.budget = budget if budget is not None else ConnectionBudget()
        self._server_ctx = self._client_ctx = None
        self._lock = threading.Lock()
        self._closed = False
        self._close_done = False
        self._listener = None
        sock.settimeout(None)
        conn = _Connection(name, peer, sock, self.max_frame_bytes, self.close_timeout, self.budget)
        self._conns = {peer: conn}
        conn.start()
        return self

    # -- set-up -------------------------------------------------------------------

    def _establish(self, connect_timeout: float, sockets: dict) -> None:
        deadline = time.monotonic() + connect_timeout
        lower = [p for p in self.peers if p < self.name]
        higher = [p for p in self.peers if p > self.name]
        if lower and self._listener is None:
            host, port = self.addresses[self.name]
            lst = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                lst.bind((host, port))
                lst.listen(len(lower) + 8)
            except OSError as exc:
                lst.close()
                raise EndpointError(f"{self.name}: cannot listen on {host}:{port}: {exc}") from exc
            self._listener = lst
        # Dial every higher-named peer first, then accept the lower-named ones: by
        # induction from the highest name (which only accepts) this cannot deadlock.
        for peer in higher:
            sockets[peer] = self._dial(peer, deadline)
        if lower:
            self._accept(set(lower), deadline, sockets)

    def _dial(self, peer: str, deadline: float):
        host, port = self.addresses[peer]
        last: Exception | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerTimeoutError(
                    f"{self.name}: could not connect to {peer} at {host}:{port}: {last}"
                )
            try:
                raw = socket.create_connection((host, port), timeout=min(remaining, 5.0))
            except OSError as exc:
                last = exc
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                continue
            try:
                return self._client_handshake(raw, peer, deadline)
            except BaseException:
                with contextlib.suppress(OSError):
                    raw.close()
                raise

    def _client_handshake(self, raw: socket.socket, peer: str, deadline: float):
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(max(0.001, deadline - time.monotonic()))
        sock = raw
        try:
            if self._client_ctx is not None:
                try:
                    sock = self._client_ctx.wrap_socket(raw)
                except ssl.SSLError as exc:
                    raise AuthenticationError(
                        f"{self.name}: TLS handshake with {peer} failed: {exc}"
                    ) from exc
                try:
                    _check_identity(sock, peer)
                except AuthenticationError as exc:
                    raise AuthenticationError(f"{self.name}: refusing {peer}: {exc}") from None
            with hello_errors(self.name, peer):
                _send_small(sock, {"v": HELLO_VERSION, "from": self.name, "to": peer})
                reply = _recv_small(sock)
            if reply.get("ok") is not True:
                raise AuthenticationError(
                    f"{self.name}: {peer} refused the connection: {reply.get('reason')!r}"
                )
            sock.settimeout(None)
            return sock
        except BaseException as exc:
            if sock is not raw:
                with contextlib.suppress(OSError):
                    sock.close()
            if isinstance(exc, TransportError):
                raise
            if isinstance(exc, TimeoutError):
                raise PeerTimeoutError(f"{self.name}: set-up with {peer} timed out") from exc
            if isinstance(exc, OSError):
                raise PeerDisconnectedError(
                    f"{self.name}: connection to {peer} failed during set-up: {exc}"
                ) from exc
            raise

    def _accept(self, missing: set[str], deadline: float, sockets: dict) -> None:
        """Accept until every lower-named peer is in, or the deadline.

        Each accepted connection's TLS handshake and hello run in a thread of their own,
        within ``HANDSHAKE_TIMEOUT`` seconds, so a connection that stays silent (or many
        that keep reconnecting) delays no other: the peer that does speak gets in at
        once.  At most ``MAX_PENDING_HANDSHAKES`` run at a time; a new connection beyond
        that drops the oldest.  The first authenticated connection of a missing peer
        wins; a later one claiming the same peer is refused.
        """
        lst = self._listener
        lst.setblocking(False)  # a connection reset between select and accept must not block
        gate = _HandshakeGate(missing, sockets)
        wake_r, wake_w = socket.socketpair()
        pending: deque[tuple[_Held, threading.Thread]] = deque()
        threads: list[threading.Thread] = []

        def handshake(held, addr):
            try:
                self._server_handshake(held, addr, deadline, gate)
            finally:
                with contextlib.suppress(OSError):
                    wake_w.send(b"x")

        try:
            with selectors.DefaultSelector() as sel:
                sel.register(lst, selectors.EVENT_READ)
                sel.register(wake_r, selectors.EVENT_READ)
                while not gate.complete():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        if gate.refusals:
                            raise AuthenticationError(
                                f"{self.name}: refused connections ({'; '.join(gate.refusals)}); "
                                f"still missing {sorted(gate.missing())}"
                            )
                        raise PeerTimeoutError(
                            f"{self.name}: {sorted(gate.missing())} did not connect within "
                            "the deadline"
                        )
                    for key, _ in sel.select(remaining):
                        if key.fileobj is wake_r:
                            with contextlib.suppress(OSError):
                                wake_r.recv(4096)
                            continue
                        try:
                            raw, addr = lst.accept()
                        except (BlockingIOError, InterruptedError, TimeoutError):
                            continue
                        except OSError as exc:
                            raise TransportError(f"{self.name}: accept failed: {exc}") from exc
                        pending = deque(p for p in pending if p[1].is_alive())
                        threads = [t for t in threads if t.is_alive()]
                        if len(pending) >= MAX_PENDING_HANDSHAKES:
                            pending.popleft()[0].shut()  # the oldest is the likeliest silent
                        held = _Held(raw)
                        thread = threading.Thread(
                            target=handshake,
                            args=(held, addr),
                            name=f"{self.name}-handshake",
                            daemon=True,
                        )
                        pending.append((held, thread))
                        threads.append(thread)
                        thread.start()
        finally:
            for held, _ in pending:  # still in their handshake: nobody waits for them now
                held.shut()
            for thread in threads:
                thread.join(5.0)
            wake_r.close()
            wake_w.close()

    def _server_handshake(self, held: _Held, addr, deadline: float, gate: _HandshakeGate) -> None:
        """TLS handshake and hello of one accepted connection; ``gate`` admits its peer."""
        sock = raw = held.sock
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(max(0.001, min(deadline - time.monotonic(), HANDSHAKE_TIMEOUT)))
        try:
            if self._server_ctx is not None:  # wrapped first, so the listener can shut it
                sock = held.replace(
                    self._server_ctx.wrap_socket(
                        raw, server_side=True, do_handshake_on_connect=False
                    )
                )
                sock.do_handshake()
            hello = _recv_small(sock)
            claimed = hello.get("from")
            reason = None
            if hello.get("v") != HELLO_VERSION or hello.get("to") != self.name:
                reason = f"bad hello {hello!r}"
            elif type(claimed) is not str or not gate.expects(claimed):
                reason = f"unexpected or duplicate party {claimed!r}"
            else:
                try:
                    _check_identity(sock, claimed)
                except AuthenticationError as exc:
                    reason = str(exc)
            if reason is None and not gate.admit(claimed, held):
                reason = f"duplicate party {claimed!r}"
            if reason is not None:
                gate.refuse(f"{addr[0]}:{addr[1]}: {reason}")
                log.warning("%s: refused a connection from %s: %s", self.name, addr, reason)
                with contextlib.suppress(OSError):
                    _send_small(sock, {"ok": False, "reason": reason})
                sock.close()
        except Exception as exc:  # a thread's end: any failure refuses the peer
            gate.refuse(f"{addr[0]}:{addr[1]}: {type(exc).__name__}: {exc}")
            log.warning("%s: refused a connection from %s: %s", self.name, addr, exc)
            with contextlib.suppress(OSError):
                sock.close()

    # -- Transport API --------------------------------------------------------------

    def send_bytes(self, peer: str, frame: bytes) -> None:
        self._check_peer(peer)
        if not isinstance(frame, bytes | bytearray | memoryview):
            raise InvalidInputError("frames must be bytes")
        if self._closed:
            raise TransportError(f"{self.name}: transport is closed")
        if len(frame) > self.max_frame_bytes:
            raise FrameTooLargeError(
                f"{self.name}: frame of {len(frame)} bytes exceeds the limit of "
                f"{self.max_frame_bytes}"
            )
        self._conns[peer].send(bytes(frame))

    def recv_bytes(self, peer: str, timeout: float) -> bytes:
        self._check_peer(peer)
        if self._closed:
            raise TransportError(f"{self.name}: transport is closed")
        conn = self._conns[peer]
        try:
            item = conn.inbox.get(timeout=max(0.0, float(timeout)))
        except queue.Empty:
            raise PeerTimeoutError(
                f"{self.name}: no frame from {peer} within {float(timeout):g} s"
            ) from None
        if isinstance(item, _End):  # it stays in the inbox: every later recv fails the same way
            if self._closed:
                raise TransportError(f"{self.name}: transport is closed")
            raise item.error()
        return item

    def close(self) -> None:
        """Flush, half-close, wait briefly for each peer's end, join the I/O threads.

        Thread-safe: a second caller waits until the first has finished.
        """
        self._shut(abort=False)

    def abort(self) -> None:
        """Close every connection at once, without flushing or waiting for the peers (for
        a peer this party gave up on: nothing more it sends is read); joins the threads."""
        self._shut(abort=True)

    def _shut(self, abort: bool) -> None:
        with self._lock:
            if self._close_done:
                return
            self._closed = True
            for conn in self._conns.values():
                conn.begin_close(abort)
            for conn in self._conns.values():
                conn.thread.join(self.close_timeout + 5.0)
                conn.finish()
            self._close_done = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        mode = "tls" if self.tls is not None else "plain"
        return f"<TcpTransport {self.name} ({mode}) peers={self.peers}>"


def tcp_transport(
    name: str,
    addresses: Mapping[str, tuple[str, int]],
    tls: TlsConfig | None = None,
    connect_timeout: float = 30.0,
    **kwargs,
) -> TcpTransport:
    """Connect party ``name`` to every other party in ``addresses`` (see :class:`TcpTransport`)."""
    return TcpTransport(name, addresses, tls, connect_timeout, **kwargs)


class TcpNetwork(Network):
    """All parties of a TCP mesh inside one process, on ephemeral loopback ports.

    For tests and single-machine demos: binds one listener per party on
    ``host`` port 0, then connects every party concurrently.  ``tls`` maps each
    party name to its :class:`TlsConfig` (or is ``None`` for plain TCP).
    """

    def __init__(
        self,
        names,
        tls: Mapping[str, TlsConfig] | None = None,
        *,
        host: str = "127.0.0.1",
        connect_timeout: float = 10.0,
        **kwargs,
    ):
        self.names = list(names)
        if len(set(self.names)) != len(self.names) or len(self.names) < 2:
            raise InvalidInputError(f"need at least two distinct party names: {self.names}")
        if tls is not None and set(tls) != set(self.names):
            raise ConfigError("tls must give a TlsConfig for every party")
        listeners = {}
        for name in self.names:
            lst = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            lst.bind((host, 0))
            lst.listen(len(self.names) + 8)
            listeners[name] = lst
        self.addresses = {n: (host, s.getsockname()[1]) for n, s in listeners.items()}
        self._transports: dict[str, TcpTransport] = {}
        errors: list[BaseException] = []

        def connect(name: str) -> None:
            try:
                self._transports[name] = TcpTransport(
                    name,
                    self.addresses,
                    None if tls is None else tls[name],
                    connect_timeout,
                    listener=listeners[name],
                    **kwargs,
                )
            except BaseException as exc:  # re-raised below
                listeners[name].close()
                errors.append(exc)

        threads = [
            threading.Thread(target=connect, args=(n,), name=f"smc-tcp-connect-{n}")
            for n in self.names
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.close()
            # report the cause (e.g. a refused certificate), not the timeouts it caused
            errors.sort(key=lambda e: isinstance(e, PeerTimeoutError | PeerDisconnectedError))
            raise errors[0]

    def transport(self, name: str) -> TcpTransport:
        try:
            return self._transports[name]
        except KeyError:
            raise InvalidInputError(f"no party {name!r} in {self.names}") from None

    def close(self) -> None:
        for t in self._transports.values():
            t.close()

    def __repr__(self) -> str:
        return f"<TcpNetwork {self.addresses}>"
