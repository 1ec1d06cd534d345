"""Boolean circuits built a bundle at a time, and compiled into layers of gates.

A :class:`Circuit` hands out *wires* as numpy integer arrays of wire ids, so that one
call of :meth:`Circuit.xor`, :meth:`Circuit.and_` or :meth:`Circuit.not_` adds a gate
for every element of its (broadcast) operands: building ten thousand comparisons costs
as many Python calls as building one.  Wires 0 and 1 are the constants 0 and 1, and
gates on constants fold away (``x & 0 = 0``, ``x ^ 1 = ~x``, ``x ^ x = 0``, ...), so
public values (an argmax's indices, a carry-in) cost no AND gate.

:meth:`Circuit.compile` sorts the gates by depth into :class:`Layer` s: every gate of a
layer depends only on earlier layers, so the garbler and the evaluator
(:mod:`smc_hmm.gc.garble`) process one layer of each gate kind as one array operation.
:func:`evaluate_plain` runs a compiled circuit on plaintext bits (the tests' reference).

Values on top of wires (l-bit two's complement, least significant bit first) are in
:mod:`smc_hmm.gc.arith`.  See ``docs/garbled.md``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property, lru_cache, wraps

import numpy as np

from smc_hmm.errors import InvalidInputError

__all__ = [
    "CARRY",
    "PARTIES",
    "Circuit",
    "CompiledCircuit",
    "Layer",
    "built_once",
    "evaluate_plain",
]

ZERO, ONE = 0, 1
PARTIES = ("garbler", "evaluator")
#: Wires whose labels pass from one circuit to a later one garbled under the same Delta
#: (the garbler keeps their 0-labels, the evaluator her active labels; nothing is sent):
#: a long computation runs as a chain of small circuits (``docs/garbled.md``).
CARRY = "carry"
KINDS = (*PARTIES, CARRY)
_XOR, _NOT, _AND = 0, 1, 2


def built_once(builder):
    """``builder`` (a circuit per public shape) cached like ``lru_cache(32)``, and built
    once when several threads ask for a shape together: parties run in one process share
    the cache, and each would otherwise build and compile the same circuit."""
    cached = lru_cache(maxsize=32)(builder)
    lock = threading.RLock()  # a builder may build a smaller shape of its own first

    @wraps(builder)
    def build(*args):
        with lock:
            return cached(*args)

    build.cache_clear = cached.cache_clear
    build.cache_info = cached.cache_info
    return build


def _ids(wires) -> np.ndarray:
    return np.asarray(wires, dtype=np.int64)


@dataclass(frozen=True)
class Layer:
    """The gates of one depth, by kind: ``xor`` and ``and_`` are (3, k) arrays of
    (input a, input b, output) wire ids, ``not_`` a (2, k) array of (input, output);
    ``and_index`` numbers each AND gate in the circuit's table order."""

    xor: np.ndarray
    not_: np.ndarray
    and_: np.ndarray
    and_index: np.ndarray


@dataclass(frozen=True)
class CompiledCircuit:
    """A circuit ready to garble: every gate sorted by depth (``program``: flat arrays
    of kind, input a, input b, output and AND index or -1, the order the garbling kernel
    runs, :mod:`smc_hmm.gc.native`; ``bounds``: where each depth's gates start), its
    input wires per party (flat, in the order they were declared) and its output wires
    per receiving party.  :attr:`layers` views the same gates a depth at a time (the
    numpy path's unit of work)."""

    n_wires: int
    program: tuple[np.ndarray, ...]
    bounds: np.ndarray
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    and_gates: int

    @cached_property
    def layers(self) -> tuple[Layer, ...]:
        kind, a, b, out, index = self.program
        layers = []
        for sl in np.split(np.arange(kind.size), self.bounds):
            if not sl.size:
                continue
            k = kind[sl]
            xs, ns, ands = sl[k == _XOR], sl[k == _NOT], sl[k == _AND]
            layers.append(
                Layer(
                    np.stack([a[xs], b[xs], out[xs]]),
                    np.stack([a[ns], out[ns]]),
                    np.stack([a[ands], b[ands], out[ands]]),
                    index[ands],
                )
            )
        return tuple(layers)

    @property
    def depth(self) -> int:
        """The number of layers (depths with a gate)."""
        return int(self.bounds.size + (1 if self.program[0].size else 0))

    def input_count(self, party: str) -> int:
        return int(self.inputs[party].size)

    def output_count(self, party: str) -> int:
        return int(self.outputs[party].size)


class Circuit:
    """A boolean circuit under construction (module docstring)."""

    def __init__(self):
        self.n_wires = 2
        self._gates: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self._inputs: dict[str, list[np.ndarray]] = {p: [] for p in KINDS}
        self._outputs: dict[str, list[np.ndarray]] = {p: [] for p in KINDS}
        self.and_count = 0

    # -- wires --------------------------------------------------------------------------

    def _new(self, count: int) -> np.ndarray:
        ids = np.arange(self.n_wires, self.n_wires + count, dtype=np.int64)
        self.n_wires += count
        return ids

    def input(self, party: str, shape) -> np.ndarray:
        """Fresh input wires of ``party`` (``garbler``, ``evaluator`` or :data:`CARRY`: the
        labels of an earlier circuit's carried outputs) of ``shape``."""
        if party not in KINDS:
            raise InvalidInputError(f"an input belongs to one of {KINDS}, not {party!r}")
        shape = tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
        wires = self._new(int(np.prod(shape, dtype=np.int64))).reshape(shape)
        self._inputs[party].append(wires.reshape(-1))
        return wires

    def output(self, wires, to: str) -> None:
        """Reveal ``wires`` to ``to`` (``garbler`` or ``evaluator``), or keep their labels for
        a later circuit (:data:`CARRY`: revealed to nobody), in declaration order."""
        if to not in KINDS:
            raise InvalidInputError(f"an output goes to one of {KINDS}, not {to!r}")
        self._outputs[to].append(_ids(wires).reshape(-1))

    @staticmethod
    def constant(bits) -> np.ndarray:
        """Public bits as the constant wires."""
        return np.where(np.asarray(bits, dtype=bool), ONE, ZERO).astype(np.int64)

    # -- gates (folding constants, element by element) -------------------------------

    def _gate(self, kind: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = self._new(a.size)
        self._gates.append((kind, np.array(a, np.int64), np.array(b, np.int64), out))
        if kind == _AND:
            self.and_count += a.size
        return out

    def not_(self, a) -> np.ndarray:
        a = _ids(a)
        out = a.copy()
        const = a < 2
        out[const] = 1 - a[const]
        live = ~const
        if live.any():
            out[live] = self._gate(_NOT, a[live], a[live])
        return out

    def _binary(self, kind: int, a, b, fold, repeat) -> np.ndarray:
        """Gate ``kind`` on the broadcast operands: one gate per element in the common
        case (no constant, no repeat); else ``fold(out, a, b, ca, cb)`` fills the elements
        with a constant operand (``ca``, ``cb``: which are), ``repeat(a)`` those of two
        equal live wires, and a gate each of the rest."""
        a, b = np.broadcast_arrays(_ids(a), _ids(b))
        if a.size > 0 and a.min() >= 2 and b.min() >= 2 and not (a == b).any():
            return self._gate(kind, a.reshape(-1), b.reshape(-1)).reshape(a.shape)
        out = np.empty(a.shape, dtype=np.int64)
        ca, cb = a < 2, b < 2
        fold(out, a, b, ca, cb)
        live = ~ca & ~cb
        same = live & (a == b)
        out[same] = repeat(a[same])
        live &= ~same
        if live.any():
            out[live] = self._gate(kind, a[live], b[live])
        return out

    def xor(self, a, b) -> np.ndarray:  # a ^ a = 0
        return self._binary(_XOR, a, b, self._xor_constants, lambda _: ZERO)

    def _xor_constants(self, out, a, b, ca, cb) -> None:
        """XOR with a constant operand: the other operand (0) or its NOT (1)."""
        both = ca & cb
        out[both] = a[both] ^ b[both]
        for const, value, other in ((ca & ~cb, a, b), (cb & ~ca, b, a)):
            zero, one = const & (value == ZERO), const & (value == ONE)
            out[zero] = other[zero]
            if one.any():
                out[one] = self.not_(other[one])

    def and_(self, a, b) -> np.ndarray:  # a & a = a
        return self._binary(_AND, a, b, self._and_constants, lambda wires: wires)

    @staticmethod
    def _and_constants(out, a, b, ca, cb) -> None:
        """AND with a constant operand: 0 if either is 0, else the other operand."""
        zero = (ca & (a == ZERO)) | (cb & (b == ZERO))
        out[zero] = ZERO
        a_one, b_one = ca & (a == ONE) & ~zero, cb & (b == ONE) & ~zero
        out[a_one] = b[a_one]
        out[b_one & ~a_one] = a[b_one & ~a_one]

    def or_(self, a, b) -> np.ndarray:
        return self.xor(self.xor(a, b), self.and_(a, b))

    # -- compile ----------------------------------------------------------------------

    def compile(self) -> CompiledCircuit:
        """The gates sorted into layers by depth (module docstring)."""
        if self._gates:
            sizes = [g[1].size for g in self._gates]
            kind = np.repeat(np.array([g[0] for g in self._gates], np.int8), sizes)
            a = np.concatenate([g[1] for g in self._gates])
            b = np.concatenate([g[2] for g in self._gates])
            out = np.concatenate([g[3] for g in self._gates])
        else:
            kind = np.zeros(0, np.int8)
            a = b = out = np.zeros(0, np.int64)
        depth = np.zeros(self.n_wires, dtype=np.int64)
        gate_depth = np.empty(kind.size, dtype=np.int64)
        start = 0
        for _, ga, gb, _ in self._gates:  # gates were added in topological order
            stop = start + ga.size
            d = np.maximum(depth[ga], depth[gb]) + 1
            depth[out[start:stop]] = d
            gate_depth[start:stop] = d
            start = stop
        order = _layer_order(gate_depth, kind)
        kind, a, b, out = (x[order] for x in (kind, a, b, out))
        is_and = kind == _AND
        and_index = np.cumsum(is_and) - 1
        program = (
            np.ascontiguousarray(kind, np.int8),
            *(np.ascontiguousarray(v, np.int64) for v in (a, b, out)),
            np.ascontiguousarray(np.where(is_and, and_index, -1), np.int64),
        )
        counts = np.bincount(gate_depth) if gate_depth.size else np.zeros(0, np.int64)
        bounds = np.cumsum(counts[counts > 0])[:-1]  # where the sorted depth changes

        def flat(parts):
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        return CompiledCircuit(
            self.n_wires,
            program,
            bounds,
            {p: flat(self._inputs[p]) for p in KINDS},
            {p: flat(self._outputs[p]) for p in KINDS},
            int(is_and.sum()),
        )


def _layer_order(gate_depth: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """The gates by depth, then kind (XOR, NOT, AND), stably: one radix sort of a 16-bit
    key where depths allow it (most circuits), else a lexicographic sort."""
    if gate_depth.size and int(gate_depth.max()) * 3 + 2 < 1 << 16:
        key = (gate_depth * 3 + kind).astype(np.uint16)
        return np.argsort(key, kind="stable")
    return np.lexsort((kind, gate_depth))


def evaluate_plain(circuit: CompiledCircuit, inputs: dict[str, np.ndarray]) -> dict:
    """Run ``circuit`` on plaintext bits (``inputs[party]``: flat 0/1 arrays in the
    declared order, :data:`CARRY` included); returns each kind's output bits (the
    reference of the tests)."""
    values = np.zeros(circuit.n_wires, dtype=np.uint8)
    values[ONE] = 1
    for party in KINDS:
        bits = np.asarray(inputs.get(party, ()), dtype=np.uint8).reshape(-1)
        if bits.size != circuit.input_count(party):
            raise InvalidInputError(
                f"{bits.size} input bits for the {party}, the circuit takes "
                f"{circuit.input_count(party)}"
            )
        values[circuit.inputs[party]] = bits & 1
    for layer in circuit.layers:
        xa, xb, xo = layer.xor
        values[xo] = values[xa] ^ values[xb]
        na, no = layer.not_
        values[no] = values[na] ^ 1
        aa, ab, ao = layer.and_
        values[ao] = values[aa] & values[ab]
    return {p: values[circuit.outputs[p]].copy() for p in KINDS}
