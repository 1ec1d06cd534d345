"""The ``compare`` and ``argmax`` protocols: a batched comparison of encrypted integer pairs
([a_i < b_i]) and a secure argmax of k encrypted integers, in circuits Bob garbles (the
default) or by the DGK/Veugen protocols of the stage :mod:`protocols.stages.dgk` (the
thesis's, ``comparison = "dgk"``), whose docstring states the messages, the adversary
model and who learns what.  This module holds the protocols' parameters, roles and
descriptors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from protocols.stages import bound as bd
from protocols.stages import circuits, garbled
from protocols.stages.dgk import (
    ARGMAX_TAGS,
    ArgmaxParams,
    CompareSpec,
    ComparisonParams,
    alice_argmax,
    alice_compare,
    alice_reveal,
    alice_send_keys,
    bob_argmax,
    bob_compare,
    bob_recv_keys,
    bob_reveal,
    reveal_randomizers,
)
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import (
    InvalidInputError,
    ShapeMismatchError,
)
from smc_hmm.messages import Key, Message
from smc_hmm.protocol import Example, ProtocolDescriptor, Role, assign_by_field, params_from_config
from smc_hmm.runtime.inputs import load_array

NAME = "compare"
ARGMAX_NAME = "argmax"

# -- the standalone comparison: parameters, roles, descriptor ----------------------------------


@dataclass(frozen=True)
class Params(ComparisonParams):
    """Public parameters of a standalone batched comparison of k pairs (the fields are
    :class:`~protocols.stages.dgk.ComparisonParams`')."""

    def __post_init__(self):
        self.spec()
        super().__post_init__()

    def spec(self, dgk_width: int | None = None) -> CompareSpec:
        return CompareSpec(self.bits, self.count, self.sigma, dgk_width)

    @property
    def bound(self) -> bool:
        """Garbled on bound shares: revealed to a party and d = a - b within the MAC
        field (:func:`protocols.stages.circuits.bound_compare`); ``none`` keeps plain
        shares (Alice returns the bits encrypted, which nothing binds), as do values of
        60 bits or more (the thesis's ``dgk`` mode serves those)."""
        return self.comparison == "garbled" and circuits.bound_compare(
            self.bits, self.sigma, self.reveal_to
        )

    def share_plan(self, key_bits: int | None = None):
        return bd.SharePlan(self.count, self.bits + 1, self.sigma, key_bits)

    def circuit(self):
        return circuits.compare_circuit(self.count, self.bits, self.reveal_to, self.sigma)

    def messages(self, dgk_width: int | None = None) -> dict[str, Message]:
        if self.comparison != "garbled":
            return self.spec(dgk_width).messages()
        setup = {f"gc.{k}": m for k, m in garbled.setup_messages(self.ots).items()}
        out = {"pk": Message("cmp.pk", Key())} | setup
        if self.bound:
            shared = bd.shared_messages(self.share_plan(), self.circuit(), circuits.TAG)
            return out | {m.tag: m for m in shared}
        circuit = {f"gc.{k}": m for k, m in garbled.circuit_messages(self.circuit()).items()}
        share = garbled.share_message((self.count,), self.bits + 1, self.sigma)
        return out | {"share": share, "bits": garbled.bits_message(self.count)} | circuit

    @property
    def ots(self) -> int:
        """Random COTs the garbled comparison consumes: Alice's input bits."""
        return self.circuit().input_count("evaluator")

    def randomizers(self, key_bits: int) -> dict[str, int]:
        """The fresh randomizers of a run, from the public sizes: Bob encrypts a and b;
        garbled, he re-randomises his packed shares and Alice encrypts the bits back if
        they stay encrypted (``none``); DGK, the comparison's and the reveal's."""
        k = self.count
        if self.bound:
            return {"alice": 0, "bob": 2 * k + self.share_plan(key_bits).randomizers()["bob"]}
        if self.comparison == "garbled":
            _, per = garbled.share_slots(self.bits + 1, self.sigma, key_bits)
            back = k if self.reveal_to == "none" else 0  # her E(b ^ m)
            return {"alice": back, "bob": 2 * k + -(-k // per)}
        parts = (self.spec().randomizers(), reveal_randomizers(self.reveal_to, k))
        return {p: sum(part[p] for part in parts) + (2 * k if p == "bob" else 0) for p in parts[0]}

    @classmethod
    def from_config(cls, section: Mapping) -> Params:
        return params_from_config(cls, section, "compare")


def check_values(values, count: int, bits: int, name: str = "input") -> list[int]:
    """Plaintext integers: exactly ``count`` of them, each |x| < 2^(bits-1)."""
    arr = np.asarray(values, dtype=object).reshape(-1) if not np.isscalar(values) else None
    if arr is None:
        raise InvalidInputError(f"{name} must be a sequence of integers")
    if arr.size != count:
        raise ShapeMismatchError(f"{name} has {arr.size} values, declared {count}")
    out = []
    for v in arr:
        if isinstance(v, bool | np.bool_):
            raise InvalidInputError(f"{name}: booleans are not integers")
        if isinstance(v, float | np.floating):
            if not math.isfinite(v) or v != int(v):
                raise InvalidInputError(f"{name}: {v!r} is not an integer")
            v = int(v)
        if not isinstance(v, int | np.integer):
            raise InvalidInputError(f"{name}: {v!r} is not an integer")
        v = int(v)
        if abs(v) >= 1 << (bits - 1):
            raise InvalidInputError(f"{name}: |{v}| >= 2^(l-1) with l = {bits}")
        out.append(v)
    return out


def alice(ctx, private, params: Params):
    """Key holder: sends her keys, answers the comparison; returns the bits if revealed to her."""
    if params.comparison == "garbled":
        return _alice_garbled(ctx, params)
    spec = params.spec()
    with ctx.phase("setup"):
        dgk_sk = alice_send_keys(
            ctx, spec, params.evaluator, dgk_bits=params.dgk_bits, dgk_t=params.dgk_t
        )  # step 0
    with ctx.phase("compare"):
        alice_compare(ctx, dgk_sk, spec, params.evaluator)  # steps 1-4
    with ctx.phase("reveal"):
        out = alice_reveal(ctx, (spec.count,), 1, params.reveal_to, params.evaluator)  # step 5
    return None if out is None else [bool(v) for v in out]


def bob(ctx, pairs, params: Params):
    """Evaluator: holds (a, b); encrypts them under Alice's key and compares a_i < b_i."""
    if pairs is None or np.isscalar(pairs) or len(pairs) != 2:
        raise InvalidInputError("Bob's input is the pair (a, b) of integer sequences")
    spec = params.spec()
    a = check_values(pairs[0], spec.count, spec.bits, "a")
    b = check_values(pairs[1], spec.count, spec.bits, "b")
    if params.comparison == "garbled":
        return _bob_garbled(ctx, a, b, params)
    with ctx.phase("setup"):
        pk, dgk_pk = bob_recv_keys(ctx, spec, params.key_holder, dgk_bits=params.dgk_bits)
        _ = dgk_pk.table  # the fixed-base table of h, once per key
    with ctx.phase("encrypt inputs"):
        enc_a = CipherArray.encrypt_encoded(pk, a, 0)
        enc_b = CipherArray.encrypt_encoded(pk, b, 0)
    with ctx.phase("compare"):
        lt = bob_compare(ctx, enc_a, enc_b, dgk_pk, spec, params.key_holder)  # steps 1-4
    with ctx.phase("reveal"):
        out = bob_reveal(ctx, lt, 1, params.reveal_to, params.key_holder)  # step 5
    if params.reveal_to == "bob":
        return [bool(v) for v in out]
    return lt if params.reveal_to == "none" else None


def _alice_garbled(ctx, params: Params):
    """Key holder of the garbled comparison: her key, the OT setup, then her half."""
    pk, _ = ctx.keypair
    with ctx.phase("setup"):
        ctx.send(params.evaluator, params.messages()["pk"], pk)
        evaluator = garbled.alice_setup(ctx, 0, params.evaluator, refill=0)
    with ctx.phase("compare"):  # the OT extension, the shares and the circuit
        out = circuits.alice_compare(
            ctx, evaluator, params.count, params.bits, params.sigma, params.reveal_to
        )
    return None if out is None else [bool(v) for v in out]


def _bob_garbled(ctx, a: list[int], b: list[int], params: Params):
    """Evaluator (in the DGK sense; the garbler here) of the garbled comparison."""
    with ctx.phase("setup"):
        pk = ctx.recv(params.key_holder, params.messages()["pk"])
        garbler = garbled.bob_setup(ctx, 0, params.key_holder, refill=0)
    with ctx.phase("encrypt inputs"):
        enc_a = CipherArray.encrypt_encoded(pk, a, 0)
        enc_b = CipherArray.encrypt_encoded(pk, b, 0)
    with ctx.phase("compare"):
        out = circuits.bob_compare(
            ctx, garbler, enc_a, enc_b, params.bits, params.sigma, params.reveal_to
        )
    if params.reveal_to == "bob":
        return [bool(v) for v in out]
    return out if params.reveal_to == "none" else None


def _descriptor(
    name, summary, params, key_holder, evaluator, evaluator_input, messages, example, budget
):
    """A protocol of the two comparison roles: the key holder (an Alice, who holds the
    keys) and the evaluator (a Bob, whose input ``evaluator_input`` is an integer array);
    ``budget(params, key_bits)``: its randomizers."""
    return ProtocolDescriptor(
        example=example,
        randomizers=lambda p, key_bits, inputs: budget(p, key_bits),
        name=name,
        summary=summary,
        params=params,
        roles=(
            Role("key_holder", key_holder, kind="alice", holds_key=True),
            Role("evaluator", evaluator, kind="bob", input=evaluator_input, load=load_array),
        ),
        role_for=assign_by_field(key_holder="key_holder", evaluator="evaluator"),
        messages=messages,
    )


def example(key_bits: int, seed: int) -> Example:
    """Bob compares three pairs of 8-bit integers (random, then the extremes and a tie)
    and learns the bits [a_i < b_i]; Alice learns nothing."""
    rng = np.random.default_rng(seed)
    top = (1 << 7) - 1
    pairs = (rng.integers(-top, top + 1, size=(2, 3)).tolist(), [[-top, top, 5], [top, -top, 5]])
    return Example(
        params={"bits": 8, "count": 3, "reveal_to": "bob"},
        parties={"alice": "key_holder", "bob": "evaluator"},
        inputs=tuple({"bob": p} for p in pairs),
        expected=lambda i: {"alice": None, "bob": [a < b for a, b in zip(*i["bob"])]},  # fmt: skip
        bad_inputs=({"bob": [[1, 2, 3], [1, 2]]}, {"bob": [[1000, 0, 0], [0, 0, 0]]}),
        config=lambda directory: {"alice": {}, "bob": {"pairs": pairs[0]}},
    )


PROTOCOL = _descriptor(
    NAME,
    "DGK/Veugen comparison of k encrypted integer pairs: [a_i < b_i] in 4 rounds",
    Params.from_config,
    alice,
    bob,
    "pairs",
    lambda params, key_bits: params.messages().values(),
    example,
    Params.randomizers,
)


def _argmax_alice_garbled(ctx, params: ArgmaxParams):
    pk, _ = ctx.keypair
    bound = params.labels_bound if params.carries_labels else None
    with ctx.phase("setup"):
        ctx.send(params.evaluator, Message("cmp.pk", Key()), pk)
        # the OT extension is input-independent: it runs in the setup, as the offline
        # randomizers do, for exactly her share bits
        evaluator = garbled.alice_setup(ctx, params.ots, params.evaluator, refill=0)
    with ctx.phase("tournament"):
        return circuits.alice_argmax(
            ctx, evaluator, params.count, params.bits, params.sigma, params.reveal_to, bound
        )


def _argmax_bob_garbled(ctx, x: list[int], labels, params: ArgmaxParams):
    with ctx.phase("setup"):
        pk = ctx.recv(params.key_holder, Message("cmp.pk", Key()))
        garbler = garbled.bob_setup(ctx, params.ots, params.key_holder, refill=0)
    order = list(range(params.count))
    if params.tie_break == "random":
        ctx.rng.shuffle(order)
    labels = list(range(params.count)) if labels is None else [int(v) for v in labels]
    if len(labels) != params.count or any(not 0 <= v <= params.labels_bound for v in labels):
        raise InvalidInputError(
            f"labels must be {params.count} integers in [0, {params.labels_bound}]"
        )
    with ctx.phase("encrypt inputs"):
        enc_x = CipherArray.encrypt_encoded(pk, [x[i] for i in order], 0)
    carried = [labels[i] for i in order] if params.carries_labels else None
    bound = params.labels_bound if params.carries_labels else None
    with ctx.phase("tournament"):
        return circuits.bob_argmax(
            ctx, garbler, enc_x, params.bits, params.sigma, params.reveal_to, carried, bound
        )


def argmax_alice(ctx, private, params: ArgmaxParams):
    """Key holder of the standalone argmax: returns the winner's label if revealed to her."""
    if params.comparison == "garbled":
        return _argmax_alice_garbled(ctx, params)
    with ctx.phase("setup"):
        dgk_sk = alice_send_keys(
            ctx, params.spec(), params.evaluator, dgk_bits=params.dgk_bits, dgk_t=params.dgk_t
        )
    with ctx.phase("tournament"):
        alice_argmax(ctx, dgk_sk, params, params.evaluator)
    out = alice_reveal(
        ctx, (1,), params.labels_bound, params.reveal_to, params.evaluator, ARGMAX_TAGS
    )
    return None if out is None else out[0]


def argmax_bob(ctx, private, params: ArgmaxParams):
    """Evaluator of the standalone argmax: input ``values`` (k integers) or
    ``(values, labels)``; returns the label (``reveal_to = "bob"``), and/or E(max)."""
    if isinstance(private, tuple) and len(private) == 2:
        values, labels = private
    else:
        values, labels = private, None
    x = check_values(values, params.count, params.bits, "values")
    if params.comparison == "garbled":
        return _argmax_bob_garbled(ctx, x, labels, params)
    with ctx.phase("setup"):
        pk, dgk_pk = bob_recv_keys(ctx, params.spec(), params.key_holder, dgk_bits=params.dgk_bits)
        _ = dgk_pk.table
    with ctx.phase("encrypt inputs"):
        enc_x = CipherArray.encrypt_encoded(pk, x, 0)
    with ctx.phase("tournament"):
        enc_label, enc_max = bob_argmax(ctx, enc_x, dgk_pk, params, labels, params.key_holder)
    out = bob_reveal(
        ctx, enc_label, params.labels_bound, params.reveal_to, params.key_holder, ARGMAX_TAGS
    )
    label = (
        out[0] if params.reveal_to == "bob" else (enc_label if params.reveal_to == "none" else None)
    )
    if params.with_max:
        return {"label": label, "max": enc_max}
    return label


def argmax_randomizers(params: ArgmaxParams, key_bits: int) -> dict[str, int]:
    """The fresh randomizers of a standalone argmax: Bob encrypts the k values; garbled,
    he re-randomises his packed shares; DGK, the tournament's (Bob's labels included) and
    the reveal's."""
    k = params.count
    if params.comparison == "garbled" and params.bound:
        return {"alice": 0, "bob": k + params.share_plan(key_bits).randomizers()["bob"]}
    if params.comparison == "garbled":
        _, per = garbled.share_slots(params.bits, params.sigma, key_bits)
        return {"alice": 0, "bob": k + -(-k // per)}
    parts = (params.randomizers(), reveal_randomizers(params.reveal_to))
    return {p: sum(part[p] for part in parts) + (k if p == "bob" else 0) for p in parts[0]}


def argmax_example(key_bits: int, seed: int) -> Example:
    """Alice learns the index of the largest of Bob's four 16-bit integers (random; then
    ties, which go to the lowest index); Bob learns nothing."""
    rng = np.random.default_rng(seed)
    values = (rng.integers(-30000, 30000, size=4).tolist(), [9, -30000, 9, 30000 - 1])
    return Example(
        params={"bits": 16, "count": 4, "reveal_to": "alice"},
        parties={"alice": "key_holder", "bob": "evaluator"},
        inputs=tuple({"bob": v} for v in values),
        expected=lambda i: {"alice": int(np.argmax(i["bob"])), "bob": None},
        bad_inputs=({"bob": [1, 2, 3]}, {"bob": [2**20, 0, 0, 0]}, {"bob": [0.5, 0, 0, 0]}),
        config=lambda directory: {"alice": {}, "bob": {"values": values[1]}},
    )


ARGMAX = _descriptor(
    ARGMAX_NAME,
    "secure argmax of k encrypted integers: a tournament of DGK comparisons",
    ArgmaxParams.from_config,
    argmax_alice,
    argmax_bob,
    "values",
    lambda params, key_bits: params.messages(),
    argmax_example,
    argmax_randomizers,
)
