"""The smc-hmm command line: demo, certs, cost, bench registry, error handling."""

import json
import re
import types

import numpy as np
import pytest

from smc_hmm.cli import common, main

#: small INSECURE keys: quick runs of the commands that generate a key pair
SMALL_KEYS = ["--key-bits", "512", "--insecure"]


def assert_one_line_error(capsys, code, argv, match):
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("smc-hmm: error: ") and match in err
    assert "Traceback" not in err
    return err


def test_demo_secure_sum_with_small_insecure_keys(tmp_path, capsys):
    out = tmp_path / "demo.json"
    argv = ["demo", "secure-sum", *SMALL_KEYS, "--length", "3", "--owners", "2", "--seed", "7"]
    assert main([*argv, "--json", str(out)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "matches the plaintext sum" in text and "INSECURE" not in text
    assert "INSECURE" in captured.err  # warnings go to standard error
    assert "cost per party" in captured.err and "owner2" in captured.err  # tables: stderr
    data = json.loads(out.read_text())
    assert data["ok"] and len(data["result"]) == 3
    assert data["result"] == pytest.approx(data["expected"], abs=1e-4)
    assert data["cost"]["totals"]["rounds"] == 3
    assert data["cost"]["parties"]["alice"]["ops"]["decrypt"] == 3
    # options may come before the name
    assert main(["demo", "--key-bits", "1024", "--insecure", "forward", "--length", "3"]) == 0
    text = capsys.readouterr().out
    assert text.count("relative error") == 2 and "too large" not in text
    # the default demo is secure keyword recognition on bundled speech
    assert main(["demo", "--key-bits", "1024", "--insecure", "--utterances", "1"]) == 0
    assert "secure decisions agree with the plaintext ones" in capsys.readouterr().out
    assert main(["demo", "--list"]) == 0
    assert "keyword (default)" in capsys.readouterr().out


@pytest.mark.parametrize("mode", ["fast", "private"])
def test_demo_keyword_on_bundled_speech(tmp_path, capsys, mode):
    out = tmp_path / "keyword.json"
    argv = ["demo", "keyword", "--key-bits", "1024", "--insecure", "--mode", mode]
    argv += ["--frames", "6", "--utterances", "2", "--seed", "3", "--json", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "2/2 secure decisions agree" in captured.out and "cost per party" in captured.err
    data = json.loads(out.read_text())
    assert data["ok"] and data["mode"] == mode
    assert [r["spoken"] for r in data["runs"]] == ["zero", "one"]
    assert all(r["secure"] == r["plain"] and r["frames"] == 6 for r in data["runs"])
    assert_one_line_error(capsys, 2, ["demo", "keyword", "--insecure", "--frames", "0"], ">= 1")


def test_demo_refuses_small_keys_without_insecure_and_unknown_demos(capsys):
    assert_one_line_error(capsys, 2, ["demo", "--key-bits", "512"], "insecure")
    assert_one_line_error(capsys, 2, ["demo", "no-such-demo"], "unknown demo")


def test_certs_and_bad_party_names(tmp_path, capsys):
    assert main(["certs", "--out", str(tmp_path / "c"), "--parties", "alice,bob,trent"]) == 0
    for name in ("ca.pem", "alice.pem", "alice.key", "bob.key", "trent.pem"):
        assert (tmp_path / "c" / name).is_file()
    assert (tmp_path / "c" / "alice.key").stat().st_mode & 0o077 == 0
    capsys.readouterr()
    assert_one_line_error(
        capsys, 2, ["certs", "--out", str(tmp_path / "d"), "--parties", "Bad Name"], "ConfigError"
    )


def test_cost_prints_a_saved_report_and_predicts_other_settings(tmp_path, capsys):
    report = tmp_path / "demo.json"
    rates = tmp_path / "rates.json"
    assert main(["demo", "secure-sum", *SMALL_KEYS, "--length", "4", "--json", str(report)]) == 0
    argv = ["bench", "primitives", *SMALL_KEYS, "--min-seconds", "0.01", "--json", str(rates)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["cost", str(report)]) == 0
    text = capsys.readouterr().out
    assert (
        "cost per party" in text and "(512-bit keys, 3 rounds)" in text and "predicted" not in text
    )
    out = tmp_path / "prediction.json"
    assert (
        main(
            [
                "cost",
                str(report),
                "--rates",
                str(rates),
                "--bits",
                "2048",
                "--latency-ms",
                "50",
                "--bandwidth-mbps",
                "8",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert "predicted at 2048 bits" in capsys.readouterr().out
    prediction = json.loads(out.read_text())["prediction"]
    saved = json.loads(report.read_text())["cost"]
    assert prediction["bits"] == 2048 and prediction["rounds"] == 3
    assert prediction["bytes_total"] == saved["totals"]["bytes"] * 4  # 2048 / 512
    # 50 ms per round, 1 MB/s
    assert prediction["network_seconds"] == pytest.approx(0.15 + prediction["bytes_total"] / 1e6)


def test_cost_errors_are_one_line(tmp_path, capsys):
    assert_one_line_error(capsys, 2, ["cost", str(tmp_path / "missing.json")], "cannot read")
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1}')
    assert_one_line_error(capsys, 2, ["cost", str(bad)], "malformed cost report")


def test_party_and_launch_with_bad_configs_exit_2_with_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.toml"
    assert_one_line_error(
        capsys,
        2,
        ["party", "--role", "alice", "--config", str(missing)],
        "ConfigError: cannot read",
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[run]\nprotocol = "secure_sum"\nkey_bits = 512\n\n[parties.alice]\n'
        "port = 1\n[parties.bob]\nport = 2\n"
    )
    assert_one_line_error(capsys, 2, ["launch", "--config", str(bad)], "insecure")
    assert_one_line_error(capsys, 2, ["party", "--role", "carol", "--config", str(bad)], "insecure")


def test_bench_registry_and_usage_errors(capsys):
    assert main(["bench", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert {"crypto", "primitives"} <= set(listed)
    assert_one_line_error(capsys, 2, ["bench", "nothing-here"], "unknown benchmark")
    calls = []

    def fake(args):
        calls.append(args.size)
        return 0

    fake.add_arguments = lambda p: p.add_argument("--size", type=int, default=1)
    real = common.plugins

    def with_fake(group):  # a third-party benchmark registered under the entry-point group
        found = real(group)
        if group == common.BENCH_GROUP:
            found["fake"] = types.SimpleNamespace(load=lambda: fake)
        return found

    common.plugins = with_fake
    try:
        assert main(["bench", "fake", "--size", "5"]) == 0
        assert main(["bench", "--help"]) == 0  # every benchmark's options are listed
        assert "--size" in capsys.readouterr().out
    finally:
        common.plugins = real
    assert calls == [5]
    assert main([]) == 2
    assert main(["--help"]) == 0
    assert main(["demo", "--no-such-option"]) == 2
    assert main(["certs", "--out", "x", "--parties", "a", "extra"]) == 2


def _write_wav(path, seconds=0.12, seed=5):
    from scipy.io import wavfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(8000 * seconds)) / 8000
    voice = np.sin(2 * np.pi * 220 * t) * np.hanning(t.size) + 0.05 * rng.normal(size=t.size)
    wavfile.write(path, 8000, (voice * 12000).astype(np.int16))


@pytest.mark.parametrize("mode", ["fast", "private"])
def test_keyword_command_on_a_wav_file(tmp_path, capsys, mode):
    """Alice's WAV is featurised locally; the secure decision equals the plaintext one."""
    wav, out = tmp_path / "hello.wav", tmp_path / "keyword.json"
    _write_wav(wav)
    argv = ["keyword", "--audio", str(wav), "--key-bits", "1024", "--insecure"]
    assert main([*argv, "--mode", mode, "--json", str(out)]) == 0
    captured = capsys.readouterr()
    assert "agrees" in captured.out and "cost per party" in captured.err
    data = json.loads(out.read_text())
    assert data["mode"] == mode and data["secure"] == {"keyword": data["plaintext"]["keyword"]}
    scores = data["plaintext"]["log_likelihoods"]  # the ten digits and the background
    assert len(scores) == 11 and data["garbage"] == "background"
    digits = {k: v for k, v in scores.items() if k != "background"}
    assert max(digits, key=digits.get) == data["secure"]["keyword"]
    assert max(digits.values()) > scores["background"]
    from smc_hmm.data import load_pipeline

    assert data["frames"] == load_pipeline().n_frames(960) and data["cost"]["totals"]["rounds"]


def test_keyword_command_uses_the_pipeline_a_models_file_carries(tmp_path, capsys):
    """A model file with its own feature pipeline: Alice featurises the WAV with it."""
    import dataclasses

    from smc_hmm.data import load_bundled_models, load_pipeline
    from smc_hmm.features import FeaturePipeline
    from smc_hmm.hmm import log_likelihood
    from smc_hmm.hmm.io import save_models

    wav, out, path = tmp_path / "hi.wav", tmp_path / "kw.json", tmp_path / "kw.npz"
    _write_wav(wav)
    bundled = load_pipeline()
    shifted = FeaturePipeline.from_dict(
        dataclasses.replace(bundled, mean=tuple(m + 0.5 for m in bundled.mean)).to_dict()
    )
    models, labels = load_bundled_models("diag")
    save_models(path, models[:2], labels[:2], pipeline=shifted.to_dict())
    argv = ["keyword", "--audio", str(wav), "--models", str(path), "--key-bits", "1024"]
    assert main([*argv, "--insecure", "--json", str(out)]) == 0
    assert "bundled pipeline's, so no garbage model" in " ".join(capsys.readouterr().err.split())
    # the bundled background is the bundled pipeline's: asked for here, a one-line error
    assert main([*argv, "--insecure", "--garbage", "background"]) == 2
    assert "has its own feature pipeline" in capsys.readouterr().err
    scores = json.loads(out.read_text())["plaintext"]["log_likelihoods"]
    frames = shifted.features_from_wav(wav)
    assert scores[labels[0]] == pytest.approx(log_likelihood(models[0], frames), rel=1e-12)
    assert scores[labels[0]] != pytest.approx(
        log_likelihood(models[0], bundled.features_from_wav(wav)), rel=1e-6
    )


def test_keyword_command_errors(tmp_path, capsys):
    from smc_hmm.hmm import DiscreteHMM
    from smc_hmm.hmm.io import save_models

    wav = tmp_path / "a.wav"
    _write_wav(wav)
    base = ["keyword", "--key-bits", "1024", "--insecure", "--audio"]
    assert_one_line_error(capsys, 2, [*base, str(tmp_path / "none.wav")], "no such WAV")
    assert_one_line_error(capsys, 2, [*base, __file__], "not a readable WAV")
    assert main([*base, str(wav), "--mode", "slow"]) == 2  # argparse's choices
    assert "invalid choice: 'slow'" in capsys.readouterr().err
    assert_one_line_error(
        capsys, 2, ["keyword", "--key-bits", "1024", "--audio", str(wav)], "add --insecure"
    )
    discrete = tmp_path / "discrete.npz"
    save_models(discrete, [DiscreteHMM([1.0], [[1.0]], [[0.5, 0.5]])] * 2)
    assert_one_line_error(
        capsys, 2, [*base, str(wav), "--models", str(discrete)], "discrete (symbol) models"
    )


@pytest.mark.parametrize("kind", ["silence", "tone"])
def test_keyword_warns_on_stderr_when_a_recording_holds_no_speech(tmp_path, capsys, kind):
    """Digital silence and a 440 Hz tone used to get a digit with
    no word; now a public rule on Alice's side warns on stderr, and stdout holds the
    result line alone (the cost tables go to stderr)."""
    from scipy.io import wavfile

    t = np.arange(8000) / 8000
    signal = np.zeros_like(t) if kind == "silence" else 0.5 * np.sin(2 * np.pi * 440 * t)
    wav = tmp_path / f"{kind}.wav"
    wavfile.write(wav, 8000, (signal * 12000).astype(np.int16))
    main(["keyword", "--audio", str(wav), "--key-bits", "1024", "--insecure"])
    captured = capsys.readouterr()
    assert ("silent" if kind == "silence" else "steady tone") in captured.err
    assert "INSECURE" in captured.err and "INSECURE" not in captured.out
    assert captured.out.lstrip().startswith(str(wav)) and "secure decision" in captured.out
    assert "cost per party" in captured.err and len(captured.out.strip().splitlines()) == 1


def test_the_speech_rule_never_fires_on_real_recordings():
    """The FSDD recordings (real speech) pass the rule; needs FSDD_DIR (skipped otherwise,
    as the other tests of the original recordings)."""
    import os
    from pathlib import Path

    from smc_hmm.features import read_wav, speech_warning

    root = os.environ.get("FSDD_DIR")
    if not root:
        pytest.skip("FSDD_DIR is not set (the original recordings are not bundled)")
    files = sorted(Path(root).rglob("*.wav"))
    assert files and not [f for f in files if speech_warning(read_wav(f))]


def test_views_show_what_each_party_received(tmp_path, capsys):
    """--views DIR writes each party's view; Alice's own ciphertexts
    appear decrypted (the blinded values her protocol declares), Bob's view holds only
    ciphertexts under her key, public keys and declared clear fields."""
    wav, views = tmp_path / "hello.wav", tmp_path / "views"
    _write_wav(wav)
    argv = ["keyword", "--audio", str(wav), "--key-bits", "1024", "--insecure"]
    assert main([*argv, "--views", str(views)]) == 0
    capsys.readouterr()
    alice = json.loads((views / "alice.json").read_text())
    bob = json.loads((views / "bob.json").read_text())
    assert alice["holds_key"] and not bob["holds_key"]

    def kinds(view):
        out = set()
        for message in view["messages"]:
            fields = message["fields"]
            for field in fields if isinstance(fields, list) else [fields]:
                out.add(field["kind"])
        return out

    assert "decrypted" in kinds(alice)
    assert "decrypted" not in kinds(bob) and "ciphertext" in kinds(bob)
    emit = next(m for m in alice["messages"] if m["tag"] == "bd.values")["fields"]
    assert len(emit["values"]) == emit["shape"][0] * emit["shape"][1]
    # refused before any work: a file where the folder should be, or another demo
    (tmp_path / "plain").write_text("x")
    assert_one_line_error(capsys, 2, [*argv, "--views", str(tmp_path / "plain")], "is a file")
    assert_one_line_error(capsys, 2, ["demo", "forward", "--views", str(views)], "keyword demo")


def test_a_recording_longer_than_max_frames_is_refused_before_any_work(tmp_path, capsys):
    """A documented length bound (30 s by default, as serve) with an
    option to raise it, checked before key generation."""
    wav = tmp_path / "hello.wav"
    _write_wav(wav)
    argv = ["keyword", "--audio", str(wav), "--key-bits", "1024", "--insecure"]
    err = assert_one_line_error(capsys, 2, [*argv, "--max-frames", "5"], "--max-frames 5")
    assert "frames" in err and "raise --max-frames" in err
    assert_one_line_error(capsys, 2, [*argv, "--max-frames", "0"], "at least 1")


def test_progress_lines_estimate_the_time_left():
    """ctx.progress reports become status lines with the steps done and, once a tenth is
    done, the time left at the rate so far; at most one line every two seconds."""
    from smc_hmm.progress import Progress

    lines, now = [], [0.0]
    spinner = types.SimpleNamespace(update=lines.append)
    progress = Progress(spinner, "run", clock=lambda: now[0])
    for step in range(1, 101):
        now[0] = step * 0.5  # half a second a step
        progress("forward recursion", step, 100)
    import re

    assert lines[0] == "run: forward recursion 1/100"  # no estimate before a tenth is done
    estimates = [re.search(r"(\d+)/100, about (\d+) s left", line) for line in lines]
    estimates = [(int(m[1]), int(m[2])) for m in estimates if m]
    assert estimates and all(done >= 10 for done, _ in estimates)
    assert all(abs(left - 0.5 * (100 - done)) <= 1 for done, left in estimates)
    assert lines[-1] == "run: forward recursion 100/100"
    assert len(lines) <= 27  # one line every two seconds


def test_a_long_recording_is_priced_by_the_cost_model_first(tmp_path, capsys, monkeypatch):
    """Long recordings get the cost model's estimate before the run (a short run's ledger
    scaled to the length, priced at this machine's rates) and progress lines after it."""
    from smc_hmm.cli import keyword as kw

    monkeypatch.setattr(kw, "ESTIMATE_FROM_FRAMES", 10)
    monkeypatch.setattr(kw, "ESTIMATE_SAMPLE_FRAMES", 4)
    wav = tmp_path / "hello.wav"
    _write_wav(wav)
    assert main(["keyword", "--audio", str(wav), "--key-bits", "1024", "--insecure"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"cost model: about \d+ s for \d+ frames", err)
    assert "recursion, frames" in err
