"""``[compute] workers`` gives a ``smc-hmm party`` process its local lanes, ``[compute]
randomizers`` a key holder's offline phase."""

from __future__ import annotations

import numpy as np
import pytest

from smc_hmm.errors import ConfigError
from smc_hmm.runtime import launch, load_config, write_config
from smc_hmm.runtime.party import _local_lanes, _offline_count


def _config(tmp_path, compute):
    path = write_config(
        tmp_path / "parties.toml",
        "secure_sum",
        {"alice": {"kind": "alice"}, "bob": {"kind": "bob", "vector": [1.0]}},
        params={"length": 1, "contributors": ["bob"]},
        key_bits=1024,
        insecure=True,
        compute=compute,
    )
    return load_config(path)


def test_workers_give_a_party_local_lanes(tmp_path):
    with _local_lanes(_config(tmp_path, {"workers": 2})) as compute:
        assert compute.parallel and compute.workers == 2
    with _local_lanes(_config(tmp_path, None)) as compute:
        assert not compute.parallel


@pytest.mark.parametrize("workers", [0, "two", True])
def test_bad_workers_are_a_config_error(tmp_path, workers):
    config = _config(tmp_path, {"workers": 1})
    config.compute["workers"] = workers
    with pytest.raises(ConfigError, match="workers"):
        _local_lanes(config)


@pytest.mark.parametrize("count", [-1, "many", True, 10**9])
def test_bad_randomizer_counts_are_a_config_error(tmp_path, count):
    config = _config(tmp_path, {"randomizers": 1})
    config.compute["randomizers"] = count
    with pytest.raises(ConfigError, match="randomizers"):
        _offline_count(config)


@pytest.mark.slow
def test_a_key_holder_precomputes_its_randomizers_before_its_role(tmp_path):
    """``[compute] randomizers``: Alice (the key holder) fills her pool in an ``offline``
    phase over her lanes, then runs the protocol as before; Bob holds no key, so he has
    no offline phase."""
    from smc_hmm.data import load_bundled_models, load_test_utterances
    from smc_hmm.hmm import log_likelihood
    from smc_hmm.hmm.io import save_models

    models, labels = load_bundled_models("diag")
    save_models(tmp_path / "keywords.npz", models[:3], labels=labels[:3])
    frames = load_test_utterances()[0].features[:8]
    np.save(tmp_path / "frames.npy", frames)
    path = write_config(
        tmp_path / "parties.toml",
        "keyword",
        {
            "alice": {"kind": "alice", "features": "frames.npy"},
            "bob": {"kind": "bob", "models": "keywords.npz"},
        },
        key_bits=1024,
        insecure=True,
        compute={"workers": 2, "randomizers": 300},
        timeout=60,
        connect_timeout=30,
    )
    result = launch(path, timeout=240)
    plain = int(np.argmax([log_likelihood(m, frames) for m in models[:3]]))
    assert result["alice"]["keyword"] == labels[plain]
    phases = {name: party["phases"] for name, party in result.cost.parties.items()}
    assert phases["alice"]["offline"]["entries"] == 1
    assert "offline" not in phases["bob"]
    assert _offline_count(_config(tmp_path, None)) == 0
