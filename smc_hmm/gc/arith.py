"""l-bit two's-complement arithmetic on circuit wires: add, subtract, compare, mux, max,
argmax with its index, and compare-and-select with the bit kept as a backpointer.

A value is a bundle of wires of shape ``(..., l)``, least significant bit first (a
:class:`~smc_hmm.gc.circuit.Circuit` hands them out); every function works element-wise
over the leading axes, so a batch of comparisons is one call.  AND gates per element
(XOR and NOT are free):

================================  =======================================
``add``, ``sub``                  l - 1 (the carry out of the top bit is dropped)
``less``                          l (signed; ``unsigned=True`` also l)
``mux``                           l
``select_max``, ``maximum``       2l (a comparison, then a mux)
``argmax`` over K values          (K - 1) (2l) + the index bits' muxes
================================  =======================================

:func:`and_gates` measures any of them on a scratch circuit.  Ties break as numpy's
``argmax``: the first of equal maxima wins (and ``select_max`` keeps its first operand).
:func:`to_bits` and :func:`from_bits` convert integers at the edges.  See
``docs/garbled.md``.
"""

from __future__ import annotations

import numpy as np

from smc_hmm.errors import InvalidInputError
from smc_hmm.gc.circuit import Circuit

#: The widest value the conversions take (wider circuits are built the same way).
MAX_BITS = 1024

__all__ = [
    "MAX_BITS",
    "add",
    "and_gates",
    "argmax",
    "constant",
    "from_bits",
    "less",
    "maximum",
    "mux",
    "select_max",
    "sub",
    "to_bits",
]


def to_bits(values, bits: int) -> np.ndarray:
    """Integers (two's complement, or unsigned below 2^bits) as ``(..., bits)`` 0/1 uint8,
    least significant bit first."""
    if not isinstance(bits, int) or not 1 <= bits <= MAX_BITS:
        raise InvalidInputError(f"values of 1 to {MAX_BITS} bits, got {bits!r}")
    v = np.asarray(values, dtype=object)
    mask = (1 << bits) - 1
    if bits <= 63:
        low = np.vectorize(lambda x: int(x) & mask, otypes=[np.uint64])(v)
        shifts = np.arange(bits, dtype=np.uint64)
        return ((low[..., None] >> shifts) & np.uint64(1)).astype(np.uint8)
    nbytes = (bits + 7) // 8
    raw = b"".join((int(x) & mask).to_bytes(nbytes, "little") for x in v.reshape(-1))
    out = np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")
    return out.reshape(v.shape + (nbytes * 8,))[..., :bits].copy()


def from_bits(bits, signed: bool = True) -> np.ndarray:
    """``(..., l)`` bits (least significant first) as integers (``signed``: two's
    complement): int64 up to 63 bits, Python ints (object arrays) beyond."""
    b = np.asarray(bits, dtype=np.uint8)
    l_bits = b.shape[-1]
    if l_bits > 63:
        packed = np.packbits(b, axis=-1, bitorder="little")
        flat = [
            int.from_bytes(row.tobytes(), "little") for row in packed.reshape(-1, packed.shape[-1])
        ]
        if signed:
            flat = [x - (1 << l_bits) if x >> (l_bits - 1) else x for x in flat]
        return np.array(flat, dtype=object).reshape(b.shape[:-1])
    value = (b.astype(np.int64) << np.arange(l_bits, dtype=np.int64)).sum(axis=-1)
    if signed:
        value = np.where(value >= (1 << (l_bits - 1)), value - (1 << l_bits), value)
    return value.astype(np.int64)


def constant(values, bits: int) -> np.ndarray:
    """Public integers as constant wires ``(..., bits)`` (they cost no gate)."""
    return Circuit.constant(to_bits(values, bits))


def _carry_chain(c: Circuit, x, y, carry_in, keep_top: bool):
    """Ripple-carry x + y + carry_in: the sum bits and the final carry; one AND a bit
    (the majority c ^ ((x ^ c) & (y ^ c))), the top bit's when ``keep_top``."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    l_bits = x.shape[-1]
    carry = np.broadcast_to(np.asarray(carry_in, dtype=np.int64), x.shape[:-1])
    out = np.empty(x.shape, dtype=np.int64)
    for i in range(l_bits):
        xi, yi = x[..., i], y[..., i]
        out[..., i] = c.xor(c.xor(xi, yi), carry)
        if i < l_bits - 1 or keep_top:
            carry = c.xor(carry, c.and_(c.xor(xi, carry), c.xor(yi, carry)))
    return out, carry


def add(c: Circuit, x, y) -> np.ndarray:
    """x + y mod 2^l."""
    return _carry_chain(c, x, y, 0, keep_top=False)[0]


def sub(c: Circuit, x, y) -> np.ndarray:
    """x - y mod 2^l (x + ~y + 1)."""
    return _carry_chain(c, x, c.not_(y), 1, keep_top=False)[0]


def less(c: Circuit, x, y, unsigned: bool = False) -> np.ndarray:
    """The bit [x < y] (signed two's complement unless ``unsigned``): the carry out of
    x + ~y + 1 is [x >= y]; for signed values both top bits are flipped first (free)."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if not unsigned:
        x, y = x.copy(), y.copy()
        x[..., -1] = c.not_(x[..., -1])
        y[..., -1] = c.not_(y[..., -1])
    ny = c.not_(y)
    x, ny = np.broadcast_arrays(x, ny)
    carry = np.ones(x.shape[:-1], dtype=np.int64)  # the constant 1
    for i in range(x.shape[-1]):
        carry = c.xor(carry, c.and_(c.xor(x[..., i], carry), c.xor(ny[..., i], carry)))
    return c.not_(carry)


def mux(c: Circuit, s, x, y) -> np.ndarray:
    """x where the bit s is 1, else y: y ^ (s & (x ^ y)) bit by bit."""
    s = np.asarray(s)[..., None]
    return c.xor(y, c.and_(s, c.xor(x, y)))


def select_max(c: Circuit, x, y) -> tuple[np.ndarray, np.ndarray]:
    """(max(x, y), b) with b = [x < y]: the backpointer (1: y was taken; a tie keeps x)."""
    b = less(c, x, y)
    return mux(c, b, y, x), b


def maximum(c: Circuit, x, y) -> np.ndarray:
    return select_max(c, x, y)[0]


def argmax(c: Circuit, values, payload=None) -> tuple[np.ndarray, np.ndarray]:
    """(max, payload of the winner) over the second-to-last axis of ``values``
    (``(..., K, l)``): a tournament tree, the lower indices always on the left, the right
    taken only when strictly greater (numpy's ties).  ``payload`` (``(..., K, p)`` wires)
    rides along, muxed at every match; the default is the index as public
    ``ceil(log2 K)``-bit constants, whose muxes fold to the few bits that differ."""
    values = np.asarray(values)
    k = values.shape[-2]
    if k < 1:
        raise InvalidInputError("an argmax needs at least one value")
    if payload is None:
        width = max(1, (k - 1).bit_length())
        payload = constant(np.arange(k), width)
    payload = np.broadcast_to(np.asarray(payload), values.shape[:-2] + np.shape(payload)[-2:])
    if payload.shape[-2] != k:
        raise InvalidInputError(f"a payload for {payload.shape[-2]} values, not {k}")
    while values.shape[-2] > 1:
        n = values.shape[-2]
        pairs = n // 2
        left, right = values[..., 0 : 2 * pairs : 2, :], values[..., 1 : 2 * pairs : 2, :]
        pl, pr = payload[..., 0 : 2 * pairs : 2, :], payload[..., 1 : 2 * pairs : 2, :]
        best, take = select_max(c, left, right)
        carried = mux(c, take, pr, pl)
        if n % 2:  # the last one has a bye
            best = np.concatenate([best, values[..., -1:, :]], axis=-2)
            carried = np.concatenate([carried, payload[..., -1:, :]], axis=-2)
        values, payload = best, carried
    return values[..., 0, :], payload[..., 0, :]


def and_gates(function, bits: int, *shapes) -> int:
    """The AND gates ``function(circuit, *operands)`` costs on garbler inputs of ``bits``
    bits and the given leading shapes (one operand per shape)."""
    c = Circuit()
    operands = [c.input("garbler", tuple(s) + (bits,)) for s in shapes]
    function(c, *operands)
    return c.and_count
