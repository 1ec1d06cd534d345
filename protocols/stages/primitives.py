"""Fixed-point log and exp, the public precision parameters, and masked multiplication and
rescaling (thesis 003, 4.2.1).

Roles: Alice holds the Paillier key pair; Bob holds only ciphertexts under Alice's key.
The log-domain stages live in :mod:`protocols.stages` (one LOGSUM, one emission stage,
one blinding rule); this module keeps what they and the comparisons build on:

* :func:`log_fixed`, :func:`exp_fixed` -- exact fixed-point log and exp of big integers
  (256-bit MPFR, so nothing is lost to float64).
* :class:`PrecisionParams` -- the public scales, bounds and hiding widths of the
  log-domain protocols, and the LOGSUM stage's parameters derived from them.
* :func:`alice_exp_values` -- the v1 recursion's per-model exponentials, with the mass
  that fell out of the exponent's range.
* :func:`log_uniform_integer` -- the opt-in ``fast`` keyword argmax's slope.
* Secure multiplication and rescaling: additive masks uniform on
  [-2^(b + sigma), 2^(b + sigma)) with b the *declared* (public) bit bound of the operand,
  statistical distance at most 2^-sigma; Bob learns nothing (IND-CPA).

The standalone secure exponent, logarithm and LOGSUM of earlier versions are gone: their
multiplicative blinds were log-uniform integers, whose exact products let Alice solve for
Bob's weights (``docs/security.md``, "What changed").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from protocols.stages.fixedlog import exp_fixed, log_fixed
from protocols.stages.logsum import LogsumParams
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.errors import InvalidInputError, PrecisionError
from smc_hmm.messages import Ciphertexts, Message

LN2 = math.log(2)
#: significant bits below which an exponential counts as fallen out of range
SIGNIFICANT_BITS = 53


@dataclass(frozen=True)
class PrecisionParams:
    """Public fixed-point scales, bounds and hiding widths of the log-domain protocols.

    ``log_scale`` (f): fractional bits of every log-domain value.
    ``log_bound_bits``: every finite log-value a protocol handles is within
    +-2^log_bound_bits nats (log 0 is carried as a sentinel far below).
    ``blind_nats`` (R): width of every additive log blind and of the LOGSUM's output
    blind (:mod:`protocols.stages.blinds`).  ``precision_bits`` (P): each LOGSUM target
    keeps 2^-P relative precision per round.  ``weight_floor_bits``: the smallest
    nonzero transition probability Bob may hold is 2^-weight_floor_bits (checked
    before the run).  ``exp_scale``: the v1 recursion's exponent bits (None: the widest
    the key allows).  ``sigma``: statistical parameter of every noise and mask.
    """

    log_scale: int = typed.whole(96, 16, 160)
    log_bound_bits: int = typed.whole(40, 8, 80)
    blind_nats: float = typed.blind_nats()
    precision_bits: int = typed.whole(48, 16, 128)
    weight_floor_bits: int = typed.whole(42, 0, 256)
    exp_scale: int | None = typed.whole(None, 64, 16384, optional=True)
    sigma: int = typed.sigma()

    def __post_init__(self):
        typed.check_fields(self)

    @property
    def f(self) -> int:
        return self.log_scale

    @property
    def logsum(self):
        """The LOGSUM stage's parameters: the output blind is R wide and the blinds of a
        model's states spread over at most 2R (one output blind plus one emission blind)."""
        return LogsumParams(
            precision_bits=self.precision_bits,
            sigma=self.sigma,
            blind_nats=self.blind_nats,
            spread_nats=2 * self.blind_nats,
            weight_floor_bits=self.weight_floor_bits,
        )

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

    def min_weight(self) -> float:
        """The smallest nonzero transition probability: 2^-weight_floor_bits."""
        return math.ldexp(1.0, -self.weight_floor_bits)

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


# -- the fast keyword argmax's slope ----------------------------------------------------


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


# -- masked multiplication and rescaling: declared messages and one role function each ------


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
        """E(operand i + mask), the field Bob sends re-randomised (``mul.masked``)."""
        bound = self.bounds[i] + (1 << self.mask_bits(i))
        return Ciphertexts(self.scales[i], bound, self.shape, fresh=True)


def multiply_randomizers(size: int) -> dict[str, int]:
    """Randomizers of one secure multiplication of ``size`` pairs: Bob re-randomises both
    masked operands, Alice encrypts the products."""
    return {"alice": size, "bob": 2 * size}


def rescale_randomizers(size: int) -> dict[str, int]:
    """Randomizers of one rescaling of ``size`` values: Bob's masked values, Alice's
    shifted replies."""
    return {"alice": size, "bob": size}


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
    ctx.send(peer, masked, [enc_x.add_encoded(rx), enc_y.add_encoded(ry)])
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


def rescale_messages(spec: MaskSpec, bits: int):
    typed.integer("the bits a rescaling drops", bits, 1, spec.scales[0])
    top = spec.bounds[0] + (1 << spec.mask_bits(0))
    return (
        Message("rescale.masked", Ciphertexts(spec.scales[0], top, spec.shape, fresh=True)),
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
    masked, shifted = rescale_messages(spec, bits)
    _check_operand(enc, spec, 0)
    size = int(np.prod(spec.shape))
    masks = np.array(
        [ctx.rng.randbits(spec.mask_bits(0)) for _ in range(size)], dtype=object
    ).reshape(spec.shape)
    ctx.send(peer, masked, enc.add_encoded(masks))
    result = ctx.recv(peer, shifted).add_encoded(-(masks // (1 << bits)))
    return result.with_bound((spec.bounds[0] >> bits) + 1)


def alice_rescale(ctx, bits: int, spec: MaskSpec, peer: str = "bob") -> None:
    """Alice's role in :func:`bob_rescale`."""
    pk, sk = ctx.keypair
    masked, shifted = rescale_messages(spec, bits)
    values = ctx.recv(peer, masked).decrypt_ints(sk)
    out = np.array([v >> bits for v in values.reshape(-1)], dtype=object).reshape(values.shape)
    ctx.send(
        peer,
        shifted,
        CipherArray.encrypt_encoded(pk, out, spec.scales[0] - bits, shifted.body.bound),
    )
