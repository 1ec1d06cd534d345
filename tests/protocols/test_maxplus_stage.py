"""The max-plus chain (Viterbi in garbled circuits) equals plaintext Viterbi on integer
log-values, ties and impossible states included, for every output rule; its messages
follow from the public layout alone."""

from __future__ import annotations

import numpy as np
import pytest
from transcript_harness import assert_same_transcripts

from protocols.stages import garbled, maxplus
from smc_hmm.crypto.rng import Rng
from smc_hmm.hmm.inference import viterbi_from_logs
from smc_hmm.runtime import simulate

BITS = 20
NEG = -(1 << 14)  # a log 0 sentinel, far below any path


def _layout(preds, row_of, models, segments, length, output, reveal=True, holder="garbler"):
    return maxplus.MaxPlusLayout(
        tuple(tuple(p) for p in preds),
        tuple(row_of),
        tuple(models),
        tuple(segments),
        length,
        BITS,
        output,
        reveal,
        holder,
        emissions=maxplus.Emissions(share_bits=BITS),
    )


def _run(lay, emissions, starts, trans, seed=3, wrap=None):
    mod = 1 << BITS
    rng = np.random.default_rng(seed)
    bob_share = rng.integers(0, mod, emissions.shape)
    alice_share = (emissions - bob_share) % mod

    bobs = (starts, trans) if lay.edge_holder == "garbler" else (None, None)
    alices = (starts, trans) if lay.edge_holder == "evaluator" else (None, None)

    def bob(ctx):
        g = garbled.bob_setup(ctx, 0, refill=256)
        maxplus.bob_maxplus(ctx, g, lay, bob_share.astype(object), *bobs)

    def alice(ctx):
        e = garbled.alice_setup(ctx, 0, refill=256)
        return maxplus.alice_maxplus(ctx, e, lay, alice_share.astype(object), *alices)

    result = simulate(
        {"alice": alice, "bob": bob}, rng=Rng.seeded(seed), wrap_transport=wrap, timeout=60
    )
    return result


def _model(rng, n):
    """Start log-values (some log 0) and random in-edges (every state reachable)."""
    start = rng.integers(-40, 0, n)
    start[rng.random(n) < 0.3] = NEG
    preds = [
        sorted(rng.choice(n, size=rng.integers(1, n + 1), replace=False).tolist()) for _ in range(n)
    ]
    return start, preds


@pytest.mark.parametrize("output,holder", [("path", "garbler"), ("segment", "garbler"),
                                           ("path", "evaluator")])  # fmt: skip
def test_the_chain_equals_plaintext_viterbi_with_ties(output, holder):
    rng = np.random.default_rng(1)
    sizes = [4, 3]
    preds, row_of, models, segments, starts = [], [], [], [], []
    base, row_base = 0, 0
    logs = []
    for n in sizes:
        start, local = _model(rng, n)
        a = np.full((n, n), None, dtype=object)
        for j, p in enumerate(local):
            for i in p:
                a[i, j] = int(rng.integers(-6, 0))  # small values: ties happen
        rows = [0, 1] + list(range(n - 2)) if n > 3 else list(range(n))
        preds += [[base + i for i in p] for p in local]
        row_of += [row_base + r for r in rows]
        models.append((base, n))
        segments.append((1, n - 1))
        starts += [int(v) for v in start]
        logs.append((start, a, rows, row_base))
        base += n
        row_base += max(rows) + 1
    length = 9
    emissions = rng.integers(-8, 0, (length, row_base))
    edges = [(i, j) for j, p in enumerate(preds) for i in p]
    offsets = [m[0] for m in models]
    trans = []
    for i, j in edges:
        k = max(k for k, o in enumerate(offsets) if o <= j)
        trans.append(int(logs[k][1][i - offsets[k], j - offsets[k]]))
    lay = _layout(preds, row_of, models, segments, length, output, holder=holder)
    out, scores = _run(lay, emissions, starts, trans).outputs["alice"]
    for k, (start, a, rows, rb) in enumerate(logs):
        n = len(start)
        log_a = np.array([[-np.inf if v is None else float(v) for v in r] for r in a])
        log_pi = np.where(start == NEG, -np.inf, start.astype(float))
        log_b = emissions[:, [rb + r for r in rows]].astype(float)
        path, score = viterbi_from_logs(log_pi, log_a, log_b)
        if np.isfinite(score):
            assert scores[k] == score
            if output == "path":
                assert out[k] == list(path)
            else:
                lo, hi = segments[k]
                assert out[k] == [int(lo <= s < hi) for s in path]
        else:
            assert scores[k] < NEG // 2


def test_messages_follow_from_the_layout_only():
    lay = _layout([[0, 1], [0], [1, 2]], [0, 1, 0], [(0, 3)], [(1, 2)], 5, "segment", False)
    rng = np.random.default_rng(2)
    inputs = [
        (
            rng.integers(-100, 0, (5, 2)),
            rng.integers(-50, 0, 3).tolist(),
            rng.integers(-50, 0, 5).tolist(),
        )
        for _ in range(2)
    ]
    decl = list(garbled.setup_messages(256).values()) + maxplus.messages(lay)
    assert_same_transcripts(lambda x, wrap: _run(lay, *x, wrap=wrap), inputs, decl)


def test_the_model_output_names_the_best_model_with_its_offset():
    """Keyword recognition by Viterbi scores: per model its best path's score plus a public
    offset (a garbage model's margin), and Alice learns only the index of the best (ties:
    the lowest), with no pointer kept and no traceback circuit."""
    rng = np.random.default_rng(7)
    n, models, length = 3, 3, 6
    preds = [[base + i for i in (0, 1, 2)] for base in range(0, n * models, n) for _ in range(n)]
    row_of = list(range(n * models))
    emissions = rng.integers(-6, 0, (length, n * models))
    starts = [0, NEG, NEG] * models
    trans = rng.integers(-3, 0, len(preds) * n).tolist()
    edges = [(i, j) for j, p in enumerate(preds) for i in p]
    for offsets in ((0, 0, 0), (0, 0, 40), (-40, 0, 0)):
        lay = maxplus.MaxPlusLayout(
            tuple(tuple(p) for p in preds), tuple(row_of),
            tuple((k * n, n) for k in range(models)), (None,) * models, length, BITS,
            "model", True, "garbler", offsets, maxplus.Emissions(share_bits=BITS),
        )  # fmt: skip
        index, scores = _run(lay, emissions, starts, trans).outputs["alice"]
        plain = []
        for k in range(models):
            a = np.full((n, n), -np.inf)
            for (i, j), v in zip(edges, trans):
                if i // n == k:
                    a[i - k * n, j - k * n] = v
            pi = np.array([0.0, -np.inf, -np.inf])
            plain.append(viterbi_from_logs(pi, a, emissions[:, k * n : (k + 1) * n])[1])
        assert scores == plain
        assert index == int(np.argmax(np.array(plain) + np.array(offsets)))
