"""TCP transport between OS processes, with mutual TLS; the code is in :mod:`.transport`
for now (issue #35 splits it by concern)."""

from smc_hmm.transport.tcp.transport import (
    HANDSHAKE_TIMEOUT,
    HEADER_BYTES,
    HELLO_MAX_BYTES,
    HELLO_VERSION,
    MAX_LENGTH,
    MAX_PENDING_HANDSHAKES,
    ConnectionBudget,
    TcpNetwork,
    TcpTransport,
    TlsConfig,
    decode_hello,
    free_loopback_ports,
    hello_errors,
    hello_length,
    peer_identity,
    recv_hello,
    send_hello,
    tcp_transport,
)

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "HEADER_BYTES",
    "HELLO_MAX_BYTES",
    "HELLO_VERSION",
    "MAX_LENGTH",
    "MAX_PENDING_HANDSHAKES",
    "ConnectionBudget",
    "TcpNetwork",
    "TcpTransport",
    "TlsConfig",
    "decode_hello",
    "free_loopback_ports",
    "hello_errors",
    "hello_length",
    "peer_identity",
    "recv_hello",
    "send_hello",
    "tcp_transport",
]
