"""protocols.eigenvector, mode = "thesis": the thesis's 4.1.1 power iteration through Trent.

Small insecure keys (512 bits) and small matrices keep this fast.  Every
result is checked against numpy's principal eigenvector of M^T M; the views
are checked with the transcript harness (frames depend only on public sizes,
decoy and real rounds alike) and by decrypting what each party received.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from eigenvector_support import (
    COSINE,
    configuration,
    cosine,
    launch_eigenvector,
    owners_of,
    run_blocks,
    run_with_a_leaver,
)
from scipy.stats import binomtest
from transcript_harness import assert_same_transcripts

from protocols.eigenvector import ThesisParams
from protocols.eigenvector.thesis import pad
from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.eigen import power_iteration, principal_eigenvector
from smc_hmm.errors import (
    ConfigError,
    ConvergenceError,
    InvalidInputError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.runtime import run_protocol

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")


def setup(blocks, **options):
    # this file tests the thesis's protocol (the private mode has its own)
    return configuration(blocks, **{"mode": "thesis", **options})


def run(keypair, blocks, timeout=20, **options):
    return run_blocks(keypair, blocks, {"mode": "thesis"}, timeout, **options)


def gathered(result, n_owners):
    return np.concatenate([result[o] for o in owners_of(n_owners)])


def random_blocks(seed, k=4, cols=(5, 7, 6)):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (k, n)) for n in cols]


# -- correctness ---------------------------------------------------------------------------


def test_agrees_with_numpy_on_random_data_with_every_hardening(keypair_512):
    blocks = random_blocks(1)
    result = run(keypair_512, blocks, reveal_to_trent=True, decoy_p=0.7)
    x = gathered(result, 3)
    v = principal_eigenvector(np.hstack(blocks))
    assert cosine(x, v) >= COSINE
    assert abs(np.linalg.norm(x) - 1) < 1e-9
    np.testing.assert_allclose(result["trent"]["eigenvector"], x)  # reveal_to_trent
    assert result["trent"]["rounds"] > result["trent"]["decoys"] >= 1
    assert result["authority"] is None


@pytest.mark.parametrize(
    "options",
    [
        {"encrypt": False},
        {"scaling": False},
        {"padding": False},
        {"decoys": False},
        {"decoy_p": 1.0},
        {"scaling": False, "padding": False, "decoys": False},
    ],
    ids=["plain", "no-scaling", "no-padding", "no-decoys", "p=1", "basic"],
)
def test_every_hardening_can_be_switched_off_and_stays_correct(keypair_512, options):
    blocks = random_blocks(2, k=4, cols=(4, 5))
    result = run(keypair_512, blocks, **options)
    v = principal_eigenvector(np.hstack(blocks))
    assert cosine(gathered(result, 2), v) >= COSINE
    if options.get("decoys") is False or options.get("decoy_p") == 1.0:
        assert result["trent"]["decoys"] == 0


@pytest.mark.parametrize(("n_owners", "packed"), [(2, False), (4, False), (4, True)])
def test_agrees_with_numpy_on_the_digits_data(keypair_512, n_owners, packed):
    from sklearn.datasets import load_digits

    m = load_digits().data.T  # k = 64 features (rows) x 1,797 samples (columns)
    blocks = [m[:, s] for s in np.array_split(np.arange(m.shape[1]), n_owners)]
    options = {"max_abs": 16.0, "decoy_p": 0.8, "max_rounds": 60}
    if packed:
        options["slots"] = ThesisParams.from_config(setup(blocks, **options)[0]).max_slots(512)
        assert options["slots"] > 1
    result = run(keypair_512, blocks, **options)
    x = gathered(result, n_owners)
    assert x.shape == (1797,)
    assert cosine(x, principal_eigenvector(m)) >= COSINE
    if packed:  # 64 values in ceil(64 / slots) ciphertexts per vector, plus the norm
        per_round = -(-64 // options["slots"]) + 1
        ops = result.cost.ops("p1")
        assert ops["decrypt"] == ops["encrypt"] == per_round * result["trent"]["rounds"] + 1


def test_packing_agrees_with_numpy_and_refuses_a_key_too_small(keypair_512):
    blocks = random_blocks(17, k=7, cols=(5, 6, 4))
    params = ThesisParams.from_config(setup(blocks)[0])
    slots = params.max_slots(512)
    assert 1 < slots <= 7
    result = run(keypair_512, blocks, slots=slots, decoy_p=0.6)
    assert cosine(gathered(result, 3), principal_eigenvector(np.hstack(blocks))) >= COSINE
    assert result["trent"]["decoys"] >= 1  # decoy noise added slot-wise
    assert params.max_slots(2048) > slots
    with pytest.raises(SmcHmmError, match="bits|plaintext space"):
        run(keypair_512, blocks, slots=slots + 1)


def test_plaintext_power_iteration_matches_numpy():
    blocks = random_blocks(3)
    x, iterations = power_iteration(blocks, tol=1e-10)
    assert iterations > 1
    assert cosine(x, principal_eigenvector(np.hstack(blocks))) >= COSINE


def test_padding_keeps_eigenvectors_and_shifts_eigenvalues():
    """Theorem 4.1.1 (A.1), with P_i = r_i I per owner: MM^T gains (sum r_i^2) I."""
    rng = np.random.default_rng(4)
    for _ in range(5):
        k = int(rng.integers(2, 7))
        blocks = [rng.normal(size=(k, int(rng.integers(1, 9)))) for _ in range(3)]
        r = rng.uniform(0.5, 2.0, size=3)
        m = np.hstack(blocks)
        padded = np.hstack([pad(b, ri) for b, ri in zip(blocks, r)])
        shift = float(np.sum(r**2))
        values, vectors = np.linalg.eigh(m @ m.T)
        pvalues, pvectors = np.linalg.eigh(padded @ padded.T)
        np.testing.assert_allclose(pvalues, values + shift, rtol=1e-10, atol=1e-10)
        # the principal eigenvector of M'^T M' restricted to the data columns is v_1
        x = principal_eigenvector(padded)
        keep = np.concatenate([np.r_[np.ones(b.shape[1]), np.zeros(k)] for b in blocks]).astype(
            bool
        )
        assert cosine(x[keep], principal_eigenvector(m)) >= COSINE
        # and every eigenvector of MM^T is one of M'M'^T (up to sign)
        for j in range(k):
            u = vectors[:, j]
            np.testing.assert_allclose(padded @ (padded.T @ u), (values[j] + shift) * u, atol=1e-9)


# -- views ---------------------------------------------------------------------------------


def _harness_run(keypair, blocks, wrap, outputs=None, **options):
    result = run(keypair, blocks, wrap_transport=wrap, rng=Rng.seeded(7), **options)
    if outputs is not None:
        outputs.append(result["trent"])


def test_transcripts_do_not_depend_on_the_data_with_every_hardening(keypair_512):
    """Rank-1 data of different values (every hardening on, decoys included): the frames
    are identical once ciphertexts and the declared revealed fields are masked."""
    rng = np.random.default_rng(5)

    def rank_one():
        return [
            np.outer(rng.uniform(0.5, 1, 4), rng.uniform(0.5, 1, n)) * rng.choice([-1, 1])
            for n in (3, 5, 4)
        ]

    inputs = [rank_one(), rank_one()]
    options = {"pad_range": [0.001, 0.002], "decoy_p": 0.6, "reveal_to_trent": True}
    params, _ = setup(inputs[0], **options)
    declared = ThesisParams.from_config(params).messages().values()
    outputs = []
    assert_same_transcripts(
        lambda blocks, wrap: _harness_run(keypair_512, blocks, wrap, outputs, **options),
        inputs,
        declared,
        keys=[keypair_512],
    )
    assert outputs[0]["rounds"] >= 4 and outputs[0]["decoys"] >= 1  # decoy rounds included
    assert not np.allclose(outputs[0]["eigenvector"], outputs[1]["eigenvector"])


@pytest.mark.parametrize("slots", [1, 3])
def test_transcripts_do_not_depend_on_general_data(keypair_512, slots):
    blocks = random_blocks(6, k=4, cols=(4, 4))
    other = [-0.5 * b for b in blocks]  # other values, same spectrum shape
    options = {"padding": False, "decoy_p": 0.7, "slots": slots}
    params, _ = setup(blocks, **options)
    outputs = []
    assert_same_transcripts(
        lambda bs, wrap: _harness_run(keypair_512, bs, wrap, outputs, **options),
        [blocks, other],
        ThesisParams.from_config(params).messages().values(),
        keys=[keypair_512],
    )
    assert outputs[0]["rounds"] > 5 and outputs[0]["decoys"] >= 1


@pytest.mark.parametrize("slots", [1, 2])
def test_decoy_and_real_rounds_send_identical_frames(keypair_512, slots):
    """Within one run, every vector Trent sends -- real, replayed or decoy -- has the same
    masked frame and the same length (only the causal depth, public, grows)."""
    import msgpack
    from transcript_harness import masked_frame, recorder

    blocks = random_blocks(16)
    params, _ = setup(blocks, decoy_p=0.5, slots=slots)
    declared = {m.tag: m for m in ThesisParams.from_config(params).messages().values()}
    frames, wrap = recorder()
    result = run(keypair_512, blocks, wrap_transport=wrap, decoy_p=0.5, slots=slots)
    assert 0 < result["trent"]["decoys"] < result["trent"]["rounds"]
    for (receiver, sender), link in frames.items():
        by_tag: dict = {}
        for frame in link:
            masked = masked_frame(frame, declared)
            depth = len(msgpack.packb(masked.pop("d")))  # a public counter of varying width
            by_tag.setdefault(masked["t"], set()).add((repr(masked), len(frame) - depth))
        for tag, variants in by_tag.items():
            if tag != "sk":  # the key message is sent once
                assert len(variants) == 1, (receiver, sender, tag, variants)


def _views(keypair, blocks, **options):
    result = run(keypair, blocks, record_views=True, **options)
    return result, result.views


def test_trent_receives_only_ciphertexts_and_owners_only_what_the_docstring_says(keypair_512):
    blocks = random_blocks(8, k=4, cols=(4, 3, 5))
    result, views = _views(keypair_512, blocks, decoy_p=0.7)
    # Trent: the public key, then ciphertexts only, and the owners' status bits
    tags = {tag for _, tag, _ in views["trent"]}
    assert tags == {"pk", "contribution", "norm_term", "status", "final_term"}
    for peer, tag, payload in views["trent"]:
        if tag in ("contribution", "norm_term", "final_term"):
            assert isinstance(payload, CipherArray), (peer, tag)
        elif tag == "status":
            assert isinstance(payload, bool)
        else:
            assert peer == "authority"
    # owners: the key pair from the authority; from Trent ciphertexts only
    for o in owners_of(3):
        from_trent = [(tag, p) for peer, tag, p in views[o] if peer == "trent"]
        assert {tag for tag, _ in from_trent} == {"vector", "norm", "final_norm"}
        assert all(isinstance(p, CipherArray) for _, p in from_trent)
        assert {tag for peer, tag, _ in views[o] if peer != "trent"} == {"pk", "sk"}
    assert views["authority"] == []  # the authority receives nothing and leaves
    assert result["trent"]["eigenvector"] is None  # not configured: Trent gets no vector


def _rounds(views, sk, n_owners):
    """Per round: the decrypted u candidate (sum of contributions) and the vector sent."""
    contribs = [p for _, tag, p in views["trent"] if tag == "contribution"]
    sums = [
        sum(c.decrypt(sk) for c in contribs[i : i + n_owners])
        for i in range(0, len(contribs), n_owners)
    ]
    sent = [p.decrypt(sk) for _, tag, p in views["p1"] if tag == "vector"]
    assert len(sums) == len(sent)
    return sums, sent


def _classify(sums, sent, scale_range):
    """Real if w_t = r u_s for an earlier or current u_s with an integer r in range."""
    kinds, ratios = [], []
    for t, w in enumerate(sent):
        found = None
        for u in sums[: t + 1]:
            r = float(w @ u / (u @ u))
            if np.allclose(w, round(r) * u, rtol=1e-9, atol=1e-6 * abs(r)):
                found = round(r)
                break
        kinds.append(found is not None)
        ratios.append(found)
    return kinds, ratios


def test_with_scaling_no_owner_receives_u_and_decoys_come_at_rate_1_minus_p(keypair_512):
    p = 0.6
    blocks = random_blocks(9, k=4, cols=(5, 5, 5))
    # slow convergence on purpose (>= 50 rounds for the binomial test): a seeded run with
    # room to converge, so the test does not depend on the decoys' luck
    result, views = _views(keypair_512, blocks, decoy_p=p, max_rounds=1000, rng=Rng.seeded(9))
    sums, sent = _rounds(views, keypair_512[1], 3)
    for w in sent:  # never u itself (nor a small multiple of one)
        for u in sums:
            assert not np.allclose(w, u, rtol=1e-6)
    real, ratios = _classify(sums, sent, ThesisParams().scale_range)
    lo, hi = ThesisParams().scale_range
    assert all(lo <= r <= hi for r in ratios if r is not None)
    decoys = real.count(False)
    assert decoys == result["trent"]["decoys"]  # the decrypted views agree with Trent
    rounds = len(sent)
    assert rounds >= 50
    assert binomtest(decoys, rounds, 1 - p).pvalue > 1e-3
    assert len(set(ratios) - {None}) == real.count(True)  # a fresh r_t every real round


def test_without_scaling_owners_do_receive_u(keypair_512):
    """The contrast: the check above would see u if Trent did not scale."""
    blocks = random_blocks(10, k=4, cols=(4, 4))
    _, views = _views(keypair_512, blocks, scaling=False, decoys=False)
    sums, sent = _rounds(views, keypair_512[1], 2)
    assert all(np.allclose(w, u, rtol=1e-9, atol=1e-9) for w, u in zip(sent, sums))


def test_decoy_rate_over_several_runs(keypair_512):
    p = 0.8
    decoys = rounds = 0
    for seed in range(3):
        result = run(keypair_512, random_blocks(20 + seed), decoy_p=p, rng=Rng.seeded(seed))
        decoys += result["trent"]["decoys"]
        rounds += result["trent"]["rounds"]
    assert binomtest(decoys, rounds, 1 - p).pvalue > 1e-3


# -- bad inputs and failures --------------------------------------------------------------


def test_owners_with_different_row_counts_are_refused(keypair_512):
    blocks = random_blocks(11, k=4, cols=(4, 4))
    blocks[1] = np.vstack([blocks[1], np.zeros((1, 4))])
    params, parties = setup(blocks)
    params["rows"] = 4
    with pytest.raises(InvalidInputError, match="rows"):
        run_protocol(
            "eigenvector",
            params,
            parties,
            keys={"authority": keypair_512},
            min_key_bits=512,
            timeout=5,
        )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_are_refused(keypair_512, bad):
    blocks = random_blocks(12, k=4, cols=(4, 4))
    blocks[0][1, 2] = bad
    params, parties = setup([np.nan_to_num(b, posinf=1, neginf=-1) for b in blocks])
    parties["p1"] = ("owner", blocks[0])
    with pytest.raises(InvalidInputError, match="NaN or infinity"):
        run_protocol(
            "eigenvector", params, parties, keys={"authority": keypair_512}, min_key_bits=512
        )


def test_empty_shares_are_refused(keypair_512):
    with pytest.raises(InvalidInputError):
        ThesisParams(cols=(3, 0))
    blocks = random_blocks(13, k=4, cols=(4, 4))
    params, parties = setup(blocks)
    parties["p2"] = ("owner", np.zeros((4, 0)))
    with pytest.raises(InvalidInputError, match="non-empty"):
        run_protocol(
            "eigenvector", params, parties, keys={"authority": keypair_512}, min_key_bits=512
        )


@pytest.mark.parametrize("p", [0, -0.1, 1.0000001, 2, math.nan, math.inf, True, "0.5"])
def test_decoy_p_outside_0_1_is_refused(p):
    with pytest.raises(InvalidInputError, match="decoy_p"):
        ThesisParams(decoy_p=p)
    with pytest.raises(ConfigError, match="decoy_p"):
        ThesisParams.from_config({"decoy_p": p})


def test_parameters_are_validated():
    assert ThesisParams.from_config({"owners": ["a", "b"], "cols": [2, 3], "rows": 5}).cols == (
        2,
        3,
    )
    with pytest.raises(ConfigError, match="unknown"):
        ThesisParams.from_config({"bogus": 1})
    with pytest.raises(InvalidInputError, match="two owners"):
        ThesisParams(owners=("a",), cols=(1,))
    with pytest.raises(InvalidInputError, match="too small"):  # decoys could pass the test
        ThesisParams(decoy_noise=1e-12)
    with pytest.raises(InvalidInputError, match="scale_range"):
        ThesisParams(scale_range=(10, 2))
    with pytest.raises(InvalidInputError, match="distinct"):
        ThesisParams(owners=("trent", "p2"))


def test_no_convergence_within_the_cap_is_a_typed_error(keypair_512):
    blocks = random_blocks(14)
    with pytest.raises(ConvergenceError, match="max_rounds"):
        run(keypair_512, blocks, max_rounds=3)


@pytest.mark.parametrize(
    ("party", "send"),
    [("p2", 4), ("trent", 6), ("p1", 1), ("authority", 2)],
    ids=["owner-mid-round", "trent-mid-round", "owner-first-message", "authority-key"],
)
@pytest.mark.parametrize("mode", ["disconnect", "drop"])
def test_a_party_that_leaves_ends_every_other_party_with_a_typed_error(
    keypair_512, party, send, mode
):
    params, parties = setup(random_blocks(15))
    timeout = 1.0
    t0 = time.monotonic()
    errors = run_with_a_leaver(keypair_512, params, parties, party, send, mode, timeout)
    assert time.monotonic() - t0 < timeout + 5
    others = set(parties) - {party}
    if party == "authority" and mode == "disconnect":
        others -= {"authority"}
    # every other party still running ended with a typed error (the authority may have
    # finished its two steps before the failure)
    still = others - ({"authority"} if "authority" not in errors else set())
    assert still <= set(errors), (still, errors)
    for name in still:
        assert isinstance(errors[name], SmcHmmError), (name, errors[name])
    assert any(isinstance(errors[n], TransportError) for n in still)


# -- the benchmark (smc-hmm bench eigenvector), tiny and insecure ---------------------------


def test_benchmark_runs_both_modes_side_by_side_on_raw_and_centred_data(tmp_path):
    from bench_support import run_bench

    from smc_hmm.bench import eigenvector as bench

    code, data = run_bench(
        bench,
        ["--key-bits", "512", "--insecure", "--owners", "2", "--rows", "6", "--cols", "20",
         "--data", "digits", "--repeats", "1", "--check-every", "2", "--precision", "48",
         "--gram-bits", "32", "--tol", "1e-6"],
        tmp_path / "eig.json",
    )  # fmt: skip
    assert code == 0
    runs = {(r["data"], r["mode"]): r for r in data["runs"]}
    assert set(runs) == {(d, m) for d in ("uncentred", "centred") for m in ("private", "thesis")}
    for run in runs.values():
        assert run["one_minus_cosine"] <= 1e-9
        assert run["overhead_ratio"] > 1 and run["rounds"] >= 1
        assert run["per_party"]["trent"]["bytes_sent"] > 0
    for data_kind in ("uncentred", "centred"):
        private, thesis = runs[(data_kind, "private")], runs[(data_kind, "thesis")]
        assert private["rounds"] % 2 == 0  # tested every 2 rounds
        assert private["partial_decryptions"]["trent"] > 0  # nobody decrypts alone ...
        assert thesis["partial_decryptions"]["trent"] == 0  # ... unlike the thesis's owners
        # an owner of the thesis mode sends 3 messages a round and one at the end
        assert 3 * thesis["rounds"] + 1 == thesis["per_party"]["p1"]["messages_sent"]
    assert data["load_average"]["before"] and data["cpus"]


@pytest.mark.slow
def test_owners_trent_and_key_authority_as_processes_over_mutual_tls(tmp_path):
    blocks = random_blocks(30, k=4, cols=(5, 6))
    params, _ = setup(blocks, reveal_to_trent=True)
    result = launch_eigenvector(tmp_path, params, blocks, key_bits=512)
    x = np.concatenate([np.asarray(result[o]) for o in params["owners"]])
    assert cosine(x, principal_eigenvector(np.hstack(blocks))) >= COSINE
    np.testing.assert_allclose(result["trent"]["eigenvector"], x)
    assert result["authority"] is None
