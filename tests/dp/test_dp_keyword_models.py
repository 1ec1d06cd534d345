"""DP keyword models (smc_hmm.dp.keyword_models, zcdp, empirical_audit, keyword_release)
on small synthetic data: the accountant against OpenDP, the per-record sensitivities,
the guarantee, the empirical audit, and the released file in Alice's hands."""

import importlib.util
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from smc_hmm.dp import keyword_models as km
from smc_hmm.dp.evaluation.empirical_audit import audit_keyword_release, histogram_privacy_loss
from smc_hmm.dp.keyword_models import (
    RECORD_RULE,
    KeywordDesign,
    PublicReference,
    release_keyword_models,
)
from smc_hmm.dp.random import DPRandom
from smc_hmm.dp.zcdp import (
    GaussianMechanism,
    ZCDPAccountant,
    epsilon_from_rho,
    opendp_epsilon,
    rho_from_epsilon,
)
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    PrivacyBudgetError,
    PrivacyParameterError,
)
from smc_hmm.features import FeaturePipeline
from smc_hmm.hmm import GaussianHMM, log_likelihood

BASE = FeaturePipeline(n_mfcc=1, n_mels=1)  # 3 features per frame: the synthetic data's
REFERENCE = PublicReference(np.zeros(3), np.full(3, 1.5), "synthetic public reference")
DESIGN = KeywordDesign(n_states=3, record_bound=4.0, count_weight=4.0)


def _data(seed=0, per_label=60, test_per_label=10):
    """Three 'words': 3-state left-to-right 3-d Gaussian HMMs with distinct mean paths."""
    rng = np.random.default_rng(seed)
    paths = {
        "a": [(-2, 0, 1), (0, 0, 0), (2, 0, -1)],
        "b": [(0, -2, 0), (0, 2, 1), (2, 2, 0)],
        "c": [(2, -2, -1), (-2, -2, 0), (-2, 2, 1)],
    }
    trans = np.array([[0.7, 0.3, 0.0], [0.0, 0.7, 0.3], [0.0, 0.0, 1.0]])
    truth = {
        k: GaussianHMM([1.0, 0, 0], trans, np.array(p, float), np.full((3, 3), 0.3), "diag")
        for k, p in paths.items()
    }
    train = {
        k: [m.sample(int(rng.integers(6, 14)), rng)[0] for _ in range(per_label)]
        for k, m in truth.items()
    }
    test = [(m.sample(10, rng)[0], k) for k, m in truth.items() for _ in range(test_per_label)]
    return train, test


def _release(train, eps, design=DESIGN, seed=1, **kw):
    return release_keyword_models(
        train,
        eps,
        design=design,
        base_pipeline=kw.pop("base_pipeline", BASE),
        reference=REFERENCE,
        sampler="float",
        rng=DPRandom.insecure_seeded(seed),
        **kw,
    )


def _accuracy(release, test):
    hits = 0
    for x, label in test:
        frames = release.pipeline.standardise(x)
        scores = [log_likelihood(m, frames) for m in release.models]
        hits += release.labels[int(np.argmax(scores))] == label
    return hits / len(test)


# --- the accountant ------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [1e-4, 0.02, 0.185, 1.5, 50.0])
def test_conversion_equals_opendp_for_one_gaussian(rho):
    sigma = 1.0 / math.sqrt(2.0 * rho)
    assert epsilon_from_rho(rho, 1e-6) == pytest.approx(
        opendp_epsilon([(sigma, 1.0)], 1e-6), rel=1e-9
    )


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 10.0, 1e4])
def test_rho_from_epsilon_inverts_the_conversion_on_the_safe_side(eps):
    rho = rho_from_epsilon(eps, 1e-6)
    assert epsilon_from_rho(rho, 1e-6) <= eps
    assert epsilon_from_rho(rho, 1e-6) == pytest.approx(eps, rel=1e-9)
    # tighter than Bun and Steinke's eps = rho + 2 sqrt(rho ln(1/delta))
    assert rho + 2 * math.sqrt(rho * math.log(1e6)) > eps


@pytest.mark.parametrize("variances", ["unit", "tied", "state"])
@pytest.mark.parametrize("standardisation", ["dp", "public", "bundled"])
def test_release_accountant_equals_opendp_for_the_same_mechanism_sequence(
    variances, standardisation
):
    """The release's (eps, delta) -- our zCDP sum and conversion -- equals OpenDP's
    composition of the same Gaussian measurements, and stays within the request."""
    train, _ = _data(per_label=8)
    base = BASE if standardisation != "bundled" else BASE.fit_standardisation(train["a"])
    design = KeywordDesign(
        n_states=3, variances=variances, standardisation=standardisation, record_bound=4.0
    )
    out = _release(train, 3.0, design=design, base_pipeline=base)
    stages = 1 + (standardisation == "dp") + (variances != "unit")
    assert len(out.releases) == stages
    ours = epsilon_from_rho(math.fsum(r.rho for r in out.releases), 1e-6)
    theirs = opendp_epsilon([(r.sigma, r.sensitivity) for r in out.releases], 1e-6)
    assert out.epsilon == pytest.approx(ours, rel=1e-12)
    assert ours == pytest.approx(theirs, rel=1e-9)
    assert out.guarantee["opendp_epsilon"] == pytest.approx(theirs, rel=1e-12)
    assert out.epsilon <= 3.0 and theirs <= 3.0 * (1 + 1e-9)
    for r in out.releases:  # rho = Delta^2 / (2 sigma^2)
        assert r.rho == pytest.approx(r.sensitivity**2 / (2 * r.sigma**2), rel=1e-12)


def test_accountant_refuses_before_sampling():
    accountant = ZCDPAccountant(0.1)
    mech = GaussianMechanism(1.0, 1.0, sampler="float", rng=DPRandom.insecure_seeded(0))
    assert mech.rho == pytest.approx(0.5)
    with pytest.raises(PrivacyBudgetError):
        mech.release([1.0, 2.0], accountant=accountant)
    assert accountant.spent == 0.0 and accountant.history == ()
    small = GaussianMechanism(10.0, 1.0, sampler="float", rng=DPRandom.insecure_seeded(0))
    small.release([1.0], accountant=accountant, label="x")
    assert accountant.spent == pytest.approx(0.005)
    assert accountant.epsilon(1e-6) == pytest.approx(epsilon_from_rho(0.005, 1e-6))
    assert ZCDPAccountant.for_epsilon(1.0, 1e-6).total == pytest.approx(rho_from_epsilon(1.0, 1e-6))


def test_gaussian_mechanism_noise_and_samplers():
    from scipy import stats

    mech = GaussianMechanism(2.0, 1.0, sampler="float", rng=DPRandom.insecure_seeded(4))
    out = mech.release(np.zeros(4000))
    assert stats.kstest(out.value / 2.0, "norm").pvalue > 1e-3
    assert out.insecure and not out.value.flags.writeable
    hardened = GaussianMechanism(2.0, 1.0).release(np.zeros(2000))
    assert hardened.sampler == "opendp" and not hardened.insecure
    assert 1.8 < np.std(hardened.value) < 2.2
    with pytest.raises(PrivacyParameterError):
        GaussianMechanism(1.0, 1.0, rng=DPRandom.insecure_seeded(0))  # OpenDP cannot seed
    with pytest.warns(UserWarning, match="not hardened"):
        GaussianMechanism(1.0, 1.0, sampler="float")
    for bad in (0.0, -1.0, math.nan, math.inf, True, "1"):
        with pytest.raises(PrivacyParameterError):
            GaussianMechanism(bad, 1.0)
    with pytest.raises(PrivacyParameterError):
        mech.release([math.nan])
    with pytest.raises(PrivacyParameterError):
        rho_from_epsilon(1.0, 1.0)
    with pytest.raises(PrivacyParameterError):
        epsilon_from_rho(-1.0, 1e-6)


# --- the per-record bounds -------------------------------------------------------------------


class _Clean:
    """A mechanism stub that releases the clean value: records what each stage sums."""

    seen: list = []

    def __init__(self, sigma, sensitivity, sampler, rng):
        self.sigma, self.sensitivity = sigma, sensitivity

    def release(self, value, *, accountant=None, label=""):
        from smc_hmm.dp.zcdp import GaussianRelease

        _Clean.seen.append((label, np.array(value, dtype=float), self.sensitivity))
        return GaussianRelease(np.array(value, dtype=float), 0.0, self.sigma, 1.0, "clean", "")


def _stage_values(train, design, monkeypatch, base=BASE):
    _Clean.seen = []
    monkeypatch.setattr(km, "_mechanism", _Clean)
    km.release_keyword_models(train, 1.0, design=design, base_pipeline=base, reference=REFERENCE)
    return {label: (value, sens) for label, value, sens in _Clean.seen}


@pytest.mark.parametrize("remove", [0, 5])
def test_one_utterance_moves_each_stage_by_at_most_its_sensitivity(monkeypatch, remove):
    """Neighbours (one utterance removed, any length, even an outlier): the clean
    statistic of every stage moves by at most its declared L2 sensitivity."""
    train, _ = _data(per_label=10)
    train["b"][remove] = np.full((40, 3), 50.0)  # a long, extreme utterance
    neighbour = {**train, "b": train["b"][:remove] + train["b"][remove + 1 :]}
    fixed = BASE.fit_standardisation(train["a"])  # stage 1 conditioned on one pipeline
    for design, base in (
        (KeywordDesign(n_states=3, record_bound=4.0, count_weight=2.0), BASE),
        (KeywordDesign(n_states=3, record_bound=4.0, standardisation="bundled"), fixed),
    ):
        d = _stage_values(train, design, monkeypatch, base)
        d2 = _stage_values(neighbour, design, monkeypatch, base)
        first = "standardisation" if design.standardisation == "dp" else "state means"
        value, sensitivity = d[first]
        change = np.linalg.norm(value - d2[first][0])
        assert 0 < change <= sensitivity * (1 + 1e-12)
        if first == "state means":
            changed_rows = np.flatnonzero(np.any(value != d2[first][0], axis=1))
            assert list(changed_rows) == [1]  # label "b" only: parallel composition


@pytest.mark.parametrize("variances", ["tied", "state"])
def test_variance_statistic_moves_by_at_most_its_sensitivity(monkeypatch, variances):
    train, _ = _data(per_label=10)
    train["c"][0] = np.full((30, 3), -40.0)
    neighbour = {**train, "c": train["c"][1:]}
    design = KeywordDesign(n_states=3, variances=variances, variance_bound=2.0)
    means = {k: np.zeros((3, 3)) for k in train}  # the released means, the same for both
    counts = {k: 10.0 for k in train}
    values = []
    for data in (train, neighbour):
        _Clean.seen = []
        monkeypatch.setattr(km, "_mechanism", _Clean)
        stages = km._Stages(design, 1.0, "float", None)
        km._variances(stages, data, means, counts)
        values.append(_Clean.seen[-1])
    change = np.linalg.norm(values[0][1] - values[1][1])
    assert 0 < change <= values[0][2] * (1 + 1e-12) and values[0][2] == 2.0


# --- releases -----------------------------------------------------------------------------------


def test_release_is_a_valid_left_to_right_model_set_with_its_guarantee():
    train, test = _data()
    out = _release(train, 10.0)
    assert out.labels == ["a", "b", "c"] and len(out.models) == 3
    for m in out.models:
        assert m.covariance_type == "diag" and m.n_states == 3
        np.testing.assert_allclose(m.transmat.sum(axis=1), 1.0)
        assert m.transmat[1, 0] == 0 and m.transmat[2, 0] == 0 and m.transmat[2, 2] == 1
        assert np.all(np.abs(m.means) <= DESIGN.coord_clip)
    assert out.pipeline.standardised and out.pipeline.mean != BASE.mean
    assert _accuracy(out, test) >= 0.9
    g = out.guarantee
    assert g["format"] == km.FORMAT and g["delta"] == 1e-6
    assert g["epsilon"] == out.epsilon <= 10.0 == g["epsilon_requested"]
    assert "add/remove one utterance" in g["neighbouring"]
    assert "zCDP" in g["accountant"] and "OpenDP" in g["accountant"]
    assert "skeleton" in g["public"] and "standardisation" in g["public"]
    assert REFERENCE.source in g["public"]["standardisation"] and g["not_covered"] == []
    assert g["insecure_randomness"] is True
    assert [s["stage"] for s in g["mechanisms"]] == ["standardisation", "state means"]
    json.dumps(g)  # JSON-ready


def test_default_release_uses_the_hardened_opendp_sampler():
    train, _ = _data(per_label=5)
    out = release_keyword_models(train, 3.0, design=DESIGN, base_pipeline=BASE, reference=REFERENCE)
    assert out.guarantee["sampler"] == "opendp" and not out.guarantee["insecure_randomness"]
    assert all("make_gaussian" in m["details"] for m in out.guarantee["mechanisms"])
    assert out.epsilon <= 3.0


def test_public_standardisation_and_static_means_with_derived_deltas():
    train, test = _data()
    design = KeywordDesign(n_states=3, standardisation="public", static_means=True)
    out = _release(train, 1e4, design=design)
    (stage,) = out.guarantee["mechanisms"]  # the state means only
    assert stage["coordinates"] == 3 * (3 * 1 + 1)  # K n_mfcc static means + count, per label
    assert out.pipeline.mean == tuple(REFERENCE.centre) and out.guarantee["not_covered"] == []
    assert "public reference" in out.guarantee["public"]["standardisation"]
    assert all(m.means.shape == (3, 3) for m in out.models)


def test_derived_deltas_of_a_steady_ramp():
    """Static means rising by 1 per state, 1/(1 - a_jj) = 8 frames per state: the delta is
    1/8 per frame (in raw units, rescaled by the pipeline's std), the delta-delta 0."""
    pipeline = FeaturePipeline(n_mfcc=2, n_mels=2, mean=(0.0,) * 6, std=(1, 1, 2, 2, 4, 4))
    static = np.array([[0.0, 0.0], [1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    means = km.derived_deltas(static, pipeline, 0.875)
    np.testing.assert_allclose(means[:, :2], static)
    np.testing.assert_allclose(means[:, 2:4], [[1 / 16, 2 / 16]] * 4)
    np.testing.assert_allclose(means[:, 4:], 0.0, atol=1e-15)


def test_bundled_standardisation_is_declared_outside_the_guarantee():
    train, _ = _data(per_label=8)
    base = BASE.fit_standardisation([x for rows in train.values() for x in rows])
    design = KeywordDesign(n_states=3, standardisation="bundled")
    out = _release(train, 3.0, design=design, base_pipeline=base)
    assert out.pipeline == base
    assert out.guarantee["not_covered"] and "standardisation" in out.guarantee["not_covered"][0]
    with pytest.raises(PrivacyParameterError):
        _release(train, 3.0, design=design)  # BASE carries no standardisation


def test_accuracy_falls_with_strong_privacy():
    train, test = _data(seed=2)
    assert _accuracy(_release(train, 1e4, seed=3), test) >= 0.9
    assert _accuracy(_release(train, 0.01, seed=4), test) <= 0.7


def test_bad_inputs_raise_typed_errors():
    train, _ = _data(per_label=3)
    with pytest.raises(PrivacyParameterError):
        _release(train, 0.0)
    with pytest.raises(InvalidInputError):
        _release({}, 1.0)  # no label declared: nothing to release
    with pytest.raises(InvalidInputError):
        _release({"a": np.zeros((3, 5, 3))}, 1.0)  # the mapping's structure, not a record
    for labels in ([], ["a", "a"], "abc", ["a", ""]):
        with pytest.raises(InvalidInputError):
            _release(train, 1.0, labels=labels)
    for bad in (
        {"n_states": 0},
        {"self_loop": 1.0},
        {"record_bound": -1.0},
        {"standardisation": "none"},
        {"variances": "full"},
        {"standardisation_share": 0.6, "variance_share": 0.5, "variances": "tied"},
        {"delta": 1.5},
    ):
        with pytest.raises(PrivacyParameterError):
            KeywordDesign(**bad)


def _same_release(one, other):
    assert one.labels == other.labels and one.pipeline == other.pipeline
    for a, b in zip(one.models, other.models):
        np.testing.assert_array_equal(a.means, b.means)
        np.testing.assert_array_equal(a.covars, b.covars)


@pytest.mark.parametrize("variances", ["unit", "state"])
def test_every_record_is_handled_by_a_public_rule(variances):
    """No record raises: an undeclared label, a wrong dimension, no frames or a NaN drop
    the utterance (the same release as without it, same seed); a short utterance (T < K)
    is padded, every frame repeated ceil(K / T) times."""
    design = KeywordDesign(n_states=3, record_bound=4.0, count_weight=4.0, variances=variances)
    train, _ = _data(per_label=4)
    plain = _release(train, 3.0, design=design)
    for junk in (np.zeros((6, 4)), np.zeros((0, 3)), np.full((6, 3), np.nan), [[1.0], [2, 3]]):
        noisy = {**train, "b": [*train["b"], junk], "zz": [train["a"][0]]}
        _same_release(_release(noisy, 3.0, design=design, labels=["a", "b", "c"]), plain)
    short = np.array([[0.5, -1.0, 2.0], [1.5, 0.0, -2.0]])  # 2 frames, K = 3
    padded = np.repeat(short, 2, axis=0)
    _same_release(
        _release({**train, "c": [*train["c"], short]}, 3.0, design=design),
        _release({**train, "c": [*train["c"], padded]}, 3.0, design=design),
    )
    assert RECORD_RULE in plain.guarantee["public"]["records"]


@pytest.mark.parametrize("variances", ["unit", "tied", "state"])
@pytest.mark.parametrize("standardisation", ["dp", "public"])
def test_neighbouring_data_sets_release_the_same_labels(variances, standardisation):
    """Removing or adding one utterance never changes whether the release succeeds nor
    the released labels: a label's only utterance, a short one, the last one of the data
    set, one of an undeclared label (these used to raise AxisError / InvalidInputError,
    or to remove the label's model)."""
    design = KeywordDesign(
        n_states=3, variances=variances, standardisation=standardisation, record_bound=4.0
    )
    labels = ["a", "b", "c"]
    train, _ = _data(per_label=2)
    short = train["b"][0][:2]  # 2 frames, fewer than K = 3
    base = {"a": [train["a"][0]], "b": [short, train["b"][1]], "c": []}
    extra = [train["c"][0], short, np.zeros((7, 5)), train["a"][1][:1]]
    data_sets = [base, {"a": [], "b": [], "c": []}, {"a": [short], "b": [], "c": []}]
    for data in data_sets:
        neighbours = [data]
        for label, rows in data.items():
            for i in range(len(rows)):  # remove one utterance
                neighbours.append({**data, label: rows[:i] + rows[i + 1 :]})
            neighbours += [{**data, label: [*rows, x]} for x in extra]  # add one
        neighbours.append({**data, "other": [train["a"][1]]})  # an undeclared label
        for seed, neighbour in enumerate(neighbours):
            out = _release(neighbour, 3.0, design=design, seed=seed, labels=labels)
            assert out.labels == labels and len(out.models) == 3
            assert all(np.all(np.isfinite(m.means)) for m in out.models)


# --- empirical audit ----------------------------------------------------------------------------


def test_audit_refuses_bad_arguments():
    train, _ = _data(per_label=3)
    kwargs = dict(design=DESIGN, reference=REFERENCE, base_pipeline=BASE, releases=10)
    for bad, error in (
        (dict(label="z"), InvalidInputError),
        (dict(label="a", neighbour="swap"), InvalidInputError),
        (dict(label="a", state=3), InvalidInputError),
        (dict(label="a", releases=1), PrivacyParameterError),
    ):
        with pytest.raises(error):
            audit_keyword_release(train, 1.0, **{**kwargs, **bad})


def test_histogram_loss_estimator():
    rng = np.random.default_rng(0)
    same = histogram_privacy_loss(rng.normal(size=20000), rng.normal(size=20000))
    assert same < 0.15
    shifted = histogram_privacy_loss(rng.normal(size=20000), rng.normal(0.5, 1, size=20000))
    assert 0.5 < shifted < 2.5  # the loss 0.5 x grows with x; bins reach |x| ~ 2
    with pytest.raises(InvalidInputError):
        histogram_privacy_loss([], [1.0])
    apart = histogram_privacy_loss(rng.normal(size=5000), rng.normal(50, 1, size=5000))
    assert apart > 5  # disjoint: large and finite
    with pytest.raises(InvalidInputError):
        histogram_privacy_loss([1.0] * 10, [2.0] * 10, min_count=50)


@pytest.mark.slow  # 1,500 releases: about 10 s
def test_empirical_audit_stays_below_the_claim_and_catches_too_little_noise(monkeypatch):
    train, _ = _data(per_label=6)
    train = {"a": train["a"], "b": train["b"]}
    kwargs = dict(label="a", releases=250, reference=REFERENCE, seed=5, bins=6, min_count=25)
    audit = audit_keyword_release(train, 3.0, design=DESIGN, base_pipeline=BASE, **kwargs)
    assert audit.estimate <= audit.epsilon <= 3.0
    assert "label 'a'" in audit.parameter and audit.releases == 250
    # with the standardisation fixed (public), the audited mean moves only through stage 1
    fixed = BASE.fit_standardisation(train["b"])
    design = KeywordDesign(n_states=3, record_bound=4.0, standardisation="bundled")
    kwargs.update(design=design, base_pipeline=fixed)
    assert audit_keyword_release(train, 3.0, **kwargs).estimate <= 3.0
    canary = audit_keyword_release(train, 3.0, neighbour="canary", **kwargs)
    assert canary.estimate <= 3.0 and "canary" in canary.neighbour
    assert canary.shift > audit.shift  # the canary moves the audited mean most

    class TooLittleNoise(GaussianMechanism):
        """Draws sigma / 30 but reports the rho of sigma: a bug the accountant cannot see
        (with an honest rho it refuses the release itself)."""

        def __init__(self, sigma, sensitivity, sampler, rng):
            super().__init__(sigma / 30, sensitivity, sampler=sampler, rng=rng)
            self.claimed = sensitivity**2 / (2 * sigma**2)

        @property
        def rho(self):
            return self.claimed

    monkeypatch.setattr(km, "_mechanism", TooLittleNoise)
    broken = audit_keyword_release(train, 3.0, **kwargs)
    assert broken.estimate > 3.0  # the audit sees that the claim is false


# --- the released file in Alice's hands -------------------------------------------------------


def test_saved_release_loads_and_scores(tmp_path):
    from smc_hmm.dp.keyword_release import save_release
    from smc_hmm.hmm.io import load_model_pipeline, load_models

    train, test = _data(per_label=20)
    out = _release(train, 10.0)
    path, sidecar = tmp_path / "kw.npz", tmp_path / "kw.privacy.json"
    guarantee = save_release(out, path, sidecar)
    models, labels = load_models(path)
    pipeline = FeaturePipeline.from_dict(load_model_pipeline(path))
    assert labels == out.labels and pipeline == out.pipeline
    x = pipeline.standardise(test[0][0])
    for loaded, released in zip(models, out.models):
        assert log_likelihood(loaded, x) == log_likelihood(released, x)
    import hashlib

    written = json.loads(sidecar.read_text())
    assert written == json.loads(json.dumps(guarantee))
    assert written["model_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def _write_fsdd(directory, digits=range(10), indices=range(3, 8)):
    from scipy.io import wavfile

    rng = np.random.default_rng(0)
    for digit in digits:
        for index in indices:
            t = np.arange(int(8000 * 0.15)) / 8000
            tone = np.sin(2 * np.pi * (300 + 150 * digit) * t) * np.hanning(t.size)
            signal = tone + 0.05 * rng.normal(size=t.size)
            wavfile.write(
                directory / f"{digit}_test_{index}.wav", 8000, (signal * 9000).astype("<i2")
            )


@pytest.mark.slow
def test_release_command_then_keyword_command(tmp_path, capsys):
    """`smc-hmm release hmm --keyword-models` on a recordings directory, then `smc-hmm
    keyword --models` on its output: the secure decision equals the plaintext one."""
    from smc_hmm.cli import main
    from smc_hmm.dp.release import read_release_metadata

    recordings = tmp_path / "recordings"
    recordings.mkdir()
    _write_fsdd(recordings)
    out = tmp_path / "dp.npz"
    argv = ["release", "hmm", "--keyword-models", "--data", str(tmp_path), "--eps", "10"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*argv, "--seed", "3", "--out", str(out)]) == 0
    guarantee = json.loads((tmp_path / "dp.privacy.json").read_text())
    assert guarantee["epsilon"] <= 10 and guarantee["delta"] == 1e-6
    assert guarantee["public"]["design"]["n_states"] == 5
    with pytest.raises(ConfigError):  # not release hmm's metadata format
        read_release_metadata(out)
    capsys.readouterr()
    report = tmp_path / "kw.json"
    wav = recordings / "3_test_5.wav"
    argv = ["keyword", "--audio", str(wav), "--models", str(out), "--key-bits", "1024"]
    assert main([*argv, "--insecure", "--json", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["secure"] == {"keyword": data["plaintext"]["keyword"]}
    # the release carries its own pipeline: the bundled background (the bundled
    # pipeline's) is not used, and a note says so
    scores = data["plaintext"]["log_likelihoods"]
    assert len(scores) == 10 and data["garbage"] is None
    assert "no garbage model is used" in " ".join(capsys.readouterr().err.split())


def test_release_command_errors(tmp_path, capsys):
    from smc_hmm.cli import main

    base = ["release", "hmm", "--keyword-models", "--eps", "1", "--out", str(tmp_path / "o.npz")]
    for extra, match in (
        (["--data", str(tmp_path / "none.npz")], "expected a recordings directory"),
        (["--data", str(tmp_path), "--max-length", "10"], "does not take --max-length"),
        (["--data", str(tmp_path), "--skip-indices", "3-1"], "--skip-indices"),
    ):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and match in err, err
    bad = tmp_path / "bad.npz"
    np.savez(bad, features=np.zeros((4, 39)), lengths=np.array([2, 1]), digits=np.array([0, 1]))
    assert main([*base, "--data", str(bad)]) == 2
    assert "do not split" in capsys.readouterr().err


def _features_npz(path, lengths, tags, member="digits"):
    rng = np.random.default_rng(len(lengths))
    lengths = np.array(lengths, dtype=np.int64)
    np.savez(
        path,
        features=rng.normal(size=(int(lengths.sum()), 39)),
        lengths=lengths,
        **{member: np.array(tags)},
    )
    return path


def _released_labels(tmp_path, capsys, data, *extra) -> list[str]:
    from smc_hmm.cli import main

    out = tmp_path / "kw.npz"
    argv = ["release", "hmm", "--keyword-models", "--eps", "3", "--seed", "1"]
    assert main([*argv, "--data", str(data), "--out", str(out), *extra]) == 0, capsys.readouterr()
    capsys.readouterr()
    return json.loads((tmp_path / "kw.privacy.json").read_text())["public"]["labels"]


def test_release_command_on_neighbouring_files_releases_the_same_labels(tmp_path, capsys):
    """The label set is public (the digit words, or --labels), never the data's: removing
    the only utterance of a digit, keeping a 2-frame utterance (K = 5), an utterance of
    zero frames or a digit outside 0-9, or emptying the file changes neither the success
    nor the released labels."""
    from smc_hmm.data import DIGIT_WORDS

    lengths, digits = [12, 2, 9, 0, 7], [0, 1, 1, 2, 11]
    files = [_features_npz(tmp_path / "d.npz", lengths, digits)]
    for i in range(len(lengths)):  # every neighbour: one utterance removed
        keep = [j for j in range(len(lengths)) if j != i]
        files.append(
            _features_npz(
                tmp_path / f"d{i}.npz", [lengths[j] for j in keep], [digits[j] for j in keep]
            )
        )
    files.append(_features_npz(tmp_path / "empty.npz", [], np.array([], dtype=np.int64)))
    for data in files:
        assert _released_labels(tmp_path, capsys, data) == list(DIGIT_WORDS)
        assert _released_labels(tmp_path, capsys, data, "--labels", "one,zero") == ["one", "zero"]


def test_release_command_string_labels_must_be_declared(tmp_path, capsys):
    from smc_hmm.cli import main

    data = _features_npz(tmp_path / "s.npz", [8, 6], ["yes", "no"], member="labels")
    assert _released_labels(tmp_path, capsys, data, "--labels", "yes,no,maybe") == [
        "yes",
        "no",
        "maybe",
    ]
    argv = ["release", "hmm", "--keyword-models", "--eps", "3", "--data", str(data)]
    for extra, fragment in (
        ([], "declare the public label set with --labels"),
        (["--labels", "yes,,no"], "--labels must be distinct"),
        (["--labels", "yes,yes"], "--labels must be distinct"),
    ):
        assert main([*argv, "--out", str(tmp_path / "x.npz"), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and fragment in err, err
    wrong = tmp_path / "w.npz"
    np.savez(wrong, features=np.zeros((4, 13)), lengths=np.array([4]), digits=np.array([1]))
    assert main([*argv[:-1], str(wrong), "--out", str(tmp_path / "x.npz")]) == 2
    assert "frames of 13 features" in capsys.readouterr().err


def test_release_command_drops_an_unreadable_recording(tmp_path, capsys):
    """A recordings directory: a broken WAV is a record like any other (dropped), and a
    directory without recordings releases noise, so a neighbour never fails."""
    recordings = tmp_path / "rec"
    recordings.mkdir()
    _write_fsdd(recordings, digits=[3], indices=[7])
    (recordings / "4_test_7.wav").write_bytes(b"RIFF....WAVE")  # cut inside its header
    from smc_hmm.data import DIGIT_WORDS

    assert _released_labels(tmp_path, capsys, recordings) == list(DIGIT_WORDS)
    for path in recordings.iterdir():
        path.unlink()
    assert _released_labels(tmp_path, capsys, recordings) == list(DIGIT_WORDS)


# --- the example: DP Baum-Welch comparison (its helpers) and the figure --------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dp_keyword_models.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("dp_keyword_models_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _bw_data(seed=0, per_label=40, test_per_label=10):
    """Three 'words' in 2-d for the DP Baum-Welch comparison."""
    rng = np.random.default_rng(seed)
    paths = {
        "a": [(-2, 0), (0, 0), (2, 0)],
        "b": [(0, -2), (0, 2), (2, 2)],
        "c": [(2, -2), (-2, -2), (-2, 2)],
    }
    trans = np.array([[0.7, 0.3, 0.0], [0.0, 0.7, 0.3], [0.0, 0.0, 1.0]])
    truth = {
        k: GaussianHMM([1.0, 0, 0], trans, np.array(p, float), np.full((3, 2), 0.3), "diag")
        for k, p in paths.items()
    }
    train = {k: [m.sample(int(rng.integers(6, 12)), rng)[0] for _ in range(per_label)]
             for k, m in truth.items()}  # fmt: skip
    test = [(m.sample(10, rng)[0], k) for k, m in truth.items() for _ in range(test_per_label)]
    return train, test


def test_core_pipeline_end_to_end(example):
    train, test = _bw_data()
    train = {k: [example.clip(x, 5.0) for x in v] for k, v in train.items()}
    common = dict(n_states=3, max_length=12, feature_bound=4.0)
    plain = example.plain_models(train, n_iter=5, **common)
    assert example.accuracy(plain, test) >= 0.9
    converged = example.plain_models(train, n_iter=20, tol=1e-3, **common)
    for mode in ("every", "last"):
        models, spent = example.dp_models(
            train, 50.0, mode=mode, n_iter=3, rng=DPRandom.insecure_seeded(1),
            converged=converged, **common,
        )  # fmt: skip
        assert spent == pytest.approx(50.0)  # parallel composition over disjoint labels
        assert set(models) == {"a", "b", "c"}
        for m in models.values():  # valid HMMs: stochastic, left-to-right kept, bounded
            assert isinstance(m, GaussianHMM) and m.n_states == 3
            np.testing.assert_allclose(m.transmat.sum(axis=1), 1.0)
            assert m.transmat[1, 0] == 0 and m.transmat[2, 0] == 0
            assert np.all(m.covars > 0) and np.all(m.covars <= 16.0 + 1e-9)
            assert np.all(np.linalg.norm(m.means, axis=1) <= 4.0 + 1e-9)
        acc = example.accuracy(models, test)
        assert 0.0 <= acc <= 1.0 and math.isfinite(acc)


def test_strong_privacy_destroys_and_weak_privacy_keeps_accuracy(example):
    train, test = _bw_data(seed=2)
    common = dict(n_states=3, max_length=12, feature_bound=4.0, n_iter=3)
    weak, _ = example.dp_models(train, 1e5, rng=DPRandom.insecure_seeded(3), **common)
    assert example.accuracy(weak, test) >= 0.8
    strong, _ = example.dp_models(train, 0.01, rng=DPRandom.insecure_seeded(4), **common)
    assert example.accuracy(strong, test) <= 0.8


def test_dp_models_rejects_a_bad_mode(example):
    train, _ = _bw_data(per_label=3, test_per_label=1)
    with pytest.raises(ValueError):
        example.dp_models(train, 1.0, mode="first")
    with pytest.raises(ValueError):
        example.dp_models(train, 1.0, mode="last")


def test_secure_summary_of_a_demo_report(example):
    def run(secure, plain, seconds, nbytes):
        return {
            "secure": secure,
            "plain": plain,
            "seconds": seconds,
            "cost": {"totals": {"bytes": nbytes}},
        }

    report = {
        "mode": "fast",
        "runs": [
            run("one", "one", 10.0, 2e6),
            run("two", "two", 30.0, 4e6),
            run("six", "two", 20.0, 3e6),
        ],
    }
    summary = example.secure_summary(report)
    assert summary == {
        "utterances": 3,
        "agree": 2,
        "median_seconds": 20.0,
        "median_megabytes": 3.0,
        "mode": "fast",
    }


def test_example_draws_the_figure_from_a_bench_report(example, tmp_path):
    bench = {
        "accuracy": {"0.1": [0.1, 0.12], "3": [0.9, 0.95], "10": [0.96, 0.97]},
        "bundled_diag_accuracy": 0.98,
        "bundled_full_accuracy_manifest": 0.992,
    }
    out = tmp_path / "fig.png"
    example.plot(bench, out)
    assert out.stat().st_size > 10_000


@pytest.mark.slow  # scores the 250 bundled test utterances twice: about 10 s
def test_bench_runs_with_small_options(tmp_path, capsys):
    import argparse

    from smc_hmm.bench import dp_keyword

    _write_fsdd(tmp_path)
    parser = argparse.ArgumentParser()
    dp_keyword.add_arguments(parser)
    out = tmp_path / "bench.json"
    argv = [str(tmp_path), "--eps", "3", "--releases", "1", "--audit-releases", "100"]
    # synthetic tones reach ~9% accuracy against the 60% target at eps = 3: the bench
    # reports the miss with exit 1 (smc_hmm.bench.common.finish), and still writes its JSON
    assert dp_keyword.main(parser.parse_args([*argv, "--json", str(out)])) == 1
    data = json.loads(out.read_text())
    assert set(data["accuracy"]) == {"3"} and len(data["accuracy"]["3"]) == 1
    assert data["bundled_diag_accuracy"] == pytest.approx(0.988)  # docs/speech-models.md
    audits = data["audit"].values()
    assert len(audits) == 2 and all(a["estimate"] <= a["epsilon"] for a in audits)
    assert data["guarantee_example"]["epsilon"] <= 3.0
    assert "dp-keyword benchmark" in capsys.readouterr().out
