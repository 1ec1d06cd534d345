"""Privacy audits, reproducing paper 002's examples (truncated 1/2-geometric mechanism)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from smc_hmm.dp.audit import (
    binary_databases,
    dp_loss,
    hmm_mechanism,
    mechanism_matrix,
    output_distribution,
    pufferfish_loss,
)
from smc_hmm.dp.mechanisms import TruncatedGeometricMechanism
from smc_hmm.errors import PrivacyParameterError
from smc_hmm.hmm import DiscreteHMM

LN2 = math.log(2)
HALF_GEOMETRIC = np.array([[4, 1, 1], [2, 2, 2], [1, 1, 4]]) / 6  # paper 002, Figure


def paper_002_hmm() -> DiscreteHMM:
    """Figure "Truncated 1/2-Geometric Mechanism" as an HMM: input states 0, 1, 2 (the
    number of ill individuals) move to output states 0_, 1_, 2_ (absorbing), which
    observe zero, one, two with probability 1; input states emit a silent symbol 3."""
    transmat = np.zeros((6, 6))
    transmat[:3, 3:] = HALF_GEOMETRIC
    transmat[3:, 3:] = np.eye(3)
    emissionprob = np.zeros((6, 4))
    emissionprob[:3, 3] = 1.0
    emissionprob[3:, :3] = np.eye(3)
    return DiscreteHMM(np.full(6, 1 / 6), transmat, emissionprob)


def test_example_4_1_the_mechanism_is_ln2_dp():
    matrix = TruncatedGeometricMechanism(LN2, 0, 2).matrix()
    np.testing.assert_allclose(matrix, HALF_GEOMETRIC, atol=1e-15)
    loss = dp_loss(matrix, "adjacent")
    assert loss.epsilon == pytest.approx(LN2, abs=1e-12) and loss.ratio == pytest.approx(2.0)
    # the attacker sees "two" with probability in [1/3, 2/3] whatever John's record is
    assert matrix[1, 2] == pytest.approx(1 / 3) and matrix[2, 2] == pytest.approx(2 / 3)


def test_example_4_1_from_the_hmm():
    matrix = hmm_mechanism(paper_002_hmm(), inputs=[0, 1, 2], steps=1)
    np.testing.assert_allclose(matrix[:, :3], HALF_GEOMETRIC, atol=1e-15)
    np.testing.assert_allclose(matrix[:, 3], 0.0)
    assert dp_loss(matrix).epsilon == pytest.approx(LN2, abs=1e-12)
    # counts 0 and 2 are not neighbours (two records differ): their loss is ln 4
    assert dp_loss(matrix, [(0, 2)]).epsilon == pytest.approx(math.log(4), abs=1e-12)


def _records_query(database):
    return sum(database)


def _john_ill(database):
    return database[0] == 1


def _john_healthy(database):
    return database[0] == 0


def test_examples_4_2_and_4_3_contagious_prior_fails_with_ratio_4():
    databases = binary_databases(2)  # (John, family member)
    for q in (0.01, 0.3, 0.9):  # any prior on the family being ill together
        contagious = {(0, 0): 1 - q, (1, 1): q}
        theta = [contagious.get(d, 0.0) for d in databases]
        loss = pufferfish_loss(
            HALF_GEOMETRIC,
            databases,
            _records_query,
            [("John ill vs healthy", _john_ill, _john_healthy)],
            {"contagious": theta},
        )
        assert loss.ratio == pytest.approx(4.0)  # (2/3) / (1/6)
        assert loss.worst.output in (0, 2)
        np.testing.assert_allclose(loss.worst.first, [1 / 6, 1 / 6, 2 / 3])
        np.testing.assert_allclose(loss.worst.second, [2 / 3, 1 / 6, 1 / 6])
        assert not loss.holds(LN2)
        assert loss.holds(math.log(4))


COUNTS = [0, 1, 2]
ABSENT = np.array([True, True, True])  # no conditioning: "without John's record"
ILL_PRESENT = np.array([False, True, True])  # "with John's record, John ill": count >= 1


def _paper_pair(prior):
    return pufferfish_loss(
        HALF_GEOMETRIC,
        COUNTS,
        np.array(COUNTS),
        [("without John vs with John ill", ABSENT, ILL_PRESENT)],
        {"prior": prior},
    )


@pytest.mark.parametrize("p", [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99])
def test_example_4_4_independent_prior_holds(p):
    loss = _paper_pair([(1 - p) ** 2, 2 * p * (1 - p), p**2])
    # the paper's table of observation probabilities
    without = [(p * p - 4 * p + 4) / 6, (-2 * p * p + 2 * p + 1) / 6, (p * p + 2 * p + 1) / 6]
    with_john = [(4 - 3 * p) / (12 - 6 * p), (4 - 3 * p) / (12 - 6 * p), 2 / (6 - 3 * p)]
    np.testing.assert_allclose(loss.worst.first, without, atol=1e-14)
    np.testing.assert_allclose(loss.worst.second, with_john, atol=1e-14)
    assert loss.ratio <= 2.0 + 1e-12 and loss.holds(LN2)


def test_example_4_4_record_level_secret_pair_gives_exactly_ln2():
    """The standard Pufferfish pair (John ill vs healthy) under independent records is
    exactly as private as DP promises (Kifer and Machanavajjhala, Theorem 6.1)."""
    databases = binary_databases(2)
    priors = {
        f"p={p}": [(p if a else 1 - p) * (p if b else 1 - p) for a, b in databases]
        for p in (0.05, 0.5, 0.8)
    }
    loss = pufferfish_loss(
        HALF_GEOMETRIC,
        databases,
        _records_query,
        [("John ill vs healthy", _john_ill, _john_healthy)],
        priors,
    )
    assert len(loss.cases) == 3
    assert loss.ratio == pytest.approx(2.0) and loss.holds(LN2)


def test_example_4_5_prior_half_quarter_quarter_holds():
    loss = _paper_pair([0.5, 0.25, 0.25])
    third = Fraction(1, 3)
    # the paper's numbers: 11/24, 5/24, 1/3 without; 1/4, 1/4, 1/2 with John ill
    np.testing.assert_allclose(loss.worst.first, [11 / 24, 5 / 24, float(third)], atol=1e-15)
    np.testing.assert_allclose(loss.worst.second, [1 / 4, 1 / 4, 1 / 2], atol=1e-15)
    assert loss.ratio == pytest.approx(11 / 6) and loss.holds(LN2)
    np.testing.assert_allclose(
        output_distribution(HALF_GEOMETRIC, [0.5, 0.25, 0.25]), [11 / 24, 5 / 24, 1 / 3]
    )


def test_example_4_5_prior_is_not_binomial_but_record_level_pair_fails():
    """(1/2, 1/4, 1/4) is not binomial; spread over two exchangeable records it gives
    databases (0,0): 1/2, (0,1) = (1,0): 1/8, (1,1): 1/4, and the record-level pair
    (John ill vs healthy) then gives P(o | ill) = (2/9, 2/9, 5/9) and
    P(o | healthy) = (3/5, 1/5, 1/5), ratio 25/9 > 2 on "two": the paper's conclusion
    depends on its choice of secret pair (unconditioned vs "someone is ill")."""
    databases = binary_databases(2)
    theta = {(0, 0): 0.5, (0, 1): 0.125, (1, 0): 0.125, (1, 1): 0.25}
    loss = pufferfish_loss(
        HALF_GEOMETRIC,
        databases,
        _records_query,
        [("John ill vs healthy", _john_ill, _john_healthy)],
        {"exchangeable": [theta[d] for d in databases]},
    )
    np.testing.assert_allclose(loss.worst.first, [2 / 9, 2 / 9, 5 / 9])
    np.testing.assert_allclose(loss.worst.second, [3 / 5, 1 / 5, 1 / 5])
    assert loss.ratio == pytest.approx(25 / 9) and loss.worst.output == 2
    assert not loss.holds(LN2)


def test_pairs_with_an_impossible_secret_are_skipped():
    loss = pufferfish_loss(
        HALF_GEOMETRIC,
        COUNTS,
        np.array(COUNTS),
        [("impossible", np.array([False, False, True]), ABSENT)],
        {"no one ill": [1.0, 0.0, 0.0]},
    )
    assert loss.cases == () and loss.epsilon == 0.0 and loss.worst is None


def test_dp_loss_neighbour_forms_and_infinite_loss():
    matrix = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    assert dp_loss(matrix).epsilon == math.inf
    adjacency = np.zeros((3, 3), dtype=bool)
    adjacency[1, 2] = True
    assert dp_loss(matrix, adjacency).witness[:2] in ((1, 2), (2, 1))
    assert dp_loss(matrix, np.zeros((0, 2), dtype=int)).epsilon == 0.0
    hmm = DiscreteHMM([0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]], [[0.75, 0.25], [0.25, 0.75]])
    assert dp_loss(hmm).epsilon == pytest.approx(math.log(3))


@pytest.mark.parametrize(
    "matrix",
    [[[0.5, 0.4]], [[1.5, -0.5]], [[math.nan, 1.0]], [1.0, 0.0], [["a", "b"]], np.zeros((0, 2))],
)
def test_bad_mechanisms_are_refused(matrix):
    with pytest.raises(PrivacyParameterError):
        mechanism_matrix(matrix)


def test_bad_audit_arguments_are_refused():
    with pytest.raises(PrivacyParameterError):
        dp_loss(HALF_GEOMETRIC, "everything")
    with pytest.raises(PrivacyParameterError):
        dp_loss(HALF_GEOMETRIC, [(0, 3)])
    with pytest.raises(PrivacyParameterError):
        dp_loss(HALF_GEOMETRIC, np.ones((2, 2), dtype=bool))
    with pytest.raises(PrivacyParameterError):
        hmm_mechanism(paper_002_hmm(), inputs=[7])
    with pytest.raises(PrivacyParameterError):
        hmm_mechanism(paper_002_hmm(), steps=-1)
    with pytest.raises(PrivacyParameterError):
        _paper_pair([0.5, 0.5, 0.5])  # prior does not sum to 1
    with pytest.raises(PrivacyParameterError):
        pufferfish_loss(
            HALF_GEOMETRIC, COUNTS, np.array([0, 1, 3]), [("x", ABSENT, ABSENT)], {"p": [1, 0, 0]}
        )
    with pytest.raises(PrivacyParameterError):
        pufferfish_loss(
            HALF_GEOMETRIC, COUNTS, np.array(COUNTS), [("x", [1, 0], ABSENT)], {"p": [1, 0, 0]}
        )
    with pytest.raises(PrivacyParameterError):
        binary_databases(0)
