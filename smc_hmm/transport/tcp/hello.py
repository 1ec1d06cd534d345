"""The set-up exchange of a TCP connection: one small length-prefixed msgpack frame each
way inside the TLS session (the dialer's hello ``{"v", "from", "to"}``, the listener's
reply ``{"ok": true}`` or a refusal with a reason), and the framing constants that the
transport's frames share."""

from __future__ import annotations

import contextlib
import ssl

import msgpack

from smc_hmm.errors import AuthenticationError, PeerDisconnectedError

__all__ = [
    "HEADER_BYTES",
    "HELLO_MAX_BYTES",
    "HELLO_VERSION",
    "MAX_LENGTH",
    "decode_hello",
    "hello_errors",
    "hello_length",
    "recv_hello",
    "send_hello",
    "send_refusal",
]

HEADER_BYTES = 4
MAX_LENGTH = 2 ** (8 * HEADER_BYTES) - 1
HELLO_VERSION = 1
HELLO_MAX_BYTES = 4096


def _read_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise PeerDisconnectedError("connection closed during the hello")
        buf += chunk
    return bytes(buf)


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


def send_hello(sock, obj: dict) -> None:
    """One small msgpack frame of the set-up (hello or its reply), blocking."""
    body = msgpack.packb(obj, use_bin_type=True)
    sock.sendall(len(body).to_bytes(HEADER_BYTES, "big") + body)


def recv_hello(sock) -> dict:
    """The peer's hello or reply (at most 4096 bytes; AuthenticationError if malformed)."""
    length = hello_length(_read_exact(sock, HEADER_BYTES))
    return decode_hello(_read_exact(sock, length))


def send_refusal(sock, reply: dict) -> None:
    """Refuse with ``reply`` (a short write that never waits for the peer), then close."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        send_hello(sock, reply)
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def hello_errors(name: str, peer: str):
    """The dialling party ``name``'s hello exchange with ``peer``: a TLS error or a closed
    connection in it becomes the transport error it most likely means."""
    try:
        yield
    except ssl.SSLError as exc:
        # TLS 1.3: a rejected client certificate surfaces after the handshake, as the
        # peer's alert or, where the alert is lost, as a closed connection
        said = (
            "it closed the connection without an alert"
            if isinstance(exc, ssl.SSLEOFError)
            else f"TLS said: {exc.reason or exc}"
        )
        raise AuthenticationError(
            f"{name}: {peer} refused our certificate (is it issued by the CA {peer} trusts?) "
            f"-- {said}"
        ) from exc
    except ConnectionError as exc:
        raise PeerDisconnectedError(
            f"{name}: {peer} closed the connection during the hello; most likely it refused "
            f"our certificate (is it issued by the CA {peer} trusts?): {exc}"
        ) from exc
