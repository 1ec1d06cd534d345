"""Trent: the semi-honest relay / curator.  He never holds a decryption key."""

from __future__ import annotations

from parties.base import Party, as_vector, merge_inputs
from smc_hmm.errors import InvalidInputError


class Trent(Party):
    kind = "trent"

    def __init__(self, name: str = "trent", vector=None, *, inputs=None, **kwargs):
        if kwargs.get("keypair") is not None:
            raise InvalidInputError("Trent relays ciphertexts and must not hold a key pair")
        named = {"vector": as_vector(vector)}
        super().__init__(name, inputs=merge_inputs(named, inputs), **kwargs)

    def ensure_keypair(self):
        raise InvalidInputError("Trent relays ciphertexts and must not hold a key pair")
