"""protocols.keyword: secure keyword recognition (forward + argmax), both modes, against the
plaintext decision, on synthetic models and on the bundled real speech."""

from __future__ import annotations

import numpy as np
import pytest
from bound_support import assert_uniform_view
from party_support import run_alice_and_bob
from transcript_harness import assert_same_transcripts

from protocols import keyword as kw
from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm import GaussianHMM, log_likelihood

_models = kw.example_models  # three two-state Gaussian HMMs, means 3 apart per keyword


def _run(keypair, frames, keywords, mode, **kwargs):
    """The thesis's forward scoring in the argmax ``mode`` (scoring = "forward")."""
    params = {"mode": mode, "scoring": "forward"}
    return run_alice_and_bob(kw.PROTOCOL, params, frames, keywords, keypair, timeout=60, **kwargs)


@pytest.mark.parametrize("mode", ["fast", "private"])
def test_alice_learns_the_plaintext_decision(keypair_1024, mode):
    rng = np.random.default_rng(7)
    models = _models(rng)
    for truth in (0, 2):
        frames, _ = models[truth].sample(6, rng)
        result = _run(keypair_1024, frames, (models, ["a", "b", "c"]), mode)
        plain = int(np.argmax([log_likelihood(m, frames) for m in models]))
        assert result["alice"] == {"keyword": "abc"[plain], "index": plain, "mode": mode}
        assert result["bob"] is None


@pytest.mark.parametrize("mode", ["fast", "private"])
def test_transcripts_do_not_depend_on_speech_or_models(keypair_1024, mode):
    rng = np.random.default_rng(8)
    cases = [(rng.normal(size=(4, 3)), _models(rng)) for _ in range(2)]

    def run(case, wrap):
        frames, models = case
        _run(keypair_1024, frames, models, mode, wrap_transport=wrap)

    params = kw.KeywordParams(mode=mode, scoring="forward")
    # the forward's frames carry only ciphertexts and public fields: no declarations needed
    declared = kw.declared_messages(params, count=3, length=4)
    frames = assert_same_transcripts(run, cases, declared, keys=[keypair_1024])
    assert ("alice", "bob") in frames


def test_bundled_speech_one_utterance(keypair_1024):
    """Real speech: the bundled diagonal digit models on a bundled test utterance."""
    from smc_hmm.data import load_bundled_models, load_test_utterances

    models, labels = load_bundled_models("diag")
    utterance = load_test_utterances()[0]
    frames = np.asarray(utterance.features)[:30]
    result = _run(keypair_1024, frames, (models[:4], labels[:4]), "fast")
    plain = int(np.argmax([log_likelihood(m, frames) for m in models[:4]]))
    assert result["alice"]["keyword"] == labels[plain]


def test_bad_inputs():
    with pytest.raises(InvalidInputError):
        kw.KeywordParams(mode="slow")
    with pytest.raises(InvalidInputError, match="private mode"):
        kw.KeywordParams(scoring="viterbi", mode="fast")
    with pytest.raises(InvalidInputError):
        kw._models_and_labels(([object()], ["only one"]))


@pytest.mark.parametrize("mode", ["fast", "private"])
def test_spotting_with_a_garbage_model_and_a_margin(keypair_1024, mode):
    """Keywords one/four/seven and the bundled garbage model: a keyword is named only
    if it beats the garbage model by more than the margin, as in plaintext."""
    from smc_hmm.data import load_bundled_models, load_garbage_model, load_test_utterances

    models, labels = load_bundled_models("diag")
    garbage, _ = load_garbage_model("diag")
    keywords = ([models[1], models[4], models[7], garbage], ["one", "four", "seven", "noise"])
    utterances = load_test_utterances()
    margin = 71.5
    decisions = []
    for index in (25, 50, 175):  # a "one", a "two" (not a keyword), a "seven"
        frames = utterances[index].features[:12]
        scores = [log_likelihood(m, frames) for m in keywords[0]]
        best = int(np.argmax(scores[:3]))
        plain = keywords[1][best] if scores[best] > scores[3] + margin else None
        params = {"mode": mode, "garbage": "noise", "margin": margin}
        result = run_alice_and_bob(kw.PROTOCOL, params, frames, keywords, keypair_1024, timeout=60)
        assert result["alice"]["keyword"] == plain
        decisions.append(plain)
    # the margin matters here: "seven" beats the garbage model, but by less than 71.5 nats
    assert decisions == ["one", None, None]


def test_spotting_parameters_are_checked():
    with pytest.raises(InvalidInputError, match="needs a garbage model"):
        kw.KeywordParams(margin=3.0)
    with pytest.raises(InvalidInputError, match="margin"):
        kw.KeywordParams(garbage="noise", margin=-1.0)
    from smc_hmm.errors import ConfigError

    with pytest.raises(ConfigError, match="margin"):
        kw.KeywordParams.from_config({"garbage": "noise", "margin": 1e6})


def test_fit_frames_pads_with_the_last_frame_or_cuts():
    from smc_hmm.bench.keyword import fit_frames

    x = np.arange(6.0).reshape(3, 2)
    assert fit_frames(x, 2).tolist() == [[0, 1], [2, 3]]
    assert fit_frames(x, 5).tolist() == [[0, 1], [2, 3], [4, 5], [4, 5], [4, 5]]
    with pytest.raises(InvalidInputError):
        fit_frames(x, 0)


def test_bench_keyword_smoke(tmp_path):
    """The Table 4.1 bench on a tiny configuration: decisions, log-likelihoods, naive path."""
    from bench_support import bench_parser, run_bench

    from smc_hmm.bench import keyword as bench

    # exit status: the 2048-bit targets, not met by a 1024-bit toy run
    _, data = run_bench(
        bench,
        ["--key-bits", "1024", "--insecure", "--words", "2", "--frames", "8", "--workers", "1"],
        tmp_path / "keyword.json",
    )
    assert data["benchmark"] == "keyword" and data["params"]["frames"] == 8
    assert data["all_equal"] and data["runs"][0]["frames"] == 8
    # side by side: the default (Viterbi scoring, garbled), then the thesis's forward
    # scoring: v2 private, v2 fast, v1 private
    configs = [(r["recursion"], r["mode"]) for r in data["runs"]]
    assert configs == [("viterbi", "private"), ("v2", "private"), ("v2", "fast"), ("v1", "private")]
    assert set(data["medians"]) == {"viterbi private", "v2 private", "v2 fast", "v1 private"}
    assert data["median_seconds"] == data["medians"]["viterbi private"]["seconds"]
    v2, v1 = data["medians"]["v2 private"], data["medians"]["v1 private"]
    assert v2["recursion_decryptions"] < v1["recursion_decryptions"]
    assert data["medians"]["viterbi private"]["recursion_decryptions"] == 0
    assert {"private within slack of fast", "the default at most half of v2 private"} <= set(
        data["checks"]
    )
    assert data["max_relative_error"] <= 1e-9
    assert data["naive_seconds"] > 0 and data["naive_ratio"] > 0
    phases = data["cost"]["parties"]["bob"]["phases"]
    assert {"emissions", "recursion"} <= set(phases)
    bad = bench_parser(bench).parse_args(["--key-bits", "1024", "--insecure", "--states", "3"])
    with pytest.raises(InvalidInputError, match="8-state"):
        bench.main(bad)


# -- what each party can compute from its view (attacks that must fail) ------------------------


def test_fast_mode_hides_the_slope_from_the_gcd_attack(keypair_1024):
    """Alice decrypts a s_k + b + e_k: with fresh e_k in [0, a) per label the pairwise
    differences share no factor a, so their gcd does not give the exact score
    differences (it did when every label shared one slope and offset)."""
    import math

    rng = np.random.default_rng(21)
    models = _models(rng, count=4)
    frames, _ = models[1].sample(6, rng)
    result = _run(keypair_1024, frames, models, "fast", record_views=True)
    (payload,) = [p for _, tag, p in result.views["alice"] if tag == "kw.fast"]
    values = sorted(int(v) for v in payload[0].decrypt_ints(keypair_1024[1]))
    diffs = [y - x for x, y in zip(values, values[1:])]
    g = math.gcd(*diffs)
    assert g < 2**24  # the slope a is >= 2^32: the gcd is not it
    # and the differences divided by that gcd are not the score differences (in units)
    scores = sorted(log_likelihood(m, frames) for m in models)
    unit = 2.0 ** -kw.KeywordParams().forward.precision.f
    true_units = [(y - x) / unit for x, y in zip(scores, scores[1:])]
    assert not np.allclose([d / g for d in diffs], true_units, rtol=1e-6)


def _drift_models():
    """1-D two-state models with A = I: state 1 (wide) falls ~2.3 nats behind per frame
    at x = 0, then alone explains x = 50: the v1 recursion drops it at 512 bits."""
    wide = GaussianHMM([0.5, 0.5], np.eye(2), [[0.0], [0.0]], [[1.0], [100.0]])
    narrow = GaussianHMM([0.5, 0.5], np.eye(2), [[0.0], [1.0]], [[1.0], [2.0]])
    return [wide, narrow]


def test_a_refusal_is_invisible_to_bob(keypair_512):
    """v1 at 512 bits: one utterance is refused by Alice's precision check, the other
    accepted.  Bob's view (every frame he receives) is the same in both runs: Alice
    finishes the argmax before she raises."""
    from smc_hmm.errors import PrecisionError

    refused = np.array([[0.0]] * 100 + [[50.0]])
    accepted = np.array([[0.0], [3.0]] * 50 + [[0.0]])  # both states stay close
    params = {"mode": "private", "recursion": "v1"}
    outcomes = []

    def run(frames, wrap):
        try:
            run_alice_and_bob(
                kw.PROTOCOL,
                params,
                frames,
                _drift_models(),
                keypair_512,
                timeout=120,
                wrap_transport=wrap,
            )
            outcomes.append("accepted")
        except PrecisionError:
            outcomes.append("refused")

    declared = kw.declared_messages(kw.KeywordParams.from_config(params), count=2, length=101)
    frames = assert_same_transcripts(run, [refused, accepted], declared, keys=[keypair_512])
    assert outcomes == ["refused", "accepted"]
    assert len(frames[("bob", "alice")]) > 10  # the argmax ran in both


def test_v2_accepts_the_utterance_v1_refuses(keypair_512):
    frames = np.array([[0.0]] * 100 + [[50.0]])
    result = _run(keypair_512, frames, _drift_models(), "private")
    plain = int(np.argmax([log_likelihood(m, frames) for m in _drift_models()]))
    assert result["alice"]["index"] == plain


def _near_tie(rng, gap: float):
    """Two models whose plaintext log-likelihoods on ``frames`` differ by about ``gap``."""
    base = _models(rng, count=1)[0]
    frames, _ = base.sample(8, rng)

    def shifted(eps):
        return GaussianHMM(base.startprob, base.transmat, base.means + eps, base.covars)

    def diff(eps):
        return log_likelihood(shifted(eps), frames) - log_likelihood(base, frames)

    slope = diff(1e-4) / 1e-4
    eps = gap / slope
    return [base, shifted(eps)], frames, diff(eps)


@pytest.mark.parametrize("gap", [3e-6, -3e-6, 1.5e-6, -1.5e-6])
def test_private_mode_decides_near_ties_like_plaintext(keypair_1024, gap):
    """Top two scores more than 1e-6 nats apart: the secure decision is the plaintext one."""
    rng = np.random.default_rng(int(abs(gap) * 1e7) + (gap > 0))
    models, frames, actual = _near_tie(rng, gap)
    assert 1e-6 < abs(actual) < 1e-5
    result = _run(keypair_1024, frames, models, "private")
    assert result["alice"]["index"] == (1 if actual > 0 else 0)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [["--transport", "tcp"], ["--short-randomness"]])
def test_bench_keyword_over_tcp_and_with_short_randomness(tmp_path, extra):
    """Over TCP Alice's process precomputes the planned randomizers in an offline phase
    (``[compute] randomizers``), as the in-process run does; --short-randomness draws
    Alice's with 224-bit exponents.  Either way the decision is the plaintext one."""
    from bench_support import run_bench

    from smc_hmm.bench import keyword as bench

    _, data = run_bench(
        bench,
        ["--key-bits", "1024", "--insecure", "--words", "2", "--frames", "8", "--workers", "2",
         "--mode", "private", "--recursion", "v2", "--naive-frames", "1", *extra],
        tmp_path / "keyword.json",
    )  # fmt: skip
    assert data["all_equal"] and data["runs"][0]["offline_seconds"] > 0
    assert data["params"]["short_randomness"] == ("--short-randomness" in extra)
    assert data["params"]["transport"] == ("tcp" if "tcp" in extra else "local")


def test_a_config_names_the_bundled_models_as_the_command_line_does(tmp_path):
    """``models = "diag"`` / ``"full"`` in a parties.toml loads the bundled digit HMMs,
    like ``smc-hmm keyword --models``; a path still loads a file."""
    from protocols import keyword as kw
    from smc_hmm.data import load_bundled_models
    from smc_hmm.hmm.io import save_models

    for kind in ("diag", "full"):
        models, labels = kw.load_keywords(kind, tmp_path)
        want, want_labels = load_bundled_models(kind)
        assert labels == want_labels and len(models) == len(want) == 10
        assert models[0].covariance_type == kind
    save_models(tmp_path / "two.npz", want[:2], labels=want_labels[:2])
    models, labels = kw.load_keywords("two.npz", tmp_path)
    assert labels == want_labels[:2]


# -- scoring = "viterbi": the recursion and the argmax in circuits Bob garbles ---------------


def _run_viterbi(keypair, frames, keywords, extra=None, **kwargs):
    params = {"scoring": "viterbi", **(extra or {})}
    return run_alice_and_bob(kw.PROTOCOL, params, frames, keywords, keypair, timeout=120, **kwargs)


def test_viterbi_scoring_names_the_plaintext_viterbi_winner(keypair_1024):
    """Each keyword scored by its best path (smc_hmm.hmm.viterbi): the secure decision is
    the plaintext one; with a garbage model its margin decides "no keyword" as there."""
    from smc_hmm.hmm import viterbi

    rng = np.random.default_rng(7)
    models = _models(rng)
    labels = ["a", "b", "c"]
    for truth in (0, 2):
        frames, _ = models[truth].sample(6, rng)
        plain = [viterbi(m, frames)[1] for m in models]
        out = _run_viterbi(keypair_1024, frames, (models, labels))["alice"]
        assert out["index"] == int(np.argmax(plain))
        for margin in (0.0, 1e3):  # the garbage model "c" carries the margin
            got = _run_viterbi(
                keypair_1024, frames, (models, labels), {"garbage": "c", "margin": margin}
            )["alice"]
            scores = np.array(plain) + np.array([0.0, 0.0, margin])
            best = int(np.argmax(scores))
            assert got["keyword"] == (None if best == 2 else labels[best])


def test_viterbi_scoring_shows_alice_only_uniform_masked_emissions(keypair_1024):
    """The chosen-frame attack of docs/security.md against keyword recognition: under
    viterbi scoring (the default) everything Alice decrypts is one message of emissions
    under uniform masks and their MAC slots (a KS test against Bob's true log-densities);
    the forward scoring, the control, shows her blinded per-step values she can average
    (tests/protocols/test_stages.py)."""

    from protocols.stages import decoding as vit

    rng = np.random.default_rng(3)
    models = _models(rng)
    frames = np.repeat(np.array([np.zeros(3), np.eye(3)[0], -np.eye(3)[0]]), 4, axis=0)
    result = _run_viterbi(keypair_1024, frames, (models, ["a", "b", "c"]), record_views=True)
    decryptable = [t for _, t, p in result.views["alice"] if hasattr(p, "decrypt_ints")]
    assert decryptable == ["bd.values"]
    params = kw.viterbi_params(kw.KeywordParams(), ["a", "b", "c"])
    plan = vit.Plan(params, vit.Structure.of(vit.as_decoders(models)), len(frames), 1024)
    bound = plan.bound_plan
    (emit,) = [p for _, t, p in result.views["alice"] if t == "bd.values"]
    truth = np.concatenate([m.log_emission(frames) for m in models], axis=1)
    assert_uniform_view(emit, keypair_1024, bound, truth * 2.0**plan.scale)


def test_labels_alone_locate_a_decision_boundary_one_bit_a_session(keypair_512):
    """What the outputs alone reveal (docs/security.md): a client who chooses her frames
    and reads only the label locates where the decision between two models changes along
    a line of inputs by bisection.  Every secure label is the plaintext one, so each
    session gives her one bit of the boundary and no more: after n sessions she knows it
    to width / 2^n (the true boundary, found in plaintext, lies in her interval), the rate
    n log2(K + 1) that serve's session budget bounds."""
    from smc_hmm.hmm import viterbi

    rng = np.random.default_rng(12)
    models = _models(rng, count=2, dims=2)

    def plain(v):
        frames = np.full((3, 2), v)
        return int(np.argmax([viterbi(m, frames)[1] for m in models]))

    def secure(v):
        out = _run_viterbi(keypair_512, np.full((3, 2), v), (models, ["a", "b"]))["alice"]
        assert out["index"] == plain(v)  # the label, and only the label
        return out["index"]

    lo, hi = -4.0, 7.0
    left = plain(lo)
    assert left != plain(hi)
    for _ in range(6):  # six sessions, six bits
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if secure(mid) == left else (lo, mid)
    a, b = -4.0, 7.0
    for _ in range(50):  # the boundary itself, in plaintext
        m = (a + b) / 2
        a, b = (m, b) if plain(m) == left else (a, m)
    assert lo <= a <= hi and hi - lo == pytest.approx(11.0 / 2**6)


@pytest.mark.parametrize("params", [{"scoring": "forward"}])
def test_the_offline_plan_counts_every_randomizer(keypair_512, params):
    """``randomizers_needed`` (the offline phase's plan) equals what a run draws, for the
    thesis's forward scoring (the default's: the conformance suite's exact pools)."""
    rng = np.random.default_rng(13)
    models = _models(rng)
    frames = rng.normal(size=(7, 3))
    result = run_alice_and_bob(kw.PROTOCOL, params, frames, models, keypair_512)
    ops = result.cost.to_dict()["parties"]
    drawn = {
        "alice": ops["alice"]["ops"].get("encrypt", 0),
        "bob": ops["bob"]["ops"].get("encrypt", 0) + ops["bob"]["ops"].get("rerandomize", 0),
    }
    plan = kw.PROTOCOL.randomizers(kw.KeywordParams.from_config(params), 512, {
        "alice": frames, "bob": models
    })  # fmt: skip
    assert plan == drawn
