"""Secure exponent, logarithm, LOGSUM, multiplication and rescaling (thesis 003, 4.2.1).

Roles: Alice holds the Paillier key pair; Bob holds only ciphertexts under
Alice's key and the plaintext parameters (weights) of the computation.  Every
primitive below is batched: many values travel in one message each way.

Building blocks (pure functions, reused by :mod:`protocols.forward`):

* :func:`log_blinds` / :func:`multiplicative_blinds` -- Bob's blinding values.
* :func:`alice_exp` -- Alice's half of the secure exponent: exp of blinded
  log-values after subtracting a common shift c of her choosing (so nothing
  overflows or underflows), encoded at ``exp_scale`` bits.
* :func:`alice_log` -- Alice's half of the secure logarithm.
* :func:`unblind_weights` -- Bob's fixed-point weights a_i * e^(-rho_i).

Security (semi-honest adversaries, Alice and Bob not colluding):

* Bob sees only ciphertexts under Alice's key: he learns nothing (IND-CPA).
* Secure exponent/logarithm use *multiplicative* blinding, as the thesis does:
  for log-values Alice sees x + rho with rho uniform on [0, R) nats
  (``blind_nats`` = R) and for values she sees theta * beta with log(beta)
  uniform on [0, R) nats plus a public offset.  This hides within the blinding
  range only -- not statistically: Alice learns each log-value up to an
  additive uniform blind of width R, and whether a value is exactly zero.
  Larger R hides more and costs bits of precision (``PrecisionParams``).
* Secure multiplication and rescaling use *additive* masks of
  ``sigma`` (default 40) bits beyond the value's bound: statistically hidden
  (distance <= 2^-sigma).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError

#: log of zero is carried as this many nats (exp of it is 0.0 in float64)
LOG_ZERO_NATS = -(2.0**40)
#: Alice reads any log-value below this as log 0
LOG_ZERO_THRESHOLD = -(2.0**39)


@dataclass(frozen=True)
class PrecisionParams:
    """Fixed-point scales and blinding ranges of the log/exp protocols.

    ``log_scale`` (f): fractional bits of log-domain values.  ``exp_scale`` (g)
    and ``weight_scale`` (h): fractional bits of Alice's exponentials and of
    Bob's unblinding weights; by default 64 + 2R/ln 2 bits each, so that after
    the worst-case blinding ratio e^(2R) at least 64 significant bits remain.
    ``beta_bits``: minimum size of multiplicative blinds.
    """

    log_scale: int = 48
    blind_nats: float = 20.0
    exp_scale: int | None = None
    weight_scale: int | None = None
    beta_bits: int = 64
    sigma: int = 40

    def __post_init__(self):
        if not (isinstance(self.log_scale, int) and 8 <= self.log_scale <= 256):
            raise InvalidInputError("log_scale must be an int in [8, 256]")
        if not (math.isfinite(self.blind_nats) and 0 < self.blind_nats <= 200):
            raise InvalidInputError("blind_nats must be in (0, 200]")
        if self.sigma < 40:
            raise InvalidInputError("sigma must be at least 40 bits")

    @property
    def g(self) -> int:
        return self.exp_scale or 64 + math.ceil(2 * self.blind_nats / math.log(2))

    @property
    def h(self) -> int:
        return self.weight_scale or 64 + math.ceil(2 * self.blind_nats / math.log(2))

    @property
    def f(self) -> int:
        return self.log_scale

    def encode_log(self, x: float) -> int:
        """A log-value at scale f (log 0 -> the LOG_ZERO sentinel)."""
        if x == -math.inf:
            x = LOG_ZERO_NATS
        if not math.isfinite(x):
            raise InvalidInputError(f"cannot encode log-value {x}")
        return round(math.ldexp(x, self.f))

    def decode_log(self, v: int) -> float:
        x = int(v) / (1 << self.f)
        return -math.inf if x < LOG_ZERO_THRESHOLD else x


# -- Bob's blinds ------------------------------------------------------------------------


def log_blinds(rng: Rng, count: int, params: PrecisionParams) -> np.ndarray:
    """Integers rho * 2^f with rho uniform on [0, R): additive blinds of log-values."""
    top = int(params.blind_nats * (1 << params.f))
    return np.array([rng.randbelow(top) for _ in range(count)], dtype=object)


def multiplicative_blinds(rng: Rng, count: int, params: PrecisionParams) -> list[int]:
    """Integers beta = floor(2^beta_bits * e^u), u uniform on [0, R): log-uniform blinds."""
    out = []
    for _ in range(count):
        u = rng.randbelow(1 << 52) / (1 << 52) * params.blind_nats
        out.append(int(math.ldexp(math.exp(u), params.beta_bits)))
    return out


def unblind_weights(weights: np.ndarray, rho: np.ndarray, params: PrecisionParams):
    """Bob's integer weights round(a_lj * e^-(rho_l - rho_min) * 2^h) and rho_min.

    ``weights`` is (N_in, N_out) (a_lj), ``rho`` the (N_in,) blinds in nats.
    """
    rho = np.asarray(rho, dtype=float)
    rho_min = float(rho.min())
    factors = np.exp(-(rho - rho_min))[:, None] * np.asarray(weights, dtype=float)
    scaled = [[round(math.ldexp(float(x), params.h)) for x in row] for row in factors]
    return np.array(scaled, dtype=object), rho_min


# -- Alice's halves ------------------------------------------------------------------------


def alice_exp(blinded_logs: np.ndarray, params: PrecisionParams) -> tuple[list[int], float]:
    """Alice's secure-exponent step: V_i = round(exp(y_i - c) * 2^g) with c = max_i y_i.

    ``blinded_logs`` are floats (log 0 as -inf).  Returns (V, c); if every
    value is log 0 then V = 0 and c = 0.
    """
    ys = [float(y) for y in blinded_logs]
    finite = [y for y in ys if y != -math.inf]
    c = max(finite) if finite else 0.0
    return [0 if y == -math.inf else round(math.ldexp(math.exp(y - c), params.g))
            for y in ys], c


def alice_log(blinded_values, params: PrecisionParams) -> list[float]:
    """Alice's secure-logarithm step: log of positive integers (0 -> -inf)."""
    out = []
    for v in blinded_values:
        v = int(v)
        if v < 0:
            raise ProtocolError("secure log received a negative value")
        out.append(math.log(v) if v else -math.inf)
    return out


def check_capacity(public_key, bits_needed: int, what: str) -> None:
    """Refuse to start when a protocol's worst-case plaintext exceeds the key."""
    if bits_needed >= public_key.max_plain.bit_length():
        raise PrecisionError(f"{what} needs {bits_needed}-bit plaintexts but the "
                             f"{public_key.bits}-bit key allows "
                             f"{public_key.max_plain.bit_length() - 1}; use a larger key or "
                             "smaller scales / blinding range")


# -- standalone batched primitives: one role function per party -------------------------------


def bob_secure_exp(ctx, enc_logs: CipherArray, params: PrecisionParams, peer: str = "alice"):
    """Bob: E(x_i) (log-values at scale f) -> E(exp(x_i - c)) at scale g + h, plus E(c).

    Alice picks the common shift c (her max), so Bob's output is the vector
    exp(x_i) up to the common factor e^-c that he receives encrypted.
    """
    if enc_logs.scale != params.f:
        raise InvalidInputError(f"log-values must be at scale {params.f}")
    rho = log_blinds(ctx.rng, enc_logs.size, params)
    # Step 1: Bob sends E(x_i + rho_i)
    ctx.send(peer, "exp.blinded", enc_logs.add_encoded(rho).rerandomize())
    # Step 2: Alice returns E(exp(x_i + rho_i - c)) and E(c)
    enc_v, enc_c = ctx.recv(peer, "exp.values"), ctx.recv(peer, "exp.shift")
    # Step 3: Bob multiplies by e^-(rho_i - rho_min); the common e^-rho_min joins the shift
    w, rho_min = unblind_weights(np.eye(enc_logs.size), rho / (1 << params.f), params)
    out = enc_v.mul(np.diagonal(w).astype(object), params.h)
    shift = enc_c.add_encoded(-params.encode_log(rho_min))
    return out, shift  # exp(x_i) = out_i * e^(shift)


def alice_secure_exp(ctx, params: PrecisionParams, peer: str = "bob"):
    """Alice's role in :func:`bob_secure_exp`."""
    pk, sk = ctx.keypair
    y = ctx.recv(peer, "exp.blinded")
    values, c = alice_exp([params.decode_log(v) for v in y.decrypt_ints(sk)], params)
    ctx.send(peer, "exp.values", CipherArray.encrypt_encoded(pk, values, params.g))
    ctx.send(peer, "exp.shift", CipherArray.encrypt_encoded(pk, [params.encode_log(c)],
                                                            params.f))


def bob_secure_log(ctx, enc_values: CipherArray, params: PrecisionParams, peer: str = "alice"):
    """Bob: E(theta_i) (positive integers at scale s) -> E(log(theta_i / 2^s)) at scale f."""
    betas = multiplicative_blinds(ctx.rng, enc_values.size, params)
    # Step 1: Bob sends E(theta_i * beta_i)
    ctx.send(peer, "log.blinded", enc_values.mul(np.array(betas, dtype=object)).rerandomize())
    # Step 2: Alice returns E(log(theta_i * beta_i))
    enc_logs = ctx.recv(peer, "log.values")
    # Step 3: Bob subtracts log(beta_i) + s ln 2
    offsets = np.array([-params.encode_log(math.log(b) + enc_values.scale * math.log(2))
                        for b in betas], dtype=object)
    return enc_logs.add_encoded(offsets)


def alice_secure_log(ctx, params: PrecisionParams, peer: str = "bob"):
    """Alice's role in :func:`bob_secure_log`."""
    pk, sk = ctx.keypair
    blinded = ctx.recv(peer, "log.blinded")
    logs = alice_log(blinded.decrypt_ints(sk), params)
    ctx.send(peer, "log.values", CipherArray.encrypt_encoded(
        pk, [params.encode_log(x) for x in logs], params.f))


def bob_secure_logsum(ctx, enc_logs: CipherArray, weights, params: PrecisionParams,
                      peer: str = "alice"):
    """Bob: E(log theta_i) and plaintext a_ij >= 0 -> E(log sum_i a_ij theta_i) for each j.

    Secure exponent, a homomorphic linear combination, secure logarithm (thesis
    "Secure LOGSUM"), with the unblinding folded into the linear combination.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2 or weights.shape[0] != enc_logs.size or (weights < 0).any():
        raise InvalidInputError("weights must be a non-negative (n_in, n_out) matrix")
    rho = log_blinds(ctx.rng, enc_logs.size, params)
    ctx.send(peer, "exp.blinded", enc_logs.add_encoded(rho).rerandomize())
    enc_v, enc_c = ctx.recv(peer, "exp.values"), ctx.recv(peer, "exp.shift")
    w, rho_min = unblind_weights(weights, rho / (1 << params.f), params)
    sums = enc_v.lincomb(w.T, compute=ctx.compute)  # scale g + h, = 2^(g+h) e^(rho_min-c) sum
    sums = sums.with_scale(0)  # raw integers for the secure log
    logs = bob_secure_log(ctx, sums, params, peer)
    correction = -params.encode_log(rho_min + (params.g + params.h) * math.log(2))
    return logs.add_encoded(np.full(logs.size, correction, dtype=object)) + enc_c


def alice_secure_logsum(ctx, params: PrecisionParams, peer: str = "bob"):
    """Alice's role in :func:`bob_secure_logsum`."""
    alice_secure_exp(ctx, params, peer)
    alice_secure_log(ctx, params, peer)


def bob_secure_multiply(ctx, enc_x: CipherArray, enc_y: CipherArray, peer: str = "alice",
                        sigma: int = 40) -> CipherArray:
    """Bob: E(x), E(y) -> E(x * y) (scales add), with additive masks of sigma extra bits."""
    enc_x.public_key.same_key(enc_y.public_key)
    if enc_x.shape != enc_y.shape:
        raise InvalidInputError("secure multiply needs equal shapes")
    rx = np.array([ctx.rng.signed_mask(enc_x.bound.bit_length() + sigma)
                   for _ in range(enc_x.size)], dtype=object).reshape(enc_x.shape)
    ry = np.array([ctx.rng.signed_mask(enc_y.bound.bit_length() + sigma)
                   for _ in range(enc_y.size)], dtype=object).reshape(enc_y.shape)
    # Step 1: Bob sends E(x + r_x), E(y + r_y)
    ctx.send(peer, "mul.masked", [enc_x.add_encoded(rx).rerandomize(),
                                  enc_y.add_encoded(ry).rerandomize()])
    # Step 2: Alice returns E((x + r_x)(y + r_y))
    prod = ctx.recv(peer, "mul.product")
    # Step 3: Bob removes r_y x + r_x y + r_x r_y
    prod = prod.with_scale(enc_x.scale + enc_y.scale)
    cross = enc_x.mul(ry).with_scale(prod.scale) + enc_y.mul(rx).with_scale(prod.scale)
    return (prod - cross).add_encoded(-(rx * ry))


def alice_secure_multiply(ctx, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_secure_multiply`."""
    pk, sk = ctx.keypair
    mx, my = ctx.recv(peer, "mul.masked")
    product = mx.decrypt_ints(sk) * my.decrypt_ints(sk)
    ctx.send(peer, "mul.product", CipherArray.encrypt_encoded(pk, product, 0))


def bob_rescale(ctx, enc: CipherArray, bits: int, peer: str = "alice",
                sigma: int = 40) -> CipherArray:
    """Bob: E(x) at scale s -> E(floor(x / 2^bits)) at scale s - bits (error < 1 unit).

    Bob adds a mask r uniform on [0, 2^(bound_bits + sigma)); Alice returns
    E(floor((x + r) / 2^bits)); Bob subtracts floor(r / 2^bits).  The result
    is floor(x / 2^bits) or one more (the carry of the low bits).
    """
    if not 0 < bits <= enc.scale:
        raise InvalidInputError(f"can drop 1..{enc.scale} bits, not {bits}")
    masks = np.array([ctx.rng.randbits(enc.bound.bit_length() + sigma)
                      for _ in range(enc.size)], dtype=object).reshape(enc.shape)
    ctx.send(peer, "rescale.masked", [enc.add_encoded(masks).rerandomize(), bits])
    shifted = ctx.recv(peer, "rescale.shifted")
    result = shifted.add_encoded(-(masks // (1 << bits)))
    return result.with_scale(enc.scale - bits).with_bound((enc.bound >> bits) + 1)


def alice_rescale(ctx, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_rescale`."""
    pk, sk = ctx.keypair
    masked, bits = ctx.recv(peer, "rescale.masked")
    if not isinstance(bits, int) or not 0 < bits < pk.bits:
        raise ProtocolError("bad rescale width")
    values = masked.decrypt_ints(sk)
    ctx.send(peer, "rescale.shifted", CipherArray.encrypt_encoded(
        pk, np.array([v >> bits for v in values.reshape(-1)], dtype=object).reshape(
            values.shape), 0))

