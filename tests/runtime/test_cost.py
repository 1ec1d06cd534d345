"""The cost ledger, merged reports and the cost model."""

import io
import json
import math
import subprocess
import sys
import threading
import time

import pytest
from rich.console import Console

from smc_hmm.bench.rates import measure_rates
from smc_hmm.cost import (
    OPS,
    ROOT_PHASE,
    SCALING_EXPONENTS,
    CostLedger,
    CostModel,
    CostReport,
    PrimitiveRates,
)
from smc_hmm.crypto import CipherArray, PublicKey, native
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.transport import Channel, LocalNetwork
from smc_hmm.wire import WireCodec


def test_ledger_counts_crypto_ops_through_a_metered_key_view(keypair_512):
    pk, sk = keypair_512
    ledger = CostLedger("alice")
    view = pk.with_meter(ledger)
    x = CipherArray.encrypt(view, [1, 2, 3])
    y = (x + x).mul(5).rerandomize()
    y.lincomb([1, 2, 3])
    assert ledger.ops["encrypt"] == 3
    assert ledger.ops["add"] == 3
    assert ledger.ops["scalar_mul"] == 3
    assert ledger.ops["rerandomize"] == 3
    assert ledger.ops["multiexp_terms"] == 3
    assert ledger.ops["decrypt"] == 0
    # the original key and other views are not affected
    other = CostLedger("bob")
    CipherArray.encrypt(pk.with_meter(other), [4])
    assert other.ops["encrypt"] == 1 and ledger.ops["encrypt"] == 3


def test_ops_attributed_to_phases_and_time_is_exclusive():
    ledger = CostLedger("p")
    with ledger.running():
        ledger.count("ot", 2)
        with ledger.phase("outer"):
            ledger.count("compare")
            time.sleep(0.02)
            with ledger.phase("inner"):
                ledger.count("encrypt", 5)
                time.sleep(0.03)
            time.sleep(0.01)
    snap = ledger.snapshot()
    phases = snap["phases"]
    assert phases[ROOT_PHASE]["ops"]["ot"] == 2
    assert phases["outer"]["ops"]["compare"] == 1 and phases["outer"]["ops"]["encrypt"] == 0
    assert phases["inner"]["ops"]["encrypt"] == 5
    assert 0.025 <= phases["inner"]["wall"] < 0.2
    assert 0.025 <= phases["outer"]["wall"] < 0.2  # 0.02 + 0.01, inner excluded
    total = sum(p["wall"] for p in phases.values())
    assert snap["time"]["wall"] == pytest.approx(total)
    assert snap["ops"] == {**{op: 0 for op in OPS}, "ot": 2, "compare": 1, "encrypt": 5}
    # sleeping is neither CPU time nor waiting on a peer: it is compute wall time here
    assert phases["inner"]["cpu"] < 0.02
    assert phases["inner"]["compute"] == pytest.approx(phases["inner"]["wall"])


def test_bad_counts_and_phase_names_are_typed_errors():
    ledger = CostLedger("p")
    with pytest.raises(InvalidInputError):
        ledger.count("encrypt", -1)
    with pytest.raises(InvalidInputError):
        ledger.count("", 1)
    with pytest.raises(InvalidInputError), ledger.phase(""):
        pass
    with pytest.raises(InvalidInputError):
        CostLedger("")


def test_channel_observer_counts_bytes_messages_depth_and_waiting():
    net = LocalNetwork(["a", "b"])
    la, lb = CostLedger("a"), CostLedger("b")
    ca = Channel(net.transport("a"), WireCodec(), observer=la)
    cb = Channel(net.transport("b"), WireCodec(), observer=lb)
    payloads = [{"x": list(range(10))}, "hello", b"\x00" * 1000]
    sizes = [WireCodec().encode({"t": "m", "d": 1, "b": p}) for p in payloads]

    def late_send():
        time.sleep(0.1)
        ca.send("b", "late", 1)

    with lb.running():
        for p in payloads:
            ca.send("b", "m", p)  # parallel sends: all at depth 1
        for p in payloads:
            assert cb.recv("a", "m") == p
        cb.send("a", "reply", 0)  # depth 2
        t = threading.Thread(target=late_send)
        t.start()
        with lb.phase("waiting"):
            cb.recv("a", "late")
        t.join()
    assert ca.recv("b", "reply") == 0
    assert la.traffic("b", "sent") == (
        4,
        sum(map(len, sizes)) + len(WireCodec().encode({"t": "late", "d": 1, "b": 1})),
    )
    assert lb.traffic("a", "recv") == la.traffic("b", "sent")
    assert (
        lb.traffic("a", "sent")
        == la.traffic("b", "recv")
        == (1, len(WireCodec().encode({"t": "reply", "d": 2, "b": 0})))
    )
    assert la.rounds == 2 and lb.rounds == 2
    waiting = lb.snapshot()["phases"]["waiting"]
    assert waiting["wait"] >= 0.05
    assert waiting["compute"] == pytest.approx(waiting["wall"] - waiting["wait"])
    net.close()


def _two_party_report():
    a, b = CostLedger("alice", key_bits=1024), CostLedger("bob", key_bits=1024)
    a.count("encrypt", 10)
    a.count("decrypt", 4)
    b.count("add", 100)
    b.count("scalar_mul", 7)
    b.count("multiexp_terms", 50)
    b.count("rerandomize", 3)
    a.on_send("bob", "x", 1000, 1)
    b.on_recv("alice", "x", 1000, 1, 0.0)
    b.on_send("alice", "y", 3000, 2)
    a.on_recv("bob", "y", 3000, 2, 0.5)
    return CostReport.from_ledgers([b, a], meta={"run": "test"})


def test_report_merges_and_round_trips_json_deterministically():
    report = _two_party_report()
    assert list(report.parties) == ["alice", "bob"]
    assert report.rounds == 2
    assert report.bytes_total == 4000 and report.messages_total == 2
    assert report.ops()["encrypt"] == 10 and report.ops()["add"] == 100
    assert report.key_bits == 1024
    text = report.to_json()
    again = CostReport.from_json(text)
    assert again.to_json() == text
    data = json.loads(text)
    assert data["totals"]["rounds"] == 2
    assert set(data["parties"]["alice"]["ops"]) == set(OPS)
    assert data["parties"]["alice"]["traffic"]["bob"] == {
        "sent": {"messages": 1, "bytes": 1000},
        "recv": {"messages": 1, "bytes": 3000},
    }
    table = report.to_text()
    assert "alice" in table and "bob" in table and "traffic per link" in table


def _three_party_report():
    """Realistic sizes: 2048-bit keys, counts and bytes in the millions, long phase names."""
    alice, bob, trent = (CostLedger(n, key_bits=2048) for n in ("alice", "bob", "trent"))
    with alice.phase("encrypt observations"):
        alice.count("encrypt", 4200)
        alice.on_send("bob", "obs", 538040, 1)
    with bob.phase("forward recursion"):
        bob.on_recv("alice", "obs", 538040, 1, 0.25)
        for op, k in [("add", 90000), ("multiexp_terms", 1521000), ("rerandomize", 1770)]:
            bob.count(op, k)
        bob.count("scalar_mul", 8700)
        bob.count("ot", 30)
        bob.count("compare", 12)
        bob.count("dot_product", 7)  # an operation outside OPS gets its own column
        bob.on_send("alice", "alpha", 12750123, 2)
        bob.on_send("trent", "share", 1066, 2)
    with alice.phase("forward recursion"):
        alice.on_recv("bob", "alpha", 12750123, 2, 1.5)
        alice.count("decrypt", 1770)
        alice.count("encrypt", 900)
    with trent.phase("collect shares"):
        trent.on_recv("bob", "share", 1066, 2, 0.125)
    with trent.phase("aggregate"):
        trent.count("add", 16)
    return CostReport.from_ledgers([alice, bob, trent], meta={"run": "test"})


#: every column name of the three tables (party, phase and link) of _three_party_report
_COLUMN_NAMES = {
    "party",
    *("enc", "dec", "add", "s.mul", "mexp", "rerand", "OT", "cmp", "dot_product"),
    *("msgs out/in", "bytes out/in", "rounds", "wall s", "cpu s", "compute s", "wait s"),
    *("phase", "operations"),
    *("from", "to", "messages", "bytes"),
}


def _header_names(text: str) -> set[str]:
    """Column names as printed: the cells of the heavy header rows of rich's default box."""
    return {
        cell.strip()
        for line in text.splitlines()
        if line.startswith("┃")
        for cell in line.split("┃")
        if cell.strip()
    }


@pytest.mark.parametrize("width", [80, 100, 120])
def test_tables_are_readable_at_80_columns_and_piped(width):
    """Regression: at 80 columns every header used to be cut to "p…", "e…"."""
    report = _three_party_report()
    console = Console(width=width, file=io.StringIO(), force_terminal=False)
    report.render(console)
    text = console.file.getvalue()
    assert _header_names(text) == _COLUMN_NAMES  # every name in full, on one line
    assert "…" not in text  # nothing cut with an ellipsis
    assert max(map(len, text.splitlines())) <= width
    for cell in (
        "12751189/538040",  # bytes out/in of bob
        "538040/12750123",
        "13289229",  # total bytes
        "1521000",  # mexp of bob
        "1.500",  # alice's wait
        "encrypt observations",
        "collect shares",
        "traffic per link",
        "2048-bit keys, 2 rounds",
    ):
        assert cell in text
    assert report.to_text(width) == text  # to_text lays out the same way
    # the JSON form does not depend on the layout
    data = report.to_dict()
    assert CostReport.from_dict(data).to_dict() == data
    assert CostReport.from_json(report.to_json()).to_json() == report.to_json()
    assert set(data) == {"version", "key_bits", "meta", "parties", "totals"}
    assert data["totals"]["ops"]["dot_product"] == 7


def test_split_tables_repeat_key_columns_and_name_their_groups():
    report = _three_party_report()
    narrow = report.to_text(80)
    assert "cost per party: operations (2048-bit keys, 2 rounds)" in narrow
    assert "cost per party: time" in narrow and "cost per phase: time" in narrow
    # the key columns are repeated: every party table lists every party and the total
    assert narrow.count("│ total ") == sum(
        1 for line in narrow.splitlines() if "cost per party" in line
    )
    # wide enough: one table of each kind, as before
    wide = report.to_text(200)
    titles = [t.title for t in report.tables(200)]
    assert titles == [
        "cost per party (2048-bit keys, 2 rounds)",
        "cost per phase",
        "traffic per link",
    ]
    assert [t.title for t in report.tables()] == titles
    assert _header_names(wide) == _COLUMN_NAMES
    # very narrow consoles still get whole names and no crash
    tiny = report.to_text(40)
    assert _header_names(tiny) == _COLUMN_NAMES and "…" not in tiny


def test_the_cost_package_does_not_import_the_benchmarks():
    code = (
        "import sys, smc_hmm.cost; "
        "assert not any(m.startswith('smc_hmm.bench') for m in sys.modules), 'eager'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "bad",
    [
        "not json",
        "[]",
        '{"version": 99, "parties": {}}',
        '{"version": 1, "parties": {"a": {"ops": {}}}}',
    ],
)
def test_malformed_reports_raise_config_error(bad, tmp_path):
    with pytest.raises(ConfigError):
        CostReport.from_json(bad)
    path = tmp_path / "r.json"
    path.write_text(bad)
    with pytest.raises(ConfigError):
        CostReport.load(path)
    with pytest.raises(ConfigError):
        CostReport.load(tmp_path / "missing.json")


def _rates(bits=1024):
    return PrimitiveRates(
        bits,
        {
            "encrypt": 100.0,
            "decrypt": 200.0,
            "add": 1e5,
            "scalar_mul": 1e4,
            "multiexp_terms": 2e4,
            "rerandomize": 150.0,
        },
    )


def test_cost_model_predicts_from_counts_rates_and_network_formula():
    report = _two_party_report()
    model = CostModel(_rates(1024))
    same = model.predict(report)
    alice = 10 / 100 + 4 / 200
    bob = 100 / 1e5 + 7 / 1e4 + 50 / 2e4 + 3 / 150
    assert same.compute == pytest.approx({"alice": alice, "bob": bob})
    assert same.network_seconds == 0.0
    assert same.serial_seconds == pytest.approx(alice + bob)
    assert same.parallel_seconds == pytest.approx(max(alice, bob))

    net = model.predict(report, latency=0.05, bandwidth=1e6)
    assert net.network_seconds == pytest.approx(0.05 * 2 + 4000 / 1e6)
    assert net.parallel_seconds == pytest.approx(max(alice, bob) + 0.05 * 2 + 3000 / 1e6)

    big = model.predict(report, bits=2048, input_scale=3.0, latency=0.01, bandwidth=1e6)
    e = SCALING_EXPONENTS
    alice2 = 3 * (10 / 100 * 2 ** e["encrypt"] + 4 / 200 * 2 ** e["decrypt"])
    assert big.compute["alice"] == pytest.approx(alice2)
    assert big.bytes_total == 4000 * 3 * 2
    assert big.rounds == 2
    assert big.network_seconds == pytest.approx(0.02 + 24000 / 1e6)
    assert json.loads(json.dumps(big.to_dict()))["bits"] == 2048
    assert "predicted" in big.table().title


def test_rates_scale_with_documented_exponents_and_validate():
    r = _rates(1024)
    r2 = r.at(2048)
    for op, exp in SCALING_EXPONENTS.items():
        if op in r.rates:
            assert r.rates[op] / r2.rates[op] == pytest.approx(2**exp)
    assert "invert" not in r2.rates  # an optional rate stays absent
    assert r.seconds_per("ot") == 0.0  # composites are counted by their primitives
    assert PrimitiveRates.from_dict(r.to_dict()) == r
    with pytest.raises(InvalidInputError):
        PrimitiveRates(1024, {"encrypt": 1.0})
    with pytest.raises(ConfigError):
        PrimitiveRates.from_dict({"rates": {}})
    with pytest.raises(InvalidInputError):
        CostModel(r).predict(_two_party_report(), latency=-1)


def test_cost_model_refuses_sizes_no_key_has_and_non_finite_networks():
    """Below the smallest working key the scaling would predict 0 s (or complex numbers)."""
    model = CostModel(_rates(1024))
    report = _two_party_report()
    assert model.predict(report, bits=256).serial_seconds > 0
    for bits in (-1, 0, 100, 255):
        with pytest.raises(InvalidInputError):
            model.predict(report, bits=bits)
    for network in ({"latency": float("nan")}, {"bandwidth": float("nan")}):
        with pytest.raises(InvalidInputError):
            model.predict(report, **network)


def test_measure_rates_gives_every_operation_and_prices_a_ledger(keypair_512):
    """Measured rates cover every modelled operation in a sane order, and the model
    prices a ledger as counts times those rates.  (How well the model predicts a run's
    wall time is a benchmark's claim: ``smc-hmm bench keyword`` prints it; a timed unit
    test would only measure the machine's load.)"""
    pk, sk = keypair_512
    rates = measure_rates(pk, sk, min_seconds=0.01)
    assert rates.bits == 512
    r = rates.rates
    # the kernel's own rate exists only where the kernel runs (a CPU with IFMA and
    # SMC_HMM_NATIVE not off); every other operation is measured everywhere
    kernel = native.kernel()
    on_kernel = kernel is not None and kernel.fits(pk.n * pk.n)
    assert set(r) == set(SCALING_EXPONENTS) - ({"native_mul"} if not on_kernel else set())
    assert ("native_mul" in r) == on_kernel
    assert all(v > 0 and math.isfinite(v) for v in r.values())
    # a modular multiplication is far cheaper than an exponentiation
    assert r["add"] > 10 * r["encrypt"] and r["add"] > 10 * r["decrypt"]
    assert r["scalar_mul"] > r["decrypt"]
    model = CostModel(rates)
    ledger = CostLedger("x", key_bits=512)
    view = PublicKey(pk.n).with_meter(ledger)  # an encryptor without the private key
    for _ in range(5):
        CipherArray.encrypt(view, list(range(8)))
    assert {op: k for op, k in ledger.ops.items() if k} == {"encrypt": 40}
    expected = 40 * rates.seconds_per("encrypt", 512)
    assert model.compute_seconds(ledger.ops) == pytest.approx(expected, rel=1e-12)


def test_the_model_prices_counted_multiexp_multiplications_as_additions():
    """With ``multiexp_mults`` in a ledger the model prices a multi-exponentiation by the
    multiplications its algorithm spends (few long shared-base rows cost less per bit than
    many short ones), not by its exponent bits."""
    from smc_hmm.crypto.multiexp import multiplication_count

    rates = PrimitiveRates(
        2048,
        {"encrypt": 1e3, "decrypt": 5e2, "add": 1e5, "scalar_mul": 1e3,
         "multiexp_terms": 1e4, "rerandomize": 1e3},
    )  # fmt: skip
    model = CostModel(rates)
    ops = {"multiexp_terms": 900, "multiexp_bits": 900 * 221, "multiexp_mults": 94_100}
    assert model.compute_seconds(ops) == pytest.approx(94_100 / 1e5)
    ops.pop("multiexp_mults")
    assert model.compute_seconds(ops) == pytest.approx(900 * 221 / rates.scalar_bits / 1e4)
    # 819-term rows cost fewer multiplications per term-bit than 9-term ones
    long_rows = multiplication_count(819, 1, 48) / (819 * 48)
    short_rows = multiplication_count(9, 1, 221) / (9 * 221)
    assert long_rows < short_rows / 2
    assert multiplication_count(9, 10, 221) < 10 * multiplication_count(9, 1, 221)  # tables
    assert multiplication_count(0, 1, 10) == multiplication_count(5, 1, 0) == 0


def test_malformed_rates_say_what_is_missing_in_words():
    """Not "malformed primitive rates: 'bits'"."""
    from smc_hmm.cost.model import PrimitiveRates
    from smc_hmm.errors import ConfigError

    with pytest.raises(ConfigError, match="lack the entry 'bits'"):
        PrimitiveRates.from_dict({"rates": {}})
    with pytest.raises(ConfigError, match="bits must be an integer"):
        PrimitiveRates.from_dict({"bits": "many", "rates": {}})


def test_critical_path_replays_timelines_as_one_machine_per_party():
    from smc_hmm.cost.ledger import critical_path

    a, b = CostLedger("alice"), CostLedger("bob")
    # alice computes 1 s and sends; waits for bob's reply; computes 0.5 s
    a.timeline = [("send", "bob", "x", 1.0), ("recv", "bob", "y", 0.0), ("end", None, None, 0.5)]
    # bob computes 0.2 s, waits for x (sent at 1 s), computes 2 s, replies, computes 0.1 s
    b.timeline = [
        ("recv", "alice", "x", 0.2),
        ("send", "alice", "y", 2.0),
        ("end", None, None, 0.1),
    ]
    assert critical_path([a, b]) == pytest.approx(3.5)  # 1 + 2 + 0.5; bob's 0.2 overlaps
    report = CostReport.from_ledgers([a, b])
    assert report.totals()["critical_path"] == pytest.approx(3.5)
    assert "critical path: 3.500 s with one machine per party" in report.to_text()
    assert CostReport.from_json(report.to_json()).critical_path == pytest.approx(3.5)
    b.timeline = b.timeline[1:]  # a send never received, a receive never sent: no path
    a.timeline = [("recv", "bob", "z", 0.0), ("end", None, None, 0.0)]
    assert critical_path([a, b]) is None
    assert critical_path([CostLedger("c")]) is None  # no run timed


def test_an_in_process_run_reports_its_critical_path(keypair_512):
    from protocols import secure_sum as ss
    from smc_hmm.runtime import run_protocol

    params = ss.Params(contributors=("bob",), length=3, scale=10, max_abs=100)
    result = run_protocol(
        ss.PROTOCOL,
        params,
        {
            "alice": ("key_holder", [1.0, 2.0, 3.0]),
            "bob": ("contributor", [4.0, 5.0, 6.0]),
            "trent": ("aggregator", None),
        },
        keys={"alice": keypair_512},
        min_key_bits=512,
        timeout=30,
    )
    totals = result.cost.totals()
    computes = [p["time"]["compute"] for p in result.cost.parties.values()]
    path = totals["critical_path"]
    # at least the busiest party's compute, at most every party's compute one after another
    assert max(computes) * 0.9 - 0.01 <= path <= sum(computes) + 0.01


def test_scalar_multiplications_are_priced_by_exponent_bits_and_inversions():
    """With the ledger's exponent bits and inversions and a measured inversion rate, a
    scalar multiplication costs its bits at the rate of scalar_bits-bit scalars and each
    inversion its own rate; without the inversion rate, the count alone (as before)."""
    plain = _rates(1024)
    rates = PrimitiveRates(1024, {**plain.rates, "invert": 5e4})
    ops = {"scalar_mul": 10, "scalar_mul_bits": 320, "invert": 4}
    assert CostModel(rates).compute_seconds(ops) == pytest.approx(320 / 64 / 1e4 + 4 / 5e4)
    assert CostModel(plain).compute_seconds(ops) == pytest.approx(10 / 1e4)
    assert rates.at(2048).rates["invert"] == pytest.approx(5e4 / 2 ** SCALING_EXPONENTS["invert"])
    assert PrimitiveRates.from_dict(rates.to_dict()) == rates
    with pytest.raises(InvalidInputError):
        PrimitiveRates(1024, {**plain.rates, "invert": -1.0})


def test_cipherarray_meters_exponent_bits_and_inversions(keypair_1024):
    pk, _ = keypair_1024
    ledger = CostLedger("bob")
    x = CipherArray.encrypt_encoded(pk.with_meter(ledger), [1, 2, 3], 0)
    x.mul([5, -1, 1 << 40])  # 3 + 1 + 41 bits, one inversion
    x.mul(-3)  # 2 bits each, three inversions
    _ = -x  # a negation: one bit and one inversion each
    ops = ledger.ops
    assert ops["scalar_mul"] == 9
    assert ops["scalar_mul_bits"] == 45 + 6 + 3
    assert ops["invert"] == 1 + 3 + 3
