"""Secure speaker identification and verification with Gaussian mixture models (thesis 003, 5.2.2).

Roles and data:

* **Alice** (client) holds the Paillier key pair and an utterance: T feature frames
  x_t in R^d, every |x_ti| <= ``feature_bound`` (public).  In ``verify`` and
  ``anonymous`` mode she also claims an enrolled speaker's identity.
* **Bob** (server) holds one diagonal GMM per enrolled speaker and a universal
  background model (UBM, the label ``ubm`` names it), each stored as a GaussianHMM whose
  transition rows equal its mixture weights (:mod:`smc_hmm.data.speakers`).

A GMM's utterance log-likelihood log P = sum_t log sum_m w_m N(x_t; mu_m, Sigma_m) is the
forward algorithm of that HMM, so :func:`smc_hmm.hmm.log_likelihood` is the oracle.
Frames are independent, so there is no recursion: the default scores every frame in one
pass of circuits, and the thesis's scoring runs every per-frame LOGSUM in ONE batched
round trip (``frames_per_round = 0``; ``frames_per_round = 1`` is the
one-round-per-frame baseline of the benchmark).

Modes (public parameter ``mode``):

* ``identify`` -- Alice learns the best enrolled speaker, or "none" (None) unless that
  speaker's log-likelihood beats the UBM's by more than ``margin`` nats per frame
  (public; may be negative).  Bob learns nothing.  A claim is refused (it means nothing).
* ``verify`` -- Alice names a claimed speaker (revealed to Bob, as a login name is: the
  claim is *public*; hiding who is verified is what ``anonymous`` is for).  Bob learns
  only the bit [log P(x | claim) - log P(x | UBM) > ``threshold`` T]; Alice learns
  nothing (the application may tell her).  Only the claimed model and the UBM run.
* ``anonymous`` -- the same bit for Alice's claimed speaker, the claim private: every
  model runs and every speaker is compared with the UBM, the claim selects one inside
  the decision, and Bob learns only [log P(x | claim) - log P(x | UBM) > T], never which
  speaker was claimed (thesis 003, 5.2.2: "the user is correctly verified, but the
  system itself remains unaware of who exactly was verified"; "keep all model types
  active at all times").  The decision rule is ``verify``'s, bit for bit.

Scoring (public parameter ``scoring``): ``max``, the default, scores a model by the sum
over the frames of its best component's log-density (the Viterbi approximation of a
GMM), everything nonlinear in circuits Bob garbles on inputs bound to what Alice
decrypted (DESIGN.md section 11); ``logsum`` is the thesis's exact log-likelihood
through blinded LOGSUM rounds that Alice decrypts (semi-honest).  Left unset it is
``logsum`` where ``reveal_scores``, ``comparison = "dgk"`` or ``frames_per_round`` ask
for the thesis's protocol, else ``max``.

Protocol, ``scoring = "max"`` (``docs/garbled.md``, "Bound inputs" and "Mixture scores"):

0. Alice -> Bob ``spk.key``; Bob -> Alice ``spk.spec``: the public sizes (d, components
   of each model, labels).  ``verify``: Alice -> Bob ``spk.claim`` (in clear).
1. Alice -> Bob ``spk.length`` T; the garbled stage's setup (base OTs and the session's
   OT pool, :mod:`protocols.stages.garbled`).
2. The bound stage (:mod:`protocols.stages.bound`): Alice -> Bob ``bd.obs``, her packed
   x and x^2 at ``bound_feature_scale`` bits; Bob -> Alice ``bd.values``, per frame and
   component log w_m + log N(x_t; mu_m, Sigma_m) at the program's scale plus
   2^(l-1) and a fresh uniform mask of l + sigma bits, and the frame's two MAC limbs;
   Alice decrypts them; Bob -> Alice ``bd.key`` after her (padded) OT choices.
3. The mixture stage (:mod:`protocols.stages.mixture`), circuits Bob garbles: each value
   reconstructed from the two shares and clamped to [-2^K, 2^K) nats
   (K = ``emission_clamp_bits``); per frame and model the best component, summed over
   the frames; margin T (identify) or threshold T (verify, anonymous) added to the
   UBM's sum; the decision: ``identify`` -- the winner's index to Alice; ``verify`` --
   [UBM + T < claim] to Bob; ``anonymous`` -- the same for the speaker Alice's index bits
   select in the circuit (an index past the speakers is a refused claim).  Every output
   is ANDed with *ok*: the MAC check of her inputs and the check that each of her x^2
   inputs is her x squared.

Protocol, ``scoring = "logsum"`` (thesis 003, 5.2.2; f = ``log_scale``, fs =
``feature_scale``, R = ``blind_nats``; the LOGSUM's g, H and slot layout are its plan's,
:mod:`protocols.stages.logsum`):

0. As above.
1. Alice -> Bob ``spk.length`` T and ``spk.obs``: x_ti and x_ti^2 at fs bits, the frames
   of a group packed into the slots of one ciphertext (:mod:`protocols.stages.emissions`:
   20 frames per 2048-bit ciphertext), 2d ciphertexts per group.
2. Bob -> Alice ``spk.emit``: for every frame t, model r and component m,
   E(y_trm), y_trm = log w_rm + log N(x_t; mu_rm, Sigma_rm) + zeta_trm, one packed
   multi-exponentiation per component and group (the weights of log N = a . x + b . x^2
   + c are Bob's exponents); zeta_trm is a fresh smooth blind on [0, R)
   (:mod:`protocols.stages.blinds`: a sum of three uniform integers at scale f).
3. LOGSUM, all frames in one round (:mod:`protocols.stages.logsum`): a target per
   (frame, model), its elements the model's components.  Alice -> Bob ``spk.exp``: per
   element V = round(2^g exp(y_trm - c_tr)), c_tr = max_m y_trm, in its target's slot.
   Bob -> Alice ``spk.sum``: per reply ciphertext sum C_trm V_trm + N with
   C_trm = round(2^H exp(min_m zeta_trm - zeta_trm + z_tr - R)), z_tr a fresh fine-grained
   smooth blind, N the stage's slot noise.
4. Alice: a_tr = ln(slot) - (g + H) ln 2 + c_tr = L_tr + b_tr, L_tr = log p(x_t | r) and
   b_tr = min_m zeta_trm + z_tr - R Bob's blind, summed over the frames: A_r = log P_r +
   sum_t b_tr.  Alice -> Bob ``spk.shares``: E(round(A_r 2^s)) (s = ``score_scale``); Bob
   subtracts round(2^s sum_t b_tr): E(v_r), v_r = 2^s log P_r within one unit.
   (``reveal_scores``, for measurements only: Alice -> Bob ``spk.logs`` E(A_r) at scale f,
   Bob -> Alice ``spk.scores`` E(log P_r); Alice then also learns every log P_r.)
5. The decision stage (:mod:`protocols.stages.decision`), by default one circuit Bob garbles
   on shares of the scores (``comparison = "garbled"``; the ``dgk`` mode runs the
   thesis's DGK comparisons), with the rules of step 3 above.  (dgk, anonymous: Alice ->
   Bob ``spk.select`` E(c_k), c one-hot; one batched comparison of the K pairs whose bits
   stay encrypted; one batched secure multiplication E(b_k c_k), summed by Bob to
   E(b_claim), revealed to him.)

Who learns what, ``scoring = "max"`` (either party may deviate from the protocol):

* Alice decrypts only uniform values: each masked log-density is y = v + 2^(l-1) + r,
  r uniform on [0, 2^(l+sigma)), within statistical distance 2^-sigma (sigma = 40) of
  uniform whatever v, and each MAC limb carries its own fresh mask of sigma bits over
  its range.  Whatever she sends (x^2 that is not x squared, values out of range,
  shifted shares, forged labels), the circuit either computes the declared function of
  some admissible input or outputs ok = 0: a forged input passes the MAC with
  probability at most 3/p (p = 2^61 - 1, :data:`~protocols.stages.bound.SOUNDNESS`).
  She learns her label (identify) or nothing (verify, anonymous), so over n sessions at
  most n log2(S + 1) bits of Bob's models (S speakers, "none" the extra answer), which
  ``smc-hmm serve`` bounds per client certificate.  She cannot force verify's or
  anonymous's bit: its output labels are Bob's to decode and she cannot forge them.
* Bob sees ciphertexts under Alice's key, OT messages and her padded choices, and the
  public sizes; the claim in ``verify``; the bit in ``verify`` and ``anonymous`` (0 also
  when ok is 0: he cannot tell a refused input from a rejected claim).  Her claim in
  ``anonymous`` reaches him only as padded OT choices.  A Bob who deviates (wrong
  tables, labels or MAC corrections) learns at most whether she aborts: every check of
  hers whose outcome depends on her data is deferred to after her last message.
* Ties: the circuit compares the scores at the program's scale; an exact tie in
  ``identify`` goes to the lowest index, a score exactly at the threshold is rejected.

Who learns what, ``scoring = "logsum"`` (semi-honest Alice and Bob, not colluding; Alice
may choose her frames):

* Bob sees only ciphertexts under Alice's keys (Paillier, DGK) and the public sizes
  (d, T, the number of models and components, the mode, the labels); in ``verify`` the
  claimed identity; in ``verify`` and ``anonymous`` the decision bit.  A client who
  deviates can force the bit (a fake x^2 ciphertext or a shifted score share is
  accepted: the controls of ``tests/protocols/test_bound_stage.py``), and in the dgk
  mode the selection is assumed one-hot (:mod:`protocols.stages.decision`, ``claimed``).
* Alice learns the public sizes and, per frame t, model r and component m: (a) y_trm,
  the component's log-density plus a fresh smooth blind of width R, and (b) per frame
  and model L_tr + b_tr to 2^-``precision_bits`` relative, b_tr carrying the fresh
  fine-grained z_tr.  Every value and every difference of two carries at least one
  fresh blind: hidden within R nats, at statistical distance about d sqrt(I) for two
  values d apart (I = 41.06 / R^2 the blind's Fisher information).  A client who repeats
  a frame k times (in one session or many) estimates a component's log-density to no
  better than R / (6.4 sqrt(k)) nats (the Cramer-Rao floor,
  :func:`~protocols.stages.blinds.estimation_floor`), which at |x| = 100, where a
  log-density is 10^3-10^5 nats, is a tiny relative error: a review estimated the means
  to 1% of their spread in one session, and a client who deviates (x and x^2 that
  disagree, crafted LOGSUM replies) rebuilt every GMM exactly from 17 frames
  (``docs/security.md``).  (c) In the comparisons and the selection's multiplication:
  masked values (2^-40) and uniform bits, and in ``identify`` the winner's label.
* Ties: scores are compared at 2^-s nats (s = 16) after rounding each party's share, so
  two scores within 2^-(s-1) nats may compare either way; an exact tie in ``identify``
  goes to a uniformly random one of the tied labels, in ``verify`` / ``anonymous`` a
  score exactly at the threshold is rejected.

Both scorings:

* Refusals: a frame value that is not finite or exceeds ``feature_bound`` (Alice), or a
  model whose log-densities may exceed the public bound 2^(log_bound_bits - 1) nats over
  the admissible features (Bob), is a check on private data: that party runs the whole
  protocol on well-formed dummy values (zero frames; unit Gaussians) and raises its
  typed error only after its last message, so the other party's view is the same as in
  an accepted run (its result is then meaningless).  Shape and type errors (d, T, a
  model that is not a diagonal GMM, a claim that is not an enrolled label, a claim in
  ``identify``) concern public facts or Alice's own input format and are raised before
  Alice sends anything that depends on her input.
* Alice's computations on values she decrypts do the same operations whatever the value:
  her exponentials of components far behind their frame's best one are computed and
  rounded like any other (:func:`protocols.stages.fixedlog.exp_fixed`, no early return;
  the operation-count test).

Precision: ``max``: Alice's x and x^2 at 2^-``bound_feature_scale``, the program's
values at 2^-(58 - ``log_bound_bits``) nats; the decisions equal the plaintext
best-component decisions (:func:`~protocols.stages.mixture.plain_scores`) on 100 of 100
test utterances per mode at 2048 bits (``smc-hmm bench speaker``).  ``logsum``:
log-values at f = 80 fractional bits, features at fs = 40 and Bob's emission weights at
f - fs; each frame's LOGSUM is exact to 2^-32 relative (``precision_bits``), so log P is
within ~1e-11 relative of the plaintext.  No component is ever dropped: every target
keeps its own leader at 2^g.

Run: ``smc-hmm speaker identify --audio FILE.wav``, ``smc-hmm speaker verify|anonymous
--audio FILE.wav --claim NAME``, ``protocol = "speaker"`` in a parties.toml (Alice's
``utterance``: a WAV file, frames, or ``{features = ..., claim = ...}``; Bob's
``models``: a labelled GMM file) or through ``smc-hmm serve``.  Tests:
``tests/protocols/test_protocol_speaker.py``; docs: ``docs/speaker.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from protocols.stages import bound as bd
from protocols.stages import emissions, garbled, logsum, mixture
from protocols.stages.blinds import log_blinds
from protocols.stages.decision import DecisionSpec, alice_decide, bob_decide, decide_plain
from protocols.stages.dgk import COMPARISONS
from protocols.stages.emissions import EmissionLayout, input_bound
from protocols.stages.logsum import LogsumParams, LogsumPlan
from protocols.stages.mixture import MixtureLayout
from protocols.stages.primitives import PrecisionParams
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.crypto.packing import PackingPlan
from smc_hmm.data.speakers import gmm, gmm_parts
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    PrecisionError,
    ProtocolError,
    SmcHmmError,
)
from smc_hmm.limits import MAX_SEQUENCE_LENGTH, MAX_STATES, MAX_WIDTH, check_at_most
from smc_hmm.messages import Ciphertexts, Key, Message, Public, Revealed
from smc_hmm.protocol import ProtocolDescriptor, Role, params_from_config, save_array
from smc_hmm.runtime.inputs import load_frames, resolve_path

NAME = "speaker"
MODES = ("identify", "verify", "anonymous")
#: the largest margin or threshold, nats per frame
MAX_NATS_PER_FRAME = 1000.0
#: the decision's reveal messages (compare.bob_reveal / alice_reveal)
REVEAL_TAGS = ("spk.reveal", "spk.opened", "spk.result")
#: anonymous: Alice's encrypted one-hot selection of her claim (protocols.stages.decision)
SELECT_TAG = "spk.select"
#: the modes in which Alice claims an identity (verify: in clear; anonymous: encrypted)
CLAIM_MODES = ("verify", "anonymous")
#: how a model scores an utterance (:class:`SpeakerParams`)
SCORINGS = ("max", "logsum")
#: ``hide_count``: the most speakers a run may pad to, and the bytes of a name the circuit
#: gives Alice (UTF-8, zero-padded; a zero name is "none")
MAX_HIDDEN = 64
NAME_BYTES = 16
OUTPUT_PARTIES = ("alice", "trent")
#: Bob -> Trent: the public sizes, T and the key size (what the final circuit follows from)
#: the handshake's messages, from nothing but the protocol (step 0)
KEY = Message("spk.key", Key())
SIZES = Message("spk.spec", Public((dict,)))
CLAIM = Message("spk.claim", Revealed("the claimed identity", (str,)))
LENGTH = Message("spk.length", Public((int,)))
TRENT_SPEC = Message("spk.trent", Public((dict,)))


@dataclass(frozen=True)
class SpeakerParams:
    """Public parameters of secure speaker identification / verification (module docstring)."""

    mode: str = typed.one_of("identify", MODES)
    #: the label of the universal background model among Bob's models
    ubm: str = "ubm"
    #: identify: a speaker is named only if it beats the UBM by more than this (nats/frame)
    margin: float = typed.number(-2.0, -MAX_NATS_PER_FRAME, MAX_NATS_PER_FRAME)
    #: verify / anonymous: accept iff the claim's log-likelihood ratio to the UBM exceeds
    #: this (nats/frame)
    threshold: float = typed.number(0.0, -MAX_NATS_PER_FRAME, MAX_NATS_PER_FRAME)
    feature_bound: float = typed.number(16.0, 0, 1e6, low_open=True)
    log_bound_bits: int = typed.whole(20, 9, 60)
    log_scale: int = typed.whole(80, 32, 160)
    feature_scale: int = 40
    blind_nats: float = typed.blind_nats()
    #: each frame's LOGSUM keeps 2^-precision_bits relative precision (log P within
    #: ~1e-12 relative over an utterance; the comparisons use 2^-score_scale nats)
    precision_bits: int = typed.whole(32, 16, 96)
    score_scale: int = typed.whole(16, 0, 32)
    #: frames per LOGSUM round trip; 0: all frames in one (the default)
    frames_per_round: int = typed.whole(0, 0, MAX_SEQUENCE_LENGTH)
    #: for measurements: Alice also learns every log P (an extra, declared revelation)
    reveal_scores: bool = typed.flag(False)
    sigma: int = typed.sigma()
    #: the decision's comparisons: ``garbled`` (one circuit Bob garbles) or ``dgk``
    #: (:mod:`protocols.stages.decision`); ``logsum`` scoring only
    comparison: str = typed.one_of("garbled", COMPARISONS)
    #: how a model scores an utterance: ``max`` (the default: per frame its best
    #: component, summed, and the decision, all in circuits Bob garbles on bound inputs:
    #: :mod:`protocols.stages.mixture`) or ``logsum`` (the thesis's: blinded LOGSUM
    #: rounds, Alice decrypting blinded log-densities, then the decision stage); None:
    #: ``logsum`` where ``reveal_scores``, ``comparison = "dgk"`` or ``frames_per_round``
    #: ask for the thesis's, else ``max``
    scoring: str | None = typed.one_of(None, SCORINGS)
    #: ``max``: Alice's features at this scale (her x and x^2 enter the circuit, checked)
    bound_feature_scale: int = typed.whole(18, 4, 32)
    #: ``max``: every component's log-density clamped to [-2^K, 2^K) nats in the circuit
    emission_clamp_bits: int = typed.whole(12, 4, 20)
    #: identify: pad the speakers to this public number with dummies that never win, so
    #: that nothing but N is public (0: off; every model then has one public size)
    hide_count: int = typed.whole(0, 0, MAX_HIDDEN)
    #: identify: who learns the answer, ``alice`` or ``trent`` (a third party; then Alice
    #: and Bob learn nothing, :func:`trent`)
    output_party: str = typed.one_of("alice", OUTPUT_PARTIES)

    def __post_init__(self):
        if self.scoring is None:  # the thesis's mode where its own parameters ask for it
            thesis = self.reveal_scores or self.comparison == "dgk" or self.frames_per_round
            object.__setattr__(self, "scoring", "logsum" if thesis else "max")
        typed.check_fields(self)
        if not isinstance(self.ubm, str) or not self.ubm:
            raise InvalidInputError("ubm must be the background model's label")
        if not 8 <= self.feature_scale < self.log_scale:
            raise InvalidInputError("feature_scale must be in [8, log_scale)")
        if self.score_scale > self.log_scale:
            raise InvalidInputError("score_scale must not exceed log_scale")
        if self.scoring == "max" and (self.reveal_scores or self.comparison != "garbled"):
            raise InvalidInputError(
                "scoring 'max' reveals only the decision, in circuits: reveal_scores and "
                "comparison 'dgk' are for scoring 'logsum'"
            )
        if (self.hide_count or self.output_party == "trent") and not (
            self.mode == "identify" and self.scoring == "max"
        ):
            raise InvalidInputError(
                "hide_count and output_party 'trent' are for identify with scoring 'max'"
            )

    @property
    def logsum(self) -> LogsumParams:
        """The LOGSUM stage's parameters: a = 1 (weights are mixture components already
        folded into the emissions), the elements' blinds are one emission blind each, so
        they spread over R around their target's reference."""
        return LogsumParams(
            precision_bits=self.precision_bits,
            sigma=self.sigma,
            blind_nats=self.blind_nats,
            spread_nats=self.blind_nats,
            weight_floor_bits=0,
        )

    @property
    def precision(self) -> PrecisionParams:
        """The log-value conventions (scale, log-0 sentinel) the stages read."""
        return PrecisionParams(
            log_scale=self.log_scale,
            log_bound_bits=self.log_bound_bits,
            blind_nats=self.blind_nats,
            sigma=self.sigma,
        )

    @classmethod
    def from_config(cls, section: Mapping) -> SpeakerParams:
        """From the ``[protocol]`` table of a parties.toml (every key optional)."""
        return params_from_config(cls, section, "speaker")


@dataclass(frozen=True)
class SpeakerScores:
    """The scores' phase of a run: the decision over ``count`` running models' scores of
    an utterance of T (``length``) frames, their scale s, bounds and public offsets --
    what needs neither the key nor the models' sizes (:func:`plain_decision` uses it
    alone; :attr:`SpeakerSpec.scores` in a run)."""

    params: SpeakerParams
    count: int
    length: int
    labels: tuple[str, ...] = ()

    @property
    def s(self) -> int:
        return self.params.score_scale

    @property
    def share_bound(self) -> int:
        """|round(A_r 2^s)|: per frame |L - log beta| < 2^(log_bound_bits - 1) + 50 nats."""
        return (self.length << (self.params.log_bound_bits + self.s)) + 1

    def offset_units(self, nats_per_frame: float) -> int:
        """A margin or threshold for the whole utterance, at scale s (public)."""
        return round(nats_per_frame * self.length * 2**self.s)

    @property
    def score_bound(self) -> int:
        """|v_r| plus the largest public offset, for the comparisons' bit length."""
        p = self.params
        offset = abs(self.offset_units(max(abs(p.margin), abs(p.threshold)))) + 1
        return self.share_bound + (self.length << (6 + self.s)) + offset + 1

    @property
    def compare_bits(self) -> int:
        return self.score_bound.bit_length() + 2

    @property
    def reference(self) -> int:
        """The UBM's index among the running models: the last in ``verify``, its label's
        otherwise (the last when the spec carries sizes only: declarations and randomizer
        counts do not depend on it)."""
        if self.params.mode == "verify" or not self.labels:
            return self.count - 1
        return self.labels.index(self.params.ubm)

    def decision(self) -> DecisionSpec:
        """The decision stage (:mod:`protocols.stages.decision`): ``identify`` is an argmax
        whose reference, the UBM, carries the margin, its label revealed to Alice;
        ``verify`` reveals to Bob whether the claimed speaker beats the UBM plus the
        threshold, ``anonymous`` the same for Alice's encrypted claim (rule
        ``claimed``)."""
        p = self.params
        identify = p.mode == "identify"
        rule = {"identify": "argmax", "verify": "beats", "anonymous": "claimed"}[p.mode]
        return DecisionSpec(
            count=self.count,
            bound=self.score_bound,
            rule=rule,
            reference=self.reference,
            offset=self.offset_units(p.margin if identify else p.threshold),
            sigma=p.sigma,
            tags=REVEAL_TAGS,
            bits=self.compare_bits,
            select_tag=SELECT_TAG,
            comparison=p.comparison,
        )


@dataclass(frozen=True)
class SpeakerSpec:
    """The public sizes of one run and every scale, bound and layout derived from them.

    ``components``: the mixture sizes of the models that run (all models, or the claim's
    and the UBM's in ``verify``); ``length``: T.
    """

    params: SpeakerParams
    dims: int
    components: tuple[int, ...]
    length: int
    key_bits: int
    labels: tuple[str, ...] = field(default=())

    @property
    def rows(self) -> int:
        """Components of every running model: one emission per frame and row."""
        return sum(self.components)

    @property
    def segments(self) -> list[slice]:
        bounds = np.cumsum([0, *self.components])
        return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]

    # -- emissions -----------------------------------------------------------------------

    @property
    def f(self) -> int:
        return self.params.log_scale

    @property
    def weight_scale(self) -> int:
        return self.params.log_scale - self.params.feature_scale

    @property
    def reach_bound(self) -> int:
        """Bob's emission a . x + b . x^2 + c may reach this at scale f (half the public
        log bound); a model that could exceed it is refused (invisibly)."""
        return 1 << (self.params.log_bound_bits - 1 + self.f)

    @property
    def emit_slot_bound(self) -> int:
        """|y_trm| at scale f: the reach plus the blind (< 2^7 nats)."""
        if self.params.blind_nats >= 1 << 7:
            raise PrecisionError("blind_nats too large for the emission slots")
        return self.reach_bound + (1 << (7 + self.f))

    @property
    def emission_plan(self) -> PackingPlan:
        """One slot per frame: signed |y| < 2^(log_bound_bits + f), a sign and a carry bit."""
        value_bits = self.params.log_bound_bits + self.f
        return EmissionLayout.build(value_bits, self.key_bits, 1, 2 * self.dims, 1).plan

    @property
    def emissions(self) -> EmissionLayout:
        """The frames' packing (:mod:`protocols.stages.emissions`): 2d inputs per frame,
        one row per component of every running model."""
        return EmissionLayout(self.emission_plan, self.length, 2 * self.dims, self.rows)

    # -- LOGSUM ----------------------------------------------------------------------------

    def rounds(self) -> list[range]:
        """The frames of each LOGSUM round trip."""
        per = self.params.frames_per_round or self.length
        return [range(a, min(a + per, self.length)) for a in range(0, self.length, per)]

    def round_plan(self, frames: range) -> LogsumPlan:
        """One round's LOGSUM (:mod:`protocols.stages.logsum`): a target per (frame, model),
        frame-major, whose elements are the model's components in that frame (indices
        into the round's (frames, rows) emissions, flattened)."""
        preds = [
            [i * self.rows + m for m in range(seg.start, seg.stop)]
            for i in range(len(frames))
            for seg in self.segments
        ]
        return LogsumPlan.build(preds, self.params.logsum, self.key_bits)

    def check_precision(self) -> None:
        """PrecisionError unless the emission slots and every round's LOGSUM fit the key
        (public sizes only)."""
        _ = self.emission_plan, self.emit_slot_bound
        for frames in self.rounds()[:1]:
            self.round_plan(frames)

    # -- scores ------------------------------------------------------------------------------

    @cached_property
    def scores(self) -> SpeakerScores:
        """The scores' phase: the decision over the running models' scores."""
        return SpeakerScores(self.params, len(self.components), self.length, self.labels)

    @property
    def log_share_bound(self) -> int:
        return self.length << (self.params.log_bound_bits + self.f)

    # -- the garbled default (scoring "max") --------------------------------------------

    @property
    def program_scale(self) -> int:
        """f of the bound program: the largest <= log_scale whose values (below
        2^(log_bound_bits - 1) nats) fit the binding's MAC field."""
        return min(self.params.log_scale, 58 - self.params.log_bound_bits)

    @cached_property
    def bound_plan(self) -> bd.BoundPlan:
        """The emissions as bound shares, her x and x^2 with them (their squares checked;
        each input a sign bit wider than its bound)."""
        p = self.params
        x_bits = input_bound(p.feature_bound, p.bound_feature_scale).bit_length() + 1
        return bd.BoundPlan(
            self.length, 2 * self.dims, self.rows, x_bits,
            self.params.log_bound_bits + self.program_scale + 1, self.params.sigma,
            self.key_bits, bind_inputs=True,
        )  # fmt: skip

    @cached_property
    def mixture(self) -> MixtureLayout:
        """The scoring chain (:mod:`protocols.stages.mixture`): the decision stage's rule on
        the models that run, the UBM's score carrying the margin or the threshold."""
        p, s = self.params, self.params.score_scale
        keep = p.emission_clamp_bits + s
        fs = p.bound_feature_scale
        x_bits = (math.ceil(p.feature_bound * 2**fs) + 1).bit_length() + 1
        em = bd.Emissions(
            self.bound_plan, self.program_scale - s, keep,
            tuple((k, self.dims + k) for k in range(self.dims)), fs, square_bits=x_bits,
        )  # fmt: skip
        rule = {"identify": "argmax", "verify": "beats", "anonymous": "claimed"}[p.mode]
        offset = self.scores.offset_units(p.margin if p.mode == "identify" else p.threshold)
        names = 8 * NAME_BYTES if p.hide_count else 0
        return MixtureLayout(
            self.components, self.length, keep + 2, em, rule, self.scores.reference, offset, names,
            p.output_party == "trent",
        )  # fmt: skip

    # -- declarations ---------------------------------------------------------------------

    def messages(self) -> dict[str, Message]:
        """Every message of the run beyond the comparisons', from public parameters alone."""
        p, em, n = self.params, self.emissions, (len(self.components),)
        rp = self.round_plan(self.rounds()[0])  # the widest round: its bounds hold for all
        out = {
            "key": KEY,
            "spec": SIZES,
            "claim": CLAIM,
            "trent": TRENT_SPEC,
            "length": LENGTH,
            "obs": em.obs_message(
                "spk.obs", p.feature_scale, input_bound(p.feature_bound, p.feature_scale)
            ),
            "emit": em.emit_message("spk.emit", self.f, self.emit_slot_bound),
            "exp": Message("spk.exp", Ciphertexts(0, rp.value_bound)),
            "sum": Message("spk.sum", Ciphertexts(0, rp.packed_bound, fresh=True)),
            "shares": Message("spk.shares", Ciphertexts(self.scores.s, self.scores.share_bound, n)),
            "logs": Message("spk.logs", Ciphertexts(self.f, self.log_share_bound, n)),
            "scores": Message(
                "spk.scores",
                Ciphertexts(
                    self.f, self.log_share_bound + (self.length << (6 + self.f)), n, fresh=True
                ),
            ),
        }
        return out


def declared_messages(spec: SpeakerSpec) -> list[Message]:
    """Every message of a run with these public sizes, the decision's included (for the
    transcript harness and for readers)."""
    if spec.params.scoring == "max":
        cots = sum(spec.mixture.input_bits) + spec.mixture.check_bits
        return (
            list(spec.messages().values())
            + list(garbled.setup_messages(cots).values())
            + list(spec.bound_plan.messages().values())
            + mixture.messages(spec.mixture)
        )
    return list(spec.messages().values()) + spec.scores.decision().messages()


def plain_decision(params: SpeakerParams, scores, labels, frames: int, claim=None):
    """The secure protocol's decision rule on plaintext log-likelihoods (nats), for tests
    and benchmarks: each score rounded to 2^-s nats as the shares are, then the decision
    stage's rule on integers (:func:`protocols.stages.decision.decide_plain`).  ``identify``:
    the label or None (ties: the lowest index); ``verify`` / ``anonymous``: the bit for
    ``claim``.  Equal to :func:`smc_hmm.data.speakers.decision` except for scores
    within about 2^-s nats of each other or of the margin or threshold."""
    labels = list(labels)
    if params.mode == "verify":
        running = [labels.index(claim), labels.index(params.ubm)]
    else:
        running = list(range(len(labels)))
    spec = SpeakerScores(params, len(running), frames, tuple(labels))
    values = [round(float(scores[r]) * 2**spec.s) for r in running]
    choice = labels.index(claim) if params.mode == "anonymous" else None
    out = decide_plain(spec.decision(), values, choice)
    if params.mode == "identify":
        return None if labels[out] == params.ubm else labels[out]
    return out


# -- Bob's models ----------------------------------------------------------------------------


def _models_and_labels(speakers) -> tuple[list, list[str]]:
    if isinstance(speakers, tuple) and len(speakers) == 2:
        models, labels = speakers
    else:
        raise InvalidInputError("Bob's input is (models, labels): one labelled GMM per speaker")
    models, labels = list(models), [str(x) for x in labels]
    if len(models) != len(labels) or len(set(labels)) != len(labels):
        raise InvalidInputError("one distinct label per model")
    return models, labels


def _running(models, labels, params: SpeakerParams, claim: str | None) -> list[int]:
    """Indices of the models that run: all, or the claim's and the UBM's (``verify``)."""
    if params.ubm not in labels:
        raise InvalidInputError(f"no model is labelled {params.ubm!r} (the UBM)")
    if len(labels) < 2:
        raise InvalidInputError("speaker recognition needs at least one speaker and a UBM")
    if params.mode != "verify":
        return list(range(len(labels)))
    if claim not in labels or claim == params.ubm:
        raise ProtocolError(f"spk.claim: {claim!r} is not an enrolled speaker")
    return [labels.index(claim), labels.index(params.ubm)]


def _emission_rows(model) -> np.ndarray:
    """Per component: weights of x_i and x_i^2, then the constant, with
    log w_m N(x; mu_m, diag(s_m)) = a . x + b . x^2 + c."""
    w, mu, var = gmm_parts(model)
    const = (
        np.log(w) - (mu * mu / (2 * var)).sum(axis=1) - 0.5 * np.log(2 * np.pi * var).sum(axis=1)
    )
    return np.concatenate([mu / var, -0.5 / var, const[:, None]], axis=1)


def emission_program(models, spec: SpeakerSpec, bound: bool = False):
    """Bob's integer emission weights (rows, 2d) at f - fs bits and constants at f bits
    (``bound``: the bound program's f and fs, :attr:`SpeakerSpec.program_scale`).

    Raises PrecisionError if a model's log-densities could exceed the public reach over
    the admissible features (the caller turns that into an invisible refusal)."""
    lbb = spec.params.log_bound_bits
    return emissions.integer_program(
        np.concatenate([_emission_rows(m) for m in models]),
        f=spec.program_scale if bound else spec.f,
        fs=_fs(spec, bound),
        feature_bound=spec.params.feature_bound,
        limit_nats=2.0 ** (lbb - 1),
        over=f"half the public bound 2^{lbb}: raise log_bound_bits or lower feature_bound",
    )


def _fs(spec: SpeakerSpec, bound: bool) -> int:
    """fs of Alice's encoded features: the bound program's or the LOGSUM path's."""
    return spec.params.bound_feature_scale if bound else spec.params.feature_scale


def _dummy_models(components: Sequence[int], dims: int) -> list:
    """Well-formed stand-ins of the public sizes (unit Gaussians, uniform weights)."""
    return [gmm(np.full(c, 1.0 / c), np.zeros((c, dims)), np.ones((c, dims))) for c in components]


# -- Alice's encoding --------------------------------------------------------------------------


def _checked_frames(frames, params: SpeakerParams) -> tuple[np.ndarray, SmcHmmError | None]:
    """Alice's frames, or zeros and the refusal to raise after the last message when a value
    is not finite or exceeds the public feature bound (a check on private data)."""
    x = np.asarray(frames, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0:
        raise InvalidInputError("an utterance is a non-empty (T, d) array of feature frames")
    if x.shape[0] > MAX_SEQUENCE_LENGTH:
        raise InvalidInputError(f"an utterance has at most {MAX_SEQUENCE_LENGTH:,} frames")
    if not np.isfinite(x).all():
        return np.zeros_like(x), InvalidInputError("the utterance contains NaN or infinity")
    top = float(np.abs(x).max())
    if top > params.feature_bound:
        return np.zeros_like(x), InvalidInputError(
            f"a feature of magnitude {top:.6g} exceeds the public feature_bound "
            f"{params.feature_bound:g}"
        )
    return x, None


def encode_observations(pk, frames: np.ndarray, spec: SpeakerSpec) -> CipherArray:
    """Step 1: x_i and x_i^2 at fs bits, the frames of a group in the slots of one ciphertext."""
    fs = spec.params.feature_scale
    products = np.concatenate([frames, frames * frames], axis=1)
    encoded = np.array([[ldexp_int(float(v), fs) for v in row] for row in products], dtype=object)
    return emissions.alice_pack(pk, encoded, spec.emissions, fs, spec.messages()["obs"].body.bound)


# -- roles --------------------------------------------------------------------------------------


def alice(ctx, utterance, params: SpeakerParams, peer: str = "bob"):
    """Alice: her frames (T, d), or (frames, claim) in ``verify`` and ``anonymous`` mode.

    ``identify``: returns ``{"speaker": label or None, "index": ..., "mode": ...}``;
    ``verify`` / ``anonymous``: returns None (Bob learns the decision), or, with
    ``reveal_scores``, a dict with ``scores`` only.
    """
    frames, claim = _alice_input(ctx, utterance, params)
    spec, running = _alice_handshake(ctx, frames, claim, params, peer)  # step 0
    if params.scoring == "max":
        return _alice_max(ctx, frames, spec, claim, peer)  # steps 1-3
    return _alice_logsum(ctx, frames, spec, claim, running, peer)  # steps 1-5


def _alice_input(ctx, utterance, params: SpeakerParams):
    """Her frames and claim, checked; frames Bob's limits refuse are deferred (refused
    by the runner after her last message, so a refusal does not show in the timing)."""
    frames, claim = utterance if isinstance(utterance, tuple) else (utterance, None)
    if params.mode in CLAIM_MODES and not isinstance(claim, str):
        raise InvalidInputError(
            f"{params.mode} checks a claim: give the frames together with the claimed "
            "speaker's name"
        )
    if params.mode not in CLAIM_MODES and claim is not None:
        raise InvalidInputError(f"{params.mode} mode takes no claim (got {claim!r})")
    frames, refusal = _checked_frames(frames, params)
    if refusal is not None:
        ctx.defer(refusal)
    return frames, claim


def _alice_handshake(ctx, frames, claim, params: SpeakerParams, peer: str):
    """Step 0, Alice: her key out, Bob's public sizes in (checked against her frames and
    claim), the claim out in ``verify``; the run's spec and the models it scores."""
    pk = ctx.keypair[0]
    ctx.send(peer, KEY, pk)
    sizes = ctx.recv(peer, SIZES)
    dims, components, labels = _parse_sizes(sizes)
    if frames.shape[1] != dims:
        raise InvalidInputError(
            f"Bob's models expect {dims} features per frame, not {frames.shape[1]}"
        )
    if params.ubm not in labels:
        raise ProtocolError(f"spk.spec: no model is labelled {params.ubm!r}")
    if claim is not None and (claim not in labels or claim == params.ubm):
        speakers = ", ".join(x for x in labels if x != params.ubm)
        raise InvalidInputError(f"{claim!r} is not an enrolled speaker ({speakers})")
    if params.mode == "verify":
        ctx.send(peer, CLAIM, claim)
        running = [labels.index(claim), labels.index(params.ubm)]
    else:
        running = list(range(len(labels)))
    spec = SpeakerSpec(
        params, dims, tuple(components[i] for i in running), len(frames), pk.bits, tuple(labels)
    )
    return spec, running


def _alice_logsum(ctx, frames, spec: SpeakerSpec, claim, running, peer: str):
    """Steps 1-5 of scoring ``logsum`` (the thesis's 5.2), Alice: her encrypted features,
    the blinded emissions she decrypts, the LOGSUM rounds, her shares of the scores, then
    the decision stage."""
    pk, sk = ctx.keypair
    params, labels = spec.params, list(spec.labels)
    spec.check_precision()
    msg = spec.messages()
    with ctx.phase("encrypt features"):
        # Step 1: T (public) and the packed features
        ctx.send(peer, LENGTH, spec.length)
        ctx.send(peer, msg["obs"], encode_observations(pk, frames, spec))
    with ctx.phase("emissions"):
        # Step 2: every blinded emission y_trm, frames in slots
        y = emissions.alice_receive(ctx, msg["emit"], spec.emissions, peer)
    with ctx.phase("logsum"):
        shares = _alice_logsums(ctx, spec, y, msg, peer)  # steps 3 and 4
    out = {"mode": params.mode}
    with ctx.phase("scores"):
        small = [_round_shift(a, spec.f - spec.scores.s) for a in shares]
        top = spec.scores.share_bound
        if any(abs(v) > top for v in small):  # a reply no honest Bob sends: refuse at the end
            ctx.defer(ProtocolError("the LOGSUM results exceed their public bound"))
            small = [max(-top, min(top, v)) for v in small]
        ctx.send(
            peer,
            msg["shares"],
            CipherArray.encrypt_encoded(pk, small, spec.scores.s, spec.scores.share_bound),
        )
        if params.reveal_scores:
            logs = CipherArray.encrypt_encoded(pk, shares, spec.f, spec.log_share_bound)
            ctx.send(peer, msg["logs"], logs)
            ints = ctx.recv(peer, msg["scores"]).decrypt_ints(sk)
            out["scores"] = {labels[r]: int(v) / 2**spec.f for r, v in zip(running, ints)}
    with ctx.phase("decision"):
        # Step 5: the decision stage; Alice learns only the label (identify); anonymous:
        # her claim goes in encrypted, as a one-hot selection over the speakers
        choice = labels.index(claim) if params.mode == "anonymous" else None
        index = alice_decide(ctx, spec.scores.decision(), peer, choice)
        if params.mode == "identify":
            winner = None if labels[index] == params.ubm else index
            out |= {"speaker": None if winner is None else labels[winner], "index": winner}
    if params.mode == "identify" or params.reveal_scores:
        return out
    return None


def _alice_max(ctx, frames, spec: SpeakerSpec, claim, peer: str):
    """Steps 1-3 of scoring ``max``, Alice: T out, the garbled stage's setup, her bound
    values (the bound stage), then the scoring chain; she learns only the label
    (identify) and nothing in verify and anonymous (:mod:`protocols.stages.mixture`)."""
    lay, labels, mode = spec.mixture, list(spec.labels), spec.params.mode
    with ctx.phase("setup"):
        ctx.send(peer, LENGTH, spec.length)
        evaluator = garbled.alice_setup(ctx, sum(lay.input_bits) + lay.check_bits, peer)
    with ctx.phase("emissions"):
        phi = bd.encode_products(frames, True, spec.params.bound_feature_scale)
        binding = bd.alice_bound(ctx, spec.bound_plan, phi, peer)
    choice = None
    if mode == "anonymous":  # her claim's index among the speakers (the UBM left out)
        others = [i for i in range(len(labels)) if i != spec.scores.reference]
        choice = others.index(labels.index(claim))
    with ctx.phase("decision"):
        to = {"third": "trent"} if lay.third else {}  # the answer's labels to Trent
        index = mixture.alice_mixture(ctx, evaluator, lay, binding, choice, **to)
    if mode != "identify" or lay.third:
        return None
    return _answer(spec, index)


def _answer(spec: SpeakerSpec, index) -> dict:
    """identify's answer from the circuit's output: the winner's index, or (hide_count)
    its name's bits, a zero name being none."""
    if spec.mixture.names:
        name = np.packbits(index, bitorder="little").tobytes().rstrip(b"\0")
        speaker = name.decode("utf-8", "replace") or None
        return {"mode": "identify", "speaker": speaker, "index": None}
    winner = None if index == spec.scores.reference else index
    return {
        "mode": "identify",
        "speaker": None if winner is None else spec.labels[winner],
        "index": winner,
    }


def trent(ctx, private, params: SpeakerParams, garbler: str = "bob", evaluator: str = "alice"):
    """Trent (``output_party = "trent"``), the only party that learns identify's answer:
    the public sizes from Bob, then the final circuit's output bits from Bob's hashes of
    both labels of each output wire and Alice's labels (:func:`protocols.stages.mixture.
    trent_mixture`).  Adversary model: the three parties do not collude; Alice cannot
    forge a label (it needs Bob's Delta) and learns no bit (she holds no decoding), Bob
    never sees her labels, Trent sees only the answer's bits.  A Bob who sends wrong
    hashes makes Trent abort (at most that bit, if Trent's abort reaches him)."""
    info = ctx.recv(garbler, TRENT_SPEC)
    if not isinstance(info, dict) or set(info) != {"sizes", "length", "key_bits"}:
        raise ProtocolError(f"spk.trent: malformed {str(info)[:100]}")
    dims, components, labels = _parse_sizes(info["sizes"])
    length, key_bits = info["length"], info["key_bits"]
    if type(length) is not int or type(key_bits) is not int or length < 1 or key_bits < 512:
        raise ProtocolError(f"spk.trent: T {length!r}, key bits {key_bits!r}")
    check_at_most("max_sequence_length", length, MAX_SEQUENCE_LENGTH, "the utterance length")
    spec = SpeakerSpec(params, dims, tuple(components), length, key_bits, tuple(labels))
    with ctx.phase("decision"):
        bits = mixture.trent_mixture(ctx, spec.mixture, garbler, evaluator)
    return _answer(spec, bits)


def _bob_max(ctx, spec: SpeakerSpec, active, peer: str, hidden=None):
    """Steps 1-3 of scoring ``max``, Bob: the garbled stage's setup, the bound program
    (his models' emissions on her encrypted x and x^2), then the scoring chain he
    garbles; he learns only the bit (verify, anonymous).  A model beyond the public bound
    runs as unit Gaussians and is refused after his last message."""
    lay = spec.mixture
    try:
        weights, const = emission_program(active, spec, bound=True)
    except PrecisionError as e:
        ctx.defer(e)
        weights, const = emission_program(_dummy_models(spec.components, spec.dims), spec, True)
    with ctx.phase("setup"):
        garbler = garbled.bob_setup(ctx, sum(lay.input_bits) + lay.check_bits, peer)
    with ctx.phase("emissions"):
        binding = bd.bob_bound(ctx, spec.bound_plan, weights, const, peer)
    with ctx.phase("decision"):
        to = {"third": "trent"} if lay.third else {}  # the answer's hashes to Trent
        return mixture.bob_mixture(ctx, garbler, lay, binding, hidden=hidden, **to)


def _alice_logsums(ctx, spec: SpeakerSpec, y, msg, peer: str) -> list[int]:
    """Steps 3 and 4: one LOGSUM round per group of frames (protocols.stages.logsum);
    a_tr = L_tr + blind_tr summed per model: A_r at scale f."""
    prec = spec.params.precision
    shares = [0] * len(spec.components)
    for frames_of_round in spec.rounds():
        plan = spec.round_plan(frames_of_round)
        u = [v for t in frames_of_round for v in y[t]]
        shifts = logsum.alice_send(ctx, u, plan, prec, msg["exp"], peer)
        logs = logsum.alice_receive(ctx, plan, shifts, prec, msg["sum"], peer)
        for i, a in enumerate(logs):
            shares[i % len(spec.components)] += a
    return shares


def _name_bits(name: str) -> np.ndarray:
    raw = name.encode("utf-8")
    if len(raw) > NAME_BYTES:
        raise InvalidInputError(f"hide_count: a speaker's name is at most {NAME_BYTES} bytes")
    padded = np.frombuffer(raw.ljust(NAME_BYTES, b"\0"), np.uint8)
    return np.unpackbits(padded, bitorder="little")


def _padded(models, labels, params: SpeakerParams):
    """``hide_count``: Bob's speakers padded to N with dummies of the one public size
    (unit Gaussians), the UBM last, the labels sent generic; (models, labels, (the dummy
    bits, the names' table)), both his private circuit inputs."""
    n, ubm = params.hide_count, labels.index(params.ubm)
    speakers = [i for i in range(len(labels)) if i != ubm]
    sizes = {m.n_states for m in models}
    if len(speakers) > n:
        raise InvalidInputError(f"{len(speakers)} speakers, above hide_count {n}")
    if len(sizes) != 1:
        raise InvalidInputError("hide_count: every model needs the same number of components")
    dummies = _dummy_models([sizes.pop()] * (n - len(speakers)), models[0].n_features)
    padded = [models[i] for i in speakers] + dummies + [models[ubm]]
    dummy = np.array([0] * len(speakers) + [1] * len(dummies) + [0], dtype=np.uint8)
    names = [labels[i] for i in speakers] + [""] * (len(dummies) + 1)
    table = np.stack([_name_bits(x) for x in names])
    return padded, [f"speaker-{k}" for k in range(n)] + [params.ubm], (dummy, table)


def _parse_sizes(sizes) -> tuple[int, list[int], list[str]]:
    """Bob's public sizes, checked against the documented limits before any work
    (:mod:`smc_hmm.limits`: ``max_width``, ``max_states``)."""
    if (
        not isinstance(sizes, dict)
        or set(sizes) != {"dims", "components", "labels"}
        or not isinstance(sizes["dims"], int)
        or sizes["dims"] < 1
        or not isinstance(sizes["components"], list)
        or not isinstance(sizes["labels"], list)
        or not 2 <= len(sizes["labels"]) == len(sizes["components"])
        or not all(type(c) is int and c > 0 for c in sizes["components"])
        or not all(isinstance(x, str) for x in sizes["labels"])
        or len(set(sizes["labels"])) != len(sizes["labels"])
    ):
        raise ProtocolError(f"malformed speaker-model sizes: {sizes!r}")
    check_at_most("max_width", sizes["dims"], MAX_WIDTH, "the speaker models' dimension")
    check_at_most("max_states", sum(sizes["components"]), MAX_STATES, "the mixture components")
    return sizes["dims"], sizes["components"], sizes["labels"]


def _round_shift(value: int, bits: int) -> int:
    """round(value / 2^bits) for an integer of either sign."""
    return (int(value) + (1 << (bits - 1))) >> bits if bits else int(value)


def _bob_models(speakers, params: SpeakerParams):
    """Bob's models checked before anything is sent, padded with dummies where the count
    is hidden: (models, labels, the hidden count's circuit inputs or None, d)."""
    models, labels = _models_and_labels(speakers)
    for m in models:
        gmm_parts(m)  # type errors (not a diagonal GMM) are public-interface errors
    if params.ubm not in labels or len(labels) < 2:
        raise InvalidInputError(f"Bob needs speaker models and one labelled {params.ubm!r} (UBM)")
    hidden = None
    if params.hide_count:
        models, labels, hidden = _padded(models, labels, params)
    dims = {m.n_features for m in models}
    if len(dims) != 1:
        raise InvalidInputError("every speaker model must have the same feature dimension")
    return models, labels, hidden, dims.pop()


def bob(ctx, speakers, params: SpeakerParams, peer: str = "alice"):
    """Bob: ``speakers`` = (models, labels), one labelled diagonal GMM per speaker and the UBM.

    ``identify``: returns None; ``verify``: ``{"claim", "accept", "mode"}``;
    ``anonymous``: ``{"accept", "mode"}``.
    """
    models, labels, hidden, d = _bob_models(speakers, params)
    spec, active, claim = _bob_handshake(ctx, models, labels, d, params, peer)  # step 0
    if params.scoring == "max":
        accept = bool(_bob_max(ctx, spec, active, peer, hidden))  # steps 1-3
    else:
        accept = _bob_logsum(ctx, spec, active, peer)  # steps 1-5
    if params.mode == "identify":
        return None
    return {"accept": accept, "mode": params.mode} | (
        {"claim": claim} if params.mode == "verify" else {}
    )


def _bob_handshake(ctx, models, labels, d: int, params: SpeakerParams, peer: str):
    """Step 0, Bob: her key in, his public sizes out, the claim in (``verify``), then T
    (public, checked against the limits and charged to a serving Bob's budget); the
    run's spec, the models it scores and the claim.  With ``output_party = "trent"``,
    Trent gets what his final circuit follows from."""
    pk = ctx.recv(peer, KEY)
    sizes = {"dims": d, "components": [m.n_states for m in models], "labels": labels}
    ctx.send(peer, SIZES, sizes)
    claim = ctx.recv(peer, CLAIM) if params.mode == "verify" else None
    running = _running(models, labels, params, claim)
    components = tuple(models[i].n_states for i in running)
    length = ctx.recv(peer, LENGTH)
    if isinstance(length, bool) or length < 1:
        raise ProtocolError(f"spk.length: {length!r} frames")
    check_at_most("max_sequence_length", length, MAX_SEQUENCE_LENGTH, "the utterance length")
    ctx.charge_frames(length)
    if params.output_party == "trent":
        ctx.send("trent", TRENT_SPEC, {"sizes": sizes, "length": length, "key_bits": pk.bits})
    spec = SpeakerSpec(params, d, components, length, pk.bits, tuple(labels))
    return spec, [models[i] for i in running], claim


def _bob_logsum(ctx, spec: SpeakerSpec, active, peer: str):
    """Steps 1-5 of scoring ``logsum`` (the thesis's 5.2), Bob: the blinded emissions on
    her encrypted features, the LOGSUM rounds, the scores from her shares, then the
    decision stage; returns the decision's bit (None in ``identify``)."""
    params, length = spec.params, spec.length
    spec.check_precision()
    msg = spec.messages()
    try:  # a check on Bob's private models: refused only after the last message
        weights, const = emission_program(active, spec)
    except PrecisionError as e:
        ctx.defer(e)
        weights, const = emission_program(_dummy_models(spec.components, spec.dims), spec)
    enc_obs = ctx.recv(peer, msg["obs"])
    # Bob's emission blinds: one smooth additive blind per frame and component
    zetas = [log_blinds(ctx.rng, spec.rows, params.blind_nats, spec.f) for _ in range(length)]
    with ctx.phase("emissions"):
        # Step 2: packed multi-exponentiations (one per component and group of frames)
        # plus each slot's constant and blind (protocols.stages.emissions)
        offsets = [[int(c) + int(z) for c, z in zip(const, zetas[t])] for t in range(length)]
        emissions.bob_send(
            ctx, msg["emit"], enc_obs, weights, spec.weight_scale, offsets, spec.emissions,
            spec.reach_bound, peer,
        )  # fmt: skip
    with ctx.phase("logsum"):
        totals = _bob_logsums(ctx, spec, zetas, msg, peer)  # step 3
    with ctx.phase("scores"):
        # Step 4: E(v_r) = E(round(A_r 2^s)) - round(2^s sum_t blind_tr)
        enc_shares = ctx.recv(peer, msg["shares"])
        own = np.array([_round_shift(-v, spec.f - spec.scores.s) for v in totals], dtype=object)
        scores = enc_shares.add_encoded(own).with_bound(spec.scores.score_bound)
        if params.reveal_scores:
            logs = ctx.recv(peer, msg["logs"]).add_encoded(
                np.array([-v for v in totals], dtype=object)
            )
            ctx.send(peer, msg["scores"], logs.with_bound(msg["scores"].body.bound))
    with ctx.phase("decision"):
        # Step 5: the decision stage against the UBM (its score carries the margin or the
        # threshold); identify: the label goes to Alice, otherwise the bit to Bob
        # (anonymous: for Alice's encrypted claim, every speaker compared)
        return bob_decide(ctx, scores, spec.scores.decision(), peer)


def _bob_logsums(ctx, spec: SpeakerSpec, zetas, msg, peer: str) -> list[int]:
    """Step 3: one LOGSUM round per group of frames (protocols.stages.logsum): per
    target (t, r) its components' blinds around their minimum, a = 1.  Returns, per
    model, the sum over the frames of the targets' new blinds (scale f)."""
    totals = [0] * len(spec.components)
    for frames_of_round in spec.rounds():
        plan = spec.round_plan(frames_of_round)
        rho = [int(z) for t in frames_of_round for z in zetas[t]]
        refs = [min(rho[e] for e in p) for p in plan.preds]
        ones = [[1.0] * len(p) for p in plan.preds]
        coefs, blinds = logsum.bob_coefficients(ctx.rng, plan, ones, rho, refs, spec.f)
        logsum.bob_round(ctx, plan, coefs, msg["exp"], msg["sum"], peer)
        for i, b in enumerate(blinds):
            totals[i % len(spec.components)] += b
    return totals


def randomizers_needed(params: SpeakerParams, key_bits: int, inputs) -> dict[str, int]:
    """The fresh Paillier randomizers each role draws in a run on ``inputs``, from public
    sizes only (what an offline phase precomputes once Alice's key is known): Alice's
    encryptions, Bob's encryptions and re-randomisations, the stages' plans and the
    decision stage's counts."""
    utterance = inputs["alice"]
    frames, claim = utterance if isinstance(utterance, tuple) else (utterance, None)
    models, labels = _models_and_labels(inputs["bob"])
    running = _running(models, labels, params, claim)
    dims = models[0].n_features
    spec = SpeakerSpec(
        params,
        dims,
        tuple(models[i].n_states for i in running),
        len(frames),
        key_bits,
        tuple(labels),
    )
    if params.scoring == "max":  # her packed x and x^2; his masked values, re-randomised
        return spec.bound_plan.randomizers()
    n = len(spec.components)
    plans = [spec.round_plan(frames) for frames in spec.rounds()]
    alice = len(spec.emissions.groups) * 2 * dims + sum(p.edges for p in plans) + n
    bob = len(spec.emissions.groups) * spec.rows + sum(p.ciphertexts for p in plans)
    if params.reveal_scores:
        alice, bob = alice + n, bob + n
    decision = spec.scores.decision().randomizers(key_bits)  # the decision stage's own counts
    return {"alice": alice + decision["alice"], "bob": bob + decision["bob"]}


# -- the plugin --------------------------------------------------------------------------------


def load_utterance(value, base):
    """Alice's input: a WAV file (featurised locally with the bundled speaker pipeline),
    frames (.npy/.json/.csv/.txt or inline), or a table ``{features = ..., claim = ...}``."""
    if isinstance(value, Mapping):
        unknown = set(value) - {"features", "claim"}
        if unknown or "features" not in value:
            raise ConfigError("an utterance table has features = ... and optionally claim = ...")
        frames = load_utterance(value["features"], base)
        claim = value.get("claim")
        if claim is not None and not isinstance(claim, str):
            raise ConfigError("claim must be a speaker's label")
        return frames if claim is None else (frames, claim)
    return load_frames(value, base, _speaker_features)


def _speaker_features(path):
    from smc_hmm.data.speakers import speaker_features_from_wav

    return speaker_features_from_wav(path)


def load_speakers(value, base):
    """Bob's input: a labelled GMM file (:func:`smc_hmm.hmm.io.save_models`)."""
    from smc_hmm.hmm.io import load_models

    try:
        models, labels = load_models(resolve_path(value, base))
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
    if not labels:
        raise ConfigError("the speaker model file must label its models (speakers and the UBM)")
    return models, labels


def phases(params: SpeakerParams, role: str) -> tuple[str, ...]:
    """The ``ctx.phase`` names a role enters, in order (progress lines count them)."""
    if role == "trent":
        return ("decision",)
    if params.scoring == "max":
        return ("setup", "emissions", "decision")
    first = ("encrypt features",) if role == "alice" else ()
    return (*first, "emissions", "logsum", "scores", "decision")


_CLIENT_AND_SERVER = (
    Role("alice", alice, kind="alice", holds_key=True, input="utterance", load=load_utterance),
    Role("bob", bob, kind="bob", input="models", load=load_speakers),
)


def _two_party_params(section: Mapping) -> SpeakerParams:
    params = SpeakerParams.from_config(section)
    if params.output_party != "alice":
        raise ConfigError("output_party = 'trent' is the speaker-trent protocol's (three parties)")
    return params


def _trent_params(section: Mapping) -> SpeakerParams:
    params = SpeakerParams.from_config({"output_party": "trent", **section})
    if params.output_party != "trent":
        raise ConfigError("speaker-trent gives the answer to Trent: output_party = 'trent'")
    return params


def plaintext(params: SpeakerParams, inputs: Mapping) -> dict:
    """The decision in the clear, on the scores of the public ``scoring`` (each frame's
    best component summed, or log P): identify's label (None: the UBM wins) or the
    claim's accept bit, with the ``scores`` beside it."""
    from smc_hmm.data.speakers import best_component_scores, decision, scores

    utterance, (models, labels) = inputs["alice"], inputs["bob"]
    frames, claim = utterance if isinstance(utterance, tuple) else (utterance, None)
    frames = np.asarray(frames, dtype=float)
    score = best_component_scores if params.scoring == "max" else scores
    values = [float(v) for v in score(list(models), frames)]
    out = decision(params.mode, values, list(labels), params, len(frames), claim)
    key = "speaker" if params.mode == "identify" else "accept"
    return {key: out, "scoring": params.scoring, "scores": dict(zip(labels, values))}


def example_speakers(rng, count: int = 3, components: int = 3, dims: int = 4):
    """(models, labels): ``count`` diagonal GMMs whose means lie 1.5 apart per speaker, and
    a UBM, labelled s0.. and "ubm"."""
    from smc_hmm.data.speakers import gmm

    def one(shift=0.0):
        return gmm(rng.dirichlet(np.ones(components)), rng.normal(shift, 1.0, (components, dims)),
                   rng.uniform(0.5, 1.5, (components, dims)))  # fmt: skip

    return [*(one(1.5 * k) for k in range(count)), one()], [*(f"s{k}" for k in range(count)), "ubm"]


def _example(key_bits: int, seed: int, output_party: str):
    """Identify among three speakers and a UBM on 5 frames of 4 features, twice (other
    speech, other models); ``output_party`` learns the answer, the others nothing."""
    from smc_hmm.protocol import Example

    rng = np.random.default_rng(seed)
    inputs = tuple(
        {"alice": rng.normal(1.0, 1.0, (5, 4)), "bob": example_speakers(rng)} for _ in "ab"
    )
    section = {"mode": "identify"} | ({"output_party": "trent"} if output_party == "trent" else {})
    params = (_trent_params if output_party == "trent" else _two_party_params)(section)
    spec = SpeakerSpec(params, 4, (3, 3, 3, 3), 5, key_bits)

    def expected(i):
        speaker = plaintext(params, i)["speaker"]
        index = None if speaker is None else i["bob"][1].index(speaker)
        answer = {"mode": "identify", "speaker": speaker, "index": index}
        return {"alice": None, "bob": None} | {output_party: answer}

    def config(directory):
        from smc_hmm.hmm.io import save_models

        utterance = save_array(directory, "utterance.npy", inputs[0]["alice"])
        save_models(directory / "speakers.npz", *inputs[0]["bob"])
        tables = {"alice": {"utterance": utterance}, "bob": {"models": "speakers.npz"}}
        return tables | ({"trent": {}} if output_party == "trent" else {})

    parties = {"alice": "alice", "bob": "bob"} | (
        {"trent": "trent"} if output_party == "trent" else {}
    )
    bad = inputs[0]["alice"].copy()
    bad[2, 1] = 99.0  # beyond the public feature_bound
    return Example(
        params=section,
        parties=parties,
        inputs=inputs,
        expected=expected,
        declared=tuple(declared_messages(spec)),
        bad_inputs=({"alice": bad}, {"alice": np.zeros((5, 3))}, {"bob": ([], [])}),
        config=config,
    )


def example(key_bits: int, seed: int):
    """:func:`_example` with Alice as the one who learns the speaker."""
    return _example(key_bits, seed, "alice")


def trent_example(key_bits: int, seed: int):
    """:func:`_example` with Trent as the one who learns the speaker."""
    return _example(key_bits, seed, "trent")


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "secure speaker identification / verification with GMMs and a UBM (thesis 5.2.2)",
    params=_two_party_params,
    plaintext=plaintext,
    roles=_CLIENT_AND_SERVER,
)

#: identify with the answer for a third party: Alice, Bob and Trent (``output_party``)
TRENT_PROTOCOL = replace(
    PROTOCOL,
    name="speaker-trent",
    summary="secure speaker identification whose label only a third party, Trent, learns",
    params=_trent_params,
    roles=(*_CLIENT_AND_SERVER, Role("trent", trent, kind="trent")),
    example=trent_example,
)
