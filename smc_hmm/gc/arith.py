"""l-bit two's-complement arithmetic on circuit wires: add, subtract, compare, mux, max,
argmax with its index, and compare-and-select with the bit kept as a backpointer.

A value is a bundle of wires of shape ``(..., l)``, least significant bit first (a
:class:`~smc_hmm.gc.circuit.Circuit` hands them out); every function works element-wise
over the leading axes, so a batch of comparisons is one call.  AND gates per element
(XOR and NOT are free):

================================  =======================================
``add``                           l - 1 in l layers, or about 2 l log2(l) in 2 log2(l)
                                  layers for small operands (``depth``)
``sub``                           l - 1 (the carry out of the top bit is dropped)
``less``                          l in l layers, or 3l - 2 in 1 + log2(l) layers for small
                                  operands (``depth``; signed or unsigned alike)
``mux``                           l
``select_max``, ``maximum``       a comparison, then a mux (l)
``argmax`` over K values          K - 1 compare-and-selects + the index bits' muxes
``compress`` (3 values to 2)      l - 1 in one layer (a carry-save adder)
``cs_less`` (carry-save values)   5l in 3 + log2(l) layers
``group_argmax``                  per group of K, K - 1 compare-and-selects, all the
                                  groups' matches of a round in one batch
``select`` one of 2^w by w bits   (2^w - 1) l, a tree of muxes
``square`` of a signed l-bit x    about l^2 / 2 + 2 l^2: the products x_i x_j (i < j) of
                                  |x|, summed by a carry-save tree
================================  =======================================

*Carry-save* values (``(..., 2, l)``: the value is the sum of the two mod 2^l) let a long
chain of additions and comparisons -- the Viterbi recursion -- run in a few layers per
step: an addition is one layer of full adders (:func:`compress`), and only a comparison
propagates a carry, through a log-depth tree (:func:`cs_less`).  Additive shares of a
value are a carry-save value as they stand.

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
    "LOG_DEPTH_MAX_BITS",
    "MAX_BITS",
    "add",
    "all_of",
    "and_gates",
    "argmax",
    "compress",
    "constant",
    "cs_less",
    "cs_value",
    "group_argmax",
    "from_bits",
    "less",
    "maximum",
    "multiply",
    "mux",
    "select",
    "select_max",
    "sign_extend",
    "sum_rows",
    "square",
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
    complement): int64 up to 62 bits, Python ints (object arrays) beyond (at 63 bits the
    two's-complement correction 2^63 does not fit an int64)."""
    b = np.asarray(bits, dtype=np.uint8)
    l_bits = b.shape[-1]
    if l_bits > 62:
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


def add(c: Circuit, x, y, depth: str = "auto") -> np.ndarray:
    """x + y mod 2^l.  ``depth``: ``"ripple"`` (l - 1 AND gates in l layers), ``"log"``
    (a Kogge-Stone carry tree, about 2 l log2(l) AND gates in 2 log2(l) layers) or
    ``"auto"`` (the tree for operands of fewer than :data:`LOG_DEPTH_MAX_BITS` bits)."""
    if depth not in ("auto", "ripple", "log"):
        raise InvalidInputError(f"depth is auto, ripple or log, not {depth!r}")
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if depth == "log" or (depth == "auto" and x.size < LOG_DEPTH_MAX_BITS):
        return _add_log(c, x, y)
    return _carry_chain(c, x, y, 0, keep_top=False)[0]


def _add_log(c: Circuit, x, y) -> np.ndarray:
    """Kogge-Stone: generate g = x & y and propagate p = x ^ y per bit; after the steps
    d = 1, 2, 4, ... (g_i ^= p_i & g_(i-d), p_i &= p_(i-d), the two terms of g exclusive)
    g_i is the carry out of bit i, and the sum bit i is p_i ^ g_(i-1)."""
    g, p0 = c.and_(x, y), c.xor(x, y)
    p = p0.copy()
    bits, d = x.shape[-1], 1
    while d < bits - 1:  # the carry out of the top bit is dropped: bits - 1 carries needed
        g_new = g.copy()
        g_new[..., d:] = c.xor(g[..., d:], c.and_(p[..., d:], g[..., :-d]))
        if 2 * d < bits - 1:
            p_new = p.copy()
            p_new[..., d:] = c.and_(p[..., d:], p[..., :-d])
            p = p_new
        g, d = g_new, 2 * d
    out = p0.copy()
    out[..., 1:] = c.xor(p0[..., 1:], g[..., :-1])
    return out


def sub(c: Circuit, x, y) -> np.ndarray:
    """x - y mod 2^l (x + ~y + 1)."""
    return _carry_chain(c, x, c.not_(y), 1, keep_top=False)[0]


#: Below this many operand bits a comparison takes the log-depth circuit: a small circuit
#: is bound by its number of layers (each a few numpy calls), a large one by its AND gates.
LOG_DEPTH_MAX_BITS = 2048


def less(c: Circuit, x, y, unsigned: bool = False, depth: str = "auto") -> np.ndarray:
    """The bit [x < y] (signed two's complement unless ``unsigned``; for signed values
    both top bits are flipped first, free).  ``depth``: ``"ripple"`` -- the carry out of
    x + ~y + 1 is [x >= y], l AND gates in l layers; ``"log"`` -- a prefix tree over
    (less, equal) pairs, 3l - 2 AND gates in 1 + log2(l) layers; ``"auto"`` -- the log
    tree for operands of fewer than :data:`LOG_DEPTH_MAX_BITS` bits in all."""
    if depth not in ("auto", "ripple", "log"):
        raise InvalidInputError(f"depth is auto, ripple or log, not {depth!r}")
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if not unsigned:
        x, y = x.copy(), y.copy()
        x[..., -1] = c.not_(x[..., -1])
        y[..., -1] = c.not_(y[..., -1])
    if depth == "log" or (depth == "auto" and x.size < LOG_DEPTH_MAX_BITS):
        return _less_log(c, x, y)
    ny = c.not_(y)
    x, ny = np.broadcast_arrays(x, ny)
    carry = np.ones(x.shape[:-1], dtype=np.int64)  # the constant 1
    for i in range(x.shape[-1]):
        carry = c.xor(carry, c.and_(c.xor(x[..., i], carry), c.xor(ny[..., i], carry)))
    return c.not_(carry)


def _less_log(c: Circuit, x, y) -> np.ndarray:
    """Unsigned [x < y] by a prefix tree: per bit lt = ~x & y and eq = ~(x ^ y); a higher
    group and the lower one next to it combine as lt = lt_hi ^ (eq_hi & lt_lo) (the two
    terms exclude each other) and eq = eq_hi & eq_lo."""
    lt = c.and_(c.not_(x), y)
    eq = c.not_(c.xor(x, y))
    while lt.shape[-1] > 1:
        n = lt.shape[-1]
        pairs = n // 2
        lo_lt, hi_lt = lt[..., 0 : 2 * pairs : 2], lt[..., 1 : 2 * pairs : 2]
        lo_eq, hi_eq = eq[..., 0 : 2 * pairs : 2], eq[..., 1 : 2 * pairs : 2]
        merged_lt = c.xor(hi_lt, c.and_(hi_eq, lo_lt))
        last = pairs == 1 and n == 2  # the root needs no equality
        merged_eq = hi_eq if last else c.and_(hi_eq, lo_eq)
        if n % 2:  # the most significant group waits for the next level
            merged_lt = np.concatenate([merged_lt, lt[..., -1:]], axis=-1)
            merged_eq = np.concatenate([merged_eq, eq[..., -1:]], axis=-1)
        lt, eq = merged_lt, merged_eq
    return lt[..., 0]


def mux(c: Circuit, s, x, y) -> np.ndarray:
    """x where the bit s is 1, else y: y ^ (s & (x ^ y)) bit by bit."""
    s = np.asarray(s)[..., None]
    return c.xor(y, c.and_(s, c.xor(x, y)))


def select(c: Circuit, values, index) -> np.ndarray:
    """``values[index]`` for an index given by its w bits (least significant first) over
    ``2^w`` values ``(2^w, l)``: a tree of muxes, one level a bit."""
    values, index = np.asarray(values), np.asarray(index)
    if values.shape[0] != 1 << index.size:
        raise InvalidInputError(f"{values.shape[0]} values for a {index.size}-bit index")
    for bit in index:
        values = mux(c, bit, values[1::2], values[0::2])
    return values[0]


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


def compress(c: Circuit, x, y, z, carry_in: int = 0) -> np.ndarray:
    """x + y + z + carry_in as a carry-save value ``(..., 2, l)`` mod 2^l: per bit the sum
    x ^ y ^ z, and the majority shifted up one place (carry_in, a public bit, fills the
    empty lowest place); one AND a bit, in one layer."""
    x, y, z = np.broadcast_arrays(np.asarray(x), np.asarray(y), np.asarray(z))
    total = c.xor(c.xor(x, y), z)
    top = x.shape[-1] - 1  # the top bit's carry leaves the l bits
    majority = c.xor(
        z[..., :top], c.and_(c.xor(x[..., :top], z[..., :top]), c.xor(y, z)[..., :top])
    )
    carry = np.empty_like(total)
    carry[..., 0] = Circuit.constant(np.full(total.shape[:-1], carry_in))
    carry[..., 1:] = majority
    return np.stack([total, carry], axis=-2)


def _top_carry(c: Circuit, x, y) -> np.ndarray:
    """The carry into the top bit of x + y: a prefix tree over (generate, propagate)
    pairs of the lower bits, (g, p)_hi o (g, p)_lo = (g_hi ^ (p_hi & g_lo), p_hi & p_lo)
    (the two terms of g exclude each other)."""
    g = c.and_(x[..., :-1], y[..., :-1])
    p = c.xor(x[..., :-1], y[..., :-1])
    while g.shape[-1] > 1:
        n = g.shape[-1]
        pairs = n // 2
        lo_g, hi_g = g[..., 0 : 2 * pairs : 2], g[..., 1 : 2 * pairs : 2]
        lo_p, hi_p = p[..., 0 : 2 * pairs : 2], p[..., 1 : 2 * pairs : 2]
        merged_g = c.xor(hi_g, c.and_(hi_p, lo_g))
        merged_p = hi_p if n == 2 else c.and_(hi_p, lo_p)  # the root needs no propagate
        if n % 2:  # the most significant group waits for the next level
            merged_g = np.concatenate([merged_g, g[..., -1:]], axis=-1)
            merged_p = np.concatenate([merged_p, p[..., -1:]], axis=-1)
        g, p = merged_g, merged_p
    return g[..., 0]


def cs_less(c: Circuit, x, y) -> np.ndarray:
    """[x < y] for carry-save values (``(..., 2, l)``) whose difference is below 2^(l-1)
    in magnitude: the sign of x0 + x1 + ~y0 + ~y1 + 2, two compressions and one carry
    tree."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    first = compress(c, x[..., 0, :], x[..., 1, :], c.not_(y[..., 0, :]), carry_in=1)
    a, b = _split(compress(c, *_split(first), c.not_(y[..., 1, :]), carry_in=1))
    return c.xor(c.xor(a[..., -1], b[..., -1]), _top_carry(c, a, b))


def _split(cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return cs[..., 0, :], cs[..., 1, :]


def cs_value(c: Circuit, x) -> np.ndarray:
    """The carry-save value ``(..., 2, l)`` as an ordinary l-bit value (one addition)."""
    x = np.asarray(x)
    return add(c, x[..., 0, :], x[..., 1, :])


def group_argmax(
    c: Circuit, values, groups, payload, carry_save: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per group (a sequence of indices into the first axis of ``values``, lower values
    first), its maximum and the ``payload`` row of its winner: tournaments in lockstep,
    every round's matches of all groups one batched compare-and-select, the right taken
    only when strictly greater (numpy's ties), the last of an odd round sitting out.
    ``values`` are ``(n, l)`` or carry-save ``(n, 2, l)``; ``payload`` ``(n, p)`` wires
    (None: no payload, an empty one back).  Returns ``(len(groups), ...)`` stacks."""
    values = np.asarray(values)
    if payload is None:
        payload = np.zeros((values.shape[0], 0), dtype=np.int64)
    payload = np.asarray(payload)
    if payload.shape[0] != values.shape[0]:
        raise InvalidInputError(f"a payload for {payload.shape[0]} values, not {values.shape[0]}")
    if any(len(g) < 1 for g in groups):
        raise InvalidInputError("an argmax needs at least one value")
    current = [[(values[i], payload[i]) for i in g] for g in groups]
    while any(len(g) > 1 for g in current):
        pairs = [(g[i], g[i + 1]) for g in current for i in range(0, len(g) - 1, 2)]
        left = np.stack([p[0][0] for p in pairs])
        right = np.stack([p[1][0] for p in pairs])
        take = cs_less(c, left, right) if carry_save else less(c, left, right)
        best = mux(c, take[:, None] if carry_save else take, right, left)
        carried = np.stack([p[0][1] for p in pairs])
        if carried.shape[-1]:
            carried = mux(c, take, np.stack([p[1][1] for p in pairs]), carried)
        done, at = [], 0
        for g in current:
            merged = [(best[at + k], carried[at + k]) for k in range(len(g) // 2)]
            at += len(g) // 2
            done.append(merged + ([g[-1]] if len(g) % 2 else []))
        current = done
    return np.stack([g[0][0] for g in current]), np.stack([g[0][1] for g in current])


def and_gates(function, bits: int, *shapes) -> int:
    """The AND gates ``function(circuit, *operands)`` costs on garbler inputs of ``bits``
    bits and the given leading shapes (one operand per shape)."""
    c = Circuit()
    operands = [c.input("garbler", tuple(s) + (bits,)) for s in shapes]
    function(c, *operands)
    return c.and_count


def sign_extend(x, bits: int) -> np.ndarray:
    """A signed value ``(..., l)`` as ``bits`` >= l wires (the sign wire repeated: free)."""
    x = np.asarray(x)
    if bits < x.shape[-1]:
        raise InvalidInputError(f"cannot sign-extend {x.shape[-1]} bits to {bits}")
    top = np.repeat(x[..., -1:], bits - x.shape[-1], axis=-1)
    return np.concatenate([x, top], axis=-1)


def square(c: Circuit, x) -> np.ndarray:
    """x * x of signed l-bit values as non-negative 2l-bit values (``(..., 2l)``): the
    magnitude m = |x| (a conditional negation), then m^2 = sum_i m_i 2^(2i) + sum_(i<j)
    m_i m_j 2^(i+j+1), the rows summed by a carry-save tree and one final addition."""
    x = np.asarray(x)
    l_bits = x.shape[-1]
    sign = x[..., -1]
    flipped = c.xor(x, sign[..., None])  # ~x where negative: |x| = flipped + sign
    m = _carry_chain(c, flipped, np.zeros_like(flipped), sign, keep_top=False)[0]
    width = 2 * l_bits
    zero = np.zeros(x.shape[:-1] + (width,), dtype=np.int64)
    rows = []
    diagonal = zero.copy()
    diagonal[..., 0 : 2 * l_bits : 2] = m
    rows.append(diagonal)
    for i in range(l_bits - 1):
        row = zero.copy()
        products = c.and_(m[..., i : i + 1], m[..., i + 1 :])  # m_i m_j, j > i
        row[..., 2 * i + 2 : 2 * i + 2 + products.shape[-1]] = products
        rows.append(row)
    return sum_rows(c, rows)


def multiply(c: Circuit, x, y) -> np.ndarray:
    """x * y for signed l-bit x and unsigned m-bit y (``(..., l)``, ``(..., m)``) as
    signed (l + m)-bit values: the rows (x ANDed with y_i, sign-extended) shifted by i,
    summed by a carry-save tree and one final addition (about 2 l m AND gates)."""
    x, y = np.asarray(x), np.asarray(y)
    width = x.shape[-1] + y.shape[-1]
    shape = np.broadcast_shapes(x.shape[:-1], y.shape[:-1]) + (width,)
    rows = []
    for i in range(y.shape[-1]):  # x y_i on l wires, its sign repeated above (free)
        row = np.zeros(shape, dtype=np.int64)
        row[..., i:] = sign_extend(c.and_(x, y[..., i : i + 1]), width - i)
        rows.append(row)
    return sum_rows(c, rows)


def sum_rows(c: Circuit, rows: list) -> np.ndarray:
    """The sum mod 2^l of rows of l-bit values: a carry-save tree of :func:`compress`
    (three rows to two, one AND a bit) and one final ripple addition."""
    while len(rows) > 2:
        merged = []
        for k in range(0, len(rows) - 2, 3):
            merged += list(np.moveaxis(compress(c, rows[k], rows[k + 1], rows[k + 2]), -2, 0))
        merged += rows[len(rows) - len(rows) % 3 :] if len(rows) % 3 else []
        rows = merged
    return rows[0] if len(rows) == 1 else add(c, rows[0], rows[1], depth="ripple")


def all_of(c: Circuit, bits):
    """The AND of a vector of bits: a balanced tree (log2 n layers, n - 1 AND gates)."""
    bits = np.asarray(bits).reshape(-1)
    if not bits.size:
        return np.int64(1)  # the constant 1
    while bits.size > 1:
        half = bits.size // 2
        merged = c.and_(bits[:half], bits[half : 2 * half])
        bits = np.concatenate([merged, bits[2 * half :]])
    return bits[0]
