"""Parties: Alice (client, key holder), Bob (server), Trent (key-less relay), DataOwner.

Each party object owns its private state (inputs, private key) and calls its
protocol roles; :func:`simulate` runs a set of party objects in-process and
:func:`role_from_config` builds one party from a ``parties.toml`` file for
:func:`smc_hmm.runtime.run_party`.
"""

from __future__ import annotations

from parties.alice import Alice
from parties.base import Party, load_vector
from parties.bob import Bob
from parties.config import KINDS, PARAMS, party_from_config, protocol_params, role_from_config
from parties.data_owner import DataOwner
from parties.run import simulate
from parties.trent import Trent

__all__ = [
    "KINDS",
    "PARAMS",
    "Alice",
    "Bob",
    "DataOwner",
    "Party",
    "Trent",
    "load_vector",
    "party_from_config",
    "protocol_params",
    "role_from_config",
    "simulate",
]
