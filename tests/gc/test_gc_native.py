"""The optional garbling kernel (smc_hmm.gc.native) against the numpy path, and its switch.

The kernel is built at install where a compiler is present and runs where the CPU has
AES-NI and PCLMULQDQ; the tests that need it skip elsewhere, and the numpy path's tests
(tests/gc/test_circuits.py, with SMC_HMM_NATIVE=off in CI) run everywhere."""

import numpy as np
import pytest

from smc_hmm.crypto.rng import Rng
from smc_hmm.gc import arith, garble, hashing, native, ot
from smc_hmm.gc.circuit import Circuit, evaluate_plain

KERNEL = native.gc_kernel()
needs_kernel = pytest.mark.skipif(
    KERNEL is None, reason="the garbling kernel is not built here or this CPU lacks AES-NI"
)


class _Seeded:
    """A deterministic source of labels, so that two paths garble with the same ones."""

    def __init__(self, seed):
        self.r = np.random.default_rng(seed)

    def randbits(self, n):
        return int.from_bytes(self.r.bytes((n + 7) // 8), "little") & ((1 << n) - 1)


def _circuit():
    c = Circuit()
    x, y = c.input("garbler", (60, 24)), c.input("evaluator", (60, 24))
    total = arith.add(c, x, y, depth="ripple")
    c.output(arith.less(c, total, y), "evaluator")
    c.output(arith.square(c, x[:5]), "garbler")
    c.output(c.not_(total[:, 0]), "evaluator")
    return c.compile()


@needs_kernel
def test_the_kernel_hashes_as_openssl_does():
    rng = np.random.default_rng(1)
    blocks = rng.integers(0, 2**63, size=(1001, 2), dtype=np.uint64)
    tweaks = rng.integers(0, 2**63, size=1001, dtype=np.uint64)
    assert (KERNEL.hash(blocks, tweaks) == hashing.tccr_hash_numpy(blocks, tweaks)).all()


@needs_kernel
@pytest.mark.parametrize("seed", [1, 2])
def test_garbling_and_evaluation_equal_the_numpy_path(monkeypatch, seed):
    """The same labels in, the same tables, the same wire labels and the same outputs out
    (and those equal the plaintext circuit)."""
    cc = _circuit()
    delta = garble.new_delta(Rng())
    zero = hashing.random_blocks(Rng(), cc.input_count("evaluator"))
    rng = np.random.default_rng(seed)
    bits_e = rng.integers(0, 2, cc.input_count("evaluator"))
    bits_g = rng.integers(0, 2, cc.input_count("garbler"))
    held = zero ^ ((np.uint64(0) - bits_e.astype(np.uint64))[:, None] & delta)
    plain = evaluate_plain(cc, {"garbler": bits_g, "evaluator": bits_e})
    results = {}
    for switch in ("off", "on"):
        monkeypatch.setenv("SMC_HMM_NATIVE", switch)
        g = garble.garble(cc, delta, _Seeded(seed), zero, 9)
        labels = garble.garbler_input_labels(g, bits_g)
        w = garble.evaluate(cc, g.tables, garble.constant_labels(g), labels, held, 9)
        out = garble.decode_outputs(cc, w, g.output_decoding(), 9)
        assert (out == plain["evaluator"]).all()
        returned = garble.garbler_output_labels(cc, w)
        assert (garble.decode_garbler_outputs(g, returned) == plain["garbler"]).all()
        results[switch] = (g.tables, g.zero_labels, w)
    for a, b in zip(results["off"], results["on"]):
        assert (a == b).all()


@needs_kernel
def test_the_transposition_and_the_kos_sum_equal_the_numpy_path(monkeypatch):
    rng = np.random.default_rng(3)
    cols = rng.integers(0, 256, size=(128, 777), dtype=np.uint8)
    assert (KERNEL.transpose(cols) == ot._transpose_numpy(cols)).all()
    chi = rng.integers(0, 2**63, size=(3000, 2), dtype=np.uint64)
    rows = rng.integers(0, 2**63, size=(3000, 2), dtype=np.uint64)
    monkeypatch.setenv("SMC_HMM_NATIVE", "off")
    reference = ot.gf128_inner(chi, rows)
    assert KERNEL.gf128_inner(chi, rows) == reference


def test_the_switch_turns_the_kernel_off_and_noifma_keeps_it(monkeypatch):
    """Read on every call, whatever the switch was when the module loaded (CI's second
    pass runs this with SMC_HMM_NATIVE=off)."""
    monkeypatch.setenv("SMC_HMM_NATIVE", "on")
    built = native.gc_kernel()
    if built is None:
        pytest.skip("the garbling kernel is not built here or this CPU lacks AES-NI")
    monkeypatch.setenv("SMC_HMM_NATIVE", "off")
    assert native.gc_kernel() is None
    monkeypatch.setenv("SMC_HMM_NATIVE", "noifma")
    from smc_hmm.crypto import native as ifma

    assert ifma.kernel() is None
    assert native.gc_kernel() is built
