"""The shared parameter checks of smc_hmm.dp.params, and that the module stays a leaf."""

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from smc_hmm.dp import params
from smc_hmm.dp.params import check_epsilon, check_points, check_sensitivity
from smc_hmm.errors import DPHMMParameterError, PrivacyParameterError, ShapeMismatchError


@pytest.mark.parametrize("good", [1, 0.5, np.float32(2.0), np.int64(3), 1e-300])
def test_check_epsilon_accepts_positive_reals(good):
    assert check_epsilon(good) == float(good)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "1", True, None, [1.0]])
def test_check_epsilon_refuses(bad):
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        check_epsilon(bad)


@pytest.mark.parametrize("good", [0, 0.0, 2, np.float64(1.5)])
def test_check_sensitivity_accepts_nonnegative_reals(good):
    assert check_sensitivity(good) == float(good)


@pytest.mark.parametrize("bad", [-1e-9, math.nan, math.inf, "0", False, None])
def test_check_sensitivity_refuses(bad):
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        check_sensitivity(bad)


def test_the_caller_names_the_error_class_and_the_parameter():
    with pytest.raises(DPHMMParameterError, match="radius must be finite"):
        check_epsilon(-1.0, "radius", error=DPHMMParameterError)


def test_check_points_takes_a_vector_as_one_column_or_refuses_it():
    assert check_points([1, 2, 3], "f").shape == (3, 1)
    assert check_points([[1, 2]], "f").tolist() == [[1.0, 2.0]]
    with pytest.raises(ShapeMismatchError, match=r"x must be a non-empty \(n, d\) array"):
        check_points([1, 2], "x", shape_error=ShapeMismatchError, vector_as_column=False)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("a", "numeric array"),
        ([], "non-empty"),
        (np.zeros((2, 0)), "non-empty"),
        ([[1.0, np.nan]], "NaN or inf"),
    ],
)
def test_check_points_refuses_with_the_callers_error(bad, says):
    with pytest.raises(DPHMMParameterError, match=f"the query.*{says}"):
        check_points(bad, "the query", error=DPHMMParameterError)


def test_params_imports_nothing_from_the_dp_layer():
    """The leaf that breaks the accountant <-> mechanisms circle must stay a leaf."""
    tree = ast.parse(Path(params.__file__).read_text(encoding="utf-8"))
    imported = [
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    ] + [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    assert imported and not [m for m in imported if m.startswith("smc_hmm.dp")]
