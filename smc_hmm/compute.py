"""Executors for heavy homomorphic work.

:class:`Compute` runs batches of pure functions either inline, on a local
process pool (the default for parallel work: Python big-integer arithmetic
holds the GIL), or on any ``concurrent.futures.Executor`` -- for example
``distributed.Client(...).get_executor()`` to spread Bob's work over a Dask
cluster.  The calling process always computes the first chunk itself while
the executor runs the others, so ``Compute.processes(2)`` starts one worker
process and keeps both cores busy without a third process competing.  Work items are plain integers and lists, so they travel to local
worker processes by the executor's own mechanism; nothing here crosses the
protocol network.
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
        """Parallelism ``workers`` (default: all cores): the caller plus workers - 1 processes."""
        workers = workers or os.cpu_count() or 1
        if workers == 1:
            return cls()
        return cls(ProcessPoolExecutor(workers - 1), workers=workers, owns_executor=True)

    @classmethod
    def from_executor(cls, executor: Executor, workers: int) -> Compute:
        """Any Executor, e.g. a Dask client's ``get_executor()``; ``workers`` sets chunking
        (the caller counts as one of them)."""
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
        """``[fn(*args) for args in zip(*iterables)]``: the first item runs in the caller."""
        calls = list(zip(*iterables))
        if self.executor is None or len(calls) < 2:
            return [fn(*args) for args in calls]
        futures = [self.executor.submit(fn, *args) for args in calls[1:]]
        try:
            first = fn(*calls[0])
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
        return [first, *(fut.result() for fut in futures)]

    def warm_up(self) -> None:
        """Start the worker processes now rather than on the first batch."""
        if self.executor is not None:
            list(self.executor.map(abs, range(self.workers)))

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
