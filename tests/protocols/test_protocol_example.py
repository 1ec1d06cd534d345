"""examples/secure_forward.py: the in-process run and its two-party configuration.

The configuration written by ``--setup`` names the registered ``forward``
protocol and the files holding Alice's observations and Bob's models; here
both parties run with :func:`smc_hmm.runtime.run_party` in two threads over
TCP with mutual TLS on loopback (the same code path as ``smc-hmm party`` /
``launch``, minus the process boundary), and Alice's output is compared with
the plaintext log P the setup wrote.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from party_support import run_parties_in_threads

from smc_hmm.errors import ConfigError
from smc_hmm.runtime import load_config, run_party

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "secure_forward.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("secure_forward_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_in_process_run_matches_plaintext(example, capsys):
    code = example.main(["--key-bits", "1024", "--insecure", "--steps", "4"])
    out = capsys.readouterr().out
    assert code == 0  # main returns 1 if any relative error exceeds 1e-6
    assert "discrete HMMs: T = 4" in out and "Gaussian HMMs: T = 4" in out
    assert "cost per party" in out and "largest relative error in log P" in out
    assert max(len(line) for line in out.splitlines()) <= 88  # readable in a log


def test_small_keys_need_insecure(example):
    with pytest.raises(SystemExit):
        example.main(["--key-bits", "1024"])


@pytest.mark.parametrize("kind", ["discrete", "gaussian"])
def test_setup_runs_as_two_parties_over_mutual_tls(example, tmp_path, kind):
    assert (
        example.main(
            [
                "--setup",
                str(tmp_path),
                "--kind",
                kind,
                "--steps",
                "5",
                "--key-bits",
                "512",
                "--insecure",
            ]
        )
        == 0
    )
    config = load_config(tmp_path / "parties.toml")
    assert config.protocol == "forward"
    expected = json.loads((tmp_path / "expected.json").read_text())
    views = tmp_path / "views"
    results, errors = run_parties_in_threads(
        config, ("alice", "bob"), join=60, options=lambda name: {"views": views}
    )
    assert not errors
    got = results["alice"]["output"]
    assert np.allclose(got, expected, rtol=1e-6, atol=0)
    assert results["bob"]["output"]["ciphertexts"] == [len(expected)]  # E(log P) stays with Bob
    assert results["bob"]["cost"]["ops"]["decrypt"] == 0
    # smc-hmm party --views: each process writes what it received
    seen = {n: json.loads((views / f"{n}.json").read_text()) for n in ("alice", "bob")}
    assert seen["alice"]["holds_key"] and not seen["bob"]["holds_key"]
    assert any(
        m["fields"].get("kind") == "decrypted"
        for m in seen["alice"]["messages"]
        if isinstance(m["fields"], dict)
    )


def test_unknown_protocol_keys_are_refused(example, tmp_path):
    example.main(["--setup", str(tmp_path), "--steps", "2", "--key-bits", "512", "--insecure"])
    config = load_config(tmp_path / "parties.toml")
    config.params["blind"] = 3
    with pytest.raises(ConfigError, match="unknown forward parameters"):
        run_party("bob", config)
