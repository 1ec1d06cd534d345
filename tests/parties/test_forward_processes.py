"""The secure forward algorithm from parties.toml: Alice's observation file, Bob's model
file, one party per thread over TCP + mutual TLS (run_party), equal to the plaintext."""

import numpy as np
import pytest
from party_support import run_parties_in_threads

from demos.forward import casino_hmm, weather_gaussian_hmm
from smc_hmm.certs import make_certificates
from smc_hmm.errors import ConfigError
from smc_hmm.hmm import log_likelihood
from smc_hmm.hmm.io import load_models, save_models
from smc_hmm.runtime import load_config, run_party


def write_forward_config(tmp_path, ports, models, obs):
    make_certificates(tmp_path / "certs", ["alice", "bob"])
    np.save(tmp_path / "obs.npy", obs)
    save_models(tmp_path / "models.npz", models, labels=[f"m{i}" for i in range(len(models))])
    pa, pb = ports(2)
    (tmp_path / "forward.toml").write_text(f"""
[run]
protocol = "forward"
timeout = 20
connect_timeout = 10
key_bits = 1024
insecure = true

[protocol]
blind_nats = 16.0

[tls]
ca_cert = "certs/ca.pem"

[parties.alice]
host = "127.0.0.1"
port = {pa}
cert = "certs/alice.pem"
key = "certs/alice.key"
observations = "obs.npy"

[parties.bob]
host = "127.0.0.1"
port = {pb}
cert = "certs/bob.pem"
key = "certs/bob.key"
models = "models.npz"
""")
    return load_config(tmp_path / "forward.toml")


@pytest.mark.parametrize("make_model, length", [(casino_hmm, 12), (weather_gaussian_hmm, 6)])
def test_forward_from_config_over_mutual_tls(tmp_path, ports, make_model, length):
    model = make_model()
    obs, _ = model.sample(length, rng=np.random.default_rng(5))
    config = write_forward_config(tmp_path, ports, [model, model], obs)
    results, errors = run_parties_in_threads(config, ("alice", "bob"), join=120)
    assert not errors
    plain = log_likelihood(model, obs)
    assert results["alice"]["output"] == pytest.approx([plain, plain], rel=1e-9)
    # Bob's output file names what he holds, never a plaintext
    assert results["bob"]["output"]["ciphertexts"] == [2]
    assert results["bob"]["cost"]["ops"]["decrypt"] == 0


def test_model_files_round_trip_and_reject_bad_files(tmp_path, ports):
    models = [casino_hmm(), casino_hmm()]
    save_models(tmp_path / "m.npz", models, labels=["a", "b"])
    loaded, labels = load_models(tmp_path / "m.npz")
    assert labels == ["a", "b"]
    assert all(np.array_equal(a.emissionprob, b.emissionprob) for a, b in zip(models, loaded))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    from smc_hmm.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        load_models(tmp_path / "bad.npz")
    config = write_forward_config(tmp_path, ports, models, np.array([0, 1]))
    (tmp_path / "models.npz").write_bytes(b"junk")
    with pytest.raises(ConfigError):  # the model file is read before connecting
        run_party("bob", config)
