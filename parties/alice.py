"""Alice: the client.  Private state: her inputs and, when a role needs it, her key pair."""

from __future__ import annotations

import numpy as np

from parties.base import Party, as_vector


class Alice(Party):
    kind = "alice"

    def __init__(self, name: str = "alice", vector=None, *, observations=None, **kwargs):
        inputs = {
            "vector": as_vector(vector),
            "observations": None if observations is None else np.asarray(observations),
        }
        super().__init__(name, inputs=inputs, **kwargs)
