"""protocols.viterbi: secure Viterbi decoding in both directions against plaintext Viterbi
(smc_hmm.hmm and hmmlearn), its tie rule, its output rules, what each party sees, and the
chosen-input attacks of docs/security.md ("viterbi and spot")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bound_support import assert_uniform_view
from transcript_harness import VIEW_P_MIN, assert_same_transcripts

from protocols import viterbi as viterbi_protocol
from protocols.stages import decision, emissions
from protocols.stages import decoding as vit
from smc_hmm.errors import ConfigError, InvalidInputError, PrecisionError, ProtocolError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, viterbi
from smc_hmm.runtime import run_protocol

REL = 1e-9


def _discrete(rng, n=3, m=4, zeros=False):
    a = rng.dirichlet(np.ones(n), size=n)
    pi = rng.dirichlet(np.ones(n))
    b = rng.dirichlet(np.ones(m), size=n)
    if zeros:
        b[0, 0] = 0.0
        b[0] /= b[0].sum()
        pi[-1] = 0.0
        pi /= pi.sum()
    return DiscreteHMM(pi, a, b)


def _gaussian(rng, n=3, d=2, cov="diag"):
    a = rng.dirichlet(np.ones(n), size=n)
    pi = rng.dirichlet(np.ones(n))
    means = rng.normal(0, 2, size=(n, d))
    if cov == "diag":
        covars = rng.uniform(0.5, 2, size=(n, d))
    else:
        covars = np.array([np.eye(d) * rng.uniform(0.5, 2) + 0.2 for _ in range(n)])
    return GaussianHMM(pi, a, means, covars, cov)


def _run(keypair, models, obs, params=None, **kwargs):
    params = dict(params or {})
    holder = params.get("model_holder", "bob")
    if holder == "bob":
        inputs = {"alice": ("alice", obs), "bob": ("bob", models)}
    else:
        inputs = {"alice": ("alice", models), "bob": ("bob", obs)}
    keys = {"alice": keypair}
    return run_protocol(
        viterbi_protocol.PROTOCOL,
        params,
        inputs,
        keys=keys,
        min_key_bits=512,
        timeout=300,
        **kwargs,
    )


def _tolerance(models, obs, params, score):
    """The documented bound (vit.score_error_bound) where the secure run computes the
    Viterbi recursion of quantized frames (garbled, Gaussian); else 1e-9 relative."""
    p = vit.ViterbiParams.from_config(params or {})
    structure = vit.Structure.of(vit.as_decoders(models))
    if structure.kind == "discrete" or not p.garbled or p.model_holder != "bob":
        return REL * abs(score)
    plan = vit.Plan(p, structure, len(obs), 1024)
    top = float(np.abs(obs).max())
    return vit.score_error_bound(vit.as_decoders(models), plan, top)


def _check(result, models, obs, hmmlearn=True, params=None):
    for out, model in zip(result["alice"], models):
        path, score = viterbi(model, obs)
        assert out["path"] == path.tolist()
        if math.isinf(score):
            assert out["score"] == -math.inf
            continue
        tol = _tolerance(models, obs, params, score)
        assert abs(out["score"] - score) <= tol
        if hmmlearn:
            reference = model.to_hmmlearn()
            x = np.asarray(obs).reshape(len(obs), -1)
            log_p, states = reference.decode(x, algorithm="viterbi")
            assert states.tolist() == out["path"]
            assert abs(out["score"] - log_p) <= tol


#: (model_holder, comparison): the garbled default in both directions and the thesis's
#: DGK recursion, kept as a named mode
MODES = [("bob", "auto"), ("bob", "dgk"), ("alice", "auto"), ("alice", "dgk")]


@pytest.mark.parametrize("holder,comparison", MODES)
@pytest.mark.parametrize("seed", [1, 2])
def test_discrete_paths_equal_plaintext_and_hmmlearn(keypair_512, holder, comparison, seed):
    rng = np.random.default_rng(seed)
    models = [_discrete(rng, 3), _discrete(rng, 2)]
    obs, _ = models[0].sample(9, rng)
    result = _run(keypair_512, models, obs, {"model_holder": holder, "comparison": comparison})
    _check(result, models, obs)
    assert result["bob"] is None


@pytest.mark.parametrize("cov", ["diag", "full"])
@pytest.mark.parametrize("holder,comparison", MODES)
def test_gaussian_paths_equal_plaintext_and_hmmlearn(keypair_1024, holder, comparison, cov):
    rng = np.random.default_rng(11 if cov == "diag" else 12)
    models = [_gaussian(rng, 3, 2, cov), _gaussian(rng, 4, 2, cov)]
    obs, _ = models[1].sample(10, rng)
    params = {"model_holder": holder, "comparison": comparison}
    _check(_run(keypair_1024, models, obs, params), models, obs, params=params)


@pytest.mark.parametrize("holder,comparison", [("bob", "auto"), ("alice", "dgk")])
def test_shared_emission_rows_are_computed_once_and_decode_the_same(
    keypair_512, holder, comparison
):
    """share_rows: a state whose emission equals another model's is one row of a common
    table (3 rows a frame here instead of 5), with the same paths as plaintext."""
    from smc_hmm.hmm import DiscreteHMM

    rng = np.random.default_rng(8)
    a, b = _discrete(rng, 3), _discrete(rng, 2)
    b = DiscreteHMM(b.startprob, b.transmat, np.stack([a.emissionprob[2], a.emissionprob[0]]))
    decoders = vit.as_decoders([a, b])
    shared = vit.Structure.of(decoders, shared=True)
    assert shared.rows == ((0, 1, 2), (2, 0)) and shared.total_rows == 3
    assert vit.Structure.of(decoders).total_rows == 5
    obs, _ = a.sample(8, rng)
    params = {"model_holder": holder, "comparison": comparison, "share_rows": True}
    _check(_run(keypair_512, [a, b], obs, params), [a, b], obs)


def test_zero_probabilities_and_an_impossible_sequence(keypair_512):
    """log 0 is the sentinel -Z: a path through a zero always loses to one without, and a
    sequence no path explains reports -inf, as in plaintext."""
    rng = np.random.default_rng(5)
    model = _discrete(rng, 3, 4, zeros=True)
    obs = np.array([0, 1, 0, 2, 3, 0])
    _check(_run(keypair_512, [model], obs), [model], obs)
    never = DiscreteHMM([1.0, 0.0], [[0.5, 0.5], [0.5, 0.5]], [[1.0, 0.0], [1.0, 0.0]])
    result = _run(keypair_512, [never], np.array([0, 1, 0]))
    assert result["alice"][0]["score"] == -math.inf
    assert viterbi(never, np.array([0, 1, 0]))[1] == -math.inf


def test_ties_go_to_the_lowest_predecessor_index(keypair_512):
    """States 0 and 1 are exact twins (same emission row, same start and transitions into
    every target): every comparison between them is an exact tie, in plaintext and here,
    and the lower index wins everywhere -- numpy's argmax rule."""
    a = np.array([[0.3, 0.3, 0.4], [0.3, 0.3, 0.4], [0.25, 0.25, 0.5]])
    b = np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.5]])
    model = DiscreteHMM([0.4, 0.4, 0.2], a, b)
    obs = np.array([0, 0, 1, 0, 0])
    twins = vit.Decoder(model, rows=(0, 0, 1))
    result = _run(keypair_512, [twins], obs)
    path, _ = viterbi(model, obs)
    assert result["alice"][0]["path"] == path.tolist()
    assert 1 not in path.tolist()  # the twin with the higher index never wins a tie


def test_segment_output_reveals_only_first_and_last_frame(keypair_512):
    """A left-to-right model whose middle states are the 'segment': Alice gets (first, last)
    of the best path's visit, nothing else."""
    a = np.array([[0.8, 0.2, 0, 0], [0, 0.6, 0.4, 0], [0, 0, 0.7, 0.3], [0, 0, 0, 1.0]])
    b = np.array([[0.9, 0.1], [0.1, 0.9], [0.2, 0.8], [0.9, 0.1]])
    model = DiscreteHMM([1.0, 0, 0, 0], a, b)
    obs = np.array([0, 0, 1, 1, 1, 0, 0, 0])
    decoder = vit.Decoder(model, segment=(1, 3))
    result = _run(keypair_512, [decoder], obs, {"output": "segment", "reveal_score": False})
    path, _ = viterbi(model, obs)
    inside = np.flatnonzero((path >= 1) & (path < 3))
    assert result["alice"] == [{"segment": (int(inside[0]), int(inside[-1]))}]


def test_bob_sees_only_ciphertexts_and_the_public_structure(keypair_512):
    rng = np.random.default_rng(3)
    model = _discrete(rng)
    obs, _ = model.sample(5, rng)
    result = _run(keypair_512, [model], obs, record_views=True)
    from smc_hmm.crypto import CipherArray, PublicKey

    for _, tag, payload in result.views["bob"]:
        if tag == "cmp.dgk":  # Alice's DGK public key [n, g, h, u, t]
            assert len(payload) == 5 and all(isinstance(v, int) for v in payload)
            continue
        fields = payload if isinstance(payload, list) else [payload]
        for value in fields:
            if tag == "vit.length":
                assert value == 5
            elif tag == "vit.done":  # Alice's closing message
                assert value is True
            else:
                assert isinstance(value, CipherArray | PublicKey | bytes), tag


@pytest.mark.parametrize("holder,comparison", MODES[1:])
def test_transcripts_do_not_depend_on_private_inputs(keypair_512, holder, comparison):
    """Same public sizes, different observations and models: identical frames once
    ciphertexts are masked (the metadata rule), in both directions (the default, Bob's
    models with the garbled recursion: tests/protocols/test_conformance.py)."""
    rng = np.random.default_rng(9)
    template = _discrete(rng, 3, 4)
    cases = []
    for _ in range(2):
        m = _discrete(rng, 3, 4)
        m = DiscreteHMM(m.startprob, template.transmat * 0 + m.transmat, m.emissionprob)
        cases.append((m, rng.integers(0, 4, size=6)))
    # the structure (topology) is public: both models have every edge

    def run(case, wrap):
        model, obs = case
        params = {"model_holder": holder, "comparison": comparison}
        _run(keypair_512, [model], obs, params, wrap_transport=wrap)

    structure = vit.Structure.of(vit.as_decoders(cases[0][0]))
    params = vit.ViterbiParams(model_holder=holder, comparison=comparison)
    plan = vit.Plan(params, structure, 6, 512)
    frames = assert_same_transcripts(run, cases, plan.declared(), keys=[keypair_512])
    assert ("bob", "alice") in frames and ("alice", "bob") in frames


def _chosen_frames():
    frames = [np.zeros(2), *np.eye(2), *(-np.eye(2))]
    return np.repeat(np.array(frames), 3, axis=0)


def test_the_default_shows_alice_only_uniform_masked_emissions(keypair_1024):
    """The chosen-input attack (docs/security.md) on the garbled default: Alice sends a
    zero frame, unit vectors and their negatives, each repeated, and reads everything
    she decrypts.  That is one message (the bound stage's ``bd.values``): the masked
    emissions y = log b + 2^(l-1) + r with r uniform on [0, 2^(l+sigma)), and the MAC
    slots.  y minus Bob's true log-density (which an attacker would have to know) is
    uniform by a KS test, the repeats' differences are uniform too (they give no exact
    or averaged difference of log-densities), and nothing else she receives is a
    ciphertext.  The control (the dgk mode's smooth blinds, which repeats average) is
    the next test."""
    from scipy import stats

    rng = np.random.default_rng(4)
    model = _gaussian(rng, 3, 2)
    obs = _chosen_frames()
    result = _run(keypair_1024, [model], obs, record_views=True)
    _check(result, [model], obs, hmmlearn=False)
    plan = vit.Plan(vit.ViterbiParams(), vit.Structure.of(vit.as_decoders(model)), len(obs), 1024)
    decryptable = [t for _, t, p in result.views["alice"] if hasattr(p, "decrypt_ints")]
    assert decryptable == ["bd.values"]
    (emit,) = [p for _, t, p in result.views["alice"] if t == "bd.values"]
    bound = plan.bound_plan
    truth = model.log_emission(obs)
    masks = assert_uniform_view(emit, keypair_1024, bound, truth * 2.0**plan.scale)
    diffs = (masks[1::3] - masks[0::3]).ravel()  # a repeat minus its first frame
    assert stats.kstest(diffs, stats.triang(c=0.5, loc=-1, scale=2).cdf).pvalue > VIEW_P_MIN


def test_dgk_mode_alice_decrypts_only_blinded_emissions_and_masked_comparisons(keypair_1024):
    """The chosen-input attack (docs/security.md) on the dgk mode: Alice sends a zero
    frame, unit vectors and their negatives, each repeated, and reads what she decrypts.
    (a) Every emission
    slot is Bob's log-density plus a fresh smooth blind in [0, R): no repeat shows the same
    blind (no exact difference between repeats), and the blinds do not cancel.  (b) Every
    masked comparison value is d = 2^l + a - b + r with r of l + 40 bits: d's are all
    distinct and their spread is the mask's, not the scores'."""
    from protocols.stages import dgk

    rng = np.random.default_rng(4)
    model = _gaussian(rng, 3, 2)
    obs = _chosen_frames()
    result = _run(keypair_1024, [model], obs, {"comparison": "dgk"}, record_views=True)
    _check(result, [model], obs, hmmlearn=False)
    sk = keypair_1024[1]
    params = vit.ViterbiParams(comparison="dgk")
    plan = vit.Plan(params, vit.Structure.of(vit.as_decoders(model)), len(obs), 1024)
    (emit,) = [p for _, t, p in result.views["alice"] if t == "vit.emit"]
    y = emissions.alice_unpack(emit.decrypt_ints(sk), plan.fspec.emissions(len(obs)))
    truth = model.log_emission(obs)
    f = params.log_scale
    blinds = np.array([[y[t][j] / 2**f - truth[t, j] for j in range(3)] for t in range(len(obs))])
    assert blinds.min() > -1e-9 and blinds.max() < params.blind_nats
    for block in range(0, len(obs), 3):  # repeated frames: fresh blinds every time
        for j in range(3):
            diffs = {int(y[block + i][j] - y[block][j]) for i in (1, 2)}
            assert 0 not in diffs and len(diffs) == 2
    masked = [p for _, t, p in result.views["alice"] if t == "sel.masked"]
    spec = plan.select_spec(1)
    ds = []
    for packed, matches in zip(masked, [len(m) for m in plan.step.matches] * (len(obs) - 1)):
        ds += dgk.unpack_slots(packed.decrypt_ints(sk), spec.slot_bits, spec.per, matches)
    assert len(set(ds)) == len(ds)
    centred = np.array([float(d - (1 << plan.bits)) for d in ds])
    assert centred.std() > 2.0 ** (plan.bits + 30)  # the mask's spread, 2^(l + 40) / sqrt 12


def test_mining_alice_decrypts_only_uniform_masked_emissions(keypair_1024):
    """Speech mining, the garbled default: what Alice decrypts of Bob's recording is one
    packed message of emissions under uniform masks: the slot minus its true value is
    uniform on the mask's range (a KS test), and nothing else she receives decrypts."""
    from scipy import stats

    from protocols.stages import garbled
    from smc_hmm.crypto.packing import unpack_slots

    rng = np.random.default_rng(6)
    model = _gaussian(rng, 3, 2)
    obs, _ = model.sample(12, rng)
    result = _run(keypair_1024, [model], obs, {"model_holder": "alice"}, record_views=True)
    _check(result, [model], obs, hmmlearn=False)
    decryptable = [t for _, t, p in result.views["alice"] if hasattr(p, "decrypt_ints")]
    assert decryptable == ["vit.share"]
    (packed,) = [p for _, t, p in result.views["alice"] if t == "vit.share"]
    plan = vit.Plan(
        vit.ViterbiParams(model_holder="alice"),
        vit.Structure.of(vit.as_decoders(model)),
        len(obs),
        1024,
    )
    sigma = plan.params.sigma
    width, per = garbled.rounded_share_slots(plan.reach_bound, sigma, 1024)
    residues = packed.decrypt_residues(keypair_1024[1])
    slots = unpack_slots(residues, width, per, len(obs) * 3)
    truth = model.log_emission(obs).ravel() * 2.0**plan.params.log_scale
    top = float(1 << width)  # the masks span the whole slot
    masks = np.array([float(v) - t - plan.reach_bound for v, t in zip(slots, truth)]) / top
    assert stats.kstest(masks, "uniform").pvalue > VIEW_P_MIN


def test_dgk_mining_alice_sees_masked_rescalings_only(keypair_1024):
    """Speech mining in the dgk mode: Bob's frames never reach Alice unmasked; her
    rescaling view is L + r with r of bits(bound) + 40 bits."""
    rng = np.random.default_rng(6)
    model = _gaussian(rng, 3, 2)
    obs, _ = model.sample(6, rng)
    params = {"model_holder": "alice", "comparison": "dgk"}
    result = _run(keypair_1024, [model], obs, params, record_views=True)
    _check(result, [model], obs, hmmlearn=False)
    (masked,) = [p for _, t, p in result.views["alice"] if t == "rescale.masked"]
    values = [int(v) for v in masked.decrypt_ints(keypair_1024[1])]
    truth = model.log_emission(obs).ravel()
    scale = 2.0 ** vit.ViterbiParams().log_scale
    gaps = [v / scale - q for v, q in zip(values, truth)]
    assert min(gaps) > 1e6  # the mask dwarfs every log-density


def test_mining_refuses_out_of_range_frames_after_its_last_message(keypair_512):
    """Bob's frame beyond the public feature bound: clipped, the run finishes, Bob's
    runner raises; Alice's view is the same as for an in-range recording."""
    rng = np.random.default_rng(8)
    model = _gaussian(rng, 2, 1)
    good = rng.normal(size=(4, 1))
    bad = good.copy()
    bad[2, 0] = 500.0
    outcomes = []

    def run(obs, wrap):
        try:
            _run(keypair_512, [model], obs, {"model_holder": "alice"}, wrap_transport=wrap)
            outcomes.append("ok")
        except InvalidInputError:
            outcomes.append("refused")

    plan = vit.Plan(
        vit.ViterbiParams(model_holder="alice"), vit.Structure.of(vit.as_decoders(model)), 4, 512
    )
    assert_same_transcripts(run, [good, bad], plan.declared(), keys=[keypair_512])
    assert outcomes == ["ok", "refused"]


def test_an_offline_phase_precomputes_every_randomizer_when_alice_holds_the_models(
    keypair_512,
):
    """Exact pools with Alice's models (Bob's, the default: the conformance suite)."""
    from party_support import exact_offline_pools

    rng = np.random.default_rng(10)
    models = [_discrete(rng, 3), _discrete(rng, 2)]
    obs, _ = models[0].sample(7, rng)
    pk, sk = keypair_512
    params = vit.ViterbiParams(model_holder="alice")
    need = viterbi_protocol.randomizers_needed(params, pk.bits, {"alice": models, "bob": obs})
    with exact_offline_pools(pk, need) as randomizers:
        result = _run(keypair_512, models, obs, {"model_holder": "alice"}, randomizers=randomizers)
    _check(result, models, obs, hmmlearn=False)


def test_bad_inputs_are_typed_errors(keypair_512):
    with pytest.raises(InvalidInputError):
        vit.ViterbiParams(output="everything")
    with pytest.raises(InvalidInputError):
        vit.ViterbiParams(model_holder="trent")
    with pytest.raises(InvalidInputError, match="comparison"):
        vit.ViterbiParams(comparison="yao")
    with pytest.raises(ConfigError):
        vit.ViterbiParams.from_config({"nonsense": 1})
    rng = np.random.default_rng(2)
    model = _discrete(rng)
    with pytest.raises(InvalidInputError, match="share a row"):
        vit.Decoder(model, rows=(0, 0, 1))
    with pytest.raises(ProtocolError):
        vit.Structure.from_wire({"kind": "discrete"})
    spec = vit.Structure.of([vit.Decoder(model)]).to_wire()
    spec["edges"][0].append([0, 9])
    with pytest.raises(ProtocolError):
        vit.Structure.from_wire(spec)
    wide = GaussianHMM([1.0], [[1.0]], [[0.0]], [[1e-6]])
    with pytest.raises(PrecisionError, match="public bound"):
        _run(keypair_512, [wide], np.zeros((3, 1)))
    tiny = DiscreteHMM([1.0, 0.0], [[1 - 1e-20, 1e-20], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(PrecisionError, match="floor"):
        _run(keypair_512, [tiny], np.array([0, 1]))


def test_tournament_plans():
    tour = decision.Tournament.of([1, 2, 3, 5])
    assert tour.comparisons == 0 + 1 + 2 + 4
    assert len(tour.matches) == 3  # ceil(log2 5)
    assert tour.root == (0, 2, 4, 8)


def test_compare_select_gives_each_max_and_the_bits_products(keypair_512):
    """dgk.bob_compare_select and bob_select_products (the recursion's and the
    traceback's primitive): the max with the left operand winning ties, the bits kept
    encrypted, their products with encrypted 0/1 weights; packed values unpack exactly."""
    from protocols.stages import dgk
    from smc_hmm.crypto import CipherArray
    from smc_hmm.runtime import simulate

    rng = np.random.default_rng(13)
    k, l = 30, 40
    a = [int(v) for v in rng.integers(-(2**38), 2**38, k)]
    b = [int(v) for v in rng.integers(-(2**38), 2**38, k)]
    b[0], b[1], b[2] = a[0], a[1] + 1, a[2] - 1  # a tie and the two closest cases
    v = [int(x) for x in rng.integers(0, 2, k)]
    spec = dgk.SelectSpec(l, k, 512)
    pspec = dgk.ProductSpec(k, 512)

    def alice(ctx):
        dgk_sk = dgk.alice_send_keys(ctx, spec.compare)
        shares = dgk.alice_compare_select(ctx, dgk_sk, spec)
        dgk.alice_select_products(ctx, shares, pspec, spec.compare.high_bound)

    def bob(ctx):
        pk, dgk_pk = dgk.bob_recv_keys(ctx, spec.compare)
        ea = CipherArray.encrypt_encoded(pk, a, 0, 2**38)
        eb = CipherArray.encrypt_encoded(pk, b, 0, 2**38)
        best, bits = dgk.bob_compare_select(ctx, ea, eb, dgk_pk, spec)
        w = CipherArray.encrypt_encoded(pk, v, 0, 1)
        return best, bits.bit, dgk.bob_select_products(ctx, bits, w, pspec)

    result = simulate({"alice": alice, "bob": bob}, keys={"alice": keypair_512}, min_key_bits=512)
    best, bit, prod = result.outputs["bob"]
    sk = keypair_512[1]
    assert [int(x) for x in best.decrypt_ints(sk)] == [max(x, y) for x, y in zip(a, b)]
    bits = [int(x) for x in bit.decrypt_ints(sk)]
    assert bits == [int(x < y) for x, y in zip(a, b)] and bits[:3] == [0, 1, 0]
    assert [int(x) for x in prod.decrypt_ints(sk)] == [x * y for x, y in zip(bits, v)]
    assert dgk.SelectSpec(l, k, 512).packed < k  # many masked values per ciphertext
