"""The TCP transport between OS processes, with mutual TLS: :class:`TcpTransport` (one
party's connections to every peer), :func:`tcp_transport` and :class:`TcpNetwork` (a
whole mesh in one process, for tests and demos).

Each pair of parties shares one TCP connection.  The party whose name sorts
*lower* dials (:mod:`.dial`), the higher one listens (:mod:`.listener`), so any number
of parties form a full mesh from one table ``name -> (host, port)``.  A party dials with
retries until ``connect_timeout`` (its peer may start later) and accepts until the
same deadline, running the handshakes of the connections it accepts on the shared
non-blocking handshaker (:mod:`.handshaker`) so that a silent one delays no peer
(``docs/running.md``).

Each connection (:mod:`.connection`) has one I/O thread and bounded queues;
``recv_bytes`` waits on its inbox with a timeout, and the channel above drops a peer with
:class:`~smc_hmm.errors.BackpressureError` once it has sent more unread messages than the
channel's budget.  When the socket closes, the peer's inbox ends with
:class:`~smc_hmm.errors.PeerDisconnectedError` (after every frame that did arrive).
:meth:`TcpTransport.close` flushes pending frames, half-closes, waits briefly for the
peer's end, closes the sockets and joins every thread.

Mutual TLS (:mod:`.tls`, certificates from :func:`smc_hmm.certs.make_certificates`):
inside the TLS session the dialer sends a hello ``{"v", "from", "to"}`` and the listener
answers ``{"ok": true}`` or refuses with a reason (:mod:`.hello`).  Without ``tls`` the
same hello runs over plain TCP and nobody is authenticated: use it only on a trusted
loopback.

A serving party (``smc-hmm serve``, :mod:`smc_hmm.runtime.serve`) runs its own front
door on the same handshaker, then wraps each accepted client socket in a one-peer
transport with :meth:`TcpTransport.over_socket`.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Mapping

from smc_hmm.errors import (
    ConfigError,
    FrameTooLargeError,
    InvalidInputError,
    PeerDisconnectedError,
    PeerTimeoutError,
    TransportError,
)
from smc_hmm.transport.base import Network, Transport
from smc_hmm.transport.tcp.connection import Connection, ConnectionBudget, ConnectionEnd
from smc_hmm.transport.tcp.dial import dial
from smc_hmm.transport.tcp.hello import MAX_LENGTH
from smc_hmm.transport.tcp.listener import accept_peers, bind_listener
from smc_hmm.transport.tcp.tls import TlsConfig
from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES

__all__ = ["TcpNetwork", "TcpTransport", "free_loopback_ports", "tcp_transport"]


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
        self._conns: dict[str, Connection] = {}
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
            self._conns[peer] = Connection(
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
        conn = Connection(name, peer, sock, self.max_frame_bytes, self.close_timeout, self.budget)
        self._conns = {peer: conn}
        conn.start()
        return self

    # -- set-up -------------------------------------------------------------------

    # -- set-up -------------------------------------------------------------------

    def _establish(self, connect_timeout: float, sockets: dict) -> None:
        deadline = time.monotonic() + connect_timeout
        lower = [p for p in self.peers if p < self.name]
        higher = [p for p in self.peers if p > self.name]
        if lower and self._listener is None:
            host, port = self.addresses[self.name]
            self._listener = bind_listener(self.name, host, port, len(lower) + 8)
        # Dial every higher-named peer first, then accept the lower-named ones: by
        # induction from the highest name (which only accepts) this cannot deadlock.
        for peer in higher:
            sockets[peer] = dial(self.name, peer, self.addresses[peer], self._client_ctx, deadline)
        if lower:
            accept_peers(self.name, self._listener, self._server_ctx, set(lower), deadline, sockets)

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
        if isinstance(
            item, ConnectionEnd
        ):  # it stays in the inbox: every later recv fails the same way
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
