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
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from smc_hmm.compute import Compute
from smc_hmm.crypto import RandomizerPool
from smc_hmm.crypto.randomness import Randomizer

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
    ``base`` is Alice's own randomizer (default: the key's)."""
    from smc_hmm.protocol import find

    descriptor = find(name)
    need = descriptor.randomizers(descriptor.params(params), public_key.bits, inputs)
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


def _worker_randomizers(secret_params, n: int, alice_count: int, bob_count: int):
    """A worker lane's offline work: ``alice_count`` of Alice's randomizers (from her
    randomizer's parameters) and ``bob_count`` of Bob's, for the public key ``n``."""
    from smc_hmm.crypto.randomness import draw_from_params, public_randomizer

    alice = draw_from_params(secret_params, alice_count) if alice_count else []
    bob = public_randomizer(n).draw(bob_count) if bob_count else []
    return alice, [int(v) for v in bob]
