"""The dialling side of a mesh connection: party ``name`` connects to a higher-named peer
(with retries until the deadline: its peer may start later), runs the TLS handshake,
checks the peer's certificate names that peer, and sends its hello."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time

from smc_hmm.errors import (
    AuthenticationError,
    PeerDisconnectedError,
    PeerTimeoutError,
    TransportError,
)
from smc_hmm.transport.tcp.hello import HELLO_VERSION, hello_errors, recv_hello, send_hello
from smc_hmm.transport.tcp.tls import check_identity

__all__ = ["dial"]


def dial(
    name: str,
    peer: str,
    address: tuple[str, int],
    context: ssl.SSLContext | None,
    deadline: float,
):
    """Party ``name``'s authenticated, blocking socket to ``peer`` at ``address``
    (``context``: TLS client context; None: plain TCP)."""
    host, port = address
    last: Exception | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PeerTimeoutError(f"{name}: could not connect to {peer} at {host}:{port}: {last}")
        try:
            raw = socket.create_connection((host, port), timeout=min(remaining, 5.0))
        except OSError as exc:
            last = exc
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            continue
        try:
            return _client_handshake(name, peer, raw, context, deadline)
        except BaseException:
            with contextlib.suppress(OSError):
                raw.close()
            raise


def _client_handshake(
    name: str, peer: str, raw: socket.socket, context: ssl.SSLContext | None, deadline: float
):
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw.settimeout(max(0.001, deadline - time.monotonic()))
    sock = raw
    try:
        if context is not None:
            try:
                sock = context.wrap_socket(raw)
            except ssl.SSLError as exc:
                raise AuthenticationError(
                    f"{name}: TLS handshake with {peer} failed: {exc}"
                ) from exc
            try:
                check_identity(sock, peer)
            except AuthenticationError as exc:
                raise AuthenticationError(f"{name}: refusing {peer}: {exc}") from None
        with hello_errors(name, peer):
            send_hello(sock, {"v": HELLO_VERSION, "from": name, "to": peer})
            reply = recv_hello(sock)
        if reply.get("ok") is not True:
            raise AuthenticationError(
                f"{name}: {peer} refused the connection: {reply.get('reason')!r}"
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
            raise PeerTimeoutError(f"{name}: set-up with {peer} timed out") from exc
        if isinstance(exc, OSError):
            raise PeerDisconnectedError(
                f"{name}: connection to {peer} failed during set-up: {exc}"
            ) from exc
        raise
