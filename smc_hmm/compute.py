"""Executors for heavy homomorphic work.

:class:`Compute` runs batches of pure functions either inline, on a local
process pool (the default for parallel work: Python big-integer arithmetic
holds the GIL), or on any ``concurrent.futures.Executor`` -- for example
``distributed.Client(...).get_executor()`` to spread Bob's work over a Dask
cluster.  The caller waits while the workers compute: computing a chunk in
the caller as well was measured slower, because the executor's feeder thread
then waits for the GIL before it can hand the other chunks to the workers.
Work items are plain integers and lists, so they travel to local worker
processes by the executor's own mechanism; nothing here crosses the protocol
network.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor

from smc_hmm.errors import InvalidInputError


class Compute:
    """Where batched work runs. ``Compute()`` is inline; ``Compute.processes()`` is parallel."""

    def __init__(self, executor: Executor | None = None, *, workers: int = 1,
                 owns_executor: bool = False):
        if workers < 1:
            raise InvalidInputError("workers must be >= 1")
        self.executor = executor
        self.workers = workers if executor is not None else 1
        self._owns = owns_executor

    @classmethod
    def inline(cls) -> Compute:
        return cls()

    @classmethod
    def processes(cls, workers: int | None = None) -> Compute:
        """A local process pool with ``workers`` processes (default: all cores)."""
        workers = workers or os.cpu_count() or 1
        if workers == 1:
            return cls()
        return cls(ProcessPoolExecutor(workers), workers=workers, owns_executor=True)

    @classmethod
    def from_executor(cls, executor: Executor, workers: int) -> Compute:
        """Any Executor, e.g. a Dask client's ``get_executor()``; ``workers`` sets chunking."""
        return cls(executor, workers=workers)

    @property
    def parallel(self) -> bool:
        return self.executor is not None and self.workers > 1

    def chunks(self, items: Sequence, min_chunk: int = 1) -> list[Sequence]:
        """Split ``items`` into at most ``workers`` contiguous chunks of >= min_chunk."""
        if not items:
            return []
        count = max(1, min(self.workers, len(items) // max(1, min_chunk)))
        size = -(-len(items) // count)
        return [items[i:i + size] for i in range(0, len(items), size)]

    def map(self, fn: Callable, *iterables: Iterable) -> list:
        """``[fn(*args) for args in zip(*iterables)]``, on the executor when there is one."""
        if self.executor is None:
            return list(map(fn, *iterables))
        return list(self.executor.map(fn, *iterables))

    def warm_up(self) -> None:
        """Start the worker processes now rather than on the first batch."""
        if self.executor is not None:
            self.map(abs, range(self.workers))

    def close(self) -> None:
        if self._owns and self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None

    def __enter__(self) -> Compute:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Compute(inline)" if self.executor is None else f"Compute(workers={self.workers})"
