"""Plaintext principal eigenvectors: the references of the eigenvector protocol.

:func:`principal_eigenvector` is numpy's answer; :func:`power_iteration` runs thesis 003's
equations 4.1-4.5 over horizontally split blocks A_i (k x n_i) in the clear, with the
owners' stopping test of :mod:`protocols.eigenvector` and no hardening.  The protocol's
tests and ``smc-hmm bench eigenvector`` (its plaintext baseline) both use them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from smc_hmm.errors import ConvergenceError


def principal_eigenvector(m: np.ndarray) -> np.ndarray:
    """numpy's principal eigenvector of M^T M (unit norm, sign arbitrary)."""
    m = np.asarray(m, dtype=np.float64)
    if m.shape[1] <= 512:
        values, vectors = np.linalg.eigh(m.T @ m)
        return vectors[:, np.argmax(values)]
    _, _, vt = np.linalg.svd(m, full_matrices=False)  # same vector, without the n x n matrix
    return vt[0]


def power_iteration(
    blocks: Sequence[np.ndarray], tol: float = 1e-7, max_rounds: int = 10_000, seed: int = 0
) -> tuple[np.ndarray, int]:
    """Plaintext power iteration of eqs. 4.1-4.5 with the same stopping test (no hardening):
    (eigenvector of M^T M, iterations)."""
    rng = np.random.default_rng(seed)
    alphas = [rng.standard_normal(b.shape[1]) for b in blocks]
    scale = math.sqrt(sum(x @ x for x in alphas))
    alphas = [x / scale for x in alphas]
    previous = None
    for t in range(1, max_rounds + 1):
        u = sum(b @ x for b, x in zip(blocks, alphas))
        ys = [b.T @ u for b in blocks]
        norm = math.sqrt(sum(y @ y for y in ys))
        alphas = [y / norm for y in ys]
        direction = u / np.linalg.norm(u)
        if previous is not None and np.linalg.norm(direction - previous) <= tol:
            return np.concatenate(alphas), t
        previous = direction
    raise ConvergenceError(f"plaintext power iteration did not converge in {max_rounds}")
