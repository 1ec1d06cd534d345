"""Every benchmark with targets exits 1 when one is missed, through one ``finish()``.

Each runs its smallest configuration (insecure small keys) with one target made
impossible (a monkeypatched constant or an option), and must write its JSON and return 1.
The plumbing they share (``smc_hmm.bench.common``) is checked on its own first.
"""

from __future__ import annotations

import argparse
import importlib
import json

import numpy as np
import pytest

from smc_hmm.bench import common
from smc_hmm.bench.common import HIGHER, LOWER, BenchResult, Row
from smc_hmm.errors import InvalidInputError

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")


def parse(bench_add_arguments, argv):
    parser = argparse.ArgumentParser()
    bench_add_arguments(parser)
    return parser.parse_args(argv)


def missed(name, argv, tmp_path, monkeypatch, entry=("add_arguments", "main"), **impossible):
    """Run benchmark ``name`` (``smc_hmm.bench.NAME``, its ``entry``: the options and the
    command) on ``argv`` (a list, or words in a string) with ``impossible`` patched into
    it (a target no run meets, or stubs): it must exit 1 and write its JSON anyway, which
    is returned."""
    argv = argv.split() if isinstance(argv, str) else argv
    bench = importlib.import_module(f"smc_hmm.bench.{name}")
    for attribute, value in impossible.items():
        monkeypatch.setattr(bench, attribute, value)
    path = tmp_path / f"{name}.json"
    add_arguments, main = (getattr(bench, e) for e in entry)
    assert main(parse(add_arguments, [*argv, "--json", str(path)])) == 1
    return json.loads(path.read_text())


# -- the shared plumbing ---------------------------------------------------------------------


def test_a_row_with_a_baseline_says_which_direction_is_better():
    assert Row("time", 2.0, 8.0, "s", target=3, better=LOWER).ratio == 4.0
    assert Row("accuracy", 0.9, 0.6, "accuracy", better=HIGHER).ratio == pytest.approx(1.5)
    assert Row("states", 3.0, None, "states").ratio is None  # no baseline, no direction
    with pytest.raises(InvalidInputError, match="lower or higher"):
        Row("steps", 2.0, 1.0, "steps")
    with pytest.raises(InvalidInputError, match="better"):
        Row("x", 1.0, 1.0, "x", better="faster")


def test_rows_keep_their_json_schema():
    row = Row("time", 2.0, 8.0, "s", target=3, note="n", better=LOWER).to_dict()
    assert list(row) == ["name", "ours", "baseline", "unit", "target", "note", "limit", "ratio"]


def test_finish_writes_the_json_and_exits_1_on_any_missed_target(tmp_path):
    path = tmp_path / "out.json"
    args = argparse.Namespace(json=str(path))
    met = BenchResult("x", 512, [Row("t", 1.0, None, "s", limit=2.0)])
    missed_row = BenchResult("x", 512, [Row("t", 3.0, None, "s", limit=2.0)])
    assert common.finish(args, met) == 0
    assert json.loads(path.read_text())["rows"][0]["ours"] == 1.0
    assert common.finish(args, missed_row) == 1
    assert common.finish(args, met, met=False) == 1  # a target outside the rows
    numpy_row = Row("t", np.float64(3.0), None, "s", limit=2.0)  # ours from numpy
    assert common.finish(args, BenchResult("x", 512, [numpy_row])) == 1
    assert common.finish(args, {"plain": "data"}) == 0
    assert json.loads(path.read_text()) == {"plain": "data"}
    assert common.finish(argparse.Namespace(json=None), met) == 0  # no file asked for


def test_the_common_options_are_spelled_once():
    args = parse(
        lambda p: (
            common.add_key_arguments(p),
            common.add_workers_argument(p),
            common.add_json_argument(p),
        ),
        ["--key-bits", "1024", "--insecure", "--workers", "3", "--json", "x.json"],
    )
    assert (args.key_bits, args.insecure, args.workers, args.json) == (1024, True, 3, "x.json")


def test_common_arguments_surround_a_benchmarks_own():
    def add(parser):
        with common.common_arguments(parser, workers=True, short_randomness=""):
            parser.add_argument("--own", type=int, default=7)

    parser = argparse.ArgumentParser()
    add(parser)
    order = [a.dest for a in parser._actions if a.dest != "help"]
    assert order == ["key_bits", "insecure", "own", "workers", "short_randomness", "json"]
    defaults = vars(parser.parse_args([]))
    assert defaults == {"key_bits": 2048, "insecure": False, "own": 7, "workers": 2,
                        "short_randomness": False, "json": None}  # fmt: skip
    plain = argparse.ArgumentParser()
    with common.common_arguments(plain):
        pass
    assert sorted(vars(plain.parse_args([]))) == ["insecure", "json", "key_bits"]


# -- each benchmark with targets ---------------------------------------------------------------


#: benchmark -> (its smallest options, what makes a target impossible (patched into it, or
#: its entry points), what its JSON shows of the run)
MISSES = {
    "compare": (
        "--key-bits 512 --insecure --bits 8 --batch 2 --repeats 1 --argmax 2 --no-tno "
        "--garbled-batches 2",
        {"TARGET_KEY_BITS": 512, "ARGMAX_LIMIT_S": 0.0},
        lambda data: data["argmax"]["k"] == 2,
    ),
    "crypto": (
        "--key-bits 512 --insecure --repeats 1 --batch 4 --terms 4 --workers 2",
        {"ENCRYPT_TARGET": 1e12},
        lambda data: data["rows"][0]["target"] == 1e12 and data["rows"][0]["ratio"] > 0,
    ),
    "eigenvector": (
        "--key-bits 512 --insecure --owners 2 --rows 4 --cols 8 --data random --centred no "
        "--modes thesis",
        {"TARGET_COSINE_GAP": -1.0},
        lambda data: [r["mode"] for r in data["runs"]] == ["thesis"],
    ),
    "forward": (
        "--key-bits 512 --insecure --states 2 --symbols 2 --length 3 --dims 1 --workers 1",
        {"ABS_TARGET": -1.0},
        lambda data: data["all_within_target"] is False,
    ),
    "keyword": (
        "--key-bits 1024 --insecure --words 2 --frames 4 --workers 1 --mode fast --recursion v2 "
        "--stream-repeats 1",
        {"REL_TARGET": -1.0},
        lambda data: data["targets_met"] is False,
    ),
    "lmgmm": (  # the synthetic benchmark, its time limit impossible
        "--runs 1 --eps 3000 --jobs 1 --time-limit 1e-9",
        {"entry": ("add_synthetic_arguments", "synthetic")},
        lambda data: data["benchmark"] == "lmgmm-synthetic",
    ),
    "speaker": (
        "--key-bits 512 --insecure --workers 1 --skip-speed --skip-accuracy --utterances 1 "
        "--modes verify --sweep-scoring logsum",  # the relative error: LOGSUM reveals scores
        {"REL_TARGET": -1.0},
        lambda data: data["all_targets_met"] is False,
    ),
}


@pytest.mark.parametrize("name", sorted(MISSES))
def test_a_benchmark_exits_1_when_a_target_misses(name, tmp_path, monkeypatch):
    argv, impossible, shows = MISSES[name]
    assert shows(missed(name, argv, tmp_path, monkeypatch, **impossible))


def _tone_recordings(directory) -> None:
    """Two recordings of every digit: a tone per digit in noise (FSDD's file names)."""
    from scipy.io import wavfile

    rng = np.random.default_rng(1)
    t = np.arange(1200) / 8000
    for digit in range(10):
        for index in (0, 1):
            wave = np.sin(2 * np.pi * (250 + 140 * digit) * t) * np.hanning(t.size)
            noisy = (wave + 0.05 * rng.normal(size=t.size)) * 9000
            wavfile.write(directory / f"{digit}_test_{index}.wav", 8000, noisy.astype("<i2"))


def test_bench_dp_keyword_exits_1_when_an_accuracy_misses(tmp_path, monkeypatch):
    _tone_recordings(tmp_path)
    data = missed(
        "dp_keyword",
        [str(tmp_path), "--eps", "3", "--releases", "1", "--audit-releases", "0"],
        tmp_path,
        monkeypatch,
        TARGETS={3.0: 2.0},  # 200% accuracy
    )
    assert set(data["accuracy"]) == {"3"}


def test_bench_serve_exits_1_when_a_decision_disagrees(tmp_path, monkeypatch):
    """The serving benchmark's target is that every decision agrees with the plaintext
    one; its servers and client processes are stubbed out (``test_serve*.py`` run them),
    one session disagreeing."""
    level = {"clients": 1, "agree": 0, "utterances": 1, "utterances_per_min": 1.0}
    level |= {"p50_s": 1.0, "p95_s": 1.0}
    setting = {"setting": "local lanes", "levels": [level]}
    data = missed(
        "serve",
        "--key-bits 512 --insecure --clients 1",
        tmp_path,
        monkeypatch,
        _workload=lambda args, sessions: ([], [], []),
        _write_server=lambda *a: None,
        _run_levels=lambda *a: [setting],
    )
    assert data["settings"][0]["levels"][0]["agree"] == 0
