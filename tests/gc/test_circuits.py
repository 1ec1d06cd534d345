"""The circuit builder and half-gates garbling against plaintext: every operation on
random and edge values (0, +-2^(l-1), equal values, ties), AND-gate counts, constant
folding, the same gate sequence for any input, and evaluation that fails closed."""

import numpy as np
import pytest

from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import GarbledCircuitError, InvalidInputError
from smc_hmm.gc import arith
from smc_hmm.gc.circuit import Circuit, evaluate_plain
from smc_hmm.gc.garble import (
    constant_labels,
    decode_garbler_outputs,
    decode_outputs,
    evaluate,
    garble,
    garbler_input_labels,
    garbler_output_labels,
    new_delta,
)
from smc_hmm.gc.hashing import random_blocks

BITS = (16, 32, 64)


def _values(rng, bits: int, n: int) -> np.ndarray:
    """Random l-bit values with the edges mixed in: 0, +-1, -2^(l-1), 2^(l-1) - 1."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    edges = np.array([0, 1, -1, lo, hi, lo + 1, hi - 1], dtype=object)
    rand = np.array([int(rng.integers(0, 1 << 62)) % (1 << bits) + lo for _ in range(n)])
    return np.concatenate([edges, rand.astype(object)])


def _pairs(bits: int, n: int = 60):
    rng = np.random.default_rng(bits)
    x = _values(rng, bits, n)
    y = _values(rng, bits, n)[::-1].copy()
    y[:5] = x[:5]  # equal values
    # every edge against every edge
    e = x[:7]
    return np.concatenate([x, np.repeat(e, 7)]), np.concatenate([y, np.tile(e, 7)])


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _garbled_run(circuit, garbler_bits, evaluator_bits, seed=7):
    """Garble, hand the evaluator her labels as the OT would, evaluate and decode."""
    rng = Rng.seeded(seed)
    delta = new_delta(rng)
    ev0 = random_blocks(rng, circuit.input_count("evaluator"))
    g = garble(circuit, delta, rng, ev0)
    ev_bits = np.asarray(evaluator_bits, dtype=np.uint64).reshape(-1)
    active = ev0 ^ ((np.uint64(0) - ev_bits)[:, None] & delta)
    labels = evaluate(
        circuit, g.tables, constant_labels(g), garbler_input_labels(g, garbler_bits), active
    )
    to_eval = decode_outputs(circuit, labels, g.output_decoding())
    to_garbler = decode_garbler_outputs(g, garbler_output_labels(circuit, labels))
    return {"evaluator": to_eval, "garbler": to_garbler}, g, labels


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("depth", ["ripple", "log"])
def test_every_operation_equals_plaintext_garbled_and_in_the_clear(bits, depth):
    x, y = _pairs(bits)
    n = len(x)
    c = Circuit()
    gx, ey = c.input("garbler", (n, bits)), c.input("evaluator", (n, bits))
    s, d = arith.add(c, gx, ey, depth=depth), arith.sub(c, gx, ey)
    lt = arith.less(c, gx, ey, depth=depth)
    ult = arith.less(c, gx, ey, unsigned=True, depth=depth)
    mx, back = arith.select_max(c, gx, ey)
    for part in (s, d, lt, ult, mx, back):
        c.output(part, "evaluator")
    c.output(lt, "garbler")
    circuit = c.compile()
    inputs = {"garbler": arith.to_bits(x, bits), "evaluator": arith.to_bits(y, bits)}
    plain = evaluate_plain(circuit, inputs)
    garbled, _, _ = _garbled_run(circuit, inputs["garbler"], inputs["evaluator"])
    for out in (plain, garbled):
        o = out["evaluator"]
        k = n * bits
        got_s = arith.from_bits(o[:k].reshape(n, bits))
        got_d = arith.from_bits(o[k : 2 * k].reshape(n, bits))
        got_lt, got_ult = o[2 * k : 2 * k + n], o[2 * k + n : 2 * k + 2 * n]
        got_max = arith.from_bits(o[2 * k + 2 * n : 3 * k + 2 * n].reshape(n, bits))
        got_back = o[3 * k + 2 * n :]
        mask = (1 << bits) - 1
        assert [int(v) for v in got_s] == [_wrap(int(a) + int(b), bits) for a, b in zip(x, y)]
        assert [int(v) for v in got_d] == [_wrap(int(a) - int(b), bits) for a, b in zip(x, y)]
        assert list(got_lt) == [int(a < b) for a, b in zip(x, y)]
        assert list(got_ult) == [int((a & mask) < (b & mask)) for a, b in zip(x, y)]
        assert [int(v) for v in got_max] == [max(a, b) for a, b in zip(x, y)]
        assert list(got_back) == [int(a < b) for a, b in zip(x, y)]  # a tie keeps x
        assert list(out["garbler"]) == [int(a < b) for a, b in zip(x, y)]


@pytest.mark.parametrize(("lx", "ly"), [(2, 1), (8, 5), (21, 13), (16, 1)])
def test_multiply_signed_by_unsigned_equals_plaintext_garbled_and_in_the_clear(lx, ly):
    rng = np.random.default_rng(lx * 100 + ly)
    x = _values(rng, lx, 40)
    y = np.array([0, 1, (1 << ly) - 1] + [int(v) for v in rng.integers(0, 1 << ly, x.size - 3)])
    c = Circuit()
    product = arith.multiply(
        c, c.input("evaluator", (x.size, lx)), c.input("garbler", (x.size, ly))
    )
    c.output(product, "evaluator")
    circuit = c.compile()
    inputs = {"garbler": arith.to_bits(y, ly), "evaluator": arith.to_bits(x, lx)}
    garbled, _, _ = _garbled_run(circuit, inputs["garbler"], inputs["evaluator"])
    for out in (evaluate_plain(circuit, inputs), garbled):
        got = arith.from_bits(out["evaluator"].reshape(x.size, lx + ly))
        assert [int(v) for v in got] == [int(a) * int(b) for a, b in zip(x, y)]


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 10, 17])
def test_argmax_returns_the_max_and_numpys_index_ties_included(k):
    bits, n = 16, 120
    rng = np.random.default_rng(k)
    vals = rng.integers(-3, 3, (n, k))  # many ties
    vals[0] = -(1 << 15)
    vals[1] = (1 << 15) - 1
    c = Circuit()
    v = c.input("evaluator", (n, k, bits))
    best, index = arith.argmax(c, v)
    c.output(best, "evaluator")
    c.output(index, "evaluator")
    circuit = c.compile()
    bits_in = arith.to_bits(vals, bits)
    out, _, _ = _garbled_run(circuit, np.zeros(0), bits_in)
    o = out["evaluator"]
    assert (arith.from_bits(o[: n * bits].reshape(n, bits)) == vals.max(axis=1)).all()
    width = max(1, (k - 1).bit_length())
    got = arith.from_bits(o[n * bits :].reshape(n, width), signed=False)
    assert (got == vals.argmax(axis=1)).all()


def test_mux_selects_and_constants_fold_away():
    c = Circuit()
    x, y = c.input("garbler", (4, 8)), c.input("garbler", (4, 8))
    s = c.input("evaluator", (4,))
    c.output(arith.mux(c, s, x, y), "evaluator")
    circuit = c.compile()
    xs, ys = np.array([1, -2, 127, -128]), np.array([5, 6, -7, 0])
    sel = np.array([1, 0, 1, 0])
    gb = np.concatenate([arith.to_bits(xs, 8).reshape(-1), arith.to_bits(ys, 8).reshape(-1)])
    out, _, _ = _garbled_run(circuit, gb, sel)
    assert list(arith.from_bits(out["evaluator"].reshape(4, 8))) == [1, 6, 127, 0]
    # gates on public constants cost nothing
    c = Circuit()
    w = c.input("garbler", (3,))
    assert (c.and_(w, Circuit.constant([0, 0, 0])) == 0).all()
    assert (c.and_(w, Circuit.constant([1, 1, 1])) == w).all()
    assert (c.xor(w, w) == 0).all() and (c.and_(w, w) == w).all()
    assert (c.not_(c.not_(Circuit.constant([1, 0, 1]))) == [1, 0, 1]).all()
    assert c.and_count == 0
    assert (
        arith.and_gates(
            lambda cc, a, b: arith.add(cc, a, arith.constant(3, 16), depth="ripple"), 16, (5,), ()
        )
        < 5 * 15
    )


@pytest.mark.parametrize("bits", [16, 50, 64])
def test_and_gate_counts_are_the_documented_ones(bits):
    def ripple(f):
        return lambda c, x, y: f(c, x, y, depth="ripple")

    def log(f):
        return lambda c, x, y: f(c, x, y, depth="log")

    assert arith.and_gates(ripple(arith.add), bits, (1,), (1,)) == bits - 1
    assert arith.and_gates(arith.sub, bits, (1,), (1,)) == bits - 1
    assert arith.and_gates(ripple(arith.less), bits, (1,), (1,)) == bits
    assert arith.and_gates(log(arith.less), bits, (1,), (1,)) <= 3 * bits - 2
    assert arith.and_gates(log(arith.add), bits, (1,), (1,)) <= 2 * bits * (bits - 1).bit_length()
    # "auto": the log-depth circuits for small operands, the ripple ones for large batches
    assert arith.and_gates(arith.less, bits, (1,), (1,)) == arith.and_gates(
        log(arith.less), bits, (1,), (1,)
    )
    big = (arith.LOG_DEPTH_MAX_BITS,)
    assert arith.and_gates(arith.less, bits, big, big) == big[0] * bits
    assert arith.and_gates(arith.add, bits, big, big) == big[0] * (bits - 1)
    small_max = arith.and_gates(arith.maximum, bits, (1,), (1,))
    assert small_max == arith.and_gates(log(arith.less), bits, (1,), (1,)) + bits
    assert (
        arith.and_gates(lambda c, s, x, y: arith.mux(c, s[..., 0], x, y), bits, (1,), (1,), (1,))
        == bits
    )
    # an argmax over 10: 9 compare-and-selects, and the index bits' muxes
    select = arith.and_gates(arith.maximum, bits, (5,), (5,)) / 5
    assert 9 * select <= arith.and_gates(arith.argmax, bits, (10,)) <= 9 * select + 9 * 4
    # a batch costs the sum of its elements
    assert arith.and_gates(ripple(arith.less), bits, (100,), (100,)) == 100 * bits


def test_the_gate_sequence_and_tables_size_do_not_depend_on_the_inputs():
    """The circuit is built from public sizes only; garbling any inputs gives tables of
    one size, and the evaluator's labels are uniform-looking whatever the bits."""

    def build():
        c = Circuit()
        x, y = c.input("garbler", (20, 32)), c.input("evaluator", (20, 32))
        c.output(arith.argmax(c, arith.add(c, x, y)[None])[1], "evaluator")
        return c.compile()

    a, b = build(), build()
    assert a.and_gates == b.and_gates and len(a.layers) == len(b.layers)
    for la, lb in zip(a.layers, b.layers):
        for fa, fb in zip(
            (la.xor, la.not_, la.and_, la.and_index), (lb.xor, lb.not_, lb.and_, lb.and_index)
        ):
            assert np.array_equal(fa, fb)
    sizes = set()
    for seed in range(3):
        rng = np.random.default_rng(seed)
        gx = arith.to_bits(rng.integers(-(1 << 20), 1 << 20, 20), 32)
        ey = arith.to_bits(rng.integers(-(1 << 20), 1 << 20, 20), 32)
        out, g, labels = _garbled_run(a, gx, ey, seed=seed)
        sizes.add(g.tables.nbytes)
        # no two AND outputs share a label (a NOT gate's output is its input's label)
        outs = np.concatenate([layer.and_[2] for layer in a.layers])
        assert len(np.unique(labels[outs], axis=0)) == len(outs)
    assert len(sizes) == 1


def test_a_wrong_label_fails_closed():
    c = Circuit()
    x, y = c.input("garbler", (4, 16)), c.input("evaluator", (4, 16))
    c.output(arith.less(c, x, y), "evaluator")
    c.output(arith.less(c, y, x), "garbler")
    circuit = c.compile()
    rng = Rng.seeded(3)
    delta = new_delta(rng)
    ev0 = random_blocks(rng, circuit.input_count("evaluator"))
    g = garble(circuit, delta, rng, ev0)
    gl = garbler_input_labels(g, np.zeros(64))
    wrong = ev0.copy()
    wrong[5, 1] ^= np.uint64(1 << 40)  # a label that is neither of its wire's two
    labels = evaluate(circuit, g.tables, constant_labels(g), gl, wrong)
    with pytest.raises(GarbledCircuitError):
        decode_outputs(circuit, labels, g.output_decoding())
    with pytest.raises(GarbledCircuitError):
        decode_garbler_outputs(g, garbler_output_labels(circuit, labels))
    # a returned label forged from a valid one
    good = evaluate(circuit, g.tables, constant_labels(g), gl, ev0)
    forged = garbler_output_labels(circuit, good).copy()
    forged[0, 0] ^= np.uint64(2)
    with pytest.raises(GarbledCircuitError):
        decode_garbler_outputs(g, forged)
    # tables and labels of the wrong size
    for tables, consts, glab in (
        (g.tables[:-1], constant_labels(g), gl),
        (g.tables, constant_labels(g)[:1], gl),
        (g.tables, constant_labels(g), gl[:-1]),
    ):
        with pytest.raises(GarbledCircuitError):
            evaluate(circuit, tables, consts, glab, ev0)
    with pytest.raises(GarbledCircuitError):
        decode_outputs(circuit, good, g.output_decoding()[:-1])


def test_bad_arguments_are_typed_errors():
    c = Circuit()
    with pytest.raises(InvalidInputError):
        c.input("trent", (2,))
    with pytest.raises(InvalidInputError):
        c.output([2], "trent")
    x = c.input("garbler", (1, 8))
    c.output(x, "evaluator")
    circuit = c.compile()
    with pytest.raises(InvalidInputError):
        evaluate_plain(circuit, {"garbler": np.zeros(7)})
    with pytest.raises(InvalidInputError):
        arith.to_bits([1], 1025)
    with pytest.raises(InvalidInputError):
        arith.argmax(c, np.zeros((0, 8), dtype=np.int64))
    rng = Rng.seeded(1)
    even = new_delta(rng)
    even[0] &= ~np.uint64(1)
    with pytest.raises(InvalidInputError):
        garble(circuit, even, rng, np.zeros((0, 2), np.uint64))
    g = garble(circuit, new_delta(rng), rng, np.zeros((0, 2), np.uint64))
    with pytest.raises(InvalidInputError):
        garbler_input_labels(g, np.zeros(9))


@pytest.mark.parametrize("width", [8, 62, 63, 64, 70])
def test_from_bits_reads_every_width_signed_and_unsigned(width):
    """63 bits used to overflow (the two's-complement correction 2^63 is no int64): secure
    Viterbi decoding of a categorical model reached it (smc_hmm.api)."""
    values = [0, 1, -1, (1 << (width - 1)) - 1, -(1 << (width - 1))]
    bits = np.array([[(v >> i) & 1 for i in range(width)] for v in values], dtype=np.uint8)
    assert [int(v) for v in arith.from_bits(bits)] == values
    unsigned = [v % (1 << width) for v in values]
    assert [int(v) for v in arith.from_bits(bits, signed=False)] == unsigned
