"""Bob: the server.  Private state: his inputs and his HMMs."""

from __future__ import annotations

from parties.base import Party, as_vector


class Bob(Party):
    kind = "bob"

    def __init__(self, name: str = "bob", vector=None, *, models=None, **kwargs):
        inputs = {"vector": as_vector(vector), "models": None if models is None else list(models)}
        super().__init__(name, inputs=inputs, **kwargs)
