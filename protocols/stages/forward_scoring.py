"""The secure forward algorithm stage for discrete and Gaussian HMMs (thesis 003, 4.2.1):
its public parameters and sizes, Alice's encoding and both halves, which the ``forward``
protocol (:mod:`protocols.forward`), keyword recognition's forward scoring and Viterbi's
``dgk`` mode run.

Roles and data:

* **Alice** holds the Paillier key pair and an observation sequence
  x_1..x_T (symbols in [0, M) or feature vectors in R^d with |x_i| <=
  ``feature_bound``).
* **Bob** holds one or more HMMs lambda = (A, B, pi) (all discrete or all
  Gaussian); several models run in lockstep, batched into the same messages.

Output: Bob obtains E(log P(x | lambda)) for each model; with ``reveal=True``
(the final step both agree on) he sends it back re-randomised and Alice
decrypts log P.  For keyword recognition Bob keeps the ciphertexts instead.

Public parameters (:class:`ForwardParams`, agreed before the run): the
precision (:class:`~protocols.stages.primitives.PrecisionParams`), the feature
scale and bound, and ``reveal``.  Public sizes: the model kind, M or d, the
number of states of each model, T and the key size.  Every scale and bound on
the wire follows from these (:meth:`ForwardSpec.messages`); the exponent
scale g and Bob's weight scale h are public rules, not measurements of
Bob's model.

Protocol (log domain; every offset an exact integer at scale f):

0. Alice sends her public key; Bob sends the public sizes.
1. Alice sends the length T (public) and her encrypted observations: one-hot
   rows e_{x_t} (discrete: the Paillier-selection 1-of-M OT of
   :mod:`protocols.stages.ot`) or the distinct products z_i z_j, z = [x_t; 1]
   (Gaussian: thesis "simplified secure forward"; the constant 1 is not
   encrypted).  When all of Bob's models have diagonal covariances (kind
   ``gaussian-diag``, a public fact) only x_i and x_i^2 are needed: 2d values
   per frame instead of d(d+3)/2 (78 instead of 819 for 39 MFCCs).  Frames are
   packed: value i of ``slots`` consecutive frames shares one ciphertext, one
   W-bit slot per frame (:meth:`ForwardSpec.emissions`, :mod:`protocols.stages.emissions`:
   13 frames per 2048-bit ciphertext), so Alice encrypts T / 13 times fewer values.
2. Bob's emission weights W_j are the same for every frame, so one multi-exponentiation
   per state and group scores 13 frames at once (the emission stage's shared-base
   path): Bob sends, in one message, E(log b_j(x_t) + gamma_tj) (plus log pi_j at
   t = 1) for every t and j, gamma a smooth blind on [0, R)
   (:mod:`protocols.stages.blinds`), frames in the slots; Alice decrypts once per state
   and group.
3. The recursion, one LOGSUM round (:mod:`protocols.stages.logsum`) per time step, all
   models batched.  The default ``recursion = "v2"`` (:mod:`protocols.stages.recursion`): the
   transition topology (which a_lj are nonzero) is public, Alice normalises every
   target by its own leading predecessor and sends one value per edge, already shifted
   into its target's slot; Bob's one multi-exponentiation per reply ciphertext returns
   five targets packed at 2048 bits, with the stage's slot noise.  Alice's log of a
   slot plus her next blinded emission is the next u.  No state is dropped, so no
   possible sequence is refused.  ``recursion = "v1"`` (the thesis's layout, opt-in):
   one value per state normalised per model, one reply per state, g as wide as the key
   allows and no slot noise (exact sums; the stage's ``shared`` layout).
   **Streams** (v2, ``streams``, default 1, public): the models are split into that many
   consecutive groups, each with its own LOGSUM plans and messages (tags ending in the
   stream's number), and the rounds of the streams interleave in a fixed order: Alice
   sends every stream's values for step t, then in turn decrypts stream s's reply and
   sends its values for step t + 1.  While Bob computes one stream's sums, Alice
   decrypts the other's, so two machines work at the same time instead of taking
   turns.  It pays where each party has its own cores: with one core per party over
   TCP, 2 streams cut the keyword benchmark's online time; in one process, where both
   parties already share both cores, smaller batches made it slower
   (``docs/benchmarks.md``, "Overlap").  What each party sees is the same per target;
   the order and sizes of the messages follow from the public sizes and ``streams``.
4. Final: the same round with one target per model (a_lj = 1); Alice returns
   E(her log-sum) and Bob subtracts his blinds: E(log P).

Who learns what (semi-honest Alice and Bob, not colluding; Alice may choose her
observations, ``docs/security.md``, "Secure stages"):

* Bob sees only ciphertexts under Alice's key and the public sizes.
* Alice learns the public sizes and, for every t and j: (a) log b_j(x_t) +
  gamma_tj, gamma a smooth blind of width R (``blind_nats``, default 20), and (b) per
  target and step the LOGSUM stage's output, log alpha_(t+1)(j) minus the emission
  plus a fresh blind, to 2^-48 relative.  In v2 nothing she decrypts has arithmetic
  structure (the stage's noise hides every residue modulo her values; its
  coefficients carry a fine-grained fresh blind), so no chosen input -- one live
  predecessor, the smallest blind, repeated frames -- and no gcd, continued fraction
  or lattice over frames or sessions gives a coefficient exactly
  (``tests/protocols/test_stages.py``).  What repetition does give is statistical:
  over k copies of a value her error stays above R / (6.41 sqrt(k)) nats
  (:mod:`smc_hmm.leakage`), which ``smc-hmm serve`` bounds per client.  In v1 (exact
  sums of ~1,814-bit values) one modular inversion or lattice reduction gives Bob's
  coefficients and with them his transition cross-ratios (``docs/security.md``).
  She sees which emission and predicted probabilities are exactly zero, the public
  topology (v2), and with ``reveal=True`` log P.
* Precision: every offset is an exact integer at scale f = ``log_scale``
  (96 bits), logs and exps are computed with 256-bit MPFR, every nonzero a_lj must
  be at least the public weight floor 2^-42 (Bob's model is checked locally before
  the run; a smaller nonzero a_lj is a PrecisionError).  v2: each target keeps its own
  precision (2^-48 relative per step): nothing is dropped or refused.  v1: Alice's
  exponentials keep 53 bits for every state within (g - 53) ln 2 nats of its model's
  leader (about 1,220 nats at 2048 bits); a possible state that falls further behind
  is carried by a rigorous bound on the dropped mass (:class:`_DroppedMass`), and if
  that mass could reach 2^-40 of the result she finishes the protocol (so Bob's view
  does not change) and defers a PrecisionError naming the limit (``ctx.defer``).  So
  an impossible sequence gives -inf, a possible one never does.  ``smc-hmm bench
  forward`` measures the absolute and relative error of log P.

Run: ``python examples/secure_forward.py`` (in-process) or see the example's
docstring for two processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from protocols.stages import emissions, logsum, recursion
from protocols.stages.blinds import log_blinds
from protocols.stages.emissions import DISCRETE, KINDS, EmissionLayout
from protocols.stages.logsum import LogsumPlan
from protocols.stages.ot import one_hot
from protocols.stages.primitives import PrecisionParams, alice_exp_values
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray, PublicKey, fixedpoint
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    PrecisionError,
    ProtocolError,
    warn_weaker_mode,
)
from smc_hmm.limits import MAX_SEQUENCE_LENGTH, MAX_STATES, MAX_WIDTH, check_at_most
from smc_hmm.messages import Ciphertexts, Key, Message, Public

#: the longest observation sequence Bob accepts (a public limit, smc_hmm.limits)
MAX_LENGTH = MAX_SEQUENCE_LENGTH
RECURSIONS = ("v2", "v1")
#: the most interleaved streams of the v2 recursion (two machines need two)
MAX_STREAMS = 8


@dataclass(frozen=True)
class ForwardParams:
    """Public parameters of the secure forward algorithm.

    Discrete models: log-values at ``precision.log_scale`` fractional bits.
    Gaussian models: Alice's products at ``feature_scale`` bits, every feature
    within +-``feature_bound`` (public), and Bob's quadratic-form weights at
    ``precision.log_scale - feature_scale`` bits.
    """

    precision: PrecisionParams = field(default_factory=PrecisionParams)
    feature_scale: int = 48
    feature_bound: float = 1000.0
    reveal: bool = True
    #: "v2" (default): per-target normalisation, packed replies, public topology
    #: (:mod:`protocols.stages.recursion`); "v1": per-model normalisation, one value per
    #: state, topology hidden, may refuse (kept for comparison)
    recursion: str = typed.one_of("v2", RECURSIONS)
    #: v2: the models' rounds in this many interleaved streams (step 3; 2 for parties on
    #: machines of their own); v1 runs one
    streams: int = typed.whole(1, 1, MAX_STREAMS)

    def __post_init__(self):
        typed.check_fields(self)
        if not 8 <= self.feature_scale < self.precision.log_scale:
            raise InvalidInputError("feature_scale must be in [8, log_scale)")
        if not (math.isfinite(self.feature_bound) and self.feature_bound > 0):
            raise InvalidInputError("feature_bound must be finite and > 0")
        if self.recursion == "v1":
            warn_weaker_mode(
                "recursion v1 lets Alice recover Bob's transition ratios by lattice reduction "
                "and may refuse a possible sequence"
            )

    @classmethod
    def from_config(cls, section: Mapping) -> ForwardParams:
        """From the ``[protocol]`` table of a parties.toml file (all keys optional):
        log_scale, log_bound_bits, blind_nats, precision_bits, weight_floor_bits,
        feature_scale, feature_bound, reveal, recursion."""
        precision_keys = {
            "log_scale",
            "log_bound_bits",
            "blind_nats",
            "precision_bits",
            "weight_floor_bits",
        }
        known = {"name", "feature_scale", "feature_bound", "reveal", "recursion", "streams"}
        known |= precision_keys
        unknown = set(section) - known
        if unknown:
            raise ConfigError(f"unknown forward parameters: {sorted(unknown)}")
        try:
            precision = PrecisionParams(**{k: section[k] for k in precision_keys if k in section})
            return cls(
                precision,
                int(section.get("feature_scale", 48)),
                float(section.get("feature_bound", 1000.0)),
                bool(section.get("reveal", True)),
                str(section.get("recursion", "v2")),
                section.get("streams", 1),
            )
        except (TypeError, ValueError) as e:
            raise ConfigError(f"bad forward parameters: {e}") from e


@dataclass(frozen=True)
class ForwardSpec:
    """The public sizes of one run and every scale and bound derived from them.

    Glossary of scales (fractional bits): f = ``log_scale`` (log-values),
    fs = ``feature_scale`` (Alice's products), ws = f - fs (Bob's Gaussian
    weights); the LOGSUM's g (Alice's exponentials) and H (Bob's coefficients) are
    its plans' (:attr:`steps`, :mod:`protocols.stages.logsum`).
    """

    kind: str
    width: int
    states: tuple[int, ...]
    key_bits: int
    params: ForwardParams
    #: v2: per model, its public edges (l, j) (:func:`protocols.stages.recursion.topology_of`)
    topology: tuple | None = None

    @classmethod
    def for_models(cls, models, key_bits: int, params: ForwardParams) -> ForwardSpec:
        """Bob's spec of his models; with the v2 recursion their topology (which a_lj
        are nonzero) becomes public."""
        batch = _ModelBatch.of(models)
        topology = None
        if params.recursion == "v2":
            edges = [recursion.topology_of(m.transmat) for m in batch.models]
            topology = recursion.check_topology(edges, batch.states)
        return cls(batch.kind, batch.width, batch.states, key_bits, params, topology)

    @classmethod
    def from_wire(cls, spec, key_bits: int, params: ForwardParams) -> ForwardSpec:
        if (
            not isinstance(spec, dict)
            or set(spec) != {"kind", "width", "states", "topology"}
            or spec["kind"] not in KINDS
            or type(spec["width"]) is not int
            or spec["width"] < 1
            or not isinstance(spec["states"], list)
            or not spec["states"]
            or not all(type(s) is int and s > 0 for s in spec["states"])
        ):
            raise ProtocolError(f"malformed forward-algorithm spec: {str(spec)[:200]}")
        check_at_most("max_width", spec["width"], MAX_WIDTH, "the spec's width")
        check_at_most("max_states", sum(spec["states"]), MAX_STATES, "the spec's states")
        states = tuple(spec["states"])
        topology = None
        if params.recursion == "v2":
            topology = recursion.check_topology(spec["topology"], states)
        elif spec["topology"] is not None:
            raise ProtocolError("the v1 recursion takes no public topology")
        return cls(spec["kind"], spec["width"], states, key_bits, params, topology)

    def to_wire(self) -> dict:
        topology = None
        if self.topology is not None:
            topology = [[[l, j] for l, j in edges] for edges in self.topology]
        return {
            "kind": self.kind,
            "width": self.width,
            "states": list(self.states),
            "topology": topology,
        }

    @cached_property
    def steps(self):
        """The LOGSUM plans of a transition step and of the termination (public): v2's
        ``edges`` plans over the public topology, or v1's ``shared`` plans."""
        if self.topology is None:
            return recursion.shared_plans(self)
        return recursion.transition_plan(self, self.topology), recursion.final_plan(self)

    @cached_property
    def streams(self) -> tuple[Stream, ...]:
        """v2's interleaved streams (step 3): ``params.streams`` consecutive groups of
        models (at most one a model), each a spec of its own with its own LOGSUM plans;
        v1 runs one stream, the whole spec."""
        k = len(self.states)
        if self.topology is None:
            return (Stream(0, slice(0, k), slice(0, self.total), self),)
        count = min(self.params.streams, k)
        cuts = [i * k // count for i in range(count + 1)]
        starts = np.cumsum([0, *self.states]).tolist()
        out = []
        for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            sub = ForwardSpec(
                self.kind,
                self.width,
                self.states[a:b],
                self.key_bits,
                self.params,
                self.topology[a:b],
            )
            out.append(Stream(i, slice(a, b), slice(starts[a], starts[b]), sub))
        return tuple(out)

    @property
    def prec(self) -> PrecisionParams:
        return self.params.precision

    @property
    def total(self) -> int:
        return sum(self.states)

    @property
    def segments(self) -> list[slice]:
        bounds = np.cumsum([0, *self.states])
        return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]

    @property
    def n_inputs(self) -> int:
        """Ciphertexts per frame: M one-hot entries, the d(d+3)/2 distinct products, or
        2d values (x_i, x_i^2) for diagonal covariances."""
        return emissions.input_count(self.kind, self.width)

    @property
    def emit_bound(self) -> int:
        """Public bound on |a blinded emission| at scale f (log-0 sentinels included)."""
        return (self.width + 2) << (self.prec.log_bound_bits + 3 + self.prec.f)

    def emissions(self, length: int) -> EmissionLayout:
        """Frame packing (:mod:`protocols.stages.emissions`): one slot per frame, wide
        enough for a blinded emission, so Bob's one multi-exponentiation per state and
        group scores ``slots`` frames at once (thesis 4.2.1, Table 4.1's workload); the
        slot width and count follow from public sizes."""
        bits = self.emit_bound.bit_length()
        return EmissionLayout.build(bits, self.key_bits, length, self.n_inputs, self.total)

    @property
    def obs_slot_bound(self) -> int:
        """Public bound on one encoded observation value (a one-hot bit or a product)."""
        if self.kind == "discrete":
            return 1
        return emissions.input_bound(self.params.feature_bound, self.params.feature_scale)

    def _packed_bound(self, slot_bound: int) -> int:
        return self.emissions(1).packed_bound(slot_bound)

    def pack_observations(self, pk: PublicKey, encoded: np.ndarray, scale: int) -> CipherArray:
        """Alice: (groups, n_inputs) ciphertexts, value i of every frame of a group in
        the slots of one ciphertext."""
        layout = self.emissions(encoded.shape[0])
        bound = self._packed_bound(self.obs_slot_bound)
        return emissions.alice_pack(pk, encoded, layout, scale, bound)

    def randomizers_needed(self, length: int, reveal: bool = True) -> dict[str, int]:
        """Fresh randomizers each role draws in a run of ``length`` frames (``reveal``:
        with the reveal step, one re-randomised log P per model): what an offline phase
        precomputes once the key is known (public sizes only)."""
        groups, models = len(self.emissions(length).groups), len(self.states)
        alice = groups * self.n_inputs + models
        bob = groups * self.total + (models if reveal else 0)
        for stream in self.streams:
            step, final = stream.step, stream.final
            # v1 sends its exponentials at the last step too; its termination reuses them
            last = final.edges if self.topology is not None else step.edges
            alice += (length - 1) * step.edges + last
            bob += (length - 1) * step.ciphertexts + final.ciphertexts
        return {"alice": alice, "bob": bob}

    def final_log_bound(self, length: int) -> int:
        return 4 * (length + 1) << (self.prec.log_bound_bits + self.prec.f)

    def messages(self, length: int | None = None) -> dict[str, Message]:
        """Every message of the run, declared from public parameters alone."""
        p, n, m = self.prec, (self.total,), (len(self.states),)
        obs_scale = 0 if self.kind == "discrete" else self.params.feature_scale
        obs = Ciphertexts(obs_scale, self._packed_bound(self.obs_slot_bound), (None, self.n_inputs))
        out = {
            "key": Message("fw.key", Key()),
            "spec": Message("fw.spec", Public((dict,))),
            "length": Message("fw.length", Public((int,))),
            "obs": Message("fw.obs", obs),
        }
        if self.topology is not None:  # v2: per stream, edges out, packed targets back
            for stream in self.streams:
                out |= stream.messages()
        else:  # v1: one exponential per state out, one sum per state (per model at the end)
            step, final = self.steps
            out["exp"] = Message("fw.v", Ciphertexts(0, step.value_bound, n))
            out["sum"] = Message("fw.s", Ciphertexts(0, step.packed_bound, n, fresh=True))
            out["final"] = Message("fw.final", Ciphertexts(0, final.packed_bound, m, fresh=True))
        if length is not None:
            out["emit"] = self.emissions(length).emit_message("fw.emit", p.f, 2 * self.emit_bound)
            log_bound = self.final_log_bound(length)
            out["log"] = Message("fw.log", Ciphertexts(p.f, log_bound, m))
            out["result"] = Message("fw.result", Ciphertexts(p.f, log_bound, m, fresh=True))
        return out


@dataclass(frozen=True)
class Stream:
    """One of v2's interleaved streams: its number, its models and their targets (slices
    of the whole run's), and its own spec (its LOGSUM plans)."""

    index: int
    models: slice
    targets: slice
    spec: ForwardSpec

    @property
    def step(self) -> LogsumPlan:
        """Its LOGSUM plan of a transition step."""
        return self.spec.steps[0]

    @property
    def final(self) -> LogsumPlan:
        """Its LOGSUM plan of the termination."""
        return self.spec.steps[1]

    def messages(self) -> dict[str, Message]:
        """Its step and termination rounds: edges out, packed targets back (tags
        ``fw.step.edges.i`` and so on; keys ``step_edges.i``)."""
        out = {}
        for name, plan in (("step", self.step), ("final", self.final)):
            out[f"{name}_edges.{self.index}"] = Message(
                f"fw.{name}.edges.{self.index}", Ciphertexts(0, plan.value_bound, (plan.edges,))
            )
            out[f"{name}_packed.{self.index}"] = Message(
                f"fw.{name}.packed.{self.index}",
                Ciphertexts(0, plan.packed_bound, (plan.ciphertexts,), fresh=True),
            )
        return out


# -- Bob's view of the models ---------------------------------------------------------------


@dataclass
class _ModelBatch:
    """Bob's stacked models: per-model transition matrices and stacked emission terms."""

    models: list
    kind: str
    width: int

    @classmethod
    def of(cls, models: Sequence) -> _ModelBatch:
        models = list(models)
        if not models:
            raise InvalidInputError("Bob needs at least one HMM")
        return cls(models, *emissions.emission_kind(models))

    @property
    def states(self) -> tuple[int, ...]:
        return tuple(m.n_states for m in self.models)

    def start_logs(self, prec: PrecisionParams) -> np.ndarray:
        return np.array(
            [prec.encode_log(float(v)) for m in self.models for v in m.log_startprob], dtype=object
        )

    def emission_program(self, spec: ForwardSpec):
        """Integer weights, their scale and constants: E(log b(x_t)) = weights . E(obs_t) + const.

        Checks locally, before anything is sent, that the public log bound holds.
        """
        prec, half = spec.prec, spec.prec.log_bound / 2
        if self.kind == "discrete":
            log_b = np.concatenate([m.log_emissionprob for m in self.models])
            finite = log_b[np.isfinite(log_b)]
            if finite.size and float(np.abs(finite).max()) > half:
                raise PrecisionError(
                    "an emission log-probability exceeds half the public "
                    f"log bound 2^{prec.log_bound_bits} nats"
                )
            weights = np.array(
                [[prec.encode_log(float(v)) for v in row] for row in log_b], dtype=object
            )
            return weights, prec.f, np.zeros(len(log_b), dtype=object)
        w = np.concatenate(
            [emissions.weight_rows(m, self.kind) for m in self.models]
        )  # constant last
        fs = spec.params.feature_scale
        weights, const = emissions.integer_program(
            w,
            f=prec.f,
            fs=fs,
            feature_bound=spec.params.feature_bound,
            limit_nats=half,
            over=f"half the public log bound 2^{prec.log_bound_bits}: raise log_bound_bits "
            "or lower feature_bound",
        )
        return weights, prec.f - fs, const


# -- Alice's encoding of her observations ---------------------------------------------------


def encode_observations(pk: PublicKey, observations, spec: ForwardSpec) -> CipherArray:
    """Alice's step 1: one-hot rows, the distinct products z_i z_j, or (diagonal models)
    only x_i and x_i^2, encrypted with the frames of a group packed into slots."""
    obs, _ = emissions.checked_observations(
        observations, spec.kind, spec.width, spec.params.feature_bound
    )
    if spec.kind == DISCRETE:
        return spec.pack_observations(pk, one_hot(obs, spec.width), 0)
    encoded, _ = fixedpoint.encode(
        emissions.frame_products(obs, spec.kind), spec.params.feature_scale
    )
    return spec.pack_observations(pk, encoded, spec.params.feature_scale)


# -- roles ------------------------------------------------------------------------------------


def alice(
    ctx,
    observations,
    params: ForwardParams | None = None,
    *,
    reveal: bool | None = None,
    peer: str = "bob",
):
    """Alice: returns the list of log P(x | lambda_k) (``reveal``) or None.

    The v1 recursion may find, after the protocol has finished, that a possible
    state fell out of the exponent's range (module docstring): it defers a
    PrecisionError (``ctx.defer``), which the runner raises after the last message of
    the whole run -- a protocol built on this one finishes first, so Bob's view does
    not depend on it.  The v2 recursion never refuses.
    """
    params = params or ForwardParams()
    reveal = params.reveal if reveal is None else reveal
    pk, sk = ctx.keypair
    # Step 0: public key out, public sizes in
    ctx.send(peer, Message("fw.key", Key()), pk)
    spec = ForwardSpec.from_wire(
        ctx.recv(peer, Message("fw.spec", Public((dict,)))), pk.bits, params
    )
    prec = spec.prec
    with ctx.phase("encrypt observations"):
        # Step 1: the length T (public) and the encrypted observations, frames packed
        enc_obs = encode_observations(pk, observations, spec)
        n_steps = len(observations)
        msg = spec.messages(n_steps)
        ctx.send(peer, msg["length"], n_steps)
        ctx.send(peer, msg["obs"], enc_obs)
    with ctx.phase("emissions"):
        # Step 2: every y_t(j) = log b_j(x_t) + gamma_tj (+ log pi_j at t = 1), packed
        emit = emissions.alice_receive(ctx, msg["emit"], spec.emissions(n_steps), peer)
    # Steps 3-4: the recursion and the final sums; out[k] = log P_k + Bob's offsets
    run = _alice_recursion_v2 if spec.topology is not None else _alice_recursion_v1
    out, check = run(ctx, spec, msg, emit, n_steps, peer)
    with ctx.phase("termination"):
        zero = -(spec.final_log_bound(n_steps) // 2)
        out = [zero if v is None else v for v in out]
        ctx.send(
            peer,
            msg["log"],
            CipherArray.encrypt_encoded(pk, out, prec.f, spec.final_log_bound(n_steps)),
        )
        result = None
        if reveal:
            # Step 5 (agreed final step): Alice decrypts E(log P)
            ints = ctx.recv(peer, msg["result"]).decrypt_ints(sk)
            result = [-math.inf if v < zero // 2 else int(v) / (1 << prec.f) for v in ints]
    try:  # after the protocol: Bob's view is the same either way
        check()
    except PrecisionError as e:
        ctx.defer(e)
    return result


def _alice_recursion_v2(ctx, spec: ForwardSpec, msg, emit, n_steps: int, peer: str):
    """Per-target normalisation, packed replies (:mod:`protocols.stages.recursion`), the streams'
    rounds interleaved (step 3): stream s's values for step t + 1 leave as soon as its
    reply for step t is decrypted, while Bob computes the next stream's sums."""
    prec = spec.prec
    streams = spec.streams
    # u_t(l) = log alpha_t(l) + rho_t(l), exact at scale f, per stream
    u = [list(emit[0][st.targets]) for st in streams]
    shifts = [None] * len(streams)

    def send_values(st, kind: str):
        plan, out = (st.final if kind == "final" else st.step), msg[f"{kind}_edges.{st.index}"]
        shifts[st.index] = logsum.alice_send(ctx, u[st.index], plan, prec, out, peer)

    last = "final" if n_steps == 1 else "step"
    with ctx.phase("forward recursion"):
        for st in streams:  # Step 3a for t = 1: every stream's values
            send_values(st, last)
        for t in range(n_steps - 1):
            last = "final" if t == n_steps - 2 else "step"
            for st in streams:
                # Step 3b: one decryption per ``slots`` targets; the next blinded emission
                reply = msg[f"step_packed.{st.index}"]
                logs = logsum.alice_receive(ctx, st.step, shifts[st.index], prec, reply, peer)
                u[st.index] = [
                    prec.log_zero if prec.is_log_zero(s) or prec.is_log_zero(int(e)) else s + int(e)
                    for s, e in zip(logs, emit[t + 1][st.targets])
                ]
                send_values(st, last)  # Step 3a of the next step (Step 4's after the last)
            ctx.progress("forward recursion", t + 1, n_steps - 1)
    with ctx.phase("termination"):
        # Step 4: every model's sum over its states, packed the same way
        logs = []
        for st in streams:
            reply = msg[f"final_packed.{st.index}"]
            logs += logsum.alice_receive(ctx, st.final, shifts[st.index], prec, reply, peer)
    return [None if prec.is_log_zero(v) else v for v in logs], lambda: None


def _alice_recursion_v1(ctx, spec: ForwardSpec, msg, emit, n_steps: int, peer: str):
    """Per-model normalisation, one value per state; may refuse (module docstring)."""
    pk, sk = ctx.keypair
    prec = spec.prec
    step, final = spec.steps
    g = step.g
    model_of = np.repeat(np.arange(len(spec.states)), spec.states)
    bounds = [_DroppedMass(prec) for _ in spec.states]
    with ctx.phase("forward recursion"):
        y = emit[0]
        for t in range(n_steps):
            # Step 3a: secure exponent with a per-model shift c (None: all log 0)
            values, cs = [], []
            for k, seg in enumerate(spec.segments):
                v, c, dropped = alice_exp_values(y[seg], prec, g)
                values.extend(v)
                possible = any(not prec.is_log_zero(int(x)) for x in y[seg])
                cs.append(c if possible else None)
                bounds[k].drop(dropped, c, t)
            ctx.send(peer, msg["exp"], logsum.alice_encrypt(pk, values, step))
            if t == n_steps - 1:
                break
            # Step 3b: the LOGSUM's logarithm, plus the next blinded emission
            sums = ctx.recv(peer, msg["sum"]).decrypt_ints(sk)
            shifts = [cs[model_of[j]] for j in range(spec.total)]
            logs = logsum.checked_logs(ctx, sums, step, shifts, prec)
            y = [
                prec.log_zero if prec.is_log_zero(s) or prec.is_log_zero(int(e)) else s + int(e)
                for s, e in zip(logs, emit[t + 1])
            ]
            for k, seg in enumerate(spec.segments):
                bounds[k].step(emit[t + 1][seg])
    with ctx.phase("termination"):
        # Step 4: log of every model's final sum
        finals = ctx.recv(peer, msg["final"]).decrypt_ints(sk)
        logs = logsum.checked_logs(ctx, finals, final, cs, prec)
        out = [None if prec.is_log_zero(v) else v for v in logs]

    def check():
        for k, bound in enumerate(bounds):
            bound.check(k, out[k], g, pk.bits)

    return out, check


class _DroppedMass:
    """Alice's rigorous bound on the mass her exponent could not carry (module docstring).

    Per model, with alpha_t(i) = exp(y_t(i) - rho_t(i)) (``rho`` Bob's accumulated
    blinds): a state dropped at step t held at most D = exp(y_t(i) - rho_min,t) and adds
    at most D prod_(s>t) max_j b_j(x_s) to P (rows of A sum to one).  Bob's smallest
    blind moves by m_s = min_j (z_j - Z + gamma_s(j)) per step (the LOGSUM's output
    blinds lie at or below their reference, :mod:`protocols.stages.logsum`), so for the
    likeliest state j*  log b_j*(x_s) + m_s <= emit_s(j*) + (z_j* - Z) <= max_j emit_s(j);
    and her final value is log P~ + rho_min,T-1 + (z_final - Z) <= log P~ + rho_min,T-1.
    So every unknown blind cancels: ``log_mass`` carries ln sum_t D_t e^(rho_min,t)
    prod_s max_j emit_s(j), and the run fails if log_mass - (her final value) exceeds
    ln 2^-40.
    """

    TOLERANCE = -40 * math.log(2)

    def __init__(self, prec: PrecisionParams):
        self.prec = prec
        self.log_mass = -math.inf
        self.first_drop: int | None = None

    def drop(self, dropped: float, shift: int, t: int) -> None:
        """States dropped at step t: ``dropped`` nats relative to Alice's shift ``shift``
        = c_t of that step (scale f)."""
        if dropped > -math.inf:
            mass = dropped + shift / (1 << self.prec.f)
            self.log_mass = float(np.logaddexp(self.log_mass, mass))
            self.first_drop = t if self.first_drop is None else self.first_drop

    def step(self, emit) -> None:
        """Carry the dropped mass through one more step's blinded emissions."""
        if self.log_mass == -math.inf:
            return
        prec = self.prec
        emits = [int(e) for e in emit if not prec.is_log_zero(int(e))]
        if not emits:  # every emission is zero: the dropped mass is gone too
            self.log_mass = -math.inf
        else:
            self.log_mass += max(emits) / (1 << prec.f)

    def check(self, model: int, final: int | None, g: int, key_bits: int) -> None:
        """``final``: Alice's final value of the model at scale f (None: it is zero)."""
        if self.log_mass == -math.inf:
            return
        ratio = math.inf if final is None else self.log_mass - final / (1 << self.prec.f)
        if ratio > self.TOLERANCE:
            raise PrecisionError(
                f"model {model}: from step {self.first_drop + 1} on, a possible state fell more "
                f"than {g - 53} bits (~{(g - 53) * math.log(2):.0f} nats) behind the leading "
                f"state, the exponent range of a {key_bits}-bit key, and its mass could reach "
                f"e^{ratio:.0f} of the result (above 2^-40): it could not be carried "
                "exactly; use a larger key"
            )


@dataclass(frozen=True)
class ForwardScores:
    """What Bob holds after the secure forward algorithm: E(log P(x | lambda_k)) per model
    (scale ``log_scale``) and the run's public facts, for a protocol built on this one."""

    log_p: CipherArray
    spec: ForwardSpec
    length: int


def bob(
    ctx,
    models,
    params: ForwardParams | None = None,
    *,
    reveal: bool | None = None,
    peer: str = "alice",
) -> CipherArray:
    """Bob: returns E(log P(x | lambda_k)) for each model (scale ``log_scale``)."""
    return bob_scores(ctx, models, params, reveal=reveal, peer=peer).log_p


def bob_scores(
    ctx,
    models,
    params: ForwardParams | None = None,
    *,
    reveal: bool | None = None,
    peer: str = "alice",
) -> ForwardScores:
    """Bob's role, returning the scores with the run's public spec and length."""
    params = params or ForwardParams()
    reveal = params.reveal if reveal is None else reveal
    batch = _ModelBatch.of(models)
    # Step 0
    pk = ctx.recv(peer, Message("fw.key", Key()))
    transmats = [np.asarray(m.transmat) for m in batch.models]
    spec = ForwardSpec.for_models(models, pk.bits, params)
    prec = spec.prec
    weights, weight_scale, const = batch.emission_program(spec)
    recursion.check_models(transmats, spec)  # local check before anything is sent
    ctx.send(peer, Message("fw.spec", Public((dict,))), spec.to_wire())
    n_steps = ctx.recv(peer, spec.messages()["length"])
    if n_steps < 1:
        raise ProtocolError(f"sequence length {n_steps} is not positive")
    check_at_most("max_sequence_length", n_steps, MAX_LENGTH, f"{peer}'s sequence length")
    ctx.charge_frames(n_steps)  # a serving Bob's per-client budget (public T)
    msg = spec.messages(n_steps)
    enc_obs = ctx.recv(peer, msg["obs"])
    groups = spec.emissions(n_steps).groups
    if enc_obs.shape[0] != len(groups):
        raise ProtocolError(f"{enc_obs.shape[0]} observation groups for {n_steps} frames")
    with ctx.phase("emissions"):
        # Step 2: E(log b_j(x_t) + gamma_tj) (+ log pi_j at t = 1), one packed
        # multi-exponentiation per state and group of frames (protocols.stages.emissions)
        gammas = [log_blinds(ctx.rng, spec.total, prec.blind_nats, prec.f) for _ in range(n_steps)]
        first = batch.start_logs(prec)
        if batch.kind == "discrete":  # the 1-of-M OT's selection, kept by Bob
            enc_obs.public_key.meter.count("ot", n_steps)
        offsets = [const + gammas[t] + (first if t == 0 else 0) for t in range(n_steps)]
        layout = spec.emissions(n_steps)
        emissions.bob_send(
            ctx, msg["emit"], enc_obs, weights, weight_scale, offsets, layout, spec.emit_bound,
            peer,
        )  # fmt: skip
    # Steps 3-4: the recursion and the final sums; offsets[k] = what Alice's log P carries
    run = _bob_recursion_v2 if spec.topology is not None else _bob_recursion_v1
    offsets = run(ctx, spec, msg, gammas, transmats, n_steps, peer)
    with ctx.phase("termination"):
        enc_log = ctx.recv(peer, msg["log"])
        log_p = enc_log.add_encoded(np.array([-o for o in offsets], dtype=object))
        if reveal:
            ctx.send(peer, msg["result"], log_p.with_bound(spec.final_log_bound(n_steps)))
    return ForwardScores(log_p, spec, n_steps)


def _bob_recursion_v2(ctx, spec: ForwardSpec, msg, gammas, transmats, n_steps: int, peer: str):
    """Per-target normalisation, packed replies (:mod:`protocols.stages.recursion`), one round per
    stream and step in the streams' order (step 3)."""
    streams = spec.streams
    # Bob's accumulated blinds rho_t(j), integers at scale f, per stream
    rho = [list(gammas[0][st.targets]) for st in streams]
    with ctx.phase("forward recursion"):
        for t in range(n_steps - 1):
            for st in streams:
                i, step = st.index, st.step
                # Step 3: one multi-exponentiation per reply (:mod:`protocols.stages.logsum`)
                coefs, blinds = recursion.bob_step(
                    ctx.rng, step, transmats[st.models], rho[i], st.spec
                )
                logsum.bob_round(
                    ctx, step, coefs, msg[f"step_edges.{i}"], msg[f"step_packed.{i}"], peer
                )
                rho[i] = [b + int(gm) for b, gm in zip(blinds, gammas[t + 1][st.targets])]
    with ctx.phase("termination"):
        # Step 4: every model's sum over its states
        offsets = []
        for st in streams:
            i, final = st.index, st.final
            coefs, blinds = recursion.bob_final(ctx.rng, final, rho[i], st.spec)
            logsum.bob_round(
                ctx, final, coefs, msg[f"final_edges.{i}"], msg[f"final_packed.{i}"], peer
            )
            offsets += blinds
    return offsets


def _bob_recursion_v1(ctx, spec: ForwardSpec, msg, gammas, transmats, n_steps: int, peer: str):
    """Per-model normalisation, one value per state (module docstring)."""
    step, final = spec.steps
    rho = list(gammas[0])  # Bob's accumulated blinds rho_t(j), integers at scale f
    with ctx.phase("forward recursion"):
        for t in range(n_steps):
            enc_v = ctx.recv(peer, msg["exp"])
            if t == n_steps - 1:
                break
            # Step 3: the LOGSUM over every state of the model, one reply per state
            coefs, blinds = recursion.bob_step(ctx.rng, step, transmats, rho, spec)
            ctx.send(peer, msg["sum"], logsum.bob_sums(enc_v, step, coefs, ctx.rng))
            rho = [b + int(gm) for b, gm in zip(blinds, gammas[t + 1])]
    with ctx.phase("termination"):
        # Step 4: every model's sum over its states, from the last exponentials
        coefs, blinds = recursion.bob_final(ctx.rng, final, rho, spec)
        ctx.send(peer, msg["final"], logsum.bob_sums(enc_v, final, coefs, ctx.rng))
    return blinds
