"""``release hmm`` and ``release trace`` (the commands smc_hmm.cli.release.hmm and .trace, the
library smc_hmm.dp.release) end to end on small data."""

import io
import json
import math

import numpy as np
import pytest
from rich.console import Console

from smc_hmm.cli.release import hmm as hmm_command
from smc_hmm.cli.release import trace as trace_command
from smc_hmm.dp import release as rel
from smc_hmm.dp.baum_welch import RECORD_RULE
from smc_hmm.errors import (
    ConfigError,
    ExposedStateError,
    ModelError,
    PrivacyParameterError,
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
    return _parse(hmm_command.add_hmm_arguments, argv)


def _trace(argv):
    return _parse(trace_command.add_trace_arguments, argv)


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
    assert hmm_command.release_hmm(args, console) == 0
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
    hmm_command.release_hmm(args, _console())
    np.testing.assert_array_equal(load_models(out2)[0][0].transmat, model.transmat)


def test_release_hmm_gaussian_last_mode_and_tampered_metadata(tmp_path, frame_data):
    out = tmp_path / "g.npz"
    args = _hmm(
        [
            "--data", str(frame_data), "--eps", "5", "--states", "2", "--max-length", "12",
            "--feature-bound", "4", "--dimension", "2", "--iterations", "5",
            "--topology", "left-to-right",
            "--out", str(out), "--seed", "3", "--not-dp-last-iteration",
        ]
    )  # fmt: skip
    console = _console()
    hmm_command.release_hmm(args, console)
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
    assert meta["skeleton"]["n_features"] == 2 and meta["public_parameters_from_data"] == []
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
    hmm_command.release_hmm(args, _console())
    (model,), _ = load_models(out)
    assert model.n_symbols == 4
    meta = rel.read_release_metadata(out)
    assert meta["long_sequences"] == "truncate" and meta["records"] == RECORD_RULE
    # --truncate is what always happens: the same release without it
    args.truncate, args.out = False, str(tmp_path / "m2.npz")
    hmm_command.release_hmm(args, _console())
    np.testing.assert_array_equal(load_models(tmp_path / "m2.npz")[0][0].transmat, model.transmat)


@pytest.mark.parametrize(
    ("content", "suffix", "extra", "match"),
    [
        (None, ".json", ["--symbols", "2"], "does not exist"),
        ("not json", ".json", ["--symbols", "2"], "not valid JSON"),
        ('{"seqs": [[0]]}', ".json", ["--symbols", "2"], "sequences"),
        ('{"sequences": 5}', ".json", ["--symbols", "2"], "list of sequences"),
        ('{"sequences": [[0]], "n_symbols": 0}', ".json", [], "n_symbols must be"),
        ('{"sequences": [[0]], "n_symbols": true}', ".json", [], "n_symbols must be"),
        ("[[0, 1]]", ".txt", ["--symbols", "2"], "unknown format"),
        # the kind and its size are declared, never read from a record
        ("[[0, 1]]", ".json", [], "declare what the data file holds"),
        ("[[[0.1, 0.2]]]", ".json", [], "declare what the data file holds"),
        ("[[[0.1, 0.2]]]", ".json", ["--feature-bound", "2"], "--dimension D is required"),
        ("[[[0.1, 0.2]]]", ".json", ["--dimension", "2"], "--feature-bound R is required"),
        ("[[0, 1]]", ".json", ["--symbols", "2", "--dimension", "2"], "declare one kind"),
        (
            '{"sequences": [[0]], "n_symbols": 3}',
            ".json",
            ["--feature-bound", "2", "--dimension", "1"],
            "declares n_symbols",
        ),
    ],
)
def test_release_hmm_refuses_only_the_format_and_missing_declarations(
    tmp_path, content, suffix, extra, match
):
    """What is refused: the file's format and options that do not declare the kind and
    its size -- never a record (the neighbouring tests below)."""
    path = tmp_path / f"data{suffix}"
    if content is not None:
        path.write_text(content)
    args = _hmm(
        ["--data", str(path), "--eps", "1", "--max-length", "3", "--out",
         str(tmp_path / "m.npz"), *extra]
    )  # fmt: skip
    with pytest.raises(ConfigError, match=match):
        hmm_command.release_hmm(args, _console())
    assert not (tmp_path / "m.npz").exists()


def test_release_hmm_init_fixes_the_kind_and_its_size(tmp_path):
    init = _forbidding_model(tmp_path / "init.npz")  # discrete, 6 symbols
    data = tmp_path / "d.json"
    data.write_text("[[0, 1, 2]]")
    base = ["--data", str(data), "--eps", "1", "--max-length", "5", "--init", str(init)]
    base += ["--out", str(tmp_path / "m.npz")]
    with pytest.raises(ModelError, match="declare feature frames"):
        hmm_command.release_hmm(_hmm([*base, "--feature-bound", "2"]), _console())
    with pytest.raises(ConfigError, match="--symbols 5, but the --init model has 6"):
        hmm_command.release_hmm(_hmm([*base, "--symbols", "5"]), _console())
    assert hmm_command.release_hmm(_hmm([*base, "--symbols", "6", "--seed", "0"]), _console()) == 0
    assert rel.read_release_metadata(tmp_path / "m.npz")["skeleton"] == {
        "source": str(init),
        "seed": None,
    }


@pytest.mark.parametrize("eps", ["0", "-1", "nan", "inf"])
def test_release_hmm_bad_eps(tmp_path, discrete_data, eps):
    """Refused while the options are parsed, and by the function itself when called with
    options that did not go through the parser."""
    with pytest.raises(PrivacyParameterError, match="--eps"):
        _hmm(["--data", str(discrete_data), "--eps", eps, "--max-length", "20"])
    args = _hmm(["--data", str(discrete_data), "--eps", "1", "--max-length", "20"])
    args.eps = float(eps)
    with pytest.raises(PrivacyParameterError):
        hmm_command.release_hmm(args, _console())


def test_release_hmm_bad_options(tmp_path, discrete_data, frame_data):
    base = ["--data", str(discrete_data), "--eps", "1"]
    with pytest.raises(ConfigError, match="max-length L is required"):
        hmm_command.release_hmm(_hmm(base), _console())
    with pytest.raises(ConfigError, match="max-length"):
        hmm_command.release_hmm(_hmm([*base, "--max-length", "0"]), _console())
    with pytest.raises(ConfigError, match="states"):
        hmm_command.release_hmm(_hmm([*base, "--max-length", "20", "--states", "0"]), _console())
    with pytest.raises(ConfigError, match=r"\.npz"):
        hmm_command.release_hmm(_hmm([*base, "--max-length", "20", "--out", "x.txt"]), _console())
    with pytest.raises(ConfigError, match="does not exist"):
        out = str(tmp_path / "missing" / "m.npz")
        hmm_command.release_hmm(_hmm([*base, "--max-length", "20", "--out", out]), _console())
    frames = ["--data", str(frame_data), "--eps", "1", "--max-length", "20"]
    with pytest.raises(PrivacyParameterError):
        hmm_command.release_hmm(_hmm([*frames, "--feature-bound", "nan"]), _console())
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
    assert trace_command.release_trace(args, console) == 0
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
    trace_command.release_trace(args, _console())
    res = json.loads(out.read_text())
    assert res["query_dim"] == 2
    assert all(len(r["z"]) == 2 for r in res["releases"])
    repaired = [r for r in res["releases"] if r["exposed"]]
    assert any(r["repair_edges"] for r in repaired)  # (C_1 = {0}: nothing to connect)
    # the same with repair disabled refuses to expose a state
    args.repair = "none"
    with pytest.raises(ExposedStateError):
        trace_command.release_trace(args, _console())


def test_release_trace_bad_inputs(tmp_path, chain):
    model, trace = chain
    base = ["--model", str(model), "--trace", str(trace)]

    def run(*extra, trace_text=None):
        if trace_text is not None:
            trace.write_text(trace_text)
        return trace_command.release_trace(_trace([*base, *extra]), _console())

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
        trace_command.release_trace(_trace(["--model", str(bad), "--trace", str(trace), "--graph",
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
    hmm_command.release_hmm(
        _hmm(["--data", str(discrete_data), "--eps", "1", "--every-iteration", "--states",
              "2", "--max-length", "15", "--out", str(out), "--seed", "0"]),
        _console(),
    )  # fmt: skip
    (tmp_path / "t.json").write_text("[0, 1, 1, 0]")
    res_path = tmp_path / "r.json"
    trace_command.release_trace(
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
    printed = capsys.readouterr()
    assert "warning:" not in printed.out  # standard output carries the summary alone
    assert "warning:" in printed.err and "NOT differentially private" in printed.err
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
        hmm_command.release_hmm(_hmm([*base, "--seed", "1", "--sampler", "opendp"]), _console())
    out = tmp_path / "float.npz"
    console = _console()
    hmm_command.release_hmm(_hmm([*base, "--sampler", "float", "--out", str(out)]), console)
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
        assert hmm_command.release_hmm(_hmm([*argv, *mode, "--out", str(out)]), console) == 0
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
    assert hmm_command.HMM_DESCRIPTION in text
    assert "hidden states (default 3; 5 with --keyword-models)" in text
    for shown in ("(default: ergodic)", "(default: add_remove)"):
        assert shown in text
    assert "(default: released_hmm.npz)" in text and "(default: None)" not in text
    assert "--not-dp-last-iteration" in text and "NOT differentially private" in text
    assert "opendp (the default: hardened" in text and "docs/dp-layer.md" in text
    assert main(["release", "trace", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert trace_command.TRACE_DESCRIPTION in text
    for shown in ("(default: 1.0)", "(default: greedy)", "(default: l2)", "(default: 0)"):
        assert shown in text


# --- neighbouring data sets: one record more or less never changes the outcome's shape ----


def _public_outcome(capsys, tmp_path, data, *options):
    """Release ``data`` through the CLI; the exit code, the released model's public shape
    and its privacy metadata without the model's hash (all of it is public)."""
    from smc_hmm.cli import main

    out = tmp_path / "released.npz"
    argv = ["release", "hmm", "--data", str(data), "--eps", "2", "--max-length", "6"]
    code = main([*argv, "--iterations", "2", "--seed", "5", "--out", str(out), *options])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    (model,), labels = load_models(out)
    if isinstance(model, DiscreteHMM):
        shape = ("discrete", model.n_states, model.n_symbols)
    else:
        shape = ("gaussian", model.n_states, model.n_features, model.covariance_type)
    meta = rel.read_release_metadata(out)
    del meta["model_sha256"]
    assert np.all(np.isfinite(model.transmat)) and np.all(np.isfinite(model.startprob))
    return shape, labels, meta


SYMBOL_RECORDS = [[0, 1, 1, 2, 0], [2, 2, 1], [1, 0, 2, 2, 1, 0]]
FOREIGN_SYMBOL_RECORDS = [
    [],  # empty
    [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2],  # longer than L = 6
    [0, 3, 1],  # a symbol outside the declared alphabet 0..2
    [0, -1],  # a negative symbol
    [0.5, 1.5],  # not integers
    [0, True],  # a boolean is not a symbol
    [[0.1, 0.2], [0.3, 0.4]],  # frames in a symbol release
    "0 1 2",  # not a list
    [2**70],  # beyond any integer type
    None,
]


@pytest.mark.parametrize("mode", [[], ["--not-dp-last-iteration"]])
@pytest.mark.parametrize("layout", ["json", "object"])
def test_neighbouring_symbol_data_sets_release_the_same_public_shape(
    tmp_path, capsys, mode, layout
):
    """Removing or adding one sequence -- the only one, an empty one, a too-long one, one
    with a foreign or negative symbol, one of the wrong type -- never changes whether
    the release succeeds (exit 0), the released model's shape, its label nor a byte of its
    privacy metadata: all of these used to be refused, or (the alphabet) read off the
    data."""
    declare = ["--symbols", "3"] if layout == "json" else []
    outcomes = []

    def release(records):
        data = tmp_path / "d.json"
        body = records if layout == "json" else {"sequences": records, "n_symbols": 3}
        data.write_text(json.dumps(body))
        outcomes.append(_public_outcome(capsys, tmp_path, data, *declare, *mode))

    for base in (SYMBOL_RECORDS, SYMBOL_RECORDS[:1], []):
        release(base)
        for i in range(len(base)):  # remove one record (the only one, too)
            release(base[:i] + base[i + 1 :])
        for record in FOREIGN_SYMBOL_RECORDS:  # add one
            release([*base, record])
    shape, label, meta = outcomes[0]
    assert shape == ("discrete", 3, 3)
    assert meta["records"] == RECORD_RULE and meta["long_sequences"] == "truncate"
    assert meta["public_parameters_from_data"] == [] and meta["skeleton"]["n_symbols"] == 3
    assert all(outcome == (shape, label, meta) for outcome in outcomes)


def _savez(path, members):
    with open(path, "wb") as fh:  # np.savez(path) appends .npz to a str path
        np.savez(fh, **members)


def test_neighbouring_frame_data_sets_release_the_same_public_shape(tmp_path, capsys):
    """The same for feature frames in an npz file: a NaN or inf frame, frames of another
    dimension, an empty or too-long sequence, 1-d floats, symbols, an object array that
    cannot be read without pickle, and the empty archive all release the declared shape."""
    rng = np.random.default_rng(3)
    base = {f"s{i}": rng.normal(size=(4 + i, 2)) for i in range(3)}
    nan = rng.normal(size=(3, 2))
    nan[1, 0] = np.nan
    extra = {
        "nan": nan,
        "inf": np.full((2, 2), np.inf),
        "wide": rng.normal(size=(3, 3)),
        "empty": np.zeros((0, 2)),
        "long": rng.normal(size=(40, 2)),
        "flat": rng.normal(size=5),
        "symbols": np.array([0, 1, 1]),
        "ints": np.array([[1, 2], [3, 4]]),
        "bools": np.ones((2, 2), dtype=bool),
        "cube": np.zeros((2, 2, 2)),
        "scalar": np.array(1.5),
    }
    options = ["--feature-bound", "3", "--dimension", "2", "--states", "2"]
    files = [base, {}, {"s0": base["s0"]}]
    files += [{k: v for k, v in base.items() if k != name} for name in base]
    files += [{**base, name: value} for name, value in extra.items()]
    outcomes = []
    for i, members in enumerate(files):
        data = tmp_path / f"d{i}.npz"
        _savez(data, members)
        outcomes.append(_public_outcome(capsys, tmp_path, data, *options))
    pickled = tmp_path / "pickled.npz"
    with open(pickled, "wb") as fh:
        np.savez(fh, **base, obj=np.array([[0.1, 0.2], None], dtype=object))
    outcomes.append(_public_outcome(capsys, tmp_path, pickled, *options))
    shape, label, meta = outcomes[0]
    assert shape == ("gaussian", 2, 2, "diag") and meta["skeleton"]["n_features"] == 2
    assert all(outcome == (shape, label, meta) for outcome in outcomes)


def test_public_sequences_keeps_only_records_of_the_skeletons_kind():
    from smc_hmm.dp.baum_welch import dp_baum_welch, public_sequences
    from smc_hmm.dp.random import DPRandom

    kept = public_sequences(TRUE, [[0, 1, 2, 2], [], [0, 3], [-1], [1.0], None, [[0]]], 3)
    assert [k.tolist() for k in kept] == [[0, 1, 2]]  # cut to L = 3
    gauss = GaussianHMM([1.0], [[1.0]], [[0.0, 0.0]], [[1.0, 1.0]], "diag")
    frames = [np.ones((5, 2)), np.ones((2, 3)), np.full((1, 2), np.nan), np.zeros((0, 2))]
    assert [k.shape for k in public_sequences(gauss, frames, 4)] == [(4, 2)]
    for model, bound in ((TRUE, None), (gauss, 1.0)):  # the empty data set: noise alone
        for mode in ("every", "last"):
            result = dp_baum_welch(
                model, [], 1.0, max_length=3, mode=mode, n_iter=2, feature_bound=bound,
                rng=DPRandom.insecure_seeded(1), sampler="float",
            )  # fmt: skip
            assert type(result.model) is type(model)
            assert result.model.n_states == model.n_states


DOCS_CHAIN = [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]  # docs/dp-release.md's


@pytest.mark.parametrize("graph", ["complete", "utility", "transition"])
def test_neighbouring_traces_release_the_same_public_shape(tmp_path, capsys, graph):
    """release trace: neighbouring traces are traces the chain can produce, of the same
    (public) length, that differ in the state at one timestamp by an edge of the policy
    graph.  Every trace the chain can produce -- so every neighbour of every one -- is
    released (exit 0) with the same public shape: one release per timestamp, the chain's
    states, the query's dimension, the graph; and every trace the chain cannot produce is
    refused before any noise, whichever state makes it so."""
    import itertools

    from smc_hmm.cli import main

    model = tmp_path / "chain.npz"
    save_models(model, [DiscreteHMM([1 / 3] * 3, DOCS_CHAIN, np.eye(3))])
    trace, out = tmp_path / "trace.json", tmp_path / "out.json"
    argv = ["release", "trace", "--model", str(model), "--trace", str(trace)]
    argv += ["--graph", graph, "--eps", "1", "--seed", "2", "--json", str(out)]
    chain = np.array(DOCS_CHAIN)
    shapes, produced = set(), 0
    for states in itertools.product(range(3), repeat=3):
        trace.write_text(json.dumps(list(states)))
        possible = all(chain[a, b] > 0 for a, b in itertools.pairwise(states))
        code = main(argv)
        err = capsys.readouterr().err
        if not possible:
            assert code == 2 and "StateOutsideConstraintError" in err, err
            continue
        assert code == 0, err
        produced += 1
        res = json.loads(out.read_text())
        shapes.add(
            (
                len(res["releases"]),
                res["n_states"],
                res["query_dim"],
                res["graph"],
                tuple(len(r["z"]) for r in res["releases"]),
            )
        )
        out.unlink()
    (shape,) = shapes  # one public shape for all twelve
    assert produced == 12 and shape[:3] == (3, 3, 1) and shape[4] == (1, 1, 1)


@pytest.mark.parametrize("iterations", [3, 7, 13])
def test_the_stated_epsilon_is_the_one_asked_for_never_a_float_above_it(tmp_path, iterations):
    """eps 1 over 7 iterations was stated as "epsilon": 1.0000000000000002: OpenDP's
    privacy map rounds outward and the shares were float quotients.  The scale is now
    raised a float where needed and the shares lowered, so the releases' exact total
    never exceeds the request, and the request is what is stated."""
    from fractions import Fraction

    from smc_hmm.cli import main

    data = tmp_path / "d.json"
    data.write_text(json.dumps([[0, 1, 2, 1, 0], [2, 2, 1, 0, 0]] * 5))
    out = tmp_path / "m.npz"
    argv = ["release", "hmm", "--data", str(data), "--eps", "1", "--max-length", "10",
            "--symbols", "3", "--states", "2", "--iterations", str(iterations),
            "--out", str(out), "--json", str(tmp_path / "s.json")]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["epsilon"] == 1.0 and summary["guarantee"]["epsilon"] == 1.0
    spent = iterations * sum(Fraction(v) for v in summary["epsilon_per_iteration"].values())
    assert spent <= 1
