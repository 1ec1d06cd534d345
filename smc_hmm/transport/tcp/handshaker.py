"""One non-blocking handshaker for every listener: a party's (:mod:`.listener`) and a serving
party's front door (:mod:`smc_hmm.runtime.serve.frontdoor`).

Connections that never finish their TLS handshake or hello (a port scanner, a silent
socket, an attacker that keeps reconnecting) must not hold up the peer that does speak.
The :class:`Handshaker` accepts on a non-blocking listener and advances every accepted
connection's TLS handshake and hello as its socket becomes ready, all on one selector in
the caller's thread: no connection holds a thread, and none is ever waited for.

* Each connection has ``timeout`` seconds from its arrival to finish; past it, it is
  closed (oldest first).
* At most ``max_pending`` connections are in flight, at most ``max_pending_per_address``
  from one source address; a connection beyond either cap closes the *oldest* pending
  connection of its own address, or of the address with the most pending connections.
* A listener decides what happens to each connection through its
  :class:`HandshakeHandler`: whether an address may connect at all (before any TLS work),
  what to do with a complete hello (the socket is the handler's from then on), with a
  failed handshake or hello (a typed error), and it is told of every connection the
  handshaker dropped.

Without a TLS context the hello runs over plain TCP (trusted loopback only).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import ssl
import time

from smc_hmm.errors import PeerDisconnectedError, SmcHmmError, TransportError
from smc_hmm.transport.tcp.hello import HEADER_BYTES, decode_hello, hello_length

__all__ = ["Handshake", "HandshakeHandler", "Handshaker"]

log = logging.getLogger("smc_hmm.transport.tcp")

#: connections accepted per readiness of the listener before the pending ones advance
ACCEPT_BATCH = 64


class Handshake:
    """An accepted connection whose TLS handshake or hello has not finished."""

    __slots__ = ("sock", "address", "where", "deadline", "stage", "buf")

    def __init__(self, sock, address: str, where: str, deadline: float, stage: str):
        self.sock = sock  # non-blocking: a TLS socket (handshake not done) or a plain one
        self.address = address
        self.where = where
        self.deadline = deadline
        self.stage = stage  # "TLS handshake", then "hello"
        self.buf = bytearray()


class HandshakeHandler:
    """What a listener does with its handshaker's connections (called in its thread)."""

    def allow(self, address: str) -> bool:
        """May a new connection of ``address`` start its handshake?  If not it is closed
        on arrival, before any TLS work."""
        return True

    def hello(self, handshake: Handshake, hello: dict) -> None:
        """``handshake``'s hello is complete; its socket is the handler's now."""
        raise NotImplementedError

    def failed(self, handshake: Handshake, error: Exception) -> None:
        """The TLS handshake or the hello failed (``handshake.stage`` says which), with a
        transport, TLS or authentication error; the socket is the handler's now."""
        with contextlib.suppress(OSError):
            handshake.sock.close()

    def dropped(self, handshake: Handshake, reason: str) -> None:
        """The handshaker closed ``handshake`` (its deadline, a cap, an internal error)."""

    def accept_failed(self, error: OSError) -> None:
        """``accept`` failed (not for want of a connection)."""
        raise TransportError(f"accept failed: {error}") from error


class Handshaker:
    """Accept on ``listener`` and run the TLS handshakes (``context``; None: plain TCP)
    and hellos of the accepted connections without blocking; see the module docstring.
    The caller calls :meth:`step` in a loop and :meth:`close` when done (the listener
    stays the caller's)."""

    def __init__(
        self,
        listener: socket.socket,
        context: ssl.SSLContext | None,
        handler: HandshakeHandler,
        *,
        timeout: float,
        max_pending: int,
        max_pending_per_address: int | None = None,
    ):
        self.listener = listener
        self.context = context
        self.handler = handler
        self.timeout = float(timeout)
        self.max_pending = int(max_pending)
        self.max_per_address = int(max_pending_per_address or max_pending)
        #: pending connections, oldest first, overall and per source address
        self._pending: dict[Handshake, None] = {}
        self._per_address: dict[str, dict[Handshake, None]] = {}
        listener.setblocking(False)  # a connection reset between select and accept
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, selectors.EVENT_READ, None)

    def __len__(self) -> int:
        """Connections accepted whose handshake or hello has not finished."""
        return len(self._pending)

    def step(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds (less if a pending connection's deadline comes
        first) for ready sockets; accept, advance, and close connections past their
        deadline.  An unexpected error drops its connection, never the listener."""
        if self._pending:
            first = next(iter(self._pending))
            timeout = min(timeout, first.deadline - time.monotonic())
        for key, _ in self._sel.select(max(0.0, timeout)):
            if key.data is None:
                self._accept_ready()
            elif key.data in self._pending:
                try:
                    self._advance(key.data)
                except Exception:  # one connection never shuts the listener
                    log.exception("unexpected error in the handshake of %s", key.data.where)
                    self.drop(key.data, "internal error")
        self._expire()

    def close(self) -> None:
        """Close every pending connection (nobody waits for them now) and the selector."""
        for handshake in list(self._pending):
            self._forget(handshake)
            with contextlib.suppress(OSError):
                handshake.sock.close()
        self._sel.close()

    # -- accepting ---------------------------------------------------------------------------

    def _accept_ready(self) -> None:
        for _ in range(ACCEPT_BATCH):  # then let the pending handshakes advance
            try:
                raw, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError, TimeoutError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE) and self._pending:
                    # out of descriptors: the oldest pending connection makes room
                    self.drop(next(iter(self._pending)), f"out of file descriptors: {exc}")
                    continue
                self.handler.accept_failed(exc)
                return
            if not self.handler.allow(addr[0]):
                with contextlib.suppress(OSError):
                    raw.close()
                continue
            self._start(raw, addr)

    def _start(self, raw, addr) -> None:
        """Enforce the pending caps (closing the oldest of the heaviest address), then start
        the TLS handshake of ``raw`` without blocking."""
        address = addr[0]
        same = self._per_address.get(address)
        if same and len(same) >= self.max_per_address:
            self.drop(next(iter(same)), "max_pending_per_address reached")
        elif len(self._pending) >= self.max_pending:
            heaviest = max(self._per_address.values(), key=len)
            self.drop(next(iter(heaviest)), "max_pending reached")
        stage = "hello" if self.context is None else "TLS handshake"
        handshake = Handshake(
            raw, address, f"{addr[0]}:{addr[1]}", time.monotonic() + self.timeout, stage
        )
        try:
            raw.setblocking(False)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                handshake.sock = self.context.wrap_socket(
                    raw, server_side=True, do_handshake_on_connect=False
                )
        except (OSError, ssl.SSLError) as exc:
            with contextlib.suppress(OSError):
                raw.close()
            handshake.stage = "TLS set-up"
            self.handler.dropped(handshake, str(exc))
            return
        self._pending[handshake] = None
        self._per_address.setdefault(address, {})[handshake] = None
        self._sel.register(handshake.sock, selectors.EVENT_READ, handshake)

    # -- advancing ---------------------------------------------------------------------------

    def _forget(self, handshake: Handshake) -> None:
        """No longer pending (complete, failed or dropped)."""
        self._pending.pop(handshake, None)
        same = self._per_address.get(handshake.address)
        if same is not None:
            same.pop(handshake, None)
            if not same:
                del self._per_address[handshake.address]
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(handshake.sock)

    def drop(self, handshake: Handshake, reason: str) -> None:
        """Close a pending connection and tell the handler why."""
        self._forget(handshake)
        with contextlib.suppress(OSError):
            handshake.sock.close()
        self.handler.dropped(handshake, reason)

    def _expire(self) -> None:
        """Close pending connections past their deadline (oldest first: deadlines follow
        the order of arrival)."""
        now = time.monotonic()
        while self._pending:
            handshake = next(iter(self._pending))
            if handshake.deadline > now:
                return
            self.drop(handshake, f"not authenticated within handshake_timeout = {self.timeout:g} s")

    def _advance(self, handshake: Handshake) -> None:
        """Advance one pending connection as far as its socket allows."""
        try:
            if handshake.stage == "TLS handshake":
                handshake.sock.do_handshake()
                handshake.stage = "hello"
            hello = read_hello(handshake)
        except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
            self._sel.modify(handshake.sock, selectors.EVENT_READ, handshake)
            return
        except ssl.SSLWantWriteError:
            self._sel.modify(handshake.sock, selectors.EVENT_WRITE, handshake)
            return
        except (OSError, SmcHmmError) as exc:  # ssl.SSLError is an OSError
            self._forget(handshake)
            self.handler.failed(handshake, exc)
            return
        self._forget(handshake)
        self.handler.hello(handshake, hello)


def read_hello(handshake: Handshake) -> dict:
    """The hello once it is complete (SSLWantReadError or BlockingIOError until then);
    reads no further."""
    buf = handshake.buf
    while True:
        if len(buf) < HEADER_BYTES:
            need = HEADER_BYTES - len(buf)
        else:
            need = HEADER_BYTES + hello_length(buf[:HEADER_BYTES]) - len(buf)
            if need == 0:
                return decode_hello(bytes(buf[HEADER_BYTES:]))
        data = handshake.sock.recv(need)
        if not data:
            raise PeerDisconnectedError(f"connection closed during the {handshake.stage}")
        buf += data
