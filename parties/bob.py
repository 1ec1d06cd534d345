"""Bob: the server.  Private state: his inputs and his HMMs."""

from __future__ import annotations

from parties.base import Party, as_vector, merge_inputs


class Bob(Party):
    """``Bob(models=[...])`` or, for any protocol, ``Bob(inputs={"models": (hmms,
    labels)})`` (the role's input name, the value as the role takes it)."""

    kind = "bob"

    def __init__(self, name: str = "bob", vector=None, *, models=None, inputs=None, **kwargs):
        named = {"vector": as_vector(vector), "models": None if models is None else list(models)}
        super().__init__(name, inputs=merge_inputs(named, inputs), **kwargs)
