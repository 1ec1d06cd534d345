"""``release hmm`` and ``release trace`` (smc_hmm.dp.release) end to end on small data."""

import io
import json
import math

import numpy as np
import pytest
from rich.console import Console

from smc_hmm.dp import release as rel
from smc_hmm.errors import (
    ConfigError,
    ExposedStateError,
    PrivacyParameterError,
    SensitivityBoundError,
    SmcHmmError,
    StateOutsideConstraintError,
    UnknownStateError,
)
from smc_hmm.hmm import DiscreteHMM, GaussianHMM
from smc_hmm.hmm.io import load_models, save_models
from smc_hmm.options import ArgumentParser

TRUE = DiscreteHMM([0.6, 0.4], [[0.9, 0.1], [0.2, 0.8]], [[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])


def _console():
    return Console(file=io.StringIO(), width=200)


def _parse(add, argv):
    parser = ArgumentParser()  # smc-hmm's: a refused option value raises its typed error
    add(parser)
    return parser.parse_args(argv)


def _hmm(argv):
    return _parse(rel.add_hmm_arguments, argv)


def _trace(argv):
    return _parse(rel.add_trace_arguments, argv)


@pytest.fixture
def discrete_data(tmp_path):
    rng = np.random.default_rng(0)
    seqs = [TRUE.sample(int(rng.integers(3, 15)), rng)[0].tolist() for _ in range(40)]
    path = tmp_path / "seqs.json"
    path.write_text(json.dumps({"sequences": seqs, "n_symbols": 3}))
    return path


@pytest.fixture
def frame_data(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "frames.npz"
    arrays = {
        f"s{i:02d}": rng.normal(size=(int(rng.integers(4, 12)), 2)) + (i % 2) * 2.0
        for i in range(30)
    }
    np.savez(path, **arrays)
    return path


def test_release_hmm_discrete_every_iteration(tmp_path, discrete_data):
    out = tmp_path / "dp.npz"
    summary_path = tmp_path / "summary.json"
    args = _hmm(
        [
            "--data", str(discrete_data), "--eps", "2", "--every-iteration", "--states", "2",
            "--max-length", "15", "--iterations", "4", "--out", str(out),
            "--json", str(summary_path), "--seed", "7",
        ]
    )  # fmt: skip
    console = _console()
    assert rel.release_hmm(args, console) == 0
    models, labels = load_models(out)  # load_models reads the released file unchanged
    (model,) = models
    assert isinstance(model, DiscreteHMM) and model.n_states == 2 and model.n_symbols == 3
    assert "privacy metadata in dp.privacy.json" in labels[0]
    meta = rel.read_release_metadata(out)
    assert meta["epsilon"] == pytest.approx(2.0)
    assert meta["mode"] == "every" and meta["formal_guarantee"] is True
    assert meta["noisy_iterations"] == 4
    assert meta["max_length"] == 15 and meta["feature_bound"] is None
    assert meta["sensitivity"] == {"initial": 1.0, "transitions": 14.0, "emissions": 15.0}
    # --seed: the float sampler on an INSECURE stream (OpenDP cannot be seeded), and said so
    assert meta["sampler"] == "float" and meta["insecure"] is True
    assert meta["hardened_sampler"] is False
    assert "INSECURE" in meta["randomness"]
    assert meta["guarantee"]["epsilon"] == pytest.approx(2.0)
    assert meta["guarantee"]["secure_randomness"] is False
    assert any("INSECURE" in w for w in meta["warnings"])
    assert meta["public_parameters_from_data"] == []
    summary = json.loads(summary_path.read_text())
    assert summary["model"] == str(out) and summary["epsilon"] == pytest.approx(2.0)
    assert summary["mechanism"].startswith("Laplace")
    assert "n_sequences" not in summary  # the data set's size is not released
    printed = console.file.getvalue()
    assert '"mode": "every"' in printed
    # the same seed gives the same model
    out2 = tmp_path / "dp2.npz"
    args.out, args.json = str(out2), None
    rel.release_hmm(args, _console())
    np.testing.assert_array_equal(load_models(out2)[0][0].transmat, model.transmat)


def test_release_hmm_gaussian_last_mode_and_tampered_metadata(tmp_path, frame_data):
    out = tmp_path / "g.npz"
    args = _hmm(
        [
            "--data", str(frame_data), "--eps", "5", "--states", "2", "--max-length", "12",
            "--feature-bound", "4", "--iterations", "5", "--topology", "left-to-right",
            "--out", str(out), "--seed", "3", "--not-dp-last-iteration",
        ]
    )  # fmt: skip
    console = _console()
    rel.release_hmm(args, console)
    (model,), _ = load_models(out)
    assert isinstance(model, GaussianHMM) and model.n_features == 2
    assert model.transmat[1, 0] == 0  # left-to-right zeros stay zero
    assert np.all(np.linalg.norm(model.means, axis=1) <= 4 + 1e-9)
    meta = rel.read_release_metadata(out)
    assert meta["mode"] == "last" and meta["formal_guarantee"] is False
    assert meta["guarantee"] is None and "epsilon" not in meta  # no eps claimed
    assert "NOT a privacy guarantee" in meta["noise_parameter_eps"]["note"]
    assert meta["warnings"][0].startswith("NOT differentially private")
    assert meta["feature_bound"] == 4.0 and meta["kind"] == "gaussian"
    assert set(meta["sensitivity"]) == {
        "initial", "transitions", "occupancy", "obs_sum", "obs_sq_sum"
    }  # fmt: skip
    assert meta["sensitivity"]["obs_sq_sum"] == pytest.approx(12 * 16)
    assert "NOT differentially private" in console.file.getvalue()
    # a sidecar that does not match the model file is refused
    models, labels = load_models(out)
    save_models(out, [models[0]], ["other"])
    with pytest.raises(ConfigError, match="SHA-256"):
        rel.read_release_metadata(out)


def test_release_hmm_npz_symbols_and_truncate(tmp_path):
    path = tmp_path / "sym.npz"
    np.savez(path, a=np.array([0, 1, 2, 1, 0, 1]), b=np.array([2, 2, 1]), n_symbols=np.array(4))
    out = tmp_path / "m.npz"
    args = _hmm(
        ["--data", str(path), "--eps", "1", "--every-iteration", "--states", "2",
         "--max-length", "4", "--truncate", "--out", str(out), "--seed", "0"]
    )  # fmt: skip
    rel.release_hmm(args, _console())
    (model,), _ = load_models(out)
    assert model.n_symbols == 4
    assert rel.read_release_metadata(out)["long_sequences"] == "truncate"


@pytest.mark.parametrize(
    ("content", "suffix", "extra", "error", "match"),
    [
        (None, ".json", [], ConfigError, "does not exist"),
        ("not json", ".json", [], ConfigError, "not valid JSON"),
        ("[[0, 1], [0.5, 1.5]]", ".json", [], ConfigError, "integers|mixes"),
        ("[[0, 1], []]", ".json", [], ConfigError, "empty"),
        ("[[0, -1]]", ".json", [], ConfigError, "negative"),
        ("[]", ".json", [], ConfigError, "no sequences"),
        ('{"seqs": [[0]]}', ".json", [], ConfigError, "sequences"),
        ("[[0, 1]]", ".txt", [], ConfigError, "unknown format"),
        ("[[0, 1, 1, 0, 1]]", ".json", [], SensitivityBoundError, "longer than"),
        ("[[0, 1]]", ".json", ["--feature-bound", "2"], ConfigError, "frames only"),
        ("[[[0.1, 0.2]]]", ".json", [], ConfigError, "feature-bound R is required"),
        ("[[0, 3]]", ".json", ["--symbols", "2"], ConfigError, "alphabet"),
    ],
)
def test_release_hmm_bad_data(tmp_path, content, suffix, extra, error, match):
    path = tmp_path / f"data{suffix}"
    if content is not None:
        path.write_text(content)
    args = _hmm(
        ["--data", str(path), "--eps", "1", "--max-length", "3", "--out",
         str(tmp_path / "m.npz"), *extra]
    )  # fmt: skip
    with pytest.raises(error, match=match):
        rel.release_hmm(args, _console())
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("eps", ["0", "-1", "nan", "inf"])
def test_release_hmm_bad_eps(tmp_path, discrete_data, eps):
    """Refused while the options are parsed, and by the function itself when called with
    options that did not go through the parser."""
    with pytest.raises(PrivacyParameterError, match="--eps"):
        _hmm(["--data", str(discrete_data), "--eps", eps, "--max-length", "20"])
    args = _hmm(["--data", str(discrete_data), "--eps", "1", "--max-length", "20"])
    args.eps = float(eps)
    with pytest.raises(PrivacyParameterError):
        rel.release_hmm(args, _console())


def test_release_hmm_bad_options(tmp_path, discrete_data, frame_data):
    base = ["--data", str(discrete_data), "--eps", "1"]
    with pytest.raises(ConfigError, match="max-length L is required"):
        rel.release_hmm(_hmm(base), _console())
    with pytest.raises(ConfigError, match="max-length"):
        rel.release_hmm(_hmm([*base, "--max-length", "0"]), _console())
    with pytest.raises(ConfigError, match="states"):
        rel.release_hmm(_hmm([*base, "--max-length", "20", "--states", "0"]), _console())
    with pytest.raises(ConfigError, match=r"\.npz"):
        rel.release_hmm(_hmm([*base, "--max-length", "20", "--out", "x.txt"]), _console())
    with pytest.raises(ConfigError, match="does not exist"):
        out = str(tmp_path / "missing" / "m.npz")
        rel.release_hmm(_hmm([*base, "--max-length", "20", "--out", out]), _console())
    frames = ["--data", str(frame_data), "--eps", "1", "--max-length", "20"]
    with pytest.raises(PrivacyParameterError):
        rel.release_hmm(_hmm([*frames, "--feature-bound", "nan"]), _console())
    assert all(issubclass(e, SmcHmmError) for e in (ConfigError, PrivacyParameterError))


# --- release trace --------------------------------------------------------------------------


@pytest.fixture
def chain(tmp_path):
    """A 4-state ring walk (stay or step right), released as a model file."""
    trans = np.array([[0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5], [0.5, 0, 0, 0.5]])
    model = DiscreteHMM([1.0, 0, 0, 0], trans, np.full((4, 2), 0.5))
    path = tmp_path / "chain.npz"
    save_models(path, [model], ["ring"])
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps([0, 1, 1, 2, 3, 0]))
    return path, trace


@pytest.mark.parametrize("graph", ["complete", "transition", "utility", "categorical", "edges"])
def test_release_trace_graphs(tmp_path, chain, graph):
    model, trace = chain
    extra = []
    if graph == "categorical":
        (tmp_path / "cat.json").write_text(json.dumps(["a", "a", "b", "b"]))
        extra = ["--categories", str(tmp_path / "cat.json")]
    if graph == "edges":
        graph = str(tmp_path / "edges.json")
        (tmp_path / "edges.json").write_text(json.dumps([[0, 1], [2, 3]]))
    out = tmp_path / "out.json"
    args = _trace(
        ["--model", str(model), "--trace", str(trace), "--graph", graph, "--eps", "0.5",
         "--json", str(out), "--seed", "1", *extra]
    )  # fmt: skip
    console = _console()
    assert rel.release_trace(args, console) == 0
    res = json.loads(out.read_text())
    assert res["n_states"] == 4 and res["model_label"] == "ring"
    assert len(res["releases"]) == 6
    first = res["releases"][0]
    assert first["t"] == 1 and first["constraint_size"] == 1  # p_1^- = pi = (1, 0, 0, 0)
    assert first["constrained_epsilon"] == 0.0  # one candidate state: nothing to spend
    cumulative = 0.0
    for t, r in enumerate(res["releases"], 1):
        assert r["t"] == t and len(r["z"]) == 1 and r["epsilon"] == 0.5
        assert r["cumulative_epsilon"] == pytest.approx(0.5 * t)
        cumulative += r["constrained_epsilon"]
        assert r["cumulative_constrained_epsilon"] == pytest.approx(cumulative)
        assert r["timestamp_epsilon"] == 0.5
    assert res["total"]["sequence_constrained_epsilon"] == pytest.approx(cumulative)
    assert "DPHMM release" in console.file.getvalue()
    assert "dop" not in json.dumps(res).lower()  # true-state diagnostics are never released


def test_release_trace_coords_and_repairs(tmp_path, chain):
    model, trace = chain
    coords = tmp_path / "coords.npy"
    np.save(coords, np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]))
    edges = tmp_path / "edges.json"
    edges.write_text(json.dumps({"edges": [[0, 2]]}))  # 1 and 3 isolated: exposed, repaired
    out = tmp_path / "out.json"
    args = _trace(
        ["--model", str(model), "--trace", str(trace), "--graph", str(edges), "--coords",
         str(coords), "--json", str(out), "--seed", "2"]
    )  # fmt: skip
    rel.release_trace(args, _console())
    res = json.loads(out.read_text())
    assert res["query_dim"] == 2
    assert all(len(r["z"]) == 2 for r in res["releases"])
    repaired = [r for r in res["releases"] if r["exposed"]]
    assert any(r["repair_edges"] for r in repaired)  # (C_1 = {0}: nothing to connect)
    # the same with repair disabled refuses to expose a state
    args.repair = "none"
    with pytest.raises(ExposedStateError):
        rel.release_trace(args, _console())


def test_release_trace_bad_inputs(tmp_path, chain):
    model, trace = chain
    base = ["--model", str(model), "--trace", str(trace)]

    def run(*extra, trace_text=None):
        if trace_text is not None:
            trace.write_text(trace_text)
        return rel.release_trace(_trace([*base, *extra]), _console())

    with pytest.raises(ConfigError, match="--graph must be one of"):
        run("--graph", "ring")
    with pytest.raises(ConfigError, match="categories"):
        run("--graph", "categorical")
    with pytest.raises(PrivacyParameterError):
        run("--graph", "complete", "--eps", "nan")
    with pytest.raises(PrivacyParameterError):
        run("--graph", "complete", "--eps", "0")
    with pytest.raises(ConfigError, match="does not exist"):
        run("--graph", str(tmp_path / "nope.json"))
    (tmp_path / "e.json").write_text("[[0, 9]]")
    with pytest.raises(UnknownStateError):
        run("--graph", str(tmp_path / "e.json"))
    (tmp_path / "c.json").write_text("[[0], [1]]")
    with pytest.raises(ConfigError, match="rows"):
        run("--graph", "complete", "--coords", str(tmp_path / "c.json"))
    with pytest.raises(ConfigError, match="not in 0..3"):
        run("--graph", "complete", trace_text="[0, 4]")
    with pytest.raises(ConfigError, match="not a state index"):
        run("--graph", "complete", trace_text="[0, 1.5]")
    with pytest.raises(ConfigError, match="non-empty"):
        run("--graph", "complete", trace_text="[]")
    with pytest.raises(StateOutsideConstraintError):
        run("--graph", "complete", trace_text="[0, 3]")  # 0 -> 3 is impossible
    with pytest.raises(SmcHmmError):  # a model file that is not one
        bad = tmp_path / "bad.npz"
        bad.write_text("x")
        rel.release_trace(_trace(["--model", str(bad), "--trace", str(trace), "--graph",
                                  "complete"]), _console())  # fmt: skip
    with pytest.raises(ConfigError, match="model-index"):
        run("--graph", "complete", "--model-index", "3", trace_text="[0]")


@pytest.mark.parametrize(
    "trace_text, fragment",
    [("[0, 2]", "transition 0 -> 2"), ("[1, 1, 0]", "transition 1 -> 0"), ("[2]", None)],
)
def test_a_trace_the_chain_cannot_produce_is_refused_before_any_noise(
    tmp_path, capsys, monkeypatch, trace_text, fragment
):
    """docs/dp-release.md's own chain: its uniform start keeps every state in C_t, so the
    DPHMM itself would release [0, 2] although 0 -> 2 has probability 0.  The command
    refuses such a trace (one typed line, exit code 2) before any noise is drawn."""
    from smc_hmm.cli import main
    from smc_hmm.dp import dphmm

    chain = [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]
    start = [1 / 3, 1 / 3, 1 / 3] if fragment else [0.5, 0.5, 0.0]  # [2]: start prob 0
    model = tmp_path / "chain.npz"
    save_models(model, [DiscreteHMM(start, chain, np.eye(3))])
    trace = tmp_path / "trace.json"
    trace.write_text(trace_text)

    def no_noise(*args, **kwargs):
        raise AssertionError("noise was drawn for a trace the chain cannot produce")

    monkeypatch.setattr(dphmm, "KNormMechanism", no_noise)
    out = tmp_path / "out.json"
    argv = ["release", "trace", "--model", str(model), "--trace", str(trace), "--graph"]
    assert main([*argv, "complete", "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "StateOutsideConstraintError" in err, err
    assert (fragment or "start probability 0") in err and "Traceback" not in err
    assert not out.exists()


def test_released_model_feeds_release_trace(tmp_path, discrete_data):
    """The two commands chain: a released HMM is the public model of a trace release."""
    out = tmp_path / "dp.npz"
    rel.release_hmm(
        _hmm(["--data", str(discrete_data), "--eps", "1", "--every-iteration", "--states",
              "2", "--max-length", "15", "--out", str(out), "--seed", "0"]),
        _console(),
    )  # fmt: skip
    (tmp_path / "t.json").write_text("[0, 1, 1, 0]")
    res_path = tmp_path / "r.json"
    rel.release_trace(
        _trace(["--model", str(out), "--trace", str(tmp_path / "t.json"), "--graph",
                "complete", "--json", str(res_path), "--seed", "0"]),
        _console(),
    )  # fmt: skip
    res = json.loads(res_path.read_text())
    assert len(res["releases"]) == 4
    assert all(math.isfinite(r["z"][0]) for r in res["releases"])


def test_release_commands_through_the_cli(tmp_path, discrete_data, chain, capsys):
    """`smc-hmm release hmm` and `smc-hmm release trace` end to end, and typed errors."""
    from smc_hmm.cli import main

    out, summary = tmp_path / "cli.npz", tmp_path / "cli.json"
    argv = [
        "release",
        "hmm",
        "--data",
        str(discrete_data),
        "--eps",
        "2",
        "--every-iteration",
        "--max-length",
        "20",
        "--states",
        "2",
        "--out",
        str(out),
        "--json",
        str(summary),
        "--seed",
        "3",
    ]
    assert main(argv) == 0
    released = json.loads(summary.read_text())
    assert released["epsilon"] == pytest.approx(2.0) and out.exists()
    model, trace = chain
    trace_out = tmp_path / "trace-out.json"
    assert (
        main(
            [
                "release",
                "trace",
                "--model",
                str(model),
                "--trace",
                str(trace),
                "--graph",
                "complete",
                "--eps",
                "1",
                "--json",
                str(trace_out),
                "--seed",
                "1",
            ]
        )
        == 0
    )
    assert len(json.loads(trace_out.read_text())["releases"]) == 6
    capsys.readouterr()
    assert (
        main(["release", "hmm", "--data", str(discrete_data), "--eps", "-1", "--max-length", "20"])
        == 2
    )
    assert capsys.readouterr().err.startswith("smc-hmm: error: ")


# --- safe defaults: formally DP, hardened, and the JSON claims only what holds ---------------


@pytest.fixture
def six_symbol_data(tmp_path):
    rng = np.random.default_rng(4)
    seqs = [rng.integers(0, 6, size=int(rng.integers(5, 20))).tolist() for _ in range(30)]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(seqs))
    return path


def test_release_hmm_with_no_flags_is_formally_dp_with_a_hardened_sampler(
    tmp_path, six_symbol_data, monkeypatch, capsys
):
    """`smc-hmm release hmm --data D --eps 1 --max-length 20 --symbols 6`, nothing else."""
    from smc_hmm.cli import main

    monkeypatch.chdir(tmp_path)  # the default --out is released_hmm.npz in the working folder
    argv = ["release", "hmm", "--data", str(six_symbol_data), "--eps", "1"]
    assert main([*argv, "--max-length", "20", "--symbols", "6"]) == 0
    printed = capsys.readouterr().out
    assert "warning:" not in printed
    meta = rel.read_release_metadata(tmp_path / "released_hmm.npz")
    assert meta["mode"] == "every" and meta["formal_guarantee"] is True
    assert meta["noisy_iterations"] == 5 and meta["warnings"] == []
    assert meta["sampler"] == "opendp" and meta["hardened_sampler"] is True
    assert meta["insecure"] is False and meta["randomness"] == "OpenDP internal CSPRNG"
    guarantee = meta["guarantee"]
    assert guarantee["definition"].startswith("pure epsilon-differential privacy")
    assert guarantee["epsilon"] == pytest.approx(1.0) == meta["epsilon"]
    assert guarantee["neighbouring"] == "one sequence of length <= 20 added or removed"
    assert guarantee["hardened_sampler"] is True and guarantee["secure_randomness"] is True
    assert "opendp sampler" in meta["mechanism_detail"]
    (model,), (label,) = load_models(tmp_path / "released_hmm.npz")
    assert model.n_symbols == 6 and "eps=1" in label


def test_last_iteration_needs_its_flag_warns_and_claims_no_epsilon(
    tmp_path, six_symbol_data, capsys
):
    from smc_hmm.cli import main

    out, summary = tmp_path / "last.npz", tmp_path / "last.json"
    argv = [
        "release", "hmm", "--data", str(six_symbol_data), "--eps", "1", "--max-length", "20",
        "--symbols", "6", "--not-dp-last-iteration", "--out", str(out), "--json", str(summary),
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "warning:" in printed and "NOT differentially private" in printed
    for meta in (rel.read_release_metadata(out), json.loads(summary.read_text())):
        assert meta["mode"] == "last" and meta["formal_guarantee"] is False
        assert meta["guarantee"] is None
        assert not {"epsilon", "epsilon_requested", "epsilon_per_iteration"} & set(meta)
        assert meta["noise_parameter_eps"]["total"] == 1.0
        assert "NOT a privacy guarantee" in meta["noise_parameter_eps"]["note"]
        assert meta["warnings"][0].startswith("NOT differentially private")
        assert "NOT DP" in meta["mechanism_detail"]
        assert "eps=" not in meta["model_label"] and "NOT-DP" in meta["model_label"]
    # the two modes cannot be asked for together
    assert main([*argv, "--every-iteration"]) == 2
    assert "not allowed with" in capsys.readouterr().err


def test_sampler_and_seed_options(tmp_path, six_symbol_data):
    base = [
        "--data", str(six_symbol_data), "--eps", "1", "--max-length", "20", "--symbols", "6",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="cannot be seeded"):
        rel.release_hmm(_hmm([*base, "--seed", "1", "--sampler", "opendp"]), _console())
    out = tmp_path / "float.npz"
    console = _console()
    rel.release_hmm(_hmm([*base, "--sampler", "float", "--out", str(out)]), console)
    meta = rel.read_release_metadata(out)
    assert meta["sampler"] == "float" and meta["hardened_sampler"] is False
    assert meta["insecure"] is False and meta["guarantee"]["hardened_sampler"] is False
    assert "not hardened" in meta["warnings"][0] and "not hardened" in console.file.getvalue()


def _forbidding_model(path):
    """A public skeleton over 6 symbols whose every state forbids symbol 5."""
    emissions = np.array([[0.3, 0.2, 0.2, 0.2, 0.1, 0.0], [0.1, 0.1, 0.2, 0.3, 0.3, 0.0]])
    save_models(path, [DiscreteHMM([0.5, 0.5], [[0.8, 0.2], [0.3, 0.7]], emissions)], ["init"])
    return path


@pytest.mark.parametrize("mode", [[], ["--not-dp-last-iteration"]])
def test_a_forbidden_symbol_sequence_present_or_absent_ends_the_same_way(tmp_path, mode):
    """With --init forbidding symbol 5, a data set holding a sequence with it and the same
    data set without it both release a model (no error names the sequence)."""
    init = _forbidding_model(tmp_path / "init.npz")
    rng = np.random.default_rng(8)
    allowed = [rng.integers(0, 5, size=12).tolist() for _ in range(25)]
    outcomes = []
    for name, seqs in (("absent", allowed), ("present", [*allowed, [0, 5, 1, 2]])):
        data = tmp_path / f"{name}.json"
        data.write_text(json.dumps({"sequences": seqs, "n_symbols": 6}))
        out = tmp_path / f"{name}.npz"
        argv = ["--data", str(data), "--eps", "1", "--max-length", "12", "--init", str(init)]
        console = _console()
        assert rel.release_hmm(_hmm([*argv, *mode, "--out", str(out)]), console) == 0
        meta = rel.read_release_metadata(out)
        (model,), _ = load_models(out)
        assert np.all(model.emissionprob[:, 5] == 0)  # the structural zero stays zero
        assert "sequence" not in console.file.getvalue().split("{")[0]  # no warning names it
        outcomes.append((sorted(meta), meta["warnings"], meta["formal_guarantee"]))
        assert meta["impossible_sequences"].startswith("dropped")
    assert outcomes[0] == outcomes[1]


def test_release_help_shows_descriptions_and_defaults(capsys):
    from smc_hmm.cli import main

    assert main(["release", "hmm", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert rel.HMM_DESCRIPTION in text
    assert "hidden states (default 3; 5 with --keyword-models)" in text
    for shown in ("(default: ergodic)", "(default: add_remove)"):
        assert shown in text
    assert "(default: released_hmm.npz)" in text and "(default: None)" not in text
    assert "--not-dp-last-iteration" in text and "NOT differentially private" in text
    assert "opendp (the default: hardened" in text and "docs/dp-layer.md" in text
    assert main(["release", "trace", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert rel.TRACE_DESCRIPTION in text
    for shown in ("(default: 1.0)", "(default: greedy)", "(default: l2)", "(default: 0)"):
        assert shown in text
