"""``[compute] workers`` gives a ``smc-hmm party`` process its local lanes."""

from __future__ import annotations

import pytest

from smc_hmm.errors import ConfigError
from smc_hmm.runtime import load_config, write_config
from smc_hmm.runtime.party import _local_lanes


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
