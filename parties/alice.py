"""Alice: the client.  Private state: her inputs and, when a role needs it, her key pair."""

from __future__ import annotations

import numpy as np

from parties.base import Party, as_vector, merge_inputs


class Alice(Party):
    """``Alice(vector=...)``, ``Alice(observations=...)`` or, for any protocol,
    ``Alice(inputs={"features": frames})`` (the role's input name)."""

    kind = "alice"

    def __init__(
        self, name: str = "alice", vector=None, *, observations=None, inputs=None, **kwargs
    ):
        named = {
            "vector": as_vector(vector),
            "observations": None if observations is None else np.asarray(observations),
        }
        super().__init__(name, inputs=merge_inputs(named, inputs), **kwargs)
