"""Secure sum through a key-less relay: Alice learns a + sum_i x_i and nothing else.

Paper: 003 (Pathak), 3.1.2 (Paillier: E(x) E(y) = E(x + y), re-randomisation)
and the aggregation step of 4.1.3 (data owners send encrypted contributions to
the curator, who combines them homomorphically without a key).  This is the
first protocol of the package; it proves the plumbing (keys on the wire,
typed messages, metering, timeouts) end to end.

Roles (names are public parameters, :class:`Params`):

* **key holder** (Alice): generates the Paillier key pair (``ctx.keypair``) and
  holds a private vector ``a``.  Output: ``a + sum_i x_i`` (float array).
* **contributors** (Bob, data owners): each holds a private vector ``x_i``.
  Output: ``None``.
* **aggregator** (Trent): has no key; optionally holds his own vector ``c``
  (then he is also a contributor of sorts).  Output: ``None``.

Public parameters: the vector ``length``, the fixed-point ``scale`` (fractional
bits) and ``max_abs``, a bound on |value| of every entry of every input; both
the contributors (on their inputs) and Trent (on what he receives) enforce it,
so the encrypted sum provably stays inside the plaintext space.

Messages (one send or receive per step; rounds = 3):

1. Alice -> every other party, tag ``"pk"``: her :class:`PublicKey`.
2. each contributor -> Trent, tag ``"share"``: ``E(x_i)`` (a CipherArray).
3. Trent -> Alice, tag ``"aggregate"``: ``E(c + sum_i x_i)``, re-randomised
   (computed ciphertexts are refreshed before they leave: docs/security.md).
4. Alice decrypts and adds ``a`` locally.

Who learns what (semi-honest adversary, no collusion between Trent and
Alice):

* Alice sees only the public key she made and one fresh-looking ciphertext of
  the sum: she learns ``a + sum_i x_i`` (and hence the others' total), nothing
  about individual contributions.
* Trent sees the public key and ciphertexts under a key he does not hold: by
  the semantic security of Paillier (DCR assumption) he learns nothing beyond
  the vector length.  He alone adds, so a single contributor's ciphertext never
  reaches Alice.
* Bob and the data owners see only the public key.

If Trent colluded with Alice he could forward one contributor's ciphertext and
Alice would decrypt it: the protocol is secure against each party alone, not
against that coalition.  A malicious Trent could also drop or replay shares
(not covered: semi-honest model).

Run it::

    smc-hmm demo secure-sum                   # in-process, 2048-bit keys, cost table
    smc-hmm launch --config parties.toml      # three OS processes over mutual TLS

(see ``docs/running.md`` for the configuration and the per-process commands).
(``docs/adding-a-protocol.md`` walks through ``protocols/linear.py``, built the same way.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.messages import Ciphertexts, Key, Message
from smc_hmm.protocol import (
    Example,
    ProtocolDescriptor,
    Role,
    assign_by_field,
    params_from_config,
)
from smc_hmm.runtime.inputs import load_vector

NAME = "secure_sum"


@dataclass(frozen=True)
class Params:
    """Public parameters every party agrees on before the run."""

    key_holder: str = "alice"
    aggregator: str = "trent"
    contributors: tuple[str, ...] = ("bob",)
    length: int = typed.whole(1, 1, None)
    scale: int = typed.whole(16, 0, 256)
    max_abs: float = typed.number(2.0**20, 0, math.inf, low_open=True)

    def __post_init__(self) -> None:
        others = (self.key_holder, self.aggregator)
        contributors = typed.party_names("contributors", self.contributors, *others)
        object.__setattr__(self, "contributors", contributors)
        if not self.contributors:
            raise InvalidInputError("secure_sum needs at least one contributor")
        typed.check_fields(self)

    @property
    def parties(self) -> tuple[str, ...]:
        return (self.key_holder, self.aggregator, *self.contributors)

    @property
    def bound(self) -> int:
        """Bound on |encoded integer| of one input entry at ``scale``."""
        return math.ceil(self.max_abs * 2**self.scale) + 1

    def messages(self) -> dict[str, Message]:
        """The declared messages: scales and bounds from the public parameters only."""
        summands = len(self.contributors) + 1  # Trent may add his own vector
        return {
            "pk": Message("pk", Key()),
            "share": Message("share", Ciphertexts(self.scale, self.bound, (self.length,))),
            "aggregate": Message(
                "aggregate",
                Ciphertexts(self.scale, summands * self.bound, (self.length,), fresh=True),
            ),
        }

    @classmethod
    def from_config(cls, section: Mapping) -> Params:
        """From the ``[protocol]`` table of a parties.toml file (``length`` required)."""
        if "length" not in section:
            raise ConfigError(f"{NAME} needs protocol.length")
        return params_from_config(cls, section, NAME)


def check_input(values, params: Params) -> np.ndarray:
    """A party's private vector as float64 of the agreed length and bound."""
    return typed.bounded_vector(values, params.length, params.max_abs, "input")


# -- roles -------------------------------------------------------------------------------


def alice(ctx, a, params: Params) -> np.ndarray:
    """Key holder: returns a + sum of every other party's vector."""
    a = check_input(a, params)
    pk, sk = ctx.keypair
    msg = params.messages()
    with ctx.phase("distribute key"):
        for peer in (params.aggregator, *params.contributors):
            ctx.send(peer, msg["pk"], pk)  # step 1: the public key to every other party
    with ctx.phase("wait for aggregate"):
        total = ctx.recv(params.aggregator, msg["aggregate"])  # step 3: E(c + sum_i x_i)
    total.public_key.same_key(pk)
    with ctx.phase("decrypt"):
        others = total.decrypt(sk)  # step 4: decrypt, then add a in the clear
    return a + others


def contributor(ctx, x, params: Params) -> None:
    """Bob or a data owner: encrypts x under Alice's key for Trent."""
    x = check_input(x, params)
    msg = params.messages()
    pk = ctx.recv(params.key_holder, msg["pk"])  # step 1
    with ctx.phase("encrypt"):
        share = CipherArray.encrypt(pk, x, params.scale)
    # |x| <= max_abs was checked, so the public bound holds
    ctx.send(params.aggregator, msg["share"], share.with_bound(params.bound))  # step 2
    return None


def trent(ctx, c, params: Params) -> None:
    """Key-less aggregator: E(c) * prod_i E(x_i), re-randomised, to Alice."""
    msg = params.messages()
    pk = ctx.recv(params.key_holder, msg["pk"])  # step 1
    shares: list[CipherArray] = []
    with ctx.phase("collect shares"):
        for peer in params.contributors:
            share = ctx.recv(peer, msg["share"])  # step 2: declared scale and bound attached
            share.public_key.same_key(pk)
            shares.append(share)
    with ctx.phase("aggregate"):
        if c is not None:
            c = check_input(c, params)
            own = CipherArray.encrypt(pk, c, params.scale)
            shares.append(own.with_bound(params.bound))
        total = shares[0]
        for share in shares[1:]:
            total = total + share
    # step 3: E(c + sum_i x_i) to Alice, re-randomised (``aggregate`` is fresh): she cannot
    # match it against the shares
    ctx.send(params.key_holder, msg["aggregate"], total)
    return None


def randomizers_needed(params: Params, key_bits: int, inputs) -> dict[str, int]:
    """Fresh randomizers per party: each contributor's d encryptions, Trent's d
    re-randomisations (and d encryptions when he holds a vector); Alice draws none."""
    trent = params.length * (2 if inputs.get(params.aggregator) is not None else 1)
    return {params.key_holder: 0, params.aggregator: trent} | {
        c: params.length for c in params.contributors
    }


def example(key_bits: int, seed: int) -> Example:
    """Alice, Bob, a data owner and Trent (who holds a vector too) add length-3 vectors,
    twice: random and extreme (|x| = max_abs) entries."""
    rng = np.random.default_rng(seed)
    names = ("alice", "bob", "o1", "trent")
    random = {n: rng.uniform(-1000.0, 1000.0, size=3) for n in names}
    extreme = {n: np.array([1000.0, -1000.0, 0.0]) for n in names}
    return Example(
        params={"contributors": ["bob", "o1"], "length": 3, "scale": 16, "max_abs": 1000.0},
        parties={
            "alice": "key_holder",
            "bob": "contributor",
            "o1": "contributor",
            "trent": "aggregator",
        },  # fmt: skip
        inputs=(random, extreme),
        expected=lambda inputs: {"alice": sum(inputs.values()), "bob": None, "trent": None},
        tolerance=4 * 2.0**-16,  # each of the four vectors rounded to 16 fractional bits
        bad_inputs=(
            {"bob": [1.0, 2.0]},
            {"o1": [np.nan, 0.0, 0.0]},
            {"trent": [2e3, 0, 0]},
            {"alice": "not numbers"},
        ),  # fmt: skip
        config=lambda directory: {n: {"vector": random[n].tolist()} for n in names},
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "Alice learns a + sum_i x_i through a key-less relay (Trent)",
    params=Params.from_config,
    roles=(
        Role("key_holder", alice, kind="alice", holds_key=True, input="vector", load=load_vector),
        Role("contributor", contributor, kind="bob", input="vector", load=load_vector, many=True),
        Role("aggregator", trent, kind="trent", input="vector", load=load_vector, optional=True),
    ),
    role_for=assign_by_field(
        key_holder="key_holder",
        aggregator="aggregator",
        contributor="contributors",
    ),
    messages=lambda params, key_bits: params.messages().values(),
)


def expected_counts(params: Params, *, trent_has_input: bool = False) -> dict[str, dict[str, int]]:
    """The operation counts per party this protocol performs (for tests and the cost model)."""
    d = params.length
    k = len(params.contributors) + (1 if trent_has_input else 0)
    counts = {params.key_holder: {"decrypt": d}}
    for name in params.contributors:
        counts[name] = {"encrypt": d}
    counts[params.aggregator] = {
        "encrypt": d if trent_has_input else 0,
        "add": (k - 1) * d,
        "rerandomize": d,
    }
    return counts
