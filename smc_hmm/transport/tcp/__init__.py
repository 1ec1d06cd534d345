"""TCP transport between OS processes, with mutual TLS, by concern:

* :mod:`.tls`: a party's TLS configuration and what a peer's certificate names;
* :mod:`.hello`: the set-up exchange (hello and reply) and the frame header;
* :mod:`.connection`: one connection's I/O thread, framing and bounded queues
  (:class:`ConnectionBudget`, backpressure);
* :mod:`.handshaker`: the one non-blocking handshaker of every listener (a party's and a
  serving party's front door): TLS handshakes and hellos on one selector, each within a
  deadline, a bounded number in flight;
* :mod:`.listener`: a party's listener (accepting its lower-named peers);
* :mod:`.dial`: a party's connection to a higher-named peer;
* :mod:`.transport`: :class:`TcpTransport`, :func:`tcp_transport`, :class:`TcpNetwork`.

The names below are this package's interface; import them from ``smc_hmm.transport.tcp``.
"""

from smc_hmm.transport.tcp.connection import ConnectionBudget
from smc_hmm.transport.tcp.handshaker import Handshake, HandshakeHandler, Handshaker
from smc_hmm.transport.tcp.hello import (
    HEADER_BYTES,
    HELLO_MAX_BYTES,
    HELLO_VERSION,
    MAX_LENGTH,
    decode_hello,
    hello_errors,
    hello_length,
    recv_hello,
    send_hello,
    send_refusal,
)
from smc_hmm.transport.tcp.listener import (
    HANDSHAKE_TIMEOUT,
    MAX_PENDING_HANDSHAKES,
    accept_peers,
    bind_listener,
)
from smc_hmm.transport.tcp.tls import TlsConfig, peer_identity
from smc_hmm.transport.tcp.transport import (
    TcpNetwork,
    TcpTransport,
    free_loopback_ports,
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
    "Handshake",
    "HandshakeHandler",
    "Handshaker",
    "TcpNetwork",
    "TcpTransport",
    "TlsConfig",
    "accept_peers",
    "bind_listener",
    "decode_hello",
    "free_loopback_ports",
    "hello_errors",
    "hello_length",
    "peer_identity",
    "recv_hello",
    "send_hello",
    "send_refusal",
    "tcp_transport",
]
