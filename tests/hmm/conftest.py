"""Random and hand-made HMMs shared by the tests of smc_hmm.hmm."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from smc_hmm.hmm import DiscreteHMM, GaussianHMM


def _stochastic(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    values = rng.uniform(0.05, 1.0, size=shape)
    return values / values.sum(axis=-1, keepdims=True)


def _spd(rng: np.random.Generator, dim: int) -> np.ndarray:
    factor = rng.normal(size=(dim, dim))
    return factor @ factor.T + 0.5 * np.eye(dim)


@pytest.fixture
def make_discrete() -> Callable[..., DiscreteHMM]:
    """Factory of random discrete HMMs with strictly positive parameters."""

    def make(n_states: int = 3, n_symbols: int = 4, seed: int = 0) -> DiscreteHMM:
        rng = np.random.default_rng(seed)
        return DiscreteHMM(
            _stochastic(rng, (n_states,)),
            _stochastic(rng, (n_states, n_states)),
            _stochastic(rng, (n_states, n_symbols)),
        )

    return make


@pytest.fixture
def make_gaussian() -> Callable[..., GaussianHMM]:
    """Factory of random Gaussian HMMs (diag or full covariances)."""

    def make(
        n_states: int = 3, n_features: int = 2, covariance_type: str = "diag", seed: int = 0
    ) -> GaussianHMM:
        rng = np.random.default_rng(seed)
        means = rng.normal(scale=2.0, size=(n_states, n_features))
        if covariance_type == "diag":
            covars = rng.uniform(0.3, 2.0, size=(n_states, n_features))
        else:
            covars = np.stack([_spd(rng, n_features) for _ in range(n_states)])
        return GaussianHMM(
            _stochastic(rng, (n_states,)),
            _stochastic(rng, (n_states, n_states)),
            means,
            covars,
            covariance_type,
        )

    return make


@pytest.fixture
def left_right() -> DiscreteHMM:
    """Structural zeros: start in state 0, never return to it; state 0 emits {0, 1},
    state 1 emits {2} only, state 2 emits {1, 2}."""
    return DiscreteHMM(
        startprob=[1.0, 0.0, 0.0],
        transmat=[[0.6, 0.4, 0.0], [0.0, 0.7, 0.3], [0.0, 0.0, 1.0]],
        emissionprob=[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.2, 0.8]],
    )
