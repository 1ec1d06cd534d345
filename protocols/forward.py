"""Secure forward algorithm for discrete and Gaussian HMMs (thesis 003, 4.2.1).

Roles and data:

* **Alice** holds the Paillier key pair and an observation sequence
  x_1..x_T (symbols in [0, M) or feature vectors in R^d).
* **Bob** holds one or more HMMs lambda = (A, B, pi) (all discrete or all
  Gaussian); several models run in lockstep, batched into the same messages.

Output: Bob obtains E(log P(x | lambda)) for each model; with ``reveal=True``
(the final step both agree on) he sends it back re-randomised and Alice
decrypts log P.  For keyword recognition Bob keeps the ciphertexts instead.

Protocol (log domain, all values fixed point, see :class:`PrecisionParams`):

0. Alice sends her public key; Bob sends the public sizes (model kind, M or d,
   number of states per model).
1. Alice sends her encrypted observations: one-hot rows E(e_{x_t}) (discrete:
   the Paillier-selection 1-of-M OT of :mod:`protocols.ot`) or the distinct
   products E(z_i z_j), z = [x_t; 1] (Gaussian: thesis "simplified secure
   forward"; the constant 1 is not encrypted).
2. Bob evaluates E(log b_j(x_t)) as multi-exponentiations, adds a blind
   gamma_tj (and log pi_j at t = 1) and sends them, one message per frame.
3. Alice keeps y_t(j) = log alpha_t(j) - C_t + rho_t(j) in the clear, where
   C_t is the sum of her own shifts and rho_t(j) is Bob's blind.  Each time
   step is ONE round trip, all states of all models batched:
   Alice -> Bob: E(V_j), V_j = round(2^g exp(y_t(j) - c_t)), c_t her max (secure
   exponent with a common shift, so nothing under- or overflows); Bob: the
   LOGSUM's linear combination S_j = sum_l round(2^h a_lj e^-(rho_l - rho_min)) V_l
   (unblinding folded into the weights), multiplied by a log-uniform blind
   beta_j; Bob -> Alice: E(S_j beta_j).  Alice: y_{t+1}(j) =
   log(S_j beta_j) + [log b_j(x_{t+1}) + gamma_{t+1,j}] (secure logarithm).
4. Final: the same exponent step with a_lj = 1 gives E(S beta) with
   log S = log P + known offsets; Alice returns E(log(S beta) + C), Bob
   subtracts his offsets: E(log P).

Who learns what (semi-honest Alice and Bob, not colluding):

* Bob sees only ciphertexts under Alice's key: nothing about x or log P.
* Alice learns the public sizes (M or d, states per model, exp_scale) and, for
  every t and j, (a) log b_j(x_t) + gamma_tj and (b) log sum_l a_lj alpha_t(l)
  plus a blind of log(beta_j): both blinds are uniform on [0, R) nats
  (``blind_nats`` = R, default 20).  This multiplicative blinding hides
  values within the range R only (as in the thesis), not statistically; it
  also shows Alice which predicted/emission probabilities are exactly zero.
  With ``reveal=True`` she learns log P.
* Precision: Alice's exponentials keep 53 significant bits for every state
  within ~ g ln 2 nats of the leading state of its model, g being as large as
  the key allows (about 1,000 nats at 2048 bits; ``exp_scale`` in the spec);
  Bob's weights keep ``weight_bits`` (64) significant bits however small a
  transition probability is.  The result matches the plaintext forward
  algorithm to ~1e-12 relative error (``smc-hmm bench forward`` measures it);
  zero probabilities are exact (log 0 is carried as a sentinel; an impossible
  sequence gives -inf).  Gaussian emissions lose |x|^2 2^-(s_w + 1) nats per
  frame to the rounding of Bob's weights (s_w = log_scale - feature_scale = 40
  bits by default): normalised features are far inside the 1e-6 target.

Run: ``python examples/secure_forward.py`` (in-process) or see the example's
docstring for two processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from protocols.primitives import (
    PrecisionParams,
    alice_exp,
    alice_log,
    log_blinds,
    multiplicative_blinds,
    unblind_weights,
)
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.errors import ConfigError, InvalidInputError, ProtocolError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, emission_weights, quadratic_products

LN2 = math.log(2)
NAME = "forward"


@dataclass(frozen=True)
class ForwardParams:
    """Precision of the secure forward algorithm.

    Discrete models: log-values at ``precision.log_scale`` fractional bits.
    Gaussian models: Alice's products at ``feature_scale`` bits and Bob's
    quadratic-form weights at ``precision.log_scale - feature_scale`` bits.
    """

    precision: PrecisionParams = field(default_factory=PrecisionParams)
    feature_scale: int = 48

    reveal: bool = True

    def __post_init__(self):
        if not 8 <= self.feature_scale < self.precision.log_scale:
            raise InvalidInputError("feature_scale must be in [8, log_scale)")

    @classmethod
    def from_config(cls, section: Mapping) -> ForwardParams:
        """From the ``[protocol]`` table of a parties.toml file (all keys optional):
        log_scale, blind_nats, feature_scale, reveal."""
        known = {"name", "log_scale", "blind_nats", "feature_scale", "reveal"}
        unknown = set(section) - known
        if unknown:
            raise ConfigError(f"unknown forward parameters: {sorted(unknown)}")
        try:
            precision = PrecisionParams(log_scale=int(section.get("log_scale", 88)),
                                        blind_nats=float(section.get("blind_nats", 20.0)))
            return cls(precision, int(section.get("feature_scale", 48)),
                       bool(section.get("reveal", True)))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"bad forward parameters: {e}") from e


# -- Bob's view of the models ---------------------------------------------------------------


@dataclass
class _ModelBatch:
    """Bob's stacked models: per-model transition matrices and stacked emission terms."""

    kind: str
    transmats: list[np.ndarray]
    log_start: np.ndarray  # (sum N,)
    sizes: list[int]
    width: int  # M (discrete) or d (Gaussian)

    @classmethod
    def of(cls, models: Sequence) -> _ModelBatch:
        models = list(models)
        if not models:
            raise InvalidInputError("Bob needs at least one HMM")
        if all(isinstance(m, DiscreteHMM) for m in models):
            kind, widths = "discrete", {m.n_symbols for m in models}
        elif all(isinstance(m, GaussianHMM) for m in models):
            kind, widths = "gaussian", {m.n_features for m in models}
        else:
            raise InvalidInputError("models must be all DiscreteHMM or all GaussianHMM")
        if len(widths) != 1:
            raise InvalidInputError("all models must share the observation space")
        return cls(kind, [np.asarray(m.transmat) for m in models],
                   np.concatenate([m.log_startprob for m in models]),
                   [m.n_states for m in models], widths.pop())

    @property
    def segments(self) -> list[slice]:
        return _segments(self.sizes)


def _emission_program(models, batch: _ModelBatch, params: ForwardParams):
    """Integer weights (and constants) with E(log b(x_t)) = weights . E(obs_t) + const."""
    f = params.precision.f
    if batch.kind == "discrete":
        log_b = np.concatenate([m.log_emissionprob for m in models])
        weights = np.array([[params.precision.encode_log(float(v)) for v in row]
                            for row in log_b], dtype=object)
        return weights, f, np.zeros(len(log_b), dtype=object)
    w = np.concatenate([emission_weights(m) for m in models])  # (sum N, P), constant last
    ws = f - params.feature_scale
    weights = np.array([[ldexp_int(float(v), ws) for v in row[:-1]] for row in w],
                       dtype=object)
    const = np.array([ldexp_int(float(v), f) for v in w[:, -1]], dtype=object)
    return weights, ws, const


# -- Alice's encoding of her observations ---------------------------------------------------


def encode_observations(pk: PublicKey, observations, spec: dict, params: ForwardParams,
                        compute=None) -> CipherArray:
    """Alice's step 1: encrypted one-hot rows or encrypted distinct products."""
    from protocols.ot import one_hot

    if spec["kind"] == "discrete":
        obs = np.asarray(observations)
        if obs.ndim != 1 or obs.size == 0 or obs.dtype.kind not in "iu":
            raise InvalidInputError("discrete observations must be a non-empty 1-D int array")
        return CipherArray.encrypt_encoded(pk, one_hot(obs, spec["width"]), 0, compute=compute)
    obs = np.asarray(observations, dtype=float)
    if obs.ndim != 2 or obs.shape[0] == 0 or obs.shape[1] != spec["width"]:
        raise InvalidInputError(f"Gaussian observations must be (T, {spec['width']})")
    if not np.isfinite(obs).all():
        raise InvalidInputError("observations contain NaN or infinity")
    products = quadratic_products(obs)[:, :-1]  # the constant 1 stays implicit
    return CipherArray.encrypt(pk, products, params.feature_scale, compute=compute)


# -- roles ------------------------------------------------------------------------------------


def alice(ctx, observations, params: ForwardParams | None = None, *,
          reveal: bool | None = None, peer: str = "bob"):
    """Alice: returns the list of log P(x | lambda_k) (``reveal``) or None."""
    params = params or ForwardParams()
    reveal = params.reveal if reveal is None else reveal
    prec = params.precision
    pk, sk = ctx.keypair
    # Step 0: public key out, public sizes in
    ctx.send(peer, "fw.key", pk)
    spec = ctx.recv(peer, "fw.spec")
    _check_spec(spec)
    segments = _segments(spec["states"])
    with ctx.phase("encrypt observations"):
        # Step 1: encrypted observations
        enc_obs = encode_observations(pk, observations, spec, params, ctx.compute)
        ctx.send(peer, "fw.obs", enc_obs)
    n_steps = enc_obs.shape[0]
    shifts = np.zeros(len(segments))  # C per model: the sum of Alice's own shifts
    with ctx.phase("forward recursion"):
        # Step 2 (t = 1): y_1(j) = log pi_j + log b_j(x_1) + gamma_1j
        y = _decrypt_logs(ctx.recv(peer, "fw.emit.0"), sk, prec)
        for t in range(n_steps):
            # Step 3a: secure exponent with a per-model shift c
            values = []
            for k, seg in enumerate(segments):
                v, c = alice_exp(y[seg], spec["exp_scale"])
                values.extend(v)
                shifts[k] += c
            ctx.send(peer, f"fw.v.{t}", CipherArray.encrypt_encoded(pk, values, 0))
            if t == n_steps - 1:
                break
            # Step 3b: secure logarithm of the LOGSUM, plus the blinded emission
            logs = alice_log(ctx.recv(peer, f"fw.s.{t}").decrypt_ints(sk))
            y = np.array(logs) + _decrypt_logs(ctx.recv(peer, f"fw.emit.{t + 1}"), sk, prec)
    with ctx.phase("termination"):
        # Step 4: log of the final sum plus Alice's total shift
        finals = alice_log(ctx.recv(peer, "fw.s.final").decrypt_ints(sk))
        out = [prec.encode_log(x + shifts[k]) if x != -math.inf else prec.encode_log(x)
               for k, x in enumerate(finals)]
        ctx.send(peer, "fw.log", CipherArray.encrypt_encoded(pk, out, prec.f))
        if not reveal:
            return None
        # Step 5 (agreed final step): Alice decrypts E(log P)
        return [prec.decode_log(v) for v in ctx.recv(peer, "fw.result").decrypt_ints(sk)]


def bob(ctx, models, params: ForwardParams | None = None, *, reveal: bool | None = None,
        peer: str = "alice") -> CipherArray:
    """Bob: returns E(log P(x | lambda_k)) for each model (scale ``log_scale``)."""
    params = params or ForwardParams()
    reveal = params.reveal if reveal is None else reveal
    prec = params.precision
    batch = _ModelBatch.of(models)
    # Step 0
    pk = ctx.recv(peer, "fw.key")
    if not isinstance(pk, PublicKey):
        raise ProtocolError("expected Alice's public key")
    positive = np.concatenate([a[a > 0] for a in batch.transmats])
    g = prec.exp_scale_for(pk, prec.max_weight_scale(float(positive.min())), max(batch.sizes))
    spec = {"kind": batch.kind, "width": batch.width, "states": batch.sizes, "exp_scale": g}
    ctx.send(peer, "fw.spec", spec)
    weights, weight_scale, const = _emission_program(models, batch, params)
    enc_obs = ctx.recv(peer, "fw.obs")
    expected = batch.width if batch.kind == "discrete" else weights.shape[1]
    if not isinstance(enc_obs, CipherArray) or enc_obs.ndim != 2 or \
            enc_obs.shape[1] != expected or enc_obs.public_key.n != pk.n:
        raise ProtocolError(f"expected encrypted observations of shape (T, {expected})")
    n_steps, total = enc_obs.shape[0], int(sum(batch.sizes))
    segments = batch.segments
    ctx.count("ot", n_steps if batch.kind == "discrete" else 0)
    start = np.array([prec.encode_log(float(v)) for v in batch.log_start], dtype=object)
    base = np.zeros(total)  # rho_t(j) minus its fresh blinds
    log_beta = np.zeros(total)
    with ctx.phase("forward recursion"):
        for t in range(n_steps):
            # Step 2: E(log b_j(x_t) + gamma_tj) (+ log pi_j at t = 1)
            gamma = log_blinds(ctx.rng, total, prec)
            emit = enc_obs[t].lincomb(weights, weight_scale, compute=ctx.compute)
            emit = emit.add_encoded(const + gamma + (start if t == 0 else 0))
            ctx.send(peer, f"fw.emit.{t}", emit.rerandomize())
            rho = base + log_beta + np.array([int(g) for g in gamma]) / 2.0**prec.f
            enc_v = ctx.recv(peer, f"fw.v.{t}")
            _check_vector(enc_v, total, pk)
            if t == n_steps - 1:
                break
            # Step 3: LOGSUM linear combination, unblinded, times beta_j
            sums = []
            for k, seg in enumerate(segments):
                w, rho_min, h = unblind_weights(batch.transmats[k], rho[seg], prec)
                base[seg] = rho_min + (g + h) * LN2
                sums.append(enc_v[seg].lincomb(w.T, compute=ctx.compute))
            betas = multiplicative_blinds(ctx.rng, total, prec)
            log_beta = np.array([math.log(b) for b in betas])
            blinded = CipherArray.concatenate(sums).mul(np.array(betas, dtype=object))
            ctx.send(peer, f"fw.s.{t}", blinded.rerandomize())
    with ctx.phase("termination"):
        # Step 4: S = sum_j e^-(rho_j - rho_min) V_j per model, blinded by beta
        finals, offsets = [], []
        betas = multiplicative_blinds(ctx.rng, len(segments), prec)
        for k, seg in enumerate(segments):
            w, rho_min, h = unblind_weights(np.ones((len(rho[seg]), 1)), rho[seg], prec)
            finals.append(enc_v[seg].lincomb(w.T, compute=ctx.compute))
            offsets.append(rho_min + (g + h) * LN2 + math.log(betas[k]))
        blinded = CipherArray.concatenate(finals).mul(np.array(betas, dtype=object))
        ctx.send(peer, "fw.s.final", blinded.rerandomize())
        enc_log = ctx.recv(peer, "fw.log")
        _check_vector(enc_log, len(segments), pk)
        log_p = enc_log.with_scale(prec.f).add_encoded(
            np.array([-prec.encode_log(o) for o in offsets], dtype=object))
        if reveal:
            ctx.send(peer, "fw.result", log_p.rerandomize())
    return log_p


def _decrypt_logs(enc: CipherArray, sk, prec: PrecisionParams) -> np.ndarray:
    return np.array([prec.decode_log(v) for v in enc.decrypt_ints(sk)])


def _segments(sizes) -> list[slice]:
    bounds = np.cumsum([0, *sizes])
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _check_spec(spec) -> None:
    if not isinstance(spec, dict) or spec.get("kind") not in ("discrete", "gaussian") or \
            not isinstance(spec.get("width"), int) or not isinstance(spec.get("states"), list) \
            or not spec["states"] or not all(isinstance(s, int) and s > 0
                                             for s in spec["states"]) \
            or not isinstance(spec.get("exp_scale"), int) or not 24 <= spec["exp_scale"] < 8192:
        raise ProtocolError(f"malformed forward-algorithm spec: {spec!r}")


def _check_vector(enc, size: int, pk: PublicKey) -> None:
    if not isinstance(enc, CipherArray) or enc.shape != (size,) or enc.public_key.n != pk.n:
        raise ProtocolError(f"expected {size} ciphertexts under Alice's key")
