"""The output convention of every command (docs/running.md, "Output"): files first, tables
and progress on standard error, result lines on standard output, ``--json -`` for the
JSON report alone; a closed standard output ends the output, not the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from smc_hmm.cli import main
from smc_hmm.cli.common import REPORT_KEYS

SMALL = ["--key-bits", "512", "--insecure"]


def _voice(path, seconds=0.3, seed=5):
    from scipy.io import wavfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(8000 * seconds)) / 8000
    voice = np.sin(2 * np.pi * 220 * t) * np.hanning(t.size) + 0.05 * rng.normal(size=t.size)
    wavfile.write(path, 8000, (voice * 12000).astype(np.int16))
    return str(path)


def _collection(folder, count=3, seed=3):
    from scipy.io import wavfile

    rng = np.random.default_rng(seed)
    folder.mkdir(exist_ok=True)
    for i in range(count):
        t = np.arange(int(8000 * rng.uniform(0.7, 1.1))) / 8000
        y = sum(np.sin(2 * np.pi * f * t) for f in rng.uniform(200, 1500, 3))
        y = y * (np.abs(np.sin(2 * np.pi * rng.uniform(1, 4) * t)) + 0.1)
        y = y + 0.05 * rng.standard_normal(t.size)
        wavfile.write(folder / f"rec{i}.wav", 8000, (y / np.abs(y).max() * 20000).astype(np.int16))
    return folder


def _commands(tmp_path) -> dict[str, list[str]]:
    """One quick run of every command that reports a result, by name."""
    wav = _voice(tmp_path / "voice.wav")
    folder = _collection(tmp_path / "wavs")
    return {
        "keyword": ["keyword", "--audio", wav, *SMALL],
        "speaker": ["speaker", "identify", "--audio", wav, "--workers", "1", *SMALL],
        "spot": ["spot", "--audio", wav, "--keyword", "seven", "--workers", "1", *SMALL],
        "match": [
            "match",
            "--audio",
            str(folder / "rec1.wav"),
            "--start",
            "0.1",
            "--seconds",
            "0.4",
            "--collection",
            str(folder),
            "--threshold",
            "0.5",
            "--workers",
            "1",
            *SMALL,
        ],  # fmt: skip
        "demo": ["demo", "secure-sum", "--length", "3", *SMALL],
    }


@pytest.mark.parametrize("name", ["keyword", "speaker", "spot", "match", "demo"])
def test_a_closed_standard_output_ends_the_output_not_the_run(tmp_path, name):
    """``| head -1`` used to exit 1 with no message (rich's console exits on a broken pipe)
    and leave --json and --views unwritten; now every file is written and the exit code
    is the run's, with nothing on standard error but the usual lines."""
    argv = _commands(tmp_path)[name]
    report = tmp_path / "report.json"
    argv += ["--json", str(report)]
    if name == "keyword":
        argv += ["--views", str(tmp_path / "views")]
    done = _closed_stdout_run(argv)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    data = json.loads(report.read_text())
    assert set(REPORT_KEYS) <= set(data) and data["agree"] in (True, None)
    if name == "keyword":
        assert {p.name for p in (tmp_path / "views").iterdir()} == {"alice.json", "bob.json"}


@pytest.mark.parametrize("name", ["keyword", "speaker", "spot", "match", "demo"])
def test_result_lines_on_stdout_tables_on_stderr_and_json_alone(tmp_path, capsys, name):
    """speaker and match used to print JSON then the cost tables on standard output, and
    keyword and spot their tables there too: now standard output holds the result lines
    alone, the tables go to standard error, and ``--json -`` prints the report alone."""
    argv = _commands(tmp_path)[name]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "cost per party" in captured.err and "cost per party" not in captured.out
    assert "INSECURE" in captured.err and "INSECURE" not in captured.out
    lines = captured.out.strip().splitlines()
    assert lines and all(not line.lstrip().startswith(("{", "┏", "│")) for line in lines)
    assert main([*argv, "--json", "-"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # the report alone: nothing before or after it
    assert set(REPORT_KEYS) <= set(report) and report["agree"] is True
    if name in ("spot", "match"):
        assert report["result"] == report["plaintext"] == report["secure"]
    assert "parties" in (report["cost"][0] if isinstance(report["cost"], list) else report["cost"])
    assert "cost per party" in captured.err


def test_reports_share_one_schema(tmp_path, capsys):
    """Every command's JSON report holds command, mode, result, plaintext, agree and cost,
    with its own fields beside them (docs/running.md, "Reports")."""
    commands = _commands(tmp_path)
    reports = {}
    for name in ("keyword", "speaker"):
        assert main([*commands[name], "--json", "-"]) == 0
        reports[name] = json.loads(capsys.readouterr().out)
    keyword, speaker = reports["keyword"], reports["speaker"]
    assert keyword["command"] == "keyword" and keyword["mode"] == "private"
    assert keyword["result"] == keyword["secure"] == {"keyword": keyword["plaintext"]["keyword"]}
    assert keyword["agree"] is True and keyword["cost"]["totals"]["rounds"] > 0
    assert speaker["command"] == "speaker" and speaker["mode"] == "identify"
    assert speaker["result"]["speaker"] == speaker["plaintext"]["speaker"]
    assert speaker["agree"] is True and speaker["result"]["learned_by"] == "alice"


def _closed_stdout_run(argv) -> subprocess.CompletedProcess:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes anything
    try:
        return subprocess.run(
            [sys.executable, "-m", "smc_hmm.cli", *argv],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
        )
    finally:
        os.close(write)


def test_a_command_whose_result_is_a_table_stops_quietly_too(tmp_path):
    """``smc-hmm cost`` prints its tables on standard output (they are its result): a
    reader gone is no error there either -- no traceback, exit code 0."""
    from smc_hmm.cost import CostReport
    from smc_hmm.cost.ledger import CostLedger

    ledger = CostLedger("alice", key_bits=1024)
    ledger.count("enc", 5)
    path = tmp_path / "cost.json"
    CostReport.from_ledgers([ledger]).save(path)
    done = _closed_stdout_run(["cost", str(path)])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize("name", ["speaker", "match"])
def test_speaker_and_match_show_their_progress(tmp_path, capsys, name):
    """speaker and match showed one line for the whole run; now each phase of Alice's is
    a line on standard error with the phases begun of all and, from the second, the time
    left."""
    from smc_hmm.cli import common

    params = {"mode": "identify"} if name == "speaker" else {}
    phases = common.phases(name, params)
    argv = _commands(tmp_path)[name]
    assert main(argv) == 0
    captured = capsys.readouterr()
    label = "secure speaker identify" if name == "speaker" else "secure matching"
    n = len(phases)
    for k, phase in enumerate(phases, 1):
        assert f"{label}: {phase} (phase {k} of {n})" in captured.err
    assert re.search(rf"\(phase {n} of {n}\), about \d+ s left", captured.err)
    assert "phase" not in captured.out


def test_the_declared_phases_are_the_protocols(tmp_path, keypair_512):
    """The phases the progress lines count (each protocol's declared ``phases``) are each
    role's phases in the protocols' own ledgers, in every scoring of speaker (a protocol
    that renames one fails here, not silently in the lines)."""
    from smc_hmm.cli import common
    from smc_hmm.data.match import Collection, Spectrogram
    from smc_hmm.data.speakers import load_speaker_models, speaker_features_from_wav
    from smc_hmm.protocol import find
    from smc_hmm.runtime.simulate import run_protocol

    wav = _voice(tmp_path / "v.wav")
    folder = _collection(tmp_path / "wavs")
    runs = {
        "speaker": (speaker_features_from_wav(wav), load_speaker_models(), {}),
        "match": (
            Spectrogram().from_wav(folder / "rec1.wav", 0.1, 0.4),
            Collection.load(folder),
            {"threshold": 0.5},
        ),
    }
    cases = [("speaker", {}), ("speaker", {"scoring": "logsum"}), ("match", {})]
    for name, extra in cases:
        alice, bob, params = runs[name]
        params = {**params, **extra}
        result = run_protocol(
            find(name),
            params,
            {"alice": ("alice", alice), "bob": ("bob", bob)},
            keys={"alice": keypair_512},
            min_key_bits=512,
        )
        for role in ("alice", "bob"):
            phases = set(result.cost.to_dict()["parties"][role]["phases"]) - {"other"}
            assert phases == set(common.phases(name, params, role)), (name, params, role)


def test_phase_progress_counts_phases_and_estimates_the_time_left():
    import types

    from smc_hmm.progress import PhaseProgress

    lines, now = [], [0.0]
    spinner = types.SimpleNamespace(update=lines.append)
    progress = PhaseProgress(spinner, "run", ("a", "b", "c", "d"), clock=lambda: now[0])
    for t, phase in ((0.0, "a"), (3.0, "b"), (6.0, "new"), (9.0, "d")):
        now[0] = t
        progress.phase(phase)
    assert lines == [
        "run: a (phase 1 of 4)",
        "run: b (phase 2 of 4), about 9 s left",
        "run: new",
        "run: d (phase 4 of 4), about 3 s left",
    ]


def test_a_library_warning_is_one_line_without_its_source():
    """``demo keyword --mode fast`` printed Python's raw warning: the file and line of
    protocols/keyword.py, the category and the source line; now one line."""
    argv = ["demo", "keyword", "--mode", "fast", "--utterances", "1", "--frames", "4", *SMALL]
    done = subprocess.run(
        [sys.executable, "-m", "smc_hmm.cli", *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "reveals to Alice" in line]
    assert lines == [
        "smc-hmm: warning: keyword mode 'fast' reveals to Alice the order of all scores "
        "(docs/security.md)"
    ]
    assert "WeakerModeWarning" not in done.stderr and ".py:" not in done.stderr


def test_an_interrupt_after_the_result_still_says_interrupted():
    """SIGINT while the interpreter shuts down (joining worker processes and threads,
    here a slow exit handler) killed the command without the "interrupted" line; now it
    says so and exits with code 130."""
    import signal
    import time

    code = (
        "import atexit, sys, time\n"
        "atexit.register(time.sleep, 20)\n"
        "sys.argv = ['smc-hmm', 'demo', '--list']\n"
        "from smc_hmm.cli import main\n"
        "sys.exit(main())\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip()  # the result came out
    time.sleep(1.0)  # the command has returned: the interpreter is exiting
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "smc-hmm: interrupted"
