"""Private audio matching: which of Bob's recordings Alice's snippet comes from, and where.

Thesis 003, 2.2.2 (music matching) and 5.2.1: Alice has a short audio snippet (0.25-0.5 s
in the bundled task) and her Paillier key pair; Bob has a collection of longer
recordings.  Bob scores every window -- every offset of every recording -- against
Alice's encrypted snippet, and a secure maximum gives Alice the best window's recording
and offset, or "no match" when no window beats a public threshold.  Bob learns nothing.

The score of window o of a recording is a normalised correlation of mel-band magnitudes
(:mod:`smc_hmm.data.match`, which also holds the plaintext matcher this protocol must
reproduce exactly): score_o = <Q, X[o:o+L]> c_o with Alice's integers Q (L frames x B
bands, centred per band, norm 2^a, bands summing to zero), Bob's integer frames X and his
per-window factor c_o ~ 2^k d_max / ||X[o:o+L] - mean||.

Protocol (S slots of s bits per ciphertext, s = bits(raw bound) + sigma + 2, S from the
key size and the collection's longest run of windows, all public).  The garbled default
holds against parties who deviate (``docs/security.md``, "match"); the ``dgk`` mode is
the thesis's, for semi-honest, non-colluding parties.

1. Bob -> Alice ``match.catalogue``: the recordings' ids and lengths in frames (public:
   the collection's catalogue, like a keyword vocabulary).
2. Alice -> Bob ``match.frames``: L, the snippet's length in frames (public).
3. Alice -> Bob ``match.pk``: her Paillier public key (the packing needs its size);
   ``dgk``: ``cmp.pk``, ``cmp.dgk``, her Paillier and DGK public keys
   (:func:`protocols.stages.dgk.alice_send_keys`).
4. Alice -> Bob ``match.snippet``: (L + S - 1) x B ciphertexts; the one of frame row t
   and band j packs the shifted copies Q[t, j], Q[t - 1, j], ..., Q[t - S + 1, j] (zero
   outside the snippet) into its S slots.  Garbled: also ``match.query``, E(Q[u, j]) for
   the L x B entries themselves.
5. Bob, for each block of S consecutive windows o0..o0+S-1 of a recording, raises the
   ciphertexts to his *plaintext* frame values X[o0 + t, j] -- one multi-exponentiation
   with shared bases (:meth:`smc_hmm.crypto.CipherArray.lincomb`, on his compute lanes or
   a Dask cluster) -- and gets slot k = sum_(u, j) Q[u, j] X[o0 + k + u, j], the raw
   score of window o0 + k: S windows' scores in one ciphertext.  He adds to every slot a
   mask m uniform on [R, 2^s - R) (R the raw bound), so that each slot is uniform on
   [0, 2^s), and R' 2^(S s) above the slots (a top mask: :func:`packed_masks`), and
   sends the re-randomised blocks (``match.masked``): whatever Alice encrypted, each
   plaintext she decrypts is uniform on Z_n to within 2^-sigma.  Garbled: with them
   ``match.mac``, the three masked limbs of one MAC of sum_o rho_o raw_o under his key
   alpha, computed from E(Q) as sum_(u, j) V[u, j] Q[u, j] with V[u, j] = sum_o
   alpha rho_o X[o + u, j] mod p (:func:`mac_weights`: the bound stage's check,
   ``docs/garbled.md``, "Bound shares").
6. Alice decrypts each block once and unpacks its slots y_o = raw_o + m_o.  Garbled,
   steps 6-8 are circuits Bob garbles on her slots as bound inputs
   (:func:`bob_maximum` / :func:`alice_maximum`): her padded choices of every slot; the
   MAC corrections and the seed of rho (``match.key``); one circuit per ``CHUNK``
   candidates (:func:`chunk_circuit`: each raw_o = y_o - m_o rebuilt and range-checked,
   times Bob's factor c_o, pooled in ``approx``, the chunk's best against the best so
   far, which it replaces only when strictly greater; the first starts from the public
   threshold), each carrying (range ok, best, index) to the next; her choices of D_A;
   the last circuit (:func:`final_circuit`): ok = range ok and [D_A = D_B], and Alice
   decodes (ok, the index ANDed with ok) -- ties go to the lowest index, a failed check
   ends her run with ``ProtocolError`` after her last message.  The chunks share one
   shape (but the first and the last), so a serving Bob builds it once, and no message
   grows with the catalogue.  ``dgk``: she re-encrypts every window's y_o
   (``match.slots``, one ciphertext per window).
7. ``dgk``: Bob removes his masks, multiplies each raw score by c_o (E(raw)^c_o) and
   forms the candidates: candidate 0 is the public threshold (E(tau), tau in score
   units), then every window (``exact``) or, in the ``approx`` mode, every
   ``stride``-th offset of each recording with the scores of ``stride`` adjacent windows
   summed (a pooled candidate; the threshold is ``stride`` tau).  Every value is
   shifted left by lb = bits(count - 1) bits and carries its candidate's code
   2^lb - 1 - index in the low bits: all values differ, and of two equal scores the
   lower index is the larger value.
8. ``dgk``: a tournament (:class:`protocols.stages.decision.Tournament`, consecutive
   pairs, ceil(log2(count)) rounds) of batched compare-and-selects
   (:func:`protocols.stages.dgk.bob_compare_select`: DGK with Veugen's correction, the
   max of each pair from the comparison's own values, Bob's masked differences packed
   many per ciphertext so Alice decrypts once per ciphertext; 4 messages a round).  Bob
   keeps E(max) and sends ``match.winner`` E(max + rho 2^lb), rho uniform over sigma
   bits beyond the values' bound: Alice reads the code in the low bits -- 0 for "no
   match", else the candidate's (recording, offset).  Either way the lowest index wins
   ties, so a window must beat the threshold strictly and the answer is exactly the
   plaintext matcher's.

Who learns what:

* Alice learns the answer: the winning candidate's (recording id, offset) or "no match".
  Besides it she sees only values masked with sigma = 40 statistical bits: every
  plaintext of step 5, uniform on Z_n to within 2^-sigma whatever she encrypted (a
  snippet entry 2^L above every slot read Bob's frame values in the clear above the
  slots until the top mask was added: ``test_a_huge_snippet_entry_reads_nothing_...``);
  garbled: the MAC limbs under masks of their own, the corrections (uniform: each hides
  alpha behind the hash of a label she does not hold) and labels; ``dgk``: the
  comparisons' masked differences, uniform bits and her own shares
  (:mod:`protocols.stages.dgk`) and the winner's value under rho.  A deviating Alice
  (garbled) can change only her snippet: a slot she shifts, or an E(Q) that disagrees
  with her packed snippet, fails the check (soundness 3/p, p = 2^61 - 1), and a snippet
  outside its bounds can at most make some raw score leave its range (the check then
  fails: one bit a session).  What the answer itself tells her over many chosen
  snippets is the argmax's leak: one answer per snippet (``docs/security.md``,
  "match"); the per-client frame budget of a serving Bob bounds the sessions.
* Bob learns L and nothing else: Paillier and DGK ciphertexts, OT messages and her
  padded choices; a deviating Bob learns at most whether she aborts.

The ``approx`` mode (``stride`` K >= 2) makes about 1/K of the comparisons: it is the
thesis's "approximate maximum value" that does not make all the comparisons.  It is
approximate in what it finds (the best pooled candidate, whose offset is within K - 1
frames of its best window), not in what it reveals: Alice learns the same kind of answer.
``docs/matching.md`` measures its accuracy beside the exact mode's.

Public parameters (:class:`MatchParams`): the mode and stride, the threshold (a
normalised correlation; by default the bundled data's calibrated one), the bands and the
quantisation bits, sigma; the snippet's length; the catalogue.  Run: ``smc-hmm match
--audio SNIPPET.wav``, ``smc-hmm bench match``, or ``protocol = "match"`` in a
parties.toml (Alice's ``snippet``: a WAV file or frames; Bob's ``collection``: ``fsdd``,
a folder of WAV files or an ``.npz`` collection); tests in
``tests/protocols/test_protocol_match.py``; design, cost and accuracy in
``docs/matching.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import NamedTuple

import numpy as np

from protocols.stages import bound as bd
from protocols.stages import dgk
from protocols.stages import garbled as gc_stage
from protocols.stages.decision import Tournament, alice_tournament, bob_tournament
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray
from smc_hmm.crypto.packing import PackingPlan, plain_bits, top_mask, unpack_slots
from smc_hmm.data.match import (
    Collection,
    Quantisation,
    Spectrogram,
    answer,
    candidates,
    load_match_manifest,
    match,
    window_counts,
)
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    PrecisionError,
    ProtocolError,
    SmcHmmError,
)
from smc_hmm.gc import arith, mac
from smc_hmm.gc.circuit import CARRY, Circuit, CompiledCircuit, built_once
from smc_hmm.limits import check_at_most
from smc_hmm.messages import Ciphertexts, Key, MaskedCiphertexts, Message, Public
from smc_hmm.protocol import ProtocolDescriptor, Role, params_from_config
from smc_hmm.runtime.inputs import load_frames, resolve_path

NAME = "match"
MODES = ("exact", "approx")
#: step 1 (Bob's catalogue: ids and lengths) and step 2 (the snippet's length), whose
#: declarations need no size
CATALOGUE = Message("match.catalogue", (Public((list,)), Public((list,))))
FRAMES = Message("match.frames", Public((int,)))
#: step 3 of the garbled default: Alice's Paillier key
KEY = Message("match.pk", Key())
#: the garbled default's key message (``match.key``: the MAC corrections and the seed)
TAG = "match"
#: candidates per circuit of the garbled maximum (a power of two: a candidate's index is
#: its circuit's number and its place there side by side); about 5 MiB of tables each
CHUNK = 256
#: the longest snippet (frames, 20 ms each: 10 s) a Bob accepts
MAX_FRAMES = 500
#: the most recordings and windows a catalogue may declare (checked by Alice on arrival)
MAX_RECORDINGS = 1_000_000
MAX_RECORDING_FRAMES = 1_000_000
#: the most frames a whole catalogue may declare (about 55 hours at 20 ms a frame: the
#: candidates of one query, up to this many, are listed in memory on both sides)
MAX_CATALOGUE_FRAMES = 10_000_000


@dataclass(frozen=True)
class MatchParams:
    """Public parameters.  ``mode``: ``exact`` (every window) or ``approx`` (every
    ``stride``-th offset, ``stride`` adjacent windows pooled).  ``threshold``: "no match"
    unless a window's normalised correlation (a pooled candidate's mean) beats it; None:
    the bundled data's calibrated threshold for the mode and stride.  The rest is the
    integer encoding (:class:`smc_hmm.data.match.Quantisation`) and the masks' sigma."""

    mode: str = typed.one_of("exact", MODES)
    stride: int = typed.whole(2, 2, 64)
    threshold: float | None = typed.number(None, -1.0, 1.0, optional=True)
    bands: int = typed.whole(24, 1, 1024)
    query_bits: int = 6
    frame_bits: int = 6
    factor_bits: int = 7
    floor_bits: int = 5
    sigma: int = typed.sigma()
    max_frames: int = typed.whole(MAX_FRAMES, 1, 100_000)
    #: step 8's maximum: ``garbled`` (circuits Bob garbles) or ``dgk`` (the thesis's
    #: tournament of DGK compare-and-selects)
    comparison: str = typed.one_of("garbled", dgk.COMPARISONS)

    def __post_init__(self):
        typed.check_fields(self)
        _ = self.quant  # checks the bits

    @property
    def pool(self) -> int:
        """Windows per candidate: 1 (exact) or the stride (approx)."""
        return 1 if self.mode == "exact" else self.stride

    @property
    def quant(self) -> Quantisation:
        return Quantisation(self.query_bits, self.frame_bits, self.factor_bits, self.floor_bits)

    def threshold_value(self) -> float:
        """The threshold: the given one, else the bundled data's for this pool."""
        if self.threshold is not None:
            return float(self.threshold)
        calibrated = load_match_manifest().get("thresholds", {})
        if str(self.pool) not in calibrated:
            raise ConfigError(
                f"no calibrated threshold for stride {self.pool}: set threshold explicitly"
            )
        return float(calibrated[str(self.pool)])

    @classmethod
    def from_config(cls, section: Mapping) -> MatchParams:
        """``[protocol]``: any field above (``name`` ignored)."""
        return params_from_config(cls, section, "match")


@dataclass(frozen=True)
class MatchLayout:
    """Everything public of one run: the parameters, the key size, the snippet's length
    L and the catalogue's lengths; the packing, the blocks, the bounds and the messages.

    Built in two phases: :meth:`before_key` (Bob, before Alice's key arrives in the
    ``dgk`` comparison: the sizes, bounds and comparison spec), then :meth:`build` (the
    packing too); asking a key-less layout for the packing is an error."""

    params: MatchParams
    key_bits: int | None
    length: int
    lengths: tuple[int, ...]

    @classmethod
    def before_key(cls, params: MatchParams, length: int, lengths) -> MatchLayout:
        return cls(params, None, int(length), tuple(int(t) for t in lengths))

    @classmethod
    def build(cls, params: MatchParams, key_bits: int, length: int, lengths) -> MatchLayout:
        layout = replace(cls.before_key(params, length, lengths), key_bits=int(key_bits))
        _ = layout.slots  # refuses a key too small for one slot
        return layout

    # sizes
    @property
    def bands(self) -> int:
        return self.params.bands

    @cached_property
    def windows(self) -> list[int]:
        return window_counts(self.lengths, self.length)

    @cached_property
    def total(self) -> int:
        """N: every window of every recording."""
        return sum(self.windows)

    @cached_property
    def candidates(self) -> list[tuple[int, int]]:
        """(recording, offset) of every candidate after the threshold."""
        return candidates(self.lengths, self.length, self.params.pool)

    @cached_property
    def count(self) -> int:
        """Candidates of the argmax, the threshold included."""
        return len(self.candidates) + 1

    # bounds and packing
    @cached_property
    def raw_bound(self) -> int:
        return self.params.quant.raw_bound(self.length, self.bands)

    @cached_property
    def score_bound(self) -> int:
        return self.params.quant.score_bound(self.length, self.bands)

    @property
    def value_bound(self) -> int:
        """The bound of every candidate's value (pooled: ``pool`` scores)."""
        return self.params.pool * self.score_bound

    @cached_property
    def label_bits(self) -> int:
        """Bits of a candidate's code in the low bits of its value."""
        return max(1, (self.count - 1).bit_length())

    @cached_property
    def folded_bound(self) -> int:
        """The bound of a value with its code: value 2^label_bits + code."""
        return (self.value_bound << self.label_bits) + (1 << self.label_bits) - 1

    @property
    def bits(self) -> int:
        """The comparisons' l: every folded value (and the threshold's) fits in l - 1 bits."""
        return self.folded_bound.bit_length() + 1

    def code(self, index: int) -> int:
        """Candidate ``index``'s code: distinct, larger for a lower index (so the lowest index
        wins a tie of values, as in the plaintext matcher)."""
        return (1 << self.label_bits) - 1 - index

    @property
    def winner_mask_bits(self) -> int:
        """The mask over the winner's value when its code is revealed."""
        return self.value_bound.bit_length() + 1 + self.params.sigma

    @property
    def winner_bound(self) -> int:
        return self.folded_bound + (1 << (self.winner_mask_bits + self.label_bits))

    @property
    def mask_bits(self) -> int:
        return self.raw_bound.bit_length() + self.params.sigma

    @property
    def slot_bits(self) -> int:
        """s = bits(raw bound) + sigma + 2: a masked raw score raw + m, m uniform on
        [raw bound, 2^s - raw bound), fills its slot, uniform on [0, 2^s) to 2^-(sigma+1)."""
        return self.mask_bits + 2

    def _fits(self, slots: int) -> bool:
        """Bob's multi-exponentiation checks |Alice's packed value| x (his row's L1 norm)
        against the plaintext space: with his public bound on that norm it must pass."""
        rows = self.length + slots - 1
        reach = self.params.quant.query_entry_bound() * rows * self.bands
        reach <<= self.params.frame_bits
        total = reach.bit_length() + (slots - 1) * self.slot_bits + 1
        room = plain_bits(self.key_bits) - self.params.sigma - 2  # the top mask's (step 5)
        return slots * self.slot_bits <= room and total <= plain_bits(self.key_bits)

    @cached_property
    def slots(self) -> int:
        """S: as many windows per ciphertext as the key holds, at most a recording's windows."""
        if self.key_bits is None:
            raise InvalidInputError("the packing of a match layout needs the key size")
        top = max(1, min(plain_bits(self.key_bits) // self.slot_bits, max(self.windows, default=1)))
        while top >= 1 and not self._fits(top):
            top -= 1
        if top < 1:
            raise PrecisionError(
                f"a {self.key_bits}-bit key cannot hold one {self.slot_bits}-bit score slot"
            )
        return top

    @property
    def plan(self) -> PackingPlan:
        return PackingPlan(self.slot_bits, self.slots)

    @property
    def rows(self) -> int:
        """Frame rows of Alice's packed snippet: L + S - 1."""
        return self.length + self.slots - 1

    @cached_property
    def blocks(self) -> list[tuple[int, int, int]]:
        """(recording, first offset, windows used) of every packed block of Bob's scores."""
        s = self.slots
        return [
            (r, o0, min(s, count - o0))
            for r, count in enumerate(self.windows)
            for o0 in range(0, count, s)
        ]

    def packed_bound(self, slot_bound: int) -> int:
        return self.plan.packed_bound(slot_bound)

    @property
    def slot_value_bound(self) -> int:
        """The bound of a masked raw score: its slot, [0, 2^s)."""
        return (1 << self.slot_bits) - 1

    # the argmax
    @cached_property
    def tournament(self) -> Tournament:
        return Tournament.of([self.count])

    def select_spec(self, count: int) -> dgk.SelectSpec:
        return dgk.SelectSpec(self.bits, count, self.key_bits, self.params.sigma)

    def compare_spec(self) -> dgk.CompareSpec:
        return dgk.CompareSpec(self.bits, 1, self.params.sigma)

    def threshold_units(self) -> int:
        value = self.params.threshold_value()
        return self.params.pool * self.params.quant.threshold_units(value, self.length, self.bands)

    # messages and randomizers
    def messages(self) -> dict[str, Message]:
        return {
            "catalogue": CATALOGUE,
            "frames": FRAMES,
            "snippet": Message(
                "match.snippet",
                Ciphertexts(
                    0,
                    self.packed_bound(self.params.quant.query_entry_bound()),
                    (self.rows, self.bands),
                ),
            ),
            "masked": Message("match.masked", MaskedCiphertexts(shape=(len(self.blocks),))),
            "query": Message(
                "match.query",
                Ciphertexts(0, self.params.quant.query_entry_bound(), (self.length, self.bands)),
            ),
            "mac": Message("match.mac", MaskedCiphertexts(shape=(1,))),
            "slots": Message("match.slots", Ciphertexts(0, self.slot_value_bound, (self.total,))),
            "winner": Message("match.winner", Ciphertexts(0, self.winner_bound, (1,), fresh=True)),
        }

    @property
    def garbled(self) -> bool:
        return self.params.comparison == "garbled"

    # the garbled default: the window scores as bound shares, steps 7-8 in circuits
    @cached_property
    def entries(self) -> list[int]:
        """The window (flat index) of each of Alice's circuit inputs: per candidate its
        ``pool`` windows (past a recording's end its last again), so that every chunk of
        candidates has the same shape."""
        starts, pool = np.cumsum([0, *self.windows]), self.params.pool
        return [
            int(starts[r]) + min(o + j, self.windows[r] - 1)
            for r, o in self.candidates
            for j in range(pool)
        ]

    @cached_property
    def share_plan(self) -> bd.SharePlan:
        """Every entry's slot of step 5 (s bits) entered whole and MAC-bound: values of
        s - sigma - 1 = bits(raw bound) + 1 bits."""
        sigma = self.params.sigma
        return bd.SharePlan(len(self.entries), self.slot_bits - sigma - 1, sigma, self.key_bits)

    @property
    def mac_bound(self) -> int:
        """|a MAC limb| = |sum_(u, j) V_l[u, j] Q[u, j]| < 2^21 L B (the query's bound)."""
        entries = self.length * self.bands * self.params.quant.query_entry_bound()
        return (1 << bd.MAC_LIMB_BITS) * entries

    @property
    def mac_bits(self) -> int:
        return self.mac_bound.bit_length() + 1

    @property
    def factor_width(self) -> int:
        """Bits of Bob's window factor c_o (unsigned)."""
        return self.params.quant.factor_bound().bit_length()

    @cached_property
    def chunks(self) -> list[range]:
        """The candidates (after the threshold) of each circuit of the maximum."""
        count = len(self.candidates)
        return [range(a, min(a + CHUNK, count)) for a in range(0, count, CHUNK)]

    def chunk_shape(self, index: int) -> ChunkShape:
        plan, pool = self.share_plan, self.params.pool
        return ChunkShape(
            size=len(self.chunks[index]),
            pool=pool,
            width=plan.width,
            bits=plan.bits,
            factor_width=self.factor_width,
            score_width=plan.bits + self.factor_width + pool.bit_length(),
            id_bits=max(1, (len(self.chunks) - 1).bit_length()),
            first=index == 0,
        )

    @property
    def cots(self) -> int:
        """Alice's input bits: every entry's slot, then D_A."""
        return self.share_plan.input_bits + mac.MAC_BITS

    def declared_messages(self) -> list[Message]:
        """Every message of a run (for the transcript harness and for readers)."""
        if self.garbled:
            own = self.messages()
            del own["slots"], own["winner"]
            if not self.total:  # no window: "no match" after step 5
                return [*own.values(), KEY]
            shapes = {self.chunk_shape(i) for i in range(len(self.chunks))}
            run = [
                gc_stage.choice_message(self.share_plan.input_bits),
                self.share_plan.messages(TAG)["key"],
                *(
                    gc_stage.circuit_messages(chunk_circuit(x), f"{TAG}.inputs")["tables"]
                    for x in shapes
                ),
                gc_stage.choice_message(mac.MAC_BITS, bd.CHECK_TAG),
                gc_stage.circuit_messages(final_circuit(self.chunk_shape(0)), f"{TAG}.final")[
                    "tables"
                ],
            ]
            return [*own.values(), KEY, *gc_stage.setup_messages(self.cots).values(), *run]
        out = list(self.messages().values()) + list(self.compare_spec().messages().values())
        for matches in self.tournament.matches:
            out += list(self.select_spec(len(matches)).messages().values())
        return out

    def randomizers(self) -> dict[str, int]:
        """Fresh randomizers: Alice's snippet and slot encryptions, Bob's re-randomised
        blocks, his threshold, every round of the tournament, the winner's reveal."""
        need = {"alice": self.rows * self.bands + self.total, "bob": len(self.blocks) + 2}
        if self.garbled:  # her query instead of her slots; his MAC limbs
            alice = self.rows * self.bands + self.length * self.bands
            return {"alice": alice, "bob": len(self.blocks) + (1 if self.total else 0)}
        for matches in self.tournament.matches:
            part = self.select_spec(len(matches)).randomizers()
            need = {k: need[k] + part[k] for k in need}
        return need


# -- inputs --------------------------------------------------------------------------------


def _collection(private) -> Collection:
    if isinstance(private, Collection):
        return private
    if isinstance(private, tuple) and len(private) == 2:
        return Collection(list(private[0]), list(private[1]))
    raise InvalidInputError("Bob's input is a Collection or a pair (ids, list of frames)")


def check_catalogue(ids, lengths) -> tuple[list[str], list[int]]:
    """Alice's check of Bob's catalogue: lists of the same size, within the public limits."""
    if not isinstance(ids, list) or not isinstance(lengths, list) or len(ids) != len(lengths):
        raise ProtocolError("match.catalogue: expected two lists of the same length")
    check_at_most("MAX_RECORDINGS", len(ids), MAX_RECORDINGS, "the catalogue's recordings")
    if not ids or not all(isinstance(i, str) for i in ids):
        raise ProtocolError("match.catalogue: ids must be strings, at least one")
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in lengths):
        raise ProtocolError("match.catalogue: lengths must be positive integers")
    for t in lengths:
        check_at_most("MAX_RECORDING_FRAMES", t, MAX_RECORDING_FRAMES, "a recording's frames")
    check_at_most(
        "MAX_CATALOGUE_FRAMES", sum(lengths), MAX_CATALOGUE_FRAMES, "the catalogue's frames"
    )
    return ids, lengths


def toeplitz(q_ints, layout: MatchLayout) -> np.ndarray:
    """Alice's (L + S - 1, B) packed integers: row t, band j holds Q[t - k, j] in slot k."""
    q = np.asarray(q_ints, dtype=np.int64)
    length, s, plan = layout.length, layout.slots, layout.plan
    out = np.empty((layout.rows, layout.bands), dtype=object)
    for t in range(layout.rows):
        for j in range(layout.bands):
            out[t, j] = plan.pack(
                [int(q[t - k, j]) if 0 <= t - k < length else 0 for k in range(s)]
            )
    return out


def slot_masks(rng, layout: MatchLayout) -> list[list[int]]:
    """Bob's masks of step 5: per block and slot, uniform on [R, 2^s - R), R the raw
    bound, so that raw + mask fills the slot [0, 2^s) whatever raw's value."""
    low, span = layout.raw_bound, (1 << layout.slot_bits) - 2 * layout.raw_bound
    return [[low + rng.randbelow(span) for _ in range(layout.slots)] for _ in layout.blocks]


def packed_masks(masks: list[list[int]], layout: MatchLayout, n: int, rng) -> np.ndarray:
    """Each block's slot masks packed, plus R 2^(S s) above its slots (the top mask,
    :func:`smc_hmm.crypto.packing.top_mask`): whatever Alice encrypted, what she decrypts
    is uniform on Z_n to within 2^-sigma (a huge snippet entry would otherwise carry
    Bob's frame values, in the clear, above the slots)."""
    width = layout.slots * layout.slot_bits
    rows = [sum(m << (k * layout.slot_bits) for k, m in enumerate(row)) for row in masks]
    return np.array([v + top_mask(n, width, rng) for v in rows], dtype=object)


def bob_exponents(ints: list[np.ndarray], layout: MatchLayout) -> np.ndarray:
    """Bob's (blocks, (L + S - 1) B) exponents: block (r, o0) raises row t, band j to
    X_r[o0 + t, j] (zero past the recording's end)."""
    out = np.zeros((len(layout.blocks), layout.rows * layout.bands), dtype=np.int64)
    for b, (r, o0, _) in enumerate(layout.blocks):
        frames = ints[r][o0 : o0 + layout.rows]
        out[b, : frames.size] = frames.reshape(-1)
    return out


# -- the roles -------------------------------------------------------------------------------


def alice(ctx, snippet, params: MatchParams, peer: str = "bob") -> dict:
    """Alice: ``snippet`` is her (L, B) frames; returns the answer (``match`` is the
    recording's id or None for "no match", with its index and offset)."""
    pk, sk = ctx.keypair
    frames = np.asarray(snippet, dtype=float)
    if frames.ndim != 2 or frames.shape[1] != params.bands or frames.shape[0] < 1:
        raise InvalidInputError(f"the snippet must be (frames, {params.bands}) magnitudes")
    if frames.shape[0] > params.max_frames:
        raise InvalidInputError(
            f"the snippet has {frames.shape[0]} frames; at most {params.max_frames}"
        )
    length = frames.shape[0]
    with ctx.phase("setup"):
        ids, lengths = check_catalogue(*ctx.recv(peer, CATALOGUE))  # step 1
        layout = MatchLayout.build(params, pk.bits, length, lengths)
        msg = layout.messages()
        ctx.send(peer, msg["frames"], length)  # step 2
        if layout.garbled:  # step 3: her key
            ctx.send(peer, KEY, pk)
        else:
            dgk_sk = dgk.alice_send_keys(ctx, layout.compare_spec(), peer)  # step 3
    with ctx.phase("snippet"):
        q = params.quant.query_ints(frames)
        packed = CipherArray.encrypt_encoded(pk, toeplitz(q, layout), 0, msg["snippet"].body.bound)
        ctx.send(peer, msg["snippet"], packed)  # step 4
        if layout.garbled:  # and Q itself, which the MAC of step 5 reads
            ctx.send(
                peer, msg["query"], CipherArray.encrypt_encoded(pk, q, 0, msg["query"].body.bound)
            )
    with ctx.phase("unpack"):
        blocks = ctx.recv(peer, msg["masked"]).decrypt_residues(sk)  # step 5 -> 6
        values = []  # every slot is a value of its width, whatever Bob sent
        for (_, _, used), v in zip(layout.blocks, blocks):
            values += unpack_slots([v], layout.slot_bits, layout.slots, used)
        if layout.garbled and layout.total:
            limbs = gc_stage.unpack_masked(
                ctx.recv(peer, msg["mac"]), bd.MAC_LIMBS, layout.mac_bits, params.sigma, sk
            )
            y = [values[e] for e in layout.entries]
            binding = bd.AliceShares(layout.share_plan, y, bd.join_limbs(limbs))
        elif not layout.garbled:
            top = layout.slot_value_bound
            ctx.send(peer, msg["slots"], CipherArray.encrypt_encoded(pk, values, 0, top))
    with ctx.phase("argmax"):  # steps 7-8
        if layout.garbled:
            index = 0  # no window: "no match"
            if layout.total:
                evaluator = gc_stage.alice_setup(ctx, layout.cots, peer)
                index = alice_maximum(ctx, evaluator, binding, layout)
            return _answer(answer(index, lengths, length, params.pool, ids), params, layout)
        alice_tournament(ctx, dgk_sk, layout.tournament, layout, peer)
        (winner,) = ctx.recv(peer, msg["winner"]).decrypt_ints(sk)
        index = layout.code(0) - int(winner) % (1 << layout.label_bits)
        if not 0 <= index < layout.count:
            raise ProtocolError("match.winner: the code names no candidate")
    return _answer(answer(index, lengths, length, params.pool, ids), params, layout)


def _answer(result, params: MatchParams, layout: MatchLayout) -> dict:
    return {
        "match": result.id,
        "recording": result.recording,
        "offset_frames": result.offset,
        "mode": params.mode,
        "candidates": layout.count - 1,
    }


def bob(ctx, collection, params: MatchParams, peer: str = "alice") -> None:
    """Bob: ``collection`` is a :class:`~smc_hmm.data.match.Collection` (or (ids, frames))."""
    collection = _collection(collection)
    if collection.bands != params.bands:
        raise InvalidInputError(
            f"the collection has {collection.bands} bands per frame; the parameters say "
            f"{params.bands}"
        )
    quant = params.quant
    with ctx.phase("setup"):
        ctx.send(peer, CATALOGUE, [collection.ids, collection.lengths])  # step 1
        length = ctx.recv(peer, FRAMES)  # step 2
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ProtocolError("match.frames: expected a positive number of frames")
        check_at_most("max_frames", length, params.max_frames, "the snippet's frames")
        ctx.charge_frames(length)  # a serving Bob's per-client budget (public L)
        if params.comparison == "garbled":  # step 3
            pk = ctx.recv(peer, KEY)
        else:
            spec = MatchLayout.before_key(params, length, collection.lengths).compare_spec()
            pk, dgk_pk = dgk.bob_recv_keys(ctx, spec, peer)  # step 3
        layout = MatchLayout.build(params, pk.bits, length, collection.lengths)
        msg = layout.messages()
        ints = collection.ints(quant)
        factors = [quant.window_factors(x, length) for x in ints]
    with ctx.phase("scores"):
        enc = ctx.recv(peer, msg["snippet"])  # step 4
        enc.public_key.same_key(pk)
        query = ctx.recv(peer, msg["query"]) if layout.garbled else None
        plan, blocks = layout.plan, layout.blocks
        masks = slot_masks(ctx.rng, layout)
        if blocks:  # step 5: one multi-exponentiation per block, Alice's ciphertexts as bases
            raw = enc.reshape(-1).lincomb(bob_exponents(ints, layout))
            raw = raw.with_bound(layout.packed_bound(layout.raw_bound))
            masked = raw.add_mask(packed_masks(masks, layout, int(pk.n), ctx.rng))
        else:  # no recording holds a window of L frames: nothing to score
            masked = CipherArray(pk, np.empty(0, dtype=object), 0, 0)
        ctx.send(peer, msg["masked"], masked)
        if layout.garbled and layout.total:  # step 5's MAC of the window scores
            query.public_key.same_key(pk)
            binding = _bob_mac(ctx, query, ints, masks, layout, peer)
    if layout.garbled:  # steps 6-8 in circuits Bob garbles: the winner's index to Alice
        with ctx.phase("argmax"):
            if layout.total:
                garbler = gc_stage.bob_setup(ctx, layout.cots, peer)
                bob_maximum(ctx, garbler, binding, np.concatenate(factors), layout)
        return None
    with ctx.phase("argmax"):
        slots = ctx.recv(peer, msg["slots"])  # step 6
        slots.public_key.same_key(pk)
        unmask = [-m for (_, _, used), row in zip(blocks, masks) for m in row[:used]]
        values = _candidates(slots, unmask, factors, layout, pk)  # step 7
        plan = _TournamentPlan(layout, dgk_pk)
        best = bob_tournament(ctx, values, layout.tournament, plan, [0], peer)[0]  # step 8
        mask = ctx.rng.randbits(layout.winner_mask_bits) << layout.label_bits
        winner = best.with_bound(layout.folded_bound).add_encoded([mask])
        ctx.send(peer, msg["winner"], winner)
    return None


def _bob_mac(ctx, query: CipherArray, ints, masks, layout: MatchLayout, peer: str):
    """Step 5, the garbled default: one MAC of sum_o rho_o raw_o, computed from Alice's
    E(Q) as sum_(u, j) V[u, j] Q[u, j] (:func:`mac_weights`) in three limbs, packed under
    masks (``match.mac``); Bob keeps the check's secrets (``bound.BobShares``)."""
    plan, rng = layout.share_plan, ctx.rng
    alpha, seed, u = bd.draw_key(rng, plan.count)  # per entry; a window sums its entries'
    per_window = [0] * layout.total
    for e, o in enumerate(layout.entries):
        per_window[o] = (per_window[o] + u[e]) % mac.PRIME
    weights = bd.limb_matrix(mac_weights(per_window, ints, layout))  # (limbs, L B)
    limbs = query.reshape(-1).lincomb(weights).with_bound(layout.mac_bound)
    packed, offsets = gc_stage.pack_masked(limbs, layout.mac_bits, plan.sigma, rng)
    ctx.send(peer, layout.messages()["mac"], packed)
    window_masks = [m for (_, _, used), row in zip(layout.blocks, masks) for m in row[:used]]
    entry_masks = [window_masks[o] for o in layout.entries]
    return bd.BobShares(plan, alpha, seed, entry_masks, [int(o) for o in offsets])


def mac_weights(u, ints, layout: MatchLayout) -> list[int]:
    """V[u, j] = sum_o u_o X_r(o)[o + u, j] mod p over every window o (flattened, (L B,)):
    sum_(u, j) V[u, j] Q[u, j] = sum_o u_o raw_o mod p.  Exact in int64: u split into
    31-bit halves, X of ``frame_bits`` bits, at most MAX_RECORDING_FRAMES windows."""
    p, low = mac.PRIME, (1 << 31) - 1
    total = np.zeros((layout.length, layout.bands), dtype=object)
    start = 0
    for r, count in enumerate(layout.windows):
        if not count:
            continue
        x = np.asarray(ints[r], dtype=np.int64)
        windows = np.lib.stride_tricks.sliding_window_view(x, (layout.length, x.shape[1]))[:, 0]
        coeff = u[start : start + count]
        lo = np.tensordot(np.array([v & low for v in coeff], np.int64), windows, axes=(0, 0))
        hi = np.tensordot(np.array([v >> 31 for v in coeff], np.int64), windows, axes=(0, 0))
        total = (total + lo.astype(object) + (hi.astype(object) << 31)) % p
        start += count
    return [int(v) for v in total.reshape(-1)]


class ChunkShape(NamedTuple):
    """The public shape of one circuit of the garbled maximum: ``size`` candidates of
    ``pool`` entries each, slots of ``width`` bits holding ``bits``-bit values, factors
    of ``factor_width`` bits, pooled scores of ``score_width`` bits, the circuit's number
    in ``id_bits`` bits, and whether it is the first (the threshold starts the maximum)."""

    size: int
    pool: int
    width: int
    bits: int
    factor_width: int
    score_width: int
    id_bits: int
    first: bool

    @property
    def index_bits(self) -> int:
        """A candidate's index: its place in its circuit, the circuit's number, then 1
        for a window (0: the threshold)."""
        return (CHUNK - 1).bit_length() + self.id_bits + 1


@built_once
def chunk_circuit(shape: ChunkShape) -> CompiledCircuit:
    """One circuit of the garbled maximum (steps 7-8 of the default) on bound shares:
    each entry rebuilt from Alice's slot and Bob's mask and range-checked
    (:func:`protocols.stages.bound.share_values`), times Bob's factor c_o, pooled per
    candidate, and the best candidate (ties to the lowest index) against the best so far,
    which it replaces only when strictly greater (the first circuit starts from the
    public threshold, Bob's input).  Carries out (range ok, best score, its index)."""
    c, n, k = Circuit(), shape.size, shape.pool
    y = c.input("evaluator", (n * k, shape.width))
    raw, ok = bd.share_values(c, y, c.input("garbler", (n * k, shape.width)), shape.bits)
    factors = c.input("garbler", (n * k, shape.factor_width))
    chunk_id = c.input("garbler", (shape.id_bits,))
    scores = arith.sign_extend(arith.multiply(c, raw, factors), shape.score_width)
    scores = scores.reshape(n, k, shape.score_width)
    pooled = scores[:, 0]
    for j in range(1, k):
        pooled = arith.add(c, pooled, scores[:, j], depth="ripple")
    local = arith.constant(np.arange(n), (CHUNK - 1).bit_length())
    window = np.concatenate([local, np.tile(chunk_id, (n, 1)), np.ones((n, 1), np.int64)], 1)
    best, index = arith.argmax(c, pooled, window)
    if shape.first:
        prior = c.input("garbler", (shape.score_width,))  # the threshold
        prior_index, prior_ok = np.zeros(shape.index_bits, np.int64), np.int64(1)
    else:
        prior_ok = c.input(CARRY, (1,))[0]
        prior = c.input(CARRY, (shape.score_width,))
        prior_index = c.input(CARRY, (shape.index_bits,))
    top, take = arith.select_max(c, prior, best)
    c.output([c.and_(prior_ok, ok)], CARRY)
    c.output(top, CARRY)
    c.output(arith.mux(c, take, index, prior_index), CARRY)
    return c.compile()


@built_once
def final_circuit(shape: ChunkShape) -> CompiledCircuit:
    """The maximum's last circuit: the carried (range ok, best, index), D_A and D_B; ok =
    range ok and [D_A = D_B]; Alice decodes (ok, the index ANDed with ok)."""
    c = Circuit()
    range_ok = c.input(CARRY, (1,))[0]
    c.input(CARRY, (shape.score_width,))  # the best score itself stays inside
    index = c.input(CARRY, (shape.index_bits,))
    d_a, d_b = c.input("evaluator", (mac.MAC_BITS,)), c.input("garbler", (mac.MAC_BITS,))
    ok = c.and_(range_ok, bd.check_equal(c, d_a, d_b))
    c.output(np.concatenate([[ok], c.and_(index, ok)]), "evaluator")
    return c.compile()


def candidate_of(bits, shape: ChunkShape) -> int:
    """Alice: the candidate an index names (0: the threshold, "no match")."""
    local = (CHUNK - 1).bit_length()
    value = int(arith.from_bits(np.asarray(bits)[: shape.index_bits], signed=False))
    if not value >> (shape.index_bits - 1):
        return 0
    chunk, place = value >> local & ((1 << shape.id_bits) - 1), value & ((1 << local) - 1)
    return 1 + chunk * CHUNK + place


def bob_maximum(ctx, garbler, binding: bd.BobShares, factors, layout: MatchLayout) -> None:
    """Bob's half of steps 6-8, garbled: her padded choices of every slot, the key
    message, one circuit a chunk of candidates, her choices of D_A, the last circuit."""
    plan = binding.plan
    zero = bd.bob_open(ctx, garbler, binding, plan.input_bits, TAG)
    masks = binding.bits()  # (entries, w)
    own = arith.to_bits(
        np.array([int(factors[e]) for e in layout.entries], object), layout.factor_width
    )
    carry, k, w = None, layout.params.pool, plan.width
    for i, chunk in enumerate(layout.chunks):
        shape = layout.chunk_shape(i)
        cut = slice(chunk.start * k, chunk.stop * k)
        bits = [masks[cut].reshape(-1), own[cut].reshape(-1), arith.to_bits(i, shape.id_bits)]
        if shape.first:
            bits.append(arith.to_bits(layout.threshold_units(), shape.score_width))
        labels = zero[chunk.start * k * w : chunk.stop * k * w]
        _, carry = garbler.garble(
            ctx, chunk_circuit(shape), np.concatenate(bits), labels, carry, f"{TAG}.inputs"
        )
    check, d_b = bd.bob_check(ctx, garbler, binding)
    garbler.garble(ctx, final_circuit(layout.chunk_shape(0)), d_b, check, carry, f"{TAG}.final")


def alice_maximum(ctx, evaluator, binding: bd.AliceShares, layout: MatchLayout) -> int:
    """Alice's half of :func:`bob_maximum`: the winning candidate (0: "no match"); a
    failed check raises :class:`~smc_hmm.errors.ProtocolError` after her last message."""
    labels = bd.alice_open(ctx, evaluator, binding, (), TAG)
    carry, k, w = None, layout.params.pool, binding.plan.width
    for i, chunk in enumerate(layout.chunks):
        part = labels[chunk.start * k * w : chunk.stop * k * w]
        _, carry = evaluator.evaluate(
            ctx, chunk_circuit(layout.chunk_shape(i)), part, carry, f"{TAG}.inputs"
        )
    check = bd.alice_check(ctx, evaluator, binding)
    shape = layout.chunk_shape(0)
    out, _ = evaluator.evaluate(ctx, final_circuit(shape), check, carry, f"{TAG}.final")
    return candidate_of(bd.alice_checked(ctx, out), shape)


@dataclass(frozen=True)
class _TournamentPlan:
    """What :func:`protocols.stages.decision.bob_tournament` asks of a plan: the values' bound,
    Alice's DGK key and the batched compare-and-select of each round."""

    layout: MatchLayout
    dgk_pk: object

    @property
    def value_bound(self) -> int:
        return self.layout.folded_bound

    def select_spec(self, count: int) -> dgk.SelectSpec:
        return self.layout.select_spec(count)


def _candidates(slots, unmask, factors, layout: MatchLayout, pk) -> CipherArray:
    """E(threshold), then every candidate's value -- raw scores unmasked, times c_o, pooled
    -- each times 2^label_bits plus its code."""
    shift, bound = 1 << layout.label_bits, layout.folded_bound
    top = layout.threshold_units() * shift + layout.code(0)
    threshold = CipherArray.encrypt_encoded(pk, [top], 0, bound)
    if not layout.total:
        return threshold
    raw = slots.add_encoded(np.array(unmask, dtype=object)).with_bound(layout.raw_bound)
    pool = layout.params.pool
    factor = np.concatenate(factors).astype(object) * (shift if pool == 1 else 1)
    scores = raw.mul(factor).with_bound(layout.score_bound * (shift if pool == 1 else 1))
    if pool == 1:
        pooled = scores
    else:
        starts = np.cumsum([0, *layout.windows])
        picks = [
            [starts[r] + min(o + j, layout.windows[r] - 1) for r, o in layout.candidates]
            for j in range(pool)
        ]
        pooled = scores[np.array(picks[0])]
        for pick in picks[1:]:
            pooled = pooled + scores[np.array(pick)]
        pooled = pooled.with_bound(layout.value_bound).mul(shift)
    codes = np.array([layout.code(i) for i in range(1, layout.count)], dtype=object)
    folded = pooled.with_bound(layout.value_bound * shift).add_encoded(codes)
    return CipherArray.concatenate([threshold, folded]).with_bound(bound)


# -- the plugin --------------------------------------------------------------------------------


def plain_match(snippet, collection, params: MatchParams):
    """The answer in the clear that a secure run reproduces: the best window of
    :func:`smc_hmm.data.match.match` at the public quantisation, threshold and stride."""
    return match(
        snippet, collection, quant=params.quant, threshold=params.threshold_value(),
        stride=params.pool,
    )  # fmt: skip


def plaintext(params: MatchParams, inputs) -> dict:
    """The run's outputs in the clear (``inputs``: role -> private input): Alice's answer
    from :func:`plain_match` and the count of candidate windows; Bob's None."""
    snippet, recordings = inputs["alice"], _collection(inputs["bob"])
    plain = plain_match(snippet, recordings, params)
    count = len(candidates(recordings.lengths, len(snippet), params.pool))
    answer = {"match": plain.id, "recording": plain.recording, "offset_frames": plain.offset}
    return {"alice": answer | {"mode": params.mode, "candidates": count}, "bob": None}


def load_snippet(value, base):
    """Alice's input: a WAV file (featurised with the default spectrogram) or frames."""
    return load_frames(value, base, Spectrogram().from_wav)


def load_collection(value, base):
    """Bob's input: ``fsdd`` (bundled), a folder of WAV files or an ``.npz`` collection."""
    if not isinstance(value, str):
        raise ConfigError("collection must be 'fsdd', a folder of WAV files or an .npz file")
    try:
        return Collection.load(value if value == "fsdd" else resolve_path(value, base))
    except (SmcHmmError, OSError) as e:
        raise ConfigError(str(e)) from e


def randomizers_needed(params: MatchParams, key_bits: int, inputs) -> dict[str, int]:
    """Every fresh randomizer of a run on ``inputs`` (from their public sizes)."""
    length = np.asarray(inputs["alice"]).shape[0]
    return MatchLayout.build(
        params, key_bits, length, _collection(inputs["bob"]).lengths
    ).randomizers()


def comparisons(params: MatchParams, length: int, lengths) -> int:
    """The DGK comparisons of a run: the tournament's matches, one fewer than its
    candidates (the threshold included)."""
    return len(candidates(lengths, length, params.pool))


def phases(params: MatchParams, role: str) -> tuple[str, ...]:
    """The ``ctx.phase`` names a role enters, in order (progress lines count them)."""
    if role == "alice":
        return ("setup", "snippet", "unpack", "argmax")
    return ("setup", "scores", "argmax")


def example_wavs(folder, count: int = 4, seed: int = 3):
    """``folder`` with ``count`` WAV recordings (rec0.wav, ...) of gliding, pulsed tones:
    a collection to search."""
    from scipy.io import wavfile

    rng = np.random.default_rng(seed)
    folder.mkdir(exist_ok=True)
    for i in range(count):
        t = np.arange(int(8000 * rng.uniform(0.7, 1.1))) / 8000
        y = sum(
            np.sin(2 * np.pi * f * t * (1 + 0.2 * np.sin(3 * t))) for f in rng.uniform(200, 1500, 3)
        )
        y = y * (np.abs(np.sin(2 * np.pi * rng.uniform(1, 4) * t)) + 0.1)
        y = y + 0.05 * rng.standard_normal(t.size)
        wavfile.write(folder / f"rec{i}.wav", 8000, (y / np.abs(y).max() * 20000).astype(np.int16))
    return folder


def _example_config(directory) -> dict:
    """Alice's snippet: 0.4 s cut from the second of Bob's WAV recordings (his folder)."""
    from scipy.io import wavfile

    folder = example_wavs(directory / "collection")
    rate, y = wavfile.read(folder / "rec1.wav")
    wavfile.write(directory / "snippet.wav", rate, y[2400:5600])
    return {"alice": {"snippet": "snippet.wav"}, "bob": {"collection": "collection"}}


def example(key_bits: int, seed: int, length: int = 15):
    """A bundled query cut to ``length`` frames against the first four bundled recordings,
    then a constant snippet against recordings of the same ids and lengths but other
    content: Alice learns the plaintext matcher's answer."""
    from smc_hmm.data.match import load_bundled_collection, load_bundled_queries
    from smc_hmm.protocol import Example

    rng = np.random.default_rng(seed)
    collection = load_bundled_collection().head(4)
    query = next(q for q in load_bundled_queries(inside=True) if q.recording < 4)
    alike = Collection(
        collection.ids, [np.abs(rng.normal(size=f.shape)) + 0.01 for f in collection.frames]
    )
    params = MatchParams()

    layout = MatchLayout.build(params, key_bits, length, collection.lengths)
    snippet = query.frames[:length]
    return Example(
        params={},
        parties={"alice": "alice", "bob": "bob"},
        inputs=(
            {"alice": snippet, "bob": collection},
            {"alice": np.ones((length, 24)), "bob": alike},
        ),
        expected=lambda i: plaintext(params, i),
        declared=tuple(layout.declared_messages()),
        bad_inputs=(
            {"alice": np.full((length, 24), np.nan)},
            {"alice": snippet[:, :5]},
            {"bob": "not a collection"},
        ),  # fmt: skip
        config=_example_config,
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "private audio matching: Alice learns which of Bob's recordings holds her snippet",
    params=MatchParams.from_config,
    plaintext=plaintext,
    roles=(
        Role("alice", alice, kind="alice", holds_key=True, input="snippet", load=load_snippet),
        Role("bob", bob, kind="bob", input="collection", load=load_collection),
    ),
)
