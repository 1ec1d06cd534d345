"""The DGK comparison stage: secure comparison of encrypted integers (DGK with Veugen's
corrections), compare-and-select, the reveal of encrypted results and the DGK argmax
tournament -- the thesis's comparisons, which the ``compare`` and ``argmax`` protocols
(:mod:`protocols.compare`), the decision stage, Viterbi's ``dgk`` mode and audio matching
call.

Papers: Damgard, Geisler, Kroigaard, "Efficient and secure comparison for
on-line auctions" (ACISP 2007; DGK encryption and the bitwise comparison);
Veugen, "Improving the DGK comparison protocol" (WIFS 2012; comparison of
encrypted values with one party holding the key, the random sign s = 1 - 2
delta_B); Veugen, "Correction to 'Improving the DGK comparison protocol'"
(ePrint 2018/1100: the extra term c_{-1} that makes the equal case correct).

Roles (semi-honest, non-colluding; party names are public :class:`Params`):

* **key holder** (Alice): holds the Paillier key pair and a DGK key pair
  (:func:`smc_hmm.crypto.dgk.dgk_keypair_for`, one per Paillier key).
* **evaluator** (Bob): holds E(a_i), E(b_i), i < k, under Alice's Paillier key
  (standalone: plaintext integer lists a, b that he encrypts himself).

Public parameters: l (``bits``, |a_i|, |b_i| < 2^(l-1)), k (``count``), sigma
(``sigma``, statistical, default 40), the key sizes, ``reveal_to``.

Messages (k pairs travel in the same messages: rounds do not grow with k):

0. Alice -> Bob ``cmp.pk`` her Paillier public key and ``cmp.dgk`` her DGK
   public key ``[n, g, h, u, t]`` (both at depth 1; standalone only: a composite
   protocol sends them once).
1. Bob -> Alice ``cmp.masked``: E(d_i), d_i = z_i + r_i, z_i = 2^l + a_i - b_i
   (in [2, 2^(l+1) - 2]), r_i uniform on [0, 2^(l+sigma)).  Declared bound
   2^(l+sigma) + 2^(l+1).
2. Alice -> Bob ``cmp.bits``: E(floor(d_i / 2^l)) (Paillier, bound 2^sigma + 2)
   and DGK encryptions [beta_ij] of the l bits of beta_i = d_i mod 2^l
   (k l DGK ciphertexts, one fixed-width bytes field, :func:`dgk_ciphertexts`).
3. Bob -> Alice ``cmp.blinded``: per pair, with alpha_i = r_i mod 2^l, a random
   bit delta_B and s = 1 - 2 delta_B, the l + 1 DGK ciphertexts
   c_j = s + beta_j - alpha_j + 3 sum_{m > j} (beta_m xor alpha_m)   (j < l)
   c_{-1} = 1 - delta_B + sum_m (beta_m xor alpha_m)                  (the correction)
   each raised to a random exponent in [1, u), re-randomised, and the l + 1
   shuffled (k (l + 1) ciphertexts).
4. Alice -> Bob ``cmp.delta``: E(delta_A,i), delta_A = [some c_j of the pair is 0]
   (DGK zero test c^{v_p} = 1 mod p).  Bob then has
   [beta < alpha] = delta_A xor delta_B and
   E([a < b]) = E(1 + floor(r / 2^l) + (delta_A xor delta_B) - floor(d / 2^l)).
5. ``reveal_to = "alice"``: Bob -> Alice ``cmp.result`` E([a_i < b_i])
   (re-randomised); Alice decrypts.  ``reveal_to = "bob"``: Bob -> Alice
   ``cmp.reveal`` E([a_i < b_i] + rho_i) (rho_i Bob's random masks), Alice ->
   Bob ``cmp.opened`` the decrypted sums as fixed-width bytes (rho_i uniform
   of 41 bits: the opened value hides the bit within 2^-40).  ``"none"``: Bob keeps E([a < b]).

Rounds: 4 for the comparison itself (+1 for the keys, +1 or +2 for the reveal).

Who learns what:

* Alice sees d_i = z_i + r_i: statistically hiding z_i (distance below
  2^(l+1) / 2^(l+sigma) = 2^-(sigma-1)); the blinded, shuffled c_j: only whether
  one of them is zero, i.e. delta_A, which is a uniform bit whatever a, b are
  (it equals [beta < alpha] xor delta_B, and with the c_{-1} term exactly one
  or no term is zero).  Paillier ciphertexts from Bob are re-randomised.  With
  ``reveal_to = "alice"`` she learns the bits [a_i < b_i], nothing else.
* Bob sees only Paillier and DGK ciphertexts under Alice's keys (IND-CPA), and
  with ``reveal_to = "bob"`` the opened [a_i < b_i] + rho_i: he learns the
  bits [a_i < b_i], nothing else.

Secure argmax / max (:func:`bob_argmax`, :data:`ARGMAX`): a tournament of
ceil(log2 k) rounds; in each round all matches of the round are one batched
comparison followed by one batched secure multiplication
(:func:`protocols.stages.primitives.bob_secure_multiply`) that selects, obliviously,
E(winner) = E(x_left) + [x_left < x_right] (E(x_right) - E(x_left)) and the
same for the winner's label (default: its original index).  Bob first applies
a random permutation when ``tie_break = "random"``.  Tie rule: the left
(lower position) operand wins unless the right one is strictly larger, so the
winner is the *lowest original index* among the maxima with ``"lowest"``, a
uniformly random one among them with ``"random"``.  Alice sees only masked
values and uniform bits in every round; at the end she learns the winner's
label (``reveal_to = "alice"``) or Bob does (``"bob"``); Bob may keep E(max).

DGK ciphertexts on the wire are not CipherArrays, so they travel as declared
:class:`~smc_hmm.messages.OpaqueCiphertexts` fields (:func:`dgk_ciphertexts`),
which the transcript harness masks like Paillier ciphertexts: they reveal
nothing (semantically secure under Alice's DGK key), and their count and width
follow from l, k and the DGK key size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpz

from protocols.stages import bound as bd
from protocols.stages import circuits, garbled
from protocols.stages.primitives import (
    MaskSpec,
    alice_secure_multiply,
    bob_secure_multiply,
    multiply_randomizers,
)
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.crypto.dgk import DGKPrivateKey, DGKPublicKey, dgk_keypair_for, min_u
from smc_hmm.crypto.keys import NULL_METER
from smc_hmm.crypto.packing import horner_pack, unpack_slots
from smc_hmm.errors import (
    CryptoError,
    InsecurePeerKeyError,
    InvalidInputError,
    PrecisionError,
    ProtocolError,
    ScaleMismatchError,
    ShapeMismatchError,
)
from smc_hmm.messages import Ciphertexts, Key, Message, OpaqueCiphertexts, Public, Revealed
from smc_hmm.protocol import params_from_config

REVEAL = ("alice", "bob", "none")
TIE_BREAKS = ("lowest", "random")
COMPARISONS = ("garbled", "dgk")
MAX_BITS = 1024
CMP_TAGS = ("cmp.reveal", "cmp.opened", "cmp.result")
ARGMAX_TAGS = ("argmax.reveal", "argmax.opened", "argmax.label")


# -- the DGK ciphertext field ----------------------------------------------------------------


def dgk_ciphertexts(count: int | None = None, width: int | None = None) -> OpaqueCiphertexts:
    """``count`` DGK ciphertexts as one bytes string of ``count * width`` bytes (public sizes)."""
    return OpaqueCiphertexts("DGK", count, width)


# -- the batched comparison: public spec and declared messages ---------------------------------


@dataclass(frozen=True)
class CompareSpec:
    """Public sizes of one batched comparison: l (``bits``), k (``count``), sigma,
    and the DGK ciphertext width in bytes (``None`` before the key is known)."""

    bits: int
    count: int
    sigma: int = 40
    dgk_width: int | None = None

    def __post_init__(self):
        typed.integer("l (bits)", self.bits, 1, MAX_BITS)
        typed.integer("k (count)", self.count, 1)
        typed.integer("sigma", self.sigma, 40, 256)

    @property
    def input_bound(self) -> int:
        """Largest admissible |a|, |b|: 2^(l-1) - 1."""
        return (1 << (self.bits - 1)) - 1

    @property
    def masked_bound(self) -> int:
        return (1 << (self.bits + self.sigma)) + (1 << (self.bits + 1))

    @property
    def high_bound(self) -> int:
        return self.masked_bound >> self.bits

    def with_width(self, width: int) -> CompareSpec:
        return CompareSpec(self.bits, self.count, self.sigma, width)

    def messages(self) -> dict[str, Message]:
        k, l, w = self.count, self.bits, self.dgk_width
        bit = Ciphertexts(0, 1, (k,))
        return {
            "pk": Message("cmp.pk", Key()),
            "dgk": Message("cmp.dgk", Public((list,))),
            "masked": Message("cmp.masked", Ciphertexts(0, self.masked_bound, (k,), fresh=True)),
            "bits": Message(
                "cmp.bits",
                (Ciphertexts(0, self.high_bound, (k,)), dgk_ciphertexts(count=k * l, width=w)),
            ),
            "blinded": Message("cmp.blinded", dgk_ciphertexts(count=k * (l + 1), width=w)),
            "delta": Message("cmp.delta", bit),
        } | dict(zip(("reveal", "opened", "result"), reveal_messages((k,), 1, CMP_TAGS)))

    def randomizers(self) -> dict[str, int]:
        """Fresh Paillier randomizers one batched comparison draws: Alice encrypts
        floor(d / 2^l) and delta_A per pair, Bob re-randomises the masked d."""
        return {"alice": 2 * self.count, "bob": self.count}

    def check_key(self, public_key) -> None:
        """PrecisionError unless z + r fits the Paillier plaintext space (public check)."""
        public_key.check_plain(self.masked_bound, f"a {self.bits}-bit comparison's masked value")


# -- key exchange ----------------------------------------------------------------------------


def alice_send_keys(
    ctx, spec: CompareSpec, peer: str = "bob", *, dgk_bits=None, dgk_t=None
) -> DGKPrivateKey:
    """Alice: her (cached) DGK key pair for her Paillier key; both public keys to ``peer``."""
    pk, _ = ctx.keypair
    spec.check_key(pk)
    dgk_pk, dgk_sk = dgk_keypair_for(pk, spec.bits, bits=dgk_bits, t=dgk_t)
    msg = spec.messages()
    ctx.send(peer, msg["pk"], pk)  # step 0: the Paillier key ...
    ctx.send(peer, msg["dgk"], dgk_pk.to_wire())  # ... and the DGK key [n, g, h, u, t]
    return dgk_sk


def bob_recv_keys(ctx, spec: CompareSpec, peer: str = "alice", *, dgk_bits=None):
    """Bob: Alice's Paillier and DGK public keys, checked against the public parameters."""
    msg = spec.messages()
    pk = ctx.recv(peer, msg["pk"])  # step 0
    wire = ctx.recv(peer, msg["dgk"])
    try:
        dgk_pk = DGKPublicKey.from_wire(wire, max_bits=ctx.max_key_bits)
    except CryptoError as e:
        raise ProtocolError(f"{peer} sent a malformed DGK key: {e}") from e
    check_dgk_key(ctx, dgk_pk, spec, dgk_bits)
    return pk, dgk_pk


def check_dgk_key(ctx, dgk_pk: DGKPublicKey, spec: CompareSpec, dgk_bits=None) -> None:
    if dgk_pk.u < min_u(spec.bits):
        raise ProtocolError(f"DGK u = {dgk_pk.u} is too small for l = {spec.bits} (need >= 3 l)")
    if dgk_bits is not None and dgk_pk.bits != dgk_bits:
        raise ProtocolError(f"DGK key of {dgk_pk.bits} bits, agreed {dgk_bits}")
    if dgk_pk.bits < ctx.min_key_bits:
        raise InsecurePeerKeyError(
            f"{ctx.label}: a {dgk_pk.bits}-bit DGK key; this party accepts {ctx.min_key_bits} bits"
        )


# -- the batched comparison: Bob's and Alice's halves ----------------------------------------


def _check_operands(enc_a, enc_b, spec: CompareSpec) -> None:
    for name, enc in (("a", enc_a), ("b", enc_b)):
        if not isinstance(enc, CipherArray):
            raise InvalidInputError(f"{name} must be a CipherArray, got {type(enc).__name__}")
        if enc.shape != (spec.count,):
            raise ShapeMismatchError(f"{name} has shape {enc.shape}, declared ({spec.count},)")
        if enc.bound > spec.input_bound:
            raise PrecisionError(
                f"{name} may need {enc.bound.bit_length()} bits: |{name}| < 2^(l-1) with "
                f"l = {spec.bits} is not guaranteed"
            )
    enc_a.public_key.same_key(enc_b.public_key)
    if enc_a.scale != enc_b.scale:
        raise ScaleMismatchError(f"a at scale {enc_a.scale}, b at scale {enc_b.scale}")


def bob_compare(
    ctx,
    enc_a: CipherArray,
    enc_b: CipherArray,
    dgk_pk: DGKPublicKey,
    spec: CompareSpec,
    peer: str = "alice",
) -> CipherArray:
    """Bob: E(a_i), E(b_i) (i < k) -> E([a_i < b_i]) (bound 1, scale 0); 4 messages."""
    _check_operands(enc_a, enc_b, spec)
    if not isinstance(dgk_pk, DGKPublicKey):
        raise InvalidInputError("bob_compare needs Alice's DGKPublicKey")
    if dgk_pk.u < min_u(spec.bits):
        raise CryptoError(f"DGK u = {dgk_pk.u} is too small for l = {spec.bits}")
    pk = enc_a.public_key
    spec.check_key(pk)
    spec = spec.with_width(dgk_pk.width)
    msg = spec.messages()
    k, l, rng = spec.count, spec.bits, ctx.rng
    pk.meter.count("compare", k)  # a composite operation counts itself
    enc_a, enc_b = enc_a.with_scale(0), enc_b.with_scale(0)
    # Step 1: E(d) = E(2^l + a - b + r), r uniform on [0, 2^(l + sigma))
    rs = [rng.randbits(l + spec.sigma) for _ in range(k)]
    offsets = np.array([(1 << l) + r for r in rs], dtype=object)
    ctx.send(peer, msg["masked"], (enc_a - enc_b).add_encoded(offsets))
    # Step 2: E(floor(d / 2^l)) and the DGK bits of beta = d mod 2^l
    enc_high, blob = ctx.recv(peer, msg["bits"])
    enc_high.public_key.same_key(pk)
    try:
        beta_bits = dgk_pk.unpack(blob, k * l)
    except CryptoError as e:
        raise ProtocolError(f"cmp.bits: {e}") from e
    # Step 3: the blinded, shuffled c_j of each pair (Veugen 2012 + ePrint 2018/1100)
    delta_b = [rng.randbits(1) for _ in range(k)]
    blinded = []
    for i in range(k):
        alpha = rs[i] & ((1 << l) - 1)
        e = beta_bits[i * l : (i + 1) * l]
        blinded.extend(blind_bitwise(dgk_pk, e, alpha, delta_b[i], rng, pk.meter))
    ctx.send(peer, msg["blinded"], dgk_pk.pack(blinded))
    # Step 4: E(delta_A); [beta < alpha] = delta_A xor delta_B
    enc_delta = ctx.recv(peer, msg["delta"])
    enc_delta.public_key.same_key(pk)
    db = np.array(delta_b, dtype=object)
    xor = enc_delta.mul(1 - 2 * db).add_encoded(db)
    # [a < b] = 1 - [a >= b] = 1 + floor(r / 2^l) + [beta < alpha] - floor(d / 2^l)
    out = (xor - enc_high).add_encoded(np.array([1 + (r >> l) for r in rs], dtype=object))
    return out.with_bound(1)


def blind_bitwise(dgk_pk: DGKPublicKey, beta_bits, alpha: int, delta_b: int, rng, meter) -> list:
    """Step 3 for one pair: from Alice's DGK encryptions ``beta_bits`` of the l bits of beta
    (least significant first) and Bob's l-bit alpha and bit delta_B, the l + 1 terms

        c_j = s + beta_j - alpha_j + 3 sum_{m > j} (beta_m xor alpha_m)   (s = 1 - 2 delta_B)
        c_-1 = 1 - delta_B + sum_m (beta_m xor alpha_m)

    each raised to a random exponent in [1, u), re-randomised and shuffled.  Exactly one
    or none of them is zero, and which says delta_A = [beta < alpha] xor delta_B only."""
    n, u, g = dgk_pk.n, dgk_pk.u, dgk_pk.g
    shift = {d: dgk_pk.constant(d) for d in (-2, -1, 1)}  # g^(s - alpha_j)
    s = 1 - 2 * delta_b
    group = []
    w_all = w3 = 1  # prod_{m > j} E(beta_m xor alpha_m), and its cube
    for j in reversed(range(len(beta_bits))):
        a_j = (alpha >> j) & 1
        c = beta_bits[j] * w3 % n
        if s - a_j:
            c = c * shift[s - a_j] % n
        group.append(c)
        x = beta_bits[j] if a_j == 0 else g * dgk_pk.neg(beta_bits[j]) % n  # E(beta_j xor alpha_j)
        w_all = w_all * x % n
        w3 = w3 * (x * x % n * x % n) % n
    group.append(w_all * g % n if delta_b == 0 else w_all % n)  # c_{-1}
    group = [pow(c, 1 + rng.randbelow(u - 1), n) for c in group]
    group = dgk_pk.rerandomize(group, rng, meter)
    rng.shuffle(group)
    return group


def alice_compare(ctx, dgk_sk: DGKPrivateKey, spec: CompareSpec, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_compare`."""
    pk, sk = ctx.keypair
    spec.check_key(pk)
    dgk_pk = dgk_sk.public_key
    spec = spec.with_width(dgk_pk.width)
    msg = spec.messages()
    k, l = spec.count, spec.bits
    # Step 1: d = z + r
    ds = [int(d) for d in ctx.recv(peer, msg["masked"]).decrypt_ints(sk)]
    ds = _within(ctx, ds, spec.masked_bound, "cmp.masked")
    # Step 2: E(floor(d / 2^l)) and DGK encryptions of the bits of d mod 2^l (LSB first)
    highs = np.array([d >> l for d in ds], dtype=object)
    bits = [(d >> j) & 1 for d in ds for j in range(l)]
    enc_high = CipherArray.encrypt_encoded(pk, highs, 0, spec.high_bound)
    ctx.send(peer, msg["bits"], [enc_high, dgk_pk.pack(dgk_sk.encrypt(bits, ctx.rng, pk.meter))])
    # Step 3 -> 4: zero tests; delta_A = [a zero among the pair's l + 1 terms]
    delta = _zero_tests(ctx, peer, msg["blinded"], dgk_pk, dgk_sk, pk, k, l)
    ctx.send(peer, msg["delta"], CipherArray.encrypt_encoded(pk, delta, 0, 1))


def _zero_tests(ctx, peer: str, blinded: Message, dgk_pk, dgk_sk, pk, k: int, l: int) -> list:
    """Alice's zero tests (step 4): Bob's ``blinded`` message of k (l + 1) DGK terms;
    delta_A per pair, 1 if one of its l + 1 terms decrypts to zero."""
    blob = ctx.recv(peer, blinded)
    try:
        cs = dgk_pk.unpack(blob, k * (l + 1))
    except CryptoError as e:
        raise ProtocolError(f"{blinded.tag}: {e}") from e
    zero = dgk_sk.is_zero(cs, pk.meter)
    return [int(any(zero[i * (l + 1) : (i + 1) * (l + 1)])) for i in range(k)]


# -- compare and select: the max of each pair, and later products with the bits --------------
#
# Keyword spotting's Viterbi recursion (:mod:`protocols.stages.decoding`) needs, per pair, the max
# E(max(a, b)) and keeps the bit [a < b] encrypted for later products with encrypted
# weights.  With :func:`bob_compare` and a secure multiplication that is 4 + 2 messages and,
# per pair, three decryptions and three re-randomisations.  The comparison's own values give
# the selection for two more encryptions by Alice and no extra message:
#
#   [a < b] = c_B - H + s_B delta_A,    c_B = 1 + floor(r / 2^l) + delta_B,  s_B = 1 - 2 delta_B
#
# (H = floor(d / 2^l) and delta_A are Alice's, r and delta_B Bob's: step 4 of the
# comparison), and Alice knows m = 2^l - d = (b - a) - r.  So with E(H m) and E(delta_A m)
# from her (steps 2 and 4), Bob gets E([a < b] (b - a)) = c_B E(m) - E(H m) + s_B E(delta_A m)
# + r E([a < b]) and E(max) = E(a) + that.  Later, for encrypted v (a traceback's weight),
# Bob sends E(v + rho) (rho of sigma + bits(v) bits), Alice returns E(H w) and E(delta_A w)
# for her w = v + rho, and E([a < b] v) = c_B E(w) - E(H w) + s_B E(delta_A w) - rho E([a < b]).
# Bob's masked values travel packed, many per ciphertext (Horner's rule: bits(slot)
# squarings per value), so Alice decrypts once per ciphertext.  What Alice sees is what the
# comparison and the secure multiplication show her: masked values (statistical distance
# 2^-sigma), the uniform delta_A, and her own H and m; Bob sees ciphertexts only.


SELECT_TAGS = ("sel.masked", "sel.bits", "sel.blinded", "sel.delta", "sel.weights", "sel.products")


def _slots(key_bits: int, slot_bits: int) -> int:
    from smc_hmm.crypto.packing import plain_bits

    per = plain_bits(key_bits) // slot_bits
    if per < 1:
        raise PrecisionError(f"a {key_bits}-bit key cannot hold one {slot_bits}-bit slot")
    return per


class _Packed:
    """``count`` values packed into ciphertexts of a ``key_bits`` key, in slots of
    ``slot_bits`` bits (the spec's fields and property)."""

    @property
    def per(self) -> int:
        """Masked values per packed ciphertext."""
        return _slots(self.key_bits, self.slot_bits)

    @property
    def packed(self) -> int:
        return -(-self.count // self.per)


@dataclass(frozen=True)
class SelectSpec(_Packed):
    """Public sizes of a batched compare-and-select (:func:`bob_compare_select`) of
    ``count`` pairs of l = ``bits`` bits, under a ``key_bits`` key."""

    bits: int
    count: int
    key_bits: int
    sigma: int = 40
    dgk_width: int | None = None

    def __post_init__(self):
        CompareSpec(self.bits, self.count, self.sigma)

    @property
    def compare(self) -> CompareSpec:
        return CompareSpec(self.bits, self.count, self.sigma, self.dgk_width)

    @property
    def slot_bits(self) -> int:
        return self.compare.masked_bound.bit_length() + 1

    @property
    def m_bound(self) -> int:
        """|m| = |2^l - d|."""
        return self.compare.masked_bound + (1 << self.bits)

    def messages(self) -> dict[str, Message]:
        k, l, w, c = self.count, self.bits, self.dgk_width, self.compare
        high = c.high_bound
        return {
            "masked": Message(
                "sel.masked",
                Ciphertexts(0, 1 << (self.per * self.slot_bits), (self.packed,), fresh=True),
            ),
            "bits": Message(
                "sel.bits",
                (
                    Ciphertexts(0, high, (k,)),
                    Ciphertexts(0, high * self.m_bound, (k,)),
                    dgk_ciphertexts(count=k * l, width=w),
                ),
            ),
            "blinded": Message("sel.blinded", dgk_ciphertexts(count=k * (l + 1), width=w)),
            "delta": Message(
                "sel.delta", (Ciphertexts(0, 1, (k,)), Ciphertexts(0, self.m_bound, (k,)))
            ),
        }

    def randomizers(self) -> dict[str, int]:
        """Alice encrypts H, H m, delta_A and delta_A m per pair; Bob re-randomises the
        packed masked values."""
        return {"alice": 4 * self.count, "bob": self.packed}


@dataclass(frozen=True)
class ProductSpec(_Packed):
    """Public sizes of a batch of products [a_i < b_i] v_i (:func:`bob_select_products`):
    ``count`` of them, every |v_i| <= ``bound``."""

    count: int
    key_bits: int
    bound: int = 1
    sigma: int = 40

    @property
    def mask_bits(self) -> int:
        return self.bound.bit_length() + self.sigma

    @property
    def slot_bits(self) -> int:
        return self.mask_bits + 2

    def messages(self, high_bound: int) -> dict[str, Message]:
        k, w = self.count, (1 << self.slot_bits)
        return {
            "weights": Message(
                "sel.weights",
                Ciphertexts(0, 1 << (self.per * self.slot_bits), (self.packed,), fresh=True),
            ),
            "products": Message(
                "sel.products", (Ciphertexts(0, high_bound * w, (k,)), Ciphertexts(0, w, (k,)))
            ),
        }

    def randomizers(self) -> dict[str, int]:
        return {"alice": 2 * self.count, "bob": self.packed}


@dataclass
class SelectBits:
    """Bob's handle on a batch of encrypted bits [a_i < b_i] (from :func:`bob_compare_select`):
    the bits, Alice's E(H) and E(delta_A), and his c_B and s_B per pair."""

    bit: CipherArray
    high: CipherArray
    delta: CipherArray
    c: list[int]
    s: list[int]
    high_bound: int

    def take(self, index) -> SelectBits:
        index = np.asarray(index, dtype=int).reshape(-1)
        return SelectBits(
            self.bit[index],
            self.high[index],
            self.delta[index],
            [self.c[i] for i in index],
            [self.s[i] for i in index],
            self.high_bound,
        )

    @classmethod
    def concatenate(cls, parts) -> SelectBits:
        parts = list(parts)
        return cls(
            CipherArray.concatenate([p.bit for p in parts]).with_bound(1),
            CipherArray.concatenate([p.high for p in parts]),
            CipherArray.concatenate([p.delta for p in parts]),
            [c for p in parts for c in p.c],
            [s for p in parts for s in p.s],
            parts[0].high_bound,
        )


#: per worker process: DGK keys rebuilt from their public numbers (tables built once)
_LANE_KEYS: dict = {}


def _lane_public(wire) -> DGKPublicKey:
    key = ("pk", tuple(int(v) for v in wire))
    if key not in _LANE_KEYS:
        _LANE_KEYS[key] = DGKPublicKey(*wire)
    return _LANE_KEYS[key]


def _blind_task(wire, jobs) -> list[int]:
    """A lane's share of Bob's step 3: the blinded terms of its pairs (its own CSPRNG)."""
    dgk_pk = _lane_public(wire)
    rng = Rng.system()
    return [
        int(c)
        for beta, alpha, delta_b in jobs
        for c in blind_bitwise(dgk_pk, beta, alpha, delta_b, rng, NULL_METER)
    ]


def _dgk_encrypt_task(secret, values) -> list[int]:
    """A lane's share of Alice's DGK bit encryptions (her key rebuilt once per process)."""
    key = ("sk", tuple(int(v) for v in secret[0]), *map(int, secret[1:]))
    if key not in _LANE_KEYS:
        _LANE_KEYS[key] = DGKPrivateKey(DGKPublicKey(*secret[0]), *secret[1:])
    return [int(c) for c in _LANE_KEYS[key].encrypt(values, Rng.system())]


def _lanes(public_key, count: int):
    """The party's compute lanes when a batch of ``count`` pairs is worth splitting."""
    compute = getattr(public_key, "compute", None)
    return compute if compute is not None and compute.parallel and count >= 2 else None


def _blind_all(dgk_pk, jobs, rng, meter, compute) -> list:
    if compute is None:
        return [c for job in jobs for c in blind_bitwise(dgk_pk, *job, rng, meter)]
    chunks = compute.chunks(jobs)
    wire = dgk_pk.to_wire()
    parts = compute.map(
        _blind_task,
        [wire] * len(chunks),
        chunks,
        local=lambda _wire, js: [c for job in js for c in blind_bitwise(dgk_pk, *job, rng, meter)],
    )
    meter.count("dgk_rerandomize", sum(len(job[0]) + 1 for c in chunks[1:] for job in c))
    return [mpz(c) for part in parts for c in part]


def _encrypt_bits(dgk_sk, bits, rng, meter, compute) -> list:
    if compute is None or len(bits) < 64:
        return dgk_sk.encrypt(bits, rng, meter)
    chunks = compute.chunks(bits)
    pk = dgk_sk.public_key
    secret = (pk.to_wire(), int(dgk_sk.p), int(dgk_sk.q), int(dgk_sk.v_p), int(dgk_sk.v_q))
    parts = compute.map(
        _dgk_encrypt_task,
        [secret] * len(chunks),
        chunks,
        local=lambda _secret, values: dgk_sk.encrypt(values, rng, meter),
    )
    meter.count("dgk_encrypt", sum(len(c) for c in chunks[1:]))
    return [mpz(c) for part in parts for c in part]


def bob_compare_select(
    ctx,
    enc_a: CipherArray,
    enc_b: CipherArray,
    dgk_pk: DGKPublicKey,
    spec: SelectSpec,
    peer="alice",
) -> tuple[CipherArray, SelectBits]:
    """Bob: E(a_i), E(b_i) -> E(max(a_i, b_i)) (a wins ties) and the bits [a_i < b_i] kept
    encrypted for :func:`bob_select_products`; the comparison's 4 messages."""
    cspec = spec.compare
    _check_operands(enc_a, enc_b, cspec)
    pk = enc_a.public_key
    cspec.check_key(pk)
    spec = SelectSpec(spec.bits, spec.count, spec.key_bits, spec.sigma, dgk_pk.width)
    msg = spec.messages()
    k, l, rng = spec.count, spec.bits, ctx.rng
    pk.meter.count("compare", k)
    enc_a, enc_b = enc_a.with_scale(0), enc_b.with_scale(0)
    # Step 1: d = 2^l + a - b + r, packed
    rs = [rng.randbits(l + spec.sigma) for _ in range(k)]
    diff = enc_b - enc_a
    d = (enc_a - enc_b).add_encoded(np.array([(1 << l) + r for r in rs], dtype=object))
    packed = horner_pack(d.with_bound(cspec.masked_bound), spec.slot_bits, spec.per)
    ctx.send(peer, msg["masked"], packed)
    # Step 2: E(H), E(H m) and the DGK bits of d mod 2^l
    enc_high, enc_hm, blob = ctx.recv(peer, msg["bits"])
    try:
        beta_bits = dgk_pk.unpack(blob, k * l)
    except CryptoError as e:
        raise ProtocolError(f"sel.bits: {e}") from e
    # Step 3: the blinded, shuffled terms (as bob_compare)
    delta_b = [rng.randbits(1) for _ in range(k)]
    jobs = [(beta_bits[i * l : (i + 1) * l], rs[i] & ((1 << l) - 1), delta_b[i]) for i in range(k)]
    blinded = _blind_all(dgk_pk, jobs, rng, pk.meter, _lanes(pk, k))  # on the party's lanes
    ctx.send(peer, msg["blinded"], dgk_pk.pack(blinded))
    # Step 4: E(delta_A), E(delta_A m)
    enc_delta, enc_dm = ctx.recv(peer, msg["delta"])
    c = [1 + (r >> l) + db for r, db in zip(rs, delta_b)]
    s = [1 - 2 * db for db in delta_b]
    c_arr, s_arr = np.array(c, dtype=object), np.array(s, dtype=object)
    bit = (enc_delta.mul(s_arr) - enc_high).add_encoded(c_arr).with_bound(1)
    m = diff.add_encoded(np.array([-r for r in rs], dtype=object))
    bit_m = m.mul(c_arr) - enc_hm + enc_dm.mul(s_arr)
    product = bit_m + bit.mul(np.array(rs, dtype=object))
    best = (enc_a + product).with_bound(max(enc_a.bound, enc_b.bound))
    return best, SelectBits(bit, enc_high, enc_delta, c, s, cspec.high_bound)


def alice_compare_select(ctx, dgk_sk: DGKPrivateKey, spec: SelectSpec, peer="bob"):
    """Alice's role in :func:`bob_compare_select`; returns her (H, delta_A) per pair, which
    :func:`alice_select_products` needs."""
    pk, sk = ctx.keypair
    dgk_pk = dgk_sk.public_key
    spec = SelectSpec(spec.bits, spec.count, spec.key_bits, spec.sigma, dgk_pk.width)
    spec.compare.check_key(pk)
    msg = spec.messages()
    k, l = spec.count, spec.bits
    packed = ctx.recv(peer, msg["masked"]).decrypt_ints(sk)
    ds = ctx.checked(lambda: unpack_slots(packed, spec.slot_bits, spec.per, k), lambda: [0] * k)
    ds = _within(ctx, ds, spec.compare.masked_bound, "sel.masked")
    highs = [d >> l for d in ds]
    ms = [(1 << l) - d for d in ds]
    bits = [(d >> j) & 1 for d in ds for j in range(l)]
    hb, mb = spec.compare.high_bound, spec.m_bound
    ctx.send(
        peer,
        msg["bits"],
        [
            CipherArray.encrypt_encoded(pk, highs, 0, hb),
            CipherArray.encrypt_encoded(pk, [h * m for h, m in zip(highs, ms)], 0, hb * mb),
            dgk_pk.pack(_encrypt_bits(dgk_sk, bits, ctx.rng, pk.meter, _lanes(pk, k))),
        ],
    )
    delta = _zero_tests(ctx, peer, msg["blinded"], dgk_pk, dgk_sk, pk, k, l)
    ctx.send(
        peer,
        msg["delta"],
        [
            CipherArray.encrypt_encoded(pk, delta, 0, 1),
            CipherArray.encrypt_encoded(pk, [a * m for a, m in zip(delta, ms)], 0, mb),
        ],
    )
    return highs, delta


def bob_select_products(
    ctx, bits: SelectBits, values: CipherArray, spec: ProductSpec, peer="alice"
) -> CipherArray:
    """Bob: E([a_i < b_i] v_i) for encrypted v_i (|v_i| <= ``spec.bound``, v_i >= 0), one
    round trip: his masked weights packed, Alice's two products per value."""
    k = spec.count
    if values.shape != (k,) or bits.bit.shape != (k,) or values.bound > spec.bound:
        raise InvalidInputError(f"{k} non-negative values within {spec.bound} expected")
    msg = spec.messages(bits.high_bound)
    rhos = [ctx.rng.randbits(spec.mask_bits) for _ in range(k)]
    rho = np.array(rhos, dtype=object)
    w = values.with_scale(0).add_encoded(rho).with_bound(1 << spec.slot_bits)
    ctx.send(peer, msg["weights"], horner_pack(w, spec.slot_bits, spec.per))
    enc_hw, enc_dw = ctx.recv(peer, msg["products"])
    c = np.array(bits.c, dtype=object)
    s = np.array(bits.s, dtype=object)
    bit_w = w.mul(c) - enc_hw + enc_dw.mul(s)
    return (bit_w - bits.bit.mul(rho)).with_bound(spec.bound)


def alice_select_products(ctx, shares, spec: ProductSpec, high_bound: int, peer="bob") -> None:
    """Alice's role in :func:`bob_select_products`; ``shares`` her (H, delta_A) lists of
    the same pairs, in the same order."""
    pk, sk = ctx.keypair
    msg = spec.messages(high_bound)
    highs, deltas = shares
    packed = ctx.recv(peer, msg["weights"]).decrypt_ints(sk)
    ws = ctx.checked(  # a negative slot no honest Bob sends: refused after her last message
        lambda: unpack_slots(packed, spec.slot_bits, spec.per, spec.count),
        lambda: [0] * spec.count,
    )
    top = 1 << spec.slot_bits
    ctx.send(
        peer,
        msg["products"],
        [
            CipherArray.encrypt_encoded(
                pk, [h * w for h, w in zip(highs, ws)], 0, high_bound * top
            ),
            CipherArray.encrypt_encoded(pk, [a * w for a, w in zip(deltas, ws)], 0, top),
        ],
    )


# -- revealing encrypted results ---------------------------------------------------------------


def _reveal_layout(bound: int, sigma: int = 40) -> tuple[int, int]:
    """(mask bits, bytes per opened value): masks uniform on [0, 2^(bits(bound) + sigma)),
    opened values sent as fixed-width big-endian bytes (their size is public)."""
    mask_bits = bound.bit_length() + sigma
    return mask_bits, (mask_bits + 1 + 7) // 8


def reveal_messages(shape, bound: int, tags, sigma: int = 40) -> tuple[Message, Message, Message]:
    reveal_tag, opened_tag, result_tag = tags
    mask_bits, _ = _reveal_layout(bound, sigma)
    return (
        Message(reveal_tag, Ciphertexts(0, bound + (1 << mask_bits), shape, fresh=True)),
        Message(opened_tag, Revealed("masked values", (bytes,))),
        Message(result_tag, Ciphertexts(0, bound, shape, fresh=True)),
    )


def reveal_randomizers(to: str, size: int = 1) -> dict[str, int]:
    """Randomizers of :func:`bob_reveal`: Bob re-randomises what he sends either way."""
    return {"alice": 0, "bob": size if to in ("alice", "bob") else 0}


def bob_reveal(
    ctx, enc: CipherArray, bound: int, to: str, peer: str, tags=CMP_TAGS, sigma: int = 40
):
    """Bob: reveal E(v) (0 <= v <= ``bound``) to ``to``.

    ``"alice"``: she decrypts the re-randomised E(v).  ``"bob"``: Bob adds masks
    uniform on [0, 2^(bits(bound) + sigma)), Alice opens the sums (fixed-width
    bytes), Bob subtracts.  ``"none"``: returns ``enc`` unchanged.
    """
    reveal, opened, result = reveal_messages(enc.shape, bound, tags, sigma)
    if to == "alice":
        ctx.send(peer, result, enc)
        return None
    if to == "bob":
        mask_bits, width = _reveal_layout(bound, sigma)
        masks = [ctx.rng.randbits(mask_bits) for _ in range(enc.size)]
        masked = enc.add_encoded(np.array(masks, dtype=object).reshape(enc.shape))
        ctx.send(peer, reveal, masked)
        blob = ctx.recv(peer, opened)
        if len(blob) != enc.size * width:
            raise ProtocolError(f"{opened.tag}: {len(blob)} bytes, expected {enc.size * width}")
        values = [
            int.from_bytes(blob[i * width : (i + 1) * width], "big") - m
            for i, m in enumerate(masks)
        ]
        if not all(0 <= v <= bound for v in values):
            raise ProtocolError(f"{opened.tag}: an opened value is outside [0, {bound}]")
        return values
    return enc


def alice_reveal(ctx, shape, bound: int, to: str, peer: str, tags=CMP_TAGS, sigma: int = 40):
    """Alice's half of :func:`bob_reveal`; returns the values when ``to = "alice"``."""
    _, sk = ctx.keypair
    reveal, opened, result = reveal_messages(shape, bound, tags, sigma)
    if to == "alice":
        values = [int(v) for v in ctx.recv(peer, result).decrypt_ints(sk).reshape(-1)]
        return _within(ctx, values, bound + 1, result.tag)
    if to == "bob":
        _, width = _reveal_layout(bound, sigma)
        values = [int(v) for v in ctx.recv(peer, reveal).decrypt_ints(sk).reshape(-1)]
        values = _within(ctx, values, 1 << (8 * width), reveal.tag)
        ctx.send(peer, opened, b"".join(v.to_bytes(width, "big") for v in values))
    return None


def _within(ctx, values: list[int], bound: int, tag: str) -> list[int]:
    """``values``, each in [0, ``bound``).  One outside is a reply no honest Bob sends, but
    whether it lands outside depends on her values too: refused after her last message
    (:meth:`~smc_hmm.runtime.context.PartyContext.defer`) and read as 0 until then."""
    if all(0 <= v < bound for v in values):
        return values
    ctx.defer(ProtocolError(f"{tag}: a masked value is outside its declared range"))
    return [v if 0 <= v < bound else 0 for v in values]


def check_names(key_holder, evaluator) -> None:
    if not all(isinstance(x, str) and x for x in (key_holder, evaluator)) or (
        key_holder == evaluator
    ):
        raise InvalidInputError("key_holder and evaluator must be distinct non-empty names")


# -- secure argmax / max --------------------------------------------------------------------


@dataclass(frozen=True)
class ComparisonParams:
    """The public parameters a batched comparison (``compare``) and a secure argmax share:
    l (``bits``), k (``count``), sigma, who learns the result, the two parties' names, the
    DGK key sizes and ``comparison``: ``garbled`` (the default: a circuit Bob garbles,
    :mod:`protocols.stages.circuits`) or ``dgk`` (this module's, the thesis's)."""

    bits: int = 32
    count: int = 1
    sigma: int = 40
    reveal_to: str = typed.one_of("bob", REVEAL)
    key_holder: str = "alice"
    evaluator: str = "bob"
    dgk_bits: int | None = typed.whole(None, 128, None, optional=True)
    dgk_t: int | None = typed.whole(None, 16, None, optional=True)
    comparison: str = typed.one_of("garbled", COMPARISONS)

    def __post_init__(self):
        typed.check_fields(self)
        check_names(self.key_holder, self.evaluator)


@dataclass(frozen=True)
class ArgmaxParams(ComparisonParams):
    """Public parameters of a secure argmax of k values of l bits.

    ``label_bound``: labels are integers in [0, label_bound] (default k - 1:
    the original indices).  ``reveal_to``: who learns the winner's label.
    ``with_max``: Bob also returns E(max) (CipherArray of shape (1,)).
    """

    count: int = 2
    reveal_to: str = typed.one_of("alice", REVEAL)
    tie_break: str = typed.one_of("lowest", TIE_BREAKS)
    with_max: bool = typed.flag(False)
    label_bound: int | None = typed.whole(None, 0, None, optional=True)

    def __post_init__(self):
        CompareSpec(self.bits, self.count, self.sigma)
        typed.integer("count (values of an argmax)", self.count, 2)
        super().__post_init__()
        if self.comparison == "garbled" and (self.reveal_to == "none" or self.with_max):
            raise InvalidInputError(
                "the garbled argmax reveals the label to alice or bob; keeping E(label) or "
                'E(max) needs comparison = "dgk"'
            )

    @property
    def bound(self) -> bool:
        """The garbled argmax takes bound shares where the values fit the MAC field
        (:func:`protocols.stages.bound.binds`), else plain ones (``docs/security.md``)."""
        return bd.binds(self.bits, self.sigma)

    def share_plan(self, key_bits: int | None = None) -> bd.SharePlan:
        """The garbled argmax's bound shares of the k values."""
        return bd.SharePlan(self.count, self.bits, self.sigma, key_bits)

    @property
    def labels_bound(self) -> int:
        return self.count - 1 if self.label_bound is None else self.label_bound

    @property
    def rounds(self) -> list[int]:
        """The number of matches in each tournament round."""
        out, m = [], self.count
        while m > 1:
            out.append(m // 2)
            m = m - m // 2
        return out

    def spec(self) -> CompareSpec:
        return CompareSpec(self.bits, 1, self.sigma)

    def mask_spec(self, matches: int) -> MaskSpec:
        """Secure multiplication of the bits by the stacked (value, label) differences."""
        diff = max((1 << self.bits) - 2, self.labels_bound, 1)
        return MaskSpec((0, 0), (1, diff), (2 * matches,), self.sigma)

    def randomizers(self) -> dict[str, int]:
        """Fresh Paillier randomizers of the tournament (without the label's reveal): per
        round a comparison of m pairs and a secure multiplication of 2m values, and Bob's
        encrypted labels (what an offline phase precomputes)."""
        alice, bob = 0, self.count  # the labels
        for m in self.rounds:
            cmp = CompareSpec(self.bits, m, self.sigma).randomizers()
            mul = multiply_randomizers(2 * m)
            alice += cmp["alice"] + mul["alice"]
            bob += cmp["bob"] + mul["bob"]
        return {"alice": alice, "bob": bob}

    def messages(self) -> list[Message]:
        if self.comparison == "garbled":
            out = [Message("cmp.pk", Key()), *garbled.setup_messages(self.ots).values()]
            if self.bound:
                return out + bd.shared_messages(self.share_plan(), self.circuit(), circuits.TAG)
            share = garbled.share_message((self.count,), self.bits, self.sigma)
            return [*out, share, *garbled.circuit_messages(self.circuit()).values()]
        out = list(self.spec().messages().values())
        return out + list(reveal_messages((1,), self.labels_bound, ARGMAX_TAGS, self.sigma))

    @property
    def carries_labels(self) -> bool:
        """The garbled argmax carries Bob's labels through the circuit (custom labels,
        or the original indices after Bob's random permutation)."""
        return self.label_bound is not None or self.tie_break == "random"

    def circuit(self):
        width = circuits.label_width(self.labels_bound) if self.carries_labels else 0
        return circuits.argmax_circuit(self.count, self.bits, self.reveal_to, width, self.sigma)

    @property
    def ots(self) -> int:
        """Random COTs of the garbled argmax: Alice's input bits (whole slots, D_A)."""
        return self.circuit().input_count("evaluator")

    @classmethod
    def from_config(cls, section: Mapping) -> ArgmaxParams:
        return params_from_config(cls, section, "argmax")


def bob_argmax(
    ctx,
    enc_x: CipherArray,
    dgk_pk: DGKPublicKey,
    params: ArgmaxParams,
    labels=None,
    peer: str = "alice",
) -> tuple[CipherArray, CipherArray]:
    """Bob: E(x_0..x_{k-1}) -> (E(label of the winner), E(max)), each of shape (1,).

    Tournament: ceil(log2 k) rounds, each one batched comparison and one batched
    secure multiplication.  Ties: see the module docstring (``tie_break``).
    """
    k, l = params.count, params.bits
    if not isinstance(enc_x, CipherArray) or enc_x.shape != (k,):
        raise ShapeMismatchError(f"argmax needs a CipherArray of shape ({k},)")
    if enc_x.bound > (1 << (l - 1)) - 1:
        raise PrecisionError(f"values may need {enc_x.bound.bit_length()} bits; l = {l}")
    pk = enc_x.public_key
    labels = list(range(k)) if labels is None else list(np.asarray(labels, dtype=object).ravel())
    if len(labels) != k or any(
        isinstance(v, bool)
        or not isinstance(v, int | np.integer)
        or not 0 <= v <= params.labels_bound
        for v in labels
    ):
        raise InvalidInputError(f"labels must be {k} integers in [0, {params.labels_bound}]")
    labels = [int(v) for v in labels]
    order = list(range(k))
    if params.tie_break == "random":
        ctx.rng.shuffle(order)
    values = enc_x.with_scale(0)[np.array(order)]
    enc_labels = CipherArray.encrypt_encoded(pk, [labels[i] for i in order], 0, params.labels_bound)
    while values.size > 1:
        m = values.size // 2
        left, right = values[0 : 2 * m : 2], values[1 : 2 * m : 2]
        lab_l, lab_r = enc_labels[0 : 2 * m : 2], enc_labels[1 : 2 * m : 2]
        spec = CompareSpec(l, m, params.sigma)
        bit = bob_compare(ctx, left, right, dgk_pk, spec, peer)  # [left < right]
        mspec = params.mask_spec(m)
        diffs = CipherArray.concatenate([right - left, lab_r - lab_l]).with_bound(mspec.bounds[1])
        prod = bob_secure_multiply(
            ctx, CipherArray.concatenate([bit, bit]), diffs, mspec, peer
        ).with_bound(mspec.bounds[1])  # bit * difference
        win = (left + prod[:m]).with_bound((1 << (l - 1)) - 1)
        win_lab = (lab_l + prod[m:]).with_bound(params.labels_bound)
        if values.size % 2:  # the last one has a bye
            win = CipherArray.concatenate([win, values[-1:]])
            win_lab = CipherArray.concatenate([win_lab, enc_labels[-1:]])
        values, enc_labels = win, win_lab
    return enc_labels, values


def alice_argmax(ctx, dgk_sk: DGKPrivateKey, params: ArgmaxParams, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_argmax`."""
    for m in params.rounds:
        alice_compare(ctx, dgk_sk, CompareSpec(params.bits, m, params.sigma), peer)
        alice_secure_multiply(ctx, params.mask_spec(m), peer)
