"""Bound inputs: Bob's linear program on Alice's encrypted frames, entered into a circuit
Bob garbles as shares that Alice cannot change (``docs/garbled.md``, "Bound inputs").

Alice holds the Paillier key and her frames' encoded inputs phi_t (x and x^2, one-hot
rows, ...); Bob holds a linear program: rows j of weights w_j and constants c_j, whose
values v_tj = w_j . phi_t + c_j (emission log-densities, at a public scale) feed the
circuit.  The stage (thesis 003, 4.2.1, for the linear part; DESIGN.md section 11):

1. Alice -> Bob ``bd.obs``: her packed phi (:func:`~protocols.stages.emissions.alice_pack`:
   one ciphertext per input and group of frames).
2. Bob -> Alice ``bd.values``: per group and row the packed E(y_tj), y = v + 2^(l-1) + r
   (l = ``value_bits``), and three more rows per group: the MAC slots, in limbs of 21 bits
   (so that a MAC slot is no wider than a value's): z_t = sum_i 2^(21 i) z_ti,
   z_ti = sum_k U_ki phi_tk + c_i + O + s_ti, where u_j = alpha rho_j, U_k = sum_j u_j
   w_jk (+ alpha rho'_k where phi itself enters the circuit) mod p = sum_i 2^(21 i) U_ki,
   c_i the limbs of sum_j u_j c_j mod p and O the public offset.  Mod p,
   z_t - sum_i 2^(21 i) (O + s_ti) = alpha (sum_j rho_j v_tj + sum_k rho'_k phi_tk).
   Every mask covers its slot's whole signed range [-2^(B-1), 2^(B-1)) but the share
   its value takes (r uniform on an interval of 2^B - 2^l, s on one of 2^B - 2O), and
   R 2^(W_g), R uniform on [1, n / 2^(W_g) - 1), covers the bits above group g's slots
   (:func:`_top_masked`): the plaintext Alice decrypts is uniform on Z_n to within
   2^-sigma *whatever she encrypted in step 1*.  (Masks over only the value's range
   plus sigma bits, as before 2026-12-06, let a client who encrypts a "feature" far
   above every slot read Bob's weights times it, in the clear above the slots, and
   with them alpha: ``test_a_huge_feature_reads_nothing_of_bobs_weights_...``.)
3. Alice decrypts: her circuit inputs are the full y_tj (``share_bits`` = B each, signed),
   and phi_t itself where ``bind_inputs``; they reach the circuit through the session's
   OT pool.  Inside it, v = y - 2^(l-1) - r over all B bits (Bob's input), and a value
   outside [-2^(l-1), 2^(l-1)) fails the checks (:func:`in_range`): the mod-p check
   cannot see a share shifted by k p, which this catches (l <= 60, B < 120).
4. Bob -> Alice ``bd.key``, after her padded choices: per input wire the correction of
   its label MAC (:mod:`smc_hmm.gc.mac`: her share a + his share b = alpha x, mod p)
   and the seed of rho, rho' and tau (fresh, so unknown to her while she chose).
5. Both compute their side of the check (:meth:`AliceBound.check_value`,
   :meth:`BobBound.check_value`): D_A = sum_t tau_t (sum_j rho_j A(y_tj) + sum_k rho'_k
   A(phi_tk) - z_t) and D_B = sum_t tau_t (-sum_j rho_j B(y_tj) - sum_k rho'_k B(phi_tk)
   - O - s_t + alpha sum_j rho_j (2^(l-1) + r_tj)), equal mod p exactly when every input
   she entered is the value the protocol gave her.  The circuit that decides (the last
   of the protocol's chain) takes D_A from her and D_B from him and gates every output
   on their equality (:func:`check_equal`): she cannot see an output of inputs she
   shifted, and Bob learns nothing from the check.

Who learns what.  Alice decrypts only residues uniform on Z_n to within 2^-sigma each
(whatever she encrypted: the masks above), sees the corrections (uniform: each
hides alpha behind the hash of a label she does not hold) and the seed.  Bob sees her
padded choices (uniform bits).  Soundness: an Alice who enters y' != y (or phi' != phi)
passes only if sum_t tau_t (sum_j rho_j delta_tj + sum_k rho'_k delta'_tk) = 0 mod p or
she guesses alpha times that sum: at most 3/p = 2^-59.4 a session (:data:`SOUNDNESS`),
plus the hash's and the masks' statistical distance (T 2^-sigma); a y' = y + k p, which
the sum cannot see, fails the range check.  An honest run fails (aborts) when a value
plus its mask leaves the slot: 2^-sigma a slot.  What she *can* do is
choose her frames, including phi whose parts disagree (x^2 that is not x x): that is
choosing an input of the function, and a protocol that must rule it out checks phi in
the circuit (:func:`square_check`).

Public: the program's shape (rows, inputs, T), the widths and scales, the layout.  Every
message size follows from them.

**Bound shares** (:class:`SharePlan`, :func:`bob_bind_shares`, :func:`alice_bind_shares`):
the same check for values E(s_i) Bob already holds (the decision stage's scores):
the slots of :func:`protocols.stages.garbled.pack_masked` and one MAC of
alpha sum_i rho_i s_i in three limbs of their own slots, one multi-exponentiation each
(``docs/garbled.md``, "Bound shares"); she enters every slot whole, D_A and D_B as above
with one frame and no phi.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from protocols.stages import garbled
from protocols.stages.emissions import EmissionLayout, alice_pack, alice_unpack, bob_emissions
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray
from smc_hmm.crypto.packing import top_mask
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError
from smc_hmm.gc import arith, mac
from smc_hmm.gc.circuit import CARRY, Circuit
from smc_hmm.gc.garble import TABLE_BYTES
from smc_hmm.gc.hashing import prg
from smc_hmm.messages import Ciphertexts, MaskedCiphertexts, Message, OpaqueCiphertexts

__all__ = [
    "CHUNK_TABLE_BYTES",
    "MAX_INPUT_FRAMES",
    "SOUNDNESS",
    "AliceBound",
    "BobBound",
    "BoundPlan",
    "AliceShares",
    "BobShares",
    "Emissions",
    "SharePlan",
    "alice_bind_shares",
    "alice_check",
    "alice_checked",
    "alice_open",
    "alice_run_shared",
    "binds",
    "bob_bind_shares",
    "bob_check",
    "bob_open",
    "bob_run_shared",
    "reconstruct",
    "run_inputs",
    "alice_bound",
    "bob_bound",
    "check_equal",
    "clamp",
    "draw_key",
    "encode_products",
    "join_limbs",
    "key_message",
    "limb_matrix",
    "share_inputs",
    "share_values",
    "shared_messages",
    "square_check",
]

#: The binding's soundness error per session, over the choice of alpha, rho and tau.
SOUNDNESS = 3 / mac.PRIME
#: Bytes of the seed of rho, rho' and tau.
SEED_BYTES = 16
#: A MAC slot's coefficients, elements of Z_p, in limbs of this many bits (low limb
#: first): each limb's slot is then about as wide as a masked value's, so the MAC rows
#: do not widen every slot of the packing
MAC_LIMB_BITS = 21
MAC_LIMBS = 3
#: Most bytes of AND tables in one inputs circuit (:func:`reconstruct`, :func:`chunks`):
#: it takes as many frames as fit, 1 to :data:`MAX_INPUT_FRAMES`, so its depth is paid
#: once for several frames (on the numpy path a layer costs as much as its gates), its
#: memory stays bounded whatever T, and its message stays far below a peer's frame limit
#: (16 MiB for a serving Bob).
CHUNK_TABLE_BYTES = 8 << 20
MAX_INPUT_FRAMES = 16


@dataclass(frozen=True)
class BoundPlan:
    """The public shape of one bound program: T frames of ``inputs`` encoded values,
    each |phi| < 2^(``input_bits`` - 1); ``rows`` values per frame, each |v| <
    2^(``value_bits`` - 1) at the program's scale; ``bind_inputs``: phi enters the
    circuit too (its checks: :func:`square_check`)."""

    length: int
    inputs: int
    rows: int
    input_bits: int
    value_bits: int
    sigma: int
    key_bits: int
    bind_inputs: bool = False

    def __post_init__(self):
        for name in ("length", "inputs", "rows", "input_bits", "value_bits", "sigma"):
            typed.integer(name, getattr(self, name), 1)
        if self.value_bits >= mac.MAC_BITS:
            raise PrecisionError(
                f"bound values of {self.value_bits} bits: below {mac.MAC_BITS}, so that a "
                "share shifted by a multiple of the MAC field's p (2^61 - 1) leaves the "
                "values' range; lower the program's scale or its bound"
            )

    @property
    def share_bits(self) -> int:
        """Bits of one of Alice's value inputs: a whole slot, y = v + 2^(l-1) + r signed
        with r uniform over the slot's range (so her y is uniform whatever she sent)."""
        return self.layout.plan.slot_bits

    @property
    def mac_offset(self) -> int:
        """O: the public bound on one MAC limb |sum_k U_k phi_k + sum_j u_j c_j| (U and u
        are limbs of an element of Z_p: below 2^MAC_LIMB_BITS)."""
        return (1 << MAC_LIMB_BITS) * ((self.inputs << (self.input_bits - 1)) + 1)

    @property
    def mac_mask_bits(self) -> int:
        return (2 * self.mac_offset).bit_length() + self.sigma

    @cached_property
    def layout(self) -> EmissionLayout:
        """Frames packed by groups; a slot holds a masked value or a MAC limb, sigma bits
        wider than either, and sigma + 2 bits of the plaintext stay above the slots for
        the top mask (:func:`bob_bound`)."""
        top = max(self.value_bits + self.sigma + 1, self.mac_mask_bits + 1)
        if top + 2 > 2 * mac.MAC_BITS - 2:  # in_range's bound on a share's shift by k p
            raise PrecisionError(f"bound slots of {top + 2} bits exceed {2 * mac.MAC_BITS - 2}")
        return EmissionLayout.build(
            top, self.key_bits, self.length, self.inputs, self.columns, self.sigma + 2
        )

    @property
    def columns(self) -> int:
        """Slots a frame takes in ``bd.values``: its masked values, then its MAC limbs."""
        return self.rows + MAC_LIMBS

    @property
    def groups(self) -> int:
        return len(self.layout.groups)

    def randomizers(self) -> dict[str, int]:
        """Fresh randomizers a run draws: her packed phi, his re-randomised values."""
        return {"alice": self.groups * self.inputs, "bob": self.groups * self.columns}

    @property
    def frame_bits(self) -> int:
        """Alice's input bits per frame: her values, then (``bind_inputs``) her phi."""
        phi = self.inputs * self.input_bits if self.bind_inputs else 0
        return self.rows * self.share_bits + phi

    def messages(self) -> dict[str, Message]:
        lay = self.layout
        obs = lay.packed_bound(1 << (self.input_bits - 1))
        bits = self.length * self.frame_bits
        return {
            "obs": Message("bd.obs", Ciphertexts(0, obs, (self.groups, self.inputs))),
            "values": Message("bd.values", MaskedCiphertexts(shape=(self.groups, self.columns))),
            "key": key_message(bits, "bd.key"),
        }

    # -- the circuit side ---------------------------------------------------------------

    def frame_inputs(self, c: Circuit, party: str = "evaluator"):
        """Declare one frame's inputs of Alice in the stage's order: (values (rows,
        share_bits), phi (inputs, input_bits) or None)."""
        y = c.input(party, (self.rows, self.share_bits))
        phi = c.input(party, (self.inputs, self.input_bits)) if self.bind_inputs else None
        return y, phi

    def frame_bits_of(self, y_row, phi_row) -> np.ndarray:
        """Alice's input bits of one frame in the order of :meth:`frame_inputs`."""
        parts = [arith.to_bits(np.asarray(y_row, dtype=object), self.share_bits).reshape(-1)]
        if self.bind_inputs:
            phi = np.asarray(phi_row, dtype=object)
            parts.append(arith.to_bits(phi, self.input_bits).reshape(-1))
        return np.concatenate(parts)


def key_message(bits: int, tag: str) -> Message:
    """Bob -> Alice after her padded choices: the MAC corrections of her ``bits`` input
    wires and the seed of the check's coefficients."""
    corrections = OpaqueCiphertexts("mac-correction", bits, 8)
    return Message(tag, (corrections, OpaqueCiphertexts("challenge", 1, SEED_BYTES)))


def _field(seed: bytes, count: int) -> list[int]:
    """``count`` elements of Z_p from the seed (AES-CTR; 61 bits each, p - 1 folded)."""
    raw = np.frombuffer(prg(seed, 8 * max(count, 1)), dtype="<u8")[:count]
    return [int(v) for v in mac.reduce(raw & np.uint64(mac.PRIME))]


@dataclass(frozen=True)
class Challenge:
    """rho (per row), rho' (per input; zero unless bound) and tau (per frame)."""

    rho: list[int]
    rho_in: list[int]
    tau: list[int]

    @classmethod
    def of(cls, seed: bytes, plan: BoundPlan) -> Challenge:
        n_in = plan.inputs if plan.bind_inputs else 0
        v = _field(seed, plan.rows + n_in + plan.length)
        rho, rest = v[: plan.rows], v[plan.rows :]
        rho_in = rest[:n_in] + [0] * (plan.inputs - n_in)
        return cls(rho, rho_in, rest[n_in:])

    def combine(self, y_macs: np.ndarray, phi_macs: np.ndarray | None) -> int:
        """sum_t tau_t (sum_j rho_j Y_tj + sum_k rho'_k Phi_tk) mod p."""
        total = 0
        for t, tau in enumerate(self.tau):
            frame = sum(r * int(v) for r, v in zip(self.rho, y_macs[t]))
            if phi_macs is not None:
                frame += sum(r * int(v) for r, v in zip(self.rho_in, phi_macs[t]))
            total += tau * (frame % mac.PRIME)
        return total % mac.PRIME


def _split_macs(plan: BoundPlan, per_bit: np.ndarray):
    """Per-bit MAC shares (T * frame_bits) as per-value shares: (T, rows), (T, inputs)."""
    frames = per_bit.reshape(plan.length, plan.frame_bits)
    cut = plan.rows * plan.share_bits
    y = mac.weighted_sum(
        frames[:, :cut].reshape(plan.length, plan.rows, plan.share_bits), signed=True
    )
    if not plan.bind_inputs:
        return y, None
    phi = frames[:, cut:].reshape(plan.length, plan.inputs, plan.input_bits)
    return y, mac.weighted_sum(phi, signed=True)


# -- Bob ------------------------------------------------------------------------------------


@dataclass
class BobBound:
    """Bob's secrets of one bound program: alpha, the seed, his masks."""

    plan: BoundPlan
    alpha: int
    seed: bytes
    masks: list[list[int]]  # r_tj
    mac_masks: list[int]  # sum_i 2^(21 i) (O + s_ti)
    d_b: int | None = None

    def shares(self) -> np.ndarray:
        """His circuit inputs: -(2^(l-1) + r_tj) mod 2^B over the whole slot, (T, rows)."""
        half, full = 1 << (self.plan.value_bits - 1), 1 << self.plan.share_bits
        return np.array([[(-(half + r)) % full for r in row] for row in self.masks], object)

    def key_message(self, ctx, zero_labels, delta, tweak: int, peer: str) -> None:
        """Step 4: the corrections of her input wires' MACs and the seed; keeps D_B."""
        plan = self.plan
        b, corrections = mac.garbler_mac(zero_labels, delta, self.alpha, tweak)
        ctx.send(peer, plan.messages()["key"], [corrections.astype("<u8").tobytes(), self.seed])
        challenge = Challenge.of(self.seed, plan)
        y_b, phi_b = _split_macs(plan, b)
        half = 1 << (plan.value_bits - 1)
        offsets = [[half + r for r in row] for row in self.masks]
        d = -challenge.combine(y_b, phi_b)
        for t, tau in enumerate(challenge.tau):
            expected = self.alpha * sum(r * o for r, o in zip(challenge.rho, offsets[t]))
            d += tau * (expected - self.mac_masks[t])
        self.d_b = d % mac.PRIME

    def check_value(self) -> int:
        if self.d_b is None:
            raise ProtocolError("the binding check's value before its key message")
        return self.d_b


def bob_bound(ctx, plan: BoundPlan, weights, consts, peer: str) -> BobBound:
    """Steps 1-2, Bob: her packed phi in, the masked values and the MAC slots out.
    ``weights`` (rows, inputs) and ``consts`` (rows,) are integers whose program values
    stay below 2^(value_bits - 1) for every admissible phi (the caller checked)."""
    msg = plan.messages()
    enc = ctx.recv(peer, msg["obs"])
    rng, p = ctx.rng, mac.PRIME
    alpha = 1 + rng.randbelow(p - 1)
    seed = rng.randbits(8 * SEED_BYTES).to_bytes(SEED_BYTES, "little")
    challenge = Challenge.of(seed, plan)
    u = [alpha * r % p for r in challenge.rho]
    weights = np.asarray(weights, dtype=object)
    big_u = [
        (sum(uj * int(w) for uj, w in zip(u, weights[:, k])) + alpha * challenge.rho_in[k]) % p
        for k in range(plan.inputs)
    ]
    u_const = sum(uj * int(cj) for uj, cj in zip(u, consts)) % p
    l, slot = plan.value_bits, plan.share_bits
    # every slot uniform over its whole signed range [-2^(B-1), 2^(B-1)), up to the share of
    # the range the value takes (2^-sigma): r_tj for the values, s_ti for the MAC limbs
    low = 1 << (slot - 1)
    masks = [
        [rng.randbelow((1 << slot) - (1 << l)) - low for _ in range(plan.rows)]
        for _ in range(plan.length)
    ]
    limb_masks = [
        [plan.mac_offset + rng.randbelow((1 << slot) - 2 * plan.mac_offset) - low
         for _ in range(MAC_LIMBS)]
        for _ in range(plan.length)
    ]  # fmt: skip
    half = 1 << (l - 1)
    value_offsets = [[int(c) + half + r for c, r in zip(consts, row)] for row in masks]
    const_limbs = _limbs(u_const)
    mac_offsets = [[c + m for c, m in zip(const_limbs, row)] for row in limb_masks]
    # the values and the MAC limbs in two multi-exponentiations: the limbs' 21-bit exponents
    # would otherwise set every row's window count
    values = bob_emissions(
        enc, weights, 0, value_offsets, replace(plan.layout, rows=plan.rows), 1 << (l - 1)
    )
    limbs = limb_matrix(big_u)  # (MAC_LIMBS, inputs)
    macs = bob_emissions(
        enc, limbs, 0, mac_offsets, replace(plan.layout, rows=MAC_LIMBS), plan.mac_offset
    )
    packed = CipherArray.concatenate([values, macs], axis=1).with_scale(0)
    ctx.send(peer, msg["values"], _top_masked(packed, plan, rng))
    return BobBound(plan, alpha, seed, masks, [join_limbs(row) for row in limb_masks])


def _top_masked(packed: CipherArray, plan: BoundPlan, rng) -> CipherArray:
    """Each packed plaintext of group g plus R 2^(W_g), W_g the bits its frames' slots
    take and R uniform on [1, floor(n / 2^(W_g)) - 1): the bits above the slots (the
    unused slots of a short last group too) uniform, so that with the slots' masks the
    whole plaintext is uniform on Z_n to within 2^(W_g + 2 - log2 n) <= 2^-sigma,
    whatever Alice encrypted (a huge "feature" would otherwise carry Bob's weights into
    bits no slot masks); honest values stay in (0, n), never wrapping."""
    n, width = int(packed.public_key.n), plan.layout.plan.slot_bits
    masks = []
    for group in plan.layout.groups:
        w = len(group) * width
        masks.append([top_mask(n, w, rng) for _ in range(plan.columns)])
    return packed.add_mask(np.array(masks, dtype=object))


def _limbs(value: int) -> list[int]:
    """An element of Z_p as MAC_LIMBS limbs of MAC_LIMB_BITS bits, low first."""
    mask = (1 << MAC_LIMB_BITS) - 1
    return [(int(value) >> (MAC_LIMB_BITS * i)) & mask for i in range(MAC_LIMBS)]


def join_limbs(limbs) -> int:
    """sum_i limb_i 2^(MAC_LIMB_BITS i): the value the limbs stand for (over Z)."""
    return sum(int(v) << (MAC_LIMB_BITS * i) for i, v in enumerate(limbs))


# -- Alice ----------------------------------------------------------------------------------


@dataclass
class AliceBound:
    """Alice's view of one bound program: her decrypted values y (T, rows), MAC slots z
    (T,), her phi (T, inputs) and, after the key message, her side of the check."""

    plan: BoundPlan
    y: np.ndarray
    z: list[int]
    phi: np.ndarray
    d_a: int | None = None

    def frame_bits(self, t: int) -> np.ndarray:
        return self.plan.frame_bits_of(self.y[t], self.phi[t])

    def all_bits(self) -> np.ndarray:
        return np.concatenate([self.frame_bits(t) for t in range(self.plan.length)])

    def key_message(self, ctx, labels, bits, tweak: int, peer: str) -> None:
        """Step 4-5, Alice: the corrections and the seed in; D_A kept."""
        plan = self.plan
        raw, seed = ctx.recv(peer, plan.messages()["key"])
        corrections = np.frombuffer(raw, dtype="<u8")
        if (corrections >= mac.PRIME).any():
            raise ProtocolError("bd.key: a correction is not an element of Z_p")
        a = mac.evaluator_mac(labels, bits, corrections, tweak)
        challenge = Challenge.of(bytes(seed), plan)
        y_a, phi_a = _split_macs(plan, a)
        d = challenge.combine(y_a, phi_a)
        d -= sum(tau * (int(z) % mac.PRIME) for tau, z in zip(challenge.tau, self.z))
        self.d_a = d % mac.PRIME

    def check_value(self) -> int:
        if self.d_a is None:
            raise ProtocolError("the binding check's value before its key message")
        return self.d_a


def alice_bound(ctx, plan: BoundPlan, phi, peer: str) -> AliceBound:
    """Steps 1-3, Alice: her encoded frames ``phi`` (T, inputs) out, her values in: the
    residues she decrypts, read as signed slots of the low W bits (whatever a Bob sends,
    every slot is a value of its width: nothing to refuse)."""
    pk, sk = ctx.keypair
    msg = plan.messages()
    phi = np.asarray(phi, dtype=object)
    if phi.shape != (plan.length, plan.inputs):
        raise InvalidInputError(
            f"phi of shape {phi.shape}, the plan takes {(plan.length, plan.inputs)}"
        )
    bound = msg["obs"].body.bound
    ctx.send(peer, msg["obs"], alice_pack(pk, phi, plan.layout, 0, bound))
    residues = ctx.recv(peer, msg["values"]).decrypt_residues(sk)
    values = np.array(alice_unpack(residues, plan.layout), dtype=object)  # (T, columns)
    y, limbs = values[:, : plan.rows], values[:, plan.rows :]
    return AliceBound(plan, y, [join_limbs(row) for row in limbs], phi)


def encode_products(x, diagonal: bool, scale: int) -> np.ndarray:
    """Alice's encoded Gaussian frames (object ints, T rows): X = round(x 2^fs) and each
    product rounded from the rounded features, floor((X_i X_j + 2^(fs-1)) / 2^fs), so that
    a circuit can check a square exactly (:func:`square_check`).  ``diagonal``: X, then
    the squares; else the order of :func:`smc_hmm.hmm.quadratic_products` without its
    constant (X_i where a factor is the constant 1)."""
    fs, half = scale, 1 << (scale - 1)
    x = np.asarray(x, dtype=float)
    big = np.vectorize(lambda v: int(round(v * 2**fs)), otypes=[object])(x)
    if diagonal:
        return np.concatenate([big, (big * big + half) >> fs], axis=1)
    d = x.shape[1]
    rows, cols = np.triu_indices(d + 1)
    pairs = zip(rows[:-1], cols[:-1])  # the constant z_d z_d = 1 stays implicit
    parts = [big[:, i] if j == d else (big[:, i] * big[:, j] + half) >> fs for i, j in pairs]
    return np.stack(parts, axis=1)


# -- circuit pieces -----------------------------------------------------------------------


def check_equal(c: Circuit, d_a, d_b):
    """[a = b] per value (bits on the last axis): the binding check on D_A and D_B, one
    wire (61 XORs, 60 AND gates)."""
    same = c.not_(c.xor(d_a, d_b))
    while same.shape[-1] > 1:  # a balanced tree of ANDs: log2(l) layers
        half = same.shape[-1] // 2
        merged = c.and_(same[..., :half], same[..., half : 2 * half])
        same = np.concatenate([merged, same[..., 2 * half :]], axis=-1)
    return same[..., 0]


def clamp(c: Circuit, v, low_bits: int, keep: int, width: int):
    """v >> ``low_bits`` (floor), saturated to [-2^keep, 2^keep) and sign-extended to
    ``width`` bits: the public range of a value the circuit reconstructs, so that no
    input outside it can act as a lever (one AND gate a bit)."""
    v = np.asarray(v)[..., low_bits:]
    m = v.shape[-1]
    if keep + 1 > width or keep >= m:
        raise InvalidInputError(f"cannot keep {keep} bits of a {m}-bit value in {width} bits")
    sign = v[..., m - 1]
    over = np.full(sign.shape, 0, dtype=np.int64)
    for i in range(keep, m - 1):
        bit = c.xor(v[..., i], sign)
        over = c.xor(c.xor(over, bit), c.and_(over, bit))
    fill = c.not_(sign)
    low = c.xor(v[..., :keep], c.and_(over[..., None], c.xor(v[..., :keep], fill[..., None])))
    high = np.repeat(sign[..., None], width - keep, axis=-1)
    return np.concatenate([low, high], axis=-1)


def square_check(c: Circuit, x, x2, scale: int, x_bits: int | None = None):
    """[x2 = floor((x x + 2^(scale-1)) / 2^scale)] for signed x and x2 (one wire per
    pair): Alice's x^2 input is her x's square, not a value of her choice.  ``x_bits``:
    x's public width within its wires (the wires above it must repeat its sign)."""
    x = np.asarray(x)
    extend = np.int64(1)
    if x_bits is not None and x_bits < x.shape[-1]:
        top = x[..., x_bits - 1 :]
        extend = check_equal(c, top[..., 1:], np.repeat(top[..., :1], top.shape[-1] - 1, -1))
        x = x[..., :x_bits]
    sq = arith.square(c, x)
    half = arith.constant(np.full(sq.shape[:-1], 1 << (scale - 1)), sq.shape[-1])
    rounded = arith.add(c, sq, half)[..., scale:]
    width = max(rounded.shape[-1], x2.shape[-1])
    a = arith.sign_extend(rounded, width)
    b = arith.sign_extend(x2, width)
    return c.and_(check_equal(c, a, b), extend)


# -- the inputs circuits: values from shares, clamped, checked ------------------------------


@dataclass(frozen=True)
class Emissions:
    """How a chain's per-frame values enter its circuits: ``bound`` (a
    :class:`BoundPlan`: values at scale s + ``shift``, floored by ``shift`` bits and
    clamped to [-2^``keep``, 2^``keep``); ``squares``: (x, x^2) pairs of phi checked at
    ``square_scale``) or, when ``bound`` is None, plain shares of ``share_bits`` bits
    (Alice's and Bob's, added)."""

    bound: BoundPlan | None = None
    shift: int = 0
    keep: int = 0
    squares: tuple[tuple[int, int], ...] = ()
    square_scale: int = 0
    share_bits: int = 0
    #: the x inputs' public width (<= the inputs' width: the wires above repeat the sign)
    square_bits: int | None = None

    @property
    def checked(self) -> bool:
        """Whether the inputs circuits carry a checks' bit: every bound program does
        (each value's range, and the squares where there are any)."""
        return self.bound is not None


def chunks(length: int, frame_and_gates: int) -> list[range]:
    """The frames of each inputs circuit, given the AND gates of a one-frame one: as many
    as keep its tables within :data:`CHUNK_TABLE_BYTES`, 1 to :data:`MAX_INPUT_FRAMES`
    (public: the gates follow from the layout)."""
    fit = CHUNK_TABLE_BYTES // (TABLE_BYTES * max(1, frame_and_gates))
    step = max(1, min(MAX_INPUT_FRAMES, fit))
    return [range(a, min(a + step, length)) for a in range(0, length, step)]


def reconstruct(c: Circuit, em: Emissions, rows: int, frames: int, width: int, first: bool):
    """Declare one chunk's inputs (Alice's, then Bob's, then the checks' carried bit when
    ``first`` is False) and build its values: ``(frames, rows, width)`` wires, clamped,
    and the checks' bit (all x^2 inputs of this and the earlier chunks are squares; None
    without checks)."""
    if em.bound is None:
        a = c.input("evaluator", (frames, rows, em.share_bits))
        b = c.input("garbler", (frames, rows, em.share_bits))
        return arith.sign_extend(arith.add(c, a, b, depth="ripple"), width), None
    plan = em.bound
    parts = [plan.frame_inputs(c) for _ in range(frames)]
    bob = c.input("garbler", (frames, rows, plan.share_bits))
    y = np.stack([f[0] for f in parts])
    v = arith.add(c, y, bob, depth="ripple")  # v mod 2^B over the whole slot
    ok = [in_range(c, v, plan.value_bits).reshape(-1)]
    values = clamp(c, v[..., : plan.value_bits], em.shift, em.keep, width)
    if em.squares:
        phi = np.stack([f[1] for f in parts])
        xs, x2s = (list(v) for v in zip(*em.squares))
        ok.append(square_check(c, phi[:, xs], phi[:, x2s], em.square_scale, em.square_bits))
    if not first:  # the checks of the chunks before
        ok.append(c.input(CARRY, (1,)))
    return values, arith.all_of(c, np.concatenate([np.reshape(o, -1) for o in ok]))


def in_range(c: Circuit, v, bits: int):
    """Per value (bits on the last axis), [v fits ``bits`` signed bits]: every bit from
    ``bits`` - 1 up repeats the sign.  A share Alice shifted by k p, a nonzero multiple
    of the MAC's p = 2^61 - 1 (what the mod-p check cannot see; |k| < 2^(B-61)), lands
    outside: modulo 2^B, k p is a nonzero multiple of 2^61 minus k, of magnitude above
    2^61 - 2^(B-61) > 2^l for l <= 60 and B < 120."""
    v = np.asarray(v)
    same = c.not_(c.xor(v[..., bits:], v[..., bits - 1 : bits]))
    while same.shape[-1] > 1:  # a balanced tree of ANDs per value
        half = same.shape[-1] // 2
        merged = c.and_(same[..., :half], same[..., half : 2 * half])
        same = np.concatenate([merged, same[..., 2 * half :]], axis=-1)
    return same[..., 0]


def run_inputs(lengths: list[int], counts: list[int], checked: bool, run, labels):
    """Run a chain's inputs circuits chunk by chunk: ``run(i, her labels, carry)`` garbles
    or evaluates chunk i (``lengths[i]`` frames, ``counts[i]`` of her input bits) and
    returns its carried labels, the checks' bit last when ``checked``; the checks' label
    carries into the next chunk.  Returns (the chunks' carried labels without the checks'
    bit, the checks' bit's label or an empty array)."""
    outs, checks = [], np.zeros((0, 2), np.uint64)
    at = np.cumsum([0, *counts])
    for i in range(len(lengths)):
        carry = checks if i and checked else None
        out = run(i, labels[at[i] : at[i + 1]], carry)
        if checked:
            out, checks = out[:-1], out[-1:]
        outs.append(out)
    return outs, checks


# -- bound shares of values Bob holds (the decision stage's conversion) ---------------------


def binds(bits: int, sigma: int) -> bool:
    """Whether values of ``bits`` bits fit bound shares (:class:`SharePlan`): below the
    MAC field's 61 bits, in slots of at most 120 (``in_range``'s argument).  Wider ones
    a circuit can only take as plain shares, which their holder could shift."""
    return bits < mac.MAC_BITS and bits + sigma + 1 <= 2 * mac.MAC_BITS - 2


@dataclass(frozen=True)
class SharePlan:
    """Bound shares of ``count`` values E(s_i) that Bob holds under Alice's key, every
    |s_i| < 2^(l-1) (l = ``bits``): the slots of :func:`protocols.stages.garbled.pack_masked`
    (y_i = s_i + 2^(l-1) + r_i, ``width`` bits, which Alice enters whole), and beside
    them the MAC limbs z_k = sum_i U_ki s_i + 2^(m-1) + r'_k (k < MAC_LIMBS, m =
    ``mac_bits``), U_k the limbs of u_i = alpha rho_i mod p.  Mod p,
    sum_k 2^(21 k) (z_k - 2^(m-1) - r'_k) = alpha sum_i rho_i s_i: the check of
    :class:`BobShares` and :class:`AliceShares` (``docs/garbled.md``, "Bound inputs")."""

    count: int
    bits: int
    sigma: int
    #: None: the messages' ciphertext counts stay undeclared
    key_bits: int | None = None

    def __post_init__(self):
        for name in ("count", "bits", "sigma"):
            typed.integer(name, getattr(self, name), 1)
        if not binds(self.bits, self.sigma):
            raise PrecisionError(
                f"bound shares of {self.bits}-bit values in {self.width}-bit slots: the "
                f"values need fewer than {mac.MAC_BITS} bits and the slots at most "
                f"{2 * mac.MAC_BITS - 2} (in_range's bound on a share shifted by k p)"
            )

    @property
    def width(self) -> int:
        """Bits of one of Alice's inputs: the whole slot."""
        return self.bits + self.sigma + 1

    @property
    def mac_bits(self) -> int:
        """m: every |sum_i U_ki s_i| < count 2^21 2^(l-1) <= 2^(m-1)."""
        return (self.count << (MAC_LIMB_BITS + self.bits - 1)).bit_length() + 1

    @property
    def input_bits(self) -> int:
        return self.count * self.width

    def groups(self, bits: int, count: int) -> int | None:
        """Ciphertexts of ``count`` packed values of ``bits`` bits (None: no key size)."""
        if self.key_bits is None:
            return None
        return -(-count // garbled.share_slots(bits, self.sigma, self.key_bits)[1])

    def randomizers(self) -> dict[str, int]:
        """Bob's packed shares and MAC limbs, each ciphertext re-randomised once."""
        bob = self.groups(self.bits, self.count) + self.groups(self.mac_bits, MAC_LIMBS)
        return {"alice": 0, "bob": bob}

    def messages(self, tag: str) -> dict[str, Message]:
        values = MaskedCiphertexts(shape=(self.groups(self.bits, self.count),))
        macs = MaskedCiphertexts(shape=(self.groups(self.mac_bits, MAC_LIMBS),))
        return {
            "shares": Message(f"{tag}.share", (values, macs)),
            "key": key_message(self.input_bits, f"{tag}.key"),
        }


@dataclass
class BobShares:
    """Bob's secrets of one set of bound shares: alpha, the seed, the offsets."""

    plan: SharePlan
    alpha: int
    seed: bytes
    offsets: list[int]  # 2^(l-1) + r_i
    mac_offsets: list[int]  # 2^(m-1) + r'_k
    d_b: int | None = None

    def bits(self) -> np.ndarray:
        """His circuit inputs: -(2^(l-1) + r_i) mod 2^w, (count, w) bits."""
        full = 1 << self.plan.width
        mine = np.array([(-o) % full for o in self.offsets], dtype=object)
        return arith.to_bits(mine, self.plan.width)

    def key_message(self, ctx, zero_labels, delta, tweak: int, peer: str, tag: str) -> None:
        """The corrections of her input wires' MACs and the seed; keeps D_B = -sum_i rho_i
        B(y_i) + alpha sum_i rho_i (2^(l-1) + r_i) - sum_k 2^(21 k) (2^(m-1) + r'_k)."""
        b, corrections = mac.garbler_mac(zero_labels, delta, self.alpha, tweak)
        message = self.plan.messages(tag)["key"]
        ctx.send(peer, message, [corrections.astype("<u8").tobytes(), self.seed])
        rho = _field(self.seed, self.plan.count)
        shares = mac.weighted_sum(b.reshape(self.plan.count, self.plan.width))
        d = -sum(r * int(v) for r, v in zip(rho, shares))
        d += self.alpha * sum(r * o for r, o in zip(rho, self.offsets)) - join_limbs(
            self.mac_offsets
        )
        self.d_b = d % mac.PRIME

    def check_value(self) -> int:
        if self.d_b is None:
            raise ProtocolError("the binding check's value before its key message")
        return self.d_b


def bob_bind_shares(ctx, values: CipherArray, plan: SharePlan, peer: str, tag: str) -> BobShares:
    """Bob -> Alice ``tag.share``: the masked values and the masked MAC limbs, packed."""
    if values.shape != (plan.count,):
        raise InvalidInputError(f"{values.shape} values for bound shares of {plan.count}")
    rng = ctx.rng
    alpha, seed, u = draw_key(rng, plan.count)
    bound = (1 << (plan.mac_bits - 1)) - 1
    macs = values.with_scale(0).lincomb(limb_matrix(u)).with_bound(bound)
    shares, offsets = garbled.pack_masked(values, plan.bits, plan.sigma, rng)
    tags, mac_offsets = garbled.pack_masked(macs, plan.mac_bits, plan.sigma, rng)
    ctx.send(peer, plan.messages(tag)["shares"], [shares, tags])
    return BobShares(plan, alpha, seed, [int(o) for o in offsets], [int(o) for o in mac_offsets])


def draw_key(rng, count: int) -> tuple[int, bytes, list[int]]:
    """Bob's fresh MAC key alpha, the seed of rho, and u_i = alpha rho_i mod p for
    ``count`` values: the MAC of sum_i rho_i v_i is the linear form sum_i u_i v_i."""
    p = mac.PRIME
    alpha = 1 + rng.randbelow(p - 1)
    seed = rng.randbits(8 * SEED_BYTES).to_bytes(SEED_BYTES, "little")
    return alpha, seed, [alpha * r % p for r in _field(seed, count)]


def limb_matrix(values) -> np.ndarray:
    """Elements of Z_p as their MAC_LIMBS limbs of MAC_LIMB_BITS bits, ``(MAC_LIMBS, n)``:
    the exponents of one multi-exponentiation per MAC limb."""
    return np.array([_limbs(v) for v in values], dtype=object).T.reshape(MAC_LIMBS, -1)


@dataclass
class AliceShares:
    """Alice's bound shares: the slot values y_i she decrypted, the joined MAC z and,
    after the key message, her side of the check."""

    plan: SharePlan
    y: list[int]
    z: int
    d_a: int | None = None

    def bits(self) -> np.ndarray:
        """Her circuit inputs: every y_i whole, (count, w) bits."""
        return arith.to_bits(np.array(self.y, dtype=object), self.plan.width)

    def key_message(self, ctx, labels, bits, tweak: int, peer: str, tag: str) -> None:
        """The corrections and the seed in; keeps D_A = sum_i rho_i A(y_i) - z."""
        raw, seed = ctx.recv(peer, self.plan.messages(tag)["key"])
        corrections = np.frombuffer(raw, dtype="<u8")
        if (corrections >= mac.PRIME).any():
            raise ProtocolError(f"{tag}.key: a correction is not an element of Z_p")
        a = mac.evaluator_mac(labels, bits, corrections, tweak)
        shares = mac.weighted_sum(a.reshape(self.plan.count, self.plan.width))
        rho = _field(bytes(seed), self.plan.count)
        self.d_a = (sum(r * int(v) for r, v in zip(rho, shares)) - self.z) % mac.PRIME

    def check_value(self) -> int:
        if self.d_a is None:
            raise ProtocolError("the binding check's value before its key message")
        return self.d_a


def alice_bind_shares(ctx, plan: SharePlan, peer: str, tag: str) -> AliceShares:
    """Alice: the packed values and MAC limbs in, decrypted as residues (whatever Bob
    sends, every slot is a value of its width: nothing to refuse)."""
    _, sk = ctx.keypair
    shares, tags = ctx.recv(peer, plan.messages(tag)["shares"])
    y = garbled.unpack_masked(shares, plan.count, plan.bits, plan.sigma, sk)
    z = garbled.unpack_masked(tags, MAC_LIMBS, plan.mac_bits, plan.sigma, sk)
    return AliceShares(plan, [int(v) for v in y], join_limbs(z))


# -- a circuit on bound shares: its inputs and both halves of its run ------------------------

#: Alice's padded choices of D_A, after the key message
CHECK_TAG = "gc.check"
#: the bound shares' MAC hash tweaks (a domain of their own, :mod:`smc_hmm.gc.mac`)
SHARE_MAC_TWEAK = 0


def share_inputs(c: Circuit, plan: SharePlan, extra: tuple[int, ...] | None = None):
    """Declare a circuit's bound-share inputs in the order the run helpers feed them --
    Alice's slots (count, w), her ``extra`` wires (e.g. a claim's index), D_A; Bob's
    -(2^(l-1) + r_i) mod 2^w, D_B -- and return (the values' l-bit wires, her extra wires
    or None, ok = [D_A = D_B] and every value within l signed bits).  The caller declares
    Bob's own extra inputs after these, and gates its outputs with ok (Alice's first)."""
    y = c.input("evaluator", (plan.count, plan.width))
    hers = c.input("evaluator", extra) if extra else None
    d_a = c.input("evaluator", (mac.MAC_BITS,))
    values, in_range_ok = share_values(
        c, y, c.input("garbler", (plan.count, plan.width)), plan.bits
    )
    d_b = c.input("garbler", (mac.MAC_BITS,))
    return values, hers, c.and_(check_equal(c, d_a, d_b), in_range_ok)


def share_values(c: Circuit, hers, his, bits: int):
    """Values rebuilt from bound shares (her whole slots plus his negated offsets, mod
    2^w) and [every one within ``bits`` signed bits]: a share shifted by k p lands
    outside (:func:`in_range`).  Returns (the values' ``bits`` wires, that bit)."""
    sums = arith.add(c, hers, his, depth="ripple")
    return sums[..., :bits], arith.all_of(c, in_range(c, sums, bits))


def bob_open(ctx, garbler, binding: BobShares, count: int, tag: str) -> np.ndarray:
    """Bob: her padded choices of ``count`` input bits (her slots, then any bits of hers
    that carry no MAC), drawn with D_A's in one extension, then the key message; returns
    the choices' 0-labels."""
    garbler.reserve(ctx, count + mac.MAC_BITS)
    zero = garbler.input_labels(ctx, count)
    shared = binding.plan.input_bits
    binding.key_message(ctx, zero[:shared], garbler.delta, SHARE_MAC_TWEAK, garbler.peer, tag)
    return zero


def bob_check(ctx, garbler, binding: BobShares) -> tuple[np.ndarray, np.ndarray]:
    """Bob: her padded choices of D_A; (their 0-labels, his D_B's bits)."""
    check = garbler.input_labels(ctx, mac.MAC_BITS, CHECK_TAG)
    return check, arith.to_bits(binding.check_value(), mac.MAC_BITS)


def alice_open(ctx, evaluator, binding: AliceShares, extra_bits, tag: str) -> np.ndarray:
    """Alice's half of :func:`bob_open`: the labels of her slots and ``extra_bits``."""
    mine = binding.bits().reshape(-1)
    extra = np.asarray(extra_bits, dtype=np.uint8).reshape(-1)
    evaluator.reserve(ctx, mine.size + extra.size + mac.MAC_BITS)
    labels = evaluator.input_labels(ctx, np.concatenate([mine, extra]))
    binding.key_message(ctx, labels[: mine.size], mine, SHARE_MAC_TWEAK, evaluator.peer, tag)
    return labels


def alice_check(ctx, evaluator, binding: AliceShares) -> np.ndarray:
    """Alice's half of :func:`bob_check`: the labels of D_A."""
    return evaluator.input_labels(
        ctx, arith.to_bits(binding.check_value(), mac.MAC_BITS), CHECK_TAG
    )


def alice_checked(ctx, out) -> np.ndarray:
    """Alice's outputs of the circuit that checks, without the leading ok; an ok of 0
    raises :class:`~smc_hmm.errors.ProtocolError` after her last message."""
    if not int(out[0]):
        ctx.defer(ProtocolError("the circuit's binding check failed: no output"))
    return out[1:]


def bob_run_shared(ctx, garbler, binding: BobShares, circuit, extra_bits=(), tag: str = "dec"):
    """Bob: :func:`bob_open`, :func:`bob_check`, then ``circuit`` on his offsets, D_B and
    ``extra_bits``; his output bits."""
    zero = bob_open(ctx, garbler, binding, circuit.input_count("evaluator") - mac.MAC_BITS, tag)
    check, d_b = bob_check(ctx, garbler, binding)
    extra = np.asarray(extra_bits, dtype=np.uint8).reshape(-1)
    bits = np.concatenate([binding.bits().reshape(-1), d_b, extra])
    return garbler.garble(ctx, circuit, bits, np.concatenate([zero, check]))[0]


def alice_run_shared(ctx, evaluator, binding: AliceShares, circuit, extra_bits=(), tag="dec"):
    """Alice's half of :func:`bob_run_shared`: her output bits (:func:`alice_checked`)."""
    labels = alice_open(ctx, evaluator, binding, extra_bits, tag)
    check = alice_check(ctx, evaluator, binding)
    out, _ = evaluator.evaluate(ctx, circuit, np.concatenate([labels, check]))
    return alice_checked(ctx, out) if circuit.output_count("evaluator") else out


def shared_messages(plan: SharePlan, circuit, tag: str = "dec") -> list[Message]:
    """The messages of a bound-shares run after the garbled stage's setup: the shares,
    her padded choices, the key message, her choices of D_A, the circuit's tables and
    (if Bob has outputs) her labels of them."""
    own = plan.messages(tag)
    choices = circuit.input_count("evaluator") - mac.MAC_BITS
    body = garbled.circuit_messages(circuit)
    return [
        own["shares"],
        garbled.choice_message(choices),
        own["key"],
        garbled.choice_message(mac.MAC_BITS, CHECK_TAG),
        body["tables"],
        body["outputs"],
    ]
