"""The one result type of a run, in-process or as OS processes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from smc_hmm.cost import CostReport

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """Every party's output and the merged cost report of one successful run.

    ``views``: per party, (peer, tag, payload) of every message it received
    (in-process runs with ``record_views=True``).  ``returncodes`` and
    ``pids``: per party, for runs as OS processes.
    """

    outputs: dict[str, Any]
    cost: CostReport
    elapsed: float
    views: dict[str, list[tuple[str, str, Any]]] | None = None
    returncodes: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, party: str):
        return self.outputs[party]

    def to_dict(self) -> dict:
        """JSON-ready outputs, elapsed time, process details and the merged cost."""
        out = {"outputs": self.outputs, "elapsed": self.elapsed, "cost": self.cost.to_dict()}
        if self.pids:
            out.update(returncodes=self.returncodes, pids=self.pids)
        return out
