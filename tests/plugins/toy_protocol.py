"""A toy protocol defined entirely in the tests: Bob adds a private offset to Alice's
encrypted numbers.  It is registered by nothing but a ``module:object`` reference
(``protocol = "toy_protocol:PROTOCOL"``), exactly as ``docs/adding-a-protocol.md`` says.

Alice (key holder, private ``values``) sends E(x); Bob (private ``offset``) returns
E(x + offset); Alice learns x + offset (declared revealed to her: it is her output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smc_hmm.crypto import CipherArray
from smc_hmm.messages import Ciphertexts, Key, Message
from smc_hmm.protocol import ProtocolDescriptor, Role
from smc_hmm.runtime.inputs import load_vector


@dataclass(frozen=True)
class Params:
    length: int = 3
    bound: int = 2**20

    @classmethod
    def from_config(cls, section):
        return cls(int(section.get("length", 3)), int(section.get("bound", 2**20)))

    def messages(self):
        return (
            Message("toy.key", Key()),
            Message("toy.x", Ciphertexts(0, self.bound, (self.length,))),
            Message("toy.sum", Ciphertexts(0, 2 * self.bound, (self.length,))),
        )


def alice(ctx, values, params: Params):
    key, x, total = params.messages()
    pk, sk = ctx.keypair
    ctx.send("bob", key, pk)  # step 1
    ints = np.asarray(values, dtype=np.int64).astype(object)
    ctx.send("bob", x, CipherArray.encrypt_encoded(pk, ints, 0, params.bound))  # step 2
    return [int(v) for v in ctx.recv("bob", total).decrypt_ints(sk)]  # step 4


def bob(ctx, offset, params: Params):
    key, x, total = params.messages()
    ctx.recv("alice", key)
    enc = ctx.recv("alice", x)
    ints = np.asarray(offset, dtype=np.int64).astype(object)
    ctx.send("alice", total, enc.add_encoded(ints).rerandomize())  # step 3
    return None


PROTOCOL = ProtocolDescriptor(
    name="toy",
    summary="Bob adds a private offset to Alice's encrypted numbers",
    params=Params.from_config,
    roles=(
        Role("alice", alice, kind="alice", holds_key=True, input="values", load=load_vector),
        Role("bob", bob, kind="bob", input="offset", load=load_vector),
    ),
    messages=Params.messages,
)
