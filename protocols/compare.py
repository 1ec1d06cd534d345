"""Secure comparison of encrypted integers (DGK with Veugen's corrections) and secure argmax.

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
(:func:`protocols.primitives.bob_secure_multiply`) that selects, obliviously,
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

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from protocols.primitives import (
    MaskSpec,
    alice_secure_multiply,
    bob_secure_multiply,
    multiply_randomizers,
)
from smc_hmm.crypto import CipherArray
from smc_hmm.crypto.dgk import DGKPrivateKey, DGKPublicKey, dgk_keypair_for, min_u
from smc_hmm.errors import (
    ConfigError,
    CryptoError,
    InsecurePeerKeyError,
    InvalidInputError,
    PrecisionError,
    ProtocolError,
    ScaleMismatchError,
    ShapeMismatchError,
)
from smc_hmm.messages import Ciphertexts, Key, Message, OpaqueCiphertexts, Public, Revealed
from smc_hmm.protocol import ProtocolDescriptor, Role
from smc_hmm.runtime.inputs import load_array

NAME = "compare"
ARGMAX_NAME = "argmax"
REVEAL = ("alice", "bob", "none")
TIE_BREAKS = ("lowest", "random")
MAX_BITS = 1024
CMP_TAGS = ("cmp.reveal", "cmp.opened", "cmp.result")
ARGMAX_TAGS = ("argmax.reveal", "argmax.opened", "argmax.label")


# -- the DGK ciphertext field ----------------------------------------------------------------


def dgk_ciphertexts(count: int | None = None, width: int | None = None) -> OpaqueCiphertexts:
    """``count`` DGK ciphertexts as one bytes string of ``count * width`` bytes (public sizes)."""
    return OpaqueCiphertexts("DGK", count, width)


def _whole(name: str, value, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidInputError(f"{name} must be an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise InvalidInputError(
            f"{name} must be in [{lo}, {hi if hi is not None else 'inf'}], got {value}"
        )
    return int(value)


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
        _whole("l (bits)", self.bits, 1, MAX_BITS)
        _whole("k (count)", self.count, 1)
        _whole("sigma", self.sigma, 40, 256)

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
            "masked": Message("cmp.masked", Ciphertexts(0, self.masked_bound, (k,))),
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
            f"{ctx.name}: a {dgk_pk.bits}-bit DGK key; this party accepts {ctx.min_key_bits} bits"
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
    ctx.send(peer, msg["masked"], (enc_a - enc_b).add_encoded(offsets).rerandomize())
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
    if any(not 0 <= d < spec.masked_bound for d in ds):
        raise ProtocolError("cmp.masked: a masked value is outside its declared range")
    # Step 2: E(floor(d / 2^l)) and DGK encryptions of the bits of d mod 2^l (LSB first)
    highs = np.array([d >> l for d in ds], dtype=object)
    bits = [(d >> j) & 1 for d in ds for j in range(l)]
    enc_high = CipherArray.encrypt_encoded(pk, highs, 0, spec.high_bound)
    ctx.send(peer, msg["bits"], [enc_high, dgk_pk.pack(dgk_sk.encrypt(bits, ctx.rng, pk.meter))])
    # Step 3 -> 4: zero tests; delta_A = [a zero among the pair's l + 1 terms]
    blob = ctx.recv(peer, msg["blinded"])
    try:
        cs = dgk_pk.unpack(blob, k * (l + 1))
    except CryptoError as e:
        raise ProtocolError(f"cmp.blinded: {e}") from e
    zero = dgk_sk.is_zero(cs, pk.meter)
    delta = [int(any(zero[i * (l + 1) : (i + 1) * (l + 1)])) for i in range(k)]
    ctx.send(peer, msg["delta"], CipherArray.encrypt_encoded(pk, delta, 0, 1))


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
        Message(reveal_tag, Ciphertexts(0, bound + (1 << mask_bits), shape)),
        Message(opened_tag, Revealed("masked values", (bytes,))),
        Message(result_tag, Ciphertexts(0, bound, shape)),
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
        ctx.send(peer, result, enc.rerandomize())
        return None
    if to == "bob":
        mask_bits, width = _reveal_layout(bound, sigma)
        masks = [ctx.rng.randbits(mask_bits) for _ in range(enc.size)]
        masked = enc.add_encoded(np.array(masks, dtype=object).reshape(enc.shape))
        ctx.send(peer, reveal, masked.rerandomize())
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
        if not all(0 <= v <= bound for v in values):
            raise ProtocolError(f"{result.tag}: a revealed value is outside [0, {bound}]")
        return values
    if to == "bob":
        _, width = _reveal_layout(bound, sigma)
        values = [int(v) for v in ctx.recv(peer, reveal).decrypt_ints(sk).reshape(-1)]
        if not all(0 <= v < 1 << (8 * width) for v in values):
            raise ProtocolError(f"{reveal.tag}: a masked value is outside its declared range")
        ctx.send(peer, opened, b"".join(v.to_bytes(width, "big") for v in values))
    return None


# -- the standalone comparison: parameters, roles, descriptor ----------------------------------


def _check_names(key_holder, evaluator) -> None:
    if not all(isinstance(x, str) and x for x in (key_holder, evaluator)) or (
        key_holder == evaluator
    ):
        raise InvalidInputError("key_holder and evaluator must be distinct non-empty names")


def params_from_config(cls, section: Mapping, what: str):
    """``cls`` from a ``[protocol]`` table: every key a field (``name`` ignored)."""
    unknown = set(section) - set(cls.__dataclass_fields__) - {"name"}
    if unknown:
        raise ConfigError(f"unknown {what} parameters: {sorted(unknown)}")
    try:
        return cls(**{k: v for k, v in section.items() if k != "name"})
    except (InvalidInputError, TypeError) as e:
        raise ConfigError(f"bad {what} parameters: {e}") from e


@dataclass(frozen=True)
class Params:
    """Public parameters of a standalone batched comparison."""

    bits: int = 32
    count: int = 1
    sigma: int = 40
    reveal_to: str = "bob"
    key_holder: str = "alice"
    evaluator: str = "bob"
    dgk_bits: int | None = None
    dgk_t: int | None = None

    def __post_init__(self):
        self.spec()
        if self.reveal_to not in REVEAL:
            raise InvalidInputError(f"reveal_to must be one of {REVEAL}, got {self.reveal_to!r}")
        _check_names(self.key_holder, self.evaluator)
        if self.dgk_bits is not None:
            _whole("dgk_bits", self.dgk_bits, 128)
        if self.dgk_t is not None:
            _whole("dgk_t", self.dgk_t, 16)

    def spec(self, dgk_width: int | None = None) -> CompareSpec:
        return CompareSpec(self.bits, self.count, self.sigma, dgk_width)

    def messages(self, dgk_width: int | None = None) -> dict[str, Message]:
        return self.spec(dgk_width).messages()

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


def _role_for(params, party: str, kind: str) -> str:
    if party == params.key_holder:
        return "key_holder"
    if party == params.evaluator:
        return "evaluator"
    raise ConfigError(f"party {party!r} is neither key_holder nor evaluator in [protocol]")


PROTOCOL = ProtocolDescriptor(
    name=NAME,
    summary="DGK/Veugen comparison of k encrypted integer pairs: [a_i < b_i] in 4 rounds",
    params=Params.from_config,
    roles=(
        Role("key_holder", alice, kind="alice", holds_key=True),
        Role("evaluator", bob, kind="bob", input="pairs", load=load_array),
    ),
    role_for=_role_for,
    messages=lambda params: params.messages().values(),
)


# -- secure argmax / max --------------------------------------------------------------------


@dataclass(frozen=True)
class ArgmaxParams:
    """Public parameters of a secure argmax of k values of l bits.

    ``label_bound``: labels are integers in [0, label_bound] (default k - 1:
    the original indices).  ``reveal_to``: who learns the winner's label.
    ``with_max``: Bob also returns E(max) (CipherArray of shape (1,)).
    """

    bits: int = 32
    count: int = 2
    sigma: int = 40
    reveal_to: str = "alice"
    tie_break: str = "lowest"
    with_max: bool = False
    label_bound: int | None = None
    key_holder: str = "alice"
    evaluator: str = "bob"
    dgk_bits: int | None = None
    dgk_t: int | None = None

    def __post_init__(self):
        CompareSpec(self.bits, self.count, self.sigma)
        _whole("count (values of an argmax)", self.count, 2)
        if self.reveal_to not in REVEAL:
            raise InvalidInputError(f"reveal_to must be one of {REVEAL}, got {self.reveal_to!r}")
        if self.tie_break not in TIE_BREAKS:
            raise InvalidInputError(f"tie_break must be one of {TIE_BREAKS}")
        if not isinstance(self.with_max, bool):
            raise InvalidInputError("with_max must be a bool")
        if self.label_bound is not None:
            _whole("label_bound", self.label_bound, 0)
        _check_names(self.key_holder, self.evaluator)
        if self.dgk_bits is not None:
            _whole("dgk_bits", self.dgk_bits, 128)
        if self.dgk_t is not None:
            _whole("dgk_t", self.dgk_t, 16)

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
        out = list(self.spec().messages().values())
        return out + list(reveal_messages((1,), self.labels_bound, ARGMAX_TAGS, self.sigma))

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


def argmax_alice(ctx, private, params: ArgmaxParams):
    """Key holder of the standalone argmax: returns the winner's label if revealed to her."""
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


ARGMAX = ProtocolDescriptor(
    name=ARGMAX_NAME,
    summary="secure argmax of k encrypted integers: a tournament of DGK comparisons",
    params=ArgmaxParams.from_config,
    roles=(
        Role("key_holder", argmax_alice, kind="alice", holds_key=True),
        Role("evaluator", argmax_bob, kind="bob", input="values", load=load_array),
    ),
    role_for=_role_for,
    messages=lambda params: params.messages(),
)
