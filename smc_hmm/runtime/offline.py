"""The offline phase of an in-process two-party run: every randomizer planned up front.

Once Alice's key is known -- before her recording arrives -- the protocol's descriptor
plans from the public sizes how many fresh randomizers each party will draw
(``ProtocolDescriptor.randomizers``), and they are drawn now: Alice's from her own
(CRT) randomizer, Bob's from a public-key DJN randomizer of his own.  With a second
compute lane the work is balanced over both (the worker draws all of Bob's and part of
Alice's), as two machines with two cores each would share it.  The online run then
takes each randomizer from a pool: one multiplication per encryption.

Used by ``smc-hmm bench keyword``, ``smc-hmm keyword`` and the keyword demo; a party
process has its own offline phase (``[compute] randomizers``, :mod:`.party`).

:func:`offline_phase` is the two-party phase: one key pair (Alice's), the two pools it
balances over the compute lanes.  A protocol of several parties or key pairs (``aggregate``:
the lead owner's and the curator's; ``eigenvector``: the key authority's and, in the
private mode, every owner's own) plans per key (:func:`smc_hmm.protocol.randomizers_by_key`),
and :func:`planned_pools` fills a pool per party and key from that plan.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from smc_hmm.compute import Compute
from smc_hmm.crypto import PublicKey, RandomizerPool
from smc_hmm.crypto.randomness import Randomizer, public_randomizer
from smc_hmm.errors import ConfigError
from smc_hmm.protocol import randomizers_by_key

#: Bob's DJN randomizer (public key only) costs about this many times Alice's (CRT)
BOB_COST = 1.33


@dataclass
class OfflinePhase:
    """What the offline phase drew: its seconds and each party's pool."""

    seconds: float
    alice: RandomizerPool
    bob: RandomizerPool

    def randomizers(self, public_key) -> dict:
        """``run_protocol(randomizers=...)`` for Bob (Alice's pool goes on her key)."""
        return {"bob": {public_key.fingerprint: self.bob}}

    @property
    def misses(self) -> int:
        return self.alice.misses + self.bob.misses


def offline_phase(
    name: str,
    params: dict,
    inputs: dict,
    public_key,
    compute: Compute | None = None,
    base: Randomizer | None = None,
) -> OfflinePhase:
    """Draw every randomizer of one run of protocol ``name`` (``params``: its public
    parameters, ``inputs``: both parties' inputs, for the sizes) for ``public_key``;
    ``base`` is Alice's own randomizer (default: the key's).

    Two parties, Alice and Bob, under Alice's one key: a plan that names another party or
    key is a ConfigError.  Not for ``aggregate`` or ``eigenvector``: their parties draw
    under two or more keys, and the private eigenvector's owners make theirs during the
    run (no phase before it can know them); :func:`planned_pools` serves keys known
    before the run."""
    from smc_hmm.protocol import find

    descriptor = find(name)
    plan = descriptor.randomizers(descriptor.params(params), public_key.bits, inputs)
    need = _two_party(name, randomizers_by_key(plan, ("alice",)))
    t0 = time.perf_counter()
    base = base or public_key.randomizer
    alice = RandomizerPool(base, capacity=need["alice"])
    bob = RandomizerPool(base, capacity=need["bob"])  # source unused: every value offered
    compute = compute or Compute.inline()
    shared = 0
    if compute.parallel and hasattr(base, "params"):
        # Bob's draws use DJN's default exponent, Alice's hers (shorter if she chose so)
        bob_cost = BOB_COST * ((public_key.bits + 1) // 2) / base.params()["alpha_bits"]
        shared = max(0, int((need["alice"] - bob_cost * need["bob"]) / 2))
    local_count = need["alice"] - shared
    worker = compute.map(
        _worker_randomizers,
        [None, base.params() if shared else None],
        [0, int(public_key.n)],
        [0, shared],
        [0, need["bob"]],
        local=lambda *_: alice.fill(local_count),
    )[1]
    alice_values, bob_values = worker
    alice.offer(alice_values)
    bob.offer(bob_values)
    return OfflinePhase(time.perf_counter() - t0, alice, bob)


def _two_party(name: str, need: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Alice's and Bob's counts under Alice's key; ConfigError for any other."""
    other = sorted((p, k) for p, counts in need.items() for k, c in counts.items() if c)
    other = [(p, k) for p, k in other if p not in ("alice", "bob") or k != "alice"]
    if other:
        raise ConfigError(
            f"{name}'s plan draws under other parties or keys ({other}): the two-party "
            "offline phase covers Alice's key only; use planned_pools"
        )
    return {p: need.get(p, {}).get("alice", 0) for p in ("alice", "bob")}


def planned_pools(
    need: Mapping[str, Mapping[str, int]],
    public_keys: Mapping[str, PublicKey],
    own: Mapping[str, Randomizer] | None = None,
    parties: Iterable[str] = (),
) -> dict[str, dict[str, RandomizerPool]]:
    """A plan's pools (``need``: party -> {key party: count},
    :func:`~smc_hmm.protocol.randomizers_by_key`), filled now: party -> {key party:
    pool}, every key of ``public_keys`` (key party -> its public key) for every
    party of the plan and of ``parties`` (an empty pool where it plans none, so a draw it
    missed shows as a miss).  A key's holder draws from ``own[key party]`` (its CRT
    randomizer, if given), every other party from the key's public DJN randomizer.
    ``run_protocol(randomizers=...)`` takes :func:`by_fingerprint` of the result.  A key
    the plan names but ``public_keys`` lacks is a ConfigError."""
    missing = {k for counts in need.values() for k in counts} - set(public_keys)
    if missing:
        raise ConfigError(f"the plan draws under keys not given: {sorted(missing)}")
    own = own or {}
    pools: dict[str, dict[str, RandomizerPool]] = {}
    for party in dict.fromkeys([*need, *parties]):
        for key, pk in public_keys.items():
            count = need.get(party, {}).get(key, 0)
            source = own.get(key) if key == party else None
            source = source or public_randomizer(pk.n_mpz)
            pool = RandomizerPool(source, capacity=max(count, 1))
            pool.fill(count)
            pools.setdefault(party, {})[key] = pool
    return pools


def by_fingerprint(
    pools, public_keys: Mapping[str, PublicKey]
) -> dict[str, dict[bytes, Randomizer]]:
    """:func:`planned_pools`' pools as ``run_protocol(randomizers=...)`` takes them."""
    return {
        party: {public_keys[key].fingerprint: pool for key, pool in mine.items()}
        for party, mine in pools.items()
    }


def _worker_randomizers(secret_params, n: int, alice_count: int, bob_count: int):
    """A worker lane's offline work: ``alice_count`` of Alice's randomizers (from her
    randomizer's parameters) and ``bob_count`` of Bob's, for the public key ``n``."""
    from smc_hmm.crypto.randomness import draw_from_params, public_randomizer

    alice = draw_from_params(secret_params, alice_count) if alice_count else []
    bob = public_randomizer(n).draw(bob_count) if bob_count else []
    return alice, [int(v) for v in bob]
