"""Half-gates garbling with free XOR and point-and-permute, a layer of gates at a time.

Hand-written because no maintained Python library garbles circuits.  Constructions:
free XOR (Kolesnikov and Schneider, ICALP 2008), half gates (Zahur, Rosulek and Evans,
"Two halves make a whole", EUROCRYPT 2015: two 16-byte rows per AND gate), the hash a
fixed-key AES (:func:`smc_hmm.gc.hashing.tccr_hash`; Bellare-Hoang-Keelveedhi-Rogaway
2013, Guo-Katz-Wang-Yu 2020).  128-bit labels: a wire's 0-label W0 and 1-label
W0 ^ Delta, Delta one global secret of the garbler with its lowest bit 1, so that the
lowest bit of a label is its point-and-permute bit.

Where the garbling kernel runs (:mod:`smc_hmm.gc.native`: AES-NI, the same values) the
gates run one by one in C; elsewhere every layer of a
:class:`~smc_hmm.gc.circuit.CompiledCircuit` is one numpy operation per gate kind: XOR
(W0[out] = W0[a] ^ W0[b]), NOT (W0[out] = W0[a] ^ Delta; the evaluator copies its label)
and AND (half gates; one hash call over the layer's 4k blocks).

Outputs are authenticated, so evaluation with a wrong label fails closed:

* to the evaluator: the garbler sends, per output wire, 8 bytes of H(W0) and of H(W1)
  (a hash under another tweak); the evaluator's label must hash to one of them, which
  gives the bit, or :class:`~smc_hmm.errors.GarbledCircuitError` is raised;
* to the garbler: the evaluator returns her output labels; each must be W0 or W1 of its
  wire (she cannot make the other without Delta: probability 2^-127 a guess).

Who learns what (a garbler and an evaluator who follow the protocol): the evaluator sees
one label per wire (pseudorandom whatever the values), the tables and her decoded
outputs; the garbler sees nothing of the evaluator's inputs (its input labels come
through OT, :mod:`smc_hmm.gc.ot`) and only the outputs sent to him.  See
``docs/garbled.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smc_hmm.errors import GarbledCircuitError, InvalidInputError
from smc_hmm.gc.circuit import CARRY, ONE, ZERO, CompiledCircuit
from smc_hmm.gc.hashing import random_blocks, tccr_hash
from smc_hmm.gc.native import gc_kernel

__all__ = [
    "DECODE_BYTES",
    "Garbling",
    "TABLE_BYTES",
    "carried_labels",
    "constant_labels",
    "decode_garbler_outputs",
    "decode_outputs",
    "decode_third_party",
    "evaluate",
    "garble",
    "garbler_input_labels",
    "garbler_output_labels",
    "new_delta",
    "third_party_decoding",
]

#: Bytes of one AND gate's table (two rows of 16).
TABLE_BYTES = 32
#: Bytes of one evaluator output wire's decoding information (two 8-byte hashes).
DECODE_BYTES = 16
#: Tweak bit separating the output hash from the gates' hashes.
_OUTPUT_TWEAK = np.uint64(1 << 63)
#: Tweak bits of a third party's decoding hashes (apart from the gates' and Alice's).
_THIRD_TWEAK = np.uint64(3 << 62)


def new_delta(rng) -> np.ndarray:
    """A fresh global offset Delta (lowest bit set)."""
    delta = random_blocks(rng, 1)[0]
    delta[0] |= np.uint64(1)
    return delta


def _mask(bits: np.ndarray, block: np.ndarray) -> np.ndarray:
    """``block`` where a bit is 1, zero where it is 0 (rows of ``(k, 2)``)."""
    return (np.uint64(0) - bits.astype(np.uint64))[:, None] & block


# The numpy path (no garbling kernel) moves rows of ``(n_wires, 2)`` labels by indexing a
# 16-byte view: several times faster than fancy indexing of a two-column array, and for
# a layer of a few hundred gates (what most layers are) about twice as fast as
# ``np.take`` and ``np.put``, whose per-call cost dominates there.


def _rows(labels: np.ndarray, wires: np.ndarray) -> np.ndarray:
    """``labels[wires]`` (``labels`` C-contiguous)."""
    return labels.view(np.complex128)[:, 0][wires].view(np.uint64).reshape(-1, 2)


def _put_rows(labels: np.ndarray, wires: np.ndarray, rows: np.ndarray) -> None:
    """``labels[wires] = rows`` (``labels`` C-contiguous)."""
    labels.view(np.complex128)[:, 0][wires] = np.ascontiguousarray(rows).view(np.complex128)[:, 0]


@dataclass
class Garbling:
    """The garbler's secret state of one garbled circuit: every wire's 0-label and Delta,
    and what it sends: the AND tables (``(and_gates, 2, 2)`` uint64) and the output
    decoding of the evaluator's outputs."""

    circuit: CompiledCircuit
    delta: np.ndarray
    zero_labels: np.ndarray
    tables: np.ndarray
    tweak_base: int

    def output_decoding(self) -> np.ndarray:
        """``(outputs, 2)`` uint64: the evaluator's outputs' hashes of W0 and W1."""
        wires = self.circuit.outputs["evaluator"]
        w0 = self.zero_labels[wires]
        return np.stack(
            [
                _output_hash(w0, wires, self.tweak_base),
                _output_hash(w0 ^ self.delta, wires, self.tweak_base),
            ],
            axis=1,
        )


def _output_hash(labels: np.ndarray, wires: np.ndarray, tweak_base: int) -> np.ndarray:
    tweaks = (np.uint64(tweak_base) + wires.astype(np.uint64)) | _OUTPUT_TWEAK
    return tccr_hash(labels, tweaks)[:, 0]


def garble(
    circuit: CompiledCircuit,
    delta: np.ndarray,
    rng,
    evaluator_zero_labels: np.ndarray,
    tweak_base: int = 0,
    carry_zero_labels: np.ndarray | None = None,
) -> Garbling:
    """Garble ``circuit`` under ``delta``: the evaluator's input wires take the 0-labels
    the OT extension gave (``evaluator_zero_labels``, ``(inputs, 2)``), the carried inputs
    an earlier circuit's carried outputs' 0-labels (``carry_zero_labels``,
    :func:`carried_labels`), every other input and the constants fresh labels from
    ``rng``.  ``tweak_base``: distinct per circuit garbled under one Delta (2 * AND gates
    + outputs tweaks each)."""
    delta = np.asarray(delta, dtype=np.uint64)
    if delta.shape != (2,) or not int(delta[0]) & 1:
        raise InvalidInputError("Delta is one block with its lowest bit set")
    ev = circuit.inputs["evaluator"]
    if np.shape(evaluator_zero_labels) != (ev.size, 2):
        raise InvalidInputError(
            f"{np.shape(evaluator_zero_labels)} labels for {ev.size} evaluator inputs"
        )
    w0 = np.zeros((circuit.n_wires, 2), dtype=np.uint64)
    fresh = np.concatenate([[ZERO, ONE], circuit.inputs["garbler"]]).astype(np.int64)
    _put_rows(w0, fresh, random_blocks(rng, fresh.size))
    _put_rows(w0, ev, evaluator_zero_labels)
    _put_rows(w0, circuit.inputs[CARRY], _carry(circuit, carry_zero_labels, InvalidInputError))
    tables = np.zeros((circuit.and_gates, 2, 2), dtype=np.uint64)
    k = gc_kernel()
    if k is not None:  # the same gates in C (smc_hmm.gc.native)
        k.garble(circuit.program, w0, delta, tweak_base, tables)
        return Garbling(circuit, delta, w0, tables, tweak_base)
    for layer in circuit.layers:  # most layers lack one kind of gate: a call costs ~1 us
        xa, xb, xo = layer.xor
        if xo.size:
            _put_rows(w0, xo, _rows(w0, xa) ^ _rows(w0, xb))
        na, no = layer.not_
        if no.size:
            _put_rows(w0, no, _rows(w0, na) ^ delta)
        if layer.and_index.size:
            _garble_and(w0, tables, delta, layer, tweak_base)
    return Garbling(circuit, delta, w0, tables, tweak_base)


def _carry(circuit: CompiledCircuit, labels, error) -> np.ndarray:
    count = circuit.input_count(CARRY)
    if labels is None:
        labels = np.zeros((0, 2), np.uint64)
    if np.shape(labels) != (count, 2):
        raise error(f"{np.shape(labels)} carried labels, the circuit carries in {count}")
    return labels


def carried_labels(circuit: CompiledCircuit, labels: np.ndarray) -> np.ndarray:
    """The labels of ``circuit``'s carried outputs, from one label per wire: the
    garbler's 0-labels (``Garbling.zero_labels``) or the evaluator's active labels."""
    return _rows(labels, circuit.outputs[CARRY])


def _tweaks(layer, tweak_base: int) -> np.ndarray:
    """``(2, 1, k)``: the tweaks j (the A half) and j + 1 (the B half) of a layer's AND
    gates, j = tweak_base + 2 * index, broadcast over the pair of labels hashed."""
    t = np.empty((2, 1, layer.and_index.size), np.uint64)
    np.multiply(layer.and_index, 2, out=t[0, 0], casting="unsafe")
    t[0, 0] += np.uint64(tweak_base)
    np.add(t[0, 0], np.uint64(1), out=t[1, 0])
    return t


def _gathered(w, layer, slots: int) -> np.ndarray:
    """``(2, slots, k, 2)`` with the AND gates' input labels A and B in ``[:, 0]`` (any
    other slot free for the caller)."""
    a, b, _ = layer.and_
    x = np.empty((2, slots, a.size, 2), np.uint64)
    labels, pairs = w.view(np.complex128)[:, 0], x.view(np.complex128)[..., 0]
    pairs[0, 0], pairs[1, 0] = labels[a], labels[b]
    return x


def _garble_and(w0, tables, delta, layer, tweak_base: int) -> None:
    """One layer of AND gates (Zahur-Rosulek-Evans, Figure 2), vectorised over the
    layer's A and B halves at once (a layer's few hundred gates pay per numpy call);
    a point-and-permute bit selects by an all-ones or all-zeros mask, not by boolean
    indexing."""
    x = _gathered(w0, layer, 2)  # [A, B] x [0-label, 1-label]
    np.bitwise_xor(x[:, 0], delta, out=x[:, 1])
    h = tccr_hash(x, _tweaks(layer, tweak_base))
    t = h[:, 0] ^ h[:, 1]  # H(A0) ^ H(A1), H(B0) ^ H(B1)
    pa, pb = _select(x[:, 0])
    tg, hb = t
    tg ^= pb & delta
    wg0 = h[0, 0] ^ h[1, 0]
    wg0 ^= pa & tg
    wg0 ^= pb & hb  # W_G^0 ^ W_E^0, W_E^0 = H(B0) ^ pb (T_E ^ A0)
    _put_rows(w0, layer.and_[2], wg0)
    rows = _table_rows(tables, layer)
    rows[:, 0] = tg
    np.bitwise_xor(hb, x[0, 0], out=rows[:, 1])


def _select(labels: np.ndarray) -> np.ndarray:
    """``(..., k, 1)`` masks: all ones where a label's point-and-permute bit is 1."""
    masks = labels[..., :1] & np.uint64(1)
    return np.subtract(np.uint64(0), masks, out=masks)


def _table_rows(tables: np.ndarray, layer) -> np.ndarray:
    """The layer's AND tables: a contiguous run (the compiler numbers AND gates in layer
    order, :meth:`~smc_hmm.gc.circuit.Circuit.compile`), so a view, not a copy."""
    first = int(layer.and_index[0])
    return tables[first : first + layer.and_index.size]


def garbler_input_labels(garbling: Garbling, bits) -> np.ndarray:
    """The active labels of the garbler's own input bits (what he sends in the clear)."""
    wires = garbling.circuit.inputs["garbler"]
    bits = np.asarray(bits, dtype=np.uint8).reshape(-1)
    if bits.size != wires.size:
        raise InvalidInputError(f"{bits.size} garbler input bits, the circuit takes {wires.size}")
    return garbling.zero_labels[wires] ^ _mask(bits & 1, garbling.delta[None, :])


def constant_labels(garbling: Garbling) -> np.ndarray:
    """The active labels of the constant wires 0 and 1 (sent with the tables)."""
    w = garbling.zero_labels
    return np.stack([w[ZERO], w[ONE] ^ garbling.delta])


def evaluate(
    circuit: CompiledCircuit,
    tables: np.ndarray,
    constants: np.ndarray,
    garbler_labels: np.ndarray,
    evaluator_labels: np.ndarray,
    tweak_base: int = 0,
    carry_labels: np.ndarray | None = None,
) -> np.ndarray:
    """The evaluator's run: one active label per wire, ``(n_wires, 2)``; the carried
    inputs take ``carry_labels`` (an earlier circuit's, :func:`carried_labels`).  Sizes
    are checked first (:class:`~smc_hmm.errors.GarbledCircuitError`)."""
    expected = {
        "tables": ((circuit.and_gates, 2, 2), tables),
        "constant labels": ((2, 2), constants),
        "garbler labels": ((circuit.input_count("garbler"), 2), garbler_labels),
        "evaluator labels": ((circuit.input_count("evaluator"), 2), evaluator_labels),
    }
    for what, (shape, value) in expected.items():
        if np.shape(value) != shape:
            raise GarbledCircuitError(f"{what} of shape {np.shape(value)}, expected {shape}")
    w = np.zeros((circuit.n_wires, 2), dtype=np.uint64)
    w[[ZERO, ONE]] = constants
    _put_rows(w, circuit.inputs["garbler"], garbler_labels)
    _put_rows(w, circuit.inputs["evaluator"], evaluator_labels)
    _put_rows(w, circuit.inputs[CARRY], _carry(circuit, carry_labels, GarbledCircuitError))
    k = gc_kernel()
    if k is not None:  # the same gates in C (smc_hmm.gc.native)
        k.evaluate(circuit.program, w, tweak_base, np.ascontiguousarray(tables, np.uint64))
        return w
    for layer in circuit.layers:
        xa, xb, xo = layer.xor
        if xo.size:
            _put_rows(w, xo, _rows(w, xa) ^ _rows(w, xb))
        na, no = layer.not_
        if no.size:
            _put_rows(w, no, _rows(w, na))
        if layer.and_index.size:
            _evaluate_and(w, tables, layer, tweak_base)
    return w


def _evaluate_and(w, tables, layer, tweak_base: int) -> None:
    """One layer of AND gates at the evaluator (Zahur-Rosulek-Evans, Figure 2)."""
    x = _gathered(w, layer, 1)  # the active labels of A and B
    ha, hb = tccr_hash(x, _tweaks(layer, tweak_base))[:, 0]
    table = _table_rows(tables, layer)
    sa, sb = _select(x[:, 0])
    ha ^= sa & table[:, 0]
    hb ^= sb & (table[:, 1] ^ x[0, 0])
    ha ^= hb
    _put_rows(w, layer.and_[2], ha)


def decode_outputs(
    circuit: CompiledCircuit, labels: np.ndarray, decoding: np.ndarray, tweak_base: int = 0
) -> np.ndarray:
    """The evaluator's output bits: each output label's hash must be one of its wire's
    two (:class:`~smc_hmm.errors.GarbledCircuitError` otherwise: nothing is output)."""
    wires = circuit.outputs["evaluator"]
    if np.shape(decoding) != (wires.size, 2):
        raise GarbledCircuitError(
            f"output decoding of shape {np.shape(decoding)}, expected {(wires.size, 2)}"
        )
    h = _output_hash(labels[wires], wires, tweak_base)
    is0, is1 = h == decoding[:, 0], h == decoding[:, 1]
    if not (is0 ^ is1).all():
        raise GarbledCircuitError("an output label is not one of its wire's labels")
    return is1.astype(np.uint8)


def garbler_output_labels(circuit: CompiledCircuit, labels: np.ndarray) -> np.ndarray:
    """The evaluator's labels of the garbler's outputs (what she returns to him)."""
    return labels[circuit.outputs["garbler"]]


def decode_garbler_outputs(garbling: Garbling, returned: np.ndarray) -> np.ndarray:
    """The garbler's output bits from the labels the evaluator returned: each must be
    W0 or W1 of its wire, or :class:`~smc_hmm.errors.GarbledCircuitError`."""
    wires = garbling.circuit.outputs["garbler"]
    if np.shape(returned) != (wires.size, 2):
        raise GarbledCircuitError(
            f"{np.shape(returned)} output labels returned, expected {(wires.size, 2)}"
        )
    w0 = garbling.zero_labels[wires]
    is0 = (returned == w0).all(axis=1)
    is1 = (returned == (w0 ^ garbling.delta)).all(axis=1)
    if not (is0 | is1).all():
        raise GarbledCircuitError("a returned output label is not one of its wire's labels")
    return is1.astype(np.uint8)


def third_party_decoding(garbling: Garbling) -> np.ndarray:
    """``(outputs, 2, 2)`` uint64: H(W0, i) and H(W1, i) (128 bits each, tweak i apart from
    every other hash) of the garbler's output wire i, for a third party who decodes the
    labels the evaluator sends it (:func:`decode_third_party`); the garbler never sees
    them, the evaluator never sees the hashes."""
    wires = garbling.circuit.outputs["garbler"]
    w0 = garbling.zero_labels[wires]
    tweaks = np.arange(wires.size, dtype=np.uint64) | _THIRD_TWEAK
    return np.stack([tccr_hash(w0, tweaks), tccr_hash(w0 ^ garbling.delta, tweaks)], axis=1)


def decode_third_party(labels: np.ndarray, decoding: np.ndarray) -> np.ndarray:
    """The third party's output bits: each label's hash must be its wire's H(W0) or
    H(W1) (:class:`~smc_hmm.errors.GarbledCircuitError` otherwise: forging the other label
    needs Delta)."""
    labels, decoding = np.asarray(labels, np.uint64), np.asarray(decoding, np.uint64)
    if labels.ndim != 2 or decoding.shape != (labels.shape[0], 2, 2):
        raise GarbledCircuitError(
            f"{np.shape(labels)} labels against a decoding of shape {np.shape(decoding)}"
        )
    tweaks = np.arange(labels.shape[0], dtype=np.uint64) | _THIRD_TWEAK
    h = tccr_hash(labels, tweaks)
    is0 = (h == decoding[:, 0]).all(axis=1)
    is1 = (h == decoding[:, 1]).all(axis=1)
    if not (is0 ^ is1).all():
        raise GarbledCircuitError("an output label is not one of its wire's labels")
    return is1.astype(np.uint8)
