"""Run a set of party objects in-process (a thin layer over smc_hmm.runtime.simulate)."""

from __future__ import annotations

from collections.abc import Sequence

from parties.alice import Alice
from parties.base import Party
from smc_hmm.errors import InvalidInputError
from smc_hmm.runtime import RunResult
from smc_hmm.runtime import simulate as _simulate


def simulate(parties: Sequence[Party], protocol: str, params, **kwargs) -> RunResult:
    """Run ``protocol`` with these party objects, one thread each (see runtime.simulate).

    Key holders without a key pair generate one first; each party's compute
    executor is used for its role.
    """
    names = [p.name for p in parties]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"party names must be unique, got {names}")
    for p in parties:
        if isinstance(p, Alice):
            p.ensure_keypair()
    roles = {p.name: p.role(protocol, params) for p in parties}
    keys = {p.name: p.keypair for p in parties if p.keypair is not None}
    kwargs.setdefault("compute", {p.name: p.compute for p in parties})
    meta = {"protocol": protocol, **kwargs.pop("meta", {})}
    return _simulate(roles, keys=keys, meta=meta, **kwargs)
