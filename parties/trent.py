"""Trent: the semi-honest relay / curator.  He never holds a decryption key."""

from __future__ import annotations

import numpy as np

from parties.base import Party
from protocols import secure_sum
from smc_hmm.errors import InvalidInputError


class Trent(Party):
    kind = "trent"

    def __init__(self, name: str = "trent", vector=None, **kwargs):
        if kwargs.get("keypair") is not None:
            raise InvalidInputError("Trent relays ciphertexts and must not hold a key pair")
        super().__init__(name, **kwargs)
        self._vector = None if vector is None else np.asarray(vector, dtype=np.float64)

    def protocols(self):
        return {secure_sum.NAME: self.run_secure_sum}

    def run_secure_sum(self, ctx, params: secure_sum.Params):
        return secure_sum.trent(ctx, params, self._vector)
