"""The garbled stage: Paillier values to additive shares, one circuit Bob garbles, and its
outputs to the party the protocol names (``docs/garbled.md``).

Roles: Bob garbles (:class:`Garbler`), Alice evaluates (:class:`Evaluator`); Alice holds
the Paillier key of the values that go in.  The library under it is :mod:`smc_hmm.gc`
(half gates, fixed-key AES, base OT over Ed25519, IKNP with the KOS check).

**Setup** (once per session, :func:`bob_setup` / :func:`alice_setup`, 5 messages):
base OT, then one extension of ``cots`` *random* correlated OTs with the KOS check.  Alice
ends with (rho_j, T_j = Q_j ^ rho_j Delta) for random bits rho_j, Bob with Q_j and Delta.

**One circuit** (:meth:`Garbler.run` / :meth:`Evaluator.run`, 2 or 3 messages):

1. Alice -> Bob ``gc.choice``: e_j = x_j ^ rho_j for her input bits x_j (one-time padded
   by the pool's secret rho: uniform bytes whatever x is).
2. Bob -> Alice ``gc.tables``: the AND tables (32 bytes a gate), the active labels of the
   constants and of his own input bits, and the decoding hashes of Alice's outputs.  The
   0-label of Alice's wire j is Q_j ^ e_j Delta, so the label she holds, T_j, is the one
   of x_j (Beaver's derandomisation of a precomputed OT).
3. (If Bob has outputs) Alice -> Bob ``gc.outputs``: her labels of his output wires, each
   checked to be one of its wire's two labels (she cannot forge the other).

Alice checks every output label of hers against its wire's two decoding hashes; a label
that is neither (tables, labels or hashes Bob corrupted, perhaps for one value of one of
her bits only: a selective failure) is an error she defers to after her last message,
going on with zeros meanwhile, so that a probing Bob learns only whether she aborted.

**Conversions.** :func:`bob_share` / :func:`alice_share`: Bob holds E(v) (|v| < 2^(l-1),
Alice's key), sends E(v + 2^(l-1) + r) with r uniform on [0, 2^w - 2^l), packed in slots
of w = l + sigma + 1 bits (:func:`share_slots`: Horner's rule, so that Alice decrypts one
ciphertext per slot group) under a top mask (:func:`masked_groups`); Alice's share is a
slot's value mod 2^l, Bob's -(r + 2^(l-1)) mod 2^l; in the circuit ``arith.add`` of the
two shares is v (l - 1 AND gates).  Alice decrypts residues uniform on Z_n to within
2^-sigma, whatever the ciphertexts E(v) were built from (a huge input of hers, in a
protocol where E(v) is Bob's linear function of her ciphertexts, shows nothing of his
coefficients).  :func:`bob_bits_from_circuit` / :func:`alice_bits_to_bob`:
the circuit gives Alice b ^ m (m Bob's random bits, garbler inputs), she returns
E(b ^ m) and Bob has E(b) = m + (1 - 2m) E(b ^ m).

Who learns what:
* Alice sees uniform share values (within 2^-sigma), labels (pseudorandom), the tables,
  and her declared outputs.  Inside the circuit a deviating Alice can change only her
  own inputs (the KOS check catches inconsistent OT choices; e_j only selects her input;
  a forged output label is refused).  The conversions here do not bind those inputs to
  the shares she was given (she can shift what the circuit reconstructs), and the bits'
  return (:func:`alice_bits_to_bob`) trusts her encryption (a deviating Alice may return
  E(any integer) instead of E(b ^ m)): they serve the thesis's semi-honest modes and
  mining, where her inputs are her own model's.  The defaults bind her inputs with
  :mod:`protocols.stages.bound` and keep every decision inside the circuit.
* Bob sees Alice's padded choices e (uniform), her re-encrypted masked bits (Paillier
  ciphertexts under her key) and the outputs the circuit gives him; a Bob who garbles
  or sends something else learns at most whether she aborts (above).
Every message's size follows from the circuit's public sizes.  The ledger counts ``cot``
(random COTs, at setup), ``and_gates``, ``gc_layers`` and ``garbled_bytes`` (what Bob
garbles and sends), priced by :class:`smc_hmm.cost.CostModel`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from smc_hmm.crypto import CipherArray
from smc_hmm.crypto.packing import horner_pack, plain_bits, top_mask, unpack_slots
from smc_hmm.errors import GarbledCircuitError, InvalidInputError, PrecisionError
from smc_hmm.gc import arith
from smc_hmm.gc.circuit import CompiledCircuit
from smc_hmm.gc.garble import (
    carried_labels,
    constant_labels,
    decode_garbler_outputs,
    decode_outputs,
    decode_third_party,
    evaluate,
    garble,
    garbler_input_labels,
    garbler_output_labels,
    new_delta,
    third_party_decoding,
)
from smc_hmm.gc.hashing import BLOCK_BYTES, as_blocks
from smc_hmm.gc.ot import (
    BASE_POINT_BYTES,
    CHALLENGE_BYTES,
    KAPPA,
    PROOF_BYTES,
    OtExtReceiver,
    OtExtSender,
    u_bytes,
)
from smc_hmm.messages import Ciphertexts, MaskedCiphertexts, Message, OpaqueCiphertexts

__all__ = [
    "Evaluator",
    "Garbler",
    "alice_bits_to_bob",
    "alice_setup",
    "alice_share",
    "alice_share_rounded",
    "bob_bits_from_circuit",
    "bob_setup",
    "bob_share",
    "bob_share_rounded",
    "choice_message",
    "circuit_messages",
    "extension_parts",
    "pack_masked",
    "rounded_share_message",
    "rounded_shares",
    "rounding_mask_bits",
    "setup_messages",
    "share_message",
    "share_slots",
    "third_party_outputs",
    "unpack_masked",
]

#: Random COTs drawn at a time when a session's pool runs out (public).
EXTEND_CHUNK = 1 << 14
#: The most random COTs one extension carries: its matrix u is 16 bytes a COT (64 MiB
#: here, a quarter of the wire's frame limit); a larger draw runs as several extensions,
#: each with its own KOS check (public: the parts follow from the count).
MAX_EXTEND = 1 << 22


def extension_parts(count: int) -> list[int]:
    """The sizes of the extensions that draw ``count`` random COTs."""
    full, rest = divmod(count, MAX_EXTEND)
    return [MAX_EXTEND] * full + ([rest] if rest else [])


def _blocks(tag: str, count: int) -> OpaqueCiphertexts:
    return OpaqueCiphertexts(tag, count, BLOCK_BYTES)


def _bytes(tag: str, count: int) -> OpaqueCiphertexts:
    return OpaqueCiphertexts(tag, count, 1)


def setup_messages(cots: int) -> dict[str, Message]:
    """The setup's five messages, declared from the public number of random COTs (a
    draw of more than :data:`MAX_EXTEND` runs as :func:`extension_parts`, each part's
    ``u`` declared by ``setup_messages(part)``; this declares the first part's)."""
    return {
        "base_a": Message("gc.base_a", _bytes("ed25519", BASE_POINT_BYTES)),
        "base_b": Message("gc.base_b", _bytes("ed25519", KAPPA * BASE_POINT_BYTES)),
        "u": Message("gc.ext_u", _bytes("ot-ext", u_bytes(min(cots, MAX_EXTEND)))),
        "chi": Message("gc.ext_chi", _bytes("ot-challenge", CHALLENGE_BYTES)),
        "proof": Message("gc.ext_proof", _bytes("ot-proof", PROOF_BYTES)),
    }


def choice_message(count: int, tag: str = "gc.choice") -> Message:
    """Alice's padded choice bits e_j = x_j ^ rho_j for ``count`` input bits."""
    return Message(tag, _bytes("ot-choice", (count + 7) // 8))


def circuit_messages(circuit: CompiledCircuit, prefix: str = "gc") -> dict[str, Message]:
    """One circuit's messages, declared from its public sizes (tags ``prefix.choice``,
    ``prefix.tables``, ``prefix.outputs``)."""
    tables = (
        _blocks("garbled", 2 * circuit.and_gates),
        _blocks("labels", 2 + circuit.input_count("garbler")),
        _blocks("decoding", circuit.output_count("evaluator")),
    )
    outputs = circuit.output_count("garbler")
    return {
        "choice": choice_message(circuit.input_count("evaluator"), f"{prefix}.choice"),
        "tables": Message(f"{prefix}.tables", tables),
        "outputs": Message(f"{prefix}.outputs", _blocks("labels", outputs)),
        "third": Message(f"{prefix}.third", _blocks("third-decoding", 2 * outputs)),
    }


def _pack_bits(bits: np.ndarray) -> bytes:
    return np.packbits(np.asarray(bits, dtype=np.uint8), bitorder="little").tobytes()


def _unpack_bits(raw: bytes, count: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")[:count]


def _check_bits(bits, count: int, who: str) -> np.ndarray:
    bits = np.asarray(bits, dtype=np.uint8).reshape(-1)
    if bits.size != count or (bits > 1).any():
        raise InvalidInputError(f"{bits.size} input bits for the {who}; the circuit takes {count}")
    return bits


@dataclass
class Garbler:
    """Bob's side of a session: Delta, the OT extension sender and its pool of random
    COTs (Q_j), and the tweak counter (one range per circuit garbled under Delta)."""

    sender: OtExtSender
    peer: str
    refill: int = EXTEND_CHUNK
    pool: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.uint64))
    tweak: int = 0

    @property
    def delta(self) -> np.ndarray:
        return self.sender.delta

    def _extend(self, ctx, count: int) -> None:
        for part in extension_parts(count):
            msg = setup_messages(part)
            challenge = self.sender.extend_receive(part, ctx.recv(self.peer, msg["u"]))
            ctx.send(self.peer, msg["chi"], challenge)
            q = self.sender.extend_check(ctx.recv(self.peer, msg["proof"]))  # KOS, or abort
            self.pool = np.concatenate([self.pool, q])
        ctx.count("cot", count)

    def _take(self, ctx, count: int) -> np.ndarray:
        self.reserve(ctx, count)
        rows, self.pool = self.pool[:count], self.pool[count:]
        return rows

    def reserve(self, ctx, count: int) -> None:
        """At least ``count`` random COTs in the pool, drawn in one extension if short (a
        circuit whose inputs come in several messages draws them all at once)."""
        if len(self.pool) < count:
            self._extend(ctx, max(self.refill, count - len(self.pool)))

    def input_labels(self, ctx, count: int, tag: str = "gc.choice") -> np.ndarray:
        """Step 1: the 0-labels of Alice's next ``count`` input wires, Q_j ^ e_j Delta
        from her padded choices (one message, however many circuits they feed)."""
        q = self._take(ctx, count)
        e = _unpack_bits(ctx.recv(self.peer, choice_message(count, tag)), count)
        return q ^ ((np.uint64(0) - e.astype(np.uint64))[:, None] & self.delta)

    def garble(self, ctx, circuit: CompiledCircuit, bits, evaluator_zero, carry=None, prefix="gc",
               third=None):  # fmt: skip
        """Steps 2-3 for ``circuit``, Alice's input wires on ``evaluator_zero`` (from
        :meth:`input_labels`), its carried inputs on ``carry`` (0-labels an earlier
        circuit carried out).  Returns (Bob's output bits, the carried outputs' 0-labels).
        ``third``: the party who decodes the garbler's outputs instead of Bob (he sends it
        their decoding hashes, :func:`~smc_hmm.gc.garble.third_party_decoding`, and
        gets no bit)."""
        bits = _check_bits(bits, circuit.input_count("garbler"), "garbler")
        msg = circuit_messages(circuit, prefix)
        g = garble(circuit, self.delta, ctx.rng, evaluator_zero, self.tweak, carry)
        labels = np.concatenate([constant_labels(g), garbler_input_labels(g, bits)])
        ctx.send(
            self.peer,
            msg["tables"],
            [g.tables.tobytes(), labels.tobytes(), g.output_decoding().tobytes()],
        )
        ctx.count("and_gates", circuit.and_gates)
        ctx.count("gc_layers", circuit.depth)
        ctx.count("garbled_bytes", g.tables.nbytes + labels.nbytes)
        self.tweak += _tweak_span(circuit)
        out = np.zeros(0, np.uint8)
        if circuit.output_count("garbler") and third is not None:
            ctx.send(third, msg["third"], third_party_decoding(g).tobytes())
        elif circuit.output_count("garbler"):
            out = decode_garbler_outputs(g, as_blocks(ctx.recv(self.peer, msg["outputs"])))
        return out, carried_labels(circuit, g.zero_labels)

    def run(self, ctx, circuit: CompiledCircuit, bits) -> np.ndarray:
        """Garble ``circuit`` with Bob's input ``bits`` (steps 1-3); his output bits."""
        zero = self.input_labels(ctx, circuit.input_count("evaluator"))
        return self.garble(ctx, circuit, bits, zero)[0]


@dataclass
class Evaluator:
    """Alice's side of a session: the OT extension receiver and its pool of random COTs
    (rho_j, T_j), and the tweak counter (in step with Bob's)."""

    receiver: OtExtReceiver
    peer: str
    refill: int = EXTEND_CHUNK
    pool_bits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    pool: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.uint64))
    tweak: int = 0

    def _extend(self, ctx, count: int) -> None:
        for part in extension_parts(count):
            msg = setup_messages(part)
            rho = np.frombuffer(ctx.rng.randbits(8 * part).to_bytes(part, "little"), np.uint8) & 1
            ctx.send(self.peer, msg["u"], self.receiver.extend(rho))
            proof = self.receiver.extend_prove(ctx.recv(self.peer, msg["chi"]))
            ctx.send(self.peer, msg["proof"], proof)
            self.pool_bits = np.concatenate([self.pool_bits, rho])
            self.pool = np.concatenate([self.pool, self.receiver.labels()])

    def _take(self, ctx, count: int) -> tuple[np.ndarray, np.ndarray]:
        self.reserve(ctx, count)
        bits, rows = self.pool_bits[:count], self.pool[:count]
        self.pool_bits, self.pool = self.pool_bits[count:], self.pool[count:]
        return bits, rows

    def reserve(self, ctx, count: int) -> None:
        """:meth:`Garbler.reserve`'s other half."""
        if len(self.pool) < count:
            self._extend(ctx, max(self.refill, count - len(self.pool)))

    def input_labels(self, ctx, bits, tag: str = "gc.choice") -> np.ndarray:
        """Step 1: the labels of her input ``bits`` (one message, however many circuits
        they feed)."""
        bits = np.asarray(bits, dtype=np.uint8).reshape(-1)
        if (bits > 1).any():
            raise InvalidInputError("input bits are 0 or 1")
        rho, t = self._take(ctx, bits.size)
        ctx.send(self.peer, choice_message(bits.size, tag), _pack_bits(bits ^ rho))
        return t

    def evaluate(self, ctx, circuit: CompiledCircuit, labels, carry=None, prefix="gc",
                 third=None):  # fmt: skip
        """Steps 2-3 for ``circuit`` on her input wires' ``labels`` and the carried
        ``carry`` labels.  Returns (her output bits, the carried outputs' labels).
        ``third``: the party her labels of the garbler's outputs go to instead of Bob."""
        if np.shape(labels) != (circuit.input_count("evaluator"), 2):
            raise InvalidInputError(
                f"{np.shape(labels)} input labels for {circuit.input_count('evaluator')} wires"
            )
        msg = circuit_messages(circuit, prefix)
        raw_tables, raw_labels, raw_decoding = ctx.recv(self.peer, msg["tables"])  # step 2
        tables = as_blocks(raw_tables).reshape(-1, 2, 2)
        sent = as_blocks(raw_labels)
        w = evaluate(circuit, tables, sent[:2], sent[2:], labels, self.tweak, carry)
        try:
            out = decode_outputs(circuit, w, as_blocks(raw_decoding), self.tweak)
        except GarbledCircuitError as e:
            # whether an output label decodes can depend on her data (a table or a
            # decoding hash Bob corrupted for one value only): she goes on with zeros and
            # raises after her last message, so that his probe learns one bit at most
            ctx.defer(e)
            out = np.zeros(circuit.output_count("evaluator"), np.uint8)
        self.tweak += _tweak_span(circuit)
        if circuit.output_count("garbler"):  # step 3
            to = self.peer if third is None else third
            ctx.send(to, msg["outputs"], garbler_output_labels(circuit, w).tobytes())
        return out, carried_labels(circuit, w)

    def run(self, ctx, circuit: CompiledCircuit, bits) -> np.ndarray:
        """Evaluate ``circuit`` on Alice's input ``bits`` (steps 1-3); her output bits."""
        bits = _check_bits(bits, circuit.input_count("evaluator"), "evaluator")
        return self.evaluate(ctx, circuit, self.input_labels(ctx, bits))[0]


def third_party_outputs(ctx, circuit: CompiledCircuit, garbler: str, evaluator: str, prefix="gc"):
    """The third party (Trent): the garbler's decoding hashes and the evaluator's labels
    of ``circuit``'s garbler outputs; the bits, or GarbledCircuitError for a label that is
    neither of its wire's (she cannot forge one: it needs Delta)."""
    msg = circuit_messages(circuit, prefix)
    count = circuit.output_count("garbler")
    decoding = np.frombuffer(ctx.recv(garbler, msg["third"]), np.uint64).reshape(count, 2, 2)
    labels = as_blocks(ctx.recv(evaluator, msg["outputs"]))
    return decode_third_party(labels, decoding)


def _tweak_span(circuit: CompiledCircuit) -> int:
    return max(2 * circuit.and_gates, circuit.n_wires) + 1


def bob_setup(ctx, cots: int, peer: str = "alice", refill: int = EXTEND_CHUNK) -> Garbler:
    """Bob: base OT (as its receiver, choosing Delta's bits), then ``cots`` random COTs
    (0: none yet); a pool that runs short is refilled by at least ``refill`` (public)."""
    msg = setup_messages(max(cots, 1))
    sender = OtExtSender(new_delta(ctx.rng), ctx.rng)
    ctx.send(peer, msg["base_b"], sender.base_choose(ctx.recv(peer, msg["base_a"])))
    garbler = Garbler(sender, peer, refill)
    if cots:
        garbler._extend(ctx, cots)
    return garbler


def alice_setup(ctx, cots: int, peer: str = "bob", refill: int = EXTEND_CHUNK) -> Evaluator:
    """Alice: base OT (as its sender), then ``cots`` random COTs with the KOS proof."""
    msg = setup_messages(max(cots, 1))
    receiver = OtExtReceiver(ctx.rng)
    ctx.send(peer, msg["base_a"], receiver.base_start())
    receiver.base_finish(ctx.recv(peer, msg["base_b"]))
    evaluator = Evaluator(receiver, peer, refill)
    if cots:
        evaluator._extend(ctx, cots)
    return evaluator


# -- conversions ------------------------------------------------------------------------


def share_slots(bits: int, sigma: int, key_bits: int) -> tuple[int, int]:
    """(slot width, slots a ciphertext) of the packed masked values: Bob packs them by
    Horner's rule (w squarings a value) so that Alice decrypts one ciphertext a slot
    group instead of one a value; sigma + 2 bits stay above the slots for the top mask
    (:func:`masked_groups`)."""
    width = bits + sigma + 1
    per = (plain_bits(key_bits) - sigma - 2) // width
    if per < 1:
        raise PrecisionError(f"a {key_bits}-bit key cannot hold a {width}-bit share slot")
    return width, per


def share_message(shape, bits: int, sigma: int, key_bits: int | None = None, tag="gc.share"):
    """The packed masked values of ``shape`` (their count needs the key size; unknown:
    any count)."""
    count = None
    if key_bits is not None:
        _, per = share_slots(bits, sigma, key_bits)
        count = -(-int(np.prod(shape, dtype=np.int64)) // per)
    return Message(tag, MaskedCiphertexts(shape=(count,)))


def bob_share(ctx, values: CipherArray, bits: int, sigma: int, peer: str = "alice", tag="gc.share"):
    """Bob's half of the conversion: his shares' bits ``values.shape + (bits,)``."""
    packed, offset = pack_masked(values, bits, sigma, ctx.rng)
    ctx.send(peer, share_message(values.shape, bits, sigma, values.public_key.bits, tag), packed)
    mine = np.array([(-int(v)) % (1 << bits) for v in offset], dtype=object)
    return arith.to_bits(mine.reshape(values.shape), bits)


def alice_share(ctx, shape, bits: int, sigma: int, peer: str = "bob", tag="gc.share"):
    """Alice's half: her shares' bits ``shape + (bits,)``."""
    pk, sk = ctx.keypair
    packed = ctx.recv(peer, share_message(shape, bits, sigma, pk.bits, tag))
    values = unpack_masked(packed, int(np.prod(shape, dtype=np.int64)), bits, sigma, sk)
    mine = np.array([v % (1 << bits) for v in values], dtype=object)
    return arith.to_bits(mine.reshape(shape), bits)


def pack_masked(values: CipherArray, bits: int, sigma: int, rng):
    """E(v + 2^(l-1) + r) for every |v| < 2^(l-1) (l = ``bits``), r uniform on
    [0, 2^w - 2^l), packed (:func:`share_slots`, :func:`masked_groups`); returns (the
    packed ciphertexts, the offsets 2^(l-1) + r that Bob keeps)."""
    if values.bound >= 1 << (bits - 1):
        raise InvalidInputError(f"values may need more than {bits} bits to share")
    width, per = share_slots(bits, sigma, values.public_key.bits)
    # r uniform on the whole slot but the value's share: y = v + 2^(l-1) + r < 2^width
    r = np.array([rng.randbelow((1 << width) - (1 << bits)) for _ in range(values.size)], object)
    offset = r + (1 << (bits - 1))
    masked = values.with_scale(0).reshape(-1).add_encoded(offset)
    return masked_groups(masked.with_bound(1 << width), width, per, rng), offset


def unpack_masked(packed: CipherArray, count: int, bits: int, sigma: int, sk) -> list[int]:
    """Alice: the ``count`` slot values y in [0, 2^w) of :func:`pack_masked`'s ciphertexts."""
    width, per = share_slots(bits, sigma, packed.public_key.bits)
    return unpack_slots(packed.decrypt_residues(sk), width, per, count)


# -- rounded shares: a value at scale f to shares at scale f - shift ----------------------


def rounding_mask_bits(bound: int, sigma: int) -> int:
    """Bits of the uniform mask M over a value v, |v| <= ``bound``: sigma more than v + M
    needs, so that v + M hides v to statistical distance 2^-sigma."""
    return (2 * int(bound)).bit_length() + sigma


def rounded_shares(values, shift: int, bits: int, negate: bool = False) -> list[int]:
    """floor(x / 2^shift) mod 2^l of each x (``negate``: of -x).  Alice's share is this of
    her y = v + 2^(shift-1) + M, Bob's of his M negated: they add up to v rounded to
    scale f - shift, or one unit more (floor(a + b) - floor(b) is floor(a) or floor(a) + 1)."""
    mod = 1 << bits
    sign = -1 if negate else 1
    return [(sign * (int(x) >> shift)) % mod for x in values]


def rounded_share_slots(bound: int, sigma: int, key_bits: int) -> tuple[int, int]:
    """(slot width, slots a ciphertext) of packed y + bound (non-negative, below
    2 bound + 2^(shift-1) + 2^mask: one bit above the mask), sigma + 2 bits left above
    the slots for the top mask."""
    width = rounding_mask_bits(bound, sigma) + 1
    per = (plain_bits(key_bits) - sigma - 2) // width
    if per < 1:
        raise PrecisionError(f"a {key_bits}-bit key cannot hold a {width}-bit share slot")
    return width, per


def rounded_share_message(count: int, bound: int, sigma: int, key_bits: int | None, tag: str):
    packed = None
    if key_bits is not None:
        _, per = rounded_share_slots(bound, sigma, key_bits)
        packed = -(-count // per)
    return Message(tag, MaskedCiphertexts(shape=(packed,)))


def bob_share_rounded(ctx, values: CipherArray, shift: int, bits: int, sigma: int, peer, tag):
    """Bob's half of E(v) (scale f, |v| <= its declared bound) to additive shares mod 2^l of
    v rounded to scale f - ``shift``: he sends E(v + 2^(shift-1) + bound + M) packed by
    Horner's rule; his shares -floor((bound + M) / 2^shift) mod 2^l."""
    flat = values.reshape(-1)
    bound = int(flat.bound)
    width, per = rounded_share_slots(bound, sigma, flat.public_key.bits)
    half = (1 << (shift - 1)) if shift else 0
    # M uniform on the whole slot but the value's share: y = v + half + bound + M < 2^width
    masks = [ctx.rng.randbelow((1 << width) - 2 * bound - half) for _ in range(flat.size)]
    offsets = [bound + m for m in masks]
    masked = flat.with_scale(0).add_encoded(np.array([o + half for o in offsets], dtype=object))
    packed = masked_groups(masked.with_bound(1 << width), width, per, ctx.rng)
    message = rounded_share_message(flat.size, bound, sigma, flat.public_key.bits, tag)
    ctx.send(peer, message, packed)
    return rounded_shares(offsets, shift, bits, negate=True)


def alice_share_rounded(ctx, count: int, bound: int, shift: int, bits: int, sigma: int, peer, tag):
    """Alice's half: her shares floor(slot / 2^shift) mod 2^l of the ``count`` slots
    v + 2^(shift-1) + bound + M she decrypts (a slot outside its range ends the run)."""
    pk, sk = ctx.keypair
    width, per = rounded_share_slots(bound, sigma, pk.bits)
    packed = ctx.recv(peer, rounded_share_message(count, bound, sigma, pk.bits, tag))
    return rounded_shares(unpack_slots(packed.decrypt_residues(sk), width, per, count), shift, bits)


def masked_groups(masked: CipherArray, width: int, per: int, rng) -> CipherArray:
    """Bob: the masked values (each uniform on its slot but 2^-sigma) packed ``per`` to a
    ciphertext by Horner's rule, plus R 2^(s width) above each group's s slots, R
    uniform on [1, n / 2^(s width) - 1): every plaintext Alice decrypts is uniform on
    Z_n to within 2^-sigma whatever she encrypted -- a huge value of hers would
    otherwise carry Bob's coefficients, in the clear, above the slots -- and honest
    slots never wrap."""
    packed = horner_pack(masked, width, per)
    n = int(masked.public_key.n)
    sizes = [min(per, masked.size - g) for g in range(0, masked.size, per)]
    tops = [top_mask(n, s * width, rng) for s in sizes]
    return packed.add_mask(np.array(tops, dtype=object))


def bits_message(count: int, tag: str = "gc.bits") -> Message:
    return Message(tag, Ciphertexts(0, 1, (count,)))


def alice_bits_to_bob(ctx, masked_bits, peer: str = "bob", tag: str = "gc.bits") -> None:
    """Alice: the circuit's masked bits b ^ m, encrypted under her key, to Bob."""
    pk, _ = ctx.keypair
    bits = np.asarray(masked_bits, dtype=object).reshape(-1)
    ctx.send(peer, bits_message(bits.size, tag), CipherArray.encrypt_encoded(pk, bits, 0, 1))


def bob_bits_from_circuit(ctx, masks, public_key, peer: str = "alice", tag: str = "gc.bits"):
    """Bob: E(b) = m + (1 - 2m) E(b ^ m) from Alice's E(b ^ m) and his mask bits m."""
    m = np.asarray(masks, dtype=object).reshape(-1)
    enc = ctx.recv(peer, bits_message(m.size, tag))
    public_key.same_key(enc.public_key)
    return enc.mul(1 - 2 * m).add_encoded(m).with_bound(1)
