"""Run a set of party objects in-process (a thin layer over smc_hmm.runtime.simulate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parties.base import Party
from smc_hmm.errors import InvalidInputError
from smc_hmm.protocol import ProtocolDescriptor, find
from smc_hmm.runtime import RunResult
from smc_hmm.runtime import simulate as _simulate


def simulate(
    parties: Sequence[Party], protocol: str | ProtocolDescriptor, params, **kwargs
) -> RunResult:
    """Run ``protocol`` with these party objects, one thread each (see runtime.simulate).

    ``params``: the protocol's parameters, or a mapping its descriptor turns into them (as
    :func:`smc_hmm.runtime.run_protocol`).  Each party plays the role the protocol's
    descriptor assigns it; a role
    that holds the key pair makes its party generate one first.  Each party's
    executor runs its heavy batches.
    """
    names = [p.name for p in parties]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"party names must be unique, got {names}")
    descriptor = find(protocol)
    if isinstance(params, Mapping):  # a [protocol] table, as run_protocol takes it
        params = descriptor.params(params)
    roles = {p.name: p.play(descriptor, params) for p in parties}
    keys = {p.name: p.keypair for p in parties if p.keypair is not None}
    kwargs.setdefault("compute", {p.name: p.compute for p in parties})
    meta = {"protocol": descriptor.name, **kwargs.pop("meta", {})}
    return _simulate(roles, keys=keys, meta=meta, **kwargs)
