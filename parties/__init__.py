"""Parties: Alice (client), Bob (server), Trent (key-less relay), DataOwner.

Each party object owns its private state (inputs by name, its key pair when a
role needs one) and plays the role a protocol's descriptor assigns it;
:func:`simulate` runs a set of party objects in-process.  Networked runs
build parties from ``parties.toml`` in :mod:`smc_hmm.runtime` directly.
"""

from __future__ import annotations

from parties.alice import Alice
from parties.base import Party
from parties.bob import Bob
from parties.data_owner import DataOwner
from parties.run import simulate
from parties.trent import Trent

__all__ = ["Alice", "Bob", "DataOwner", "Party", "Trent", "simulate"]
