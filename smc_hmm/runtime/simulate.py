"""In-process runs: every role in its own thread over an in-process network.

:func:`simulate` runs role functions ``role(ctx, *args)`` and returns every
party's output and the merged cost report; :func:`run_protocol` runs a
protocol descriptor's roles with their private inputs.  The same role code
runs as OS processes over TCP with mutual TLS (:mod:`smc_hmm.runtime.party`).

Reliability: every receive has a timeout; when any party fails, every other
party's transport is closed so it raises a typed transport error promptly;
all threads are joined before returning; a run with any failure raises its
root-cause error and never returns partial results.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger, CostReport
from smc_hmm.crypto import PrivateKey, PublicKey, Randomizer, Rng
from smc_hmm.crypto.keys import MIN_SECURE_BITS
from smc_hmm.errors import InvalidInputError, PeerTimeoutError
from smc_hmm.protocol import ProtocolDescriptor, find
from smc_hmm.runtime.context import PartyContext
from smc_hmm.runtime.result import RunResult
from smc_hmm.transport.base import Channel, Network, Transport, close_quietly
from smc_hmm.transport.local import LocalNetwork
from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES, WireCodec

__all__ = ["DEFAULT_TIMEOUT", "run_protocol", "simulate"]

DEFAULT_TIMEOUT = 30.0


class _Failures:
    """First-come record of party failures (the first one is the root cause)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self.items: list[tuple[int, str, BaseException]] = []

    def add(self, party: str, exc: BaseException) -> bool:
        """Record; True if this is the first failure."""
        with self._lock:
            self.items.append((next(self._seq), party, exc))
            return len(self.items) == 1

    def root(self) -> tuple[str, BaseException] | None:
        with self._lock:
            if not self.items:
                return None
            _, party, exc = min(self.items, key=lambda t: t[0])
            return party, exc


def _annotate(exc: BaseException, party: str, others: list[tuple[str, BaseException]]) -> None:
    if not hasattr(exc, "add_note"):
        return
    exc.add_note(f"(raised by party {party})")
    for other, e in others:
        exc.add_note(f"then {other}: {type(e).__name__}: {e}")


def simulate(
    roles: Mapping[str, Callable[..., Any]],
    args: Mapping[str, tuple] | None = None,
    *,
    keys: Mapping[str, tuple[PublicKey, PrivateKey]] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    network: Network | Callable[[list[str]], Network] | None = None,
    wrap_transport: Callable[[str, Transport], Transport] | None = None,
    compute: Compute | Mapping[str, Compute] | None = None,
    rng: Rng | None = None,
    record_views: bool = False,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    meta: Mapping | None = None,
    join_timeout: float | None = None,
    min_key_bits: int = MIN_SECURE_BITS,
    randomizers: Mapping[str, Mapping[bytes, Randomizer]] | None = None,
    progress: Mapping[str, Callable[[str, int, int], None]] | None = None,
) -> RunResult:
    """Run every role ``roles[name](ctx, *args[name])`` in its own thread and collect results.

    ``keys`` gives the key pairs of the parties that hold one.  ``network``
    is a :class:`Network` (or a factory ``names -> Network``) covering every
    party; the default is an in-process :class:`LocalNetwork`.
    ``wrap_transport(name, transport)`` may wrap a party's transport (fault
    injection, simulated latency).  Every receive times out after
    ``timeout`` seconds.  If any role raises, every party's transport is
    closed (so the others fail promptly with typed transport errors), all
    threads are joined and the first error is raised again (the others are
    attached as notes); otherwise returns a :class:`RunResult`.  Every party
    refuses peer keys below ``min_key_bits`` (lower it only for tests).
    ``randomizers[name]`` maps key fingerprints to precomputed randomizers
    (:class:`~smc_hmm.crypto.RandomizerPool`: the offline phase) that party
    ``name`` uses for that key once it arrives.  ``progress[name]`` receives that
    party's ``ctx.progress(stage, done, total)`` reports (long runs' progress lines).
    """
    names = _check_parties(roles, args, keys, randomizers, timeout)
    limit = join_timeout if join_timeout is not None else 2 * timeout + 30
    with _network(names, network) as net:
        contexts = _contexts(
            names,
            net,
            keys=dict(keys or {}),
            wrap_transport=wrap_transport,
            compute=compute,
            rng=rng if rng is not None else Rng.system(),
            timeout=timeout,
            max_frame_bytes=max_frame_bytes,
            record_views=record_views,
            min_key_bits=min_key_bits,
            randomizers=randomizers or {},
            progress=progress or {},
        )
        start = time.perf_counter()
        outputs, failures, stuck = _run_parties(contexts, roles, dict(args or {}), limit)
    elapsed = time.perf_counter() - start
    _raise_failures(failures, stuck, limit)
    return _merged(contexts, outputs, elapsed, meta, record_views)


def _merged(
    contexts: Mapping[str, PartyContext],
    outputs: Mapping[str, Any],
    elapsed: float,
    meta: Mapping | None,
    record_views: bool,
) -> RunResult:
    """The outputs of a successful in-process run with its merged cost report."""
    names = list(contexts)
    report = CostReport.from_ledgers(
        [contexts[n].ledger for n in names], meta={"mode": "in-process", **(meta or {})}
    )
    views = {n: contexts[n].received for n in names} if record_views else None
    return RunResult(
        outputs={n: outputs.get(n) for n in names}, cost=report, elapsed=elapsed, views=views
    )


def _check_parties(roles, args, keys, randomizers, timeout) -> list[str]:
    """The parties' names, once the roles, their arguments, keys and the timeout make sense."""
    if not roles:
        raise InvalidInputError("simulate needs at least one role")
    names = list(roles)
    unknown = (set(args or {}) | set(keys or {}) | set(randomizers or {})) - set(names)
    if unknown:
        raise InvalidInputError(f"args or keys given for unknown parties: {sorted(unknown)}")
    for name, fn in roles.items():
        if not callable(fn):
            raise InvalidInputError(f"role of {name!r} is not callable")
    if not timeout > 0:
        raise InvalidInputError("timeout must be positive")
    return names


@contextlib.contextmanager
def _network(names: list[str], network) -> Iterator[Network]:
    """The given network, one made by the given factory, or an in-process one; a
    network made here is closed when the run leaves it (or fails to start)."""
    if isinstance(network, Network):
        yield network
        return
    net = LocalNetwork(names) if network is None else network(names)
    try:
        yield net
    finally:
        net.close()


def _contexts(
    names: list[str],
    net: Network,
    *,
    keys,
    wrap_transport,
    compute,
    rng: Rng,
    timeout: float,
    max_frame_bytes: int,
    record_views: bool,
    min_key_bits: int,
    randomizers,
    progress,
) -> dict[str, PartyContext]:
    """Every party's context over its transport of ``net`` (all closed if one fails)."""
    contexts: dict[str, PartyContext] = {}
    try:
        for name in names:
            transport = net.transport(name)
            if wrap_transport is not None:
                transport = wrap_transport(name, transport)
            ledger = CostLedger(name)
            codec = WireCodec(max_frame_bytes=max_frame_bytes)
            channel = Channel(transport, codec, timeout=timeout, observer=ledger, strict=True)
            party_compute = compute.get(name) if isinstance(compute, Mapping) else compute
            contexts[name] = PartyContext(
                name,
                channel,
                keypair=keys.get(name),
                ledger=ledger,
                compute=party_compute,
                rng=rng.spawn(),
                record=record_views,
                min_key_bits=min_key_bits,
                randomizers=randomizers.get(name),
                progress=progress.get(name),
            )
    except BaseException:
        for ctx in contexts.values():
            close_quietly(ctx.channel.transport)
        raise
    return contexts


def _run_parties(
    contexts: dict[str, PartyContext], roles, args, limit: float
) -> tuple[dict[str, Any], _Failures, list[str]]:
    """Every role in its own thread, all joined within ``limit`` seconds: (outputs,
    failures, the threads still alive).  The first failure closes every transport."""
    outputs: dict[str, Any] = {}
    failures = _Failures()

    def abort_all() -> None:
        for ctx in contexts.values():
            close_quietly(ctx.channel.transport)

    def body(name: str) -> None:
        ctx = contexts[name]
        try:
            with ctx.ledger.running():
                outputs[name] = ctx.run(roles[name], *args.get(name, ()))
            ctx.channel.close()  # strict: unrequested messages are a protocol error
        except BaseException as exc:  # re-raised in the caller's thread
            if failures.add(name, exc):
                abort_all()
            else:
                close_quietly(ctx.channel.transport)

    threads = [
        threading.Thread(target=body, args=(n,), name=f"smc-party-{n}", daemon=True)
        for n in contexts
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + limit
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:  # the run did not finish
        abort_all()
        for t in threads:
            t.join(5.0)
        stuck = [t.name for t in threads if t.is_alive()]
    return outputs, failures, stuck


def _raise_failures(failures: _Failures, stuck: list[str], limit: float) -> None:
    """The root-cause error of a failed run (the others as its notes), or a timeout."""
    root = failures.root()
    if root is not None:
        party, exc = root
        others = [(p, e) for _, p, e in failures.items if e is not exc]
        _annotate(exc, party, others)
        raise exc
    if stuck:
        raise PeerTimeoutError(
            f"these parties did not finish within {limit:g} s: {', '.join(stuck)}"
        )


def run_protocol(
    protocol: str | ProtocolDescriptor,
    params,
    parties: Mapping[str, tuple[str, Any]],
    *,
    keys: Mapping[str, tuple[PublicKey, PrivateKey]] | None = None,
    **kwargs,
) -> RunResult:
    """Run a protocol's roles in-process: ``parties`` maps each party name to
    ``(role name, private input)``; ``params`` are the public parameters (or a
    ``[protocol]``-style mapping).  Key holders need a key pair in ``keys``.
    Other keyword arguments go to :func:`simulate`.
    """
    descriptor = find(protocol)
    if isinstance(params, Mapping):
        params = descriptor.params(params)
    keys = dict(keys or {})
    roles, args = {}, {}
    for name, (role_name, private) in parties.items():
        role = descriptor.role(role_name)
        if role.holds_key and name not in keys:
            raise InvalidInputError(
                f"{name} plays {role_name!r}, which holds the key pair: give it one in keys"
            )
        roles[name] = role.run
        args[name] = (private, params)
    meta = {"protocol": descriptor.name, **kwargs.pop("meta", {})}
    return simulate(roles, args, keys=keys, meta=meta, **kwargs)
