"""Exact privacy audits of finite mechanisms: DP loss and Pufferfish ratios (paper 002).

A finite mechanism is a row-stochastic matrix ``P[x, o] = P(output o | input x)``, given
directly, or read from an HMM (:func:`hmm_mechanism`): its emission table, or the output
distribution some steps after starting in an input state, which is how paper 002 writes
the truncated 1/2-geometric mechanism (input states 0, 1, 2 move to output states that
emit their value).

- :func:`dp_loss`: the worst-case privacy loss max |ln P(o|x) / P(o|x')| over
  neighbouring inputs (x, x') and outputs o; the mechanism is eps-DP exactly for
  eps >= this value. Neighbours are "adjacent" (|x - x'| = 1: inputs are counts), a
  list of pairs, or a boolean adjacency matrix.
- :func:`pufferfish_loss`: Pufferfish privacy (Kifer and Machanavajjhala 2014) for a
  finite universe of databases, a query mapping each database to a mechanism input,
  pairs of secrets (events over databases) and a set of attacker priors (distributions
  over databases, possibly correlated). For every prior theta and pair (s_i, s_j) with
  theta(s_i), theta(s_j) > 0 it computes
  P(o | s, theta) = sum_D theta(D) [D in s] P[q(D), o] / theta(s) and the worst ratio
  max_o max(P(o|s_i)/P(o|s_j), P(o|s_j)/P(o|s_i)).

Paper 002's examples (the tests reproduce them exactly): the truncated 1/2-geometric
mechanism on the count {0, 1, 2} of a two-record disease data set is ln 2-DP
(Example 4.1); for two family members and a contagious disease (only databases (0, 0) and
(1, 1) are possible) the secret "John is ill" against "John is not" has ratio 4 = (2/3)/(1/6)
(Examples 4.2, 4.3), so ln 2-Pufferfish fails; Examples 4.4 (independent records,
probability p each) and 4.5 (count prior (1/2, 1/4, 1/4)) compare the output distribution
of the two-record data set without conditioning ("without John's record") against the one
conditioned on at least one ill member ("with John's record, John ill"), and both ratios
stay within 2. ``docs/dp-layer.md`` ("Audit") discusses which secret pairs these are.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.errors import PrivacyParameterError
from smc_hmm.hmm.models import DiscreteHMM

ROW_SUM_TOL = 1e-9
"""Largest allowed deviation of a mechanism row (or a prior) from summing to 1."""


@dataclass(frozen=True)
class PrivacyLoss:
    """Worst-case DP privacy loss of a finite mechanism.

    Attributes:
        epsilon: max over neighbours (x, x') and outputs o of |ln P(o|x)/P(o|x')|
            (``inf`` if some output is possible under one neighbour only; 0 if no pair).
        ratio: exp(epsilon).
        witness: (x, x', o) attaining it, or None.
    """

    epsilon: float
    ratio: float
    witness: tuple[int, int, int] | None


@dataclass(frozen=True)
class PufferfishCase:
    """The ratio for one attacker prior and one secret pair.

    Attributes:
        prior: the prior's name.
        pair: the secret pair's name.
        first, second: P(o | s_i, theta) and P(o | s_j, theta), one entry per output.
        ratio: max over outputs of the larger of the two ratios (inf if an output is
            possible under one secret only).
        epsilon: ln(ratio).
        output: the output attaining the ratio.
    """

    prior: str
    pair: str
    first: np.ndarray
    second: np.ndarray
    ratio: float
    epsilon: float
    output: int


@dataclass(frozen=True)
class PufferfishLoss:
    """Worst case of :func:`pufferfish_loss` and every (prior, pair) case behind it.

    ``epsilon`` is the smallest eps for which the mechanism is eps-Pufferfish private
    for these secrets and priors; ``worst`` is the case attaining it (None if no pair
    had positive probability under any prior, then epsilon = 0).
    """

    epsilon: float
    ratio: float
    worst: PufferfishCase | None
    cases: tuple[PufferfishCase, ...]

    def holds(self, epsilon: float) -> bool:
        """True if the mechanism is epsilon-Pufferfish private (with 1e-12 slack)."""
        return self.epsilon <= epsilon + 1e-12


# --- mechanisms -----------------------------------------------------------------------


def mechanism_matrix(mechanism: ArrayLike) -> np.ndarray:
    """Validate a row-stochastic matrix P[input, output] and return it as float64."""
    try:
        matrix = np.array(mechanism, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"the mechanism must be a numeric matrix: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise PrivacyParameterError(f"the mechanism must be a 2-D matrix, got {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or np.any(matrix < 0):
        raise PrivacyParameterError("the mechanism's probabilities must be finite and >= 0")
    sums = matrix.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > ROW_SUM_TOL):
        row = int(np.argmax(np.abs(sums - 1.0)))
        raise PrivacyParameterError(f"mechanism row {row} sums to {sums[row]!r}, not 1")
    return matrix


def hmm_mechanism(
    model: DiscreteHMM, *, inputs: Sequence[int] | None = None, steps: int = 0
) -> np.ndarray:
    """The mechanism an HMM implements: P[x, o] = P(emit o after ``steps`` steps | q = x).

    ``steps = 0`` reads the emission table (states are inputs, symbols are outputs);
    ``steps = k`` gives (A^k B)[x, o], the symbol emitted k transitions after starting in
    x (paper 002: input states move in one step to output states that emit their value).
    ``inputs`` selects the rows (default: every state).
    """
    if not isinstance(model, DiscreteHMM):
        raise PrivacyParameterError(f"expected a DiscreteHMM, got {type(model).__name__}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise PrivacyParameterError(f"steps must be an integer >= 0, got {steps!r}")
    matrix = np.linalg.matrix_power(model.transmat, int(steps)) @ model.emissionprob
    if inputs is None:
        return matrix
    rows = np.asarray(inputs)
    if rows.ndim != 1 or rows.dtype.kind not in "iu" or rows.size == 0:
        raise PrivacyParameterError("inputs must be a non-empty list of state indices")
    if np.any(rows < 0) or np.any(rows >= model.n_states):
        raise PrivacyParameterError(f"inputs must be states in [0, {model.n_states})")
    return matrix[rows]


def _as_matrix(mechanism: ArrayLike | DiscreteHMM) -> np.ndarray:
    if isinstance(mechanism, DiscreteHMM):
        return mechanism.emissionprob.copy()
    return mechanism_matrix(mechanism)


def _neighbour_pairs(neighbours: Any, n_inputs: int) -> np.ndarray:
    if isinstance(neighbours, str):
        if neighbours != "adjacent":
            raise PrivacyParameterError(
                f"neighbours must be 'adjacent', pairs or an adjacency matrix, not {neighbours!r}"
            )
        first = np.arange(n_inputs - 1)
        return np.stack([first, first + 1], axis=1)
    array = np.asarray(neighbours)
    if array.dtype == np.bool_:
        if array.shape != (n_inputs, n_inputs):
            raise PrivacyParameterError(
                f"the adjacency matrix must have shape {(n_inputs, n_inputs)}, got {array.shape}"
            )
        return np.argwhere(array | array.T)
    if array.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if array.ndim != 2 or array.shape[1] != 2 or array.dtype.kind not in "iu":
        raise PrivacyParameterError("neighbour pairs must be integer pairs (x, x')")
    if np.any(array < 0) or np.any(array >= n_inputs):
        raise PrivacyParameterError(f"neighbour pairs must name inputs in [0, {n_inputs})")
    return array.astype(np.int64)


def _log_ratios(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """|ln(first/second)| elementwise: 0 where both are 0, inf where exactly one is."""
    both_zero = (first == 0) & (second == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.abs(np.log(first) - np.log(second))
    loss[both_zero] = 0.0
    return loss


def dp_loss(mechanism: ArrayLike | DiscreteHMM, neighbours: Any = "adjacent") -> PrivacyLoss:
    """Worst-case privacy loss of a finite mechanism over neighbouring inputs.

    ``mechanism`` is P[x, o] (or a DiscreteHMM, whose emission table is used; see
    :func:`hmm_mechanism` for other readings). ``neighbours`` is ``"adjacent"`` (inputs
    x and x + 1), an array of pairs (x, x'), or a boolean adjacency matrix; the relation
    is symmetrised.
    """
    matrix = _as_matrix(mechanism)
    pairs = _neighbour_pairs(neighbours, matrix.shape[0])
    if pairs.shape[0] == 0:
        return PrivacyLoss(epsilon=0.0, ratio=1.0, witness=None)
    loss = _log_ratios(matrix[pairs[:, 0]], matrix[pairs[:, 1]])  # (pairs, outputs)
    flat = int(np.argmax(loss))
    pair, output = np.unravel_index(flat, loss.shape)
    epsilon = float(loss[pair, output])
    x, x_prime = (int(v) for v in pairs[pair])
    return PrivacyLoss(
        epsilon=epsilon,
        ratio=math.exp(epsilon) if math.isfinite(epsilon) else math.inf,
        witness=(x, x_prime, int(output)),
    )


# --- Pufferfish -------------------------------------------------------------------------

Secret = Callable[[Any], bool] | ArrayLike


def binary_databases(n_records: int) -> list[tuple[int, ...]]:
    """All databases of ``n_records`` binary records (e.g. ill = 1), in lexicographic order."""
    if isinstance(n_records, bool) or not isinstance(n_records, int) or not 1 <= n_records <= 20:
        raise PrivacyParameterError(f"n_records must be an int in [1, 20], got {n_records!r}")
    return [tuple(d) for d in itertools.product((0, 1), repeat=n_records)]


def output_distribution(mechanism: ArrayLike, input_distribution: ArrayLike) -> np.ndarray:
    """P(o) = sum_x p(x) P[x, o]: the output law for a distribution over inputs."""
    matrix = mechanism_matrix(mechanism)
    weights = _probability_vector(input_distribution, "input_distribution", matrix.shape[0])
    return weights @ matrix


def _probability_vector(value: ArrayLike, name: str, size: int) -> np.ndarray:
    try:
        vector = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"{name} must be numeric: {exc}") from exc
    if vector.shape != (size,):
        raise PrivacyParameterError(f"{name} must have shape ({size},), got {vector.shape}")
    if not np.all(np.isfinite(vector)) or np.any(vector < 0):
        raise PrivacyParameterError(f"{name} must be finite and >= 0")
    if abs(vector.sum() - 1.0) > ROW_SUM_TOL:
        raise PrivacyParameterError(f"{name} sums to {vector.sum()!r}, not 1")
    return vector


def _secret_mask(secret: Secret, databases: Sequence[Hashable], name: str) -> np.ndarray:
    if callable(secret):
        mask = np.array([bool(secret(d)) for d in databases], dtype=bool)
    else:
        mask = np.asarray(secret)
        if mask.dtype != np.bool_ or mask.shape != (len(databases),):
            raise PrivacyParameterError(
                f"secret {name!r} must be a predicate or a boolean mask over the "
                f"{len(databases)} databases"
            )
    return mask


def _query_rows(
    query: Callable[[Any], int] | ArrayLike, databases: Sequence[Hashable], n_inputs: int
) -> np.ndarray:
    """The mechanism's input row of every database, checked to be one of its ``n_inputs``."""
    rows = np.array([query(d) for d in databases]) if callable(query) else np.asarray(query)
    if rows.shape != (len(databases),) or rows.dtype.kind not in "iu":
        raise PrivacyParameterError("query must give one integer input row per database")
    if np.any(rows < 0) or np.any(rows >= n_inputs):
        raise PrivacyParameterError(f"query outputs must be inputs in [0, {n_inputs})")
    return rows


def _pufferfish_case(
    per_database: np.ndarray,
    theta: np.ndarray,
    first_mask: np.ndarray,
    second_mask: np.ndarray,
    prior: str,
    pair: str,
) -> PufferfishCase | None:
    """The loss of one secret pair under one prior; None when the prior gives either
    secret probability 0 (Pufferfish conditions only on possible secrets)."""
    mass_first, mass_second = theta[first_mask].sum(), theta[second_mask].sum()
    if mass_first <= 0 or mass_second <= 0:
        return None
    first = (theta * first_mask) @ per_database / mass_first
    second = (theta * second_mask) @ per_database / mass_second
    loss = _log_ratios(first, second)
    output = int(np.argmax(loss))
    epsilon = float(loss[output])
    return PufferfishCase(
        prior=prior,
        pair=pair,
        first=first,
        second=second,
        ratio=math.exp(epsilon) if math.isfinite(epsilon) else math.inf,
        epsilon=epsilon,
        output=output,
    )


def pufferfish_loss(
    mechanism: ArrayLike | DiscreteHMM,
    databases: Sequence[Hashable],
    query: Callable[[Any], int] | ArrayLike,
    secret_pairs: Sequence[tuple[str, Secret, Secret]],
    priors: Mapping[str, ArrayLike],
) -> PufferfishLoss:
    """Worst Pufferfish ratio over attacker priors and secret pairs.

    Args:
        mechanism: P[x, o] (or a DiscreteHMM's emission table).
        databases: the finite universe of databases (e.g. :func:`binary_databases`).
        query: maps a database to the mechanism's input row (a callable, or an integer
            array with one entry per database).
        secret_pairs: (name, s_i, s_j); each secret is a predicate on a database or a
            boolean mask over ``databases``. A pair is skipped under a prior that gives
            either secret probability 0 (Pufferfish conditions only on possible secrets).
        priors: name -> distribution over ``databases`` (the attacker's data-generating
            distribution theta; correlations between records are allowed).
    """
    matrix = _as_matrix(mechanism)
    n_db = len(databases)
    if n_db < 1:
        raise PrivacyParameterError("at least one database is required")
    per_database = matrix[_query_rows(query, databases, matrix.shape[0])]  # (databases, outputs)
    if not secret_pairs:
        raise PrivacyParameterError("at least one secret pair is required")
    if not priors:
        raise PrivacyParameterError("at least one prior is required")
    masks = [
        (str(name), _secret_mask(s_i, databases, name), _secret_mask(s_j, databases, name))
        for name, s_i, s_j in secret_pairs
    ]
    cases: list[PufferfishCase] = []
    for prior_name, prior in priors.items():
        theta = _probability_vector(prior, f"prior {prior_name!r}", n_db)
        for pair_name, first_mask, second_mask in masks:
            case = _pufferfish_case(
                per_database, theta, first_mask, second_mask, str(prior_name), pair_name
            )
            if case is not None:
                cases.append(case)
    if not cases:
        return PufferfishLoss(epsilon=0.0, ratio=1.0, worst=None, cases=())
    worst = max(cases, key=lambda case: case.epsilon)
    return PufferfishLoss(epsilon=worst.epsilon, ratio=worst.ratio, worst=worst, cases=tuple(cases))
