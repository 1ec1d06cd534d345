"""`smc-hmm cost` reads what `demo`, `demo secure-sum`, `launch` and `party` write with --json,
shows every run of a multi-run file (or only `--run N`), and rejects anything else with a
one-line ConfigError."""

from __future__ import annotations

import json
import threading

import pytest
from party_support import write_secure_sum_config

from smc_hmm.cli import main

SMALL = ["--key-bits", "512", "--insecure", "--seed", "3"]


def assert_one_line_error(capsys, argv, *fragments):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("smc-hmm: error: ConfigError: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    return captured


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory):
    """The --json files of the forward demo (two runs) and of the secure-sum demo."""
    folder = tmp_path_factory.mktemp("demos")
    forward, secure_sum = folder / "forward.json", folder / "sum.json"
    assert main(["demo", "forward", *SMALL, "--length", "3", "--json", str(forward)]) == 0
    assert main(["demo", "secure-sum", *SMALL, "--length", "3", "--json", str(secure_sum)]) == 0
    return forward, secure_sum


@pytest.fixture(scope="module")
def rates(tmp_path_factory):
    path = tmp_path_factory.mktemp("rates") / "rates.json"
    argv = ["bench", "primitives", "--key-bits", "512", "--min-seconds", "0.01", "--json"]
    if main([*argv, str(path)]) != 0:  # newer CLIs want --insecure for 512-bit keys
        assert main([*argv, str(path), "--insecure"]) == 0
    return path


def _models_in_forward_demo(path):
    return [run["model"] for run in json.loads(path.read_text())["runs"]]


# -- demo files ---------------------------------------------------------------------------


def test_forward_demo_json_shows_every_run(demo_files, capsys):
    forward, _ = demo_files
    capsys.readouterr()
    assert main(["cost", str(forward)]) == 0
    out = capsys.readouterr().out
    models = _models_in_forward_demo(forward)
    assert len(models) == 2
    for i, model in enumerate(models, 1):
        assert f"run {i}: {model}" in out
    assert out.count("512-bit keys") == 2 and "unsupported version" not in out


def test_forward_demo_json_run_n_shows_only_that_run(demo_files, capsys):
    forward, _ = demo_files
    models = _models_in_forward_demo(forward)
    capsys.readouterr()
    assert main(["cost", str(forward), "--run", "2"]) == 0
    out = capsys.readouterr().out
    assert f"run 2: {models[1]}" in out and "run 1:" not in out
    assert out.count("512-bit keys") == 1


@pytest.mark.parametrize("n", ["0", "3", "-1"])
def test_run_out_of_range(demo_files, capsys, n):
    forward, secure_sum = demo_files
    captured = assert_one_line_error(capsys, ["cost", str(forward), "--run", n], "runs 1 to 2")
    assert captured.out == ""  # nothing printed before the error
    assert_one_line_error(capsys, ["cost", str(secure_sum), "--run", "2"], "a single run")


def test_json_without_a_prediction_is_refused_not_ignored(demo_files, tmp_path, capsys):
    """``cost REPORT --json PATH`` with nothing to predict wrote nothing and exited 0."""
    _, secure_sum = demo_files
    out = tmp_path / "prediction.json"
    captured = assert_one_line_error(
        capsys, ["cost", str(secure_sum), "--json", str(out)], "--json writes a prediction"
    )
    assert captured.out == "" and not out.exists()


def test_secure_sum_demo_json(demo_files, capsys):
    _, secure_sum = demo_files
    capsys.readouterr()
    assert main(["cost", str(secure_sum)]) == 0
    out = capsys.readouterr().out
    assert "(512-bit keys, 3 rounds)" in out and "run 1" not in out
    assert main(["cost", str(secure_sum), "--run", "1"]) == 0


def test_bare_report_still_accepted(demo_files, tmp_path, capsys):
    _, secure_sum = demo_files
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(json.loads(secure_sum.read_text())["cost"]))
    capsys.readouterr()
    assert main(["cost", str(bare)]) == 0
    assert "(512-bit keys, 3 rounds)" in capsys.readouterr().out


def test_predictions_for_every_run_or_one(demo_files, rates, tmp_path, capsys):
    forward, _ = demo_files
    saved = json.loads(forward.read_text())["runs"]
    out = tmp_path / "all.json"
    argv = ["cost", str(forward), "--rates", str(rates), "--bits", "1024", "--json"]
    assert main([*argv, str(out)]) == 0
    assert capsys.readouterr().out.count("predicted at 1024 bits") == 2
    data = json.loads(out.read_text())
    assert [r["run"] for r in data["runs"]] == [1, 2] and "rates" in data
    for run, s in zip(data["runs"], saved):
        assert run["prediction"]["rounds"] == s["cost"]["totals"]["rounds"]
        assert run["prediction"]["bytes_total"] == s["cost"]["totals"]["bytes"] * 2  # 1024/512
    one = tmp_path / "one.json"
    assert main([*argv, str(one), "--run", "2"]) == 0
    assert capsys.readouterr().out.count("predicted at 1024 bits") == 1
    prediction = json.loads(one.read_text())["prediction"]  # a single run: the old layout
    assert prediction["bytes_total"] == saved[1]["cost"]["totals"]["bytes"] * 2


# -- launch and party files ---------------------------------------------------------------


def _secure_sum_config(tmp_path):
    names = ["alice", "bob", "trent"]
    vectors = {name: [1.0, 2.0] for name in names}
    return write_secure_sum_config(tmp_path, vectors, timeout=20, connect_timeout=20), names


def test_launch_and_party_json(tmp_path, capsys):
    config, names = _secure_sum_config(tmp_path)
    launched = tmp_path / "launch.json"
    assert main(["launch", "--config", str(config), "--json", str(launched)]) == 0
    codes = {}

    def party(name):
        argv = ["party", "--role", name, "--config", str(config), "--quiet"]
        codes[name] = main([*argv, "--json", str(tmp_path / f"{name}.result.json")])

    threads = [threading.Thread(target=party, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert codes == {n: 0 for n in names}
    capsys.readouterr()

    assert main(["cost", str(launched)]) == 0
    out = capsys.readouterr().out
    assert "(512-bit keys, 3 rounds)" in out
    assert all(name in out for name in names)

    for name in names:
        result = tmp_path / f"{name}.result.json"
        assert main(["cost", str(result)]) == 0
        out = capsys.readouterr().out
        assert "cost per party" in out and name in out
        others = [n for n in names if n != name]
        table = out.split("traffic per link")[0]
        assert not any(f"│ {n} " in table for n in others)  # that party's snapshot only


def test_failed_party_result_says_so(tmp_path, capsys):
    failed = tmp_path / "alice.result.json"
    failed.write_text(
        json.dumps(
            {
                "party": "alice",
                "protocol": "secure_sum",
                "ok": False,
                "error": {"type": "PeerTimeoutError", "message": "bob did not answer"},
                "elapsed": 1.0,
            }
        )
    )
    assert_one_line_error(
        capsys, ["cost", str(failed)], "failed run of party alice", "PeerTimeoutError"
    )


# -- not a cost file ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (bytes(range(256)), "binary file, not JSON"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "binary file, not JSON"),
        (b"not json at all", "is not valid JSON"),
        (b"", "is not valid JSON"),
        (b"[" * 100_000, "is not valid JSON"),
        (b"[1, 2, 3]", "holds no cost report"),
        (b'{"hello": 1}', "holds no cost report (top-level keys: hello"),
        (b'{"runs": []}', "empty list of runs"),
        (b'{"runs": [{"model": "x"}]}', "run 1 holds no 'cost'"),
        (b'{"runs": [{"cost": 5}]}', "is not a cost report"),
        (b'{"cost": "x"}', "'cost' is not a cost report"),
        (b'{"cost": {"ops": {}}}', "does not name its party"),
        (b'{"version": 1, "parties": {"a": 1}}', "malformed cost report"),
        (b'{"parties": {}}', "unsupported version"),
        (b'{"version": 1}', "malformed cost report: no 'parties' object"),
    ],
)
def test_not_a_cost_file(tmp_path, capsys, content, fragment):
    path = tmp_path / "report.json"
    path.write_bytes(content)
    err = assert_one_line_error(capsys, ["cost", str(path)], fragment).err
    assert str(path) in err


def test_missing_file_and_directory(tmp_path, capsys):
    assert_one_line_error(capsys, ["cost", str(tmp_path / "absent.json")], "cannot read")
    assert_one_line_error(capsys, ["cost", str(tmp_path)], "cannot read")


def test_malformed_party_entries_are_config_errors(demo_files, tmp_path, capsys):
    _, secure_sum = demo_files
    data = json.loads(secure_sum.read_text())
    del data["cost"]["parties"]["alice"]["traffic"]["bob"]["sent"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    captured = assert_one_line_error(capsys, ["cost", str(path)], "malformed cost report")
    assert captured.out == ""


def test_binary_rates_file(demo_files, tmp_path, capsys):
    _, secure_sum = demo_files
    rates = tmp_path / "rates.json"
    rates.write_bytes(bytes(range(256)))
    captured = assert_one_line_error(
        capsys, ["cost", str(secure_sum), "--rates", str(rates)], "not valid JSON"
    )
    assert captured.out == ""
