"""Alice: the client and key holder.  Private state: her key pair and her inputs."""

from __future__ import annotations

import warnings

import numpy as np

from parties.base import Party
from protocols import forward, secure_sum
from smc_hmm.crypto import DEFAULT_KEY_BITS, generate_keypair
from smc_hmm.errors import InsecureKeyWarning, InvalidInputError


class Alice(Party):
    kind = "alice"

    def __init__(
        self,
        name: str = "alice",
        vector=None,
        *,
        observations=None,
        key_bits: int = DEFAULT_KEY_BITS,
        insecure: bool = False,
        **kwargs,
    ):
        super().__init__(name, **kwargs)
        self._vector = None if vector is None else np.asarray(vector, dtype=np.float64)
        #: an observation sequence: symbols (T,) or feature frames (T, d)
        self._observations = None if observations is None else np.asarray(observations)
        self.key_bits = key_bits
        self.insecure = insecure

    def ensure_keypair(self):
        """Generate the key pair on first use (``insecure`` allows < 2048 bits, with a warning)."""
        if self.keypair is None:
            with warnings.catch_warnings():
                if self.insecure:
                    warnings.simplefilter("ignore", InsecureKeyWarning)
                self.keypair = generate_keypair(self.key_bits, insecure=self.insecure, rng=self.rng)
        return self.keypair

    def protocols(self):
        return {secure_sum.NAME: self.run_secure_sum, forward.NAME: self.run_forward}

    def run_secure_sum(self, ctx, params: secure_sum.Params):
        return secure_sum.alice(ctx, self._vector, params)

    def run_forward(self, ctx, params: forward.ForwardParams):
        if self._observations is None:
            raise InvalidInputError(f"{self.name} has no observation sequence")
        return forward.alice(ctx, self._observations, params)
