"""Arithmetic MACs of the evaluator's input bits, from the labels she holds.

The evaluator's label of an input wire is T = W0 ^ x Delta: a MAC of her bit x over
GF(2^128) under the garbler's Delta.  Hashing the two labels to the field Z_p
(p = 2^61 - 1) and sending one correction per wire turns it into an *arithmetic* MAC
under a key alpha the garbler picks (the label-to-VOLE conversion of SIMC, Chandran,
Gupta, Obbattu and Shah, USENIX Security 2022, section 5; MASCOT's "correlated OT to
MAC" step, Keller, Orsini and Scholl, CCS 2016):

* garbler: H0 = H'(W0), H1 = H'(W0 ^ Delta); he sends c = H1 - H0 - alpha and keeps
  b = -H0 (:func:`garbler_mac`);
* evaluator: a = H'(T) - x c (:func:`evaluator_mac`), so that a + b = alpha x (mod p).

For an l-bit value v = sum_i 2^i x_i her sum_i 2^i a_i and his sum_i 2^i b_i are additive
shares of alpha v (:func:`weighted_sum`), whatever the value: she cannot produce the
share of a value other than the one her labels encode without guessing alpha (the other
label, hence H', is unknown to her: a correlation-robust hash of W0 ^ Delta), and c
hides alpha for the same reason.  A protocol checks a random linear combination of such
shares against alpha times the value it expects (``protocols/stages/bound.py``).

H' is the garbling hash (:func:`smc_hmm.gc.hashing.tccr_hash`) under tweaks of its own
(bit 62 set, apart from the gates' and the output decoding's), reduced to 61 bits.
Arithmetic mod the Mersenne prime stays in numpy's uint64: 2^61 = 1 (mod p), so
multiplying by 2^i is a 61-bit rotation and a sum folds its carries back in.
"""

from __future__ import annotations

import numpy as np

from smc_hmm.errors import InvalidInputError
from smc_hmm.gc.hashing import tccr_hash

__all__ = [
    "MAC_BITS",
    "PRIME",
    "evaluator_mac",
    "garbler_mac",
    "label_field",
    "reduce",
    "weighted_sum",
]

#: The MAC field: Z_p for the Mersenne prime p = 2^61 - 1.
MAC_BITS = 61
PRIME = (1 << MAC_BITS) - 1
_P = np.uint64(PRIME)
_M = np.uint64(PRIME)  # the low 61 bits
#: Tweak domain of the MAC hash (the gates use tweaks below 2^62, outputs bit 63).
_MAC_TWEAK = np.uint64(1 << 62)


def reduce(values) -> np.ndarray:
    """Values below 2^64 as elements of Z_p in [0, p) (uint64)."""
    v = np.asarray(values, dtype=np.uint64)
    v = (v & _M) + (v >> np.uint64(MAC_BITS))
    return np.where(v >= _P, v - _P, v)


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return reduce(a + b)  # a, b < p: the sum is below 2^62


def _neg(a: np.ndarray) -> np.ndarray:
    return np.where(a == 0, a, _P - a)


def label_field(labels: np.ndarray, tweak_base: int) -> np.ndarray:
    """H'(label_j) in Z_p for every ``(n, 2)`` label, under tweak ``tweak_base + j``."""
    labels = np.asarray(labels, dtype=np.uint64).reshape(-1, 2)
    tweaks = (np.uint64(tweak_base) + np.arange(len(labels), dtype=np.uint64)) | _MAC_TWEAK
    return reduce(tccr_hash(labels, tweaks)[:, 0] & _M)


def garbler_mac(zero_labels, delta, alpha: int, tweak_base: int):
    """The garbler's side for input wires with 0-labels ``zero_labels``: (his shares
    -H'(W0) mod p, the corrections H'(W1) - H'(W0) - alpha mod p to send)."""
    if not 0 <= int(alpha) < PRIME:
        raise InvalidInputError("the MAC key alpha is an element of Z_p")
    w0 = np.asarray(zero_labels, dtype=np.uint64).reshape(-1, 2)
    h0 = label_field(w0, tweak_base)
    h1 = label_field(w0 ^ np.asarray(delta, dtype=np.uint64), tweak_base)
    corrections = _add(_add(h1, _neg(h0)), _neg(np.full(h0.shape, int(alpha), np.uint64)))
    return _neg(h0), corrections


def evaluator_mac(labels, bits, corrections, tweak_base: int) -> np.ndarray:
    """The evaluator's shares H'(T_j) - x_j c_j mod p of her input bits ``bits``."""
    bits = np.asarray(bits, dtype=np.uint64).reshape(-1)
    c = np.asarray(corrections, dtype=np.uint64).reshape(-1)
    if bits.size != c.size or (bits > 1).any() or (c >= _P).any():
        raise InvalidInputError("one bit and one correction in Z_p per input wire")
    h = label_field(labels, tweak_base)
    return _add(h, _neg(np.where(bits == 1, c, np.uint64(0))))


def _rotate(values: np.ndarray, shift: int) -> np.ndarray:
    """2^shift * v mod p for v in [0, p): a rotation of 61 bits."""
    s = shift % MAC_BITS
    if s == 0:
        return values
    rot = ((values << np.uint64(s)) & _M) | (values >> np.uint64(MAC_BITS - s))
    return np.where(rot == _P, np.uint64(0), rot)


def weighted_sum(shares: np.ndarray, signed: bool = False) -> np.ndarray:
    """Per row of ``shares`` (``(..., l)``, bit i of a value in column i) the share
    sum_i 2^i s_i mod p of the value's MAC; ``signed``: the top bit weighs -2^(l-1)
    (two's complement)."""
    shares = np.asarray(shares, dtype=np.uint64)
    width = shares.shape[-1]
    acc = np.zeros(shares.shape[:-1], dtype=np.uint64)
    for i in range(width):
        term = _rotate(shares[..., i], i)
        if signed and i == width - 1:
            term = _neg(term)
        acc = _add(acc, term)
    return acc
