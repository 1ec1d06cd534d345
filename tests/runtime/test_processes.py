"""parties.toml, run_party (one party per thread over TCP + mTLS) and the multi-process
launcher on loopback."""

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from party_support import run_parties_in_threads, write_secure_sum_config

from smc_hmm.certs import make_certificates
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    PartyProcessError,
    PeerTimeoutError,
    TransportError,
)
from smc_hmm.runtime import (
    config_from_dict,
    launch,
    load_config,
    run_party,
)

VECTORS = {
    "alice": [1.5, 2.0, -3.25],
    "bob": [10.0, 20.0, 30.0],
    "trent": [0.5, 0.5, 0.5],
    "carol": [-1.0, 0.0, 1.0],
}


def write_config(tmp_path, names=("alice", "bob", "trent"), **kwargs):
    return write_secure_sum_config(tmp_path, {n: VECTORS[n] for n in names}, **kwargs)


def _expected(names):
    return np.sum([VECTORS[n] for n in names], axis=0)


def test_run_party_in_threads_over_mutual_tls(tmp_path):
    names = ("alice", "bob", "carol", "trent")
    config = load_config(write_config(tmp_path, names))
    before = set(threading.enumerate())
    results, errors = run_parties_in_threads(
        config, names, join=60, options=lambda name: {"result_path": tmp_path / f"{name}.out.json"}
    )
    assert not errors
    assert np.allclose(results["alice"]["output"], _expected(names), atol=1e-4)
    saved = json.loads((tmp_path / "alice.out.json").read_text())
    assert saved["ok"] and saved["output"] == results["alice"]["output"]
    assert saved["cost"]["ops"]["decrypt"] == 3 and saved["cost"]["rounds"] == 3
    assert results["carol"]["cost"]["ops"]["encrypt"] == 3
    assert set(threading.enumerate()) == before


def test_a_party_with_a_certificate_from_another_ca_fails_every_party_typed(tmp_path):
    path = write_config(tmp_path, connect_timeout=2)
    rogue = make_certificates(tmp_path / "rogue", ["bob"])
    text = path.read_text()
    text = text.replace('cert = "certs/bob.pem"', f'cert = "{rogue.certs["bob"]}"')
    text = text.replace('key = "certs/bob.key"', f'key = "{rogue.keys["bob"]}"')
    path.write_text(text)
    config = load_config(path)
    before = set(threading.enumerate())
    # any exception is caught: its type is what is checked
    _, errors = run_parties_in_threads(config, config.parties, join=30, catch=Exception)
    assert set(errors) == {"alice", "bob", "trent"}
    for name, e in errors.items():
        # AuthenticationError, PeerDisconnectedError, PeerTimeoutError, ...: all typed
        assert isinstance(e, TransportError), (name, repr(e))
    assert set(threading.enumerate()) == before


@pytest.mark.slow
def test_launcher_runs_three_processes_on_loopback(tmp_path):
    path = write_config(tmp_path)
    result = launch(path, timeout=60)
    assert np.allclose(result["alice"], _expected(("alice", "bob", "trent")), atol=1e-4)
    assert result["bob"] is None and result["trent"] is None
    assert result.returncodes == {"alice": 0, "bob": 0, "trent": 0}
    assert len(set(result.pids.values())) == 3
    assert result.cost.rounds == 3 and result.cost.messages_total == 4
    assert result.cost.meta["mode"] == "processes"
    assert json.loads(json.dumps(result.to_dict()))["cost"]["totals"]["rounds"] == 3


@pytest.mark.slow
def test_launcher_pins_parties_to_their_cpus(tmp_path):
    """``affinity``: each pinned party process runs on its CPUs (a wrapper records the
    affinity its process has once started, then runs the party)."""
    import os

    cpu = min(os.sched_getaffinity(0))
    seen = tmp_path / "affinity"
    seen.mkdir()
    wrapper = tmp_path / "python"
    wrapper.write_text(
        "#!/bin/sh\nsleep 0.5\n"
        f'{sys.executable} -c "import os; print(sorted(os.sched_getaffinity(0)))" '
        f'> {seen}/$$\nexec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    path = write_config(tmp_path)
    result = launch(path, timeout=60, python=str(wrapper), affinity={"alice": [cpu]})
    assert np.allclose(result["alice"], _expected(("alice", "bob", "trent")), atol=1e-4)
    recorded = {int(f.name): f.read_text().strip() for f in seen.iterdir()}
    assert recorded[result.pids["alice"]] == str([cpu])
    everyone = str(sorted(os.sched_getaffinity(0)))
    assert recorded[result.pids["bob"]] == recorded[result.pids["trent"]] == everyone
    with pytest.raises(InvalidInputError, match="not a party"):
        launch(path, timeout=60, affinity={"mallory": [cpu]})
    with pytest.raises(InvalidInputError, match="CPUs"):
        launch(path, timeout=60, affinity={"alice": [10_000]})


@pytest.mark.slow
def test_launcher_reports_the_root_cause_and_leaves_no_process(tmp_path):
    path = write_config(tmp_path, bob_input="[1, 2")  # bob cannot read his input
    t0 = time.monotonic()
    with pytest.raises(PartyProcessError) as info:
        launch(path, timeout=60, grace=1.0)
    assert time.monotonic() - t0 < 30
    assert info.value.party == "bob" and info.value.error_type == "ConfigError"
    assert info.value.returncode == 2
    assert _alive(str(path)) == []


def _alive(pattern):
    """Processes whose command line contains ``pattern``."""
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return out.split()


@pytest.mark.slow
def test_launcher_kills_everything_at_the_deadline(tmp_path):
    path = write_config(tmp_path)
    marker = str(tmp_path / "hung.marker")
    # a stand-in interpreter that ignores the party command and hangs
    hung = tmp_path / "hung-python"
    hung.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import time; time.sleep(60)' {marker}\n")
    hung.chmod(0o755)
    t0 = time.monotonic()
    with pytest.raises(PeerTimeoutError, match="did not finish"):
        launch(path, timeout=1.5, python=str(hung))
    assert time.monotonic() - t0 < 10
    assert _alive(marker) == []


def _base(**overrides):
    data = {
        "run": {"protocol": "secure_sum", "key_bits": 512, "insecure": True},
        "protocol": {"length": 2},
        "parties": {"alice": {"port": 1}, "bob": {"port": 2}, "trent": {"port": 3}},
    }
    for key, value in overrides.items():
        data[key] = value
    return data


@pytest.mark.parametrize(
    "bad,match",
    [
        (_base(run={"key_bits": 512}), "protocol"),
        (_base(run={"protocol": "secure_sum", "key_bits": 512}), "insecure"),
        (_base(run={"protocol": "secure_sum", "timeout": "soon"}), "timeout"),
        (_base(run={"protocol": "secure_sum", "colour": 1}), "unknown keys"),
        (_base(parties={"alice": {"port": 1}}), "two"),
        (_base(parties={"alice": {"port": 1}, "bob": {"port": 1}}), "used twice"),
        (_base(parties={"alice": {"port": 0}, "bob": {"port": 2}}), "port"),
        (_base(parties={"alice": {}, "bob": {"port": 2}}), "port"),
        (_base(extra={}), "unknown sections"),
        (_base(tls={"ca": "x"}), "tls"),
    ],
)
def test_bad_configurations_are_config_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict(bad)


def test_config_files_and_party_construction_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[run\n")
    with pytest.raises(ConfigError, match="TOML"):
        load_config(tmp_path / "bad.toml")
    config = config_from_dict(_base(), tmp_path / "p.toml")
    assert config.parties["alice"].address == ("127.0.0.1", 1)
    with pytest.raises(ConfigError, match="no party"):
        run_party("mallory", config)
    with pytest.raises(ConfigError, match="mutual TLS"):
        run_party("bob", config)  # no certificates configured
    bad_role = config_from_dict(
        _base(parties={"alice": {"port": 1, "role": "eve"}, "bob": {"port": 2}}),
        tmp_path / "p.toml",
    )
    with pytest.raises(ConfigError, match="no role 'eve'"):
        run_party("alice", bad_role)
    unknown_protocol = config_from_dict(
        _base(run={"protocol": "teleport", "key_bits": 512, "insecure": True}), tmp_path / "p.toml"
    )
    with pytest.raises(ConfigError, match="unknown protocol"):
        run_party("alice", unknown_protocol)
