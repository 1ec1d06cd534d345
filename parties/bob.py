"""Bob: the server.  Private state: his inputs (later: his HMMs)."""

from __future__ import annotations

import numpy as np

from parties.base import Party
from protocols import secure_sum


class Bob(Party):
    kind = "bob"

    def __init__(self, name: str = "bob", vector=None, **kwargs):
        super().__init__(name, **kwargs)
        self._vector = None if vector is None else np.asarray(vector, dtype=np.float64)

    def protocols(self):
        return {secure_sum.NAME: self.run_secure_sum}

    def run_secure_sum(self, ctx, params: secure_sum.Params):
        return secure_sum.contributor(ctx, self._vector, params)
