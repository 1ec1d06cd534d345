"""Attacks on the eigenvector protocol by a data owner: they break the thesis's mode and
do no better than a guess against the private mode.

Owner p1 runs each attack on its own view only (what it decrypts in the thesis's mode,
where it holds the key; what it opens in the private mode, where it holds a key share).
Ground truth comes from the whole key, which only the test has.

* gcd reconstruction: the entries of a received integer vector share the factor the
  vector was scaled by, so their gcd exposes it (thesis: w_t = r_t u_t gives u_t
  exactly).
* Krylov reconstruction: consecutive iterates satisfy u_(t+1) ~ G u_t, so about k
  rounds of them determine G, and subtracting its own Gram matrix gives the other
  owner's (thesis: every entry off the padded diagonal, to float precision).

Zero-mean data with a spread spectrum (k = 8, two owners): tens of rounds before
convergence, and a Gram matrix whose off-diagonal entries no data-independent guess
predicts (a guess's cosine to them is about +-0.2, 28 entries).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from eigenvector_support import (
    configuration,
    opened_batches,
    run_eigenvector,
    thesis_sums,
    thesis_vectors,
    true_masks,
)
from scipy.stats import kstest

from protocols.eigenvector import ThesisParams, params_from_config, private
from smc_hmm.crypto import Rng

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")

K = 8
#: tol = 1e-3: the attacks need the early rounds only (the late ones are nearly parallel)
SMALL = {"precision": 48, "gram_bits": 32, "data_bits": 24, "tol": 1e-3, "check_every": 8}


def krylov_data(seed: int) -> list[np.ndarray]:
    """Zero-mean data of two owners (60 samples each) whose Gram matrix has eigenvalues
    spread over [0.18, 1] (relative): tens of rounds, and k + 2 early iterates that still
    carry every eigendirection (their Krylov matrix has condition about 1e6)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((K, K)))
    spectrum = np.diag(0.9 ** np.arange(K))
    return [np.clip(0.3 * basis @ spectrum @ rng.standard_normal((K, n)), -1, 1) for n in (60, 60)]


def run(keypair, blocks, **options):
    params, parties = configuration(blocks, max_rounds=400, **options)
    result = run_eigenvector(
        keypair, params, parties, timeout=60, record_views=True, rng=Rng.seeded(3)
    )
    return result, params_from_config(params)


def gcd_direction(v) -> np.ndarray:
    """The attack: divide an integer vector by the gcd of its entries."""
    g = math.gcd(*[int(x) for x in v])
    return np.array([int(x) // g for x in v], dtype=object)


def proportional(a, b) -> bool:
    """Exact proportionality of two integer vectors."""
    j = next(i for i, x in enumerate(b) if x != 0)
    return all(int(x) * int(b[j]) == int(y) * int(a[j]) for x, y in zip(a, b))


def cos(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return abs(float(a @ b)) / (np.linalg.norm(a) * np.linalg.norm(b))


def offdiagonal(m) -> np.ndarray:
    return np.asarray(m, dtype=float)[~np.eye(K, dtype=bool)]


def krylov_fit(inputs, outputs) -> np.ndarray:
    """The attack: the k x k matrix G with G inputs_t ~ outputs_t (least squares)."""
    x = np.array(inputs, dtype=float)
    y = np.array(outputs, dtype=float)
    g, *_ = np.linalg.lstsq(x, y, rcond=None)
    return g.T


@pytest.fixture(scope="module")
def data():
    return krylov_data(0)


@pytest.fixture(scope="module")
def thesis(keypair_512, data):
    # decoys off: every round real (decoys are spotted anyway, see docs/eigenvector.md)
    return run(keypair_512, data, mode="thesis", decoys=False, tol=1e-3)


@pytest.fixture(scope="module")
def private_run(keypair_512, data):
    return run(keypair_512, data, **SMALL)


def test_the_gcd_attack_recovers_every_iterate_in_the_thesis_mode(keypair_512, thesis):
    (result, _), sk = thesis, keypair_512[1]
    vectors, _ = thesis_vectors(result.views, "p1", sk)
    truth = thesis_sums(result.views, sk, 2)
    assert len(vectors) == len(truth) >= K + 3
    lo, hi = ThesisParams().scale_range
    exact = scale_found = 0
    for w, u in zip(vectors, truth):
        guess = gcd_direction(w)
        exact += proportional(guess, u)
        j = next(i for i, x in enumerate(u) if x != 0)
        scale_found += int(w[j]) // int(u[j]) == math.gcd(*[int(x) for x in w]) and (
            lo <= int(w[j]) // int(u[j]) <= hi
        )
    assert exact == len(vectors)  # u_t's direction, exactly, every round
    assert scale_found >= 0.8 * len(vectors)  # r_t itself whenever gcd(u_t) = 1


def test_the_gcd_attack_does_no_better_than_a_guess_in_the_private_mode(keypair_512, private_run):
    (result, params), (pk, sk) = private_run, keypair_512
    plan = private.Plan(params, pk.bits)
    seen = opened_batches(result.views, "p1", pk, plan)
    truth = [
        [x - r for x, r in zip(xs, rho)] for (xs, _), rho in zip(seen, true_masks(result.views, sk))
    ]
    assert len(seen) >= K + 3
    centre = (1 << plan.product_bits) + (
        1 << (plan.product_bits + plan.sigma - 1)
    )  # the masks' public mean
    rng = np.random.default_rng(0)
    ranks = []
    for (x, _), w in zip(seen, truth):
        d = gcd_direction(x)
        assert not proportional(d, w)  # never the iterate
        score = cos([int(v) - centre // math.gcd(*x) for v in d], w)
        # guesses that ignore the view: zero-mean uniform vectors
        guesses = [cos(rng.uniform(-1, 1, K), w) for _ in range(200)]
        ranks.append(np.mean(np.array(guesses) < score))
    # the attack's score ranks among the guesses' like one more guess: uniformly
    assert kstest(ranks, "uniform").pvalue > 1e-3
    assert np.mean(ranks) < 0.7  # against 1.0 (better than every guess) in the thesis mode


def test_the_krylov_attack_recovers_the_other_owners_gram_matrix_in_the_thesis_mode(
    keypair_512, thesis, data
):
    (result, _), sk = thesis, keypair_512[1]
    scale = 2.0 ** ThesisParams().scale
    vectors, norms = thesis_vectors(result.views, "p1", sk)
    inputs, outputs = [], []
    for t in range(K + 2):  # the first rounds: every eigendirection still well present
        w, w_next = vectors[t], vectors[t + 1]
        u_next = gcd_direction(w_next)  # u_(t+1) up to an integer factor: fix it with r
        ratio = int(w_next[0]) // int(u_next[0])
        u_next = u_next * (math.gcd(*[int(x) for x in w_next]) // ratio)
        inputs.append(np.array(w, dtype=float) / scale)
        # u_(t+1) = G' w_t / sqrt(norm_t): the padded Gram matrix of both owners
        outputs.append(np.array(u_next, dtype=float) / scale * math.sqrt(norms[t] / scale))
    recovered = krylov_fit(inputs, outputs) - data[0] @ data[0].T  # minus its own
    other = data[1] @ data[1].T
    error = np.linalg.norm(offdiagonal(recovered) - offdiagonal(other))
    assert error / np.linalg.norm(offdiagonal(other)) < 1e-4
    assert cos(offdiagonal(recovered), offdiagonal(other)) > 1 - 1e-8


def test_the_krylov_attack_does_no_better_than_a_guess_in_the_private_mode(
    keypair_512, private_run, data
):
    (result, params), pk = private_run, keypair_512[0]
    plan = private.Plan(params, pk.bits)
    seen = opened_batches(result.views, "p1", pk, plan)
    shifts = result["trent"]["shifts"]
    # the owner's only vectors: X'_t (X'_0 = 0) and X_t; X'_(t+1) = floor(X_t / 2^s_t)
    x_prime = [[0] * K] + [[v >> s for v in x] for (x, _), s in zip(seen, shifts)]
    inputs = [x_prime[t] for t in range(1, K + 3)]
    outputs = [seen[t][0] for t in range(1, K + 3)]  # "G X'_t", as if unmasked
    fitted = krylov_fit(inputs, outputs) * 2.0 ** (plan.eigenvalue_bits - plan.gram_bits)
    recovered = offdiagonal(fitted - data[0] @ data[0].T)  # minus its own, as in the thesis
    other = offdiagonal(data[1] @ data[1].T)
    # guesses: the other owner's Gram matrix for unrelated data of the same public kind
    guesses = [offdiagonal(b @ b.T) for b in (krylov_data(seed)[1] for seed in range(1, 201))]
    score = cos(recovered, other)
    rank = np.mean([cos(recovered, g) < score for g in guesses])
    assert rank < 0.99  # the truth scores like one more unrelated guess ...
    assert score < 0.6  # ... (about 0.2); the thesis's mode: 1 - 1e-9


def _eigenvalue_intervals(seen, shifts, plan, first: int):
    """An owner's bounds on lambda_1 of the scaled Gram matrix, from its own view: round
    t's blurred magnitude bounds ||u_t|| (L_t <= ||u_t|| <= U_t, the protocol's own rule,
    with the declared shift s_(t-1)); after convergence ||u_t'|| ~ lambda^(t'-t) ||u_t||
    / 2^(s_t + ... + s_(t'-1)), so every pair of converged rounds t < t' bounds lambda
    within a factor of (U/L)^(2/(t'-t)).  Returns every pair's interval from ``first`` on."""
    bounds = [
        private.magnitude_bounds(plan, y, shifts[t - 1] if t else plan.s_min)
        for t, (_, y) in enumerate(seen)
    ]
    out = []
    for t in range(first, len(bounds)):
        for t2 in range(t + 1, len(bounds)):
            (u0, l0), (u1, l1) = bounds[t], bounds[t2]
            if l0 > 0 and l1 > 0:
                span, scale = t2 - t, 2 ** sum(shifts[t:t2])
                out.append(((l1 * scale / u0) ** (1 / span), (u1 * scale / l0) ** (1 / span)))
    return out


def test_intersecting_the_rounds_magnitudes_sharpens_the_eigenvalue(keypair_512, private_run):
    """What an owner learns about lambda_1 from every round's blurred magnitude together
    (docs/eigenvector.md states the measured sharpness): one pair of consecutive rounds
    bounds it within a factor of 2, the intersection over every pair of converged rounds
    to about 1% here (T = 33), well inside the factor 3^(2/T) once documented -- a
    statistical leak, stated with its measured size, that never pins lambda_1."""
    (result, params), (pk, sk) = private_run, keypair_512
    plan = private.Plan(params, pk.bits)
    seen = opened_batches(result.views, "p1", pk, plan)
    truth = [
        [x - r for x, r in zip(xs, rho)] for (xs, _), rho in zip(seen, true_masks(result.views, sk))
    ]
    # lambda_1 of the scaled Gram matrix, from the true iterates (the whole key)
    norms = [math.sqrt(sum(float(v) ** 2 for v in w)) for w in truth]
    shifts = result.outputs["trent"]["shifts"]  # declared to every owner each round
    first = len(seen) // 3  # converged by then (tol = 1e-3)
    intervals = _eigenvalue_intervals(seen, shifts, plan, first)
    lo, hi = max(a for a, _ in intervals), min(b for _, b in intervals)
    true = [norms[t + 1] * 2 ** shifts[t] / norms[t] for t in range(first, len(norms) - 1)]
    truth_lambda = float(np.median(true))
    assert lo <= truth_lambda <= hi  # the owner's bounds hold
    one_round = 2.0  # one pair of consecutive rounds: the blur's octave
    documented = 3 ** (2 / len(seen))  # the statement this measurement corrects
    sharpness = hi / lo - 1
    print(f"T = {len(seen)}: intersection {sharpness:.2e} relative, documented x{documented:.3f}")
    assert sharpness < one_round - 1  # intersecting the rounds sharpens lambda_1 ...
    assert sharpness > 1e-5  # ... but never pins it: the blur stays
    assert norms  # the true iterates exist (the whole key); the estimate never names them
