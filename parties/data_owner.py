"""A data owner: contributes private data to an aggregate (003, 4.1.3)."""

from __future__ import annotations

from parties.base import Party, as_vector, merge_inputs


class DataOwner(Party):
    kind = "data_owner"

    def __init__(self, name: str, vector=None, *, inputs=None, **kwargs):
        named = {"vector": as_vector(vector)}
        super().__init__(name, inputs=merge_inputs(named, inputs), **kwargs)
