"""Measured primitive rates: time the crypto operations the cost model prices.

One responsibility: *measure* single-thread operations per second of the real
crypto paths at one key size, as :class:`~smc_hmm.cost.model.PrimitiveRates`
for :class:`~smc_hmm.cost.model.CostModel`.  See ``docs/architecture.md``
("The cost ledger").  ``smc-hmm bench primitives`` prints these rates;
``smc_hmm.cost.measure_rates`` re-exports :func:`measure_rates` lazily.
"""

from __future__ import annotations

import math
import time

import numpy as np

from smc_hmm.cost.model import PrimitiveRates
from smc_hmm.errors import InvalidInputError


def _rate(fn, batch: int, min_seconds: float) -> float:
    """Operations per second of ``fn()`` (which performs ``batch`` ops), best of >= 3 runs."""
    fn()  # warm up (tables, caches)
    best = math.inf
    runs = 0
    start = time.perf_counter()
    while runs < 3 or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return batch / max(best, 1e-9)


def measure_rates(
    public_key, private_key, *, scalar_bits: int = 64, batch: int = 8, min_seconds: float = 0.05
) -> PrimitiveRates:
    """Measure single-thread rates of the primitive operations for this key pair.

    Uses the real crypto paths: encryption and re-randomisation as a party
    holding only the public key does them (the default randomizer, after its
    tables are built: building them is a one-off cost per party and key that
    the model leaves out), CRT decryption in batches below the threading
    threshold, ``scalar_bits``-bit scalars and multi-exponentiation weights.
    Takes about ``6 * min_seconds`` plus one warm-up of each operation.
    """
    import gmpy2
    from gmpy2 import mpz

    from smc_hmm.crypto import native
    from smc_hmm.crypto.cipherarray import CipherArray
    from smc_hmm.crypto.keys import PublicKey

    sk = private_key
    if sk.public_key.n != public_key.n:
        raise InvalidInputError("the private key does not belong to the public key")
    pk = PublicKey(public_key.n, rng=public_key.rng)  # public-key-only encryptor, unmetered
    rng = pk.rng
    n2 = pk.nsquare_mpz
    values = [rng.randbits(32) for _ in range(batch)]
    cts = pk.encrypt_ints(values)
    scalars = [rng.randbits(scalar_bits) | 1 for _ in range(batch)]
    terms = 64
    bases = CipherArray.encrypt(pk, [v & 0xFF for v in (values * terms)[:terms]])
    weights = [rng.randbits(scalar_bits) for _ in range(terms)]
    old_threads = getattr(sk, "decrypt_threads", 1)
    rates = {}
    rates["encrypt"] = _rate(lambda: pk.encrypt_ints(values), batch, min_seconds)
    try:
        sk.decrypt_threads = 1
        rates["decrypt"] = _rate(lambda: sk.decrypt_ints(cts), batch, min_seconds)
    finally:
        sk.decrypt_threads = old_threads
    rates["add"] = _rate(lambda: [a * b % n2 for a in cts for b in cts], batch * batch, min_seconds)
    rates["scalar_mul"] = _rate(
        lambda: [gmpy2.powmod(c, mpz(k), n2) for c, k in zip(cts, scalars)], batch, min_seconds
    )
    rates["multiexp_terms"] = _rate(lambda: bases.lincomb(weights), terms, min_seconds)
    rates["rerandomize"] = _rate(lambda: pk.rerandomize(cts), batch, min_seconds)
    rates["invert"] = _rate(lambda: [gmpy2.invert(c, n2) for c in cts], batch, min_seconds)
    kernel = native.kernel()
    if kernel is not None and kernel.fits(n2):  # its multiplications, one after another
        chain = 256
        rates["native_mul"] = _rate(
            lambda: kernel.montgomery_product(cts[0], cts[1], n2, chain), chain, min_seconds
        )
    rates.update(garbling_rates(min_seconds))
    return PrimitiveRates(pk.bits, rates, scalar_bits)


def garbling_rates(min_seconds: float = 0.05) -> dict[str, float]:
    """The garbled stage's rates (:mod:`smc_hmm.gc`), both parties' work together (the
    ledger counts it at the garbler): ``and_gates`` per AND gate garbled and evaluated,
    ``gc_layers`` per layer (the numpy calls every layer costs, whatever its width), and
    ``cot`` per random correlated OT of one extension.  Independent of the Paillier key.
    Gates and layers from :func:`_gate_and_layer_seconds` on 256 pairs."""
    from smc_hmm.crypto.rng import Rng
    from smc_hmm.gc.garble import new_delta
    from smc_hmm.gc.ot import OtExtReceiver, OtExtSender

    rng = Rng.system()

    def both(circuit) -> float:
        garble, evaluate = _garble_and_evaluate(circuit, rng)
        return 1.0 / _rate(lambda: evaluate(garble())(), 1, min_seconds)

    per_and, per_layer = _gate_and_layer_seconds(256, {"both": both})["both"]
    count = 1 << 14
    sender, receiver = OtExtSender(new_delta(rng), rng), OtExtReceiver(rng)
    receiver.base_finish(sender.base_choose(receiver.base_start()))
    choices = np.zeros(count, np.uint8)

    def extension():
        challenge = sender.extend_receive(count, receiver.extend(choices))
        sender.extend_check(receiver.extend_prove(challenge))

    return {
        "and_gates": 1.0 / max(per_and, 1e-12),
        "gc_layers": 1.0 / max(per_layer, 1e-12),
        "cot": _rate(extension, count, min_seconds),
        "garbled_bytes": _table_transfer_rate(min_seconds),
    }


def _gate_and_layer_seconds(pairs: int, timers: dict) -> dict[str, tuple[float, float]]:
    """Per timer (a circuit -> its seconds), (seconds per AND gate, per layer): a wide
    circuit (carry-save comparisons of ``pairs`` pairs of 64-bit values) and a deep one (a
    ripple-carry comparison of one pair of 256-bit values: one AND a layer) give the two
    terms of t(circuit) = ANDs * t_and + layers * t_layer."""
    from smc_hmm.gc import arith
    from smc_hmm.gc.circuit import Circuit

    def comparison(shape, depth=None):
        c = Circuit()
        x, y = c.input("garbler", shape), c.input("evaluator", shape)
        arith.less(c, x, y, depth=depth) if depth else arith.cs_less(c, x, y)
        return c.compile()

    wide, deep = comparison((pairs, 2, 64)), comparison((1, 256), "ripple")
    out = {}
    for name, seconds in timers.items():
        tw, td = seconds(wide), seconds(deep)
        per_layer = max((td - deep.and_gates * tw / wide.and_gates) / deep.depth, 0.0)
        out[name] = (max((tw - wide.depth * per_layer) / wide.and_gates, 0.0), per_layer)
    return out


def _garble_and_evaluate(circuit, rng):
    """(garble ``circuit`` on fixed inputs; a garbling -> its evaluation, ready to run)."""
    from smc_hmm.gc.garble import evaluate, garble, garbler_input_labels, new_delta
    from smc_hmm.gc.hashing import random_blocks

    delta = new_delta(rng)
    inputs = random_blocks(rng, circuit.input_count("evaluator"))
    ones = np.ones(circuit.input_count("garbler"), np.uint8)

    def garbling():
        return garble(circuit, delta, rng, inputs)

    def evaluation(g):
        constants = np.stack([g.zero_labels[0], g.zero_labels[1] ^ delta])
        labels = garbler_input_labels(g, ones)
        return lambda: evaluate(circuit, g.tables, constants, labels, inputs)

    return garbling, evaluation


def _table_transfer_rate(min_seconds: float, size: int = 32 << 20) -> float:
    """Bytes a second of garbled tables on their way from the garbler's array to the
    evaluator's: to bytes, through the wire codec both ways, back to an array (a frame of
    several MB: the protocols' per-frame tables are 3-30 MB, beyond the caches)."""
    from smc_hmm.wire import WireCodec

    codec = WireCodec()
    tables = np.frombuffer(np.random.default_rng(1).bytes(size), np.uint64).reshape(-1, 2)

    def trip():
        frame = codec.encode({"t": "gc.tables", "d": 1, "b": tables.tobytes()})
        np.frombuffer(codec.decode(frame)["b"], np.uint64).reshape(-1, 2).copy()

    return _rate(trip, size, min_seconds)


def garbling_sides(min_seconds: float = 0.2) -> dict[str, dict[str, float]]:
    """Seconds per AND gate (``and_gates``) and per layer (``gc_layers``) of each party's
    own share of the garbled stage, for a model in which the two run side by side (the
    garbler garbles step t + 1 while the evaluator evaluates step t): ``garbler``
    garbles, ``evaluator`` evaluates.

    Measured on circuits the size of a step of the protocols' recursion
    (:func:`_gate_and_layer_seconds` on 4096 pairs: 1.3 million AND gates, 40 MB of
    tables, beyond the caches): on a circuit of 80,000 gates, whose tables stay in cache,
    an AND gate costs about half as much, and its rate moves by half between two circuits
    of one process.  The tables' trip through the wire is not measured here (why:
    :func:`smc_hmm.bench.spot._byte_prices`)."""
    from smc_hmm.crypto.rng import Rng

    rng = Rng.system()

    def garbler(circuit) -> float:
        garble, _ = _garble_and_evaluate(circuit, rng)
        return 1.0 / _rate(garble, 1, min_seconds)

    def evaluator(circuit) -> float:
        garble, evaluate = _garble_and_evaluate(circuit, rng)
        return 1.0 / _rate(evaluate(garble()), 1, min_seconds)

    sides = _gate_and_layer_seconds(4096, {"garbler": garbler, "evaluator": evaluator})
    return {k: {"and_gates": a, "gc_layers": layer} for k, (a, layer) in sides.items()}
