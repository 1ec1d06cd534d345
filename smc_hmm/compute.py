"""Executors for heavy homomorphic work.

:class:`Compute` cuts a batch into ``workers`` lanes.  The calling process
computes the first lane itself while an executor computes the others: a local
process pool (the default for parallel work, since Python big-integer
arithmetic holds the GIL) or any ``concurrent.futures.Executor`` -- for example
``distributed.Client(...).get_executor()`` to spread Bob's work over a Dask
cluster.

Local worker processes are started by a fork server rather than forked from
the caller, because forking a process that runs transport threads is unsafe.
As with any ``spawn``/``forkserver`` pool, a script that creates one must
guard its entry point with ``if __name__ == "__main__":``.

A serving party (``smc-hmm serve``) takes one :meth:`Compute.session` view per
protocol session: the local lanes are shared as they are, while the Dask backend
(:mod:`smc_hmm.compute_dask`) gives each session its own cache of inputs scattered
once to the workers and released when the session ends.

Work items are plain integers, lists and
:class:`~smc_hmm.crypto.bulk.PackedInts`, so they travel to local worker
processes by the executor's own mechanism; nothing here crosses the protocol
network.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor

from smc_hmm.errors import ComputeError, InvalidInputError
from smc_hmm.options import check_workers

#: what worker processes import at start: the Paillier layer whose tasks they run
DEFAULT_PRELOAD = ("smc_hmm.crypto",)

_BROKEN_HINT = (
    "a worker process died or could not start; if this is a script, guard its "
    'entry point with `if __name__ == "__main__":` (worker processes start '
    "from a fork server)"
)


class Compute:
    """Where batched work runs: ``Compute()`` is inline, ``Compute.processes()`` parallel.

    ``workers`` is the number of lanes a batch is cut into; the caller computes
    one of them, the executor the rest.
    """

    def __init__(
        self, executor: Executor | None = None, *, workers: int = 1, owns_executor: bool = False
    ):
        if workers < 1:
            raise InvalidInputError("workers must be >= 1")
        self.executor = executor
        self.workers = workers if executor is not None else 1
        self._owns = owns_executor
        self._preload: tuple[str, ...] = ()

    @classmethod
    def inline(cls) -> Compute:
        return cls()

    @classmethod
    def processes(
        cls, workers: int | None = None, preload: Sequence[str] = DEFAULT_PRELOAD
    ) -> Compute:
        """``workers`` lanes (default: all cores): the caller plus ``workers - 1`` processes.

        ``preload`` names modules the workers import when they start (by name:
        this module depends on no layer above it), so the first batch does not
        pay for the imports.
        """
        workers = (os.cpu_count() or 1) if workers is None else check_workers(workers)
        if workers == 1:
            return cls()
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(preload))
        compute = cls(
            ProcessPoolExecutor(workers - 1, mp_context=context),
            workers=workers,
            owns_executor=True,
        )
        compute._preload = tuple(preload)
        return compute

    @classmethod
    def from_executor(cls, executor: Executor, workers: int) -> Compute:
        """Any Executor, e.g. a Dask client's ``get_executor()``.

        ``workers`` lanes: the caller computes one, the executor ``workers - 1``
        (so pass the executor's worker count plus one).
        """
        if workers < 2:
            raise InvalidInputError("an executor needs workers >= 2 (the caller is one lane)")
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
        return [items[i : i + size] for i in range(0, len(items), size)]

    def map(self, fn: Callable, *iterables: Iterable, local: Callable | None = None) -> list:
        """``[fn(*args) for args in zip(*iterables)]``; the caller computes the first item.

        ``local`` replaces ``fn`` for the caller's own item, e.g. to use state
        that only this process has (an encryption table, a randomizer pool).
        """
        calls = list(zip(*iterables))
        if not calls:
            return []
        local = local or fn
        if self.executor is None or len(calls) == 1:
            return [local(*calls[0])] + [fn(*args) for args in calls[1:]]
        try:
            futures = [self.executor.submit(fn, *args) for args in calls[1:]]
        except BrokenExecutor as exc:
            raise ComputeError(_BROKEN_HINT) from exc
        try:
            first = local(*calls[0])
            return [first] + [f.result() for f in futures]
        except BrokenExecutor as exc:
            raise ComputeError(_BROKEN_HINT) from exc
        finally:
            for f in futures:
                f.cancel()

    def session(self) -> contextlib.AbstractContextManager[Compute]:
        """``with compute.session() as c:`` the executor for one protocol session.

        Here the same lanes (closing the view closes nothing); a backend with
        per-session state (the Dask backend's resident inputs) overrides it.
        """
        return contextlib.nullcontext(self)

    def warm_up(self) -> None:
        """Start the workers and import the preloaded modules there now, not in the first batch."""
        if self.executor is not None:
            try:
                count = max(1, self.workers - 1)
                list(self.executor.map(_import_modules, [self._preload] * count))
            except BrokenExecutor as exc:
                raise ComputeError(_BROKEN_HINT) from exc

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


def _import_modules(names: Sequence[str]) -> None:
    """Worker warm-up: the first task would otherwise pay for importing numpy and friends."""
    for name in names:
        importlib.import_module(name)
