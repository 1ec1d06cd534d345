"""Encrypted emissions from packed frames: the one implementation under forward (discrete
and Gaussian), keyword and speaker (thesis 003, 4.2.1, "simplified secure forward").

Alice encodes each frame as public-size integer inputs (a one-hot row for a discrete
symbol, the distinct products z_i z_j of z = [x; 1], or x_i and x_i^2 for diagonal
Gaussians and mixtures) and packs the same input of ``plan.slots`` consecutive frames
into the signed slots of one ciphertext (:func:`alice_pack`).  Bob's emission weights are
the same for every frame, so one multi-exponentiation per output row and group scores
all the group's frames at once (:func:`bob_emissions`): the inputs are cut into blocks of
at most :data:`~smc_hmm.crypto.multiexp.SHARED_BASE_MAX_TERMS` bases so that every
block's rows share per-base tables (about a third fewer multiplications than one bucket
method per row over all bases), and the blocks of every group are spread over the
compute lanes together.  Bob adds each slot's offset -- the constant of the row and the
additive blind of :mod:`protocols.stages.blinds` -- and Alice decrypts one ciphertext per
row and group (:func:`alice_unpack`).

What Alice learns: per frame and row, Bob's log-density plus a fresh smooth blind of
width R (``blind_nats``), nothing else (the blind is an integer at the value's scale, so
its low bits are uniform: no structure of Bob's fixed-point weights survives).  The
estimator attack on repeated frames is bounded by
:func:`~protocols.stages.blinds.estimation_floor`.  Bob learns nothing (IND-CPA).

Public layout: the slot width and count, the groups, the declared bounds -- all from
the public sizes (:class:`EmissionLayout`).  Every row's reach over the admissible
inputs is checked by Bob before the run (the caller's emission program), so no slot can
overflow whatever Alice's frames are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.crypto.multiexp import SHARED_BASE_MAX_TERMS
from smc_hmm.crypto.packing import PackingPlan, plain_bits
from smc_hmm.errors import InvalidInputError, PrecisionError
from smc_hmm.hmm import (
    DiscreteHMM,
    GaussianHMM,
    diag_emission_weights,
    emission_weights,
    quadratic_products,
)
from smc_hmm.messages import Ciphertexts, Message

#: the public emission kinds: discrete symbols, full-covariance and diagonal Gaussians
DISCRETE, FULL, DIAG = "discrete", "gaussian", "gaussian-diag"
KINDS = (DISCRETE, FULL, DIAG)


# -- the front end: what a model's kind makes of a frame ---------------------------------------


def emission_kind(models) -> tuple[str, int]:
    """The public emission kind of a list of HMMs and their observation width (M symbols
    or d features); they must agree."""
    if all(isinstance(m, DiscreteHMM) for m in models):
        kind, widths = DISCRETE, {m.n_symbols for m in models}
    elif all(isinstance(m, GaussianHMM) for m in models):
        diagonal = all(m.covariance_type == "diag" for m in models)
        kind, widths = (DIAG if diagonal else FULL), {m.n_features for m in models}
    else:
        raise InvalidInputError("models must be all DiscreteHMM or all GaussianHMM")
    if len(widths) != 1:
        raise InvalidInputError("all models must share the observation space")
    return kind, widths.pop()


def input_count(kind: str, width: int) -> int:
    """Encoded inputs per frame: M one-hot entries, 2d values (x_i, x_i^2) for diagonal
    covariances, or the d(d+3)/2 distinct products z_i z_j of z = [x; 1] (the constant 1
    left implicit)."""
    if kind == DISCRETE:
        return width
    return 2 * width if kind == DIAG else width * (width + 3) // 2


def weight_rows(model, kind: str) -> np.ndarray:
    """A Gaussian model's emission weights per state over the inputs of
    :func:`frame_products`, its constant last (:mod:`smc_hmm.hmm`)."""
    return diag_emission_weights(model) if kind == DIAG else emission_weights(model)


def input_bound(feature_bound: float, fs: int) -> int:
    """Public bound on one encoded Gaussian input (x_i, x_i^2 or a product) at scale fs,
    for features within ``feature_bound``: ceil(max(B, B^2) 2^fs) + 1."""
    return math.ceil(max(feature_bound, feature_bound**2) * 2**fs) + 1


def integer_program(rows, *, f: int, fs: int, feature_bound: float, limit_nats: float, over: str):
    """Bob's emission program from float ``rows`` (constant last): integer weights at
    f - fs bits (Alice's inputs are at fs) and constants at f bits.  Every row's reach
    over the admissible inputs, |W| . ceil(max(B, B^2) 2^fs + 1) + |C| at scale f, must
    stay within ``limit_nats``; else a PrecisionError says it is ``over`` that limit
    (the caller may defer it: a check on Bob's private models)."""
    rows = np.asarray(rows, dtype=float)
    if not np.isfinite(rows).all():
        raise PrecisionError("a model has a non-finite emission weight")
    weights = np.array([[ldexp_int(float(v), f - fs) for v in r[:-1]] for r in rows], dtype=object)
    const = np.array([ldexp_int(float(v), f) for v in rows[:, -1]], dtype=object)
    top = input_bound(feature_bound, fs)
    limit = math.floor(limit_nats * 2**f)
    for w, c in zip(weights, const):
        reach = top * sum(abs(int(v)) for v in w) + abs(int(c))
        if reach > limit:
            raise PrecisionError(
                f"with features up to {feature_bound:g}, a log-density may reach "
                f"{reach / 2**f:.3g} nats, over {over}"
            )
    return weights, const


def checked_observations(observations, kind: str, width: int, feature_bound: float, *, clip=False):
    """Alice's observations checked against the public sizes before anything is sent:
    symbols in [0, M), or finite (T, d) frames within the public ``feature_bound``
    (``clip``: clipped to it instead of refused).  Returns the array and whether a
    feature was clipped."""
    if kind == DISCRETE:
        obs = np.asarray(observations)
        if obs.ndim != 1 or obs.size == 0 or obs.dtype.kind not in "iu":
            raise InvalidInputError("discrete observations must be a non-empty 1-D int array")
        if obs.min() < 0 or obs.max() >= width:
            raise InvalidInputError(f"symbols must be in [0, {width})")
        return obs, False
    x = np.asarray(observations, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != width:
        raise InvalidInputError(f"Gaussian observations must be (T, {width}) frames")
    if not np.isfinite(x).all():
        raise InvalidInputError("observations contain NaN or infinity")
    top = float(np.abs(x).max())
    if top <= feature_bound:
        return x, False
    if clip:
        return np.clip(x, -feature_bound, feature_bound), True
    raise InvalidInputError(
        f"a feature of magnitude {top:.6g} exceeds the public feature_bound {feature_bound:g}"
    )


def frame_products(x: np.ndarray, kind: str) -> np.ndarray:
    """A Gaussian frame's inputs (floats, T rows): x_i then x_i^2 (diagonal), or the
    distinct products of :func:`smc_hmm.hmm.quadratic_products` without the constant."""
    if kind == DIAG:
        return np.concatenate([x, x * x], axis=1)
    return quadratic_products(x)[:, :-1]


@dataclass(frozen=True)
class EmissionLayout:
    """Frames of ``length`` packed ``plan.slots`` to a ciphertext; ``inputs`` encoded
    values per frame, ``rows`` emission rows (states or mixture components)."""

    plan: PackingPlan
    length: int
    inputs: int
    rows: int

    @classmethod
    def build(
        cls, slot_value_bits: int, key_bits: int, length: int, inputs: int, rows: int, reserve=0
    ):
        """Slots wide enough for a signed value of ``slot_value_bits`` bits (magnitude), a
        sign and a carry bit, as many as the key holds below its bound check with
        ``reserve`` bits left above them."""
        bits = slot_value_bits + 2
        slots = (plain_bits(key_bits) - reserve) // bits
        if slots < 1:
            raise PrecisionError(f"a {key_bits}-bit key cannot hold one blinded emission")
        return cls(PackingPlan(bits, slots), length, inputs, rows)

    @property
    def groups(self) -> list[range]:
        """The frames packed together: consecutive groups of ``plan.slots``."""
        per = self.plan.slots
        return [range(a, min(a + per, self.length)) for a in range(0, self.length, per)]

    def packed_bound(self, slot_bound: int) -> int:
        """Bound on a packed plaintext whose slots are each within ``slot_bound``."""
        return self.plan.packed_bound(slot_bound)

    def obs_message(self, tag: str, scale: int, slot_bound: int) -> Message:
        """Alice's packed frames (:func:`alice_pack`): (groups, inputs) at ``scale``."""
        shape = (len(self.groups), self.inputs)
        return Message(tag, Ciphertexts(scale, self.packed_bound(slot_bound), shape))

    def emit_message(self, tag: str, scale: int, slot_bound: int) -> Message:
        """Bob's packed emissions (:func:`bob_send`, fresh): (groups, rows) at ``scale``."""
        shape = (len(self.groups), self.rows)
        return Message(tag, Ciphertexts(scale, self.packed_bound(slot_bound), shape, fresh=True))


def alice_pack(pk: PublicKey, encoded, layout: EmissionLayout, scale: int, bound: int):
    """Alice: the (groups, inputs) ciphertexts, input i of every frame of a group in the
    slots of one ciphertext; ``bound`` is the message's declared bound."""
    encoded = np.asarray(encoded, dtype=object)
    rows = [
        [layout.plan.pack(column) for column in encoded[g.start : g.stop].T] for g in layout.groups
    ]
    return CipherArray.encrypt_encoded(pk, np.array(rows, dtype=object), scale, bound)


def bob_emissions(
    enc_obs: CipherArray, weights, weight_scale: int, offsets, layout: EmissionLayout, reach: int
) -> CipherArray:
    """Bob: the (groups, rows) packed E(weights . input_t + offsets[t][row]).

    ``weights`` are integers (rows, inputs) at ``weight_scale``; ``offsets`` (length,
    rows) integers at the result's scale; ``reach`` the public bound on one slot's
    weights . input (checked by the caller against its model before the run)."""
    groups, width, rows = layout.groups, layout.inputs, layout.rows
    weights = np.asarray(weights, dtype=object)
    if enc_obs.shape != (len(groups), width) or weights.shape != (rows, width):
        raise PrecisionError("emission inputs and weights do not match the public layout")
    parts = -(-width // SHARED_BASE_MAX_TERMS)
    cuts = [(width * i // parts, width * (i + 1) // parts) for i in range(parts)]
    blocks = [(enc_obs[g][a:b], weights[:, a:b]) for g in range(len(groups)) for a, b in cuts]
    flat = CipherArray.lincomb_blocks(blocks, weight_scale)
    out = []
    for g, group in enumerate(groups):
        start = g * parts * rows
        combined = flat[start : start + rows]
        for i in range(1, parts):
            combined = combined + flat[start + i * rows : start + (i + 1) * rows]
        packed = [layout.plan.pack([offsets[t][row] for t in group]) for row in range(rows)]
        summed = combined.with_bound(layout.packed_bound(reach))
        out.append(summed.add_encoded(np.array(packed, dtype=object)).reshape(1, rows))
    return CipherArray.concatenate(out)


def bob_send(ctx, message, enc_obs, weights, weight_scale, offsets, layout, reach, peer: str):
    """Bob's half through ``ctx``: :func:`bob_emissions` to ``peer`` as ``message`` (declared
    fresh), at the declaration's public bound."""
    emit = bob_emissions(enc_obs, weights, weight_scale, offsets, layout, reach)
    ctx.send(peer, message, emit.with_bound(message.body.bound))


def alice_receive(ctx, message, layout: EmissionLayout, peer: str) -> list[list[int]]:
    """Alice's half through ``ctx``: ``message`` decrypted and unpacked, (length, rows)."""
    return alice_unpack(ctx.recv(peer, message).decrypt_ints(ctx.keypair[1]), layout)


def alice_unpack(decrypted, layout: EmissionLayout) -> list[list[int]]:
    """Alice: the (length, rows) blinded emissions from the decrypted (groups, rows) slots."""
    out: list[list[int]] = []
    values = np.asarray(decrypted, dtype=object).reshape(-1, layout.rows)
    for group, row in zip(layout.groups, values):
        slots = [layout.plan.unpack(int(v), len(group)) for v in row]
        out += [[s[k] for s in slots] for k in range(len(group))]
    return out


def weighted_emissions(enc_weights: CipherArray, inputs, input_scale: int) -> CipherArray:
    """The mirror of :func:`bob_emissions` for speech mining (the model holder holds the
    key): E(weights_r . input_t) for every row r and frame t, from the model holder's
    encrypted weights (rows, inputs) and the evaluator's plain encoded frames (T, inputs)
    as exponents: one multi-exponentiation per row over its shared bases, the rows spread
    over the compute lanes together.  Returns (rows, T) at the weights' scale plus
    ``input_scale``.  The evaluator learns nothing (IND-CPA); the key holder sees nothing."""
    inputs = np.asarray(inputs, dtype=object)
    rows, width = enc_weights.shape
    if inputs.ndim != 2 or inputs.shape[1] != width:
        raise PrecisionError(f"inputs of shape {inputs.shape} for {width} weights per row")
    flat = CipherArray.lincomb_blocks([(enc_weights[r], inputs) for r in range(rows)], input_scale)
    return flat.reshape(rows, inputs.shape[0])
