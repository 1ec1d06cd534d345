"""Error messages show plain values (``1.1``, ``'a'``), never numpy reprs (``np.float64(1.1)``)."""

from __future__ import annotations

import numpy as np
import pytest

from smc_hmm.crypto.fixedpoint import check_scale
from smc_hmm.errors import InvalidInputError, ModelError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM
from smc_hmm.hmm._checks import plain
from smc_hmm.hmm.training import baum_welch, reestimate

GOOD_TRANSMAT = [[0.9, 0.1], [0.2, 0.8]]
GOOD_MEANS = [[0.0], [1.0]]
GOOD_COVARS = [[1.0], [2.0]]


def _message(excinfo) -> str:
    text = str(excinfo.value)
    assert "np." not in text and "array(" not in text, text
    return text


def test_plain_converts_numpy_scalars_only():
    assert type(plain(np.float64(1.1))) is float and plain(np.float64(1.1)) == 1.1
    assert type(plain(np.str_("a"))) is str
    assert type(plain(np.int64(3))) is int
    assert type(plain(np.array(2.5))) is float
    marker = object()
    assert plain(marker) is marker
    assert plain([1, 2]) == [1, 2]


def test_gaussian_startprob_summing_to_1_1_says_1_1():
    with pytest.raises(ModelError) as excinfo:
        GaussianHMM(np.array([1.1, 0.0]), GOOD_TRANSMAT, GOOD_MEANS, GOOD_COVARS)
    assert "startprob sums to 1.1, not 1" in _message(excinfo)


def test_transmat_row_sum_is_a_plain_float():
    with pytest.raises(ModelError) as excinfo:
        DiscreteHMM([0.5, 0.5], [[0.5, 0.5], [0.7, 0.7]], [[1.0], [1.0]])
    assert "transmat row 1 sums to 1.4, not 1" in _message(excinfo)


def test_numpy_string_covariance_type_is_shown_as_a_python_string():
    with pytest.raises(ModelError) as excinfo:
        GaussianHMM([0.5, 0.5], GOOD_TRANSMAT, GOOD_MEANS, GOOD_COVARS, np.str_("a"))
    assert "covariance_type must be 'diag' or 'full', got 'a'" in _message(excinfo)


def test_covars_shape_message_shows_plain_covariance_type():
    with pytest.raises(ModelError) as excinfo:
        GaussianHMM([0.5, 0.5], GOOD_TRANSMAT, GOOD_MEANS, GOOD_COVARS, np.str_("full"))
    assert "for covariance_type='full'" in _message(excinfo)


def test_sample_length_and_rng_messages(make_discrete):
    model = make_discrete()
    with pytest.raises(InvalidInputError) as excinfo:
        model.sample(np.float64(2.5))
    assert "positive integer, got 2.5" in _message(excinfo)
    with pytest.raises(InvalidInputError) as excinfo:
        model.sample(3, rng=np.float64(0.5))
    assert "not 0.5" in _message(excinfo)


def test_training_parameter_messages(make_discrete):
    model = make_discrete()
    seqs = [model.sample(5, rng=0)[0]]
    with pytest.raises(InvalidInputError) as excinfo:
        baum_welch(model, seqs, n_iter=np.float64(3.0))
    assert "n_iter must be an integer >= 0, got 3.0" in _message(excinfo)
    with pytest.raises(InvalidInputError) as excinfo:
        baum_welch(model, seqs, tol=np.float64(-0.5))
    assert "tol must be finite and >= 0, got -0.5" in _message(excinfo)
    counts = None  # min_covar is checked before the counts are looked at
    with pytest.raises(InvalidInputError) as excinfo:
        reestimate(model, counts, min_covar=np.float64(-1.5))
    assert "min_covar must be finite and >= 0, got -1.5" in _message(excinfo)


def test_fixedpoint_scale_message():
    with pytest.raises(InvalidInputError) as excinfo:
        check_scale(np.int64(5000))
    assert "got 5000" in _message(excinfo)
    with pytest.raises(InvalidInputError) as excinfo:
        check_scale(np.float64(1.5))
    assert "got 1.5" in _message(excinfo)
