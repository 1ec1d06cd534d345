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
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError

#: log of zero is carried as this many nats (exp of it is 0.0 in float64)
LOG_ZERO_NATS = -(2.0**40)
#: Alice reads any log-value below this as log 0
LOG_ZERO_THRESHOLD = -(2.0**39)
LN2 = math.log(2)


@dataclass(frozen=True)
class PrecisionParams:
    """Fixed-point scales and blinding ranges of the log/exp protocols.

    ``log_scale`` (f): fractional bits of log-domain values.  ``weight_bits``:
    significant bits kept in each of Bob's unblinding weights (their scale h
    is chosen per call so the smallest nonzero weight still has that many).
    ``exp_scale`` (g): fractional bits of Alice's exponentials; by default
    (None) as large as the key allows (:meth:`exp_scale_for`), so that a state
    up to ~ g ln 2 nats below the leading one keeps 53 significant bits -- about
    1,000 nats with 2048-bit keys.  ``beta_bits``: minimum size of the
    multiplicative blinds; ``blind_nats`` (R): width of all blinds in nats.
    """

    log_scale: int = 88
    blind_nats: float = 20.0
    exp_scale: int | None = None
    weight_bits: int = 64
    beta_bits: int = 64
    sigma: int = 40

    def __post_init__(self):
        if not (isinstance(self.log_scale, int) and 8 <= self.log_scale <= 256):
            raise InvalidInputError("log_scale must be an int in [8, 256]")
        if not (math.isfinite(self.blind_nats) and 0 < self.blind_nats <= 200):
            raise InvalidInputError("blind_nats must be in (0, 200]")
        if self.sigma < 40:
            raise InvalidInputError("sigma must be at least 40 bits")
        if not 24 <= self.weight_bits <= 512:
            raise InvalidInputError("weight_bits must be in [24, 512]")
        if self.exp_scale is not None and not 24 <= self.exp_scale <= 8192:
            raise InvalidInputError("exp_scale must be in [24, 8192]")

    @property
    def blind_bits(self) -> int:
        """Bits spanned by a multiplicative blind e^u, u < R."""
        return math.ceil(self.blind_nats / math.log(2))

    def max_weight_scale(self, smallest_weight: float = 1.0) -> int:
        """Largest h used when the smallest nonzero weight is ``smallest_weight`` (<= 1)
        and blinds differ by up to 2R nats."""
        return self.weight_bits + 2 * self.blind_bits + max(0, -math.floor(
            math.log2(smallest_weight)))

    def exp_scale_for(self, public_key, max_weight_scale: int, max_terms: int) -> int:
        """g: the explicit ``exp_scale`` or the largest that fits the key with
        ``max_terms`` products of weights of up to ``max_weight_scale`` bits,
        times a multiplicative blind.  Raises PrecisionError if below 64."""
        room = (public_key.max_plain.bit_length() - 1 - max_weight_scale - self.beta_bits
                - self.blind_bits - math.ceil(math.log2(max_terms + 1)) - 8)
        g = room if self.exp_scale is None else self.exp_scale
        if g > room or g < 64:
            raise PrecisionError(
                f"a {public_key.bits}-bit key leaves {room} bits for exponentials "
                f"(need >= {max(64, g)}); use a larger key or smaller weight_bits/blind_nats")
        return g

    @property
    def f(self) -> int:
        return self.log_scale

    def encode_log(self, x: float) -> int:
        """A log-value at scale f (log 0 -> the LOG_ZERO sentinel)."""
        if x == -math.inf:
            x = LOG_ZERO_NATS
        if not math.isfinite(x):
            raise InvalidInputError(f"cannot encode log-value {x}")
        return ldexp_int(x, self.f)

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
    """Bob's integer weights round(a_lj * e^-(rho_l - rho_min) * 2^h), rho_min and h.

    ``weights`` is (N_in, N_out) (a_lj >= 0), ``rho`` the (N_in,) blinds in
    nats.  h is chosen so that the smallest nonzero weight keeps
    ``weight_bits`` significant bits.
    """
    rho = np.asarray(rho, dtype=float)
    rho_min = float(rho.min())
    factors = np.exp(-(rho - rho_min))[:, None] * np.asarray(weights, dtype=float)
    nonzero = factors[factors > 0]
    smallest = float(nonzero.min()) if nonzero.size else 1.0
    h = params.weight_bits + max(0, -math.floor(math.log2(smallest)))
    scaled = [[ldexp_int(float(x), h) for x in row] for row in factors]
    return np.array(scaled, dtype=object), rho_min, h


# -- Alice's halves ------------------------------------------------------------------------


def alice_exp(blinded_logs, exp_scale: int) -> tuple[list[int], float]:
    """Alice's secure-exponent step: V_i = round(2^g exp(y_i - c)) with c = max_i y_i.

    Computed as 2^(g + k) e^r with y_i - c = k ln 2 + r, so every V_i keeps 53
    significant bits down to ~ g ln 2 nats below the maximum (no float
    underflow).  ``blinded_logs`` are floats (log 0 as -inf); if every value
    is log 0 then V = 0 and c = 0.
    """
    ys = [float(y) for y in blinded_logs]
    finite = [y for y in ys if y != -math.inf]
    c = max(finite) if finite else 0.0
    out = []
    for y in ys:
        if y == -math.inf:
            out.append(0)
            continue
        k = math.floor((y - c) / LN2)
        out.append(ldexp_int(math.exp((y - c) - k * LN2), exp_scale + k)
                   if exp_scale + k >= -1 else 0)
    return out, c


def alice_log(blinded_values) -> list[float]:
    """Alice's secure-logarithm step: log of positive integers (0 -> -inf)."""
    out = []
    for v in blinded_values:
        v = int(v)
        if v < 0:
            raise ProtocolError("secure log received a negative value")
        out.append(math.log(v) if v else -math.inf)
    return out


# -- standalone batched primitives: one role function per party -------------------------------


def bob_secure_exp(ctx, enc_logs: CipherArray, params: PrecisionParams, peer: str = "alice"):
    """Bob: E(x_i) (log-values at scale f) -> (E(y_i), E(s)) with exp(x_i) = y_i * e^s.

    y_i is a fixed-point value (its CipherArray scale is g + h) and s a
    log-value at scale f: Alice's common shift c minus Bob's rho_min, so
    nothing over- or underflows whatever the magnitudes of x.
    """
    if enc_logs.scale != params.f:
        raise InvalidInputError(f"log-values must be at scale {params.f}")
    rho = log_blinds(ctx.rng, enc_logs.size, params)
    g = params.exp_scale_for(enc_logs.public_key, params.max_weight_scale(), 1)
    # Step 1: Bob sends E(x_i + rho_i) and the exponential scale g
    ctx.send(peer, "exp.blinded", [enc_logs.add_encoded(rho).rerandomize(), g])
    # Step 2: Alice returns E(V_i) = E(round(2^g exp(x_i + rho_i - c))) and E(c)
    enc_v, enc_c = ctx.recv(peer, "exp.values"), ctx.recv(peer, "exp.shift")
    # Step 3: Bob multiplies by e^-(rho_i - rho_min); the common e^-rho_min joins the shift
    w, rho_min, h = unblind_weights(np.eye(enc_logs.size), rho / (1 << params.f), params)
    out = enc_v.with_scale(g).mul(np.diagonal(w).astype(object), h)
    return out, enc_c.add_encoded(-params.encode_log(rho_min))


def alice_secure_exp(ctx, params: PrecisionParams, peer: str = "bob"):
    """Alice's role in :func:`bob_secure_exp`."""
    pk, sk = ctx.keypair
    y, g = ctx.recv(peer, "exp.blinded")
    if not isinstance(g, int) or not 24 <= g < pk.bits:
        raise ProtocolError(f"bad exponential scale {g!r}")
    values, c = alice_exp([params.decode_log(v) for v in y.decrypt_ints(sk)], g)
    ctx.send(peer, "exp.values", CipherArray.encrypt_encoded(pk, values, 0))
    ctx.send(peer, "exp.shift", CipherArray.encrypt_encoded(pk, [params.encode_log(c)],
                                                            params.f))


def bob_secure_log(ctx, enc_values: CipherArray, params: PrecisionParams, peer: str = "alice"):
    """Bob: E(theta_i) (non-negative, scale s) -> E(log theta_i) at scale f (log 0 -> -inf)."""
    betas = multiplicative_blinds(ctx.rng, enc_values.size, params)
    # Step 1: Bob sends E(theta_i * beta_i)
    ctx.send(peer, "log.blinded", enc_values.mul(np.array(betas, dtype=object)).rerandomize())
    # Step 2: Alice returns E(log(theta_i * beta_i))
    enc_logs = ctx.recv(peer, "log.values")
    # Step 3: Bob subtracts log(beta_i) + s ln 2
    offsets = np.array([-params.encode_log(math.log(b) + enc_values.scale * LN2)
                        for b in betas], dtype=object)
    return enc_logs.add_encoded(offsets)


def alice_secure_log(ctx, params: PrecisionParams, peer: str = "bob"):
    """Alice's role in :func:`bob_secure_log`."""
    pk, sk = ctx.keypair
    blinded = ctx.recv(peer, "log.blinded")
    logs = alice_log(blinded.decrypt_ints(sk))
    ctx.send(peer, "log.values", CipherArray.encrypt_encoded(
        pk, [params.encode_log(x) for x in logs], params.f))


def bob_secure_logsum(ctx, enc_logs: CipherArray, weights, params: PrecisionParams,
                      peer: str = "alice"):
    """Bob: E(log theta_i) and plaintext a_ij >= 0 -> E(log sum_i a_ij theta_i) for each j.

    Secure exponent, a homomorphic linear combination, secure logarithm (thesis
    "Secure LOGSUM"), with the unblinding folded into the linear combination.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2 or weights.shape[0] != enc_logs.size or (weights < 0).any() \
            or not np.isfinite(weights).all():
        raise InvalidInputError("weights must be a finite non-negative (n_in, n_out) matrix")
    positive = weights[weights > 0]
    smallest = float(positive.min()) if positive.size else 1.0
    g = params.exp_scale_for(enc_logs.public_key, params.max_weight_scale(smallest),
                             enc_logs.size)
    rho = log_blinds(ctx.rng, enc_logs.size, params)
    ctx.send(peer, "exp.blinded", [enc_logs.add_encoded(rho).rerandomize(), g])
    enc_v, enc_c = ctx.recv(peer, "exp.values"), ctx.recv(peer, "exp.shift")
    w, rho_min, h = unblind_weights(weights, rho / (1 << params.f), params)
    # sum_l w_lj V_l = 2^(g+h) e^(rho_min - c) sum_l a_lj theta_l, read as an integer
    sums = enc_v.lincomb(w.T, compute=ctx.compute)
    logs = bob_secure_log(ctx, sums, params, peer)
    correction = -params.encode_log(rho_min + (g + h) * LN2)
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

