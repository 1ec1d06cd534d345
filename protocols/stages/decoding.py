"""The secure Viterbi decoding stage: the best state path of an HMM, and only what the output
rule allows of it (thesis 003, 2.2.3 and 5.2.1: keyword spotting and speech mining).  Its two
halves, :func:`alice` and :func:`bob`, are what the ``viterbi`` protocol
(:mod:`protocols.viterbi`) runs, and what keyword recognition, spotting and connected
digits call in one line each.

Roles:

* **Alice** holds the Paillier key pair (in the ``dgk`` mode, through
  :mod:`protocols.stages.dgk`, a DGK key pair too) and learns the output.
* **Bob** does the homomorphic work and garbles the circuits, and learns nothing: every
  value he holds is a ciphertext under Alice's key or a label.

Adversary model: the default (``comparison = "auto"`` or ``"garbled"``) holds against
parties who deviate from the protocol (DESIGN.md section 11): Alice learns only the
declared output, Bob at most whether Alice aborts.  ``comparison = "dgk"`` is the
thesis's protocol, for semi-honest, non-colluding parties.

Who holds what depends on the public ``model_holder``:

* ``"bob"`` (keyword spotting, thesis 2.2.3 (a)): Alice holds the observations, Bob the
  HMMs (for spotting, filler-keyword-filler composites: :mod:`protocols.spotting`).
* ``"alice"`` (speech mining, 2.2.3 (b)): Bob holds the observations (his recording),
  Alice the HMMs (her private keyword model).  Alice keeps the key: she is the party who
  must learn the result, and Bob -- who holds the data -- must learn neither her model nor
  the positions, so everything he touches must be encrypted under a key he does not hold.

Public parameters (:class:`ViterbiParams`): the direction, the output rule, the score
scale s, the emission bound, the feature scales and bound, sigma.  Public sizes: the
model kind, M or d, per model its states, its *topology* (which a_lj are nonzero, as in
forward's v2 recursion), which states share an emission row (the spotting composite's two
filler copies) and, for the ``segment`` rule, its segment's states; and T.

Fixed point. Every log-value of the recursion is an integer at scale s (``score_scale``,
default 32 fractional bits; the default's bound program computes the emissions at the
largest f whose values fit the MAC field, its frames at ``bound_feature_scale`` bits:
:func:`score_error_bound` states the resulting error of a score). Public bounds: |log b|
<= B_e = 2^``emission_bound_bits`` nats for every admissible input, |log a|, |log pi| <=
B_a (the weight floor 2^-42 gives 29.2 nats), so a path of T frames scores within P = T
(B_e + B_a + 1) nats; log 0 is the sentinel -Z with Z = 2P + 2, so a path through a zero
always loses to one without (and an impossible sequence reports -inf). Every comparison
has the public bit length l of the largest magnitude a delta can reach, P + Z (once,
from pi; discrete emissions: T + 1 times).

Protocol, the default (circuits Bob garbles; ``docs/garbled.md``):

0. Alice sends her Paillier public key; the model holder sends the public structure
   (``vit.spec``), the data holder T; the garbled stage's setup (base OTs and the
   session's OT pool, :mod:`protocols.stages.garbled`).
1. Emissions, as shares:

   * ``model_holder = "bob"``: the bound stage (:mod:`protocols.stages.bound`): Alice
     encrypts her packed frames (x and x^2, or products, at ``bound_feature_scale``;
     one-hot symbols for a discrete model), Bob sends every emission at the program's
     scale f under a fresh uniform mask of sigma bits over its range, with two MAC limbs
     per frame; Alice decrypts uniform values, and her circuit inputs are bound to them.
   * ``model_holder = "alice"`` (mining): Alice sends her encrypted emission weights and
     constants; Bob's frames are their exponents and he sends every emission under a
     uniform mask, packed, so that her decryptions give her rounded shares and him his
     (:func:`protocols.stages.garbled.bob_share_rounded`).  Her log pi and log a stay in
     her circuit inputs.

2. The max-plus recursion, termination and traceback in circuits Bob garbles
   (:mod:`protocols.stages.maxplus`): every emission reconstructed, floored to scale s
   and clamped to [-2^K, 2^K) nats (K = ``emission_clamp_bits``); per frame each
   target's best predecessor (ties to the lower index, numpy's rule); per model the best
   final state; the traceback; each output bit ANDed with *ok* (the MAC check and, where
   x^2 enters, that it is x squared).  Alice decodes her output (path, segment, the best
   model's index, the score if revealed); Bob decodes nothing.

Protocol, ``comparison = "dgk"`` (the thesis's):

0. Alice sends her Paillier and DGK public keys (:func:`protocols.stages.dgk.alice_send_keys`);
   the model holder sends the public structure (``vit.spec``), the data holder T.
1. Emissions E(log b_r(x_t)) at scale s, per frame t and emission row r, at Bob:

   * ``model_holder = "bob"``: Alice encrypts her packed frames and Bob computes the
     packed, blinded E(log b_r(x_t) + gamma_tr) (the emission stage,
     :mod:`protocols.stages.emissions`; gamma a smooth blind of width R,
     :mod:`protocols.stages.blinds`), exactly as the forward algorithm's step 2.  Alice
     decrypts once per row and group, rounds each slot to scale s and re-encrypts it on
     its own (``vit.slots``: the "unpack" -- Bob blinds every slot, Alice decrypts once
     and re-encrypts per slot), and Bob removes round(gamma / 2^(f - s)).  The value she
     sees is the blinded one, as in forward.
   * ``model_holder = "alice"``: Alice encrypts her emission weights, start and
     transition log-probabilities (``vit.model``); Bob computes every E(log b_r(x_t)) as a
     linear combination of her encrypted weights with his encoded frames as exponents
     (:func:`protocols.stages.emissions.weighted_emissions`) and rescales them to scale s
     (:func:`protocols.stages.primitives.bob_rescale`: Alice sees only masked values).

   Rounding costs at most one unit 2^-s per emission.
2. The recursion, one tournament per frame: delta_1(j) = log pi_j + log b_j(x_1), and for
   each target j with predecessors l_0 < l_1 < ... (its public in-edges) the candidates
   delta_t(l_i) + log a_(l_i j).  Their max is a tournament -- consecutive pairs, then the
   winners' pairs, the last of an odd round sitting out -- whose every round is *one*
   batched compare-and-select for all matches of all targets
   (:func:`protocols.stages.dgk.bob_compare_select`: the DGK comparison with Veugen's
   correction, whose own values give E(max) = E(left) + [left < right] (E(right) -
   E(left)) for two more encryptions by Alice, in the comparison's 4 messages; the bit
   [left < right] stays encrypted).  Then delta_(t+1)(j) = max + E(log b_j(x_(t+1))).
   The bits stay at Bob, encrypted: they are the backpointers.  **Ties**: the left (lower-index)
   operand wins unless the right one is strictly larger, so among equal candidates the
   lowest predecessor index wins -- the rule of :func:`smc_hmm.hmm.viterbi` (numpy's
   argmax) and of the termination below.
3. Termination: per model the same tournament over all its states (a = 1): E(the best
   path's score) and the bits of the final argmax.
4. Oblivious traceback: Bob holds per model an encrypted one-hot vector e_t of the best
   path's state.  At T it is the final tournament's outcome: the root's weight 1 flows down
   its tree, a match with bit b sending v b to its right operand and v - v b to its left.
   Then e_t(l) = sum_j of the weight e_(t+1)(j) reaches leaf l through target j's tree at
   frame t + 1: one batch of products per tree level and step
   (:func:`protocols.stages.dgk.bob_select_products`, one round trip; one level for
   left-to-right models).  Bob learns nothing: bits, weights and products are ciphertexts.
5. Output, by the public ``output`` rule, packed (the values are small: one decryption per
   ciphertext): ``"path"`` -- per model and frame the state q_t = sum_l l e_t(l);
   ``"segment"`` -- per model and frame [q_t in the segment's states], i.e. for the
   spotting composite (F1, K, F2: one pass through K) exactly the keyword's first and last
   frame, or nothing; Alice reports the longest pass
   (:func:`smc_hmm.hmm.spotting.segment_of`: the F-K loop may pass through K more than
   once, and she sees every pass).  ``reveal_score``: Alice also decrypts the best path's
   score.

Who learns what (``docs/security.md``, "viterbi and spot"), the default:

* Bob: ciphertexts, OT messages and Alice's padded choice bits (uniform), and the public
  sizes (T, the structure), in both directions.  A Bob who garbles, corrects or sends
  something else learns at most whether Alice aborts: her checks whose outcome depends
  on her data are deferred to after her last message.
* Alice: the output, and ok; she decrypts only uniformly masked values (statistical
  distance 2^-sigma each).  Whatever she sends, the circuit computes the output on some
  admissible input or gives ok = 0: a forged input passes the MAC with probability at
  most 3/p (:data:`protocols.stages.bound.SOUNDNESS`), so over n sessions she learns at
  most n times the bits of one output about Bob's models.  In mining her inputs are
  her own model's shares: shifting them is choosing her model.

The ``dgk`` mode (semi-honest):

* Bob: ciphertexts only, and the public sizes (T, the structure).  In both directions.
* Alice: the output (path or segment; the score if revealed); per comparison a masked
  value d = z + r (r of l + sigma bits: statistical distance 2^-sigma), a uniform bit and
  her own H = floor(d / 2^l), m = 2^l - d; per traceback product a weight plus a mask of
  sigma + 1 bits (:mod:`protocols.stages.dgk`, "compare and select").  With
  ``model_holder = "bob"`` also, per frame and emission row, Bob's log-density plus a
  fresh smooth blind of width R (what the forward algorithm shows her, with the same
  statistical bound over repeated frames, :mod:`smc_hmm.leakage`).  With
  ``model_holder = "alice"``: nothing about Bob's recording beyond the output (the
  rescaling's values are masked).  Nothing about paths other than the output: the
  backpointers never leave Bob unencrypted and the traceback's weights are encrypted.

Refusals.  A model outside the public bounds is refused by its holder before the run; in
mining, Bob's frames beyond the public feature bound are clipped and his run ends with the
deferred error after his last message (``ctx.defer``), so Alice's view is the same.

Cost of the default: the bound stage's packed encryptions and decryptions and about
12 garbled layers a frame (``docs/spotting.md``, "Cost").  Cost of the ``dgk`` mode: per
frame one comparison per edge beyond a target's first ((T - 1)(E - N) over the
run, E edges and N states) and the traceback's as many products; per comparison l DGK
bit encryptions and l + 1 zero tests by Alice, l + 1 blinded DGK terms by Bob, four
Paillier encryptions by Alice, and one decryption per packed ciphertext of masked values
(``docs/spotting.md``, "Cost").

Design notes (the ``dgk`` mode). Why per-slot re-encryption in spotting: the recursion
adds an emission to every delta, so Bob needs one ciphertext per frame and row; the
emission stage packs frames into slots, and Alice's decrypt-and-re-encrypt (she already
sees the blinded slots, as in forward) is far cheaper than T unpacked encryptions of
every frame's inputs. Why the fused compare-and-select: a separate secure multiplication
per match cost two more messages, two more decryptions and two more re-randomisations
than Alice's two extra encryptions. Why the tree descent for the traceback: it
multiplies only encrypted 0/1 weights by encrypted bits, one round per tree level, and
needs no equality test."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from protocols.stages import bound as bd
from protocols.stages import decision, dgk, emissions, garbled, maxplus
from protocols.stages.blinds import log_blinds
from protocols.stages.emissions import DIAG, DISCRETE, KINDS, input_bound
from protocols.stages.forward_scoring import ForwardParams, ForwardSpec
from protocols.stages.forward_scoring import encode_observations as forward_encode
from protocols.stages.maxplus import MaxPlusLayout
from protocols.stages.primitives import (
    MaskSpec,
    PrecisionParams,
    alice_rescale,
    bob_rescale,
    rescale_messages,
    rescale_randomizers,
)
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray, fixedpoint
from smc_hmm.crypto.fixedpoint import ldexp_int
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    PrecisionError,
    ProtocolError,
    SmcHmmError,
)
from smc_hmm.hmm import (
    DiscreteHMM,
    GaussianHMM,
)
from smc_hmm.hmm.spotting import segment_of
from smc_hmm.limits import MAX_SEQUENCE_LENGTH, MAX_STATES, MAX_WIDTH, check_at_most
from smc_hmm.messages import Ciphertexts, Key, Message, Public
from smc_hmm.protocol import params_from_config
from smc_hmm.runtime.inputs import load_frames, resolve_path

OUTPUTS = ("path", "segment", "model", *maxplus.STRING_RULES)
HOLDERS = ("bob", "alice")
#: How the recursion compares: ``garbled`` (one chain of circuits Bob garbles,
#: :mod:`protocols.stages.maxplus`), ``dgk`` (the thesis's interactive DGK tournaments),
#: ``auto`` (garbled: the default in both directions).
COMPARISONS = ("auto", "garbled", "dgk")


# -- public parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class ViterbiParams:
    """Public parameters of a secure Viterbi run (module docstring)."""

    model_holder: str = typed.one_of("bob", HOLDERS)
    output: str = typed.one_of("path", OUTPUTS)
    reveal_score: bool = typed.flag(True)
    #: s: fractional bits of every log-value in the recursion
    score_scale: int = typed.whole(32, 8, 64)
    #: |log b_j(x)| <= 2^emission_bound_bits nats for every admissible x (checked by the
    #: model holder before the run)
    emission_bound_bits: int = typed.whole(20, 4, 40)
    #: log-values of the emission stage at f = log_scale bits, features at feature_scale
    #: (garbled, model_holder "bob": the bound program's f is at most what keeps an
    #: emission inside the binding's MAC field, and its features are at
    #: ``bound_feature_scale``: :attr:`Plan.scale`, :attr:`Plan.feature_scale`)
    log_scale: int = 96
    feature_scale: int = 48
    bound_feature_scale: int = typed.whole(18, 4, 32)
    #: garbled: every emission is clamped to [-2^emission_clamp_bits, 2^clamp) nats inside
    #: the circuit (the public range of a reconstructed value; discrete models: the zero
    #: sentinel's bits instead)
    emission_clamp_bits: int = typed.whole(12, 4, 30)
    feature_bound: float = 100.0
    #: R: the emission stage's smooth blinds (model_holder = "bob")
    blind_nats: float = typed.blind_nats()
    #: nonzero transition and start probabilities are >= 2^-weight_floor_bits
    weight_floor_bits: int = typed.whole(42, 1, 128)
    sigma: int = typed.sigma()
    comparison: str = typed.one_of("auto", COMPARISONS)
    #: ``output = "model"``: per model the public offset (nats) added to its best score
    #: before the argmax over models (a garbage model's margin); empty: none
    offsets: tuple[float, ...] = ()
    #: ``string`` and ``match`` (:mod:`protocols.stages.maxplus`): per state the label its
    #: entry starts (-1: none) and the string's public slots L
    entries: tuple[int, ...] = ()
    slots: int = 0
    #: the recursion's deltas as carry-save pairs (few layers) or values (fewer AND gates,
    #: :class:`protocols.stages.maxplus.MaxPlusLayout`)
    carry_save: bool = True
    #: the model holder's models index one table of emission rows: equal rows of different
    #: models are computed once a frame (:meth:`Structure.of`; the structure then shows
    #: which rows of different models are equal)
    share_rows: bool = False

    def __post_init__(self):
        typed.check_fields(self)
        object.__setattr__(self, "offsets", tuple(float(v) for v in self.offsets))
        object.__setattr__(self, "entries", tuple(int(v) for v in self.entries))
        if self.output in maxplus.STRING_RULES and (
            self.comparison == "dgk" or self.reveal_score or not self.entries or self.slots < 1
        ):
            raise InvalidInputError(
                "a string output runs on the garbled recursion, reveals no score and needs "
                "the entry labels and the slots"
            )
        if any(not math.isfinite(v) or abs(v) > 1 << 20 for v in self.offsets):
            raise InvalidInputError("offsets must be finite numbers of nats, |offset| <= 2^20")
        if self.offsets and self.output != "model":
            raise InvalidInputError("offsets are for output 'model'")
        if self.output == "model" and self.comparison == "dgk":
            raise InvalidInputError("output 'model' runs on the garbled recursion, not 'dgk'")
        if self.score_scale > self.log_scale:
            raise InvalidInputError("score_scale cannot exceed log_scale")
        _ = self.forward  # validates the emission stage's parameters

    @property
    def garbled(self) -> bool:
        """Whether the recursion runs in garbled circuits (``comparison``)."""
        return self.comparison in ("garbled", "auto")

    @cached_property
    def forward(self) -> ForwardParams:
        """The emission stage's parameters (forward's): log_bound_bits covers B_e."""
        precision = PrecisionParams(
            log_scale=self.log_scale,
            log_bound_bits=self.emission_bound_bits + 1,
            blind_nats=self.blind_nats,
            weight_floor_bits=self.weight_floor_bits,
            sigma=self.sigma,
        )
        return ForwardParams(precision, self.feature_scale, float(self.feature_bound))

    @property
    def transition_bound(self) -> int:
        """B_a: |log a|, |log pi| of a nonzero probability, in whole nats."""
        return math.ceil(self.weight_floor_bits * math.log(2)) + 1

    @classmethod
    def from_config(cls, section: Mapping) -> ViterbiParams:
        return params_from_config(cls, section, "viterbi")


# -- the public structure of the models ------------------------------------------------------


@dataclass(frozen=True)
class Decoder:
    """One HMM to decode with its public structure: ``rows[j]`` the emission row of state j
    (states with the same row must have the same emission; default one row per state),
    ``segment`` the (first, stop) states of the ``segment`` output rule."""

    model: GaussianHMM | DiscreteHMM
    rows: tuple[int, ...] | None = None
    segment: tuple[int, int] | None = None

    def __post_init__(self):
        if not isinstance(self.model, GaussianHMM | DiscreteHMM):
            raise InvalidInputError("a decoder needs a GaussianHMM or DiscreteHMM")
        n = self.model.n_states
        rows = tuple(range(n)) if self.rows is None else tuple(int(r) for r in self.rows)
        if len(rows) != n or sorted(set(rows)) != list(range(max(rows) + 1)):
            raise InvalidInputError("rows: one emission row per state, numbered 0, 1, ...")
        object.__setattr__(self, "rows", rows)
        for j, r in enumerate(rows):
            first = rows.index(r)
            if first != j and not _same_emission(self.model, first, j):
                raise InvalidInputError(f"states {first} and {j} share a row but not an emission")
        if self.segment is not None:
            a, b = (int(v) for v in self.segment)
            if not 0 <= a < b <= n:
                raise InvalidInputError(f"segment {self.segment} is not a range of {n} states")
            object.__setattr__(self, "segment", (a, b))

    @property
    def n_rows(self) -> int:
        return max(self.rows) + 1

    def row_states(self) -> list[int]:
        """A representative state of every emission row."""
        return [self.rows.index(r) for r in range(self.n_rows)]


def _same_emission(model, i: int, j: int) -> bool:
    return _same_emission_of(model, i, model, j)


def _table_rows(decoders: Sequence[Decoder]) -> tuple[tuple[int, ...], ...]:
    """Every decoder's rows as indices into one table of their distinct emissions (equal
    means and covariances, or equal symbol distributions), numbered in order of first use."""
    table: list[tuple[object, int]] = []  # (model, state) of each row
    out = []
    for d in decoders:
        local = {}
        for r, j in enumerate(d.row_states()):
            local[r] = next(
                (g for g, (m, i) in enumerate(table) if _same_emission_of(m, i, d.model, j)),
                None,
            )
            if local[r] is None:
                local[r] = len(table)
                table.append((d.model, j))
        out.append(tuple(local[r] for r in d.rows))
    return tuple(out)


def _same_emission_of(a, i: int, b, j: int) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, DiscreteHMM):
        return bool(np.array_equal(a.emissionprob[i], b.emissionprob[j]))
    return (
        a.covariance_type == b.covariance_type
        and bool(np.array_equal(a.means[i], b.means[j]))
        and bool(np.array_equal(a.covars[i], b.covars[j]))
    )


def as_decoders(models) -> list[Decoder]:
    """A model, a Decoder, a mapping ``{"model", "rows", "segment"}`` (what a caller that
    does not import this package passes), or a sequence of them, as a list of Decoders."""
    if isinstance(models, Decoder | GaussianHMM | DiscreteHMM | Mapping):
        models = [models]
    out = []
    for m in models:
        if isinstance(m, Mapping):
            unknown = set(m) - {"model", "rows", "segment"}
            if unknown or "model" not in m:
                raise InvalidInputError(f"a decoder mapping has model, rows, segment: {unknown}")
            m = Decoder(m["model"], m.get("rows"), m.get("segment"))
        out.append(m if isinstance(m, Decoder) else Decoder(m))
    if not out:
        raise InvalidInputError("at least one model is needed")
    return out


def topology(model) -> tuple[tuple[int, int], ...]:
    """The public topology: the nonzero edges (l, j), sorted by target then source."""
    a = np.asarray(model.transmat)
    return tuple(
        sorted(((int(l), int(j)) for l, j in zip(*np.nonzero(a > 0))), key=lambda e: e[::-1])
    )


def _model_from_wire(n: int, r, e, s, shared: bool):
    """One model's (rows, edges, segment) of a peer's structure, validated (ValueError)."""
    if not isinstance(r, list) or len(r) != n or not all(type(v) is int for v in r):
        raise ValueError("rows")
    if not shared and sorted(set(r)) != list(range(max(r) + 1)):
        raise ValueError("rows")
    if not isinstance(e, list) or not 0 < len(e) <= n * n:
        raise ValueError("edges")
    pairs = []
    for x in e:
        if not (
            isinstance(x, list) and len(x) == 2 and all(type(v) is int and 0 <= v < n for v in x)
        ):
            raise ValueError("edge")
        pairs.append((x[0], x[1]))
    if len(set(pairs)) != len(pairs):
        raise ValueError("repeated edge")
    pairs.sort(key=lambda p: p[::-1])
    if s is not None and not (
        isinstance(s, list)
        and len(s) == 2
        and all(type(v) is int for v in s)
        and 0 <= s[0] < s[1] <= n
    ):
        raise ValueError("segment")
    return tuple(r), tuple(pairs), None if s is None else (s[0], s[1])


@dataclass(frozen=True)
class Structure:
    """The public structure of a run: the kind, M or d, and per model its states, emission
    rows, edges and segment (what the model holder sends as ``vit.spec``)."""

    kind: str
    width: int
    states: tuple[int, ...]
    rows: tuple[tuple[int, ...], ...]
    edges: tuple[tuple[tuple[int, int], ...], ...]
    segments: tuple[tuple[int, int] | None, ...]
    #: the rows index one table for every model (else each model's rows are its own)
    shared: bool = False

    @classmethod
    def of(cls, decoders: Sequence[Decoder], shared: bool = False) -> Structure:
        """The decoders' public structure; ``shared``: rows of different models with the
        same emission are one row of a common table, numbered in order of first use."""
        models = [d.model for d in decoders]
        kind, width = emissions.emission_kind(models)
        return cls(
            kind,
            width,
            tuple(m.n_states for m in models),
            _table_rows(decoders) if shared else tuple(d.rows for d in decoders),
            tuple(topology(m) for m in models),
            tuple(d.segment for d in decoders),
            shared,
        )

    def to_wire(self) -> dict:
        return {
            "kind": self.kind,
            "width": self.width,
            "states": list(self.states),
            "rows": [list(r) for r in self.rows],
            "edges": [[[l, j] for l, j in e] for e in self.edges],
            "segments": [None if s is None else list(s) for s in self.segments],
            "shared": self.shared,
        }

    @classmethod
    def from_wire(cls, spec) -> Structure:
        """A peer's structure, validated against the limits before any work."""
        try:
            if not isinstance(spec, dict) or set(spec) != {
                "kind",
                "width",
                "states",
                "rows",
                "edges",
                "segments",
                "shared",
            }:
                raise ValueError("fields")
            shared = spec["shared"]
            if not isinstance(shared, bool):
                raise ValueError("shared")
            kind, width, states = spec["kind"], spec["width"], spec["states"]
            if kind not in KINDS or type(width) is not int or width < 1:
                raise ValueError("kind or width")
            check_at_most("max_width", width, MAX_WIDTH, "the spec's width")
            if not isinstance(states, list) or not states:
                raise ValueError("states")
            if not all(type(n) is int and n > 0 for n in states):
                raise ValueError("states")
            check_at_most("max_states", sum(states), MAX_STATES, "the spec's states")
            if not all(
                isinstance(x, list) and len(x) == len(states)
                for x in (spec["rows"], spec["edges"], spec["segments"])
            ):
                raise ValueError("one rows, edges and segment entry per model")
            models = [
                _model_from_wire(n, r, e, s, shared)
                for n, r, e, s in zip(states, spec["rows"], spec["edges"], spec["segments"])
            ]
            rows, edges, segments = (list(x) for x in zip(*models))
            used = sorted({v for r in rows for v in r})
            if shared and used != list(range(len(used))):
                raise ValueError("shared rows")
        except (TypeError, ValueError) as e:
            raise ProtocolError(f"malformed viterbi structure ({e}): {str(spec)[:200]}") from e
        return cls(kind, width, tuple(states), tuple(rows), tuple(edges), tuple(segments), shared)

    # -- global indices -------------------------------------------------------------------

    @property
    def total(self) -> int:
        return sum(self.states)

    @property
    def state_offsets(self) -> list[int]:
        return [int(v) for v in np.cumsum([0, *self.states])[:-1]]

    @cached_property
    def total_rows(self) -> int:
        """The emission rows computed a frame."""
        return 1 + max(self.row_of)

    @cached_property
    def row_of(self) -> list[int]:
        """The global emission row of every global state (shared: the table's rows;
        otherwise each model's rows after the earlier models')."""
        out, base = [], 0
        for rows in self.rows:
            out += [base + r for r in rows]
            base = 0 if self.shared else base + max(rows) + 1
        return out

    def representatives(self) -> list[tuple[int, int]]:
        """(model, state) of the first state that has each global row."""
        states = [(k, j) for k, n in enumerate(self.states) for j in range(n)]
        first: dict[int, tuple[int, int]] = {}
        for g, r in enumerate(self.row_of):
            first.setdefault(r, states[g])
        return [first[r] for r in range(len(first))]

    @property
    def preds(self) -> list[list[int]]:
        """Per global target, its predecessors (global, ascending)."""
        out = []
        for edges, n, base in zip(self.edges, self.states, self.state_offsets):
            by_target = [[] for _ in range(n)]
            for l, j in edges:
                by_target[j].append(base + l)
            out += [sorted(p) for p in by_target]
        return out

    @property
    def edge_list(self) -> list[tuple[int, int, int]]:
        """Every global edge (model, l, j) in target order: the candidates' order."""
        out = []
        for k, edges in enumerate(self.edges):
            for l, j in sorted(edges, key=lambda e: (e[1], e[0])):
                out.append((k, l, j))
        return out

    def check_reachable(self) -> None:
        if any(not p for p in self.preds):
            raise InvalidInputError(
                "a state has no predecessor (a zero column of A): give it a transition in"
            )

    @property
    def n_inputs(self) -> int:
        return emissions.input_count(self.kind, self.width)


# -- the plan of a run (public) --------------------------------------------------------------


@dataclass
class Plan:
    """Every public number of one run: bounds, bit lengths, the tournaments, messages."""

    params: ViterbiParams
    structure: Structure
    length: int
    #: None before the key is known (the structure's checks, the DGK comparison spec):
    #: what needs the key size (the packing) refuses it
    key_bits: int | None
    dgk_pk: object = None

    def __post_init__(self):
        s = self.structure
        self.step = decision.Tournament.of([len(p) for p in s.preds])
        self.final = decision.Tournament.of(list(s.states))

    # -- bounds (nats, then units of 2^-s) -----------------------------------------------

    @property
    def step_nats(self) -> int:
        """A frame's largest |log b| + |log a| on a possible path: the public emission
        bound (dgk), or, garbled, the clamp 2^K of a Gaussian emission or a discrete
        log-probability above the floor."""
        b_a = self.params.transition_bound
        if not self.params.garbled:
            return (1 << self.params.emission_bound_bits) + b_a + 1
        if self.structure.kind == "discrete":
            return 2 * b_a + 1
        return (1 << self.params.emission_clamp_bits) + b_a + 1

    @property
    def emission_nats(self) -> int:
        """The largest |log b| in nats: the zero sentinel Z (discrete) or 2^B_e."""
        if self.structure.kind == "discrete":
            return self.zero_nats
        return 1 << self.params.emission_bound_bits

    @property
    def clamp_bits(self) -> int:
        """Garbled: K, every emission clamped to [-2^K, 2^K) nats in the circuit (discrete:
        wide enough for the sentinel -Z of a zero)."""
        if self.structure.kind == "discrete":
            return self.zero_nats.bit_length()
        return self.params.emission_clamp_bits

    @property
    def program_bits(self) -> int:
        """Garbled: bits of one emission of the bound program at scale f (a sign and one
        bit of rounding included)."""
        return self.emission_nats.bit_length() + self.scale + 2

    @property
    def _bound(self) -> bool:
        return self.params.garbled and self.params.model_holder == "bob"

    @property
    def scale(self) -> int:
        """f of the emission program: ``log_scale``, or (garbled, model_holder "bob") the
        largest f <= log_scale whose emissions fit the binding's MAC field (2^61 - 1)."""
        if not self._bound:
            return self.params.log_scale
        fit = 58 - self.emission_nats.bit_length()
        return max(self.params.score_scale, min(self.params.log_scale, fit))

    @property
    def input_bits(self) -> int:
        """Garbled: bits of one of Alice's encoded inputs (a one-hot entry, x, x^2 or a
        product at feature_scale), a sign included."""
        if self.structure.kind == "discrete":
            return 2
        return input_bound(self.params.feature_bound, self.feature_scale).bit_length() + 1

    @cached_property
    def bound_plan(self) -> bd.BoundPlan:
        """Garbled, model_holder "bob": the emission program's bound inputs."""
        s = self.structure
        return bd.BoundPlan(
            self.length, s.n_inputs, s.total_rows, self.input_bits, self.program_bits,
            self.params.sigma, self._key_bits,
        )  # fmt: skip

    @property
    def _key_bits(self) -> int:
        if self.key_bits is None:
            raise InvalidInputError("the plan's packing needs the key size")
        return self.key_bits

    @property
    def path_nats(self) -> int:
        """P: every possible path's |score|."""
        return self.length * self.step_nats

    @property
    def zero_nats(self) -> int:
        """Z: the sentinel of log 0."""
        return 2 * self.path_nats + 2

    @property
    def zeros(self) -> int:
        """How many sentinels a delta may carry: pi's, and discrete emissions' per frame."""
        return self.length + 1 if self.structure.kind == "discrete" else 1

    @property
    def value_bound(self) -> int:
        """Public bound on every delta and candidate, in units 2^-s."""
        top = max((abs(v) for v in self.params.offsets), default=0.0)
        offsets = math.ceil(top) + 1 if top else 0
        return (self.path_nats + self.zeros * self.zero_nats + offsets) << self.params.score_scale

    @property
    def bits(self) -> int:
        """l: the comparisons' bit length."""
        return self.value_bound.bit_length() + 1

    @property
    def emission_bound(self) -> int:
        """|log b| at scale s, the sentinel included."""
        return (self.emission_nats + 2) << self.params.score_scale

    def compare_spec(self, count: int) -> dgk.CompareSpec:
        return dgk.CompareSpec(self.bits, count, self.params.sigma)

    def select_spec(self, count: int) -> dgk.SelectSpec:
        return dgk.SelectSpec(self.bits, count, self.key_bits, self.params.sigma)

    def product_spec(self, count: int) -> dgk.ProductSpec:
        return dgk.ProductSpec(count, self.key_bits, 1, self.params.sigma)

    # -- emissions ------------------------------------------------------------------------

    @cached_property
    def fspec(self) -> ForwardSpec:
        """The emission stage's layout (forward's): one emission row per state of one model."""
        s = self.structure
        return ForwardSpec(s.kind, s.width, (s.total_rows,), self.key_bits, self._stage_params)

    @cached_property
    def _stage_params(self) -> ForwardParams:
        fp = self.params.forward
        bits = fp.precision.log_bound_bits
        if self.structure.kind == "discrete":
            # the slots must hold the sentinel Z of a zero probability
            bits = max(bits, self.zero_nats.bit_length() + 1)
        if self.params.garbled and self.params.model_holder == "bob":
            # and (garbled spotting) an emission plus its uniform mask of mask_bits bits
            bits = max(bits, self.mask_bits + 1 - 3 - self.params.log_scale)
        return replace(fp, precision=replace(fp.precision, log_bound_bits=bits))

    @property
    def mask_bits(self) -> int:
        """Garbled: Bob's uniform mask of an emission at scale f, sigma bits wider than
        twice the emission's reach (statistical distance 2^-sigma)."""
        return garbled.rounding_mask_bits(self.reach_bound, self.params.sigma)

    @cached_property
    def maxplus(self) -> MaxPlusLayout:
        """Garbled: the public layout of the recursion's circuits (one bit wider than the
        comparisons, so that every difference of two values fits)."""
        s, p = self.structure, self.params
        if p.model_holder == "bob":  # her frames: the bound program, clamped
            keep = self.clamp_bits + p.score_scale
            em = maxplus.Emissions(self.bound_plan, self.shift, keep)
        else:  # mining: her own model's emissions, plain shares at scale s
            em = maxplus.Emissions(share_bits=self.bits + 1)
        return MaxPlusLayout(
            tuple(tuple(q) for q in s.preds),
            tuple(s.row_of),
            tuple(zip(s.state_offsets, s.states)),
            tuple(s.segments),
            self.length,
            self.bits + 1,
            p.output,
            p.reveal_score,
            "garbler" if p.model_holder == "bob" else "evaluator",
            self.offset_units,
            em,
            p.entries,
            p.slots,
            p.carry_save,
        )

    @property
    def offset_units(self) -> tuple[int, ...]:
        """``model``: the offsets at scale s (one per model; none given: zeros)."""
        models = len(self.structure.states)
        offsets = self.params.offsets or (0.0,) * models
        if len(offsets) != models:
            raise InvalidInputError(f"{len(offsets)} offsets for {models} models")
        if self.params.output != "model":
            return ()
        return tuple(ldexp_int(v, self.params.score_scale) for v in offsets)

    @property
    def shift(self) -> int:
        """f - s: the bits Alice's rounding (or the rescaling) drops."""
        return self.scale - self.params.score_scale

    @property
    def groups(self) -> int:
        return len(self.fspec.emissions(self.length).groups)

    @property
    def weight_scale(self) -> int:
        """Bob's (or Alice's) emission weights: f for discrete one-hot inputs, else f - fs."""
        if self.structure.kind == "discrete":
            return self.scale
        return self.scale - self.feature_scale

    @property
    def input_scale(self) -> int:
        return 0 if self.structure.kind == "discrete" else self.feature_scale

    @property
    def feature_scale(self) -> int:
        """fs of Alice's encoded frames: ``feature_scale`` (dgk, mining) or, for the bound
        program, ``bound_feature_scale`` (its inputs enter the circuit: fewer bits)."""
        return self.params.bound_feature_scale if self._bound else self.params.feature_scale

    @property
    def reach_bound(self) -> int:
        """Public bound on one emission (weights . input + constant) at scale f."""
        return self.emission_bound << self.shift

    # -- outputs --------------------------------------------------------------------------

    def output_bits(self, model: int) -> int:
        if self.params.output == "segment":
            return 1
        return max(1, (self.structure.states[model] - 1).bit_length())

    def output_chunks(self, model: int) -> list[range]:
        """Frames packed per output ciphertext."""
        per = max(1, (self.key_bits - 64) // self.output_bits(model))
        return [range(a, min(a + per, self.length)) for a in range(0, self.length, per)]

    @property
    def output_count(self) -> int:
        return sum(len(self.output_chunks(k)) for k in range(len(self.structure.states)))

    def output_bound(self) -> int:
        return 1 << (self.key_bits - 60)

    # -- messages -------------------------------------------------------------------------

    def messages(self) -> dict[str, Message]:
        s, p, T = self.structure, self.params, self.length
        layout = self.fspec.emissions(T)
        slots_bound = self.emission_bound + ((math.ceil(p.blind_nats) + 2) << p.score_scale)
        models = len(s.states)
        # the model holder's encrypted emission program (mining: with log pi and log a)
        weights = (s.total_rows, s.n_inputs)
        program = (
            Ciphertexts(self.weight_scale, self.reach_bound << p.feature_scale, weights),
            Ciphertexts(p.log_scale, self.reach_bound, (s.total_rows,)),
        )
        eb = self.emission_bound
        out = {
            **_static_messages(),
            "obs": layout.obs_message("vit.obs", self.input_scale, self.fspec.obs_slot_bound),
            "emit": layout.emit_message("vit.emit", p.log_scale, 2 * self.fspec.emit_bound),
            "slots": Message("vit.slots", Ciphertexts(0, slots_bound, (T, s.total_rows))),
            "model": Message(
                "vit.model",
                (*program, Ciphertexts(0, eb, (s.total,)), Ciphertexts(0, eb, (len(s.edge_list),))),
            ),
            "gmodel": Message("vit.gmodel", program),
            "share": garbled.rounded_share_message(
                T * s.total_rows, self.reach_bound, p.sigma, self.key_bits, "vit.share"
            ),
            "output": Message(
                "vit.output", Ciphertexts(0, self.output_bound(), (self.output_count,), fresh=True)
            ),
            "score": Message("vit.score", Ciphertexts(0, self.value_bound, (models,), fresh=True)),
        }
        return out

    def rescale_spec(self) -> MaskSpec:
        s = self.structure
        return MaskSpec(
            (self.params.log_scale,),
            (self.reach_bound,),
            (self.length * s.total_rows,),
            self.params.sigma,
        )

    def declared(self) -> list[Message]:
        """Every message of the run (the transcript harness's declarations)."""
        out = list(self.messages().values())
        if self.params.garbled:
            out += list(garbled.setup_messages(self.maxplus.cots).values())
            if self.params.model_holder == "bob":
                out += list(self.bound_plan.messages().values())
            return out + maxplus.messages(self.maxplus, "vit")
        out += list(self.compare_spec(1).messages().values())
        out += list(self.select_spec(1).messages().values())
        high = self.select_spec(1).compare.high_bound
        out += list(self.product_spec(1).messages(high).values())
        out += list(rescale_messages(self.rescale_spec(), self.shift))
        return out

    # -- randomizers (the offline phase) ---------------------------------------------------

    def randomizers(self) -> dict[str, int]:
        """The fresh randomizers each role draws in the run (the offline phase's count)."""
        s, T = self.structure, self.length
        if self.params.garbled and self.params.model_holder == "bob":
            return self.bound_plan.randomizers()
        if self.params.garbled:  # mining: her model out, the packed masked emissions back
            _, per = garbled.rounded_share_slots(self.reach_bound, self.params.sigma, self.key_bits)
            return {"alice": s.total_rows * (s.n_inputs + 1), "bob": -(-T * s.total_rows // per)}
        alice = bob = 0
        for tour, times in ((self.step, T - 1), (self.final, 1)):
            for matches in tour.matches:
                c = self.select_spec(len(matches)).randomizers()
                alice, bob = alice + times * c["alice"], bob + times * c["bob"]
        for count, times in self._descents():
            m = self.product_spec(count).randomizers()
            alice, bob = alice + times * m["alice"], bob + times * m["bob"]
        if self.params.model_holder == "bob":
            alice += self.groups * s.n_inputs + T * s.total_rows
            bob += self.groups * s.total_rows
        else:
            alice += s.total_rows * (s.n_inputs + 1) + s.total + len(s.edge_list)
            r = rescale_randomizers(T * s.total_rows)
            alice, bob = alice + r["alice"], bob + r["bob"]
        bob += self.output_count + (len(s.states) if self.params.reveal_score else 0)
        return {"alice": alice, "bob": bob}

    def _descents(self) -> list[tuple[int, int]]:
        """(multiplications, times) of the traceback's batches."""
        out = []
        for r in reversed(range(len(self.step.matches))):
            out.append((len(self.step.matches[r]), self.length - 1))
        known = set()
        for r in reversed(range(len(self.final.matches))):
            matches = self.final.matches[r]
            count = sum((g, node) in known for g, node, _, _ in matches)
            if count:
                out.append((count, 1))
            for g, _, a, b in matches:
                known |= {(g, a), (g, b)}
        return out


# -- emission programs (the model holder's) --------------------------------------------------


def emission_program(decoders: Sequence[Decoder], plan: Plan):
    """Integer emission weights (rows, n_inputs) at ``plan.weight_scale``, constants at f, per
    global emission row (:meth:`Structure.representatives`); checks the public bound first
    (PrecisionError)."""
    p, s = plan.params, plan.structure
    f = plan.scale
    bound = 1 << p.emission_bound_bits
    weights, consts = [], []
    runs: list[tuple[int, list[int]]] = []  # consecutive rows of one model, batched
    for k, j in s.representatives():
        if runs and runs[-1][0] == k:
            runs[-1][1].append(j)
        else:
            runs.append((k, [j]))
    for k, reps in runs:
        m = decoders[k].model
        if s.kind == "discrete":
            log_b = np.asarray(m.log_emissionprob)[reps]
            finite = log_b[np.isfinite(log_b)]
            if finite.size and float(np.abs(finite).max()) > bound:
                raise PrecisionError(
                    "an emission log-probability exceeds the public bound "
                    f"2^{p.emission_bound_bits} nats"
                )
            for row in log_b:
                weights.append(
                    [
                        -(plan.zero_nats << f) if not np.isfinite(v) else ldexp_int(float(v), f)
                        for v in row
                    ]
                )
                consts.append(0)
            continue
        w, c = emissions.integer_program(
            emissions.weight_rows(m, s.kind)[reps],
            f=f,
            fs=plan.feature_scale,
            feature_bound=p.feature_bound,
            limit_nats=bound,
            over=f"the public bound 2^{p.emission_bound_bits} (raise emission_bound_bits or "
            "lower feature_bound)",
        )
        weights += list(w)
        consts += list(c)
    return np.array(weights, dtype=object), np.array(consts, dtype=object)


def score_error_bound(decoders: Sequence[Decoder], plan: Plan, feature_max=None) -> float:
    """Nats: a bound on |secure - plaintext| of a best path's score (and of every
    candidate a decision compares).  Discrete models and the DGK mode: T 2^-s, the
    rounding of each emission to scale s.  The garbled Gaussian path computes the exact
    Viterbi recursion of *quantized* frames and weights (her X = round(x 2^fs) and the
    rounded products, Bob's weights at f - fs): per frame and state at most
    sum_k |w_k| 2^-(fs+1) (x_k) or |w_k| 2^-(fs+1) (|x_i| + |x_j| + 2) (a product), plus
    |w~_k - w_k| |phi_k| (his rounding) and 2^-s (the floor to scale s), summed over the
    frames.  ``feature_max`` bounds |x| (default: the public feature bound)."""
    p, s, T = plan.params, plan.structure, plan.length
    floor = 2.0**-p.score_scale
    if s.kind == "discrete" or not plan._bound:
        return T * 2 * floor
    fb = float(p.feature_bound if feature_max is None else feature_max)
    q, ws = 2.0 ** -(plan.feature_scale + 1), 2.0 ** -(plan.weight_scale + 1)
    worst = 0.0
    for d in decoders:
        w = emissions.weight_rows(d.model, s.kind)[:, :-1]
        if s.kind == DIAG:
            dims = w.shape[1] // 2
            spread = np.concatenate([np.full(dims, 1.0), np.full(dims, 2 * fb + 2)])
            reach = np.concatenate([np.full(dims, fb), np.full(dims, fb * fb)])
        else:
            rows, cols = np.triu_indices(s.width + 1)
            lin = cols[:-1] == s.width
            spread = np.where(lin, 1.0, 2 * fb + 2)
            reach = np.where(lin, fb, fb * fb)
        err = (np.abs(w) * spread * q).sum(axis=1) + (reach * ws).sum() + 2.0**-plan.scale
        worst = max(worst, float(err.max()))
    return T * (worst + 2 * floor)


def log_parts(decoders: Sequence[Decoder], plan: Plan):
    """log pi (every state) and log a (every edge, in the plan's order) at scale s, log 0
    as -Z; checks that nonzero probabilities are above the public floor."""
    s = plan.params.score_scale
    floor = math.ldexp(1.0, -plan.params.weight_floor_bits)
    starts, trans = [], []
    for d in decoders:
        pi, a = np.asarray(d.model.startprob), np.asarray(d.model.transmat)
        for v in (*pi[pi > 0], *a[a > 0]):
            if v < floor:
                raise PrecisionError(
                    f"a probability of {v:.3g} is below the public floor "
                    f"2^-{plan.params.weight_floor_bits}"
                )
        starts += [ldexp_int(math.log(v), s) if v > 0 else -(plan.zero_nats << s) for v in pi]
    for k, l, j in plan.structure.edge_list:
        trans.append(ldexp_int(math.log(float(decoders[k].model.transmat[l, j])), s))
    return np.array(starts, dtype=object), np.array(trans, dtype=object)


def encoded_inputs(observations, structure: Structure, params: ViterbiParams):
    """Plain integer inputs (T, n_inputs) of a frame sequence (the mining evaluator's
    exponents): one-hot rows, or x_i and x_i^2 (diagonal), or the distinct products; and
    whether a feature had to be clipped to the public bound."""
    kind, width = structure.kind, structure.width
    x, clipped = emissions.checked_observations(
        observations, kind, width, params.feature_bound, clip=True
    )
    if kind == DISCRETE:
        return np.eye(width, dtype=np.int64)[x].astype(object), False
    ints, _ = fixedpoint.encode(emissions.frame_products(x, kind), params.feature_scale)
    return ints, clipped


def bound_inputs(observations, plan: Plan):
    """Alice's encoded frames for the bound program (T, n_inputs) integers at the plan's
    feature scale fs: one-hot rows, or X = round(x 2^fs) and each product as
    floor((X_i X_j + 2^(fs-1)) / 2^fs) of the rounded features (so that a circuit can check
    a square exactly).  A feature beyond the public bound is refused before anything is
    sent (her own input's format)."""
    structure, params = plan.structure, plan.params
    if structure.kind == DISCRETE:
        return encoded_inputs(observations, structure, params)[0]
    x, _ = emissions.checked_observations(
        observations, structure.kind, structure.width, params.feature_bound
    )
    return bd.encode_products(x, structure.kind == DIAG, plan.feature_scale)


# -- the roles ---------------------------------------------------------------------------------


def _check_length(length, peer) -> int:
    if type(length) is not int or length < 1:
        raise ProtocolError(f"sequence length {length!r} is not a positive int")
    check_at_most("max_sequence_length", length, MAX_SEQUENCE_LENGTH, f"{peer}'s sequence length")
    return length


def alice(ctx, private, params: ViterbiParams, peer: str = "bob", reference=None):
    """Alice (key holder, output party): ``private`` is her observations (model_holder
    "bob") or her models (model_holder "alice").  Returns per model ``{"path": [...]}`` or
    ``{"segment": (first, last) or None}``, with ``"score"`` if revealed; ``string``:
    ``{"count", "labels"}``; ``match`` (``reference``: her pad of Bob's reference): None."""
    pk = ctx.keypair[0]
    msg0 = _static_messages()
    with ctx.phase("setup"):
        plan, decoders = _alice_structure(ctx, private, params, msg0, peer)  # step 0
        if params.garbled:
            ctx.send(peer, msg0["key"], pk)
            evaluator = garbled.alice_setup(ctx, plan.maxplus.cots, peer)
        else:
            dgk_sk = dgk.alice_send_keys(ctx, plan.compare_spec(1), peer)
    if params.garbled:
        return _alice_garbled(ctx, private, decoders, plan, evaluator, peer, reference)
    return _alice_dgk(ctx, private, decoders, plan, dgk_sk, peer)  # the thesis's recursion


def _alice_dgk(ctx, private, decoders, plan: Plan, dgk_sk, peer):
    """Steps 1-5 of the thesis's recursion (``comparison = "dgk"``), Alice: the emissions,
    one DGK tournament per frame, the traceback by selections, the packed output."""
    pk, sk = ctx.keypair
    params, msg, msg0, length = plan.params, plan.messages(), _static_messages(), plan.length
    with ctx.phase("emissions"):
        if params.model_holder == "bob":
            # Step 1 (a): packed frames out; blinded packed emissions in, one slot each back
            ctx.send(peer, msg["obs"], forward_encode(pk, private, plan.fspec))
            y = emissions.alice_receive(ctx, msg["emit"], plan.fspec.emissions(length), peer)
            half = 1 << (plan.shift - 1)
            slots = [[(int(v) + half) >> plan.shift for v in row] for row in y]
            bound = msg["slots"].body.bound
            ctx.send(peer, msg["slots"], CipherArray.encrypt_encoded(pk, slots, 0, bound))
        else:
            # Step 1 (b): her encrypted model; the rescaling of Bob's emissions
            weights, consts = emission_program(decoders, plan)
            starts, trans = log_parts(decoders, plan)
            fields = msg["model"].fields
            model = [
                CipherArray.encrypt_encoded(pk, weights, plan.weight_scale, fields[0].bound),
                CipherArray.encrypt_encoded(pk, consts, params.log_scale, fields[1].bound),
                CipherArray.encrypt_encoded(pk, starts, 0, fields[2].bound),
                CipherArray.encrypt_encoded(pk, trans, 0, fields[3].bound),
            ]
            ctx.send(peer, msg["model"], model)
            alice_rescale(ctx, plan.shift, plan.rescale_spec(), peer)
    with ctx.phase("recursion"):
        # Step 2: one tournament per frame; she keeps her shares of the bits
        shares = [
            decision.alice_tournament(ctx, dgk_sk, plan.step, plan, peer) for _ in range(length - 1)
        ]
    with ctx.phase("termination"):
        final = decision.alice_tournament(ctx, dgk_sk, plan.final, plan, peer)  # step 3
    with ctx.phase("traceback"):
        decision.alice_descend(ctx, plan.final, final, True, plan, peer)  # step 4
        for t in reversed(range(length - 1)):
            decision.alice_descend(ctx, plan.step, shares[t], False, plan, peer)
    with ctx.phase("output"):
        # Step 5: the packed output (and the scores)
        packed = [int(v) for v in ctx.recv(peer, msg["output"]).decrypt_ints(sk)]
        scores = None
        if params.reveal_score:
            scores = [int(v) for v in ctx.recv(peer, msg["score"]).decrypt_ints(sk)]
        # the last message is hers: a refusal Bob defers lands after she has everything
        ctx.send(peer, msg0["done"], True)
    return _outputs(plan, packed, scores)


def _alice_structure(ctx, private, params: ViterbiParams, msg0, peer):
    """Step 0, Alice: the model holder's structure (hers checked before it is sent), the
    data holder's T; the run's plan and her decoders (None when Bob holds the models)."""
    pk, _ = ctx.keypair
    if params.model_holder == "bob":
        structure = Structure.from_wire(ctx.recv(peer, msg0["spec"]))
        structure.check_reachable()
        length = _observation_length(private)
        ctx.send(peer, msg0["length"], length)
        return Plan(params, structure, length, pk.bits), None
    decoders = as_decoders(private)
    structure = Structure.of(decoders, params.share_rows)
    structure.check_reachable()
    probe = Plan(params, structure, 1, pk.bits)
    emission_program(decoders, probe)  # her own checks, before anything is sent
    log_parts(decoders, probe)
    ctx.send(peer, msg0["spec"], structure.to_wire())
    length = _check_length(ctx.recv(peer, msg0["length"]), peer)
    return Plan(params, structure, length, pk.bits), decoders


def _alice_garbled(ctx, private, decoders, plan: Plan, evaluator, peer, reference=None):
    """Steps 1-5 of the garbled default, Alice: her shares of the emissions, then the
    chain of circuits Bob garbles; the output she alone decodes."""
    msg, msg0 = plan.messages(), _static_messages()
    starts = trans = None  # the edge holder's: Bob's in spotting
    binding = shares = None
    with ctx.phase("emissions"):
        if plan.params.model_holder == "bob":
            # Step 1 (a): her packed frames out; the masked packed emissions and their MAC
            # slots in (the bound stage: she decrypts only uniform values)
            phi = bound_inputs(private, plan)
            binding = bd.alice_bound(ctx, plan.bound_plan, phi, peer)
        else:
            # Step 1 (b): her encrypted emission program out; her rounded shares back
            shares, starts, trans = _alice_mining_shares(ctx, decoders, plan, msg, peer)
    with ctx.phase("recursion"):  # steps 2-5 in the chain of circuits Bob garbles
        values, scores = maxplus.alice_maxplus(
            ctx, evaluator, plan.maxplus, shares, starts, trans,
            binding=binding, reference=reference, prefix="vit",
        )  # fmt: skip
    with ctx.phase("output"):
        ctx.send(peer, msg0["done"], True)
    return _results(plan, values, scores)


def _observation_length(observations) -> int:
    obs = np.asarray(observations)
    if obs.ndim == 0 or obs.shape[0] == 0:
        raise InvalidInputError("the observation sequence is empty")
    return int(obs.shape[0])


def _outputs(plan: Plan, packed: list[int], scores) -> list[dict]:
    values, at = [], 0
    for k in range(len(plan.structure.states)):
        w = plan.output_bits(k)
        values.append([])
        for chunk in plan.output_chunks(k):
            v = packed[at]
            at += 1
            values[-1] += [(v >> (i * w)) & ((1 << w) - 1) for i in range(len(chunk))]
    return _results(plan, values, scores)


def _results(plan: Plan, outputs, scores):
    """Per model ``{"path": ...}`` or ``{"segment": ...}`` (and ``"score"``) from the
    per-frame output values; ``model``: ``{"model": index}`` (and ``"scores"``)."""
    if plan.params.output == "match":
        return None
    if plan.params.output == "string":
        count, labels = outputs
        return {"count": count, "labels": labels}
    if plan.params.output == "model":
        result: dict = {"model": int(outputs)}
        if scores is not None:
            result["scores"] = [_score(plan, v) for v in scores]
        return result
    out = []
    for k, values in enumerate(outputs):
        result: dict = {}
        if plan.params.output == "path":
            result["path"] = values
        else:
            first, last = segment_of(values)
            result["segment"] = None if first is None else (first, last)
        if scores is not None:
            result["score"] = _score(plan, scores[k])
        out.append(result)
    return out


def _score(plan: Plan, v: int) -> float:
    """A best path's score from its integer at scale s (-inf below every path's)."""
    limit = plan.path_nats << plan.params.score_scale
    return -math.inf if v < -limit else v / 2**plan.params.score_scale


def bob(ctx, private, params: ViterbiParams, peer: str = "alice", reference=None):
    """Bob (evaluator): ``private`` is his models (model_holder "bob": HMMs or
    :class:`Decoder` s) or his observations (model_holder "alice").  Returns None, or
    (``match``, ``reference`` his padded reference's bits) ``{"match": bit}``."""
    msg0 = _static_messages()
    with ctx.phase("setup"):
        # Step 0: the model holder's public structure, the data holder's T, Alice's keys
        structure, length, mine = _bob_structure(ctx, private, params, msg0, peer)
        if params.garbled:
            pk = ctx.recv(peer, msg0["key"])
            plan = Plan(params, structure, length, pk.bits)
            garbler = garbled.bob_setup(ctx, plan.maxplus.cots, peer)
        else:
            plan = Plan(params, structure, length, None)  # before the key: the comparison
            pk, dgk_pk = dgk.bob_recv_keys(ctx, plan.compare_spec(1), peer)
            _ = dgk_pk.table
            plan = Plan(params, structure, length, pk.bits, dgk_pk)
    if params.garbled:
        return _bob_garbled(ctx, mine, plan, garbler, peer, reference)
    return _bob_dgk(ctx, mine, plan, peer)  # the thesis's recursion


def _bob_dgk(ctx, mine, plan: Plan, peer):
    """Steps 1-5 of the thesis's recursion (``comparison = "dgk"``), Bob: the emissions,
    the delta recursion with one DGK tournament per frame, the traceback, the output."""
    params, structure, length = plan.params, plan.structure, plan.length
    msg, msg0 = plan.messages(), _static_messages()
    with ctx.phase("emissions"):
        if params.model_holder == "bob":
            emit, starts, trans = _bob_emissions(ctx, mine, plan, msg, peer)
        else:
            emit, starts, trans = _mining_emissions(ctx, mine, plan, msg, peer)
    row_of = np.array(structure.row_of)
    with ctx.phase("recursion"):
        edges = structure.edge_list
        sources = np.array([base + l for (k, l, _), base in zip(edges, _edge_bases(structure))])
        offsets = [int(v) for v in np.cumsum([0, *plan.step.sizes])[:-1]]
        delta = _plus(emit[0][row_of], starts).with_bound(plan.value_bound)
        bits = []
        for t in range(1, length):
            candidates = _plus(delta[sources], trans).with_bound(plan.value_bound)
            best, round_bits = decision.bob_tournament(
                ctx, candidates, plan.step, plan, offsets, peer
            )
            bits.append(round_bits)
            delta = (best + emit[t][row_of]).with_bound(plan.value_bound)
    with ctx.phase("termination"):
        final_offsets = structure.state_offsets
        scores, final_bits = decision.bob_tournament(
            ctx, delta, plan.final, plan, final_offsets, peer
        )
    with ctx.phase("traceback"):
        leaves = decision.bob_descend(
            ctx, [None] * len(structure.states), plan.final, final_bits, plan, peer
        )
        e = CipherArray.concatenate([w for group in leaves for w in group])
        history = [e]
        preds = structure.preds
        for t in reversed(range(length - 1)):
            weights = [e[j : j + 1] for j in range(structure.total)]
            flows = decision.bob_descend(ctx, weights, plan.step, bits[t], plan, peer)
            e = _gather(flows, preds, structure.total)
            history.append(e)
        history.reverse()
    with ctx.phase("output"):
        packed = _pack_outputs(plan, history)
        ctx.send(peer, msg["output"], packed)
        if params.reveal_score:
            ctx.send(peer, msg["score"], scores)
        ctx.recv(peer, msg0["done"])
    return None


def _bob_structure(ctx, private, params: ViterbiParams, msg0, peer):
    """Step 0, Bob: (the structure, T, his decoders or his encoded frames).  His models are
    checked before anything is sent; his frames beyond the public bound are clipped and
    the run refused only after his last message."""
    if params.model_holder == "bob":
        decoders = as_decoders(private)
        structure = Structure.of(decoders, params.share_rows)
        structure.check_reachable()
        probe = Plan(params, structure, 1, None)  # the shortest run, before the key
        emission_program(decoders, probe)  # local checks before anything is sent
        log_parts(decoders, probe)
        ctx.send(peer, msg0["spec"], structure.to_wire())
        length = _check_length(ctx.recv(peer, msg0["length"]), peer)
        ctx.charge_frames(length)  # a serving Bob's per-client budget (public T)
        return structure, length, decoders
    structure = Structure.from_wire(ctx.recv(peer, msg0["spec"]))
    structure.check_reachable()
    inputs, clipped = encoded_inputs(private, structure, params)
    ctx.send(peer, msg0["length"], inputs.shape[0])
    if clipped:  # his private data: refused only after his last message
        ctx.defer(
            InvalidInputError(
                f"a feature exceeds the public feature_bound {params.feature_bound:g}: "
                "it was clipped, and the run is refused"
            )
        )
    return structure, inputs.shape[0], inputs


def _bob_garbled(ctx, mine, plan: Plan, garbler, peer, reference=None):
    """Steps 1-5 of the garbled default, Bob: his shares of the emissions, then the chain
    of circuits he garbles."""
    msg, msg0 = plan.messages(), _static_messages()
    binding = None
    with ctx.phase("emissions"):
        if plan.params.model_holder == "bob":
            weights, consts = emission_program(mine, plan)
            starts, trans = log_parts(mine, plan)
            binding = bd.bob_bound(ctx, plan.bound_plan, weights, consts, peer)
            shares = binding.shares()
        else:  # mining: log pi and log a stay Alice's, inside her circuit inputs
            shares, starts, trans = _bob_mining_shares(ctx, mine, plan, msg, peer)
    with ctx.phase("recursion"):  # steps 2-5 in the chain of circuits he garbles
        bit = maxplus.bob_maxplus(
            ctx, garbler, plan.maxplus, shares, starts, trans,
            binding=binding, reference=reference, prefix="vit",
        )  # fmt: skip
    with ctx.phase("output"):
        ctx.recv(peer, msg0["done"])
    return None if bit is None else {"match": bit}


def _edge_bases(structure: Structure) -> list[int]:
    offsets = structure.state_offsets
    return [offsets[k] for k, _, _ in structure.edge_list]


def _plus(enc: CipherArray, addend) -> CipherArray:
    if isinstance(addend, CipherArray):
        return enc + addend
    return enc.add_encoded(np.asarray(addend, dtype=object))


def _gather(flows, preds, total: int) -> CipherArray:
    """e_t(l) = the sum over targets j of the weight reaching leaf l of j's tree."""
    parts: list[list] = [[] for _ in range(total)]
    for j, leaves in enumerate(flows):
        for i, w in enumerate(leaves):
            parts[preds[j][i]].append(w)
    out = []
    for l, ws in enumerate(parts):
        if not ws:
            raise ProtocolError(f"state {l} has no successor: it cannot be on a path")
        acc = ws[0]
        for w in ws[1:]:
            acc = acc + w
        out.append(acc.with_bound(1))
    return CipherArray.concatenate(out)


def _pack_outputs(plan: Plan, history: list[CipherArray]) -> CipherArray:
    """Per model and chunk of frames, one ciphertext: sum_t v_t 2^(w (t - t0)), v_t the state
    index (path) or [in the segment] (segment), by Horner's rule (w squarings a frame)."""
    s = plan.structure
    out = []
    for k, base in enumerate(s.state_offsets):
        n = s.states[k]
        if plan.params.output == "path":
            weights = list(range(n))
        else:
            a, b = s.segments[k]
            weights = [1 if a <= i < b else 0 for i in range(n)]
        w = plan.output_bits(k)
        for chunk in plan.output_chunks(k):
            acc = None
            for t in reversed(chunk):
                v = history[t][base : base + n].lincomb(np.array(weights, dtype=object))
                acc = v if acc is None else acc.mul(1 << w) + v
            out.append(acc.reshape(1).with_bound(plan.output_bound()))
    return CipherArray.concatenate(out)


def _emission_stage(ctx, decoders, plan: Plan, msg, peer, blinds):
    """model_holder "bob", step 1 (a) at Bob: the emission stage on Alice's packed frames,
    ``blinds`` (T, rows) added to every row's constant, the packed E(log b + blind) sent
    back.  Returns (log pi, log a) at scale s."""
    s, T = plan.structure, plan.length
    weights, consts = emission_program(decoders, plan)
    starts, trans = log_parts(decoders, plan)
    enc_obs = ctx.recv(peer, msg["obs"])
    layout = plan.fspec.emissions(T)
    if enc_obs.shape[0] != len(layout.groups):
        raise ProtocolError(f"{enc_obs.shape[0]} observation groups for {T} frames")
    offsets = [[int(c) + int(b) for c, b in zip(consts, row)] for row in blinds]
    if s.kind == "discrete":
        enc_obs.public_key.meter.count("ot", T)
    emissions.bob_send(
        ctx, msg["emit"], enc_obs, weights, plan.weight_scale, offsets, layout,
        plan.fspec.emit_bound, peer,
    )  # fmt: skip
    return starts, trans


def _bob_emissions(ctx, decoders, plan: Plan, msg, peer):
    """dgk mode, model_holder "bob": the emission stage with smooth blinds, then Alice's
    per-slot re-encryption, unblinded."""
    p, s, T = plan.params, plan.structure, plan.length
    gammas = [log_blinds(ctx.rng, s.total_rows, p.blind_nats, p.log_scale) for _ in range(T)]
    starts, trans = _emission_stage(ctx, decoders, plan, msg, peer, gammas)
    slots = ctx.recv(peer, msg["slots"])
    half = 1 << (plan.shift - 1)
    unblind = np.array(
        [[-((int(g) + half) >> plan.shift) for g in row] for row in gammas], dtype=object
    )
    e = slots.add_encoded(unblind).with_bound(plan.emission_bound)
    return e, starts, trans


def _alice_mining_shares(ctx, decoders, plan: Plan, msg, peer):
    """Garbled mining, Alice: her encrypted emission weights and constants out (log pi and
    log a never leave her: they are her circuit inputs); her rounded shares of Bob's
    emissions back (:func:`protocols.stages.garbled.alice_share_rounded`)."""
    pk, _ = ctx.keypair
    s, p = plan.structure, plan.params
    weights, consts = emission_program(decoders, plan)
    starts, trans = log_parts(decoders, plan)
    fields = msg["gmodel"].fields
    ctx.send(
        peer,
        msg["gmodel"],
        [
            CipherArray.encrypt_encoded(pk, weights, plan.weight_scale, fields[0].bound),
            CipherArray.encrypt_encoded(pk, consts, p.log_scale, fields[1].bound),
        ],
    )
    count, l = plan.length * s.total_rows, plan.maxplus.bits
    flat = garbled.alice_share_rounded(
        ctx, count, plan.reach_bound, plan.shift, l, p.sigma, peer, "vit.share"
    )
    return np.array(flat, dtype=object).reshape(plan.length, s.total_rows), starts, trans


def _bob_mining_shares(ctx, inputs, plan: Plan, msg, peer):
    """Garbled mining, Bob: his frames as exponents of her encrypted weights, then his
    rounded shares of every E(log b_r(x_t)) (he holds neither log pi nor log a)."""
    s, T = plan.structure, plan.length
    weights, consts = ctx.recv(peer, msg["gmodel"])
    emit = emissions.weighted_emissions(weights, inputs, plan.input_scale)  # (rows, T)
    emit = (emit + consts.reshape(s.total_rows, 1)).with_bound(plan.reach_bound)
    flat = emit.T.reshape(T * s.total_rows).with_bound(plan.reach_bound)
    l, sigma = plan.maxplus.bits, plan.params.sigma
    shares = garbled.bob_share_rounded(ctx, flat, plan.shift, l, sigma, peer, "vit.share")
    return np.array(shares, dtype=object).reshape(T, s.total_rows), None, None


def _mining_emissions(ctx, inputs, plan: Plan, msg, peer):
    """model_holder "alice": Alice's encrypted model, Bob's frames as exponents, then the
    rescaling to scale s."""
    s, T = plan.structure, plan.length
    weights, consts, starts, trans = ctx.recv(peer, msg["model"])
    emit = emissions.weighted_emissions(weights, inputs, plan.input_scale)  # (rows, T)
    emit = (emit + consts.reshape(s.total_rows, 1)).with_bound(plan.reach_bound)
    flat = emit.T.reshape(T * s.total_rows).with_bound(plan.reach_bound)
    small = bob_rescale(ctx, flat, plan.shift, plan.rescale_spec(), peer)
    e = small.with_scale(0).reshape(T, s.total_rows).with_bound(plan.emission_bound)
    return e, starts, trans


def _static_messages() -> dict[str, Message]:
    return {
        "spec": Message("vit.spec", Public((dict,))),
        "length": Message("vit.length", Public((int,))),
        "done": Message("vit.done", Public((bool,))),
        "key": Message("vit.pk", Key()),  # garbled: Alice's Paillier key (dgk: compare's)
    }


# -- inputs from a configuration ------------------------------------------------------------


def load_observations(value, base):
    """Observations from a config: symbols, frames (.npy/.json) or a WAV (bundled pipeline)."""
    obs = load_frames(value, base, bundled_features)
    if obs.ndim == 1 and obs.dtype.kind == "f" and np.all(obs == np.round(obs)):
        obs = obs.astype(np.int64)
    return obs


def bundled_features(path):
    """A WAV recording's frames through the bundled pipeline (what the bundled models
    expect), imported only when a recording is given."""
    from smc_hmm.data import load_pipeline

    return load_pipeline().features_from_wav(path)


def load_decoders(value, base):
    """HMMs from a model file (one decoder each, no ties, no segment)."""
    from smc_hmm.hmm.io import load_models

    try:
        models, _ = load_models(resolve_path(value, base))
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
    return models


def load_input(value, base):
    """A party's private input from a config: a model file (``.npz``, the model holder's)
    or observations (the data holder's: symbols, frames or a WAV file)."""
    if isinstance(value, str) and value.lower().endswith(".npz"):
        return load_decoders(value, base)
    return load_observations(value, base)


__all__ = [
    "COMPARISONS",
    "Decoder",
    "Plan",
    "Structure",
    "ViterbiParams",
    "alice",
    "as_decoders",
    "bob",
    "bundled_features",
    "load_input",
    "load_observations",
    "score_error_bound",
]
