"""Decisions on encrypted scores, against a reference model or not: the one argmax stage
under keyword recognition and spotting (garbage model), speaker recognition (UBM) and the
audio matching's best window, and the tournaments of many maxima in lockstep
(:class:`Tournament`) under the thesis's Viterbi recursion and the matching's ``dgk``
mode.

Thesis 003, 4.2.1 ("Secure Keyword Recognition": Alice learns only the argmax) and 5.2.2
(verification against a background model, also of a claim Bob never sees).  Bob holds
E(s_0..s_(k-1)) (integers within a public bound); the comparisons are
:mod:`protocols.stages.dgk`'s (DGK with Veugen's correction, a tournament over Bob's random
order, so ties go to a uniformly random one of the tied labels).  Three public rules:

* ``argmax``: Bob adds the public ``offset`` to the reference's score (if there is a
  reference), the tournament finds the winner, and its label is revealed to Alice.
  Keyword spotting: the garbage model wins -- "no keyword" -- unless the best keyword
  beats it by more than the offset; speaker identification: the UBM with the margin.
* ``beats``: Bob learns the bit [s_ref + offset < max of the others] (the max of one or
  of several non-reference scores, which stays encrypted).  Speaker verification (the
  claim, public there, against the UBM).
* ``claimed``: Alice chooses one non-reference score k* and Bob learns only the bit
  [s_ref + offset < s_k*], never k*.  Anonymous speaker verification (the claimed
  speaker against the UBM, the claim private).  Steps:

  1. Alice -> Bob ``select_tag``: E(c_k) for the K = count - 1 non-reference scores in
     index order, c the one-hot vector of her choice (declared bound 1).
  2. One batched comparison of K pairs, E(b_k) = E([s_ref + offset < s_k]), the bits
     kept encrypted at Bob (:func:`protocols.stages.dgk.bob_compare`, no reveal).
  3. One batched secure multiplication of K pairs, E(b_k c_k)
     (:func:`protocols.stages.primitives.bob_secure_multiply`); Bob sums them:
     E(b_k*) = E(sum_k b_k c_k).
  4. The bit is revealed to Bob (:func:`protocols.stages.dgk.bob_reveal`, ``"bob"``).

  Every model's comparison runs whatever the choice, so Bob's frames are the same for
  every k* (the transcript tests).  **Semi-honest only.**  A one-hot c is assumed, not
  checked: Bob cannot check it without learning more.  A client who sends another vector
  learns nothing more, but what it gets accepted changes: any vector gives
  sum_k c_k b_k, so an acceptance still needs some b_k = 1, i.e. some enrolled speaker
  beating the reference.  A client who also deviates inside the multiplication or
  the comparisons can make the bit anything (as in every protocol of the thesis,
  which assumes semi-honest parties).

**The garbled default** (``comparison = "garbled"``, ``docs/garbled.md``): Bob shares the
scores (offset added) as bound shares (:func:`protocols.stages.bound.bob_bind_shares`):
Alice decrypts only masked values, uniform within 2^-sigma, and with them the limbs of
one MAC, alpha sum_i rho_i s_i, under masks of their own.  She enters every share whole;
after her padded choices Bob sends the MAC corrections and the seed of rho
(``dec.key``), she enters D_A and he D_B, and one circuit Bob garbles
(:func:`protocols.stages.circuits.decision_circuit`) checks D_A = D_B and every
reconstructed score within its l bits, then applies the rule: the argmax's index to Alice
(ties: the lowest index, as :func:`decide_plain`), or the bit to Bob, each ANDed with
the check.  For ``claimed`` Alice's choice is her index bits into the circuit, which
selects the score there: no vector outside the one-hot ones exists, and an index past
the others is a refused claim.  The bit reaches Bob as the labels Alice returns, which
she cannot forge, so she cannot flip it; a share she shifts fails the check (it passes
with probability 3/p, p = 2^61 - 1), so she cannot shift the scores the circuit
compares: ``argmax`` raises after her last message, the bits come out 0.  Messages: the
garbled stage's setup, the packed shares and MAC limbs, her padded choices, the key
message, her padded choices of D_A, the circuit (two flights more than plain shares).
``bind = False`` keeps plain shares, mod 2^l, that she could shift: the keyword's
``forward`` scoring (the thesis's semi-honest mode) needs it, its scores being wider
than the MAC field (61 bits).

What a deviating Alice still learns, bound: the declared output, and whether the run
aborted -- a score outside its public bound (reachable only through inputs outside
theirs, e.g. a huge feature in ``linear``) fails the range check: one bit a session,
[some |s_i| >= 2^(l-1)].

Who learns what (semi-honest; the dgk mode): Alice learns the label (``argmax``) or
nothing (``beats``, ``claimed``); Bob learns nothing (``argmax``) or the bit (``beats``,
``claimed``: not which score was compared); the comparisons' own views are masked values
(statistical distance 2^-sigma) and uniform bits (:mod:`protocols.stages.dgk`'s
docstring), the multiplication's are operands plus masks of sigma extra bits
(:mod:`protocols.stages.primitives`).  Every message is declared from public sizes
(:meth:`DecisionSpec.messages`).  :func:`decide_plain` is the same rule on plaintext
integers (the tests' and benchmarks' reference).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from protocols.stages import bound as bd
from protocols.stages import dgk, garbled
from protocols.stages.circuits import claim_width, decision_circuit
from protocols.stages.primitives import (
    MaskSpec,
    alice_secure_multiply,
    bob_secure_multiply,
    multiply_randomizers,
)
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError
from smc_hmm.gc import arith
from smc_hmm.messages import Ciphertexts, Message

RULES = ("argmax", "beats", "claimed")
#: the garbled decision's messages: ``dec.share`` (the bound shares), ``dec.key``
TAG = "dec"
#: the plain shares' message (``bind = False``)
SHARE_TAG = "dec.share"


@dataclass(frozen=True)
class DecisionSpec:
    """Public parameters of a decision over ``count`` scores.

    ``bound``: the public bound on every |score| once the offset is added; ``bits``: the
    comparisons' bit length (at least bits(bound) + 1, the default).
    ``reference``: the index of the reference model (garbage model, UBM) or None;
    ``offset``: the public integer added to its score; ``rule``: ``argmax`` (label to
    Alice), ``beats`` (bit to Bob) or ``claimed`` (bit to Bob for Alice's private choice);
    ``tags``: the reveal's message tags; ``select_tag``: the tag of Alice's encrypted
    choice (``claimed``); ``comparison``: ``garbled`` (the default) or ``dgk``;
    ``bind`` (garbled): Alice's shares bound by the MAC check (the default; the scores
    need fewer than 61 bits) or, for the thesis's semi-honest modes whose scores are
    wider, plain shares she could shift."""

    count: int
    bound: int
    rule: str = typed.one_of("argmax", RULES)
    reference: int | None = None
    offset: int = 0
    sigma: int = 40
    tags: tuple[str, str, str] = dgk.ARGMAX_TAGS
    bits: int | None = None
    select_tag: str = "dec.select"
    comparison: str = typed.one_of("garbled", dgk.COMPARISONS)
    bind: bool = True

    def __post_init__(self):
        typed.check_fields(self)
        if self.bits is None:
            object.__setattr__(self, "bits", int(self.bound).bit_length() + 1)
        if self.comparison == "garbled" and self.bind:
            self.share_plan(None)  # the scores fit the MAC field (else PrecisionError)
        if (1 << (self.bits - 1)) - 1 < self.bound:
            raise InvalidInputError(f"{self.bits}-bit comparisons cannot hold the bound")
        if self.reference is not None and not 0 <= self.reference < self.count:
            raise InvalidInputError(f"reference {self.reference} is not one of {self.count}")
        if self.rule != "argmax" and (self.reference is None or self.count < 2):
            raise InvalidInputError(f"the {self.rule!r} rule needs a reference and another score")

    @property
    def others(self) -> list[int]:
        """The non-reference scores (``beats``)."""
        return [i for i in range(self.count) if i != self.reference]

    def one_hot(self, choice: int | None) -> list[int]:
        """``claimed``: Alice's choice (an index other than the reference) as the one-hot
        vector over :attr:`others`."""
        if choice not in self.others:
            raise InvalidInputError(f"the choice must be one of the scores {self.others}")
        return [int(i == choice) for i in self.others]

    def argmax_params(self) -> dgk.ArgmaxParams:
        if self.rule == "argmax":
            count, reveal = max(self.count, 2), "alice"
        else:
            count, reveal = max(len(self.others), 2), "none"
        return dgk.ArgmaxParams(
            bits=self.bits,
            count=count,
            sigma=self.sigma,
            reveal_to=reveal,
            tie_break="random",
            with_max=reveal == "none",
            comparison="dgk",
        )

    def compare_spec(self) -> dgk.CompareSpec:
        return dgk.CompareSpec(self.bits, 1, self.sigma)

    # -- garbled -------------------------------------------------------------------------

    @property
    def circuit(self):
        sigma = self.sigma if self.bind else None
        return decision_circuit(self.count, self.bits, self.rule, self.reference, sigma)

    @property
    def cots(self) -> int:
        """Alice's input bits: her shares (bound: whole slots), (``claimed``) her index
        and (bound) D_A."""
        return self.circuit.input_count("evaluator")

    def share_plan(self, key_bits: int | None) -> bd.SharePlan:
        return bd.SharePlan(self.count, self.bits, self.sigma, key_bits)

    def claimed_compare_spec(self) -> dgk.CompareSpec:
        """``claimed``: one batched comparison of the reference against every other score."""
        return dgk.CompareSpec(self.bits, len(self.others), self.sigma)

    def select_spec(self) -> MaskSpec:
        """``claimed``: the secure multiplication of the bits by Alice's one-hot choice."""
        return MaskSpec((0, 0), (1, 1), (len(self.others),), self.sigma)

    def select_message(self) -> Message:
        """``claimed``: Alice's encrypted one-hot choice over the non-reference scores."""
        return Message(self.select_tag, Ciphertexts(0, 1, (len(self.others),)))

    @property
    def reveal_bound(self) -> int:
        return self.count - 1 if self.rule == "argmax" else 1

    def randomizers(self, key_bits: int) -> dict[str, int]:
        """The fresh Paillier randomizers each role draws, from the comparisons' own
        counts (what an offline phase precomputes); garbled: Bob's packed shares."""
        if self.comparison == "garbled" and self.bind:
            return self.share_plan(key_bits).randomizers()
        if self.comparison == "garbled":
            _, per = garbled.share_slots(self.bits, self.sigma, key_bits)
            return {"alice": 0, "bob": -(-self.count // per)}
        out = {"alice": 0, "bob": 0}
        parts = [dgk.reveal_randomizers("alice" if self.rule == "argmax" else "bob")]
        if self.rule == "argmax" or (self.rule == "beats" and len(self.others) > 1):
            parts.append(self.argmax_params().randomizers())
        if self.rule == "beats":
            parts.append(self.compare_spec().randomizers())
        if self.rule == "claimed":
            k = len(self.others)
            parts += [
                {"alice": k, "bob": 0},  # Alice's encrypted choice
                self.claimed_compare_spec().randomizers(),
                multiply_randomizers(k),
            ]
        for part in parts:
            out = {k: out[k] + part[k] for k in out}
        return out

    def messages(self, key_bits: int | None = None) -> list[Message]:
        """Every message of the decision, declared from public sizes (for the transcript
        harness and for readers; garbled: the shares' counts need ``key_bits``)."""
        if self.comparison == "garbled":
            out = list(garbled.setup_messages(self.cots).values())
            if self.bind:
                return out + bd.shared_messages(self.share_plan(key_bits), self.circuit, TAG)
            shape = (self.count,)
            shares = garbled.share_message(shape, self.bits, self.sigma, key_bits, SHARE_TAG)
            return [*out, shares, *garbled.circuit_messages(self.circuit).values()]
        if self.rule == "claimed":
            out = [self.select_message(), *self.claimed_compare_spec().messages().values()]
        else:
            out = list(self.compare_spec().messages().values())
            out += self.argmax_params().messages()
        out += list(dgk.reveal_messages((1,), self.reveal_bound, self.tags, self.sigma))
        return out


def decide_plain(spec: DecisionSpec, scores, choice: int | None = None):
    """The rule on plaintext integers, as the secure stage computes it (the reference of
    the tests and benchmarks): ``argmax`` returns the winner's index (ties: the lowest
    index here, a uniformly random tied one in the secure stage); ``beats`` and
    ``claimed`` return the bit, ``claimed`` for the score ``choice`` (an index other than
    the reference)."""
    values = [int(v) for v in scores]
    if len(values) != spec.count:
        raise InvalidInputError(f"{len(values)} scores for a decision over {spec.count}")
    if spec.reference is not None:
        values[spec.reference] += spec.offset
    if spec.rule == "argmax":
        return max(range(spec.count), key=lambda i: (values[i], -i))
    reference = values[spec.reference]
    if spec.rule == "beats":
        return reference < max(values[i] for i in spec.others)
    bits = [int(reference < values[i]) for i in spec.others]
    return bool(sum(b * c for b, c in zip(bits, spec.one_hot(choice))))


def bob_decide(ctx, scores: CipherArray, spec: DecisionSpec, peer: str = "alice"):
    """Bob: ``argmax`` returns None (Alice learns the label); ``beats`` and ``claimed``
    return the bit."""
    if scores.shape != (spec.count,):
        raise InvalidInputError(f"{scores.shape} scores for a decision over {spec.count}")
    bound = spec.bound
    values = scores.with_scale(0)
    if spec.reference is not None and spec.offset:
        shift = np.zeros(spec.count, dtype=object)
        shift[spec.reference] = spec.offset
        values = values.add_encoded(shift)
    values = values.with_bound(bound)
    if spec.comparison == "garbled" and not spec.bind:
        garbler = garbled.bob_setup(ctx, spec.cots, peer)
        mine = garbled.bob_share(ctx, values, spec.bits, spec.sigma, peer, SHARE_TAG)
        out = garbler.run(ctx, spec.circuit, mine.reshape(-1))
        return None if spec.rule == "argmax" else bool(out[0])
    if spec.comparison == "garbled":
        return _bob_garbled(ctx, values, spec, peer)
    _, dgk_pk = dgk.bob_recv_keys(ctx, spec.compare_spec(), peer)
    if spec.rule == "argmax":
        label, _ = dgk.bob_argmax(ctx, values, dgk_pk, spec.argmax_params(), peer=peer)
        dgk.bob_reveal(ctx, label, spec.reveal_bound, "alice", peer, spec.tags, spec.sigma)
        return None
    if spec.rule == "claimed":
        return _bob_claimed(ctx, values, dgk_pk, spec, peer)
    others = spec.others
    best = values[others[0] : others[0] + 1]
    if len(others) > 1:
        group = CipherArray.concatenate([values[i : i + 1] for i in others]).with_bound(bound)
        _, best = dgk.bob_argmax(ctx, group, dgk_pk, spec.argmax_params(), peer=peer)
    reference = values[spec.reference : spec.reference + 1]
    bit = dgk.bob_compare(ctx, reference, best.with_bound(bound), dgk_pk, spec.compare_spec(), peer)
    (accept,) = dgk.bob_reveal(ctx, bit, 1, "bob", peer, spec.tags, spec.sigma)
    return bool(accept)


def _bob_garbled(ctx, values: CipherArray, spec: DecisionSpec, peer: str):
    """Bob's garbled half on bound shares: his bit (``beats``, ``claimed``) or None."""
    garbler = garbled.bob_setup(ctx, spec.cots, peer)
    binding = bd.bob_bind_shares(ctx, values, spec.share_plan(values.public_key.bits), peer, TAG)
    out = bd.bob_run_shared(ctx, garbler, binding, spec.circuit, tag=TAG)
    return None if spec.rule == "argmax" else bool(out[0])


def _alice_garbled(ctx, spec: DecisionSpec, peer: str, choice: int | None):
    """Alice's garbled half on bound shares: the index (``argmax``) or None."""
    pk, _ = ctx.keypair
    evaluator = garbled.alice_setup(ctx, spec.cots, peer)
    binding = bd.alice_bind_shares(ctx, spec.share_plan(pk.bits), peer, TAG)
    extra = claim_bits(spec, choice) if spec.rule == "claimed" else ()
    out = bd.alice_run_shared(ctx, evaluator, binding, spec.circuit, extra, TAG)
    return int(arith.from_bits(out, signed=False)) if spec.rule == "argmax" else None


def claim_bits(spec: DecisionSpec, choice: int) -> np.ndarray:
    """``claimed``, garbled: Alice's choice as her index bits over the others."""
    return arith.to_bits(spec.others.index(choice), claim_width(spec.count))


def _bob_claimed(ctx, values: CipherArray, dgk_pk, spec: DecisionSpec, peer: str) -> bool:
    """``claimed`` (module docstring, steps 1-4): every comparison runs, Alice's encrypted
    one-hot choice selects the bit."""
    choice = ctx.recv(peer, spec.select_message())  # step 1: E(c_k), bound 1
    ref = values[spec.reference : spec.reference + 1]
    k = len(spec.others)
    refs = CipherArray.concatenate([ref] * k).with_bound(spec.bound)
    others = CipherArray.concatenate([values[i : i + 1] for i in spec.others])
    # step 2: E(b_k) = E([s_ref + offset < s_k]) for every k, kept encrypted
    bits = dgk.bob_compare(
        ctx, refs, others.with_bound(spec.bound), dgk_pk, spec.claimed_compare_spec(), peer
    )
    # step 3: E(b_k c_k), summed: E(b_k*) for Alice's choice k* (a one-hot c: bound 1)
    picked = bob_secure_multiply(ctx, bits, choice, spec.select_spec(), peer)
    chosen = picked.with_bound(1).sum().with_bound(1).reshape(1)
    # step 4: the bit to Bob
    (accept,) = dgk.bob_reveal(ctx, chosen, 1, "bob", peer, spec.tags, spec.sigma)
    return bool(accept)


def alice_decide(ctx, spec: DecisionSpec, peer: str = "bob", choice: int | None = None):
    """Alice's half: ``argmax`` returns the winner's index; ``beats`` and ``claimed``
    return None.  ``choice``: ``claimed``'s private index (any score but the reference)."""
    if spec.rule == "claimed":
        one_hot = spec.one_hot(choice)  # a bad choice is refused before anything is sent
    if spec.comparison == "garbled" and not spec.bind:
        evaluator = garbled.alice_setup(ctx, spec.cots, peer)
        bits = garbled.alice_share(ctx, (spec.count,), spec.bits, spec.sigma, peer, SHARE_TAG)
        if spec.rule == "claimed":
            bits = np.concatenate([bits.reshape(-1), claim_bits(spec, choice)])
        out = evaluator.run(ctx, spec.circuit, bits.reshape(-1))
        return int(arith.from_bits(out, signed=False)) if spec.rule == "argmax" else None
    if spec.comparison == "garbled":
        return _alice_garbled(ctx, spec, peer, choice)
    dgk_sk = dgk.alice_send_keys(ctx, spec.compare_spec(), peer)
    if spec.rule == "claimed":
        pk, _ = ctx.keypair
        ctx.send(peer, spec.select_message(), CipherArray.encrypt_encoded(pk, one_hot, 0, 1))
        dgk.alice_compare(ctx, dgk_sk, spec.claimed_compare_spec(), peer)
        alice_secure_multiply(ctx, spec.select_spec(), peer)
        dgk.alice_reveal(ctx, (1,), 1, "bob", peer, spec.tags, spec.sigma)
        return None
    if spec.rule == "argmax":
        dgk.alice_argmax(ctx, dgk_sk, spec.argmax_params(), peer)
        (index,) = dgk.alice_reveal(
            ctx, (1,), spec.reveal_bound, "alice", peer, spec.tags, spec.sigma
        )
        return index
    if len(spec.others) > 1:
        dgk.alice_argmax(ctx, dgk_sk, spec.argmax_params(), peer)
    dgk.alice_compare(ctx, dgk_sk, spec.compare_spec(), peer)
    dgk.alice_reveal(ctx, (1,), 1, "bob", peer, spec.tags, spec.sigma)
    return None


# -- tournaments: many maxima in lockstep by DGK compare-and-select (Viterbi's recursion, --
# -- the matching's best window); the thesis's protocols, semi-honest ---------------------


@dataclass(frozen=True)
class Tournament:
    """Many maxima in lockstep.  ``groups[g]`` lists the entries of group g (indices into
    a flat array of candidates).  Round r holds ``matches[r]``: (group, left node, right
    node) with nodes numbered per group (leaves 0 .. k-1 are the group's entries in order,
    match nodes follow); ``root[g]`` is the node holding group g's maximum."""

    sizes: tuple[int, ...]
    matches: tuple[tuple[tuple[int, int, int, int], ...], ...]  # (group, node, left, right)
    root: tuple[int, ...]

    @classmethod
    def of(cls, sizes: Sequence[int]) -> Tournament:
        current = [list(range(k)) for k in sizes]
        next_node = list(sizes)
        rounds = []
        while any(len(c) > 1 for c in current):
            matches = []
            for g, entries in enumerate(current):
                merged = []
                for i in range(0, len(entries) - 1, 2):
                    node = next_node[g]
                    next_node[g] += 1
                    matches.append((g, node, entries[i], entries[i + 1]))
                    merged.append(node)
                if len(entries) % 2:
                    merged.append(entries[-1])  # a bye
                current[g] = merged
            rounds.append(tuple(matches))
        return cls(tuple(sizes), tuple(rounds), tuple(c[0] for c in current))

    @property
    def comparisons(self) -> int:
        return sum(len(m) for m in self.matches)


def bob_tournament(ctx, values: CipherArray, tour: Tournament, plan, offsets, peer):
    """Bob: the maxima of the groups of ``values`` (flat, group after group, ``offsets[g]``
    the start of group g) and every round's encrypted bits
    (:func:`protocols.stages.dgk.bob_compare_select`: one batched comparison a round)."""
    node_value: list[dict[int, CipherArray]] = []
    for g, k in enumerate(tour.sizes):
        node_value.append({i: values[offsets[g] + i : offsets[g] + i + 1] for i in range(k)})
    bits = []
    bound = plan.value_bound
    for matches in tour.matches:
        left = CipherArray.concatenate([node_value[g][a] for g, _, a, _ in matches])
        right = CipherArray.concatenate([node_value[g][b] for g, _, _, b in matches])
        best, round_bits = dgk.bob_compare_select(
            ctx,
            left.with_bound(bound),
            right.with_bound(bound),
            plan.dgk_pk,
            plan.select_spec(len(matches)),
            peer,
        )
        for i, (g, node, _, _) in enumerate(matches):
            node_value[g][node] = best[i : i + 1]
        bits.append(round_bits)
    maxima = CipherArray.concatenate([node_value[g][tour.root[g]] for g in range(len(tour.sizes))])
    return maxima.with_bound(bound), bits


def alice_tournament(ctx, dgk_sk, tour: Tournament, plan, peer) -> list:
    """Alice's role in :func:`bob_tournament`; returns her shares of every round's bits."""
    return [
        dgk.alice_compare_select(ctx, dgk_sk, plan.select_spec(len(matches)), peer)
        for matches in tour.matches
    ]


def bob_descend(ctx, weights, tour: Tournament, bits, plan, peer):
    """Bob: the weight of every group's root (a CipherArray of shape (1,), or None for the
    constant 1) flows down its tree -- a match with bit b sends w b to its right operand and
    w - w b to its left -- one batch of products per tree level
    (:func:`protocols.stages.dgk.bob_select_products`); returns per group its leaves' weights."""
    node_weight = [{tour.root[g]: w} for g, w in enumerate(weights)]
    for r in reversed(range(len(tour.matches))):
        matches = tour.matches[r]
        known = [i for i, (g, node, _, _) in enumerate(matches) if node_weight[g][node] is not None]
        products = {}
        if known:
            w = CipherArray.concatenate(
                [node_weight[matches[i][0]][matches[i][1]] for i in known]
            ).with_bound(1)
            prod = dgk.bob_select_products(
                ctx, bits[r].take(known), w, plan.product_spec(len(known)), peer
            )
            products = {i: prod[n : n + 1] for n, i in enumerate(known)}
        for i, (g, node, a, b_node) in enumerate(matches):
            w = node_weight[g][node]
            if w is None:  # the constant 1: right gets b, left 1 - b
                right = bits[r].bit[i : i + 1]
                left = (-right).add_encoded([1])
            else:
                right = products[i]
                left = w - right
            node_weight[g][a] = left.with_bound(1)
            node_weight[g][b_node] = right.with_bound(1)
    return [[node_weight[g][i] for i in range(k)] for g, k in enumerate(tour.sizes)]


def alice_descend(ctx, tour: Tournament, shares, constant_roots: bool, plan, peer) -> None:
    """Alice's role in :func:`bob_descend` (``shares``: hers of the tournament's bits)."""
    known = set() if constant_roots else {(g, tour.root[g]) for g in range(len(tour.sizes))}
    for r in reversed(range(len(tour.matches))):
        matches = tour.matches[r]
        index = [i for i, (g, node, _, _) in enumerate(matches) if (g, node) in known]
        if index:
            highs, deltas = shares[r]
            dgk.alice_select_products(
                ctx,
                ([highs[i] for i in index], [deltas[i] for i in index]),
                plan.product_spec(len(index)),
                plan.select_spec(1).compare.high_bound,
                peer,
            )
        for g, _, a, b in matches:
            known |= {(g, a), (g, b)}
