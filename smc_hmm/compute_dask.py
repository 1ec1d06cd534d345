"""A ``dask.distributed`` cluster behind :class:`~smc_hmm.compute.Compute`.

``DaskCompute.connect("tcp://scheduler:8786")`` (or ``DaskCompute(client)`` for
an existing ``distributed.Client``, e.g. one of a ``LocalCluster``) runs the
executor lanes of every batch -- Bob's linear combinations (multi-exponentiations)
and encryptions -- as tasks on the cluster's workers; the calling process still
computes the first lane itself, as with the local process lanes.  Dask is an
optional extra (``pip install smc-hmm[dask]``): this module imports it lazily.

Scatter once, reuse across calls
--------------------------------
A task argument whose content is at least ``scatter_min_bytes`` bytes (the packed
ciphertexts a linear combination runs against, a group of Bob's weight rows) is
*scattered* to the workers the first time a session sees it -- keyed by a BLAKE2b
digest of its bytes -- and every later task of the same session that passes equal
content gets the resident future instead of a fresh copy.  So within one protocol
session the ciphertexts Alice sent are shipped to the cluster once and stay
resident while every state's weight rows run against them, and Bob's weight rows
(the same at every step of the forward recursion) are shipped once per session.
:meth:`DaskCompute.session` gives one such cache per session; leaving it
releases everything the session scattered.  No protocol code knows about any of
this: the cache sits in :meth:`DaskCompute.map`, which every batch of
:class:`~smc_hmm.crypto.CipherArray` goes through.

Trust
-----
Dask moves task arguments between Bob and his workers with its own (pickle-based)
protocol.  That traffic is Bob-internal: the workers see the ciphertexts Alice
sent and Bob's weights (his private models), so the cluster must be Bob's own,
trusted, and -- across machines -- configured with TLS between scheduler,
workers and client (Dask's ``distributed.comm.tls`` security settings, or a
``distributed.security.Security`` object passed here).  Nothing of it crosses
the protocol network, where only the msgpack wire codec is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterable

from smc_hmm.compute import Compute
from smc_hmm.errors import ComputeError, ConfigError, SmcHmmError

__all__ = ["DaskCompute"]

#: arguments pickling to at least this many bytes are scattered once and reused
SCATTER_MIN_BYTES = 2048


def _distributed():
    try:
        import distributed
    except ImportError as exc:  # an optional extra
        raise ConfigError(
            "a Dask scheduler needs dask.distributed: pip install 'smc-hmm[dask]'"
        ) from exc
    return distributed


class DaskCompute(Compute):
    """Compute lanes on a Dask cluster: the caller plus one lane per worker thread.

    ``workers`` defaults to the cluster's worker threads plus one (the caller).
    ``owns_client``: :meth:`close` closes the client (as :meth:`connect` sets).
    """

    def __init__(
        self,
        client,
        *,
        workers: int | None = None,
        owns_client: bool = False,
        scatter_min_bytes: int = SCATTER_MIN_BYTES,
        _shared: DaskCompute | None = None,
    ):
        if workers is None:
            threads = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
            workers = max(2, threads + 1)
        super().__init__(client, workers=max(2, int(workers)))
        self.client = client
        self._owns_client = owns_client
        self.scatter_min_bytes = int(scatter_min_bytes)
        self._resident: dict[bytes, object] = {}
        self._lock = threading.Lock()
        #: counters for tests and the benchmark: scatters made and reuses served
        self.scattered = 0
        self.reused = 0
        self._parent = _shared

    @classmethod
    def connect(
        cls, address: str, *, security=None, timeout: float = 30.0, **kwargs
    ) -> DaskCompute:
        """A client of the scheduler at ``address`` (``tcp://host:8786``, ``tls://...``).

        ``security``: a ``distributed.security.Security`` (TLS certificates for
        the cluster); by default Dask's own configuration (``distributed.comm.tls``)
        applies.
        """
        distributed = _distributed()
        try:
            client = distributed.Client(
                address, security=security, timeout=timeout, set_as_default=False
            )
        except (OSError, TimeoutError) as exc:
            raise ComputeError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc
        return cls(client, owns_client=True, **kwargs)

    # -- per-session residency ----------------------------------------------------------

    def session(self) -> contextlib.AbstractContextManager[Compute]:
        """A view with its own resident-input cache, released when the block ends."""

        @contextlib.contextmanager
        def view():
            child = DaskCompute(
                self.client,
                workers=self.workers,
                scatter_min_bytes=self.scatter_min_bytes,
                _shared=self,
            )
            try:
                yield child
            finally:
                child.release()

        return view()

    def resident(self, obj, *, force: bool = False):
        """A future of ``obj`` on the workers, scattered once per distinct content.

        Objects whose content is fewer than ``scatter_min_bytes`` bytes are returned as
        they are (unless ``force``): they are cheaper to send with each task.
        """
        blob = _content(obj)
        if blob is None or (len(blob) < self.scatter_min_bytes and not force):
            return obj  # small, or of a kind the cache does not fingerprint: sent as it is
        digest = hashlib.blake2b(blob, digest_size=20).digest()
        with self._lock:
            future = self._resident.get(digest)
            if future is not None:
                self._count_reuse()
                return future
        # a list is scattered element by element: wrap, so the object stays whole
        (future,) = self.client.scatter([obj], broadcast=True, hash=False)
        with self._lock:
            self._resident.setdefault(digest, future)
            self.scattered += 1
            if self._parent is not None:
                self._parent.scattered += 1
            return self._resident[digest]

    def _count_reuse(self) -> None:
        self.reused += 1
        if self._parent is not None:
            self._parent.reused += 1

    def release(self) -> None:
        """Drop every input this view scattered (the workers free them)."""
        with self._lock:
            futures, self._resident = list(self._resident.values()), {}
        if futures:
            with contextlib.suppress(Exception):  # a closed client: nothing left to free
                self.client.cancel(futures)

    # -- batches --------------------------------------------------------------------------

    def map(self, fn: Callable, *iterables: Iterable, local: Callable | None = None) -> list:
        """As :meth:`Compute.map`; big arguments travel as resident futures."""
        calls = list(zip(*iterables))
        if len(calls) <= 1:
            return super().map(fn, *iterables, local=local)
        local = local or fn
        cache: dict[int, object] = {}

        def remote(arg):
            key = id(arg)
            if key not in cache:
                cache[key] = self.resident(arg)
            elif cache[key] is not arg:  # the same resident input for one more task
                self._count_reuse()
            return cache[key]

        futures = []
        try:
            for args in calls[1:]:
                futures.append(
                    self.client.submit(fn, *[remote(a) for a in args], pure=False, retries=0)
                )
            first = local(*calls[0])
            return [first] + self.client.gather(futures)
        except SmcHmmError:
            raise
        except Exception as exc:  # a lost worker, a closed client, a task that failed
            raise ComputeError(f"Dask task failed: {type(exc).__name__}: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                self.client.cancel([f for f in futures if not f.done()])

    def warm_up(self) -> None:
        """Import the Paillier layer on every worker now, not in the first batch."""
        try:
            self.client.run(_warm)
        except Exception as exc:
            raise ComputeError(f"Dask workers could not import smc_hmm: {exc}") from exc

    def close(self) -> None:
        self.release()
        if self._owns_client:
            with contextlib.suppress(Exception):
                self.client.close()
        self.executor = None

    def __repr__(self) -> str:
        return f"DaskCompute(workers={self.workers}, scheduler={self.client.scheduler.address})"


def _content(obj) -> bytes | None:
    """A canonical byte string of a task argument (ints, packed ciphertexts and nested
    lists of them: what the Paillier batches pass), for the cache's size and digest;
    None for anything else.  Nothing is serialised for a peer here."""
    from gmpy2 import mpz

    from smc_hmm.crypto.bulk import PackedInts

    if isinstance(obj, PackedInts):
        return b"P" + obj.width.to_bytes(4, "little") + obj._packed()
    if isinstance(obj, bool) or obj is None:
        return b"N" if obj is None else (b"T" if obj else b"F")
    if isinstance(obj, int | type(mpz(0))):
        v = int(obj)
        body = abs(v).to_bytes((abs(v).bit_length() + 7) // 8, "little")
        return (b"-" if v < 0 else b"+") + len(body).to_bytes(4, "little") + body
    if isinstance(obj, list | tuple):
        parts = [_content(x) for x in obj]
        if any(p is None for p in parts):
            return None
        tag = b"L" if isinstance(obj, list) else b"U"
        return tag + len(parts).to_bytes(4, "little") + b"".join(parts)
    return None


def _warm() -> None:
    import smc_hmm.crypto  # noqa: F401
