"""A party's listener: accept the lower-named peers of a mesh (:mod:`.transport`).

The accepted connections' TLS handshakes and hellos run on the shared non-blocking
:class:`~smc_hmm.transport.tcp.handshaker.Handshaker` (``MAX_PENDING_HANDSHAKES`` in
flight, ``HANDSHAKE_TIMEOUT`` seconds each), so a connection that stays silent (or many
that keep reconnecting) delays no other: the peer that does speak gets in at once.  The
first authenticated connection of a missing peer wins; a later one claiming the same peer
is refused with a reason.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import time

from smc_hmm.errors import AuthenticationError, EndpointError, PeerTimeoutError, TransportError
from smc_hmm.transport.tcp.handshaker import Handshake, HandshakeHandler, Handshaker
from smc_hmm.transport.tcp.hello import HELLO_VERSION, send_hello, send_refusal
from smc_hmm.transport.tcp.tls import check_identity

__all__ = ["HANDSHAKE_TIMEOUT", "MAX_PENDING_HANDSHAKES", "accept_peers", "bind_listener"]

log = logging.getLogger("smc_hmm.transport.tcp")

#: seconds an accepted connection has for its TLS handshake and hello (party listeners)
HANDSHAKE_TIMEOUT = 10.0
#: a party listener's handshakes in flight at once; a new connection beyond drops the oldest
MAX_PENDING_HANDSHAKES = 32


def bind_listener(name: str, host: str, port: int, backlog: int) -> socket.socket:
    """A listening socket of party ``name`` on ``host:port`` (EndpointError if it cannot)."""
    lst = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        lst.bind((host, port))
        lst.listen(backlog)
    except OSError as exc:
        lst.close()
        raise EndpointError(f"{name}: cannot listen on {host}:{port}: {exc}") from exc
    return lst


class PeerGate(HandshakeHandler):
    """The missing peers of party ``name``'s listener: the first authenticated connection
    of each is admitted (its hello answered ``ok``, its socket put in ``sockets``); every
    other connection is refused, and its reason kept for the error at the deadline."""

    def __init__(self, name: str, missing: set[str], sockets: dict):
        self.name, self.missing, self.sockets = name, missing, sockets
        self.refusals: list[str] = []

    def hello(self, handshake: Handshake, hello: dict) -> None:
        sock, claimed = handshake.sock, hello.get("from")
        reason = None
        if hello.get("v") != HELLO_VERSION or hello.get("to") != self.name:
            reason = f"bad hello {hello!r}"
        elif type(claimed) is not str or claimed not in self.missing:
            reason = f"unexpected or duplicate party {claimed!r}"
        else:
            try:
                check_identity(sock, claimed)
            except AuthenticationError as exc:
                reason = str(exc)
        if reason is not None:
            self._refused(handshake, reason)
            send_refusal(sock, {"ok": False, "reason": reason})
            return
        try:
            sock.settimeout(max(0.001, handshake.deadline - time.monotonic()))
            send_hello(sock, {"ok": True})
            sock.settimeout(None)
        except OSError as exc:
            self.failed(handshake, exc)
            return
        self.missing.discard(claimed)
        self.sockets[claimed] = sock

    def failed(self, handshake: Handshake, error: Exception) -> None:
        self._refused(handshake, f"{type(error).__name__}: {error}")
        with contextlib.suppress(OSError):
            handshake.sock.close()

    def dropped(self, handshake: Handshake, reason: str) -> None:
        self._refused(handshake, f"dropped during its {handshake.stage}: {reason}")

    def accept_failed(self, error: OSError) -> None:
        raise TransportError(f"{self.name}: accept failed: {error}") from error

    def _refused(self, handshake: Handshake, reason: str) -> None:
        self.refusals.append(f"{handshake.where}: {reason}")
        log.warning("%s: refused a connection from %s: %s", self.name, handshake.where, reason)

    def deadline_error(self) -> TransportError:
        """Why the listener gave up: the refusals if there were any, else a timeout."""
        if self.refusals:
            return AuthenticationError(
                f"{self.name}: refused connections ({'; '.join(self.refusals)}); "
                f"still missing {sorted(self.missing)}"
            )
        return PeerTimeoutError(
            f"{self.name}: {sorted(self.missing)} did not connect within the deadline"
        )


def accept_peers(
    name: str,
    listener: socket.socket,
    context: ssl.SSLContext | None,
    missing: set[str],
    deadline: float,
    sockets: dict,
) -> None:
    """Accept on ``listener`` until every peer in ``missing`` is in ``sockets`` (its
    authenticated, blocking socket), or raise at ``deadline``: AuthenticationError if
    connections were refused, else PeerTimeoutError.  Connections still in their handshake
    when it returns are closed."""
    gate = PeerGate(name, missing, sockets)
    door = Handshaker(
        listener,
        context,
        gate,
        timeout=HANDSHAKE_TIMEOUT,
        max_pending=MAX_PENDING_HANDSHAKES,
    )
    try:
        while gate.missing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise gate.deadline_error()
            door.step(remaining)
    finally:
        door.close()
