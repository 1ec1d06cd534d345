"""The rough edges a new user hits first: each ends in one typed line (exit code 2) before
any work starts, or in output a script can read (one line per result)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile

from smc_hmm.cli import main

SMALL = ["--key-bits", "1024", "--insecure"]


def one_line_error(capsys, argv, *fragments) -> str:
    """Run ``argv``; it must fail with exit code 2 and one line on stderr, naming every
    fragment; returns what went to stdout (nothing should have been done)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("smc-hmm: error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return captured.out


def _wav(path, samples: int = 3472):
    t = np.arange(samples) / 8000
    voice = np.sin(2 * np.pi * 220 * t) * np.hanning(samples)
    wavfile.write(path, 8000, (voice * 12000).astype(np.int16))
    return path


# -- WAV files and models of `smc-hmm keyword` ----------------------------------------------


@pytest.mark.parametrize("cut", [20, 30, 40])
def test_keyword_on_a_wav_cut_inside_its_header(tmp_path, capsys, cut):
    whole = _wav(tmp_path / "whole.wav")
    part = tmp_path / "part.wav"
    part.write_bytes(whole.read_bytes()[:cut])
    argv = ["keyword", *SMALL, "--audio", str(part)]
    assert (
        one_line_error(capsys, argv, "InvalidInputError", "not a readable WAV file", "header") == ""
    )  # nothing ran


def test_keyword_on_a_wav_holding_fewer_samples_than_promised(tmp_path, capsys):
    whole = _wav(tmp_path / "whole.wav", 3472)
    part = tmp_path / "part.wav"
    part.write_bytes(whole.read_bytes()[: 44 + 2 * 2000])
    argv = ["keyword", *SMALL, "--audio", str(part)]
    assert (
        one_line_error(capsys, argv, "truncated", "promises 3472 samples", "holds 2000") == ""
    )  # nothing ran


def test_keyword_with_unknown_models_names_the_valid_words(tmp_path, capsys):
    wav = _wav(tmp_path / "a.wav")
    argv = ["keyword", *SMALL, "--audio", str(wav), "--models", "bogus"]
    assert (
        one_line_error(capsys, argv, "--models bogus", "diag", "full", ".npz") == ""
    )  # nothing ran


# -- output paths: checked before any work --------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "keyword", *SMALL, "--utterances", "1"],
        ["demo", "forward", *SMALL, "--length", "2"],
        ["demo", "secure-sum", *SMALL, "--length", "2"],
        ["keyword", *SMALL, "--audio", "AUDIO"],
        ["bench", "lanes", *SMALL, "--terms", "4", "--rounds", "1"],
    ],
    ids=["demo-keyword", "demo-forward", "demo-secure-sum", "keyword", "bench"],
)
def test_json_into_a_missing_folder_is_refused_before_any_work(tmp_path, capsys, argv):
    argv = [str(_wav(tmp_path / "a.wav")) if a == "AUDIO" else a for a in argv]
    missing = str(tmp_path / "no" / "x.json")
    out = one_line_error(capsys, [*argv, "--json", missing], "folder", "does not exist")
    assert "INSECURE" not in out and "agree" not in out  # no key, no run
    folder = tmp_path / "folder"
    folder.mkdir()
    one_line_error(capsys, [*argv, "--json", str(folder)], "is a folder")


def test_release_hmm_checks_every_output_path_before_writing_the_model(tmp_path, capsys):
    data = tmp_path / "seqs.json"
    data.write_text(json.dumps([[0, 1, 1, 0], [1, 0, 1]]))
    model = tmp_path / "dp.npz"
    argv = ["release", "hmm", "--data", str(data), "--eps", "1", "--max-length", "5"]
    argv += ["--symbols", "2", "--states", "2", "--out", str(model)]
    one_line_error(capsys, [*argv, "--json", str(tmp_path / "no" / "s.json")], "does not exist")
    assert not model.exists()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["release", "hmm", "--eps", "1", "--max-length", "5", "--out", "OUT.npz"], "--out"),
        (["release", "hmm", "--keyword-models", "--eps", "1", "--out", "OUT.npz"], "--out"),
        (["release", "lmgmm", "--eps", "1", "--out", "OUT.npz"], "--out"),
        (["release", "hmm", "--eps", "1", "--max-length", "5", "--json", "OUT"], "--json"),
        (["release", "hmm", "--keyword-models", "--eps", "1", "--json", "OUT"], "--json"),
        (["release", "lmgmm", "--eps", "1", "--json", "OUT"], "--json"),
        (
            [
                "release",
                "trace",
                "--model",
                "DATA",
                "--trace",
                "DATA",
                "--graph",
                "complete",
                "--json",
                "OUT",
            ],
            "--json",
        ),  # fmt: skip
        (["keyword", *SMALL, "--audio", "DATA", "--json", "OUT"], "--json"),
        (["speaker", "identify", *SMALL, "--audio", "DATA", "--json", "OUT"], "--json"),
        (["demo", "secure-sum", *SMALL, "--length", "2", "--json", "OUT"], "--json"),
        (["cost", "docs/bench-keyword-diag.json", "--bits", "2048", "--json", "OUT"], "--json"),
        (["serve", "--config", "DATA", "--log", "OUT"], "--log"),
    ],
)
@pytest.mark.parametrize("where", ["proc", "under-a-file"])
def test_an_unwritable_output_path_is_refused_before_any_data_is_read(
    tmp_path, capsys, argv, flag, where
):
    """A folder that exists but takes no new file (/proc: tests run as root, for whom
    os.access says yes everywhere) or a "folder" that is a regular file: one typed line,
    exit code 2, before the data (a missing file here) is even looked at."""
    if where == "proc":
        out = "/proc/smc-hmm-test-output"
    else:
        (tmp_path / "file").write_text("")
        out = str(tmp_path / "file" / "x")
    out = out + ".npz" if "OUT.npz" in argv else out
    data = str(tmp_path / "missing.json")
    argv = [out if a in ("OUT", "OUT.npz") else data if a == "DATA" else a for a in argv]
    if "--data" not in argv and argv[0] == "release" and argv[1] != "trace":
        argv += ["--data", data]
    printed = one_line_error(capsys, argv, "ConfigError", flag, out)
    assert "INSECURE" not in printed  # no key, no run


def test_release_hmm_refuses_a_privacy_metadata_path_it_cannot_write(tmp_path, capsys):
    (tmp_path / "m.privacy.json").mkdir()  # the sidecar of m.npz is taken by a folder
    argv = ["release", "hmm", "--data", str(tmp_path / "missing.json"), "--eps", "1"]
    for extra in (["--max-length", "5"], ["--keyword-models"]):
        out = str(tmp_path / "m.npz")
        one_line_error(capsys, [*argv, *extra, "--out", out], "privacy metadata", "is a folder")
        assert not (tmp_path / "m.npz").exists()


def test_release_hmm_says_a_text_file_is_not_an_npz_archive(tmp_path, capsys):
    text = tmp_path / "text.npz"
    text.write_text("0 1 1 0\n1 0 1\n")
    argv = ["release", "hmm", "--data", str(text), "--eps", "1", "--max-length", "5"]
    one_line_error(capsys, [*argv, "--out", str(tmp_path / "m.npz")], "not an npz archive")
    assert "pickle" not in capsys.readouterr().err


# -- numbers: checked while the command line is parsed -----------------------------------------

TOO_MANY = str(4 * (os.cpu_count() or 1) + 1)


@pytest.mark.parametrize("value", ["-1", "0", TOO_MANY, "100000", "two"])
@pytest.mark.parametrize(
    "argv",
    [
        ["keyword", *SMALL, "--audio", "missing.wav"],
        ["speaker", "identify", *SMALL, "--audio", "missing.wav"],
        ["serve", "--config", "missing.toml"],
    ],
    ids=["keyword", "speaker", "serve"],
)
def test_workers_are_bounded_before_any_work(capsys, argv, value):
    """--workers: a negative value gave a traceback, 0 silently meant all cores and 100000
    was accepted.  One bound everywhere: 1 .. 4 x the cores (smc_hmm.options)."""
    out = one_line_error(capsys, [*argv, "--workers", value], "--workers")
    assert out == "", out


def test_the_workers_bound_is_the_compute_layers_too():
    from smc_hmm.compute import Compute
    from smc_hmm.errors import InvalidInputError
    from smc_hmm.options import check_workers, max_workers

    assert max_workers() == 4 * (os.cpu_count() or 1) == check_workers(max_workers())
    for bad in (0, -2, max_workers() + 1, True, 2.0):
        with pytest.raises(InvalidInputError):
            check_workers(bad)
        with pytest.raises(InvalidInputError):
            Compute.processes(bad)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["keyword", *SMALL, "--audio", "missing.wav", "--timeout", "nan"], "--timeout"),
        (["keyword", *SMALL, "--audio", "missing.wav", "--timeout", "0"], "--timeout"),
        (["keyword", *SMALL, "--audio", "missing.wav", "--timeout", "-5"], "--timeout"),
        (["keyword", *SMALL, "--audio", "missing.wav", "--timeout", "1e300"], "--timeout"),
        (["speaker", "verify", *SMALL, "--audio", "missing.wav", "--timeout", "inf"], "--timeout"),
        (["demo", "secure-sum", *SMALL, "--timeout", "0"], "--timeout"),
        (["launch", "--config", "missing.toml", "--timeout", "nan"], "--timeout"),
        (["release", "hmm", "--data", "missing.json", "--eps", "nan"], "--eps"),
        (["release", "hmm", "--data", "missing.json", "--eps", "-1"], "--eps"),
        (["release", "hmm", "--keyword-models", "--data", "m.npz", "--eps", "0"], "--eps"),
        (
            ["release", "hmm", "--keyword-models", "--data", "m.npz", "--eps", "1", "--delta", "1"],
            "--delta",
        ),  # fmt: skip
        (
            [
                "release",
                "hmm",
                "--keyword-models",
                "--data",
                "m.npz",
                "--eps",
                "1",
                "--delta",
                "nan",
            ],
            "--delta",
        ),  # fmt: skip
        (["release", "lmgmm", "--data", "missing.npz", "--eps", "inf"], "--eps"),
        (["release", "lmgmm", "--data", "missing.npz", "--eps-total", "0"], "--eps-total"),
        (
            [
                "release",
                "trace",
                "--model",
                "m.npz",
                "--trace",
                "t.json",
                "--graph",
                "complete",
                "--eps",
                "0",
            ],
            "--eps",
        ),  # fmt: skip
    ],
)
def test_privacy_parameters_and_timeouts_are_checked_while_parsing(capsys, argv, fragment):
    """A bad --eps, --delta or --timeout is refused before any key is generated, any
    offline phase runs or any file is read (every file named here is missing: reaching
    it would give another error)."""
    assert one_line_error(capsys, argv, fragment, "must be") == ""


# -- sizes: bounded, documented, refused before any work ----------------------------------------


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["certs", "--out", "OUT", "--parties", "alice,bob", "--days", "100000000"], "3650"),
        (["certs", "--out", "OUT", "--parties", "alice,bob", "--days", "3651"], "3650"),
        (["certs", "--out", "OUT", "--parties", "alice,bob", "--days", "0"], "3650"),
        (["release", "hmm", "--data", "DATA", "--eps", "1", "--states", "100000"], "1,000"),
        (
            [
                "release",
                "hmm",
                "--keyword-models",
                "--data",
                "DATA",
                "--eps",
                "1",
                "--states",
                "1001",
            ],
            "1,000",
        ),  # fmt: skip
        (
            ["release", "hmm", "--data", "DATA", "--eps", "1", "--max-length", "1000000000000"],
            "1,000,000",
        ),  # fmt: skip
        (
            [
                "release",
                "hmm",
                "--data",
                "DATA",
                "--eps",
                "1",
                "--max-length",
                "5",
                "--symbols",
                "100001",
            ],
            "100,000",
        ),  # fmt: skip
    ],
)
def test_sizes_beyond_their_documented_bound_are_refused(tmp_path, capsys, argv, fragment):
    """certs --days 1e8 gave an OverflowError traceback; release hmm --states 100000 asked
    for 74.5 GiB; --max-length 1e12 released pure noise.  Each is one typed line (exit 2)
    while the command line is parsed: nothing is written, no data read."""
    out, data = tmp_path / "certs", tmp_path / "missing.json"
    argv = [str(out) if a == "OUT" else str(data) if a == "DATA" else a for a in argv]
    assert one_line_error(capsys, argv, "ConfigError", fragment) == ""
    assert not out.exists()


def test_the_longest_certificate_validity_is_accepted(tmp_path):
    import datetime

    from cryptography import x509

    from smc_hmm.certs import MAX_CERT_DAYS, make_certificates
    from smc_hmm.errors import ConfigError

    made = make_certificates(tmp_path / "pki", "alice", days=MAX_CERT_DAYS)
    cert = x509.load_pem_x509_certificate(Path(made.certs["alice"]).read_bytes())
    lasts = cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    assert MAX_CERT_DAYS - 1 <= lasts.days <= MAX_CERT_DAYS
    with pytest.raises(ConfigError, match="3650"):  # the library's own check, not only the CLI's
        make_certificates(tmp_path / "more", "alice", days=MAX_CERT_DAYS + 1)
    assert not (tmp_path / "more").exists()


# -- key sizes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["demo"],
        ["demo", "secure-sum"],
        ["keyword", "--audio", "x.wav"],
        ["bench", "primitives"],
        ["bench", "crypto"],
    ],
)
def test_huge_keys_are_refused_at_once(capsys, argv):
    out = one_line_error(
        capsys, [*argv, "--key-bits", "100000"], "above 8192 bits", "--allow-large-keys"
    )
    assert out == ""


@pytest.mark.parametrize("argv", [["demo"], ["demo", "forward"], ["keyword", "--audio", "x.wav"]])
def test_too_small_keys_name_the_real_minimum_and_no_warning_comes_first(capsys, argv):
    out = one_line_error(capsys, [*argv, "--key-bits", "128", "--insecure"], "256 bits")
    assert "alpha_bits" not in out and "INSECURE" not in out


def test_small_keys_without_insecure_and_odd_sizes(capsys):
    out = one_line_error(capsys, ["bench", "lanes", "--key-bits", "1024"], "add --insecure")
    assert out == ""  # nothing ran
    out = one_line_error(
        capsys, ["demo", "--key-bits", "1025", "--insecure"], "even number of bits"
    )
    assert out == ""


def test_a_config_file_bounds_key_sizes_too(tmp_path):
    from smc_hmm.errors import ConfigError
    from smc_hmm.runtime import load_config

    path = tmp_path / "parties.toml"
    path.write_text('[run]\nprotocol = "secure_sum"\nkey_bits = 100000\n')
    with pytest.raises(ConfigError, match="run.allow_large_keys = true"):
        load_config(path)


def test_without_a_terminal_each_step_says_what_it_does(capsys):
    """A pipe hides rich's spinner: key generation and the run each print one line."""
    assert main(["demo", "secure-sum", *SMALL, "--length", "2"]) == 0
    err = capsys.readouterr().err
    assert "smc-hmm: generating a 1024-bit Paillier key pair ..." in err
    assert "smc-hmm: running the secure sum" in err


# -- the keyword demo -------------------------------------------------------------------------


def test_demo_prints_one_line_per_utterance_and_refuses_more_than_it_holds(capsys):
    argv = ["demo", "keyword", *SMALL, "--utterances", "2", "--frames", "12"]
    assert main([*argv, "--models", "full"]) == 0
    lines = capsys.readouterr().out.splitlines()
    per_utterance = [line for line in lines if line.startswith("utterance ")]
    assert len(per_utterance) == 2, lines
    for line in per_utterance:
        assert len(line) > 80 and line == line.rstrip()
        assert "Alice hears" in line and "rounds" in line
    assert not any(line.startswith(("argmax", "rounds")) for line in lines)
    out = one_line_error(capsys, ["demo", *SMALL, "--utterances", "251"], "250", "--utterances")
    assert "INSECURE" not in out


# -- smc-hmm cost: every number first -----------------------------------------------------------


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--bits", "-1"], "even number of bits"),
        (["--bits", "0"], "256 bits"),
        (["--bits", "100"], "256 bits"),
        (["--bits", "16384"], "--allow-large-keys"),
        (["--latency-ms", "nan"], "--latency-ms must be a finite number"),
        (["--latency-ms", "-1"], "--latency-ms must be a finite number"),
        (["--bandwidth-mbps", "nan"], "--bandwidth-mbps must be a finite number"),
        (["--bandwidth-mbps", "0"], "--bandwidth-mbps must be a finite number"),
        (["--input-scale", "inf"], "--input-scale must be a finite number"),
    ],
)
def test_cost_checks_every_number_before_printing_anything(capsys, flags, fragment):
    report = "docs/bench-keyword-diag.json"  # any file: the numbers are checked first
    assert one_line_error(capsys, ["cost", report, *flags], fragment) == ""


# -- bench compare ----------------------------------------------------------------------------


def test_bench_compare_labels_no_baseline_when_tno_is_skipped(tmp_path):
    out = tmp_path / "compare.json"
    argv = ["bench", "compare", "--key-bits", "512", "--insecure", "--bits", "8", "--batch", "2"]
    argv += ["--garbled-batches", "2"]
    assert main([*argv, "--repeats", "1", "--argmax", "0", "--no-tno", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    single = next(r for r in rows if r["name"].endswith("k=1"))
    assert single["baseline"] is None
    assert "TNO: 1 call" not in single["note"] and "TNO skipped" in single["note"]


@pytest.mark.parametrize("argv", [["release"], ["release", "hmm"], ["release", "trace"]])
def test_release_help_points_to_its_guide(capsys, argv):
    assert main([*argv, "--help"]) == 0
    assert "docs/dp-release.md" in " ".join(capsys.readouterr().out.split())


def test_numbers_are_reported_as_the_user_wrote_them(capsys):
    """'--eps 1e400' is not 'got inf', and a numpy value is shown as a
    plain one, not 'np.str_('x')'."""
    import numpy as np

    from smc_hmm.cli import main
    from smc_hmm.dp.params import check_epsilon
    from smc_hmm.errors import PrivacyParameterError

    assert main(["release", "hmm", "--data", ".", "--eps", "1e400"]) == 2
    err = capsys.readouterr().err
    assert "1e400 is beyond the range" in err and "inf" not in err
    with pytest.raises(PrivacyParameterError, match=r"got 'x'$"):
        check_epsilon(np.str_("x"))
    with pytest.raises(PrivacyParameterError, match=r"got -1.0$"):
        check_epsilon(np.float64(-1))


def test_a_certs_folder_without_a_client_certificate_says_what_to_do(tmp_path):
    """Not 'holds 0 client certificates (-)': what is missing and how to make it."""
    from smc_hmm.certs import make_certificates
    from smc_hmm.errors import ConfigError
    from smc_hmm.runtime.client import client_tls

    make_certificates(tmp_path / "certs", parties=["bob"])
    with pytest.raises(ConfigError, match="no client certificate: make one with smc-hmm certs"):
        client_tls(tmp_path / "certs")


# -- demo --json on a failed write --------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["forward"],
        ["secure-sum"],
        ["keyword", "--utterances", "1", "--frames", "8"],
    ],
)
def test_a_demo_that_cannot_write_its_json_says_so_in_one_line(argv, capsys):
    """``--json /dev/full`` (a full disk): one line naming the file and exit 2, never a
    traceback."""
    if not Path("/dev/full").exists():
        pytest.skip("this system has no /dev/full")
    code = main(["demo", *argv, "--key-bits", "512", "--insecure", "--json", "/dev/full"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot write /dev/full" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "bench,option,value",
    [
        ("forward", "--states", "100000"),
        ("forward", "--states", "0"),
        ("forward", "--symbols", "1000000"),
        ("forward", "--length", "0"),
        ("dphmm", "--grid", "100000"),
        ("dphmm", "--steps", "0"),
        ("crypto", "--batch", "100000000"),
        ("crypto", "--terms", "0"),
        ("eigenvector", "--cols", "10000000"),
        ("keyword", "--utterances", "5000"),
        ("keyword", "--words", "11"),
        ("keyword", "--frames", "100000"),
        ("keyword", "--streams", "0"),
        ("keyword", "--naive-frames", "1000000"),
        ("speaker", "--frames", "0"),
        ("speaker", "--utterances", "100000"),
        ("serve", "--clients", "100000"),
        ("serve", "--hostile-count", "0"),
        ("serve", "--models", "11"),
        ("aggregate", "--owners", "1"),
        ("aggregate", "--splits", "100000000"),
        ("match", "--recordings", "0"),
        ("match", "--extrapolate", "100000000000"),
        ("spot", "--recordings", "1000"),
        ("spot", "--frames", "0"),
        ("compare", "--batch", "0"),
        ("lanes", "--terms", "100000000"),
    ],
)
def test_bench_sizes_are_bounded_while_parsing(capsys, bench, option, value):
    """bench forward --states 100000 ended in a MemoryError traceback after asking for
    74.5 GiB; --states 0 in a message about an empty startprob; the grid world and the
    crypto rows took any size too.  Each is refused while the command line is parsed,
    naming the option and its range (exit 2, nothing ran)."""
    try:
        code = main(["bench", bench, "--key-bits", "512", "--insecure", option, value])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}: must be an integer in [" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "bench,option,value,needle",
    [
        ("lmgmm-synthetic", "--runs", "0", "must be an integer in ["),
        ("lmgmm-synthetic", "--lam", "nan", "must be a number in ["),
        ("lmgmm-speaker", "--jobs", "100000", "must be an integer in ["),
        ("dp-keyword", "--releases", "0", "must be an integer in ["),
        ("dp-keyword", "--audit-eps", "inf", "must be a number in ["),
        ("serve", "--hostile-pause", "-1", "must be a number in ["),
        ("serve", "--max-seconds", "1e308", "must be a number in ["),
        ("primitives", "--min-seconds", "0", "must be a number in ["),
    ],
)
def test_bench_numbers_without_key_options_are_bounded_while_parsing(
    capsys, bench, option, value, needle
):
    """The remaining benches' sizes, seeds, seconds and rates: one line naming the option
    and its range, exit 2, nothing ran."""
    try:
        code = main(["bench", bench, option, value])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}: {needle}" in err and "Traceback" not in err


def test_seed_and_insecure_warnings_go_to_stderr(tmp_path, capsys):
    """release hmm --seed and a demo with --insecure keys wrote their warnings on standard
    output, in front of the JSON: standard output now carries the result alone."""
    data = tmp_path / "d.json"
    data.write_text(json.dumps([[0, 1, 2, 1, 0], [2, 2, 1, 0, 0]] * 5))
    argv = ["release", "hmm", "--data", str(data), "--eps", "1", "--max-length", "10",
            "--symbols", "3", "--states", "2", "--seed", "3",
            "--out", str(tmp_path / "m.npz")]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["epsilon"] == 1.0
    assert "--seed" in captured.err and "INSECURE" in captured.err


@pytest.mark.parametrize(
    "argv,fragments",
    [
        (["keyword", *SMALL, "--audio", "WAV", "--models", "missing.npz"],
         ("--models missing.npz: no such model file",)),
        (["match", *SMALL, "--audio", "WAV", "--seconds", "0"], ("--seconds must be",)),
        (["match", *SMALL, "--audio", "WAV", "--start", "-1"], ("--start must be",)),
        (["release", "hmm", "--data", "WAV", "--eps", "1e308", "--max-length", "5",
          "--symbols", "3", "--out", "OUT"], ("--eps", "above 1000")),
    ],
)  # fmt: skip
def test_options_are_named_in_their_refusals(tmp_path, capsys, argv, fragments):
    """Low new-user defects: a missing --models file was "not diag, full or a model
    file", match --seconds 0 named no option, --eps 1e308 was reported as inf."""
    wav = _wav(tmp_path / "s.wav")
    argv = [str(wav) if a == "WAV" else str(tmp_path / "o.npz") if a == "OUT" else a
            for a in argv]  # fmt: skip
    assert one_line_error(capsys, argv, *fragments) == ""
