"""One party in this OS process, over TCP with mutual TLS (``smc-hmm party``).

The same role code as in-process (:mod:`smc_hmm.runtime.simulate`): the
protocol's descriptor gives the role, its private input loader and whether
it holds the key pair; this module connects, runs the role and writes the
party's result (output and cost snapshot) as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger
from smc_hmm.crypto import CipherArray, generate_keypair
from smc_hmm.crypto.randomness import precompute
from smc_hmm.errors import (
    AuthenticationError,
    ConfigError,
    InsecureKeyWarning,
    InvalidInputError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.protocol import find
from smc_hmm.runtime.config import RunConfig, load_config
from smc_hmm.runtime.context import PartyContext, party_channel
from smc_hmm.runtime.views import write_views
from smc_hmm.transport.base import closed_on_failure

__all__ = ["jsonable", "recorded_run", "run_party", "write_result"]


def jsonable(value):
    """Outputs as JSON-ready data (numpy arrays and scalars to lists and numbers)."""
    import numpy as np

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, CipherArray):
        # ciphertexts stay with their holder: the result file says what is held
        return {
            "ciphertexts": list(value.shape),
            "scale": value.scale,
            "key": value.public_key.fingerprint.hex(),
        }
    raise InvalidInputError(
        f"a party output of type {type(value).__name__} is not JSON-serialisable"
    )


def _connect(name: str, addresses: dict, tls, config: RunConfig):
    """The party's TCP transport; stray socket / TLS exceptions become typed errors."""
    import ssl

    from smc_hmm.transport.tcp import TcpTransport

    try:
        return TcpTransport(
            name, addresses, tls, config.connect_timeout, max_frame_bytes=config.max_frame_bytes
        )
    except ssl.SSLError as e:  # e.g. the peer refused our certificate mid-handshake
        raise AuthenticationError(f"{name}: TLS connection failed: {e}") from e
    except OSError as e:
        raise TransportError(f"{name}: connection failed: {e}") from e


def write_result(path, result: dict) -> None:
    """Write a party's result dict as JSON to ``path`` (nothing when ``path`` is None)."""
    if path is None:
        return
    try:
        Path(path).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e


def _keypair_for(role, config: RunConfig):
    if not role.holds_key:
        return None
    with warnings.catch_warnings():
        if config.insecure:
            warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(config.key_bits, insecure=config.insecure)


def _local_lanes(config: RunConfig) -> Compute:
    """``[compute] workers = N``: this party's heavy batches in N local lanes (the caller
    plus N - 1 worker processes); without it, inline.  (A Dask ``scheduler`` is for a
    serving party: ``smc-hmm serve``.)"""
    workers = config.compute.get("workers")
    if workers is None:
        return Compute.inline()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError("compute.workers must be a positive integer")
    return Compute.processes(workers)


#: the most randomizers ``[compute] randomizers`` may ask a party to precompute (about
#: 512 bytes each at 2048 bits: 100 MB)
MAX_OFFLINE_RANDOMIZERS = 200_000


def _offline_count(config: RunConfig) -> int:
    """``[compute] randomizers = N``: a key-holding party precomputes N randomizers for its
    key over its lanes before its role starts (the offline phase; 0 by default)."""
    count = config.compute.get("randomizers", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigError("compute.randomizers must be a non-negative integer")
    if count > MAX_OFFLINE_RANDOMIZERS:
        raise ConfigError(
            f"compute.randomizers = {count} is above the limit of {MAX_OFFLINE_RANDOMIZERS:,}"
        )
    return count


def _offline_phase(ctx: PartyContext, count: int) -> None:
    """Fill the party's own key's randomizer pool (phase ``offline``); online encryption
    draws from it, and from the key's own randomizer once it is used up."""
    if ctx.private_key is None or not count:
        return
    key = ctx.public_key
    with ctx.phase("offline"):
        key.use_randomizer(precompute(key.randomizer, count, ctx.compute))


def _run_role(name: str, config: RunConfig, views) -> tuple[Any, CostLedger]:
    """Party ``name``'s role run to its end over TCP (:func:`run_party`'s steps, from
    finding the role to closing the channel); its output and cost ledger."""
    pc = config.party(name)
    descriptor = find(config.protocol)
    params = descriptor.params(config.params)
    role = descriptor.assign(params, name, pc.kind, pc.role)
    tls = config.tls_for(name)
    private = config.private_input(role, pc)
    keypair = _keypair_for(role, config)
    offline = _offline_count(config)
    addresses = {n: p.address for n, p in config.parties.items()}
    transport = _connect(name, addresses, tls, config)
    ledger = CostLedger(name)
    compute = _local_lanes(config)
    try:
        with closed_on_failure(transport):
            channel = party_channel(
                transport, ledger, timeout=config.timeout, max_frame_bytes=config.max_frame_bytes
            )
            ctx = PartyContext(
                name,
                channel,
                keypair=keypair,
                ledger=ledger,
                compute=compute,
                min_key_bits=config.min_key_bits,
                record=views is not None,
            )
            with ledger.running():
                _offline_phase(ctx, offline)
                output = ctx.run(role.run, private, params)
            channel.close()
            if views is not None:
                write_views(views, {name: ctx.received}, {name: keypair} if keypair else {})
    finally:
        compute.close()
    return output, ledger


def run_party(name: str, config: RunConfig | str | Path, *, result_path=None, views=None) -> dict:
    """Run party ``name`` of ``config`` in this process over TCP with mutual TLS.

    Finds the protocol's descriptor (:func:`smc_hmm.protocol.find`), reads the
    public parameters and the party's role and private input, generates the
    key pair if the role holds it, connects to every other party (retrying
    until ``run.connect_timeout``), runs the role with every receive bounded
    by ``run.timeout``, and returns ``{"party", "protocol", "ok", "output",
    "cost", "elapsed"}``.  The same dict (or, on failure, one with ``ok =
    false`` and the error's type and message) is written as JSON to
    ``result_path``; failures are re-raised.  ``views``: a folder to write what this
    party received to (``<name>.json``, :mod:`smc_hmm.runtime.views`).
    """
    if not isinstance(config, RunConfig):
        config = load_config(config)

    def run() -> dict:
        output, ledger = _run_role(name, config, views)
        return {"output": jsonable(output), "cost": ledger.snapshot()}

    return recorded_run(name, config.protocol, result_path, run)


def recorded_run(name: str, protocol: str, result_path, run: Callable[[], dict]) -> dict:
    """``{"party", "protocol", "ok", "pid", ..., "elapsed"}`` of party ``name``: ``ok``
    and what ``run()`` returns when it succeeds, else the error's type and message (the
    error is re-raised).  Either way the dict is written to ``result_path``
    (:func:`write_result`): a launcher reads it when the party is a process of its own."""
    result: dict[str, Any] = {
        "party": name,
        "protocol": protocol,
        "ok": False,
        "pid": os.getpid(),
    }
    start = time.perf_counter()
    try:
        result.update(ok=True, **run(), elapsed=time.perf_counter() - start)
    except SmcHmmError as exc:
        result.update(
            error={"type": type(exc).__name__, "message": str(exc)},
            elapsed=time.perf_counter() - start,
        )
        with contextlib.suppress(ConfigError):  # keep the party's own error as the one reported
            write_result(result_path, result)
        raise
    write_result(result_path, result)
    return result
