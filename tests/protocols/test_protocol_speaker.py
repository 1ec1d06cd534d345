"""protocols.speaker: secure speaker identification / verification with GMMs and a UBM.

Against the plaintext decisions and log-likelihoods (the GMM's forward algorithm, hmmlearn
and scikit-learn as oracles), on the bundled speaker models and real speech; transcripts
of every mode and of refused runs; the attack the LOGSUM noise defeats; typed errors; two
OS processes over mutual TLS and a serving Bob."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bound_support import assert_uniform_view
from transcript_harness import assert_same_transcripts

from protocols import speaker as sp
from smc_hmm.data.speakers import (
    best_component_scores,
    gmm,
    gmm_parts,
    identify,
    load_speaker_models,
    load_speaker_test_utterances,
    scores,
    verify,
)
from smc_hmm.errors import ConfigError, InvalidInputError, PrecisionError, ProtocolError
from smc_hmm.hmm import log_likelihood
from smc_hmm.runtime import run_protocol


def _gmm(rng, components, dims, shift=0.0):
    w = rng.dirichlet(np.ones(components))
    return gmm(
        w, rng.normal(shift, 1.0, (components, dims)), rng.uniform(0.5, 1.5, (components, dims))
    )


#: (models, labels): three diagonal GMMs 1.5 apart, a UBM, labels s0.. and "ubm"
_speakers = sp.example_speakers


def _run(keypair, utterance, speakers, params=None, **kwargs):
    return run_protocol(
        sp.PROTOCOL,
        {"mode": "identify", **(params or {})},
        {"alice": ("alice", utterance), "bob": ("bob", speakers)},
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=120,
        **kwargs,
    )


def test_a_gmm_is_an_hmm_whose_rows_are_its_weights():
    """The oracle: the forward algorithm of the GMM-as-HMM equals hmmlearn's HMM score and
    scikit-learn's GaussianMixture log-likelihood."""
    from sklearn.mixture import GaussianMixture

    rng = np.random.default_rng(1)
    model = _gmm(rng, 4, 3)
    x = rng.normal(size=(30, 3))
    w, mu, var = gmm_parts(model)
    mixture = GaussianMixture(4, covariance_type="diag")
    mixture.weights_, mixture.means_, mixture.covariances_ = w, mu, var
    mixture.precisions_cholesky_ = 1 / np.sqrt(var)
    want = mixture.score_samples(x).sum()
    assert log_likelihood(model, x) == pytest.approx(want, rel=1e-12)
    assert model.to_hmmlearn().score(x) == pytest.approx(want, rel=1e-12)
    with pytest.raises(InvalidInputError, match="GMM"):
        from smc_hmm.hmm import GaussianHMM

        gmm_parts(GaussianHMM([0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]], mu[:2], var[:2], "diag"))


@pytest.mark.parametrize("mode", ["identify", "verify", "anonymous"])
def test_decisions_and_log_likelihoods_equal_plaintext_on_real_speech(keypair_1024, mode):
    models, labels = load_speaker_models()
    params = {"mode": mode, "reveal_scores": True, "threshold": -1.0}
    for u in load_speaker_test_utterances([3, 612]):  # a george, a nicolas
        x = u.features[:15]
        plain = scores(models, x)
        claim = "nicolas"
        utterance = x if mode == "identify" else (x, claim)
        result = _run(keypair_1024, utterance, (models, labels), params)
        secure = result["alice"]["scores"]
        for label, want in zip(labels, plain):
            if label in secure:
                assert abs(secure[label] - want) <= 1e-9 * abs(want)
        if mode == "identify":
            assert result["alice"]["speaker"] == identify(plain, labels, "ubm", -2.0, len(x))
            assert result["bob"] is None
        elif mode == "verify":
            want = verify(plain[labels.index(claim)], plain[-1], -1.0, len(x))
            assert result["bob"] == {"accept": want, "claim": claim, "mode": "verify"}
        else:  # the claimed speaker, as in verify; Bob is not told who
            want = verify(plain[labels.index(claim)], plain[-1], -1.0, len(x))
            assert result["bob"] == {"accept": want, "mode": "anonymous"}


@pytest.mark.parametrize("mode", ["identify", "verify", "anonymous"])
def test_the_default_decides_as_the_plaintext_best_component_scores(keypair_1024, mode):
    """The default (scoring "max": the mixture's best component per frame, summed, and the
    decision in circuits Bob garbles) on real speech: the decision of the plaintext
    best-component scores (smc_hmm.data.speakers.best_component_scores), for an owner and
    an impostor claim."""
    models, labels = load_speaker_models()
    for u in load_speaker_test_utterances([3, 612]):  # a george, a nicolas
        x = u.features[:20]
        plain = best_component_scores(models, x)
        for claim in ("george", "nicolas"):
            utterance = x if mode == "identify" else (x, claim)
            result = _run(keypair_1024, utterance, (models, labels), {"mode": mode})
            if mode == "identify":
                assert result["alice"]["speaker"] == identify(plain, labels, "ubm", -2.0, len(x))
                break
            want = verify(plain[labels.index(claim)], plain[-1], 0.0, len(x))
            assert result["bob"]["accept"] is want and result["alice"] is None


def test_the_default_shows_alice_only_uniform_masked_values(keypair_1024):
    """The chosen-frame attack on the default: what Alice decrypts is one message, Bob's
    component log-densities under uniform masks and the MAC slots (KS tests against the
    true log-densities); the LOGSUM mode, the control, shows blinded values whose repeats
    she can average (test_emission_blinds_follow_the_smooth_law)."""

    rng = np.random.default_rng(7)
    speakers = _speakers(rng, components=2)
    x = _chosen_frames(speakers)
    result = _run(keypair_1024, x, speakers, record_views=True)
    decryptable = [t for _, t, p in result.views["alice"] if hasattr(p, "decrypt_ints")]
    assert decryptable == ["bd.values"]
    spec = sp.SpeakerSpec(sp.SpeakerParams(), 4, (2, 2, 2, 2), len(x), 1024)
    bound = spec.bound_plan
    (emit,) = [p for _, t, p in result.views["alice"] if t == "bd.values"]
    truth = np.array([np.concatenate(row) for row in _true_logs(speakers, x)])
    assert_uniform_view(emit, keypair_1024, bound, truth * 2.0**spec.program_scale)


def test_one_round_per_frame_gives_the_same_result(keypair_512):
    rng = np.random.default_rng(2)
    speakers = _speakers(rng)
    x = rng.normal(1.5, 1.0, (7, 4))
    batched = _run(keypair_512, x, speakers, {"reveal_scores": True})
    per_frame = _run(keypair_512, x, speakers, {"reveal_scores": True, "frames_per_round": 1})
    assert batched["alice"]["speaker"] == per_frame["alice"]["speaker"] == "s1"
    for label, value in batched["alice"]["scores"].items():
        assert per_frame["alice"]["scores"][label] == pytest.approx(value, rel=1e-11)
    assert per_frame.cost.to_dict()["totals"]["rounds"] > batched.cost.to_dict()["totals"]["rounds"]


def test_margin_and_threshold_decide_as_in_plaintext(keypair_512):
    """A large margin makes "none" win; a large threshold rejects; both as in plaintext."""
    rng = np.random.default_rng(3)
    speakers = _speakers(rng)
    x = rng.normal(0.0, 1.0, (6, 4))
    plain = scores(speakers[0], x)
    for margin in (-50.0, 50.0):
        out = _run(keypair_512, x, speakers, {"margin": margin})["alice"]
        assert out["speaker"] == identify(plain, speakers[1], "ubm", margin, len(x))
    for threshold in (-50.0, 50.0):
        out = _run(keypair_512, (x, "s0"), speakers, {"mode": "verify", "threshold": threshold})
        assert out["bob"]["accept"] is verify(plain[0], plain[-1], threshold, len(x))
        assert out["alice"] is None


def _cases(rng, count=2):
    """Different speech and different models of the same public sizes."""
    return [(rng.normal(1.0, 1.0, (5, 4)), _speakers(rng)) for _ in range(count)]


@pytest.mark.parametrize("mode", ["verify", "anonymous"])  # identify: the conformance suite
def test_transcripts_do_not_depend_on_speech_models_or_claim(keypair_512, mode):
    rng = np.random.default_rng(4)
    cases = _cases(rng)
    claims = ["s0", "s2"]

    def run(case, wrap):
        (x, speakers), claim = case
        utterance = x if mode == "identify" else (x, claim)
        _run(keypair_512, utterance, speakers, {"mode": mode}, wrap_transport=wrap)

    components = (3, 3) if mode == "verify" else (3, 3, 3, 3)
    spec = sp.SpeakerSpec(sp.SpeakerParams(mode=mode), 4, components, 5, 512)
    frames = assert_same_transcripts(
        run, list(zip(cases, claims)), sp.declared_messages(spec), keys=[keypair_512]
    )
    assert ("alice", "bob") in frames and ("bob", "alice") in frames


def test_alice_refuses_bad_features_invisibly(keypair_512):
    """Features beyond the public bound: Alice runs on dummy frames and raises after her
    last message, so Bob sees the frames of an accepted run."""
    rng = np.random.default_rng(5)
    speakers = _speakers(rng)
    good = rng.normal(size=(5, 4))
    bad = good.copy()
    bad[2, 1] = 99.0  # above feature_bound = 16

    def run(x, wrap):
        if x is bad:
            with pytest.raises(InvalidInputError, match="feature_bound"):
                _run(keypair_512, x, speakers, wrap_transport=wrap)
        else:
            _run(keypair_512, x, speakers, wrap_transport=wrap)

    spec = sp.SpeakerSpec(sp.SpeakerParams(), 4, (3, 3, 3, 3), 5, 512)
    assert_same_transcripts(run, [good, bad], sp.declared_messages(spec), keys=[keypair_512])


def test_bob_refuses_an_out_of_range_model_invisibly(keypair_512):
    """A model whose log-densities could exceed the public bound: Bob runs dummy models and
    raises after his last message (verify: he receives the last one)."""
    rng = np.random.default_rng(6)
    models, labels = _speakers(rng)
    w, mu, _ = gmm_parts(models[0])
    sharp = gmm(w, mu, np.full(mu.shape, 1e-6))  # b = 5e5 per feature: beyond 2^19 nats
    x = rng.normal(size=(5, 4))

    def run(speakers, wrap):
        if speakers[0][0] is sharp:
            with pytest.raises(PrecisionError, match="public"):
                _run(keypair_512, (x, "s0"), speakers, {"mode": "verify"}, wrap_transport=wrap)
        else:
            _run(keypair_512, (x, "s0"), speakers, {"mode": "verify"}, wrap_transport=wrap)

    spec = sp.SpeakerSpec(sp.SpeakerParams(mode="verify"), 4, (3, 3), 5, 512)
    assert_same_transcripts(
        run,
        [(models, labels), ([sharp, *models[1:]], labels)],
        sp.declared_messages(spec),
        keys=[keypair_512],
    )


def _alice_view(result, sk, spec):
    """What Alice decrypted: every blinded emission y_trm and every LOGSUM slot, with the
    round's plan and her values (the LOGSUM runs in one round by default)."""
    from protocols.stages import emissions, logsum

    view = {t: p for _, t, p in result.views["alice"]}
    y = emissions.alice_unpack(view["spk.emit"].decrypt_ints(sk), spec.emissions)
    plan = spec.round_plan(range(spec.length))
    u = [v for row in y for v in row]
    values, shifts = logsum.alice_values(u, plan, spec.params.precision)
    slots = [
        (int(c) >> (k * plan.slot_bits)) & ((1 << plan.slot_bits) - 1)
        for c in view["spk.sum"].decrypt_ints(sk)
        for k in range(plan.slots)
    ][: plan.targets]
    logs = logsum.alice_logs(view["spk.sum"].decrypt_ints(sk), plan, shifts, spec.params.precision)
    return y, plan, slots, logs


def _true_logs(speakers, x):
    """Per frame and model, the components' log w N(x) (the test's oracle)."""
    out = []
    for t in range(len(x)):
        row = []
        for model in speakers[0]:
            w, mu, var = gmm_parts(model)
            row.append(np.log(w) - 0.5 * (np.log(2 * np.pi * var) + (x[t] - mu) ** 2 / var).sum(1))
        out.append(row)
    return out


def _chosen_frames(speakers, repeats=4):
    """The client's chosen inputs: a zero frame, unit vectors and their negatives, and a
    frame on one component's mean (so that one component wins by far), each repeated."""
    dims = speakers[0][0].n_features
    _, mu, _ = gmm_parts(speakers[0][0])
    frames = [np.zeros(dims), *np.eye(dims), *(-np.eye(dims)), 6 * mu[0]]
    return np.repeat(np.array(frames), repeats, axis=0)


def test_chosen_frames_reveal_no_component_exactly(keypair_1024):
    """The thesis's LOGSUM mode (scoring = "logsum"), what its blinds still guarantee.  The
    held-out speaker attacks, on a whole run with chosen frames: (a) the emission
    blinds are the rounded logs of Bob's integers (the sparse set), (b) a reference
    component's public coefficient 2^B shows in the LOGSUM slot as a run of zero bits and
    makes the output minus its emission the exact component posterior, (c) within a block
    of identical frames the blinds' differences are exact.  All three must fail."""
    rng = np.random.default_rng(7)
    speakers = _speakers(rng, components=2)
    x = _chosen_frames(speakers)
    spec = sp.SpeakerSpec(sp.SpeakerParams(scoring="logsum"), 4, (2, 2, 2, 2), len(x), 1024)
    sk = keypair_1024[1]
    run = _run(keypair_1024, x, speakers, {"scoring": "logsum"}, record_views=True)
    y, plan, slots, logs = _alice_view(run, sk, spec)
    truth = _true_logs(speakers, x)
    f = spec.f
    blinds = []
    for t in range(len(x)):
        for r, seg in enumerate(spec.segments):
            for m, q in zip(range(seg.start, seg.stop), truth[t][r]):
                blinds.append(y[t][m] - round(q * 2**f))
    # (a) no blind is the rounded log of an integer (old: y = Q - round(2^80 ln k))
    import gmpy2

    from protocols.stages.fixedlog import log_fixed, round_mpfr

    ctx = gmpy2.context(precision=f + 128)
    for b in blinds:
        k = round_mpfr(ctx.exp(ctx.div(gmpy2.mpz(abs(b)), gmpy2.mpz(1) << f)))
        assert abs(log_fixed(k, f) - abs(b)) > 2  # beyond the oracle's rounding
    # (b) no LOGSUM slot carries a coefficient with a long run of zero bits above the
    # noise, and the output minus a component's emission is not its exact posterior
    above = plan.noise_bits - plan.g + 1
    for s in slots:
        top = (s >> plan.g) >> above
        assert ((top & -top).bit_length() - 1) < 24
    posteriors = []
    for i, a in enumerate(logs):
        t, r = divmod(i, len(spec.components))
        seg = spec.segments[r]
        q = truth[t][r]
        post = float(np.logaddexp.reduce(q) - q[0])  # -log posterior of component 0
        posteriors.append((a - y[t][seg.start]) / 2**f - post)
    spread = max(posteriors) - min(posteriors)
    assert spread > 1.0  # old: a constant (B ln 2), so every posterior was exact
    # (c) identical frames: the blinds' differences within a block are not constant
    rows = spec.rows
    per_frame = np.array(blinds, dtype=object).reshape(len(x), rows)
    for block in range(0, len(x), 4):
        diffs = {int(per_frame[block + 1][m] - per_frame[block][m]) for m in range(rows)}
        assert len(diffs) == rows


def test_emission_blinds_follow_the_smooth_law(keypair_1024):
    """The estimator attack on repeated frames: what Alice decrypts for one component over
    k repetitions is its log-density plus independent smooth blinds, so averaging narrows
    it only like R / (6.4 sqrt(k)) (protocols.stages.blinds)."""
    from protocols.stages import blinds as bl

    rng = np.random.default_rng(8)
    speakers = _speakers(rng, components=2)
    x = np.repeat(rng.normal(size=(1, 4)), 64, axis=0)
    spec = sp.SpeakerSpec(sp.SpeakerParams(scoring="logsum"), 4, (2, 2, 2, 2), 64, 1024)
    run = _run(keypair_1024, x, speakers, {"scoring": "logsum"}, record_views=True)
    y, *_ = _alice_view(run, keypair_1024[1], spec)
    q = _true_logs(speakers, x)[0][0][0]
    samples = np.array([y[t][0] / 2**spec.f - q for t in range(64)], dtype=float)
    assert samples.min() >= 0.0 and samples.max() < 20.0  # the blind's window
    estimate = samples.mean() - 10.0  # the blind's mean
    assert abs(estimate) < 5 * bl.estimation_floor(20.0, 64)
    assert samples.std() == pytest.approx(20 / 6, rel=0.3)  # three uniforms: var R^2 / 36


def test_bob_sees_only_ciphertexts_and_public_sizes(keypair_512):
    rng = np.random.default_rng(8)
    speakers = _speakers(rng)
    result = _run(keypair_512, rng.normal(size=(5, 4)), speakers, record_views=True)
    from smc_hmm.crypto import CipherArray, PublicKey

    for _, tag, payload in result.views["bob"]:
        fields = payload if isinstance(payload, list) else [payload]
        for value in fields:
            assert isinstance(value, CipherArray | PublicKey | bytes | int | list), tag
            if tag == "spk.length":
                assert value == 5


def test_bad_inputs_are_typed_errors(keypair_512):
    rng = np.random.default_rng(9)
    speakers = _speakers(rng)
    with pytest.raises(InvalidInputError):
        sp.SpeakerParams(mode="guess")
    with pytest.raises(InvalidInputError):
        sp.SpeakerParams(margin=math.inf)
    with pytest.raises(ConfigError, match="unknown"):
        sp.SpeakerParams.from_config({"treshold": 1.0})
    with pytest.raises(InvalidInputError, match="enrolled"):
        _run(keypair_512, (rng.normal(size=(4, 4)), "mallory"), speakers, {"mode": "verify"})
    with pytest.raises(InvalidInputError, match="features per frame"):
        _run(keypair_512, rng.normal(size=(4, 3)), speakers)
    with pytest.raises(InvalidInputError, match="GMM"):
        from smc_hmm.hmm import GaussianHMM

        hmm = GaussianHMM([1.0, 0.0], [[0.5, 0.5], [0.0, 1.0]], np.zeros((2, 4)), np.ones((2, 4)))
        _run(keypair_512, rng.normal(size=(4, 4)), ([hmm, *speakers[0][1:]], speakers[1]))
    with pytest.raises(InvalidInputError, match="UBM"):
        _run(keypair_512, rng.normal(size=(4, 4)), (speakers[0], ["a", "b", "c", "d"]))
    with pytest.raises(PrecisionError, match="LOGSUM slot"):
        sp.SpeakerSpec(sp.SpeakerParams(precision_bits=96), 4, (3, 3), 5, 256).check_precision()
    with pytest.raises(ProtocolError):
        sp._parse_sizes({"dims": 4, "components": [3], "labels": ["ubm"]})


def test_loaders(tmp_path):
    from smc_hmm.hmm.io import save_models

    models, labels = load_speaker_models()
    save_models(tmp_path / "speakers.npz", models, labels=labels)
    loaded, names = sp.load_speakers("speakers.npz", tmp_path)
    assert names == labels and len(loaded) == 6
    np.save(tmp_path / "x.npy", np.zeros((3, 26)))
    frames, claim = sp.load_utterance({"features": "x.npy", "claim": "theo"}, tmp_path)
    assert frames.shape == (3, 26) and claim == "theo"
    with pytest.raises(ConfigError):
        sp.load_utterance({"frames": "x.npy"}, tmp_path)
    save_models(tmp_path / "unlabelled.npz", models)
    with pytest.raises(ConfigError, match="label"):
        sp.load_speakers("unlabelled.npz", tmp_path)


def _wav(path, seed=4):
    from scipy.io import wavfile

    rng = np.random.default_rng(seed)
    t = np.arange(3200) / 8000
    voice = np.sin(2 * np.pi * 180 * t) * np.hanning(t.size) + 0.05 * rng.normal(size=t.size)
    wavfile.write(path, 8000, (voice * 12000).astype(np.int16))


@pytest.mark.slow
def test_two_processes_over_mutual_tls_with_a_wav(tmp_path):
    """protocol = "speaker" in a parties.toml: Alice's WAV and claim, Bob's model file."""
    from party_support import write_two_party_config

    from smc_hmm.data.speakers import speaker_features_from_wav
    from smc_hmm.hmm.io import save_models
    from smc_hmm.runtime import launch

    _wav(tmp_path / "alice.wav")
    models, labels = load_speaker_models()
    save_models(tmp_path / "speakers.npz", models, labels=labels)
    config = write_two_party_config(
        tmp_path,
        "speaker",
        {"utterance": "alice.wav"},
        {"models": "speakers.npz"},
        {"mode": "verify"},
        key_bits=1024,
        timeout=120,
    )
    text = config.read_text()  # Alice's claim travels with her utterance: an inline table
    config.write_text(
        text.replace(
            'utterance = "alice.wav"', 'utterance = { features = "alice.wav", claim = "theo" }'
        )
    )
    result = launch(config, timeout=300)
    x = speaker_features_from_wav(tmp_path / "alice.wav")
    plain = scores(models, x)
    assert result["bob"] == {
        "accept": verify(plain[labels.index("theo")], plain[-1], 0.0, len(x)),
        "claim": "theo",
        "mode": "verify",
    }
    assert result["alice"] is None


@pytest.mark.slow
def test_a_serving_bob_identifies_clients(tmp_path, capsys):
    """smc-hmm serve with protocol = "speaker": clients identify themselves in turn."""
    from serve_harness import session, write_served_config

    from smc_hmm.hmm.io import save_models
    from smc_hmm.runtime import load_config
    from smc_hmm.runtime.serve import Server

    models, labels = load_speaker_models()
    save_models(tmp_path / "speakers.npz", models, labels=labels)
    path = write_served_config(
        tmp_path / "parties.toml",
        "speaker",
        {"models": "speakers.npz"},
        {"mode": "identify"},
        timeout=60,
    )
    utterances = load_speaker_test_utterances([30, 930])  # a george, a theo
    with Server(load_config(path), "bob", port=0) as server:
        for name, u in zip(["alice", "carol"], utterances):
            x = u.features[:8]
            out = session("speaker", server.address, tmp_path / "certs", x, name, timeout=60)
            assert out["output"]["speaker"] == identify(scores(models, x), labels, "ubm", -2.0, 8)
        # the command line as a client: smc-hmm speaker identify --server HOST:PORT
        import json

        from smc_hmm.cli import main

        _wav(tmp_path / "carol.wav")
        host, port = server.address
        argv = ["speaker", "identify", "--audio", str(tmp_path / "carol.wav"), "--server",
                f"{host}:{port}", "--certs", str(tmp_path / "certs"), "--name", "carol",
                "--key-bits", "512", "--insecure", "--json", "-"]  # fmt: skip
        assert main(argv) == 0
        report = json.loads(capsys.readouterr().out)  # --json -: the report alone
        assert report["session"] >= 3 and set(report["secure"]) >= {"speaker", "mode"}


def test_bench_speaker_smoke(tmp_path):
    """``smc-hmm bench speaker`` on a tiny configuration: speed side by side, the sweep."""
    from bench_support import bench_parser, run_bench

    from smc_hmm.bench import speaker as bench

    code, data = run_bench(
        bench,
        ["--key-bits", "512", "--insecure", "--workers", "1", "--frames", "6", "--repeats", "1",
         "--utterances", "1", "--skip-accuracy", "--modes", "verify", "--offline"],
        tmp_path / "speaker.json",
    )  # fmt: skip
    assert code == 0  # 512-bit runs carry no speed target
    assert data["sweep"]["verify"]["equal"] == 1
    speed = data["speed"]["verify"]
    assert speed["rounds_per_frame"] > speed["rounds"] and speed["logsum_seconds"] > 0
    assert speed["online_seconds"] > 0 and speed["offline_seconds"] > 0
    with pytest.raises(InvalidInputError, match="modes"):
        bench.main(
            bench_parser(bench).parse_args(["--key-bits", "512", "--insecure", "--modes", "guess"])
        )


def test_bench_speaker_sweep_records_resume_without_rerunning(tmp_path, monkeypatch):
    """``--records``: every trial is appended as it finishes; a second run with the same
    file reads them back instead of running them again, and a broken line is refused."""
    import argparse
    import json

    from smc_hmm.bench import speaker as bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    records = tmp_path / "sweep.jsonl"
    argv = ["--key-bits", "512", "--insecure", "--workers", "1", "--skip-speed",
            "--skip-accuracy", "--utterances", "2", "--modes", "verify",
            "--records", str(records), "--json", str(tmp_path / "a.json")]  # fmt: skip
    assert bench.main(parser.parse_args(argv)) == 0
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    assert [(r["mode"], r["position"]) for r in lines] == [("verify", 0), ("verify", 625)]
    assert all(r["secure"] == r["plain"] and r["max_rel_err"] <= 1e-9 for r in lines)
    ran = []
    monkeypatch.setattr(bench, "_trial", lambda *a, **k: ran.append(a) or {})
    argv[-1] = str(tmp_path / "b.json")
    assert bench.main(parser.parse_args(argv)) == 0
    assert ran == []  # both trials came from the records
    again = json.loads((tmp_path / "b.json").read_text())["sweep"]["verify"]
    assert again["equal"] == 2 and again["utterances"] == 2
    records.write_text(records.read_text() + "{not json\n")
    with pytest.raises(InvalidInputError, match="not a sweep record"):
        bench.main(parser.parse_args(argv))


def test_bench_speaker_shards_split_a_sweep_over_one_records_file(tmp_path, monkeypatch):
    import argparse
    import json

    from smc_hmm.bench import speaker as bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    records = tmp_path / "sweep.jsonl"
    argv = ["--key-bits", "512", "--insecure", "--workers", "1", "--skip-speed",
            "--skip-accuracy", "--utterances", "2", "--modes", "verify",
            "--records", str(records)]  # fmt: skip
    assert bench.main(parser.parse_args([*argv, "--shard", "1/2"])) == 0
    assert [json.loads(x)["position"] for x in records.read_text().splitlines()] == [625]
    assert bench.main(parser.parse_args([*argv, "--shard", "0/2"])) == 0
    ran = []
    monkeypatch.setattr(bench, "_trial", lambda *a, **k: ran.append(a) or {})
    assert bench.main(parser.parse_args(argv)) == 0  # both shards' trials are on record
    assert ran == [] and len(records.read_text().splitlines()) == 2
    with pytest.raises(InvalidInputError, match="shard"):
        bench.main(parser.parse_args([*argv, "--shard", "2/2"]))


@pytest.mark.parametrize("mode", ["identify", "verify"])
def test_speaker_command_prints_both_decisions_as_json(tmp_path, capsys, mode):
    """smc-hmm speaker identify|verify --audio FILE.wav: one result line on stdout, the
    tables on stderr; --json PATH the JSON with the secure and the plaintext decision
    (512-bit INSECURE keys)."""
    import json

    from smc_hmm.cli import main

    _wav(tmp_path / "voice.wav", seed=9)
    argv = ["speaker", mode, "--audio", str(tmp_path / "voice.wav"), "--key-bits", "512",
            "--insecure", "--workers", "1", "--json", str(tmp_path / "out.json")]  # fmt: skip
    if mode == "verify":
        argv += ["--claim", "george"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 1 and "agrees" in captured.out
    assert "cost per party" in captured.err  # the tables on stderr
    report = json.loads((tmp_path / "out.json").read_text())
    if mode == "identify":  # identify names the closest speaker, and says so
        assert "does not verify" in report["note"]
        views = tmp_path / "views"  # --views: what each party received
        assert main([*argv, "--views", str(views)]) == 0
        capsys.readouterr()
        bob = json.loads((views / "bob.json").read_text())
        assert not bob["holds_key"] and all(
            f["kind"] != "decrypted"
            for m in bob["messages"]
            for f in (m["fields"] if isinstance(m["fields"], list) else [m["fields"]])
        )
    key = "speaker" if mode == "identify" else "accept"
    assert report["agree"] and report["secure"][key] == report["plaintext"][key]
    assert report["secure"]["learned_by"] == ("alice" if mode == "identify" else "bob")
    assert "parties" in report["cost"] and report["result"] == report["secure"]
    assert main(["speaker", "verify", "--audio", str(tmp_path / "voice.wav")]) == 2


@pytest.mark.parametrize("mode", ["identify", "verify", "anonymous"])
def test_the_offline_plan_counts_every_randomizer(keypair_512, mode):
    """``randomizers_needed`` (the descriptor's offline plan) equals what a run draws."""
    rng = np.random.default_rng(10)
    speakers = _speakers(rng)
    x = rng.normal(size=(9, 4))
    utterance = x if mode == "identify" else (x, "s1")
    for params in ({"mode": mode}, {"mode": mode, "reveal_scores": True, "frames_per_round": 2}):
        ops = _run(keypair_512, utterance, speakers, params).cost.to_dict()["parties"]
        drawn = {
            "alice": ops["alice"]["ops"]["encrypt"],
            "bob": ops["bob"]["ops"]["encrypt"] + ops["bob"]["ops"]["rerandomize"],
        }
        plan = sp.PROTOCOL.randomizers(
            sp.SpeakerParams(**params), 512, {"alice": utterance, "bob": speakers}
        )
        assert plan == drawn


def test_peer_sizes_are_bounded_before_any_work():
    """Bob's declared sizes and Alice's declared length obey smc_hmm.limits."""
    from smc_hmm.errors import ParameterBoundError

    huge = {"dims": 10**6, "components": [8, 8], "labels": ["a", "ubm"]}
    with pytest.raises(ParameterBoundError, match="max_width"):
        sp._parse_sizes(huge)
    many = {"dims": 26, "components": [10**5, 10**5], "labels": ["a", "ubm"]}
    with pytest.raises(ParameterBoundError, match="max_states"):
        sp._parse_sizes(many)


# -- anonymous verification of the claimed speaker -------------------------------------------


def test_anonymous_transcripts_are_the_same_for_every_claim(keypair_512):
    """Bob's view (and Alice's) is the same frame for frame whichever speaker Alice claims,
    for the same speech and models and for different ones: the claim reaches the decision
    circuit only as Alice's index bits, padded by the OT pool's secret bits (``gc.choice``),
    and every speaker's score goes in."""
    rng = np.random.default_rng(11)
    speakers = _speakers(rng)
    x = rng.normal(1.5, 1.0, (5, 4))
    other_x, other_speakers = _cases(rng, 1)[0]
    cases = [(x, speakers, claim) for claim in ("s0", "s1", "s2")]
    cases.append((other_x, other_speakers, "s1"))
    decisions = []

    def run(case, wrap):
        frames, models, claim = case
        result = _run(keypair_512, (frames, claim), models, {"mode": "anonymous"},
                      wrap_transport=wrap)  # fmt: skip
        decisions.append(result["bob"]["accept"])

    spec = sp.SpeakerSpec(sp.SpeakerParams(mode="anonymous"), 4, (3, 3, 3, 3), 5, 512)
    frames = assert_same_transcripts(run, cases, sp.declared_messages(spec), keys=[keypair_512])
    tags = _tags(frames[("bob", "alice")])
    assert "mix.check" in tags and "spk.select" not in tags and "spk.claim" not in tags
    plain = best_component_scores(speakers[0], x)
    want = [verify(plain[k], plain[-1], 0.0, len(x)) for k in range(3)]
    assert decisions[:3] == want


def _tags(frames) -> list[str]:
    import msgpack

    return [msgpack.unpackb(f, raw=False, strict_map_key=False)["t"] for f in frames]


def test_an_impostor_claim_is_rejected_exactly_when_plain_verification_rejects_it(keypair_1024):
    """Real speech: a nicolas recording claimed as nicolas and as theo (and a george
    recording claimed as george and as nicolas).  Anonymous verification decides every
    claim as plain verification does, and as secure verification: the impostor claims are
    rejected although the voice is an enrolled speaker's (the old rule accepted them)."""
    models, labels = load_speaker_models()
    trials = [(50, "nicolas"), (50, "theo"), (3, "george"), (3, "nicolas")]
    utterances = {u: load_speaker_test_utterances([u])[0].features[:10] for u in (3, 50)}
    seen = set()
    for position, claim in trials:
        x = utterances[position]
        plain = scores(models, x)
        want = verify(plain[labels.index(claim)], plain[-1], 0.0, len(x))
        anonymous = _run(keypair_1024, (x, claim), (models, labels), {"mode": "anonymous"})
        assert anonymous["bob"] == {"accept": want, "mode": "anonymous"}
        assert anonymous["alice"] is None
        verified = _run(keypair_1024, (x, claim), (models, labels), {"mode": "verify"})
        assert verified["bob"]["accept"] is want
        some = max(plain[:-1]) - plain[-1] > 0  # the old anonymous rule
        seen.add((want, some))
    assert (False, True) in seen and (True, True) in seen  # impostors rejected, targets not


def test_the_anonymous_rule_equals_plain_verification_on_every_test_utterance_and_claim():
    """In plaintext, the decision rule the secure protocol computes (scores rounded to
    2^-16 nats as the shares are, then the decision stage's ``claimed`` rule on integers)
    equals plain verification's on all 1,250 bundled test utterances times every claim,
    at the default threshold and at the all-speaker EER's."""
    from smc_hmm.data.speakers import decision

    models, labels = load_speaker_models()
    speakers = labels[:-1]
    tests = [(scores(models, u.features), len(u.features)) for u in load_speaker_test_utterances()]
    changed = trials = 0
    for threshold in (0.0, -1.29):
        anonymous = sp.SpeakerParams(mode="anonymous", threshold=threshold)
        verifying = sp.SpeakerParams(mode="verify", threshold=threshold)
        for sc, t in tests:
            some = max(sc[:-1]) - sc[-1] > threshold * t
            for claim in speakers:
                want = decision("verify", sc, labels, verifying, t, claim)
                assert sp.plain_decision(anonymous, sc, labels, t, claim) is want
                assert sp.plain_decision(verifying, sc, labels, t, claim) is want
                assert decision("anonymous", sc, labels, anonymous, t, claim) is want
                changed += some and not want  # accepted by the old rule, not by the claim's
                trials += 1
    assert trials == 2 * 1250 * 5
    assert changed > 1000  # the old rule accepted these impostor claims


def test_claims_are_refused_where_they_mean_nothing(keypair_512):
    rng = np.random.default_rng(12)
    speakers = _speakers(rng)
    x = rng.normal(size=(4, 4))
    with pytest.raises(InvalidInputError, match="takes no claim"):
        _run(keypair_512, (x, "s0"), speakers, {"mode": "identify"})
    with pytest.raises(InvalidInputError, match="checks a claim"):
        _run(keypair_512, x, speakers, {"mode": "anonymous"})
    with pytest.raises(InvalidInputError, match="enrolled"):
        _run(keypair_512, (x, "ubm"), speakers, {"mode": "anonymous"})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["identify", "--claim", "theo"], "--claim means nothing with identify"),
        (["anonymous"], "anonymous needs --claim"),
        (["verify"], "verify needs --claim"),
        (["verify", "--claim", "theo", "--margin", "-1"], "--margin is for identify"),
        (["identify", "--threshold", "0"], "--threshold is for verify and anonymous"),
    ],
)
def test_flags_that_mean_nothing_are_one_line_errors(tmp_path, capsys, argv, message):
    """Before any work: exit 2 and one line on standard error, no traceback."""
    from smc_hmm.cli import main

    _wav(tmp_path / "voice.wav")
    mode, *rest = argv
    full = ["speaker", mode, "--audio", str(tmp_path / "voice.wav"), *rest,
            "--key-bits", "512", "--insecure"]  # fmt: skip
    assert main(full) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1


def test_anonymous_command_verifies_the_claim(tmp_path, capsys):
    """smc-hmm speaker anonymous --claim NAME: the secure bit equals plain verification of
    NAME, for a target claim and for an impostor claim."""
    import json

    from smc_hmm.cli import main

    _wav(tmp_path / "voice.wav", seed=9)
    for claim in ("george", "theo"):
        argv = ["speaker", "anonymous", "--audio", str(tmp_path / "voice.wav"), "--claim",
                claim, "--key-bits", "512", "--insecure", "--workers", "1",
                "--json", "-"]  # fmt: skip
        assert main(argv) == 0
        report = json.loads(capsys.readouterr().out)  # --json -: the report alone
        assert report["agree"] and report["claim"] == claim
        assert report["secure"]["learned_by"] == "bob"
        want = report["plaintext"]["log_likelihoods"]
        t = report["frames"]
        assert report["secure"]["accept"] is verify(want[claim], want["ubm"], 0.0, t)


# -- constant work in Alice's secret-dependent steps -----------------------------------------------


class _CountingContext:
    """A stand-in for fixedlog's MPFR context that counts every call by name."""

    def __init__(self, inner, counts):
        self._inner, self._counts = inner, counts

    def __getattr__(self, name):
        method = getattr(self._inner, name)

        def counted(*args):
            self._counts[name] = self._counts.get(name, 0) + 1
            return method(*args)

        return counted


def _operations(monkeypatch, run):
    """The MPFR calls and roundings ``run()`` makes in protocols.stages.fixedlog."""
    from protocols.stages import fixedlog

    counts: dict[str, int] = {}
    monkeypatch.setattr(fixedlog, "_HP", _CountingContext(fixedlog._HP, counts))
    rounding = fixedlog.round_mpfr

    def counted_round(x):
        counts["round"] = counts.get("round", 0) + 1
        return rounding(x)

    monkeypatch.setattr(fixedlog, "round_mpfr", counted_round)
    out = run()
    monkeypatch.undo()
    return counts, out


def test_alice_does_the_same_operations_for_far_behind_and_near_components(monkeypatch):
    """No data-dependent early return: Alice's LOGSUM exponentials (one per component,
    round(2^g exp(y - c))) make the same MPFR calls and roundings whether a component is
    1 nat or 10^6 nats behind its frame's best one (the old exp_fixed returned 0 at once
    beyond g + 2 nats: 0.5 us instead of 9.1 us)."""
    from protocols.stages import logsum
    from protocols.stages.fixedlog import exp_fixed

    spec = sp.SpeakerSpec(sp.SpeakerParams(), 4, (3, 3), 1, 1024)
    plan, prec, f = spec.round_plan(range(1)), spec.params.precision, spec.f
    near = [0, -(1 << f), -(2 << f), 5 << f, (5 << f) - 7, 4 << f]
    far = [0, -(10**6 << f), -(2 << f), 5 << f, -(10**4 << f), 4 << f]
    counts = {}
    for name, u in (("near", near), ("far", far)):
        counts[name], (values, _) = _operations(
            monkeypatch, lambda u=u: logsum.alice_values(u, plan, prec)
        )
    assert counts["near"] == counts["far"]
    assert counts["far"]["exp"] == 6 and counts["far"]["round"] == 6
    assert values[1] == 0 and values[4] == 0  # the far ones still round to 0
    one = {}
    for name, e in (("near", -(1 << f)), ("far", -(10**9 << f)), ("edge", -((plan.g + 2) << f))):
        one[name], value = _operations(monkeypatch, lambda e=e: exp_fixed(e, f, plan.g))
        assert (value == 0) is (name != "near")
    assert one["near"] == one["far"] == one["edge"] == {"div": 1, "exp": 1, "mul": 1, "round": 1}


def test_speaker_refuses_a_recording_longer_than_max_frames(tmp_path, capsys):
    """A documented length bound, as keyword's and serve's, before any key is made."""
    from smc_hmm.cli import main

    _wav(tmp_path / "voice.wav", seed=9)
    argv = ["speaker", "identify", "--audio", str(tmp_path / "voice.wav"), "--key-bits", "512",
            "--insecure", "--max-frames", "3"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--max-frames 3" in err and len(err.strip().splitlines()) == 1
