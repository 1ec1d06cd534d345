"""Bob: the server.  Private state: his inputs and his HMMs."""

from __future__ import annotations

import numpy as np

from parties.base import Party
from protocols import forward, secure_sum
from smc_hmm.errors import InvalidInputError


class Bob(Party):
    kind = "bob"

    def __init__(self, name: str = "bob", vector=None, *, models=None, **kwargs):
        super().__init__(name, **kwargs)
        self._vector = None if vector is None else np.asarray(vector, dtype=np.float64)
        #: Bob's private HMMs (all discrete or all Gaussian)
        self._models = None if models is None else list(models)

    def protocols(self):
        return {secure_sum.NAME: self.run_secure_sum, forward.NAME: self.run_forward}

    def run_secure_sum(self, ctx, params: secure_sum.Params):
        return secure_sum.contributor(ctx, self._vector, params)

    def run_forward(self, ctx, params: forward.ForwardParams):
        if not self._models:
            raise InvalidInputError(f"{self.name} holds no HMMs")
        return forward.bob(ctx, self._models, params)
