"""Secure LOGSUM: the one implementation under forward (v1, v2), keyword and speaker.

Thesis 003, 4.2.1 ("Secure LOGSUM"), with one blinding rule (:mod:`protocols.stages.blinds`)
and a slot noise proportional to what it hides.  ``docs/security.md`` ("LOGSUM") states
the leakage and the attacks the tests run.

Setting.  Alice holds the key pair and, per *element* e, a blinded log-value
u_e = x_e + rho_e (integers at scale f); Bob holds the blinds rho_e and, per *target* j,
nonnegative weights a_ej over its elements.  The stage gives Alice, per target,

    u'_j = log sum_e a_ej e^(x_e) + blind_j,      blind_j = ref_j + z_j - Z

and Bob the integer blind_j (scale f): ref_j is a reference Bob picks among the blinds
(the minimum over the target's group), z_j a fresh :func:`~protocols.stages.blinds.smooth_blind`
on [0, Z) nats drawn at :data:`~protocols.stages.blinds.FINE_BITS` fractional bits.

One round trip:

1. Alice (:func:`alice_values`): per target j, c_j = max of its elements' u_e, and per
   element V_ej = round(2^g exp(u_e - c_j)) <= 2^g (``edges`` layout: one value per
   (target, element), shifted into the target's slot of the reply; ``shared`` layout: one
   value per element, normalised per group by the caller).
2. Bob (:func:`bob_coefficients`, :func:`bob_sums`): coefficients
   C_ej = round(2^H a_ej exp((ref_j - rho_e) / 2^f + z_j - Z)) -- one rounding of a real
   number whose exponent carries the fine-grained blind, never a product of integers --
   and per reply ciphertext one multi-exponentiation, plus noise N_j uniform on
   [0, 2^(g + log2(n + 1) + sigma)) in every slot.  Y_j = sum_e C_ej V_ej + N_j.
3. Alice (:func:`alice_logs`): u'_j = ln Y_j - (g + H) ln 2 + c_j.

A protocol runs the round through ``ctx`` with :func:`alice_send`, :func:`bob_round`
and :func:`alice_receive` (two halves for Alice, so that interleaved streams can send
before they receive).

What Alice learns, per target and round: Y_j.  Write Q_j = sum_e C_ej V_ej.
(a) The noise makes Y_j a function of floor(Q_j / 2^(g + log2(n + 1))) up to statistical
distance 2^-sigma: every residue of Q_j modulo her own values (all <= 2^g) is gone, so
a single live element, a leader at exactly 2^g or a pair of elements no longer solve for
Bob's coefficients (the held-out attacks).  (b) That quotient is the real number
2^H e^(z_j - Z) sum_e a_ej e^(ref_j - rho_e) V_ej / 2^(g + log2(n+1)) up to Bob's rounding of the
C_ej (at most n 2^(g - 1) in Q_j, inside the same 2^-sigma), i.e. u'_j to 2^-P relative or
better.  (c) The fine blind z_j makes the value of (b) depend on Bob's weights only
through the window [0, Z) it shifts: two weight sets whose log-sums differ by d give
views at statistical distance about d sqrt(I) (I the blind's Fisher information) plus
2^-sigma -- the thesis's "hidden within R nats", now without arithmetic structure for
gcds, continued fractions or lattice reduction to use.  Bob learns nothing (IND-CPA).

Public layout (:class:`LogsumPlan`, every number derived from public parameters):
P = ``precision_bits`` (each target's relative precision per round), sigma, the
weight floor 2^-``weight_floor_bits`` (a smaller nonzero weight is refused before the
run), the spread S of element blinds around their reference and the output blind's
width Z.  With n the most elements of a target and ln = ceil(log2(n + 1)):
range r = weight_floor_bits + ceil((S + Z) / ln 2) bits between Bob's largest and
smallest coefficient; H = P + sigma + ln + r; g = r + P + ln (Alice's rounding costs
<= 2^-P); slot W = g + H + ln + 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpz

from protocols.stages.blinds import FINE_BITS, blind_top, smooth_blind
from protocols.stages.fixedlog import exp_fixed, log_fixed, round_mpfr
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray, PublicKey, Rng
from smc_hmm.crypto.packing import plain_bits
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError

#: MPFR precision of Bob's coefficients: the fine blind (FINE_BITS fractional bits of a
#: value up to ~2^7 nats) and a 2^H coefficient, exactly
_HP = gmpy2.context(precision=FINE_BITS + 64)
LAYOUTS = ("edges", "shared")


@dataclass(frozen=True)
class LogsumParams:
    """Public parameters of the LOGSUM stage (module docstring)."""

    #: each target's relative precision per round: 2^-P
    precision_bits: int = typed.whole(48, 16, 128)
    #: statistical parameter of the slot noise
    sigma: int = typed.sigma()
    #: Z: width of each target's output blind, nats
    blind_nats: float = typed.blind_nats()
    #: S: public bound on rho_e - ref_j over a target's elements, nats
    spread_nats: float = typed.number(40.0, 0, 400, low_open=True)
    #: nonzero weights are >= 2^-weight_floor_bits (Bob checks before the run)
    weight_floor_bits: int = typed.whole(42, 0, 256)

    def __post_init__(self):
        typed.check_fields(self)

    @property
    def min_weight(self) -> float:
        """The smallest nonzero weight a_ej the stage takes: 2^-weight_floor_bits."""
        return math.ldexp(1.0, -self.weight_floor_bits)

    @property
    def range_bits(self) -> int:
        """r: bits between Bob's largest coefficient (2^H) and his smallest nonzero one."""
        return self.weight_floor_bits + math.ceil(
            (self.spread_nats + self.blind_nats) / math.log(2)
        )

    def coefficient_bits(self, elements: int) -> int:
        """H: the smallest coefficient keeps P + sigma + ln bits above the noise's unit."""
        return self.precision_bits + self.sigma + _ln(elements) + self.range_bits

    def exp_bits(self, elements: int) -> int:
        """g: Alice's rounding of V costs at most 2^-P of a target."""
        return self.range_bits + self.precision_bits + _ln(elements)


def _ln(elements: int) -> int:
    return max(1, math.ceil(math.log2(elements + 1)))


@dataclass(frozen=True)
class LogsumPlan:
    """The public layout of one LOGSUM round: each target's elements (indices into
    Alice's log-values), the scales, the noise and the packing of targets into slots.

    ``edges``: Alice sends one value per (target, element) in target order, already
    shifted into its target's slot; ``shared``: one value per element (the caller's
    order), one target per reply ciphertext.
    """

    preds: tuple[tuple[int, ...], ...]
    g: int
    coef_bits: int
    noise_bits: int
    slot_bits: int
    slots: int
    layout: str
    params: LogsumParams
    #: False only for the thesis's v1 layout (named, opt-in): exact sums, no noise
    noisy: bool = True

    @classmethod
    def build(
        cls,
        preds,
        params: LogsumParams,
        key_bits: int,
        layout: str = "edges",
        g: int | None = None,
        noisy: bool = True,
    ) -> LogsumPlan:
        """The plan for these targets under a ``key_bits`` key.  ``g`` overrides Alice's
        exponent bits (the v1 recursion takes the largest the key allows: :meth:`widest_g`).

        ``noisy = False`` is the thesis's layout, kept as the named ``v1`` mode: without the
        slot noise Alice decrypts the exact sum_e C_ej V_ej, and with her values as wide as
        the key, lattice reduction gives her the coefficients and from two targets Bob's
        blind-free cross-ratios a_lj a_l'j' / (a_l'j a_lj') (``docs/security.md``).  The
        noise cannot be added there: it would have to exceed her largest value, 2^g, and
        would swallow every state far behind its model's leader."""
        if layout not in LAYOUTS:
            raise InvalidInputError(f"layout must be one of {LAYOUTS}")
        preds = tuple(tuple(int(e) for e in p) for p in preds)
        if not preds or not all(preds):
            raise InvalidInputError("every LOGSUM target needs at least one element")
        most = max(len(p) for p in preds)
        h = params.coefficient_bits(most)
        g = params.exp_bits(most) if g is None else g
        ln = _ln(most)
        noise_bits = g + ln + params.sigma if noisy else 0
        slot_bits = g + h + ln + 2

        def fits(s: int) -> bool:  # the multi-exponentiation's own bound check
            return s * slot_bits + _ln(s * most) + 2 <= plain_bits(key_bits)

        slots = 0
        if layout == "edges":
            while slots < len(preds) and fits(slots + 1):
                slots += 1
        elif fits(1):
            slots = 1
        if slots < 1:
            raise PrecisionError(
                f"a {key_bits}-bit key cannot hold one {slot_bits}-bit LOGSUM slot: use a "
                "larger key or lower precision_bits / blind_nats"
            )
        return cls(preds, g, h, noise_bits, slot_bits, slots, layout, params, noisy)

    @staticmethod
    def widest_g(params: LogsumParams, key_bits: int, elements: int) -> int:
        """The largest g a ``shared`` plan fits: one target per ciphertext."""
        # slot_bits = g + H + 2 ln + ... must pass fits(1) in :meth:`build`
        ln = _ln(elements)
        return plain_bits(key_bits) - 4 - 2 * ln - params.coefficient_bits(elements)

    # -- public sizes --------------------------------------------------------------------

    @property
    def targets(self) -> int:
        return len(self.preds)

    @property
    def edges(self) -> int:
        """Values Alice sends: one per (target, element) or one per element."""
        if self.layout == "edges":
            return sum(len(p) for p in self.preds)
        return max(e for p in self.preds for e in p) + 1

    @property
    def ciphertexts(self) -> int:
        return -(-self.targets // self.slots)

    def target_range(self, c: int) -> range:
        return range(c * self.slots, min((c + 1) * self.slots, self.targets))

    @property
    def value_bound(self) -> int:
        """Public bound on one of Alice's (slot-shifted) values."""
        return 1 << ((self.slots - 1) * self.slot_bits + self.g)

    @property
    def packed_bound(self) -> int:
        """Public bound on one reply: every slot below 2^W."""
        return 1 << (self.slots * self.slot_bits)

    @property
    def offset(self) -> int:
        """(g + H) ln 2 is read off Alice's log at scale f by :func:`alice_logs`."""
        return self.g + self.coef_bits


# -- Alice ---------------------------------------------------------------------------------------


def alice_values(u, plan: LogsumPlan, prec) -> tuple[list[int], list[int | None]]:
    """Step 1 (``edges``): every (target, element) value V << (slot of the target) W, and
    each target's shift c_j (None where every element is log 0: the target is log 0)."""
    values, shifts = [], []
    for i, preds in enumerate(plan.preds):
        lift = (i % plan.slots) * plan.slot_bits
        finite = [int(u[e]) for e in preds if not prec.is_log_zero(int(u[e]))]
        c = max(finite) if finite else 0
        shifts.append(c if finite else None)
        for e in preds:
            y = int(u[e])
            values.append(0 if prec.is_log_zero(y) else exp_fixed(y - c, prec.f, plan.g) << lift)
    return values, shifts


def alice_encrypt(pk: PublicKey, values, plan: LogsumPlan) -> CipherArray:
    return CipherArray.encrypt_encoded(pk, values, 0, plan.value_bound)


def alice_logs(decrypted, plan: LogsumPlan, shifts, prec) -> list[int]:
    """Step 3: ln Y_j - (g + H) ln 2 + c_j per target at scale f (log 0 where c_j is None)."""
    offset = prec.ln2_times(plan.offset)
    mask = (1 << plan.slot_bits) - 1
    out = []
    for c, packed in enumerate(decrypted):
        packed = int(packed)
        if packed < 0:
            raise ProtocolError("a packed LOGSUM reply is negative")
        for k, i in enumerate(plan.target_range(c)):
            y = (packed >> (k * plan.slot_bits)) & mask
            if shifts[i] is None:  # only zeros went out: the slot holds Bob's noise alone
                out.append(prec.log_zero)
            elif y == 0:
                if plan.noisy:
                    raise ProtocolError("a LOGSUM slot is 0 although an element is possible")
                out.append(prec.log_zero)  # v1: every live element had weight 0
            else:
                out.append(log_fixed(y, prec.f) - offset + shifts[i])
    return out


# -- Bob -----------------------------------------------------------------------------------------


def check_weights(weights, params: LogsumParams) -> None:
    """Bob's local check before the run: every nonzero weight within [2^-floor, 1]."""
    a = np.asarray(weights, dtype=float)
    if not np.isfinite(a).all() or (a < 0).any():
        raise InvalidInputError("LOGSUM weights must be finite and nonnegative")
    positive = a[a > 0]
    if positive.size and float(positive.min()) < params.min_weight:
        raise PrecisionError(
            f"a weight of {float(positive.min()):.3g} is below {params.min_weight:.3g}, the "
            f"public weight floor 2^-{params.weight_floor_bits} (raise weight_floor_bits)"
        )


def bob_coefficients(
    rng: Rng, plan: LogsumPlan, weights, rho, refs, scale: int
) -> tuple[list[list[int]], list[int]]:
    """Step 2's coefficients: per target j, C_ej = round(2^H a_ej e^((ref_j - rho_e)/2^f +
    z_j - Z)) over its elements (``weights[j]`` in ``plan.preds[j]`` order; ``rho`` the
    elements' blinds and ``refs`` the targets' references, integers at ``scale`` = f), and
    each target's new blind ref_j + z_j - Z at scale f.

    A reference must not exceed any of its target's element blinds and the spread must
    stay within the public ``spread_nats`` (the callers' blinds guarantee both; a miss is
    a bug, not data)."""
    params, h = plan.params, plan.coef_bits
    top = blind_top(params.blind_nats, FINE_BITS)
    spread = math.ldexp(params.spread_nats, scale)
    one = mpz(1) << h
    coefs, blinds = [], []
    for j, preds in enumerate(plan.preds):
        z = smooth_blind(rng, top) - top  # in (-Z, 0] at FINE_BITS
        ref = int(refs[j])
        row = []
        for e, a in zip(preds, weights[j]):
            a = float(a)
            if a == 0.0:
                row.append(0)
                continue
            gap = int(rho[e]) - ref
            if not 0 <= gap <= spread:
                raise PrecisionError(
                    f"a LOGSUM blind lies {gap / 2**scale:.3g} nats off its reference"
                )
            exponent = _HP.div(mpz(z - (gap << (FINE_BITS - scale))), mpz(1) << FINE_BITS)
            row.append(round_mpfr(_HP.mul(_HP.mul(_HP.exp(exponent), gmpy2.mpfr(a)), one)))
        coefs.append(row)
        blinds.append(ref + _round_shift(z, FINE_BITS - scale))
    return coefs, blinds


def bob_sums(enc: CipherArray, plan: LogsumPlan, coefs, rng: Rng) -> CipherArray:
    """Step 2: per reply ciphertext one multi-exponentiation with the coefficients, plus
    the slot noise; the reply's declared bound is the plan's (public)."""
    if enc.shape != (plan.edges,):
        raise ProtocolError(f"{enc.shape} LOGSUM values for {plan.edges} expected")
    blocks = []
    if plan.layout == "edges":
        starts = np.cumsum([0, *(len(p) for p in plan.preds)])
        for c in range(plan.ciphertexts):
            targets = plan.target_range(c)
            lo, hi = int(starts[targets.start]), int(starts[targets.stop])
            row = [w for i in targets for w in coefs[i]]
            blocks.append((enc[lo:hi], np.array([row], dtype=object)))
    else:
        for j, preds in enumerate(plan.preds):
            index = np.array(preds)
            blocks.append((enc[index], np.array([coefs[j]], dtype=object)))
    noise = [
        sum(
            rng.randbits(plan.noise_bits) << (k * plan.slot_bits)
            for k in range(len(plan.target_range(c)))
        )
        if plan.noisy
        else 0
        for c in range(plan.ciphertexts)
    ]
    packed = CipherArray.lincomb_blocks(blocks).add_encoded(np.array(noise, dtype=object))
    return packed.with_bound(plan.packed_bound)


# -- the round trip through ``ctx`` (Alice's two halves, then Bob's) -------------------------


def alice_send(ctx, u, plan: LogsumPlan, prec, message, peer: str) -> list[int | None]:
    """Step 1 sent to ``peer`` as ``message``: E(V) of the elements' ``u``; returns the
    targets' shifts c_j, which :func:`alice_receive` needs."""
    values, shifts = alice_values(u, plan, prec)
    ctx.send(peer, message, alice_encrypt(ctx.keypair[0], values, plan))
    return shifts


def alice_receive(ctx, plan: LogsumPlan, shifts, prec, message, peer: str) -> list[int]:
    """Step 3 on Bob's reply ``message``: every target's u'_j at scale f."""
    enc = ctx.recv(peer, message)
    if enc.shape != (plan.ciphertexts,):
        raise ProtocolError(f"{message.tag}: {enc.shape} replies, the plan has {plan.ciphertexts}")
    decrypted = enc.decrypt_ints(ctx.keypair[1])
    return checked_logs(ctx, decrypted, plan, shifts, prec)


def checked_logs(ctx, decrypted, plan: LogsumPlan, shifts, prec) -> list[int]:
    """:func:`alice_logs`, a reply no honest Bob sends refused after her last message
    (whether it trips depends on her values too; until then it reads as log 0)."""
    return ctx.checked(
        lambda: alice_logs(decrypted, plan, shifts, prec),
        lambda: [prec.log_zero] * len(shifts),
    )


def bob_round(ctx, plan: LogsumPlan, coefs, incoming, outgoing, peer: str) -> None:
    """Step 2 through ``ctx``: Alice's values (``incoming``) in, the packed sums with the
    coefficients of :func:`bob_coefficients` out (``outgoing``, declared fresh)."""
    ctx.send(peer, outgoing, bob_sums(ctx.recv(peer, incoming), plan, coefs, ctx.rng))


def _round_shift(value: int, bits: int) -> int:
    """round(value / 2^bits) for an integer of either sign."""
    return (int(value) + (1 << (bits - 1))) >> bits if bits else int(value)
