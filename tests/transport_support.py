"""What the transport tests share outside fixtures: the parties of their PKI."""

from __future__ import annotations

#: the parties the transport tests' certificates are issued to (the ``certs`` and ``tls``
#: fixtures), in the order the fault-injection ring passes its token
PARTIES = ["alice", "bob", "trent"]
