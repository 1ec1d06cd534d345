"""Private linear classification: Alice learns whether w.x >= theta, and nothing else.

Alice holds features x and the Paillier key, Bob weights w and a threshold theta.
Public (:class:`Params`): d = len(x), the scale f, a bound M on every |x_i| and |w_i|.
X = round(2^f x), W = round(2^f w), T = round(4^f theta).  Steps: 1. Alice -> Bob her
key; 2. Alice -> Bob E(X); 3. Bob computes E(S) = E(W.X) and E(T), and the decision
stage (:mod:`protocols.stages.decision`, rule ``argmax``, garbled) gives Alice the index of the
larger of (S, T), a tie to S; 4. Alice outputs ``above`` = [S >= T].

Adversary model: no collusion, either party may deviate; DCR; the garbled stage's OTs.
Alice learns [W.X >= T]; she decrypts only values uniform on Z_n to 2^-40, and her
shares are MAC-bound (she cannot shift S).  Leaks: n chosen queries locate {W.X = T} to
2^-n along a line; an X beyond M aborts the run iff |S| or |T| leaves the public bound,
one bit a session.  Bob learns d and M; a deviating Bob, whether Alice aborts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from protocols.stages.decision import DecisionSpec, alice_decide, bob_decide
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError
from smc_hmm.messages import Ciphertexts, Key, Message
from smc_hmm.protocol import Example, ProtocolDescriptor, alice_and_bob, params_from_config
from smc_hmm.runtime.inputs import load_vector


@dataclass(frozen=True)
class Params:
    dim: int = 4
    scale: int = 16
    max_abs: float = 16.0

    def __post_init__(self):
        if type(self.dim) is not int or self.dim < 1 or not 0 <= self.scale <= 64:
            raise InvalidInputError(f"need dim >= 1 and scale in [0, 64]: {self}")
        if not 0 < self.max_abs < 2**32:
            raise InvalidInputError(f"max_abs must be in (0, 2^32), got {self.max_abs}")

    bound = property(lambda self: int(np.ceil(self.max_abs * 2**self.scale)))  # |X_i|, |W_i|
    decision = property(lambda self: DecisionSpec(2, self.dim * self.bound**2, rule="argmax"))

    def messages(self) -> list[Message]:
        x = Ciphertexts(self.scale, self.bound, (self.dim,))
        return [Message("lin.key", Key()), Message("lin.x", x), *self.decision.messages()]


def encode(values, count: int, scale: int, bound: int, what: str) -> list[int]:
    """``count`` finite numbers as integers at ``scale`` fractional bits, within ``bound``."""
    try:
        v = np.round(np.asarray(values, dtype=float) * 2.0**scale)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{what} must be numbers: {e}") from e
    if v.shape != (count,) or not np.all(np.abs(v) <= bound):  # NaN fails too
        raise InvalidInputError(f"{what}: {count} numbers within the public bound, got {v}")
    return [int(i) for i in v]


def split(model, p: Params) -> tuple[list[int], int]:
    """Bob's model, d weights then theta, as the integers (W, T)."""
    m = np.atleast_1d(np.asarray(model, dtype=object))
    (t,) = encode(m[-1:], 1, 2 * p.scale, p.decision.bound, "theta")
    return encode(m[:-1], p.dim, p.scale, p.bound, "weights"), t


def plaintext(p: Params, inputs) -> dict:
    """Alice's output in the clear, on the integers of the secure run."""
    (w, t), x = split(inputs["bob"], p), encode(inputs["alice"], p.dim, p.scale, p.bound, "x")
    return {"above": sum(a * b for a, b in zip(x, w)) >= t}


def alice(ctx, x, params: Params) -> dict:
    (key, features, *_), pk = params.messages(), ctx.keypair[0]
    x = encode(x, params.dim, params.scale, params.bound, "features")
    ctx.send("bob", key, pk)  # steps 1 and 2: the key, then E(X)
    ctx.send("bob", features, CipherArray.encrypt_encoded(pk, x, params.scale, params.bound))
    return {"above": alice_decide(ctx, params.decision, "bob") == 0}  # steps 3 and 4


def bob(ctx, model, params: Params) -> None:
    (w, t), (key, features, *_) = split(model, params), params.messages()
    pk = ctx.recv("alice", key)
    x = ctx.recv("alice", features)  # its declared scale and bound attached
    x.public_key.same_key(pk)
    s = x.mul(np.array(w, dtype=object), params.scale).sum().reshape(1)  # step 3
    t = CipherArray.encrypt_encoded(pk, [t], 2 * params.scale, params.decision.bound)
    scores = CipherArray.concatenate([s, t]).with_bound(params.decision.bound)
    return bob_decide(ctx, scores, params.decision, "alice")


def example(key_bits: int, seed: int) -> Example:
    """Four features: a random x and model, then an x on the hyperplane (a tie: above)."""
    rng = np.random.default_rng(seed)
    w, x = rng.uniform(-4, 4, 4), rng.uniform(-4, 4, 4)
    inputs = ({"alice": x, "bob": [*w, 1.5]}, {"alice": [1, 2, 0, 0], "bob": [2, 1, 0, 0, 4]})
    return Example(
        params={"dim": 4},
        parties={"alice": "alice", "bob": "bob"},
        inputs=inputs,
        expected=lambda i: {"alice": plaintext(Params(), i), "bob": None},
        bad_inputs=({"alice": [1.0, 2.0]}, {"bob": [0, 0, 0, 99, 0]}, {"alice": [np.nan] * 4}),
        config=lambda directory: {p: {"vector": [*map(float, inputs[0][p])]} for p in inputs[0]},
    )


PROTOCOL = ProtocolDescriptor(
    name="linear",
    summary="private linear classification: Alice learns only [w.x >= theta]",
    params=lambda section: params_from_config(Params, section, "linear"),
    messages=lambda params, key_bits: params.messages(),
    plaintext=plaintext,
    randomizers=lambda p, key_bits, inputs: {  # Alice's E(X), Bob's E(T), the stage's
        k: n + {"alice": p.dim, "bob": 1}[k] for k, n in p.decision.randomizers(key_bits).items()
    },
    roles=alice_and_bob(alice, bob, load_vector, input="vector"),
    example=example,
)
