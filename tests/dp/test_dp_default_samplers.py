"""Which sampler every DP mechanism of the API and the CLI uses by default.

The rule (docs/dp-layer.md, "Samplers"): Laplace and geometric noise comes from OpenDP's
hardened samplers; the float sampler only when asked for (warned) or on an INSECURE
seeded stream, which OpenDP cannot honour. The K-norm mechanism (DPHMM, the aggregate
protocol's L2 noise) is the stated exception: CSPRNG randomness, floating-point output.
"""

import json

import numpy as np
import pytest

from smc_hmm.dp import federated, mechanisms
from smc_hmm.dp.baum_welch import dp_baum_welch, dp_em_step, dp_expected_counts
from smc_hmm.dp.classifier import l2_noise
from smc_hmm.dp.dphmm import DPHMM
from smc_hmm.dp.knorm import ConvexBody, KNormMechanism
from smc_hmm.dp.mechanisms import (
    GeometricMechanism,
    LaplaceMechanism,
    TruncatedGeometricMechanism,
    default_sampler,
    geometric,
    laplace,
)
from smc_hmm.dp.policy import complete_graph
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import PrivacyParameterError
from smc_hmm.hmm import DiscreteHMM

SKELETON = DiscreteHMM([0.5, 0.5], [[0.8, 0.2], [0.3, 0.7]], [[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])
SEQUENCES = [np.array([0, 1, 2, 2, 1]), np.array([2, 2, 0]), np.array([1, 0, 0, 1])]


def test_the_default_sampler_rule():
    assert default_sampler(None) == "opendp"
    assert default_sampler(DPRandom.system()) == "opendp"
    assert default_sampler(DPRandom.insecure_seeded(1)) == "float"
    assert sorted(mechanisms.HARDENED_SAMPLERS) == ["opendp", "snapping"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: LaplaceMechanism(1.0, 2.0),
        lambda: GeometricMechanism(1.0),
        lambda: TruncatedGeometricMechanism(1.0, 0, 5),
    ],
    ids=["laplace", "geometric", "truncated-geometric"],
)
def test_mechanisms_default_to_opendp(make):
    mechanism = make()
    assert mechanism.sampler == "opendp"
    value = np.full(4, 2.0) if isinstance(mechanism, LaplaceMechanism) else np.full(4, 2)
    release = mechanism.release(value)
    assert release.sampler == "opendp" and release.hardened
    assert "opendp" in release.details and release.randomness == "OpenDP internal CSPRNG"


def test_one_shot_helpers_default_to_opendp():
    assert laplace(1.0, 1.0, 1.0).sampler == "opendp"
    assert geometric(3, 1.0).sampler == "opendp"


def test_a_seeded_stream_uses_the_float_sampler_and_says_insecure():
    release = LaplaceMechanism(1.0, 1.0, rng=DPRandom.insecure_seeded(3)).release(0.0)
    assert release.sampler == "float" and release.insecure and not release.hardened
    with pytest.raises(PrivacyParameterError, match="cannot use a seeded rng"):
        LaplaceMechanism(1.0, 1.0, sampler="opendp", rng=DPRandom.insecure_seeded(3))


@pytest.mark.parametrize("mode", ["every", "last"])
def test_dp_baum_welch_defaults_to_opendp(mode):
    result = dp_baum_welch(SKELETON, SEQUENCES, 1.0, max_length=5, mode=mode, n_iter=2)
    assert result.releases and all(r.sampler == "opendp" and r.hardened for r in result.releases)
    step = dp_em_step(SKELETON, SEQUENCES, 1.0, max_length=5)
    assert all(r.sampler == "opendp" for r in step.releases)
    noisy = dp_expected_counts(SKELETON, SEQUENCES, 1.0, max_length=5)
    assert all(r.sampler == "opendp" for r in noisy.releases.values())


@pytest.fixture
def laplace_spy(monkeypatch):
    """Records the sampler of every Laplace mechanism the federated layer builds."""
    seen = []

    class Spy(LaplaceMechanism):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen.append(self.sampler)

    monkeypatch.setattr(federated, "LaplaceMechanism", Spy)
    return seen


def test_federated_and_dp_sum_noise_default_to_opendp(laplace_spy):
    from protocols.aggregate import SumParams, count_noise

    noise = federated.laplace_vector(np.array([0.0, 1.5, 1.5, 3.0]))
    assert noise[0] == 0 and laplace_spy == ["opendp", "opendp"]
    laplace_spy.clear()
    federated.federated_dp_baum_welch(SKELETON, [SEQUENCES[:2], SEQUENCES[2:]], 1.0,
                                      max_length=5, n_iter=2)  # fmt: skip
    assert laplace_spy and set(laplace_spy) == {"opendp"}
    laplace_spy.clear()
    count_noise(SumParams(length=3, noise_scales=(1.0, 1.0, 2.0)))  # the dp_sum protocol's
    assert laplace_spy == ["opendp", "opendp"]


def test_knorm_defaults_to_the_csprng_its_stated_exception():
    body = ConvexBody.ball("l2", 2)
    release = KNormMechanism(body, 1.0).release(np.zeros(2))
    assert release.randomness == "os.urandom CSPRNG" and release.hardened is False
    mech = DPHMM(np.full((3, 3), 1 / 3), np.arange(3.0)[:, None], complete_graph(3), 1.0)
    assert mech.randomness == "os.urandom CSPRNG"
    seeded = DPHMM(
        np.full((3, 3), 1 / 3), np.arange(3.0)[:, None], complete_graph(3), 1.0,
        rng=DPRandom.insecure_seeded(2),
    )  # fmt: skip
    assert "INSECURE" in seeded.randomness


def test_aggregate_l2_noise_defaults_to_the_csprng(monkeypatch):
    """The aggregate protocol's K-norm noise builds no numpy generator by default."""

    def refuse(*args, **kwargs):
        raise AssertionError("a numpy generator was built for DP noise")

    monkeypatch.setattr(np.random, "default_rng", refuse)
    monkeypatch.setattr(np.random, "PCG64", refuse)
    eta = l2_noise(4, 100, 1.0, 0.1)
    assert eta.shape == (4,) and np.all(np.isfinite(eta))


def test_cli_defaults(tmp_path):
    """`release hmm` without sampler flags is OpenDP; `release trace` draws from the CSPRNG."""
    from smc_hmm.cli import main
    from smc_hmm.hmm.io import save_models

    data = tmp_path / "d.json"
    data.write_text(json.dumps([s.tolist() for s in SEQUENCES]))
    out = tmp_path / "m.npz"
    argv = ["release", "hmm", "--data", str(data), "--eps", "1", "--max-length", "5"]
    assert (
        main([*argv, "--symbols", "3", "--out", str(out), "--json", str(tmp_path / "s.json")]) == 0
    )
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["sampler"] == "opendp" and summary["hardened_sampler"] is True
    chain = tmp_path / "chain.npz"
    save_models(chain, [SKELETON], ["chain"])
    (tmp_path / "t.json").write_text("[0, 1, 1]")
    result = tmp_path / "r.json"
    trace = ["release", "trace", "--model", str(chain), "--trace", str(tmp_path / "t.json")]
    assert main([*trace, "--graph", "complete", "--json", str(result)]) == 0
    released = json.loads(result.read_text())
    assert released["randomness"] == "os.urandom CSPRNG" and released["insecure"] is False
    assert released["hardened_sampler"] is False and "floating point" in released["sampler_note"]
