"""A protocol plugin that lives entirely in tests/: run in-process and as two OS processes
over mutual TLS, with no edit to smc_hmm/, protocols/ or parties/ (the goal: protocols
are plugins; docs/adding-a-protocol.md follows these steps)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from transcript_harness import assert_same_transcripts

from smc_hmm.runtime import launch, run_protocol, write_config

HERE = Path(__file__).resolve().parent
REF = "toy_protocol:PROTOCOL"


def test_in_process_by_reference(keypair_512):
    result = run_protocol(
        REF,
        {"length": 3},
        {"alice": ("alice", [1, 2, 3]), "bob": ("bob", [10, -20, 30])},
        keys={"alice": keypair_512},
        min_key_bits=512,
    )
    assert result["alice"] == [11, -18, 33]
    assert result.cost.meta["protocol"] == "toy"


def test_transcripts(keypair_512):
    from toy_protocol import Params

    def run(inputs, wrap):
        a, b = inputs
        run_protocol(
            REF,
            {"length": 3},
            {"alice": ("alice", a), "bob": ("bob", b)},
            keys={"alice": keypair_512},
            min_key_bits=512,
            wrap_transport=wrap,
        )

    assert_same_transcripts(
        run,
        [([1, 2, 3], [0, 0, 0]), ([2**19, 0, -5], [7, 7, 7])],
        Params().messages(),
        keys=[keypair_512],
    )


@pytest.mark.slow
def test_two_processes_over_mutual_tls(tmp_path):
    np.save(tmp_path / "values.npy", np.array([1.0, 2.0, 3.0]))
    config = write_config(
        tmp_path / "parties.toml",
        REF,
        {
            "alice": {"kind": "alice", "values": "values.npy"},
            "bob": {"kind": "bob", "offset": [5, 5, -5]},
        },
        params={"length": 3},
        key_bits=512,
        insecure=True,
        timeout=20,
        connect_timeout=20,
    )
    env = dict(os.environ)  # the plugin module is found on the children's import path
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    result = launch(config, timeout=120, env=env)
    assert result["alice"] == [6, 7, -2]
    assert result["bob"] is None
    assert set(result.pids) == {"alice", "bob"}
    assert result.cost.parties["alice"]["ops"]["decrypt"] == 3
