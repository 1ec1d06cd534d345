"""`smc-hmm launch` names the party whose failure came first, with its own error:
an unresolvable host or a taken port of one party, and a party that stalls."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from smc_hmm.errors import PartyProcessError
from smc_hmm.runtime import launch, load_config, write_config

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def _config(tmp_path, protocol="secure_sum", **run):
    parties = {"alice": {"vector": [1.0]}, "bob": {"vector": [2.0]}, "trent": {}}
    if protocol != "secure_sum":
        parties = {"alice": {}, "bob": {}}
    return write_config(
        tmp_path / "parties.toml",
        protocol,
        parties,
        params={"length": 1} if protocol == "secure_sum" else {},
        key_bits=512,
        insecure=True,
        connect_timeout=5,
        timeout=5,
        **run,
    )


def _retarget(path: Path, party: str, key: str, value) -> None:
    text = path.read_text()
    config = load_config(path)
    old = (
        f"{key} = {config.parties[party].port}"
        if key == "port"
        else f'{key} = "{config.parties[party].host}"'
    )
    block = text.index(f"[parties.{party}]")
    start = text.index(old, block)
    new = f"{key} = {value}" if key == "port" else f'{key} = "{value}"'
    path.write_text(text[:start] + new + text[start + len(old) :])


@pytest.mark.slow
def test_an_unresolvable_host_blames_its_party(tmp_path):
    path = _config(tmp_path)
    _retarget(path, "bob", "host", "no-such-host.invalid")
    with pytest.raises(PartyProcessError) as info:
        launch(path, timeout=60)
    assert info.value.party == "bob" and info.value.error_type == "EndpointError"


@pytest.mark.slow
def test_a_taken_port_blames_its_party_with_address_in_use(tmp_path):
    path = _config(tmp_path)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        _retarget(path, "bob", "port", taken.getsockname()[1])
        with pytest.raises(PartyProcessError) as info:
            launch(path, timeout=60)
    finally:
        taken.close()
    assert info.value.party == "bob" and info.value.error_type == "EndpointError"
    assert "in use" in info.value.message


@pytest.mark.slow
def test_a_stalled_party_is_blamed_not_its_last_warning(tmp_path, monkeypatch):
    # the launcher checks the protocol before it starts a process, so the plugin must be
    # importable here as well as in the party processes (PYTHONPATH below); it passed
    # only when another test of the same worker had put tests/plugins on sys.path
    monkeypatch.syspath_prepend(str(PLUGINS))
    path = _config(tmp_path, "stall_protocol:PROTOCOL")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PLUGINS), env.get("PYTHONPATH", "")])
    with pytest.raises(PartyProcessError) as info:
        launch(path, timeout=60, env=env, grace=2.0)
    assert info.value.party == "bob"
    assert "stalled" in info.value.message and "warning" not in info.value.message


def test_an_unknown_protocol_is_refused_before_any_process_starts(tmp_path, monkeypatch):
    """launch started all three party processes before each of them refused an unknown
    protocol; now the launcher refuses it (and bad parameters) first."""
    import subprocess

    from smc_hmm.errors import ConfigError

    path = _config(tmp_path)
    path.write_text(path.read_text().replace('protocol = "secure_sum"', 'protocol = "no_such"'))
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a) or None)
    with pytest.raises(ConfigError, match="unknown protocol 'no_such'"):
        launch(path, timeout=60)
    path = _config(tmp_path)
    path.write_text(path.read_text().replace("length = 1", "length = -3"))
    with pytest.raises(Exception, match="length"):
        launch(path, timeout=60)
    assert started == []
