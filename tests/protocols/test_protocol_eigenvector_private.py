"""protocols.eigenvector, mode = "private" (the default): nobody sees an iterate.

Small insecure keys (512 bits, with a precision plan that fits them) and small matrices
keep this fast.  Every result is compared with numpy's principal eigenvector of M^T M;
the views are checked with the transcript harness for every role, by type (ciphertexts,
partial decryptions and the declared revealed values only) and by opening what the
owners can open (statistically masked values); the key sharing and the operation counts
are checked from the cost ledger.  The gcd and Krylov attacks run in
``test_eigenvector_attacks.py``.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from eigenvector_support import (
    COSINE,
    configuration,
    cosine,
    launch_eigenvector,
    opened_batches,
    owners_of,
    run_blocks,
    run_with_a_leaver,
    true_masks,
)

from protocols.eigenvector import PrivateParams, params_from_config, private
from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.eigen import principal_eigenvector
from smc_hmm.errors import (
    ConfigError,
    ConvergenceError,
    InvalidInputError,
    PrecisionError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.runtime import run_protocol

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")
#: a plan that fits 512-bit test keys (the defaults are planned for 2048 bits)
SMALL = {"precision": 48, "gram_bits": 32, "data_bits": 24, "tol": 1e-6, "check_every": 4}


def setup(blocks, **options):
    return configuration(blocks, **{**SMALL, **options})


def run(keypair, blocks, timeout=30, **options):
    return run_blocks(keypair, blocks, SMALL, timeout, **options)


def gathered(result, n_owners):
    return np.concatenate([result[o] for o in owners_of(n_owners)])


def spiked_blocks(seed, k=4, cols=(5, 7, 6), gap=3.0):
    """Random data with a dominant direction (a clear eigengap: few rounds)."""
    rng = np.random.default_rng(seed)
    direction = rng.uniform(0.5, 1.0, k) * rng.choice([-1, 1], k)
    return [
        np.clip(
            np.outer(direction, rng.uniform(-1, 1, n)) * gap / 3 + rng.uniform(-0.3, 0.3, (k, n)),
            -1,
            1,
        )
        for n in cols
    ]


# -- correctness ---------------------------------------------------------------------------


def test_private_is_the_default_mode():
    assert params_from_config({}).mode == PrivateParams.mode == "private"
    assert params_from_config({"mode": "thesis"}).mode == "thesis"


def test_agrees_with_numpy_on_random_data(keypair_512):
    blocks = spiked_blocks(1)
    result = run(keypair_512, blocks, reveal_to_trent=True)
    x = gathered(result, 3)
    assert cosine(x, principal_eigenvector(np.hstack(blocks))) >= COSINE
    assert abs(np.linalg.norm(x) - 1) < 1e-9
    trent = result["trent"]
    np.testing.assert_allclose(trent["eigenvector"], x)
    assert trent["mode"] == "private" and trent["rounds"] % 4 == 0
    assert len(trent["shifts"]) == trent["rounds"]
    assert result["authority"] is None


def test_agrees_with_numpy_with_a_slow_spectrum_and_many_rounds(keypair_512):
    """Uniform data (eigengap ratio about 0.6): tens of rounds, each rescaled by its
    power-of-two shift, the test every 4 rounds."""
    rng = np.random.default_rng(2)
    blocks = [rng.uniform(-1, 1, (4, n)) for n in (5, 7, 6)]
    result = run(keypair_512, blocks)
    assert result["trent"]["rounds"] >= 12
    assert cosine(gathered(result, 3), principal_eigenvector(np.hstack(blocks))) >= COSINE


@pytest.mark.parametrize("n_owners", [2, 4])
def test_agrees_with_numpy_for_two_and_four_owners(keypair_512, n_owners):
    blocks = spiked_blocks(3 + n_owners, k=5, cols=(4, 6, 3, 5)[:n_owners])
    result = run(keypair_512, blocks)
    assert cosine(gathered(result, n_owners), principal_eigenvector(np.hstack(blocks))) >= (COSINE)


@pytest.mark.slow
def test_agrees_with_numpy_on_the_digits_data_with_default_precision(keypair_1024):
    """scikit-learn's digits, 64 features over 4 owners, the default plan (64-bit
    iterates, 40-bit Gram matrix, a test every 8 rounds) on a 1024-bit key."""
    from sklearn.datasets import load_digits

    m = load_digits().data[:400].T  # the first 400 samples keep the owners' uploads small
    blocks = [m[:, s] for s in np.array_split(np.arange(m.shape[1]), 4)]
    defaults = {k: getattr(PrivateParams(), k) for k in SMALL}
    result = run(keypair_1024, blocks, timeout=120, max_abs=16.0, **defaults)
    x = gathered(result, 4)
    assert x.shape == (400,)
    assert cosine(x, principal_eigenvector(m)) >= COSINE
    assert result["trent"]["rounds"] == 8  # the mean dominates: one test, at round 8


def test_nothing_is_decrypted_but_masked_values_and_outputs_per_round(keypair_512):
    """Operation counts: Trent and the leader each decrypt their share of the masked
    vector and magnitude (one ciphertext per packed group plus one) every round, the other
    owners decrypt nothing jointly but combine; each owner decrypts its own output part
    with its own key."""
    blocks = spiked_blocks(4, k=4)
    result = run(keypair_512, blocks)
    rounds = result["trent"]["rounds"]
    plan = private.Plan(PrivateParams.from_config(setup(blocks)[0]), 512)
    per_round = plan.vector_cts + 1
    checks = rounds // 4
    ops = result.cost.ops
    # per round: the batch; per test: 3 joint decryptions; at the end: N
    expected = per_round * (rounds + 1) + 3 * checks + 1
    assert ops("trent")["partial_decrypt"] == ops("p1")["partial_decrypt"] == expected
    for o in ("p2", "p3"):
        assert ops(o).get("partial_decrypt", 0) == 0
        assert ops(o)["decrypt_combine"] == per_round * (rounds + 1) + checks + 1
        assert ops(o)["decrypt"] == len(plan.output_groups)  # E_i[Q_i R'_T], its own key
    assert ops("trent")["decrypt"] == 0


# -- views -----------------------------------------------------------------------------------


def _views(keypair, blocks, **options):
    result = run(keypair, blocks, record_views=True, **options)
    return result, result.views


def test_every_party_receives_only_ciphertexts_partials_and_declared_values(keypair_512):
    blocks = spiked_blocks(8, k=4, cols=(4, 3, 5))
    result, views = _views(keypair_512, blocks)
    assert views["authority"] == []  # the authority deals the keys and receives nothing
    plain_tags = {"key_share", "round_open", "check_scale", "dgk"}

    def kinds(view):
        out = {}
        for _peer, tag, payload in view:
            items = payload if isinstance(payload, list) and tag not in plain_tags else [payload]
            if tag == "round_open":
                items = payload[1:]
                assert isinstance(payload[0], int)  # the declared shift
            for item in items:
                out.setdefault(tag, set()).add(type(item).__name__)
        return out

    trent = kinds(views["trent"])
    assert trent["contribution"] == trent["gram"] == trent["own_gram"] == {"CipherArray"}
    assert trent["check_partial"] == {"bytes"}  # the leader's partial decryption of the bit
    assert {"key_share", "check_scale"} <= set(trent)
    for o in ("p2", "p3"):
        tags = {tag for _, tag, _ in views[o]}
        # the public key, the chain's running sum of E[Ghat], partial decryptions, the
        # output part under its own key: no key share, no plaintext of anyone
        expected = {"pk", "gram", "partial", "check_partial", "output_part", "final_partial"}
        assert tags == expected, (o, tags)
        assert "key_share" not in tags
    leader = {tag for _, tag, _ in views["p1"]}
    assert "key_share" in leader and "masked" in leader and "check_blinded" in leader
    # the two shares are different and neither is the whole exponent
    pk, sk = keypair_512
    from smc_hmm.crypto.threshold import decryption_exponent

    shares = [p for name in ("trent", "p1") for _, t, p in views[name] if t == "key_share"]
    assert len(shares) == 2 and shares[0][3] != shares[1][3]
    assert decryption_exponent(sk) not in (shares[0][3], shares[1][3])
    assert shares[0][3] + shares[1][3] == decryption_exponent(sk)


def test_what_the_owners_open_is_statistically_masked(keypair_512):
    """The owners' X_t = w_t + rho_t: w_t (recovered here with the whole key, which no party
    has, from the leader's E[rho_t]) is 2^-sigma of the mask's range; the opened entries
    spread over that whole range, and Y_t bounds ||w_(t-1)||^2 within a factor of 3."""
    pk, sk = keypair_512
    blocks = spiked_blocks(9, k=4)
    result, views = _views(keypair_512, blocks)
    plan = private.Plan(PrivateParams.from_config(setup(blocks)[0]), 512)
    seen = {o: opened_batches(views, o, pk, plan) for o in ("p1", "p2", "p3")}
    assert seen["p1"] == seen["p2"] == seen["p3"]  # every owner opens the same values
    rhos = true_masks(views, sk)
    ws = [[x - r for x, r in zip(xs, rho)] for (xs, _), rho in zip(seen["p1"], rhos)]
    assert len(ws) == result["trent"]["rounds"] + 1
    top = 1 << (plan.product_bits + plan.sigma)
    xs = [x for xs, _ in seen["p1"] for x in xs]
    assert max(abs(w) for w_t in ws for w in w_t) < 1 << plan.product_bits  # w is below 2^B ...
    assert min(xs) >= 0 and max(xs) < plan.mask_bound  # ... masked by 2^(B + 40)
    assert max(xs) > top // 2 and min(xs) < top // 2  # and spread over the mask's range
    for t in range(1, len(ws)):
        _, y = seen["p1"][t]
        a = sum(w * w for w in ws[t - 1])
        assert a <= y >> plan.blur_bits <= 3 * a  # Y_t: ||w_(t-1)||^2 within a factor of 3


def test_the_shifts_keep_the_iterate_in_its_window(keypair_512):
    """s_t makes ||u_(t+1)|| <= 2^P, and for data close to max_abs it stays above the
    floor 2^P_min: u is recovered here from X' (the owners') and R' (Trent's, from his
    masks, decrypted with the whole key)."""
    pk, sk = keypair_512
    blocks = spiked_blocks(10, k=4)
    result, views = _views(keypair_512, blocks)
    plan = private.Plan(PrivateParams.from_config(setup(blocks)[0]), 512)
    seen = opened_batches(views, "p2", pk, plan)
    rhos = true_masks(views, sk)
    shifts = result["trent"]["shifts"]
    for t, s in enumerate(shifts):
        x, _ = seen[t]
        u = [(xi >> s) - (ri >> s) for xi, ri in zip(x, rhos[t])]
        norm = sum(v * v for v in u) ** 0.5
        assert 2**plan.floor_bits < norm <= 2**plan.top_bits
        assert plan.s_min <= s <= plan.s_max


# -- failures and bad inputs -------------------------------------------------------------


def test_no_convergence_within_the_cap_is_a_typed_error_for_every_party(keypair_512):
    rng = np.random.default_rng(11)
    blocks = [rng.uniform(-1, 1, (4, n)) for n in (5, 7, 6)]
    with pytest.raises(ConvergenceError, match="max_rounds"):
        run(keypair_512, blocks, max_rounds=3)


def test_data_far_below_max_abs_lose_precision_and_say_so(keypair_512):
    """The public bound max_abs scales the Gram matrix: data 2^-12 of it make every round
    shrink the iterate by about 2^24, beyond the plan's room above the floor."""
    blocks = [b * 2.0**-12 for b in spiked_blocks(12)]
    with pytest.raises((PrecisionError, ConvergenceError)):
        run(keypair_512, blocks, max_abs=1.0, max_rounds=8)


def test_a_key_too_small_for_the_plan_is_refused_before_any_work(keypair_512):
    blocks = spiked_blocks(13)
    with pytest.raises(PrecisionError, match="bits"):
        run(keypair_512, blocks, precision=64, gram_bits=40)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"mode": "fast"}, "mode"),
        ({"precision": 8}, "precision"),
        ({"hiding_bits": 20}, "hiding_bits"),
        ({"check_every": 0}, "check_every"),
        ({"gram_bits": True}, "gram_bits"),
        ({"tol": 2.0}, "tol"),
    ],
)
def test_parameters_are_validated(options, match):
    with pytest.raises(ConfigError, match=match):
        params_from_config(options)


def test_a_precision_too_low_for_tol_is_refused():
    params = PrivateParams(precision=40, tol=1e-7)
    with pytest.raises(InvalidInputError, match="floor"):
        params.messages(2048)


def test_bad_owner_data_is_refused(keypair_512):
    blocks = spiked_blocks(14)
    params, parties = setup(blocks)
    parties["p2"] = ("owner", np.full_like(blocks[1], np.nan))
    with pytest.raises(InvalidInputError, match="NaN"):
        run_protocol(
            "eigenvector", params, parties, keys={"authority": keypair_512}, min_key_bits=512
        )


@pytest.mark.parametrize(
    ("party", "send"),
    [("p1", 3), ("p2", 4), ("trent", 2), ("trent", 9), ("authority", 3)],
    ids=["leader-setup", "owner-round", "trent-setup", "trent-round", "authority-share"],
)
def test_a_party_that_leaves_ends_every_other_party_with_a_typed_error(keypair_512, party, send):
    params, parties = setup(spiked_blocks(15))
    t0 = time.monotonic()
    errors = run_with_a_leaver(
        keypair_512, params, parties, party, send, "disconnect", 2.0, rng=Rng.seeded(1)
    )
    assert time.monotonic() - t0 < 15
    still = set(parties) - {party, "authority"}
    assert still <= set(errors), (still, errors)
    for name in still:
        assert isinstance(errors[name], SmcHmmError), (name, errors[name])
    assert any(isinstance(errors[n], TransportError) for n in still)


def test_ciphertext_arrays_are_the_only_thing_trent_adds(keypair_512):
    """Trent's contribution sums and masks are CipherArrays under the shared key; the
    owners' own keys carry only their own Gram matrices and output parts."""
    blocks = spiked_blocks(16)
    _, views = _views(keypair_512, blocks)
    shared = keypair_512[0].fingerprint
    for _, tag, payload in views["trent"]:
        if tag == "own_gram":
            assert payload.public_key.fingerprint != shared
        elif isinstance(payload, CipherArray):
            assert payload.public_key.fingerprint == shared, tag
    owner_keys = {p.fingerprint for _, t, p in views["trent"] if t == "owner_key"}
    assert len(owner_keys) == 3 and shared not in owner_keys


# -- deployment: party processes over mutual TLS ----------------------------------------


@pytest.mark.slow
def test_the_private_mode_runs_as_processes_over_mutual_tls(tmp_path):
    """The default mode through ``smc-hmm launch``: the authority, Trent and three owners
    as separate processes with certificates, 1024-bit keys (the default plan)."""
    blocks = spiked_blocks(30, k=4, cols=(5, 6, 4))
    params, _ = configuration(blocks, reveal_to_trent=True)  # the default plan
    result = launch_eigenvector(tmp_path, params, blocks, key_bits=1024, timeout=60)
    x = np.concatenate([np.asarray(result[o]) for o in params["owners"]])
    assert cosine(x, principal_eigenvector(np.hstack(blocks))) >= COSINE
    np.testing.assert_allclose(result["trent"]["eigenvector"], x)
    assert result["trent"]["mode"] == "private"
    assert result["authority"] is None


def test_all_zero_data_end_with_a_typed_error_after_the_last_message(keypair_512):
    blocks = [np.zeros((4, n)) for n in (3, 4)]
    with pytest.raises(ConvergenceError, match="zero"):
        run(keypair_512, blocks, max_abs=1.0, reveal_to_trent=True)


def test_an_owner_with_all_zero_columns_gets_a_zero_share(keypair_512):
    blocks = spiked_blocks(17)
    blocks[1] = np.zeros_like(blocks[1])
    result = run(keypair_512, blocks)
    assert not np.any(result["p2"])
    assert cosine(gathered(result, 3), principal_eigenvector(np.hstack(blocks))) >= COSINE
