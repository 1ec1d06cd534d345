"""The forward recursion, version 2: per-target normalisation and packed replies.

Thesis 003, 4.2.1 (secure forward algorithm), redesigned; the protocol around it
is :mod:`protocols.forward`, the leakage statement ``docs/security.md``.

The transition topology -- which a_lj are nonzero -- is a public parameter of
Bob's models (left-to-right with self-loops for the bundled digit models).  At
each step Alice holds, for every state l, the blinded log-value u_t(l) = log
alpha_t(l) + rho_t(l) (rho Bob's accumulated blinds) as an exact integer at
scale f.  One step is one round trip:

1. Alice, for every target j and every predecessor l of j (an *edge*):
   V_lj = round(2^g exp(u_t(l) - c_tj)), c_tj = max over j's predecessors of
   u_t(l).  She puts V_lj in target j's slot before encrypting:
   E(2^(s_j W) V_lj).  The leading predecessor has V = 2^g exactly, so every
   target keeps its own precision whatever the other states do: nothing is
   dropped, no possible sequence is refused.
2. Bob, for every output ciphertext (``slots`` targets), one multi-exponentiation
   over its edges with the short coefficients beta_j w_lj, where
   w_lj = round(2^h a_lj e^-(rho_t(l) - rho_min)) (rho_min over the model, so
   the blinds' spread is at most R + K ln 2 nats) and beta_j Bob's
   log-uniform multiplicative blind, plus noise e_j uniform on
   [0, 2^(g + NOISE_BITS)) in every slot.  Slot j then holds S_j beta_j + e_j,
   S_j = sum_l w_lj V_lj, with no carry into the next slot (slot width
   W = g + h + B + K + log2(predecessors + 1) + 1 bits).
3. Alice decrypts one ciphertext per ``slots`` targets and sets u_(t+1)(j) =
   log(S_j beta_j + e_j) - (g + h + B) ln 2 + c_tj + [log b_j(x_(t+1)) + gamma];
   Bob's rho_(t+1)(j) = rho_min + log(beta_j / 2^B) + gamma.  A target whose
   predecessors are all log 0 (she sent only zeros) is log 0 whatever the slot holds.

The final step is the same with one target per model (every state a
predecessor, a = 1).

Precision (a public rule): every nonzero weight keeps at least 44 significant
bits after unblinding (Bob checks a_lj >= ``PrecisionParams.min_weight()``
before the run), so w_lj <= 2^h and every nonzero weight is >= 2^44; with
beta_j >= 2^B (B = 48) and the leader's V = 2^g, a possible target's S_j beta_j
is at least 2^(g + 92).  Rounding V costs at most n 2^(h - 45 - g) of a target
relative to its sum, rounding w at most n 2^-45 (n = predecessors), the noise
at most 2^(NOISE_BITS - 92) = 2^-52.  With g = h + 16 (the default) each step
loses at most 2^-42 relative per target, so 10^4 steps keep log P within 1e-8
nats absolute.

What Alice sees per target and step is the integer S_j beta_j + e_j.  Without
the noise it would be the exact S_j beta_j = sum_l c_l V_lj, one linear equation
in Bob's coefficients c_l = beta_j w_lj (h + B + K bits each) with the V_lj she
chose: modulo the leader's V = 2^g it gives every other coefficient's residue,
c_2 = S V_2^-1 mod 2^g (the low g = 160 of its 221 bits), and the whole
coefficient whenever it is below 2^g -- small beta_j times a small transition
probability -- and from two of a model's targets the ratios of Bob's weights,
as the v1 lattice attack does.  The noise spans 2^NOISE_BITS times every V, so
the decrypted integer can be simulated, to statistical distance 2^-NOISE_BITS
per slot, from S_j beta_j rounded down to a multiple of 2^g: no residue modulo
any of her values (all at most 2^g) survives
(``tests/protocols/test_protocol_forward.py`` runs both attacks and requires them
to fail).  Alice still learns log(S_j beta_j) to 2^-52 relative, i.e. the
blinded forward value she learns in v1 too, hidden by beta_j's K octaves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from protocols.primitives import (
    PrecisionParams,
    exp_fixed,
    log_fixed,
    multiplicative_blinds,
    unblind_weights,
)
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.errors import PrecisionError, ProtocolError

#: g - h: Alice's exponentials carry this many bits more than Bob's weights
EXTRA_EXP_BITS = 16
#: Bob's noise in each reply slot spans 2^(g + NOISE_BITS): 2^NOISE_BITS times
#: Alice's largest value, so what she decrypts hides his coefficients' residues to
#: statistical distance 2^-NOISE_BITS, and costs at most 2^(NOISE_BITS - 92) of a
#: target (module docstring)
NOISE_BITS = 40


def topology_of(transmat) -> list[list[int]]:
    """The public topology of a transition matrix: its nonzero edges [l, j]."""
    a = np.asarray(transmat, dtype=float)
    return [[int(l), int(j)] for l, j in zip(*np.nonzero(a > 0))]


def check_topology(topology, states: Sequence[int]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Validate a peer's topology (one edge list per model) against the public sizes."""
    if not isinstance(topology, list) or len(topology) != len(states):
        raise ProtocolError("malformed topology: one edge list per model expected")
    out = []
    for edges, n in zip(topology, states):
        if not isinstance(edges, list) or not 0 < len(edges) <= n * n:
            raise ProtocolError(f"malformed topology: 1..{n * n} edges expected per model")
        pairs = []
        for e in edges:
            if (
                not isinstance(e, list)
                or len(e) != 2
                or not all(isinstance(v, int) and 0 <= v < n for v in e)
            ):
                raise ProtocolError(f"malformed topology edge {e!r} for {n} states")
            pairs.append((e[0], e[1]))
        if len(set(pairs)) != len(pairs):
            raise ProtocolError("malformed topology: repeated edge")
        out.append(tuple(sorted(pairs, key=lambda p: (p[1], p[0]))))
    return tuple(out)


@dataclass(frozen=True)
class EdgePlan:
    """The public layout of one step: each target's predecessors (global state
    indices), Alice's exponent scale ``g`` and the packing of targets into
    ``slots`` slots of ``slot_bits`` bits per ciphertext."""

    preds: tuple[tuple[int, ...], ...]
    g: int
    slot_bits: int
    slots: int

    @classmethod
    def build(cls, preds, prec: PrecisionParams, key_bits: int) -> EdgePlan:
        g = exp_bits(prec)
        if g < prec.weight_scale:
            raise PrecisionError(
                f"exp_scale {g} is below weight_scale {prec.weight_scale}: the v2 recursion "
                "needs g >= h for its precision rule"
            )
        most = max((len(p) for p in preds), default=1)
        slot_bits = g + prec.weight_scale + prec.beta_bits + prec.blind_octaves
        slot_bits += math.ceil(math.log2(most + 1)) + 1

        def fits(s: int) -> bool:  # the lincomb's own bound check, with room to spare
            return s * slot_bits + math.ceil(math.log2(s * most + 1)) + 2 <= key_bits - 4

        slots = 0
        while fits(slots + 1):
            slots += 1
        if slots < 1:
            raise PrecisionError(
                f"a {key_bits}-bit key cannot hold one {slot_bits}-bit recursion slot: use a "
                "larger key or a smaller weight_scale"
            )
        return cls(tuple(tuple(p) for p in preds), g, slot_bits, min(slots, len(preds)))

    @property
    def targets(self) -> int:
        return len(self.preds)

    @property
    def edges(self) -> int:
        return sum(len(p) for p in self.preds)

    @property
    def ciphertexts(self) -> int:
        return -(-self.targets // self.slots)

    def target_range(self, c: int) -> range:
        return range(c * self.slots, min((c + 1) * self.slots, self.targets))

    @property
    def edge_bound(self) -> int:
        """Public bound on one of Alice's slot-shifted values."""
        return 1 << ((self.slots - 1) * self.slot_bits + self.g)

    @property
    def packed_bound(self) -> int:
        """Public bound on one packed reply: every slot below 2^W."""
        return 1 << (self.slots * self.slot_bits)


def transition_plan(spec, topology) -> EdgePlan:
    """The step plan of a run: targets are every state of every model."""
    preds, base = [], 0
    for edges, n in zip(topology, spec.states):
        by_target = [[] for _ in range(n)]
        for l, j in edges:
            by_target[j].append(base + l)
        preds += by_target
        base += n
    return EdgePlan.build(preds, spec.prec, spec.key_bits)


def final_plan(spec) -> EdgePlan:
    """The termination plan: one target per model, every state a predecessor."""
    preds = [list(range(seg.start, seg.stop)) for seg in spec.segments]
    return EdgePlan.build(preds, spec.prec, spec.key_bits)


def exp_bits(prec: PrecisionParams) -> int:
    """g of the v2 recursion: ``exp_scale`` if set, else h + 16 (module docstring)."""
    return prec.exp_scale if prec.exp_scale is not None else prec.weight_scale + EXTRA_EXP_BITS


# -- Alice ---------------------------------------------------------------------------------------


def alice_edge_values(u, plan: EdgePlan, prec: PrecisionParams) -> tuple[list[int], list[int]]:
    """Step 1: every edge's V_lj << (slot of j) W, and each target's shift c_tj
    (None where every predecessor is log 0: that target's S_j is 0 whatever Bob's noise)."""
    g = plan.g
    values, shifts = [], []
    for i, preds in enumerate(plan.preds):
        lift = (i % plan.slots) * plan.slot_bits
        finite = [int(u[l]) for l in preds if not prec.is_log_zero(int(u[l]))]
        c = max(finite) if finite else 0
        shifts.append(c if finite else None)  # None: every V is 0, so S_j = 0
        for l in preds:
            y = int(u[l])
            values.append(0 if prec.is_log_zero(y) else exp_fixed(y - c, prec.f, g) << lift)
    return values, shifts


def alice_target_logs(decrypted, plan: EdgePlan, shifts, prec: PrecisionParams) -> list[int]:
    """Step 3: log(S_j beta_j) - (g + h + B) ln 2 + c_tj per target (log 0 if S_j = 0)."""
    offset = prec.ln2_times(plan.g + prec.weight_scale + prec.beta_bits)
    mask = (1 << plan.slot_bits) - 1
    out = []
    for c, packed in enumerate(decrypted):
        packed = int(packed)
        if packed < 0:
            raise ProtocolError("a packed recursion reply is negative")
        for k, i in enumerate(plan.target_range(c)):
            s = (packed >> (k * plan.slot_bits)) & mask
            if shifts[i] is None:  # Alice sent only zeros: the slot holds Bob's noise alone
                out.append(prec.log_zero)
            elif s == 0:
                raise ProtocolError("a recursion slot is 0 although a predecessor is possible")
            else:
                out.append(log_fixed(s, prec.f) - offset + shifts[i])
    return out


def alice_encrypt_edges(pk: PublicKey, values, plan: EdgePlan) -> CipherArray:
    return CipherArray.encrypt_encoded(pk, values, 0, plan.edge_bound)


# -- Bob -----------------------------------------------------------------------------------------


def bob_packed_sums(enc_edges: CipherArray, plan: EdgePlan, weights, rng, prec: PrecisionParams):
    """Step 2: one multi-exponentiation per output ciphertext with coefficients
    beta_j w_lj; returns (the packed replies, the betas per target).

    ``weights`` lists, per target, the integer weights w_lj of its predecessors
    (in ``plan.preds`` order).
    """
    if enc_edges.shape != (plan.edges,):
        raise ProtocolError(f"{enc_edges.shape} edge values for {plan.edges} edges")
    betas = multiplicative_blinds(rng, plan.targets, prec)
    starts = np.cumsum([0, *(len(p) for p in plan.preds)])
    blocks = []
    for c in range(plan.ciphertexts):
        targets = plan.target_range(c)
        lo, hi = int(starts[targets.start]), int(starts[targets.stop])
        row = [w * betas[i] for i in targets for w in weights[i]]
        blocks.append((enc_edges[lo:hi], np.array([row], dtype=object)))
    packed = CipherArray.lincomb_blocks(blocks, 0).add_encoded(slot_noise(rng, plan))
    return packed.with_bound(plan.packed_bound), betas


def slot_noise(rng, plan: EdgePlan) -> np.ndarray:
    """Per reply ciphertext, every target's noise e_j uniform on [0, 2^(g + NOISE_BITS))
    in its slot (module docstring: it hides Bob's coefficients)."""
    bits, width = plan.g + NOISE_BITS, plan.slot_bits
    out = []
    for c in range(plan.ciphertexts):
        out.append(sum(rng.randbits(bits) << (k * width) for k in range(len(plan.target_range(c)))))
    return np.array(out, dtype=object)


def bob_step_weights(transmats, rho, plan: EdgePlan, spec) -> tuple[list[list[int]], list[int]]:
    """Per target, the weights round(2^h a_lj e^-(rho_l - rho_min)) of its predecessors,
    and each model's rho_min (:func:`~protocols.primitives.unblind_weights`)."""
    full, mins = [], []
    for a, seg in zip(transmats, spec.segments):
        w, rho_min = unblind_weights(a, rho[seg], spec.prec)
        full.append((seg.start, w))
        mins.append(rho_min)
    model_of = np.repeat(np.arange(len(spec.states)), spec.states)
    out = []
    for j, preds in enumerate(plan.preds):
        start, w = full[model_of[j]]
        out.append([int(w[l - start, j - start]) for l in preds])
    return out, mins


def bob_final_weights(rho, spec) -> tuple[list[list[int]], list[int]]:
    """Per model, the weights round(2^h e^-(rho_l - rho_min)) of every state, and rho_min."""
    out, mins = [], []
    for seg in spec.segments:
        w, rho_min = unblind_weights(np.ones((seg.stop - seg.start, 1)), rho[seg], spec.prec)
        out.append([int(v) for v in w[:, 0]])
        mins.append(rho_min)
    return out, mins
