"""smc_hmm.hmm.io: model files round-trip; every malformed file is a typed error naming it."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from smc_hmm.errors import InvalidInputError, ModelError, SmcHmmError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM
from smc_hmm.hmm.io import load_model_pipeline, load_models, save_models


@pytest.fixture
def discrete_file(tmp_path, make_discrete):
    path = tmp_path / "models.npz"
    save_models(path, [make_discrete(seed=1), make_discrete(seed=2)], labels=["a", "b"])
    return path


def _members(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return dict(data.items())


def _rewrite(source, target, **changes):
    """Copy the model file ``source`` to ``target`` with members replaced (None: removed)."""
    members = _members(source)
    for name, value in changes.items():
        name = name.replace("__", "/")
        if value is None:
            members.pop(name)
        else:
            members[name] = value
    with open(target, "wb") as fh:
        np.savez(fh, **members)
    return target


def assert_rejected(path, *fragments, error=ModelError) -> str:
    with pytest.raises(error) as excinfo:
        load_models(path)
    text = str(excinfo.value)
    assert str(path) in text, text
    for fragment in fragments:
        assert fragment in text, text
    assert "np." not in text, text
    return text


# -- good files -------------------------------------------------------------------------


def test_discrete_round_trip(discrete_file, make_discrete):
    models, labels = load_models(discrete_file)
    assert labels == ["a", "b"]
    assert all(isinstance(m, DiscreteHMM) for m in models)
    np.testing.assert_array_equal(models[1].emissionprob, make_discrete(seed=2).emissionprob)


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_gaussian_round_trip_without_labels(tmp_path, make_gaussian, covariance_type):
    model = make_gaussian(covariance_type=covariance_type)
    save_models(tmp_path / "g.npz", [model])
    models, labels = load_models(tmp_path / "g.npz")
    assert labels is None and isinstance(models[0], GaussianHMM)
    assert models[0].covariance_type == covariance_type
    np.testing.assert_array_equal(models[0].covars, model.covars)


def test_bundled_model_files_still_load():
    from smc_hmm.data import load_bundled_models

    for kind in ("diag", "full"):
        models, labels = load_bundled_models(kind)
        assert len(models) == len(labels) == 10


# -- not a model archive at all -----------------------------------------------------------


def test_a_model_file_carries_its_feature_pipeline(tmp_path, make_gaussian):
    path = tmp_path / "with_pipeline.npz"
    pipeline = {"format": "x", "hop": 80, "mean": [0.5, -1.0]}
    save_models(path, [make_gaussian()], ["w"], pipeline=pipeline)
    models, labels = load_models(path)
    assert labels == ["w"] and load_model_pipeline(path) == pipeline
    save_models(path, [make_gaussian()])
    assert load_model_pipeline(path) is None


def test_bundled_model_files_carry_the_bundled_pipeline():
    from importlib import resources

    from smc_hmm.data import load_pipeline

    names = ("models_diag", "models_full", "garbage_diag", "garbage_full", "background_diag")
    for name in names:
        with resources.as_file(resources.files("smc_hmm.data") / "fsdd" / f"{name}.npz") as p:
            assert load_model_pipeline(p) == load_pipeline().to_dict()


def test_a_malformed_pipeline_member_is_a_model_error(tmp_path, make_gaussian):
    path = tmp_path / "bad.npz"
    with open(path, "wb") as fh:
        np.savez(fh, **_members_of(make_gaussian()), pipeline=np.array("{not json"))
    assert load_models(path)[0]  # the models themselves are fine
    with pytest.raises(ModelError, match="not JSON"):
        load_model_pipeline(path)


def _members_of(model):
    return {
        "kind": np.array("gaussian"),
        "count": np.array(1),
        "0/startprob": model.startprob,
        "0/transmat": model.transmat,
        "0/means": model.means,
        "0/covars": model.covars,
        "0/covariance_type": np.array(model.covariance_type),
    }


def test_truncated_archive(discrete_file, tmp_path):
    data = discrete_file.read_bytes()
    for n, cut in enumerate((len(data) // 2, len(data) - 10, 40)):
        path = tmp_path / f"truncated{n}.npz"
        path.write_bytes(data[:cut])
        assert_rejected(path, "not a valid .npz archive")


def test_corrupt_member_data(discrete_file, tmp_path):
    data = bytearray(discrete_file.read_bytes())
    with zipfile.ZipFile(discrete_file) as zf:
        info = zf.getinfo("0/transmat.npy")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start, start + info.compress_size):
        data[i] ^= 0xFF
    path = tmp_path / "corrupt.npz"
    path.write_bytes(bytes(data))
    assert_rejected(path, "not a valid .npz archive")


def test_npy_renamed_npz(tmp_path):
    path = tmp_path / "array.npz"
    with open(path, "wb") as fh:
        np.save(fh, np.zeros(3))
    assert_rejected(path, "single .npy array", "not a model archive")


@pytest.mark.parametrize(
    "content", [b"", b"junk", bytes(range(256)) * 4, b'{"cost": 1}', b"\x80\x04K\x01."]
)
def test_random_bytes_are_not_reported_as_pickled_data(tmp_path, content):
    path = tmp_path / "random.npz"
    path.write_bytes(content)
    text = assert_rejected(path, "not a model file", "not a .npz archive")
    assert "pickle" not in text


def test_zip_without_numpy_members(tmp_path):
    path = tmp_path / "other.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "hello")
    assert_rejected(path, "lacks 'kind'")


def test_object_arrays_are_refused(discrete_file, tmp_path):
    path = tmp_path / "object.npz"
    members = _members(discrete_file)
    members["0/startprob"] = np.array([0.5, 0.5], dtype=object)
    with open(path, "wb") as fh:
        np.savez(fh, **members)
    assert_rejected(path, "object (pickled) arrays")


def test_missing_file_and_directory(tmp_path):
    assert_rejected(tmp_path / "absent.npz", "cannot read", error=InvalidInputError)
    assert_rejected(tmp_path, "cannot read", error=InvalidInputError)


# -- kind and count ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "fragments"),
    [
        (np.array("abc"), ("count must be a single integer", "got 'abc'")),
        (np.array([1, 2]), ("count must be a single integer", "shape (2,)")),
        (np.array(2.0), ("count must be a single integer", "got 2.0")),
        (np.array(True), ("count must be a single integer",)),
        (np.array(-5), ("count must be >= 1", "got -5")),
        (np.array(0), ("count must be >= 1", "got 0")),
        (np.array(3), ("declares count = 3", "models 0, 1")),
        (np.array(1), ("declares count = 1", "models 0, 1")),
        (np.array(2**62), ("declares count = 4611686018427387904",)),
    ],
)
def test_bad_count(discrete_file, tmp_path, count, fragments):
    assert_rejected(_rewrite(discrete_file, tmp_path / "bad.npz", count=count), *fragments)


def test_missing_kind_or_count(discrete_file, tmp_path):
    assert_rejected(_rewrite(discrete_file, tmp_path / "k.npz", kind=None), "lacks 'kind'")
    assert_rejected(_rewrite(discrete_file, tmp_path / "c.npz", count=None), "lacks 'count'")


@pytest.mark.parametrize(
    ("kind", "fragment"),
    [
        (np.array("weird"), "got 'weird'"),
        (np.array(3), "got 3"),
        (np.array(["discrete"]), "shape (1,)"),
        (np.array(b"discrete"), "kind must be"),
    ],
)
def test_bad_kind(discrete_file, tmp_path, kind, fragment):
    text = assert_rejected(_rewrite(discrete_file, tmp_path / "bad.npz", kind=kind), fragment)
    assert "kind must be 'discrete' or 'gaussian'" in text


def test_kind_that_does_not_match_the_arrays(discrete_file, tmp_path):
    path = _rewrite(discrete_file, tmp_path / "bad.npz", kind=np.array("gaussian"))
    assert_rejected(path, "unexpected member '0/emissionprob'", "gaussian model file")


def test_model_indices_with_gaps(discrete_file, tmp_path):
    members = _members(discrete_file)
    renamed = {k.replace("1/", "5/"): v for k, v in members.items()}
    path = tmp_path / "gaps.npz"
    with open(path, "wb") as fh:
        np.savez(fh, **renamed)
    assert_rejected(path, "declares count = 2", "models 0, 5")


def test_unexpected_and_missing_members(discrete_file, tmp_path):
    assert_rejected(
        _rewrite(discrete_file, tmp_path / "extra.npz", extra=np.zeros(2)),
        "unexpected member 'extra'",
    )
    assert_rejected(
        _rewrite(discrete_file, tmp_path / "missing.npz", **{"1/transmat": None}),
        "lacks '1/transmat'",
    )


# -- arrays, labels and model validation -------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [np.array(["0.5", "0.5"]), np.array([True, False]), np.array([0.5 + 0j, 0.5 + 0j])],
)
def test_parameter_arrays_must_be_numeric(discrete_file, tmp_path, value):
    path = _rewrite(discrete_file, tmp_path / "bad.npz", **{"0/startprob": value})
    assert_rejected(path, "'0/startprob' must be a numeric array", f"dtype {value.dtype}")


def test_invalid_model_names_file_and_model(discrete_file, tmp_path):
    path = _rewrite(discrete_file, tmp_path / "bad.npz", **{"1/startprob": np.array([1.1, 0.0])})
    assert_rejected(path, "model 1", "startprob sums to 1.1")


def test_bad_covariance_type(tmp_path, make_gaussian):
    good = tmp_path / "g.npz"
    save_models(good, [make_gaussian()])
    for value, fragment in ((np.array("spherical"), "got 'spherical'"), (np.array(1), "got 1")):
        path = _rewrite(good, tmp_path / "bad.npz", **{"0/covariance_type": value})
        assert_rejected(path, "'0/covariance_type'", fragment)


def test_labels_all_or_none_and_strings(discrete_file, tmp_path):
    assert_rejected(
        _rewrite(discrete_file, tmp_path / "some.npz", **{"1/label": None}),
        "labels only some models",
        "no label for 1",
    )
    assert_rejected(
        _rewrite(discrete_file, tmp_path / "num.npz", **{"0/label": np.array(7)}),
        "'0/label' must be a single string",
        "got 7",
    )
    assert_rejected(
        _rewrite(discrete_file, tmp_path / "many.npz", **{"0/label": np.array(["a", "b"])}),
        "'0/label' must be a single string",
    )


def test_every_error_is_an_smc_hmm_error(discrete_file, tmp_path):
    """The CLI prints SmcHmmError as one line: nothing above may escape as a raw error."""
    data = discrete_file.read_bytes()
    for cut in range(0, len(data), max(1, len(data) // 40)):
        path = tmp_path / f"cut{cut}.npz"
        path.write_bytes(data[:cut])
        with pytest.raises(SmcHmmError):
            load_models(path)
