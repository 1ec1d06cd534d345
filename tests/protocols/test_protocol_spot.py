"""protocols.spotting: keyword spotting (2.2.3 (a)) and speech mining (2.2.3 (b)) on the
bundled continuous speech -- secure decisions equal the plaintext ones, Bob's view does
not depend on whether or which keyword occurs, and the command, the benchmark and two OS
processes run it like every plugin."""

from __future__ import annotations

import json

import numpy as np
import pytest
from transcript_harness import assert_same_transcripts

from protocols import spotting as sp
from protocols import viterbi as viterbi_protocol
from protocols.stages import decoding as vit
from smc_hmm.data import DIGIT_WORDS
from smc_hmm.data.continuous import load_continuous_test, spotting_model
from smc_hmm.errors import ConfigError, InvalidInputError, ProtocolError
from smc_hmm.hmm.spotting import SpottingLayout, compose, segment_of, spot
from smc_hmm.runtime import run_protocol

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")


@pytest.fixture(scope="module")
def bundled():
    return sp.load_keyword_models("bundled", None)


def _spot(keypair, frames, models, keywords, **kwargs):
    return run_protocol(
        sp.PROTOCOL,
        {"keywords": keywords},
        {"alice": ("alice", frames), "bob": ("bob", models)},
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=600,
        **kwargs,
    )


def test_the_composite_and_its_public_layout():
    """The bundled composite is the F-K loop: one filler copy (a pause and the other nine
    digits' 8-state models), K entered from the pause or the filler's last state, K's
    last state returning to the pause; one emission row per state."""
    model, layout = spotting_model(7)
    assert layout == SpottingLayout(73, 8, loop=True) and layout.states == model.n_states == 81
    assert layout.rows == tuple(range(81))
    assert list(layout.keyword_states) == list(range(73, 81))
    a = model.transmat
    assert a[0, 73] > 0 and a[72, 73] > 0 and a[80, 0] > 0  # pause/word end -> K -> pause
    assert np.allclose(a.sum(axis=1), 1)
    with pytest.raises(InvalidInputError):
        compose(model, model, enter=0)
    with pytest.raises(InvalidInputError, match="loop"):
        SpottingLayout(3, 2, loop=1)


def test_the_loop_and_the_filler_keyword_filler_form_agree_on_one_pass():
    """compose's two forms on a small model: F1-K-F2 keeps two filler copies (F2 reusing
    F1's rows), the loop one; where the best path passes through K once, both report the
    same segment, and where the loop passes twice the longest pass is the segment."""
    from smc_hmm.hmm import GaussianHMM
    from smc_hmm.hmm.spotting import filler_topology

    rng = np.random.default_rng(5)
    filler = GaussianHMM(
        np.array([1.0, 0.0]), filler_topology(2), np.array([[0.0], [3.0]]), np.ones((2, 1))
    )
    a = np.array([[0.6, 0.4], [0.0, 1.0]])
    keyword = GaussianHMM(np.array([1.0, 0.0]), a, np.array([[-6.0], [6.0]]), np.ones((2, 1)))
    pair, pair_layout = compose(keyword, filler, enter=1e-3)
    loop, loop_layout = compose(keyword, filler, enter=1e-3, loop=True)
    assert (pair_layout.states, loop_layout.states) == (6, 4)
    assert pair_layout.rows == (0, 1, 2, 3, 0, 1) and loop_layout.rows == (0, 1, 2, 3)
    word = [-6.0] * 4 + [6.0] * 4
    once = np.array([0.0] * 6 + word + [0.0] * 6 + [3.0] * 4)[:, None]
    once += 0.1 * rng.standard_normal(once.shape)
    a_pair, a_loop = spot(pair, pair_layout, once), spot(loop, loop_layout, once)
    assert (a_pair.start, a_pair.end) == (a_loop.start, a_loop.end) == (6, 13)
    twice = np.array([0.0] * 4 + word[:4] + [6.0] * 2 + [0.0] * 6 + word + [0.0] * 4)[:, None]
    found = spot(loop, loop_layout, twice)
    assert (found.start, found.end) == (16, 23)  # the longer of the two passes
    assert segment_of([0, 1, 1, 0, 1, 1, 1, 0]) == (4, 6)
    assert segment_of([1, 1, 0, 1, 1]) == (0, 1) and segment_of([0, 0]) == (None, None)


def test_bundled_data_and_plaintext_quality():
    from smc_hmm.data.continuous import load_continuous_manifest

    recordings = load_continuous_test()
    assert len(recordings) >= 100
    assert all(3 <= len(r.digits) <= 5 and len(set(r.digits)) == len(r.digits) for r in recordings)
    for r in recordings[:10]:
        firsts = [a for a, _ in r.words]
        assert firsts == sorted(firsts) and r.words[-1][1] < len(r.features)
    manifest = load_continuous_manifest()
    overall = manifest["results"]["overall"]
    assert overall["detection_rate"] > 0.8 and overall["false_alarm_rate"] < 0.3


@pytest.mark.parametrize("index", [0, 3])
def test_spotting_equals_plaintext_on_real_recordings(keypair_512, bundled, index):
    """Around the second word (the first's end, the word, the third's start: 12 frames
    of context each side keep the run short)."""
    recording = load_continuous_test([index])[0]
    label = DIGIT_WORDS[recording.digits[1]]  # a keyword the recording holds
    other = next(w for d, w in enumerate(DIGIT_WORDS) if d not in recording.digits)
    truth = recording.span_of(recording.digits[1])
    start = max(0, truth[0] - 12)
    frames = recording.features[start : truth[1] + 13]
    result = _spot(keypair_512, frames, bundled, [label, other])
    plain = sp.plaintext(bundled, frames, [label, other])
    assert result["alice"] == plain
    assert result["bob"] is None
    assert plain[label]["found"]
    first, last = plain[label]["frames"]
    assert first + start <= truth[1] and last + start >= truth[0]


def test_mining_equals_plaintext_and_hides_the_keyword(keypair_512, bundled):
    """Speech mining: Bob's recording, Alice's private keyword model; Bob's view is the
    same whichever keyword Alice searches (all digit composites share one structure)."""
    recording = load_continuous_test([5])[0]
    frames = recording.features[:24]
    outputs = []

    def run(label, wrap):
        result = run_protocol(
            sp.PROTOCOL,
            {"direction": "mining"},
            {"alice": ("alice", {label: bundled[label]}), "bob": ("bob", frames)},
            keys={"alice": keypair_512},
            min_key_bits=512,
            timeout=600,
            wrap_transport=wrap,
        )
        outputs.append((label, result["alice"]))

    labels = [DIGIT_WORDS[recording.digits[0]], DIGIT_WORDS[recording.digits[1]]]
    structure = vit.Structure.of([bundled[labels[0]].decoder()])
    declared = sp.declared_messages(sp.SpotParams(direction="mining"), structure, 24, 512)
    assert_same_transcripts(run, labels, declared, keys=[keypair_512])
    for label, out in outputs:
        assert out == sp.plaintext(bundled, frames, [label])


def test_parameters_are_checked():
    with pytest.raises(InvalidInputError, match="keywords"):
        sp.SpotParams()
    with pytest.raises(InvalidInputError, match="private"):
        sp.SpotParams(direction="mining", keywords=("seven",))
    with pytest.raises(ConfigError):
        sp.SpotParams.from_config({"keywords": "seven", "colour": "red"})
    assert sp.SpotParams.from_config({"keywords": "seven"}).keywords == ("seven",)
    with pytest.raises(InvalidInputError, match="no model"):
        sp.bob(None, {"seven": (None, None)}, sp.SpotParams(keywords=("nine",)))


_write_wav = sp.example_wav  # a voiced tone at 8 kHz


def test_spot_command_prints_both_decisions_as_json(tmp_path, capsys):
    from smc_hmm.cli import main

    wav, out = tmp_path / "speech.wav", tmp_path / "spot.json"
    _write_wav(wav)
    argv = ["spot", "--audio", str(wav), "--keyword", "seven", "--keyword", "one"]
    argv += ["--key-bits", "512", "--insecure", "--workers", "1", "--json", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "agrees" in text and "cost per party" in captured.err
    # the recursion's progress, frames done of T, on standard error (never on stdout)
    assert "secure keyword spotting: recursion, frames 30/30" in captured.err
    assert "recursion, frames" not in text
    data = json.loads(out.read_text())
    assert data["keywords"] == ["seven", "one"] and data["secure"] == data["plaintext"]
    assert main(["spot", "--audio", str(wav), "--keyword", "eleven", "--key-bits", "512",
                 "--insecure"]) == 2  # fmt: skip
    assert "no model for keyword" in capsys.readouterr().err


def test_bench_spot_smoke_and_a_missed_target_exits_1(tmp_path, monkeypatch):
    import argparse

    import smc_hmm.data.continuous as continuous
    from smc_hmm.bench import spot as bench

    # the bench on the twelve shortest bundled recordings (every part runs; the 120 take
    # a minute at 512 bits), with a relative-error target no rounding meets: one run
    # checks every part and that a missed target exits 1 with the report still written
    every = continuous.load_continuous_test()
    short = sorted(every, key=lambda r: len(r.features))[:12]
    monkeypatch.setattr(continuous, "load_continuous_test", lambda select=None: short)
    monkeypatch.setattr(bench, "REL_TARGET", 0.0)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    path = tmp_path / "spot.json"
    args = parser.parse_args(
        ["--key-bits", "512", "--insecure", "--recordings", "1", "--frames", "60",
         "--no-ten", "--workers", "1", "--json", str(path)]
    )  # fmt: skip
    assert bench.main(args) == 1
    data = json.loads(path.read_text())
    assert data["benchmark"] == "spot" and data["checks"]["secure == plaintext"]
    assert data["checks"]["timed decision == plaintext"]
    assert data["checks"]["mining == plaintext"]
    assert data["checks"]["relative error"] is False
    assert set(data["quality"]) == set(DIGIT_WORDS)
    assert data["mining"]["found"] == data["timed"]["secure"]


def test_the_cost_model_runs_the_garbled_sides_side_by_side_and_scales_gates_not_layers(
    keypair_512,
):
    from types import SimpleNamespace

    from smc_hmm.bench import spot as bench

    # a ledger with only garbled work: Bob garbles 1,000 gates, 32,000 bytes and 10
    # layers in the recursion, 100 gates in the setup; Alice spends 2 s and Bob 3 s
    # computing in the recursion
    def phase(compute, **ops):
        return {"compute": compute, "ops": ops}

    cost = SimpleNamespace(
        parties={
            "alice": {"phases": {"recursion": phase(2.0)}},
            "bob": {
                "phases": {
                    "setup": phase(0.0, and_gates=100),
                    "recursion": phase(3.0, and_gates=1000, garbled_bytes=32000, gc_layers=10),
                }
            },
        }
    )
    sides = {
        "garbler": {"and_gates": 1e-3, "gc_layers": 0.1},
        "evaluator": {"and_gates": 5e-4, "gc_layers": 0.05},
    }
    priced = bench._byte_prices(cost, sides)
    # each side's bytes carry its compute time less its gates and layers at their rates
    assert priced["garbler"]["garbled_bytes"] == pytest.approx((3.0 - 1.0 - 1.0) / 32000)
    assert priced["evaluator"]["garbled_bytes"] == pytest.approx((2.0 - 0.5 - 0.5) / 32000)
    rates = {"dgk": dict.fromkeys(bench.DGK_OPS, 0.0), "draws": {"alice": 0.0, "bob": 0.0}}
    once = bench.predict(cost, keypair_512, 512, 1, 1.0, rates | {"sides": sides})
    assert once == pytest.approx(3.0 + 100 * 1e-3)  # the slower side, the setup's gates
    ten = bench.predict(cost, keypair_512, 512, 10, 1.0, rates | {"sides": sides})
    # ten times the recursion's gates and bytes, its layers once; the setup once
    assert ten == pytest.approx(10 * (1.0 + 1.0) + 1.0 + 100 * 1e-3)
    # a ledger with no garbled recursion (nothing to calibrate on) prices bytes at zero
    bare = SimpleNamespace(parties={"alice": {"phases": {}}, "bob": {"phases": {}}})
    assert {s["garbled_bytes"] for s in bench._byte_prices(bare, sides).values()} == {0.0}


@pytest.mark.slow
def test_bench_spot_times_the_keyword_as_two_processes(tmp_path, monkeypatch):
    """--transport tcp: the timed keyword as two OS processes over mutual TLS (Alice's
    frames in a file, Bob's bundled models), the decision the plaintext one; --pin and
    --short-randomness are refused where they do not apply."""
    import argparse

    import smc_hmm.data.continuous as continuous
    from smc_hmm.bench import spot as bench

    every = continuous.load_continuous_test()
    short = sorted(every, key=lambda r: len(r.features))[:12]
    monkeypatch.setattr(continuous, "load_continuous_test", lambda select=None: short)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    path = tmp_path / "spot.json"
    base = ["--key-bits", "512", "--insecure", "--recordings", "0", "--frames", "60",
            "--no-ten", "--no-mining", "--workers", "1"]  # fmt: skip
    args = parser.parse_args([*base, "--transport", "tcp", "--json", str(path)])
    assert bench.main(args) == 0
    data = json.loads(path.read_text())
    assert data["checks"]["timed decision == plaintext"]
    assert data["params"]["transport"] == "tcp" and data["timed"]["seconds"] > 0
    for bad in (["--pin"], ["--transport", "tcp", "--short-randomness"]):
        with pytest.raises(InvalidInputError, match="applies to"):
            bench.run(parser.parse_args([*base, *bad]))


def test_plaintext_spot_matches_the_composite_viterbi():
    recording = load_continuous_test([2])[0]
    model, layout = spotting_model(recording.digits[0])
    s = spot(model, layout, recording.features)
    from smc_hmm.hmm import viterbi

    path, score = viterbi(model, recording.features)
    assert s.score == score
    k = layout.keyword_states
    inside = (path >= k.start) & (path < k.stop)
    assert inside.any() and (s.start, s.end) == segment_of(inside)


@pytest.mark.slow
def test_a_serving_bob_spots_for_a_client_and_refuses_other_keywords(tmp_path, capsys):
    """smc-hmm serve with protocol = "spot": a client session equals plaintext, and
    smc-hmm spot --server refuses a server spotting other keywords before sending anything."""
    from smc_hmm.cli import main
    from smc_hmm.data.continuous import load_spotting_pipeline
    from smc_hmm.runtime import load_config, write_config
    from smc_hmm.runtime.serve import Server

    path = write_config(
        tmp_path / "parties.toml",
        "spot",
        {"alice": {"kind": "alice"}, "bob": {"kind": "bob", "input": "bundled"}},
        params={"keywords": ["seven"]},
        key_bits=512,
        insecure=True,
        timeout=120,
        connect_timeout=20,
        serve={"party": "bob", "max_sessions": 2},
        compute={"workers": 1},
        clients=["alice"],
    )
    _write_wav(tmp_path / "alice.wav")
    with Server(load_config(path), "bob", port=0) as server:
        host, port = server.address
        argv = ["spot", "--audio", str(tmp_path / "alice.wav"), "--server", f"{host}:{port}",
                "--certs", str(tmp_path / "certs"), "--name", "alice", "--key-bits", "512",
                "--insecure", "--json", str(tmp_path / "out.json")]  # fmt: skip
        assert main([*argv, "--keyword", "seven"]) == 0
        report = json.loads((tmp_path / "out.json").read_text())
        frames = load_spotting_pipeline().features_from_wav(tmp_path / "alice.wav")
        bundled = sp.load_keyword_models("bundled", None)
        assert report["secure"] == sp.plaintext(bundled, frames, ["seven"])
        assert main([*argv, "--keyword", "one"]) == 2
        assert "refused before sending anything" in capsys.readouterr().err


@pytest.mark.parametrize("index", [4, 7])
def test_secure_path_equals_plaintext_and_hmmlearn_on_real_recordings(keypair_512, index):
    """The viterbi plugin with the spotting parameters and output "path" on the composite:
    the path is smc_hmm.hmm's and hmmlearn's, the score within its documented bound (the
    garbled default computes on quantized frames: vit.score_error_bound)."""
    from smc_hmm.hmm import viterbi

    recording = load_continuous_test([index])[0]
    frames = recording.features[:48]
    model, layout = spotting_model(recording.digits[0])
    k = layout.keyword_states
    decoder = {"model": model, "rows": list(layout.rows), "segment": [k.start, k.stop]}
    spot_params = sp.SpotParams(keywords=("x",)).viterbi
    params = dataclass_replace(spot_params, output="path", reveal_score=True)
    result = run_protocol(
        viterbi_protocol.PROTOCOL,
        params,
        {"alice": ("alice", frames), "bob": ("bob", [decoder])},
        keys={"alice": keypair_512},
        min_key_bits=512,
        timeout=600,
    )
    (secure,) = result["alice"]
    path, score = viterbi(model, frames)
    assert secure["path"] == path.tolist()
    decoders = vit.as_decoders([decoder])
    plan = vit.Plan(params, vit.Structure.of(decoders), len(frames), 512)
    bound = vit.score_error_bound(decoders, plan, float(np.abs(frames).max()))
    assert abs(secure["score"] - score) <= bound < 1e-4 * abs(score)
    log_p, states = model.to_hmmlearn().decode(frames, algorithm="viterbi")
    assert states.tolist() == secure["path"] and abs(log_p - score) <= 1e-9 * abs(score)


def dataclass_replace(obj, **changes):
    from dataclasses import replace

    return replace(obj, **changes)


def test_ten_composites_share_one_table_of_emission_rows(keypair_512, bundled):
    """Spotting shares the rows equal across composites: the bundled ten are the same 81
    rows, so ten keywords compute 81 a frame, not 810; the decisions equal plaintext and
    the structure on the wire names the table (a malformed one is refused)."""
    labels = list(bundled)
    decoders = [bundled[k].decoder() for k in labels]
    shared = vit.Structure.of(decoders, shared=True)
    assert shared.total_rows == 81 and vit.Structure.of(decoders).total_rows == 810
    assert vit.Structure.from_wire(shared.to_wire()) == shared
    wire = shared.to_wire()
    wire["rows"][0] = [r + 1 for r in wire["rows"][0]]  # row 0 unused: not one table
    wire["rows"] = [wire["rows"][0]]
    wire.update(states=wire["states"][:1], edges=wire["edges"][:1], segments=wire["segments"][:1])
    with pytest.raises(ProtocolError, match="shared rows"):
        vit.Structure.from_wire(wire)
    recording = load_continuous_test([6])[0]
    truth = recording.span_of(recording.digits[0])
    frames = recording.features[max(0, truth[0] - 5) : truth[1] + 6]
    result = _spot(keypair_512, frames, bundled, labels[:2])
    assert result["alice"] == sp.plaintext(bundled, frames, labels[:2])
