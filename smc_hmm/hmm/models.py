"""Validated hidden Markov models with discrete or Gaussian emissions.

A model is lambda = (A, B, pi) in Rabiner's notation (Rabiner 1989, section II):
``startprob`` is pi, ``transmat`` is A (row i holds P(q_{t+1} = j | q_t = i)) and the
emission part is B, either a symbol table b_j(k) or one Gaussian N(mu_j, C_j) per
state (thesis 003, section 4.2.1, "Secure Keyword Recognition").

Models are immutable: the dataclasses are frozen and their arrays read-only float64
copies, validated once in ``__post_init__``. Invalid parameters raise
:class:`~smc_hmm.errors.ModelError`; invalid observations raise
:class:`~smc_hmm.errors.InvalidInputError` (or its subclass ``ShapeMismatchError``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import solve_triangular

from smc_hmm.errors import InvalidInputError, ModelError, ShapeMismatchError
from smc_hmm.hmm import _checks

CovarianceType = Literal["diag", "full"]
_LOG_2PI = math.log(2.0 * math.pi)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _safe_log(array: np.ndarray) -> np.ndarray:
    """Elementwise log with log(0) = -inf and no warning."""
    with np.errstate(divide="ignore"):
        return _frozen(np.log(array))


def _as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    raise InvalidInputError(
        f"rng must be a numpy Generator, an int seed or None, not {_checks.plain(rng)!r}"
    )


def _check_length(n_steps: object) -> int:
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise InvalidInputError(
            f"the sequence length must be a positive integer, got {_checks.plain(n_steps)!r}"
        )
    return int(n_steps)


def _require_hmmlearn() -> ModuleType:
    """Import ``hmmlearn.hmm`` on demand: it is an optional (test) dependency."""
    try:
        from hmmlearn import hmm
    except ImportError as exc:
        raise InvalidInputError(
            "hmmlearn is required for import/export; install it with "
            "`pip install 'smc-hmm[test]'` or `pip install hmmlearn`"
        ) from exc
    return hmm


def _check_hmmlearn_class(model: Any, name: str) -> None:
    """Refuse a ``model`` that is not an ``hmmlearn.hmm.<name>``."""
    if not isinstance(model, getattr(_require_hmmlearn(), name)):
        raise InvalidInputError(f"expected hmmlearn.hmm.{name}, got {type(model).__name__}")


def _fitted_attribute(model: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(getattr(model, name))
    except AttributeError as exc:
        raise InvalidInputError(f"the hmmlearn model has no {name}; fit or set it first") from exc


@dataclass(frozen=True, eq=False)
class _MarkovChain:
    """The hidden part (pi, A) shared by every model; not used on its own."""

    startprob: np.ndarray
    transmat: np.ndarray

    def __post_init__(self) -> None:
        startprob = _checks.probability_vector(self.startprob, "startprob")
        transmat = _checks.stochastic_matrix(self.transmat, "transmat")
        n_states = startprob.shape[0]
        if transmat.shape != (n_states, n_states):
            raise ModelError(
                f"transmat has shape {transmat.shape}, expected {(n_states, n_states)} "
                f"to match startprob"
            )
        self._set("startprob", startprob)
        self._set("transmat", transmat)

    def _set(self, name: str, array: np.ndarray) -> None:
        object.__setattr__(self, name, _frozen(array))

    @property
    def n_states(self) -> int:
        """Number of hidden states N."""
        return int(self.startprob.shape[0])

    @cached_property
    def log_startprob(self) -> np.ndarray:
        """log pi, with -inf for impossible initial states."""
        return _safe_log(self.startprob)

    @cached_property
    def log_transmat(self) -> np.ndarray:
        """log A, with -inf for structural zeros."""
        return _safe_log(self.transmat)

    def _sample(
        self, n_steps: int, rng: np.random.Generator | int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(observations, states): the states drawn from the chain first, then one
        emission per state (:meth:`_emit`), from the same generator."""
        n_steps = _check_length(n_steps)
        rng = _as_rng(rng)
        states = np.empty(n_steps, dtype=np.int64)
        states[0] = rng.choice(self.n_states, p=self.startprob)
        for t in range(1, n_steps):
            states[t] = rng.choice(self.n_states, p=self.transmat[states[t - 1]])
        return self._emit(states, rng), states

    def _emit(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _chain_to_hmmlearn(self, model: Any) -> Any:
        """``model`` (a new hmmlearn HMM) given this chain's pi and A."""
        model.startprob_ = self.startprob.copy()
        model.transmat_ = self.transmat.copy()
        return model


@dataclass(frozen=True, eq=False)
class DiscreteHMM(_MarkovChain):
    """HMM with a finite alphabet {0, ..., M-1}: ``emissionprob[j, k]`` = b_j(k).

    Rabiner (1989), section II; the secure forward algorithm of thesis 003,
    section 4.2.1, fetches log b_j(x_t) from this table by 1-of-M oblivious transfer.
    """

    emissionprob: np.ndarray

    def __post_init__(self) -> None:
        super().__post_init__()
        emissionprob = _checks.stochastic_matrix(self.emissionprob, "emissionprob")
        if emissionprob.shape[0] != self.n_states:
            raise ModelError(
                f"emissionprob has {emissionprob.shape[0]} rows, expected one per state "
                f"({self.n_states})"
            )
        self._set("emissionprob", emissionprob)

    @property
    def n_symbols(self) -> int:
        """Alphabet size M."""
        return int(self.emissionprob.shape[1])

    @cached_property
    def log_emissionprob(self) -> np.ndarray:
        """log B, with -inf for symbols a state never emits."""
        return _safe_log(self.emissionprob)

    def check_observations(self, obs: ArrayLike) -> np.ndarray:
        """Validate a symbol sequence of shape (T,) or (T, 1); return it as int64 (T,).

        Symbols must be integers (integer dtype, or floats with integral values)
        in [0, M); anything else raises InvalidInputError.
        """
        array = np.asarray(obs)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if array.ndim != 1:
            raise ShapeMismatchError(f"obs must have shape (T,) or (T, 1), got {array.shape}")
        if array.shape[0] < 1:
            raise InvalidInputError("the observation sequence must have at least one element")
        if array.dtype.kind == "f":
            if not np.all(np.isfinite(array)) or not np.all(array == np.round(array)):
                raise InvalidInputError("obs must hold integer symbols")
        elif array.dtype.kind not in "iu":
            raise InvalidInputError(f"obs must hold integer symbols, got dtype {array.dtype}")
        if np.any(array < 0) or np.any(array >= self.n_symbols):
            bad = array[(array < 0) | (array >= self.n_symbols)][0]
            raise InvalidInputError(f"symbol {bad} is outside the alphabet [0, {self.n_symbols})")
        return array.astype(np.int64)

    def log_emission(self, obs: ArrayLike) -> np.ndarray:
        """Matrix (T, N) of log b_j(o_t); -inf where b_j(o_t) = 0."""
        return self.log_emissionprob[:, self.check_observations(obs)].T.copy()

    def sample(
        self, n_steps: int, rng: np.random.Generator | int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw (symbols (T,), states (T,)) from the model; for tests and demos."""
        return self._sample(n_steps, rng)

    def _emit(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        obs = np.array([rng.choice(self.n_symbols, p=self.emissionprob[s]) for s in states])
        return obs.astype(np.int64)

    def to_hmmlearn(self) -> Any:
        """Return an equivalent ``hmmlearn.hmm.CategoricalHMM`` (no fitting)."""
        hmm = _require_hmmlearn()
        model = hmm.CategoricalHMM(
            n_components=self.n_states, n_features=self.n_symbols, init_params=""
        )
        model.emissionprob_ = self.emissionprob.copy()
        return self._chain_to_hmmlearn(model)

    @classmethod
    def from_hmmlearn(cls, model: Any) -> DiscreteHMM:
        """Build a DiscreteHMM from a fitted ``hmmlearn.hmm.CategoricalHMM``."""
        _check_hmmlearn_class(model, "CategoricalHMM")
        return cls(
            startprob=_fitted_attribute(model, "startprob_"),
            transmat=_fitted_attribute(model, "transmat_"),
            emissionprob=_fitted_attribute(model, "emissionprob_"),
        )


@dataclass(frozen=True, eq=False)
class GaussianHMM(_MarkovChain):
    """HMM with one multivariate Gaussian N(mu_j, C_j) per state.

    ``means`` has shape (N, D); ``covars`` has shape (N, D) of variances for
    ``covariance_type="diag"`` or (N, D, D) of symmetric positive-definite matrices for
    ``"full"``. These are the state densities b_j of thesis 003, section 4.2.1, whose
    logarithms :mod:`smc_hmm.hmm.gaussian_forms` writes as quadratic forms z^T W_j z.
    """

    means: np.ndarray
    covars: np.ndarray
    covariance_type: CovarianceType = "diag"
    _factors: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.covariance_type not in ("diag", "full"):
            raise ModelError(
                "covariance_type must be 'diag' or 'full', "
                f"got {_checks.plain(self.covariance_type)!r}"
            )
        means = _checks.as_float_array(self.means, "means", ModelError)
        _checks.require_ndim(means, 2, "means", ModelError)
        if means.shape[0] != self.n_states or means.shape[1] < 1:
            raise ModelError(f"means has shape {means.shape}, expected ({self.n_states}, D >= 1)")
        _checks.require_finite(means, "means", ModelError)
        covars = _checks.as_float_array(self.covars, "covars", ModelError)
        n_features = means.shape[1]
        if self.covariance_type == "diag":
            expected: tuple[int, ...] = (self.n_states, n_features)
        else:
            expected = (self.n_states, n_features, n_features)
        if covars.shape != expected:
            raise ModelError(
                f"covars has shape {covars.shape}, expected {expected} for "
                f"covariance_type={_checks.plain(self.covariance_type)!r}"
            )
        _checks.require_finite(covars, "covars", ModelError)
        if self.covariance_type == "diag":
            _checks.positive_variances(covars, "covars")
            factors = np.sqrt(covars)
        else:
            factors = np.stack([_checks.cholesky(c, f"covars[{j}]") for j, c in enumerate(covars)])
        self._set("means", means)
        self._set("covars", covars)
        self._set("_factors", factors)

    @property
    def n_features(self) -> int:
        """Dimension D of an observation vector."""
        return int(self.means.shape[1])

    @property
    def cholesky_factors(self) -> np.ndarray:
        """Per-state square roots of C_j: standard deviations (N, D) for "diag",
        lower Cholesky factors L_j with C_j = L_j L_j^T (N, D, D) for "full"."""
        return self._factors

    @property
    def full_covars(self) -> np.ndarray:
        """Covariances as full matrices (N, D, D) whatever the covariance type."""
        if self.covariance_type == "full":
            return self.covars.copy()
        return np.stack([np.diag(c) for c in self.covars])

    def check_observations(self, obs: ArrayLike) -> np.ndarray:
        """Validate an observation matrix of shape (T, D) with finite entries."""
        array = _checks.as_float_array(obs, "obs", InvalidInputError)
        if array.ndim != 2 or array.shape[1] != self.n_features:
            raise ShapeMismatchError(
                f"obs must have shape (T, {self.n_features}), got {array.shape}"
            )
        if array.shape[0] < 1:
            raise InvalidInputError("the observation sequence must have at least one element")
        _checks.require_finite(array, "obs", InvalidInputError)
        return array

    def log_emission(self, obs: ArrayLike) -> np.ndarray:
        """Matrix (T, N) of log N(o_t; mu_j, C_j)."""
        x = self.check_observations(obs)
        out = np.empty((x.shape[0], self.n_states))
        for j in range(self.n_states):
            diff = x - self.means[j]
            if self.covariance_type == "diag":
                std = self.cholesky_factors[j]
                whitened = diff / std
                log_det = 2.0 * np.sum(np.log(std))
                mahalanobis = np.sum(whitened**2, axis=1)
            else:
                chol = self.cholesky_factors[j]
                whitened = solve_triangular(chol, diff.T, lower=True)
                log_det = 2.0 * np.sum(np.log(np.diag(chol)))
                mahalanobis = np.sum(whitened**2, axis=0)
            out[:, j] = -0.5 * (mahalanobis + log_det + self.n_features * _LOG_2PI)
        return out

    def sample(
        self, n_steps: int, rng: np.random.Generator | int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw (observations (T, D), states (T,)) from the model; for tests and demos."""
        return self._sample(n_steps, rng)

    def _emit(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        noise = rng.standard_normal((states.shape[0], self.n_features))
        if self.covariance_type == "diag":
            scaled = noise * self.cholesky_factors[states]
        else:
            scaled = np.einsum("tij,tj->ti", self.cholesky_factors[states], noise)
        return self.means[states] + scaled

    def to_hmmlearn(self) -> Any:
        """Return an equivalent ``hmmlearn.hmm.GaussianHMM`` (no fitting)."""
        hmm = _require_hmmlearn()
        model = hmm.GaussianHMM(
            n_components=self.n_states, covariance_type=self.covariance_type, init_params=""
        )
        model.n_features = self.n_features
        model.means_ = self.means.copy()
        model.covars_ = self.covars.copy()
        return self._chain_to_hmmlearn(model)

    @classmethod
    def from_hmmlearn(cls, model: Any) -> GaussianHMM:
        """Build a GaussianHMM from a fitted ``hmmlearn.hmm.GaussianHMM``.

        hmmlearn's "spherical" covariances become "diag" and "tied" become "full".
        """
        _check_hmmlearn_class(model, "GaussianHMM")
        full = _fitted_attribute(model, "covars_")  # hmmlearn always returns (N, D, D)
        if model.covariance_type in ("diag", "spherical"):
            covariance_type: CovarianceType = "diag"
            covars = np.diagonal(full, axis1=1, axis2=2)
        else:
            covariance_type = "full"
            covars = full
        return cls(
            startprob=_fitted_attribute(model, "startprob_"),
            transmat=_fitted_attribute(model, "transmat_"),
            means=_fitted_attribute(model, "means_"),
            covars=covars,
            covariance_type=covariance_type,
        )


HMM = DiscreteHMM | GaussianHMM
"""Any model accepted by :mod:`smc_hmm.hmm.inference` and :mod:`smc_hmm.hmm.training`."""
