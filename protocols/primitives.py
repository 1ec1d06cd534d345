"""Secure exponent, logarithm, LOGSUM, multiplication and rescaling (thesis 003, 4.2.1).

Roles: Alice holds the Paillier key pair; Bob holds only ciphertexts under
Alice's key and the plaintext parameters (weights) of the computation.  Every
primitive is batched: many values travel in one message each way.  Every
message is declared (:mod:`smc_hmm.messages`): its scale and precision bound
follow from the public :class:`PrecisionParams`, the key size and the batch
size, never from private values.

Building blocks (pure functions, reused by :mod:`protocols.forward`):

* :func:`log_blinds`, :func:`multiplicative_blinds` -- Bob's blinds, uniform
  integers over stated ranges (no float structure).
* :func:`log_fixed`, :func:`exp_fixed` -- exact fixed-point log and exp of
  big integers (256-bit MPFR, so nothing is lost to float64).
* :func:`alice_exp_values` -- Alice's half of the secure exponent: exponentials
  of blinded log-values after subtracting their maximum (nothing under- or
  overflows; a finite value that falls out of the exponent's range is
  reported, never silently zeroed).
* :func:`unblind_weights` -- Bob's integer weights round(2^h a_i e^-(rho_i - rho_min)).

Security (semi-honest Alice and Bob, not colluding):

* Bob sees only ciphertexts under Alice's key: nothing (IND-CPA).
* Secure exponent: Alice decrypts x_i + rho_i with rho_i uniform on the
  integers of [0, R 2^f) (R = ``blind_nats``): for two inputs x, x' the
  distributions of what she sees differ by |x - x'| / R in statistical
  distance -- the thesis's blinding hides a log-value *within R nats* only.
* Secure logarithm: Alice decrypts theta_i * beta_i with beta_i log-uniform on
  the integers of [2^B, 2^(B+K)) (B = ``beta_bits``, K = ceil(R / ln 2)): log
  beta is uniform on [B ln 2, (B + K) ln 2) up to 2^-B, so log theta is hidden
  within K ln 2 >= R nats (statistical distance |log theta - log theta'| / (K ln 2)).
  She also sees the exact integer, hence its divisibility: whenever she knows
  theta as a linear form sum_l w_l V_l of values V_l that she chose herself
  (secure LOGSUM, the forward algorithm), she can recover the coefficients
  beta w_l (for two terms by one modular inversion, in general by lattice
  reduction) and with them the *ratios* of Bob's weights.  This is a
  limitation of the thesis's multiplicative blinding; ``docs/security.md``
  explains it and what would remove it.
* Both also reveal which values are exactly zero (log 0).
* Secure multiplication and rescaling use additive masks uniform on
  [-2^(b + sigma), 2^(b + sigma)) with b the *declared* (public) bit bound of
  the operand: statistical distance at most 2^-sigma (sigma >= 40).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpz

from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError
from smc_hmm.messages import Ciphertexts, Message

LN2 = math.log(2)
#: 256-bit MPFR: exact fixed-point logs and exps for scales up to ~150 bits
_HP = gmpy2.context(precision=256)
#: significant bits below which an exponential counts as fallen out of range
SIGNIFICANT_BITS = 53
#: significant bits every nonzero weight keeps: a relative error of 2^-44 per weight
#: and step keeps log P within 1e-9 nats over 10^4 steps
WEIGHT_BITS = 44


def _round(x) -> int:
    """Round an mpfr to the nearest integer, exactly."""
    num, den = x.as_integer_ratio()
    return int((2 * num + den) // (2 * den))


def log_fixed(value: int, scale: int) -> int:
    """round(ln(value) * 2^scale) for a positive integer ``value`` (any size)."""
    if value <= 0:
        raise InvalidInputError("log_fixed needs a positive integer")
    return _round(_HP.mul(_HP.log(mpz(value)), mpz(1) << scale))


def exp_fixed(exponent: int, scale: int, out_scale: int) -> int:
    """round(2^out_scale * exp(exponent / 2^scale)) for exponent <= 0 (0 when it underflows)."""
    if exponent > 0:
        raise InvalidInputError("exp_fixed takes non-positive exponents")
    if -exponent > (out_scale + 2) << scale:  # exp(-(out_scale + 2)) < 2^-(out_scale + 1)
        return 0
    x = _HP.div(mpz(exponent), mpz(1) << scale)
    return _round(_HP.mul(_HP.exp(x), mpz(1) << out_scale))


@dataclass(frozen=True)
class PrecisionParams:
    """Public fixed-point scales, bounds and blinding ranges of the log/exp protocols.

    ``log_scale`` (f): fractional bits of every log-domain value.
    ``log_bound_bits``: every finite log-value a protocol handles is within
    +-2^log_bound_bits nats (log 0 is carried as a sentinel far below).
    ``blind_nats`` (R): width of the additive log blinds; multiplicative blinds
    span K = ceil(R / ln 2) octaves above 2^beta_bits.  ``weight_scale`` (h):
    Bob's exponential weights carry h fractional bits (public, so nothing about
    his smallest weight reaches Alice).  ``exp_scale`` (g): fractional bits of
    Alice's exponentials; None takes the largest the key allows
    (:meth:`exp_scale_for`).  ``sigma``: statistical parameter of additive masks.
    """

    log_scale: int = 96
    log_bound_bits: int = 40
    blind_nats: float = 20.0
    weight_scale: int = 144
    beta_bits: int = 48
    exp_scale: int | None = None
    sigma: int = 40

    def __post_init__(self):
        def whole(name, lo, hi):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InvalidInputError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")

        whole("log_scale", 16, 160)
        whole("log_bound_bits", 8, 80)
        whole("weight_scale", 64, 512)
        whole("beta_bits", 32, 256)
        whole("sigma", 40, 256)
        if self.exp_scale is not None:
            whole("exp_scale", 64, 16384)
        if not (
            isinstance(self.blind_nats, int | float)
            and math.isfinite(self.blind_nats)
            and 0 < self.blind_nats <= 200
        ):
            raise InvalidInputError("blind_nats must be in (0, 200]")

    @property
    def f(self) -> int:
        return self.log_scale

    @property
    def blind_octaves(self) -> int:
        """K: multiplicative blinds lie in [2^B, 2^(B+K)), K ln 2 >= R."""
        return math.ceil(self.blind_nats / LN2)

    @property
    def log_bound(self) -> int:
        """The public bound on |finite log-value| in nats."""
        return 1 << self.log_bound_bits

    @property
    def log_zero(self) -> int:
        """The sentinel carrying log 0 at scale f: far below every finite value."""
        return -(1 << (self.log_bound_bits + 2 + self.f))

    def is_log_zero(self, value: int) -> bool:
        """Whether a (possibly blinded) log-value at scale f stands for log 0."""
        return value < -(1 << (self.log_bound_bits + 1 + self.f))

    @property
    def log_cipher_bound(self) -> int:
        """Declared bound of a log-value ciphertext (sentinels and blinds included)."""
        return 1 << (self.log_bound_bits + 4 + self.f)

    @property
    def log_blind_top(self) -> int:
        """Additive log blinds are uniform on the integers of [0, log_blind_top)."""
        return ldexp_int(float(self.blind_nats), self.f)

    def exp_scale_for(self, key_bits: int, max_terms: int) -> int:
        """g: the explicit ``exp_scale`` or the largest that keeps ``max_terms``
        products of weights (h bits) and exponentials (g bits), times a
        multiplicative blind, inside a ``key_bits``-bit key.  A public rule."""
        room = (
            key_bits
            - 12
            - self.weight_scale
            - self.beta_bits
            - self.blind_octaves
            - max(1, math.ceil(math.log2(max_terms + 1)))
        )
        g = room if self.exp_scale is None else self.exp_scale
        if g > room or g < 64:
            raise PrecisionError(
                f"a {key_bits}-bit key leaves {room} bits for exponentials (need >= "
                f"{max(64, g)}): use a larger key or a smaller weight_scale / beta_bits"
            )
        return g

    def min_weight(self) -> float:
        """The smallest nonzero plaintext weight a_i that keeps ``WEIGHT_BITS`` (44)
        significant bits after unblinding: 2^(44 + K - h) e^R (about 2e-13 by default)."""
        return math.ldexp(
            math.exp(self.blind_nats), WEIGHT_BITS + self.blind_octaves - self.weight_scale
        )

    def encode_log(self, x: float) -> int:
        """A finite log-value (nats) at scale f, or the log-0 sentinel for -inf."""
        if x == -math.inf:
            return self.log_zero
        if not math.isfinite(x):
            raise InvalidInputError(f"cannot encode log-value {x}")
        if abs(x) > self.log_bound:
            raise PrecisionError(
                f"log-value {x:.6g} exceeds the public bound 2^{self.log_bound_bits} nats "
                "(raise log_bound_bits)"
            )
        return ldexp_int(float(x), self.f)

    def decode_log(self, v: int) -> float:
        return -math.inf if self.is_log_zero(int(v)) else int(v) / (1 << self.f)

    def ln2_times(self, bits: int) -> int:
        """round(bits * ln 2 * 2^f): the log of 2^bits at scale f."""
        return log_fixed(1 << bits, self.f) if bits > 0 else 0


# -- Bob's blinds ------------------------------------------------------------------------


def log_blinds(rng: Rng, count: int, params: PrecisionParams) -> np.ndarray:
    """rho uniform on the integers of [0, R 2^f): additive blinds of log-values."""
    top = params.log_blind_top
    return np.array([rng.randbelow(top) for _ in range(count)], dtype=object)


def log_uniform_integer(rng: Rng, low_bits: int, octaves: int) -> int:
    """An integer beta in [2^low_bits, 2^(low_bits + octaves)) with P(beta) ~ 1/beta.

    An octave is chosen uniformly (each carries log-mass ln 2 up to 2^-low_bits),
    then beta within it by rejection (accept with probability 2^m / beta >= 1/2).
    """
    m = low_bits + rng.randbelow(octaves)
    lo = 1 << m
    while True:
        beta = lo + rng.randbits(m)
        if rng.randbelow(beta) < lo:
            return beta


def multiplicative_blinds(rng: Rng, count: int, params: PrecisionParams) -> list[int]:
    """Log-uniform integer blinds in [2^B, 2^(B+K)) (see :func:`log_uniform_integer`)."""
    return [log_uniform_integer(rng, params.beta_bits, params.blind_octaves) for _ in range(count)]


def unblind_weights(weights, rho, params: PrecisionParams) -> tuple[np.ndarray, int]:
    """Bob's integer weights round(2^h a_ij e^-(rho_i - rho_min)) and rho_min.

    ``weights`` is (n_in, n_out) with a_ij >= 0; ``rho`` the n_in blinds as
    integers at scale f.  Raises PrecisionError if a nonzero a_ij is too small
    to keep 53 significant bits at the public weight scale.
    """
    a = np.asarray(weights, dtype=float)
    rho = [int(r) for r in rho]
    rho_min = min(rho)
    positive = a[a > 0]
    if positive.size and float(positive.min()) < params.min_weight():
        raise PrecisionError(
            f"a weight of {float(positive.min()):.3g} is below {params.min_weight():.3g}, the "
            f"smallest that keeps {WEIGHT_BITS} bits at weight_scale = "
            f"{params.weight_scale}: raise weight_scale or set it to 0"
        )
    one = mpz(1) << params.weight_scale
    factors = [_HP.mul(_HP.exp(_HP.div(mpz(rho_min - r), mpz(1) << params.f)), one) for r in rho]
    out = np.empty(a.shape, dtype=object)
    for i, factor in enumerate(factors):
        for j, x in enumerate(a[i]):
            out[i, j] = _round(_HP.mul(factor, gmpy2.mpfr(float(x)))) if x > 0 else 0
    return out, rho_min


def unblinded_sums(enc_values: CipherArray, weights, rho, params: PrecisionParams):
    """Bob's LOGSUM combination: E(sum_i round(2^h a_ij e^-(rho_i - rho_min)) V_i) for each j.

    ``enc_values`` are Alice's exponentials E(V_i) (scale g), ``weights`` the
    (n_in, n_out) plaintext a_ij, ``rho`` Bob's blinds at scale f.  Returns the
    sums (scale g + h) and rho_min.  Shared by the secure LOGSUM and the
    forward algorithm.
    """
    w, rho_min = unblind_weights(weights, rho, params)
    return enc_values.lincomb(w.T, params.weight_scale), rho_min


def blind_for_log(enc_values: CipherArray, rng: Rng, params: PrecisionParams):
    """Bob's half of the secure logarithm: E(theta_i beta_i) and the blinds beta_i."""
    betas = multiplicative_blinds(rng, enc_values.size, params)
    return enc_values.mul(np.array(betas, dtype=object)), betas


# -- Alice's halves ------------------------------------------------------------------------


def alice_exp_values(logs, params: PrecisionParams, g: int) -> tuple[list[int], int, float]:
    """Alice's secure-exponent step on integer log-values at scale f.

    Returns (V, c, dropped): V_i = round(2^g exp(y_i - c)) with c = max_i y_i
    over the finite values (log 0 gives V = 0; all log 0 gives c = 0), and
    ``dropped`` = ln sum_i exp(y_i - c) over the finite values whose
    exponential kept fewer than 53 significant bits (fell more than about
    (g - 53) ln 2 nats below c), or -inf if there are none: the mass, relative
    to the largest, that the fixed-point exponent could not carry exactly.
    """
    finite = [int(y) for y in logs if not params.is_log_zero(int(y))]
    c = max(finite) if finite else 0
    values, dropped = [], []
    for y in logs:
        y = int(y)
        if params.is_log_zero(y):
            values.append(0)
            continue
        v = exp_fixed(y - c, params.f, g)
        if v < (1 << (SIGNIFICANT_BITS - 1)):
            dropped.append((y - c) / (1 << params.f))
        values.append(v)
    top = max(dropped, default=-math.inf)
    lost = top + math.log(sum(math.exp(d - top) for d in dropped)) if dropped else -math.inf
    return values, c, lost


def alice_log_values(values, params: PrecisionParams, scale: int) -> list[int]:
    """Alice's secure-logarithm step: log(v / 2^scale) at scale f (0 -> the log-0 sentinel)."""
    out = []
    offset = params.ln2_times(scale)
    for v in values:
        v = int(v)
        if v < 0:
            raise ProtocolError("secure log received a negative value")
        out.append(log_fixed(v, params.f) - offset if v else params.log_zero)
    return out


# -- standalone batched primitives: declared messages and one role function per party ---------


@dataclass(frozen=True)
class ExpSpec:
    """Public sizes of a batched secure exponent: ``count`` values under a ``key_bits`` key."""

    count: int
    key_bits: int
    params: PrecisionParams = PrecisionParams()

    @property
    def g(self) -> int:
        return self.params.exp_scale_for(self.key_bits, 1)

    def messages(self):
        p, n = self.params, (self.count,)
        blinded = Message("exp.blinded", Ciphertexts(p.f, p.log_cipher_bound + p.log_blind_top, n))
        values = Message("exp.values", Ciphertexts(self.g, 1 << self.g, n))
        shift = Message("exp.shift", Ciphertexts(p.f, p.log_cipher_bound, (1,)))
        return blinded, values, shift


def bob_secure_exp(ctx, enc_logs: CipherArray, spec: ExpSpec, peer: str = "alice"):
    """Bob: E(x_i) (log-values at scale f) -> (E(y_i), E(s)) with exp(x_i) = y_i e^s.

    y_i has scale g + h, s is a log-value at scale f (Alice's shift minus Bob's
    rho_min), so nothing over- or underflows whatever the magnitudes of x.
    """
    p = spec.params
    blinded, values, shift = spec.messages()
    rho = log_blinds(ctx.rng, spec.count, p)
    # Step 1: Bob sends E(x_i + rho_i)
    ctx.send(peer, blinded, enc_logs.add_encoded(rho).rerandomize())
    # Step 2: Alice returns E(V_i), V_i = round(2^g exp(x_i + rho_i - c)), and E(c)
    enc_v, enc_c = ctx.recv(peer, values), ctx.recv(peer, shift)
    # Step 3: Bob multiplies by e^-(rho_i - rho_min); e^-rho_min joins the shift
    w, rho_min = unblind_weights(np.ones((spec.count, 1)), rho, p)
    return enc_v.mul(w[:, 0], p.weight_scale), enc_c.add_encoded([-rho_min])


def alice_secure_exp(ctx, spec: ExpSpec, peer: str = "bob") -> bool:
    """Alice's role in :func:`bob_secure_exp`; returns whether a value fell out of range."""
    pk, sk = ctx.keypair
    blinded, values, shift = spec.messages()
    y = ctx.recv(peer, blinded).decrypt_ints(sk)
    v, c, dropped = alice_exp_values(y, spec.params, spec.g)
    ctx.send(peer, values, CipherArray.encrypt_encoded(pk, v, spec.g, 1 << spec.g))
    ctx.send(peer, shift, CipherArray.encrypt_encoded(pk, [c], spec.params.f))
    return dropped > -math.inf


@dataclass(frozen=True)
class LogSpec:
    """Public sizes of a batched secure logarithm: ``count`` non-negative values at
    ``scale`` bounded by ``bound`` (a public bound on the integers)."""

    count: int
    scale: int
    bound: int
    params: PrecisionParams = PrecisionParams()

    def messages(self):
        p, n = self.params, (self.count,)
        top = self.bound << (p.beta_bits + p.blind_octaves)
        return (
            Message("log.blinded", Ciphertexts(self.scale, top, n)),
            Message("log.values", Ciphertexts(p.f, p.log_cipher_bound, n)),
        )


def bob_secure_log(ctx, enc_values: CipherArray, spec: LogSpec, peer: str = "alice"):
    """Bob: E(theta_i) (non-negative, scale s) -> E(log theta_i) at scale f (log 0 -> sentinel)."""
    p = spec.params
    blinded, logs = spec.messages()
    masked, betas = blind_for_log(enc_values, ctx.rng, p)
    # Step 1: Bob sends E(theta_i beta_i)
    ctx.send(peer, blinded, masked.rerandomize())
    # Step 2: Alice returns E(log(theta_i beta_i)) (the scale already removed)
    enc_logs = ctx.recv(peer, logs)
    # Step 3: Bob subtracts log(beta_i); a log-0 sentinel stays far below every finite value
    return enc_logs.add_encoded(np.array([-log_fixed(b, p.f) for b in betas], dtype=object))


def alice_secure_log(ctx, spec: LogSpec, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_secure_log`."""
    pk, sk = ctx.keypair
    blinded, logs = spec.messages()
    out = alice_log_values(ctx.recv(peer, blinded).decrypt_ints(sk), spec.params, spec.scale)
    ctx.send(
        peer,
        logs,
        CipherArray.encrypt_encoded(pk, out, spec.params.f, spec.params.log_cipher_bound),
    )


@dataclass(frozen=True)
class LogsumSpec:
    """Public sizes of a batched secure LOGSUM: ``n_in`` log-values, ``n_out`` sums."""

    n_in: int
    n_out: int
    key_bits: int
    params: PrecisionParams = PrecisionParams()

    @property
    def g(self) -> int:
        return self.params.exp_scale_for(self.key_bits, self.n_in)

    @property
    def exp(self) -> ExpSpec:
        return ExpSpec(
            self.n_in,
            self.key_bits,
            PrecisionParams(**{**self.params.__dict__, "exp_scale": self.g}),
        )

    @property
    def log(self) -> LogSpec:
        h = self.params.weight_scale
        return LogSpec(self.n_out, self.g + h, self.n_in << (self.g + h), self.params)


def bob_secure_logsum(
    ctx, enc_logs: CipherArray, weights, spec: LogsumSpec, peer: str = "alice"
) -> CipherArray:
    """Bob: E(log theta_i) and plaintext a_ij >= 0 -> E(log sum_i a_ij theta_i) for each j.

    Secure exponent, a homomorphic linear combination, secure logarithm
    (thesis "Secure LOGSUM"), with the unblinding folded into the weights.
    """
    weights = np.asarray(weights, dtype=float)
    if (
        weights.shape != (spec.n_in, spec.n_out)
        or (weights < 0).any()
        or not np.isfinite(weights).all()
        or (weights > 1).any()
    ):
        raise InvalidInputError(
            f"weights must be a ({spec.n_in}, {spec.n_out}) matrix with entries in [0, 1]"
        )
    p, exp_spec = spec.params, spec.exp
    blinded, values, shift = exp_spec.messages()
    rho = log_blinds(ctx.rng, spec.n_in, p)
    ctx.send(peer, blinded, enc_logs.add_encoded(rho).rerandomize())
    enc_v, enc_c = ctx.recv(peer, values), ctx.recv(peer, shift)
    # sum_i w_ij V_i = 2^(g+h) e^(rho_min - c) sum_i a_ij theta_i: scale g + h
    sums, rho_min = unblinded_sums(enc_v, weights, rho, p)
    logs = bob_secure_log(ctx, sums, spec.log, peer)
    return logs.add_encoded([-rho_min] * spec.n_out) + enc_c


def alice_secure_logsum(ctx, spec: LogsumSpec, peer: str = "bob") -> bool:
    """Alice's role in :func:`bob_secure_logsum`; returns whether a value fell out of range."""
    lost = alice_secure_exp(ctx, spec.exp, peer)
    alice_secure_log(ctx, spec.log, peer)
    return lost


@dataclass(frozen=True)
class MaskSpec:
    """Public description of masked operands: per operand its scale and the
    public bound on |integer|; ``shape`` the common shape; ``sigma`` the
    statistical parameter of the masks."""

    scales: tuple[int, ...]
    bounds: tuple[int, ...]
    shape: tuple[int, ...]
    sigma: int = 40

    def mask_bits(self, i: int) -> int:
        return self.bounds[i].bit_length() + self.sigma

    def masked(self, i: int) -> Ciphertexts:
        return Ciphertexts(self.scales[i], self.bounds[i] + (1 << self.mask_bits(i)), self.shape)


def _check_operand(enc: CipherArray, spec: MaskSpec, i: int) -> None:
    if enc.shape != spec.shape or enc.scale != spec.scales[i] or enc.bound > spec.bounds[i]:
        raise InvalidInputError(
            f"operand {i}: shape {enc.shape} at scale {enc.scale} with a {enc.bound.bit_length()}"
            f"-bit bound does not fit the declared {spec.shape}, scale {spec.scales[i]}, "
            f"{spec.bounds[i].bit_length()} bits"
        )


def _multiply_messages(spec: MaskSpec):
    product = Ciphertexts(
        spec.scales[0] + spec.scales[1], spec.masked(0).bound * spec.masked(1).bound, spec.shape
    )
    return (
        Message("mul.masked", (spec.masked(0), spec.masked(1))),
        Message("mul.product", product),
    )


def bob_secure_multiply(
    ctx, enc_x: CipherArray, enc_y: CipherArray, spec: MaskSpec, peer: str = "alice"
) -> CipherArray:
    """Bob: E(x), E(y) -> E(x y) (scales add), with additive masks of sigma extra bits."""
    enc_x.public_key.same_key(enc_y.public_key)
    _check_operand(enc_x, spec, 0)
    _check_operand(enc_y, spec, 1)
    masked, product = _multiply_messages(spec)
    size = int(np.prod(spec.shape))
    rx = np.array(
        [ctx.rng.signed_mask(spec.mask_bits(0)) for _ in range(size)], dtype=object
    ).reshape(spec.shape)
    ry = np.array(
        [ctx.rng.signed_mask(spec.mask_bits(1)) for _ in range(size)], dtype=object
    ).reshape(spec.shape)
    # Step 1: Bob sends E(x + r_x), E(y + r_y)
    ctx.send(
        peer, masked, [enc_x.add_encoded(rx).rerandomize(), enc_y.add_encoded(ry).rerandomize()]
    )
    # Step 2: Alice returns E((x + r_x)(y + r_y))
    prod = ctx.recv(peer, product)
    # Step 3: Bob removes r_y x + r_x y + r_x r_y
    cross = enc_x.mul(ry, spec.scales[1]) + enc_y.mul(rx, spec.scales[0])
    return (prod - cross).add_encoded(-(rx * ry))


def alice_secure_multiply(ctx, spec: MaskSpec, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_secure_multiply`."""
    pk, sk = ctx.keypair
    masked, product = _multiply_messages(spec)
    mx, my = ctx.recv(peer, masked)
    values = mx.decrypt_ints(sk) * my.decrypt_ints(sk)
    ctx.send(
        peer,
        product,
        CipherArray.encrypt_encoded(
            pk, values, spec.scales[0] + spec.scales[1], product.body.bound
        ),
    )


def _rescale_messages(spec: MaskSpec, bits: int):
    if isinstance(bits, bool) or not isinstance(bits, int) or not 0 < bits <= spec.scales[0]:
        raise InvalidInputError(f"can drop 1..{spec.scales[0]} bits, not {bits!r}")
    top = spec.bounds[0] + (1 << spec.mask_bits(0))
    return (
        Message("rescale.masked", Ciphertexts(spec.scales[0], top, spec.shape)),
        Message("rescale.shifted", Ciphertexts(spec.scales[0] - bits, top >> bits, spec.shape)),
    )


def bob_rescale(
    ctx, enc: CipherArray, bits: int, spec: MaskSpec, peer: str = "alice"
) -> CipherArray:
    """Bob: E(x) at scale s -> E(floor(x / 2^bits)) or one more, at scale s - bits.

    Bob adds a mask r uniform on [0, 2^(b + sigma)) (b the declared bound's
    bits); Alice returns E(floor((x + r) / 2^bits)); Bob subtracts
    floor(r / 2^bits).  ``bits`` is a public parameter (not sent).
    """
    masked, shifted = _rescale_messages(spec, bits)
    _check_operand(enc, spec, 0)
    size = int(np.prod(spec.shape))
    masks = np.array(
        [ctx.rng.randbits(spec.mask_bits(0)) for _ in range(size)], dtype=object
    ).reshape(spec.shape)
    ctx.send(peer, masked, enc.add_encoded(masks).rerandomize())
    result = ctx.recv(peer, shifted).add_encoded(-(masks // (1 << bits)))
    return result.with_bound((spec.bounds[0] >> bits) + 1)


def alice_rescale(ctx, bits: int, spec: MaskSpec, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_rescale`."""
    pk, sk = ctx.keypair
    masked, shifted = _rescale_messages(spec, bits)
    values = ctx.recv(peer, masked).decrypt_ints(sk)
    out = np.array([v >> bits for v in values.reshape(-1)], dtype=object).reshape(values.shape)
    ctx.send(
        peer,
        shifted,
        CipherArray.encrypt_encoded(pk, out, spec.scales[0] - bits, shifted.body.bound),
    )
