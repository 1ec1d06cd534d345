"""Transports between parties: Transport (bytes) / Channel (typed, tagged messages) / Network.

Implementations: :mod:`~smc_hmm.transport.local` (in-process),
:mod:`~smc_hmm.transport.tcp` (TCP with mutual TLS),
:mod:`~smc_hmm.transport.simulated` (latency and bandwidth model) and
:mod:`~smc_hmm.transport.faults` (fault injection for tests).  The contract a
new transport must meet is in :mod:`smc_hmm.transport.base`.
"""

from smc_hmm.transport.base import Channel, ChannelObserver, Network, Transport
from smc_hmm.transport.faults import FaultyTransport, InjectedFaultError
from smc_hmm.transport.local import LocalNetwork, LocalTransport
from smc_hmm.transport.simulated import SimulatedNetwork, SimulatedTransport
from smc_hmm.transport.tcp import (
    TcpNetwork,
    TcpTransport,
    TlsConfig,
    free_loopback_ports,
    tcp_transport,
)

__all__ = [
    "Channel",
    "ChannelObserver",
    "FaultyTransport",
    "InjectedFaultError",
    "LocalNetwork",
    "LocalTransport",
    "Network",
    "SimulatedNetwork",
    "SimulatedTransport",
    "TcpNetwork",
    "TcpTransport",
    "TlsConfig",
    "Transport",
    "free_loopback_ports",
    "tcp_transport",
]
