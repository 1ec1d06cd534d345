"""Decisions on encrypted scores, against a reference model or not: the one argmax stage
under keyword recognition and spotting (garbage model) and speaker recognition (UBM).

Thesis 003, 4.2.1 ("Secure Keyword Recognition": Alice learns only the argmax) and 5.2.2
(verification against a background model).  Bob holds E(s_0..s_(k-1)) (integers within a public
bound); the comparisons are :mod:`protocols.compare`'s (DGK with
Veugen's correction, a tournament over Bob's random order, so ties go to a uniformly
random one of the tied labels).  Two public rules:

* ``argmax``: Bob adds the public ``offset`` to the reference's score (if there is a
  reference), the tournament finds the winner, and its label is revealed to Alice.
  Keyword spotting: the garbage model wins -- "no keyword" -- unless the best keyword
  beats it by more than the offset; speaker identification: the UBM with the margin.
* ``beats``: Bob learns the bit [s_ref + offset < max of the others] (the max of one or
  of several non-reference scores, which stays encrypted).  Speaker verification (the
  claim against the UBM) and anonymous verification.

Who learns what (semi-honest): Alice learns the label (``argmax``) or nothing (``beats``);
Bob learns nothing (``argmax``) or the bit (``beats``); the comparisons' own views are
masked values (statistical distance 2^-sigma) and uniform bits
(:mod:`protocols.compare`'s docstring).  Every message is declared from public sizes
(:meth:`DecisionSpec.messages`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from protocols import compare
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError
from smc_hmm.messages import Message

RULES = ("argmax", "beats")


@dataclass(frozen=True)
class DecisionSpec:
    """Public parameters of a decision over ``count`` scores.

    ``bound``: the public bound on every |score| once the offset is added; ``bits``: the
    comparisons' bit length (at least bits(bound) + 1, the default).
    ``reference``: the index of the reference model (garbage model, UBM) or None;
    ``offset``: the public integer added to its score; ``rule``: ``argmax`` (label to
    Alice) or ``beats`` (bit to Bob); ``tags``: the reveal's message tags."""

    count: int
    bound: int
    rule: str = "argmax"
    reference: int | None = None
    offset: int = 0
    sigma: int = 40
    tags: tuple[str, str, str] = compare.ARGMAX_TAGS
    bits: int | None = None

    def __post_init__(self):
        if self.bits is None:
            object.__setattr__(self, "bits", int(self.bound).bit_length() + 1)
        if (1 << (self.bits - 1)) - 1 < self.bound:
            raise InvalidInputError(f"{self.bits}-bit comparisons cannot hold the bound")
        if self.rule not in RULES:
            raise InvalidInputError(f"rule must be one of {RULES}, got {self.rule!r}")
        if self.reference is not None and not 0 <= self.reference < self.count:
            raise InvalidInputError(f"reference {self.reference} is not one of {self.count}")
        if self.rule == "beats" and (self.reference is None or self.count < 2):
            raise InvalidInputError("the 'beats' rule needs a reference and another score")

    @property
    def others(self) -> list[int]:
        """The non-reference scores (``beats``)."""
        return [i for i in range(self.count) if i != self.reference]

    def argmax_params(self) -> compare.ArgmaxParams:
        if self.rule == "argmax":
            count, reveal = max(self.count, 2), "alice"
        else:
            count, reveal = max(len(self.others), 2), "none"
        return compare.ArgmaxParams(
            bits=self.bits,
            count=count,
            sigma=self.sigma,
            reveal_to=reveal,
            tie_break="random",
            with_max=reveal == "none",
        )

    def compare_spec(self) -> compare.CompareSpec:
        return compare.CompareSpec(self.bits, 1, self.sigma)

    @property
    def reveal_bound(self) -> int:
        return self.count - 1 if self.rule == "argmax" else 1

    def randomizers(self) -> dict[str, int]:
        """The fresh Paillier randomizers each role draws, from the comparisons' own
        counts (what an offline phase precomputes)."""
        out = {"alice": 0, "bob": 0}
        parts = [compare.reveal_randomizers("alice" if self.rule == "argmax" else "bob")]
        if self.rule == "argmax" or len(self.others) > 1:
            parts.append(self.argmax_params().randomizers())
        if self.rule == "beats":
            parts.append(self.compare_spec().randomizers())
        for part in parts:
            out = {k: out[k] + part[k] for k in out}
        return out

    def messages(self) -> list[Message]:
        """Every message of the decision, declared from public sizes (for the transcript
        harness and for readers)."""
        out = list(self.compare_spec().messages().values())
        out += self.argmax_params().messages()
        out += list(compare.reveal_messages((1,), self.reveal_bound, self.tags, self.sigma))
        return out


def bob_decide(ctx, scores: CipherArray, spec: DecisionSpec, peer: str = "alice"):
    """Bob: ``argmax`` returns None (Alice learns the label); ``beats`` returns the bit."""
    if scores.shape != (spec.count,):
        raise InvalidInputError(f"{scores.shape} scores for a decision over {spec.count}")
    bound = spec.bound
    values = scores.with_scale(0)
    if spec.reference is not None and spec.offset:
        shift = np.zeros(spec.count, dtype=object)
        shift[spec.reference] = spec.offset
        values = values.add_encoded(shift)
    values = values.with_bound(bound)
    _, dgk_pk = compare.bob_recv_keys(ctx, spec.compare_spec(), peer)
    if spec.rule == "argmax":
        label, _ = compare.bob_argmax(ctx, values, dgk_pk, spec.argmax_params(), peer=peer)
        compare.bob_reveal(ctx, label, spec.reveal_bound, "alice", peer, spec.tags, spec.sigma)
        return None
    others = spec.others
    best = values[others[0] : others[0] + 1]
    if len(others) > 1:
        group = CipherArray.concatenate([values[i : i + 1] for i in others]).with_bound(bound)
        _, best = compare.bob_argmax(ctx, group, dgk_pk, spec.argmax_params(), peer=peer)
    reference = values[spec.reference : spec.reference + 1]
    bit = compare.bob_compare(
        ctx, reference, best.with_bound(bound), dgk_pk, spec.compare_spec(), peer
    )
    (accept,) = compare.bob_reveal(ctx, bit, 1, "bob", peer, spec.tags, spec.sigma)
    return bool(accept)


def alice_decide(ctx, spec: DecisionSpec, peer: str = "bob") -> int | None:
    """Alice's half: ``argmax`` returns the winner's index; ``beats`` returns None."""
    dgk_sk = compare.alice_send_keys(ctx, spec.compare_spec(), peer)
    if spec.rule == "argmax":
        compare.alice_argmax(ctx, dgk_sk, spec.argmax_params(), peer)
        (index,) = compare.alice_reveal(
            ctx, (1,), spec.reveal_bound, "alice", peer, spec.tags, spec.sigma
        )
        return index
    if len(spec.others) > 1:
        compare.alice_argmax(ctx, dgk_sk, spec.argmax_params(), peer)
    compare.alice_compare(ctx, dgk_sk, spec.compare_spec(), peer)
    compare.alice_reveal(ctx, (1,), 1, "bob", peer, spec.tags, spec.sigma)
    return None
