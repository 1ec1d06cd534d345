"""Secure forward algorithm (protocols.forward) against the plaintext forward algorithm.

Every run is a real two-party run (one thread per party over the in-process
network, every message through the wire codec).  Alice's revealed log P is
compared with :func:`smc_hmm.hmm.log_likelihood` and with hmmlearn's
``score``; Bob's encrypted output is decrypted with Alice's private key.
Also checked: zero probabilities, ``reveal=False``, what each party receives
(views and the size of Alice's blinds), the cost report, the key-capacity
check, and two known precision limits (strict ``xfail`` tests that document
them, each next to a passing test with the parameters that avoid it).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from protocols import forward
from protocols.stages import emissions, forward_scoring
from protocols.stages.primitives import PrecisionParams
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.errors import InvalidInputError, PrecisionError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, log_likelihood
from smc_hmm.runtime import simulate

#: the precision target for log P (docs/benchmarks.md; we observe ~1e-15)
REL_TOL = 1e-9
DEFAULT = forward.ForwardParams()
PREC = DEFAULT.precision
#: the v1 recursion (per-model normalisation), kept for comparison
V1 = forward.ForwardParams(recursion="v1")


# -- helpers -------------------------------------------------------------------------------


def run_forward(
    keypair, models, obs, params=None, *, reveal=True, record_views=False, timeout=60.0
):
    """Alice (observations, key pair) and Bob (models) run the protocol in-process."""
    roles = {
        "alice": lambda ctx, o, p: forward.alice(ctx, o, p, reveal=reveal),
        "bob": lambda ctx, m, p: forward.bob(ctx, m, p, reveal=reveal),
    }
    return simulate(
        roles,
        args={"alice": (obs, params), "bob": (models, params)},
        keys={"alice": keypair},
        record_views=record_views,
        timeout=timeout,
        min_key_bits=512,
    )


def rel_err(secure: float, plain: float) -> float:
    if secure == plain:  # includes -inf == -inf
        return 0.0
    return abs(secure - plain) / abs(plain)


def bob_log_p(result, private_key) -> list[float]:
    """Decrypt Bob's E(log P) (scale log_scale) with Alice's private key."""
    enc = result.outputs["bob"]
    assert isinstance(enc, CipherArray) and enc.scale == PREC.f
    return [PREC.decode_log(v) for v in enc.decrypt_ints(private_key)]


def hmmlearn_score(model, obs) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(model, DiscreteHMM):
            return float(model.to_hmmlearn().score(np.asarray(obs).reshape(-1, 1)))
        return float(model.to_hmmlearn().score(obs))


def random_discrete(rng, n_states, n_symbols, concentration=1.0) -> DiscreteHMM:
    return DiscreteHMM(
        startprob=rng.dirichlet(np.full(n_states, concentration)),
        transmat=rng.dirichlet(np.full(n_states, concentration), size=n_states),
        emissionprob=rng.dirichlet(np.full(n_symbols, concentration), size=n_states),
    )


def random_gaussian(rng, n_states, n_features, covariance_type) -> GaussianHMM:
    means = rng.normal(scale=2.0, size=(n_states, n_features))
    if covariance_type == "diag":
        covars = rng.uniform(0.3, 2.0, size=(n_states, n_features))
    else:
        factors = rng.normal(size=(n_states, n_features, n_features))
        covars = factors @ np.swapaxes(factors, 1, 2) + 0.5 * np.eye(n_features)
    return GaussianHMM(
        startprob=rng.dirichlet(np.ones(n_states)),
        transmat=rng.dirichlet(np.ones(n_states), size=n_states),
        means=means,
        covars=covars,
        covariance_type=covariance_type,
    )


def check_against_plaintext(result, models, obs, private_key, *, use_hmmlearn=True):
    """Alice's output and Bob's decrypted output vs log_likelihood (and hmmlearn)."""
    plain = [log_likelihood(m, obs) for m in models]
    alice = result.outputs["alice"]
    assert isinstance(alice, list) and len(alice) == len(models)
    assert all(math.isfinite(v) for v in alice)
    for secure, ref in zip(alice, plain):
        assert rel_err(secure, ref) <= REL_TOL, (secure, ref)
    if use_hmmlearn:
        for secure, model in zip(alice, models):
            assert rel_err(secure, hmmlearn_score(model, obs)) <= REL_TOL
    for secure, ref in zip(bob_log_p(result, private_key), plain):
        assert rel_err(secure, ref) <= REL_TOL, (secure, ref)
    return max(rel_err(s, r) for s, r in zip(alice, plain))


# -- 1. discrete models -------------------------------------------------------------------


@pytest.mark.parametrize("seed, n_steps", [(0, 1), (1, 2), (2, 9), (3, 40)])
def test_discrete_batched_models_match_plaintext_and_hmmlearn(keypair_1024, seed, n_steps):
    rng = np.random.default_rng(seed)
    n_symbols = int(rng.integers(3, 7))
    models = [random_discrete(rng, n, n_symbols) for n in (2, 3, 4)]
    obs, _ = models[int(rng.integers(3))].sample(n_steps, rng)
    result = run_forward(keypair_1024, models, obs)
    worst = check_against_plaintext(result, models, obs, keypair_1024[1])
    assert worst < 1e-9  # far inside the bound: we observe ~1e-13


def test_discrete_skewed_models_with_many_symbols(keypair_1024):
    """Peaked Dirichlet(0.3) parameters: tiny probabilities, widely spread alphas."""
    rng = np.random.default_rng(11)
    models = [random_discrete(rng, n, 6, concentration=0.3) for n in (2, 4)]
    obs = rng.integers(0, 6, size=25)
    result = run_forward(keypair_1024, models, obs)
    check_against_plaintext(result, models, obs, keypair_1024[1])


def test_discrete_long_sequence_t1000(keypair_512):
    """T = 1000 with 2 states (512-bit key: the capacity check allows it, ~5 s)."""
    rng = np.random.default_rng(5)
    model = DiscreteHMM(
        startprob=[0.6, 0.4],
        transmat=[[0.9, 0.1], [0.2, 0.8]],
        emissionprob=[[0.5, 0.3, 0.2], [0.1, 0.2, 0.7]],
    )
    obs, _ = model.sample(1000, rng)
    result = run_forward(keypair_512, [model], obs, timeout=60)
    worst = check_against_plaintext(result, [model], obs, keypair_512[1])
    assert worst < 1e-9
    assert log_likelihood(model, obs) < -500  # the value really is far from 0


# -- 2. zero probabilities -------------------------------------------------------------------


def left_to_right_with_zeros() -> DiscreteHMM:
    # startprob, transmat and emissionprob all contain structural zeros
    return DiscreteHMM(
        startprob=[1.0, 0.0, 0.0],
        transmat=[[0.6, 0.4, 0.0], [0.0, 0.7, 0.3], [0.0, 0.0, 1.0]],
        emissionprob=[[0.7, 0.3, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0], [0.1, 0.0, 0.0, 0.9]],
    )


def test_zero_probabilities_possible_sequences_match(keypair_1024):
    model = left_to_right_with_zeros()
    other = random_discrete(np.random.default_rng(7), 2, 4)
    rng = np.random.default_rng(8)
    for n_steps in (1, 4, 12):
        obs, _ = model.sample(n_steps, rng)
        result = run_forward(keypair_1024, [model, other], obs)
        check_against_plaintext(result, [model, other], obs, keypair_1024[1])


#: (observations, possible?) for left_to_right_with_zeros()
ZERO_CASES = [
    ([3], False),  # the only start state never emits symbol 3 (startprob / emission zeros)
    ([2, 0], False),  # the start state never emits symbol 2
    ([0, 3, 3], False),  # 3 needs state 2, which state 0 cannot reach in one step
    ([0, 2, 0, 2], False),  # 0 after 2 needs state 2, which never emits 2 nor leaves
    ([0, 1, 3, 1], False),  # impossible only at the last step
    ([0, 0, 0, 2], True),  # through the zeros, but possible
    ([0, 1, 2, 2, 0], True),
]


@pytest.mark.parametrize("obs, possible", ZERO_CASES)
def test_zero_probabilities_impossible_sequence_gives_minus_inf(keypair_1024, obs, possible):
    model = left_to_right_with_zeros()
    other = random_discrete(np.random.default_rng(9), 3, 4)
    obs = np.array(obs)
    plain = log_likelihood(model, obs)
    assert math.isfinite(plain) == possible  # the case is what it claims to be
    result = run_forward(keypair_1024, [model, other], obs)
    alice, bob = result.outputs["alice"], bob_log_p(result, keypair_1024[1])
    assert not any(math.isnan(v) for v in alice + bob)
    # the model with the zeros: exactly -inf when impossible, else a match
    if possible:
        assert rel_err(alice[0], plain) <= REL_TOL and rel_err(bob[0], plain) <= REL_TOL
    else:
        assert alice[0] == -math.inf and bob[0] == -math.inf
    # the other model in the same batch is unaffected
    ref = log_likelihood(other, obs)
    assert rel_err(alice[1], ref) <= REL_TOL and rel_err(bob[1], ref) <= REL_TOL


# -- 3. Gaussian models ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "covariance_type, n_features, n_states, n_steps, seed",
    [
        ("diag", 2, 2, 8, 0),
        ("diag", 5, 3, 5, 1),
        ("full", 2, 3, 6, 2),
        ("full", 3, 2, 1, 3),
        ("full", 5, 3, 4, 4),
    ],
)
def test_gaussian_matches_plaintext_and_hmmlearn(
    keypair_1024, covariance_type, n_features, n_states, n_steps, seed
):
    rng = np.random.default_rng(100 + seed)
    model = random_gaussian(rng, n_states, n_features, covariance_type)
    obs, _ = model.sample(n_steps, rng)
    result = run_forward(keypair_1024, [model], obs)
    check_against_plaintext(result, [model], obs, keypair_1024[1])


def test_gaussian_batched_models_with_different_state_counts(keypair_1024):
    rng = np.random.default_rng(200)
    models = [random_gaussian(rng, 2, 3, "diag"), random_gaussian(rng, 3, 3, "full")]
    obs, _ = models[1].sample(6, rng)
    result = run_forward(keypair_1024, models, obs)
    check_against_plaintext(result, models, obs, keypair_1024[1])


def test_gaussian_on_a_512_bit_key(keypair_512):
    rng = np.random.default_rng(201)
    model = random_gaussian(rng, 2, 2, "full")
    obs, _ = model.sample(5, rng)
    result = run_forward(keypair_512, [model], obs)
    check_against_plaintext(result, [model], obs, keypair_512[1])


# -- 4. reveal=False -------------------------------------------------------------------------


def test_without_reveal_alice_gets_nothing_and_bob_holds_log_p(keypair_1024):
    rng = np.random.default_rng(300)
    models = [random_discrete(rng, 2, 3), random_discrete(rng, 3, 3)]
    obs, _ = models[0].sample(5, rng)
    result = run_forward(keypair_1024, models, obs, reveal=False, record_views=True)
    assert result.outputs["alice"] is None
    for secure, model in zip(bob_log_p(result, keypair_1024[1]), models):
        assert rel_err(secure, log_likelihood(model, obs)) <= REL_TOL
    assert "fw.result" not in [tag for _, tag, _ in result.views["alice"]]
    assert result.cost.rounds == 2 * len(obs) + 5  # one round fewer than with reveal


# -- 5. what each party receives -------------------------------------------------------------


def _assert_views(result, pk, n_steps, streams=1):
    bob_tags = []
    for peer, tag, payload in result.views["bob"]:
        assert peer == "alice"
        bob_tags.append(tag)
        if tag == "fw.key":
            assert isinstance(payload, PublicKey) and payload.n == pk.n
        elif tag == "fw.length":  # the public length T
            assert payload == n_steps
        else:  # never a plaintext number about Alice's data
            assert isinstance(payload, CipherArray) and payload.public_key.n == pk.n
    # the streams' rounds interleave: every stream's values for a step, in stream order
    steps = [f"fw.step.edges.{i}" for _ in range(n_steps - 1) for i in range(streams)]
    final = [f"fw.final.edges.{i}" for i in range(streams)]
    assert bob_tags == ["fw.key", "fw.length", "fw.obs", *steps, *final, "fw.log"]
    for peer, tag, payload in result.views["alice"]:
        assert peer == "bob"
        if tag == "fw.spec":
            assert isinstance(payload, dict)
            # public sizes and the public topology only
            assert set(payload) == {"kind", "width", "states", "topology"}
            assert all(isinstance(v, int) for v in payload["states"])
        else:
            assert isinstance(payload, CipherArray) and payload.public_key.n == pk.n


def _spec(models, key_bits=1024, params=DEFAULT):
    return forward.ForwardSpec.for_models(models, key_bits, params)


def _emission_blinds(result, private_key, true_logs, spec):
    """Decrypted, unpacked fw.emit (one message, frames packed in slots) minus the true
    log b_j(x_t) (+ log pi_j at t = 1)."""
    (emits,) = [p for _, tag, p in result.views["alice"] if tag == "fw.emit"]
    length = len(true_logs)
    assert emits.shape == (len(spec.emissions(length).groups), spec.total)  # packed slots
    seen = emissions.alice_unpack(emits.decrypt_ints(private_key), spec.emissions(length))
    blinds = []
    for t, truth in enumerate(true_logs):
        for value, true_value in zip(seen[t], truth):
            if true_value == -math.inf:  # zeros are visible to Alice (documented)
                assert PREC.decode_log(value) == -math.inf
                continue
            blinds.append(int(value) / 2.0**PREC.f - true_value)
    return np.array(blinds)


def test_views_discrete_contain_only_keys_spec_and_ciphertexts(keypair_1024):
    pk, sk = keypair_1024
    rng = np.random.default_rng(400)
    models = [left_to_right_with_zeros(), random_discrete(rng, 4, 4)]
    obs, _ = models[0].sample(15, rng)
    two = forward.ForwardParams(streams=2)  # two models in two interleaved streams
    result = run_forward(keypair_1024, models, obs, two, record_views=True)
    _assert_views(result, pk, len(obs), streams=2)
    log_start = np.concatenate([m.log_startprob for m in models])
    truth = [
        np.concatenate([m.log_emissionprob[:, x] for m in models]) + (log_start if t == 0 else 0.0)
        for t, x in enumerate(obs)
    ]
    blinds = _emission_blinds(result, sk, truth, _spec(models, params=two))
    assert len(blinds) > 50
    # in [0, blind_nats): the blind is there and within the documented range ...
    assert blinds.min() >= -1e-12 and blinds.max() < PREC.blind_nats
    # ... and really random over that range (P(max < R/2 or min > R/2) ~ 2^-50)
    assert blinds.max() > PREC.blind_nats / 2 > blinds.min()
    assert len(np.unique(np.round(blinds, 6))) == len(blinds)


def test_views_gaussian_contain_only_keys_spec_and_ciphertexts(keypair_1024):
    pk, sk = keypair_1024
    rng = np.random.default_rng(401)
    model = random_gaussian(rng, 3, 2, "full")
    obs, _ = model.sample(10, rng)
    result = run_forward(keypair_1024, [model], obs, record_views=True)
    _assert_views(result, pk, len(obs))
    log_b = model.log_emission(obs)
    truth = [log_b[t] + (model.log_startprob if t == 0 else 0.0) for t in range(len(obs))]
    blinds = _emission_blinds(result, sk, truth, _spec([model]))
    # fixed-point features and weights: the emission itself is exact to ~1e-8
    assert blinds.min() >= -1e-6 and blinds.max() < PREC.blind_nats + 1e-6
    assert blinds.max() > PREC.blind_nats / 2 > blinds.min()


# -- streams: the models' rounds interleaved ---------------------------------------------------


def test_streams_interleave_in_a_public_order_and_give_the_same_log_p(keypair_1024):
    """Three models in 1, 2, 3 and 5 streams (at most one a model): the same log P as
    plaintext every time, and Bob receives every stream's values for a step in stream
    order before the next step's (the order follows from the public sizes alone)."""
    rng = np.random.default_rng(450)
    models = [random_discrete(rng, n, 3) for n in (2, 3, 2)]
    obs, _ = models[0].sample(5, rng)
    for streams in (1, 2, 3, 5):
        params = forward.ForwardParams(streams=streams)
        result = run_forward(keypair_1024, models, obs, params, record_views=True)
        check_against_plaintext(result, models, obs, keypair_1024[1])
        count = min(streams, len(models))
        spec = _spec(models, params=params)
        assert [st.models for st in spec.streams] == [
            slice(i * 3 // count, (i + 1) * 3 // count) for i in range(count)
        ]
        tags = [t for _, t, _ in result.views["bob"] if ".edges." in t]
        expected = [f"fw.step.edges.{i}" for _ in range(len(obs) - 1) for i in range(count)]
        assert tags == expected + [f"fw.final.edges.{i}" for i in range(count)]


def test_streams_parameter_is_checked_and_read_from_config():
    for bad in (0, -1, 9, 1.5, True, "2"):
        with pytest.raises(InvalidInputError, match="streams"):
            forward.ForwardParams(streams=bad)
    assert forward.ForwardParams.from_config({"streams": 3}).streams == 3
    assert forward.ForwardParams.from_config({}).streams == 1
    v1 = _spec([left_to_right_with_zeros()] * 2, params=forward.ForwardParams(recursion="v1"))
    assert len(v1.streams) == 1  # v1 runs one stream


# -- 6. cost report --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["discrete", "gaussian"])
def test_cost_report_matches_the_message_flow(keypair_1024, kind):
    rng = np.random.default_rng(500)
    if kind == "discrete":
        models = [random_discrete(rng, n, 4) for n in (2, 3)]
        width = 4  # one-hot row per frame
    else:
        models = [random_gaussian(rng, n, 2, "diag") for n in (2, 3)]
        width = 2 * 2  # diagonal models: x_i and x_i^2 only (kind gaussian-diag)
    obs, _ = models[0].sample(6, rng)
    n_steps, k, n = len(obs), len(models), sum(m.n_states for m in models)
    two = forward.ForwardParams(streams=2)  # the interleaved streams' accounting
    result = run_forward(keypair_1024, models, obs, two)
    report = result.cost.to_dict()
    alice, bob = report["parties"]["alice"], report["parties"]["bob"]
    spec = _spec(models, params=two)
    streams = len(spec.streams)
    assert streams == 2
    # Alice: key, length, packed observations, per stream one E(V) per step, E(log S + C)
    assert alice["messages"]["sent"] == 4 + streams * n_steps
    # Bob: spec, packed emissions, per stream one LOGSUM per step but the last and the
    # final sum, result
    assert bob["messages"]["sent"] == streams * n_steps + 3
    assert alice["messages"]["recv"] == bob["messages"]["sent"]
    assert report["totals"]["messages"] == 2 * streams * n_steps + 7
    # the streams' rounds run side by side: they add messages, not rounds
    assert report["totals"]["rounds"] == result.cost.rounds == 2 * n_steps + 6
    # Bob holds no private key: he never decrypts (nor encrypts: he only adds / multiplies)
    assert bob["ops"]["decrypt"] == 0 and bob["ops"]["encrypt"] == 0
    groups = len(spec.emissions(n_steps).groups)  # frames packed into slots
    plans = [st.spec.steps for st in spec.streams]  # the recursion packs targets into slots
    step_cts = sum(step.ciphertexts for step, _ in plans)
    assert groups < n_steps and step_cts < n
    assert alice["ops"]["decrypt"] == (
        groups * n + (n_steps - 1) * step_cts + sum(f.ciphertexts for _, f in plans) + k
    )
    step_edges = sum(step.edges for step, _ in plans)
    assert alice["ops"]["encrypt"] == groups * width + (n_steps - 1) * step_edges + n + k
    assert bob["ops"]["ot"] == (n_steps if kind == "discrete" else 0)
    edges = sum(int((m.transmat > 0).sum()) for m in models)  # the public topology
    assert step_edges == edges
    assert bob["ops"]["multiexp_terms"] == groups * n * width + (n_steps - 1) * edges + n
    assert alice["key_bits"] == bob["key_bits"] == 1024
    assert "forward recursion" in alice["phases"] and "forward recursion" in bob["phases"]
    assert "alice" in result.cost.to_text()


# -- key capacity ----------------------------------------------------------------------------


def test_too_small_key_raises_precision_error_promptly(keypair_512):
    params = forward.ForwardParams(PrecisionParams(exp_scale=400), recursion="v1")
    model = random_discrete(np.random.default_rng(600), 2, 3)
    with pytest.raises(PrecisionError, match="512-bit key"):
        run_forward(keypair_512, [model], np.array([0, 1, 2]), params, timeout=10)


def test_the_same_params_fit_a_1024_bit_key(keypair_1024):
    params = forward.ForwardParams(PrecisionParams(exp_scale=400), recursion="v1")
    model = random_discrete(np.random.default_rng(600), 2, 3)
    obs = np.array([0, 1, 2])
    result = run_forward(keypair_1024, [model], obs, params)
    check_against_plaintext(result, [model], obs, keypair_1024[1])


# -- dominance flips ------------------------------------------------------------------------
#
# Alice's secure exponent uses ONE shift per model (her max), so a state far
# below the leading one must keep its significant bits: V_l = 2^(g+k) e^r with g
# as large as the key allows keeps 53 bits down to ~ g ln 2 nats (about 500 nats
# at 1024 bits).  These cases have a state ~140 nats behind that later dominates.


def _dominance_flip_cases():
    # discrete: state 0 starts at 1e-60 and is the only state that can emit symbol 1
    discrete = DiscreteHMM(
        startprob=[1e-60, 1 - 1e-60], transmat=np.eye(2), emissionprob=[[0.5, 0.5], [1.0, 0.0]]
    )
    # Gaussian left-to-right: 10 frames favour state 1, then 20 frames favour state 0,
    # so the path that stays in state 0 (suppressed by e^-125 after 10 frames) wins
    gaussian = GaussianHMM(
        startprob=[1.0, 0.0],
        transmat=[[0.5, 0.5], [0.0, 1.0]],
        means=[[0.0], [5.0]],
        covars=[[1.0], [1.0]],
    )
    return [
        pytest.param(discrete, np.array([0, 1]), id="discrete-1e-60"),
        pytest.param(gaussian, np.array([[5.0]] * 10 + [[0.0]] * 20), id="gaussian-l2r"),
    ]


@pytest.mark.parametrize("model, obs", _dominance_flip_cases())
def test_a_suppressed_state_that_becomes_dominant_is_exact(keypair_1024, model, obs):
    result = run_forward(keypair_1024, [model], obs)
    assert rel_err(result.outputs["alice"][0], log_likelihood(model, obs)) <= REL_TOL


@pytest.mark.parametrize("model, obs", _dominance_flip_cases())
def test_larger_exp_scale_handles_a_suppressed_state(keypair_1024, model, obs):
    params = forward.ForwardParams(PrecisionParams(exp_scale=400), recursion="v1")
    result = run_forward(keypair_1024, [model], obs, params)
    check_against_plaintext(result, [model], obs, keypair_1024[1], use_hmmlearn=False)


# Gaussian emissions are evaluated as z^T W z with Alice's products at 2^-feature_scale
# and Bob's weights at 2^-(log_scale - feature_scale): the absolute error of one
# emission grows like |x|^2 2^-(weight bits + 1).  The defaults (48 + 40 bits) keep
# unnormalised features of magnitude ~5e3 within the 1e-6 bound.


def _large_feature_model():
    rng = np.random.default_rng(700)
    model = GaussianHMM(
        startprob=rng.dirichlet(np.ones(3)),
        transmat=rng.dirichlet(np.ones(3), size=3),
        means=rng.normal(scale=5000.0, size=(3, 5)),
        covars=rng.uniform(0.5, 2.0, size=(3, 5)),
    )
    return model, model.sample(10, rng)[0]


def test_gaussian_features_beyond_the_public_bound_are_refused(keypair_1024):
    model, obs = _large_feature_model()
    with pytest.raises(InvalidInputError, match="feature_bound"):
        run_forward(keypair_1024, [model], obs)


def test_gaussian_large_features_with_finer_scales(keypair_1024):
    model, obs = _large_feature_model()
    assert np.abs(obs).max() > 1000
    params = forward.ForwardParams(
        PrecisionParams(log_scale=96, log_bound_bits=46), feature_scale=32, feature_bound=2e4
    )
    result = run_forward(keypair_1024, [model], obs, params)
    plain = log_likelihood(model, obs)
    # means ~5000: the quadratic form's float64 weights carry terms ~1e8 that cancel to
    # ~10 nats, so the form itself (not the protocol) is good to ~1e-8 relative here
    assert rel_err(result.outputs["alice"][0], plain) <= 1e-6
    enc = result.outputs["bob"]
    assert enc.scale == 96
    bob = params.precision.decode_log(enc.decrypt_ints(keypair_1024[1])[0])
    assert rel_err(bob, plain) <= 1e-6


# -- the metadata rule: frames do not depend on Alice's sequence or Bob's models -------------


def _transcript_case(kind, seed, n_states=(2, 3), length=6):
    rng = np.random.default_rng(seed)
    if kind == "discrete":
        models = [random_discrete(rng, n, 4) for n in n_states]
        obs = rng.integers(0, 4, size=length)
    else:
        cov = "diag" if kind == "gaussian-diag" else "full"
        models = [random_gaussian(rng, n, 2, cov) for n in n_states]
        obs = rng.normal(0.0, 3.0, size=(length, 2))
    return models, obs


@pytest.mark.parametrize("kind", ["discrete", "gaussian", "gaussian-diag"])
@pytest.mark.parametrize("sizes", [((2, 3), 6, 1), ((2, 3), 6, 2), ((1,), 3, 1), ((4,), 9, 1)])
def test_transcripts_do_not_depend_on_private_inputs(keypair_1024, kind, sizes):
    from transcript_harness import assert_same_transcripts

    n_states, length, streams = sizes
    params = forward.ForwardParams(streams=streams)
    cases = [_transcript_case(kind, seed, n_states, length) for seed in (1, 2)]

    def run(case, wrap):
        models, obs = case
        simulate(
            {
                "alice": lambda ctx: forward.alice(ctx, obs, params),
                "bob": lambda ctx: forward.bob(ctx, models, params),
            },
            keys={"alice": keypair_1024},
            wrap_transport=wrap,
            min_key_bits=512,
        )

    spec = forward.ForwardSpec.for_models(cases[0][0], 1024, params)
    frames = assert_same_transcripts(
        run, cases, spec.messages(length).values(), keys=[keypair_1024]
    )
    # spec, emissions, per stream (one a model at most) the sums and the final, result
    assert len(spec.streams) == min(streams, len(n_states))
    assert len(frames[("alice", "bob")]) == len(spec.streams) * length + 3


# -- precision regressions (exact offsets, public scales, no silent -inf) ---------------------


def _drifting_model():
    """A = I: state 1 falls 6.9 nats behind per step on symbol 0, then alone emits symbol 2."""
    return DiscreteHMM([0.5, 0.5], np.eye(2), [[0.99, 0.01, 0.0], [0.001, 0.001, 0.998]])


@pytest.mark.parametrize("bits, length", [(512, 40), (1024, 101)])
def test_v1_refuses_a_possible_sequence_beyond_its_exponent_range(
    bits, length, keypair_512, keypair_1024
):
    keypair = keypair_512 if bits == 512 else keypair_1024
    model, obs = _drifting_model(), np.array([0] * (length - 1) + [2])
    assert np.isfinite(log_likelihood(model, obs))  # possible: hmmlearn gives a finite score
    with pytest.raises(PrecisionError, match=f"{bits}-bit key"):
        run_forward(keypair, [model], obs, V1)


@pytest.mark.parametrize("bits, length", [(512, 40), (1024, 101), (512, 400)])
def test_v2_scores_the_same_drift_exactly(bits, length, keypair_512, keypair_1024):
    """Per-target normalisation: a state far behind its model's leader keeps its own
    precision, so the sequence v1 refuses is exact (no refusal at any length)."""
    keypair = keypair_512 if bits == 512 else keypair_1024
    model, obs = _drifting_model(), np.array([0] * (length - 1) + [2])
    plain = log_likelihood(model, obs)
    result = run_forward(keypair, [model], obs)
    assert abs(result.outputs["alice"][0] - plain) <= 1e-9 * abs(plain)


def test_the_same_drift_within_range_is_exact(keypair_1024):
    model, obs = _drifting_model(), np.array([0] * 60 + [2])
    plain = log_likelihood(model, obs)
    result = run_forward(keypair_1024, [model], obs)
    assert abs(result.outputs["alice"][0] - plain) <= 1e-9 * abs(plain)
    assert abs(hmmlearn_score(model, obs) - plain) <= 1e-9 * abs(plain)


def test_impossible_sequences_still_score_minus_infinity(keypair_1024):
    model = DiscreteHMM([1.0, 0.0], np.eye(2), [[1.0, 0.0], [0.0, 1.0]])
    result = run_forward(keypair_1024, [model], np.array([0, 0, 1]))
    assert result.outputs["alice"] == [-math.inf]
    assert bob_log_p(result, keypair_1024[1]) == [-math.inf]


def test_huge_log_densities_are_exact_not_minus_infinity(keypair_1024):
    """Features ~3e5 give log P ~ -6.6e11: within a raised public log bound, exact."""
    model = GaussianHMM([1.0], [[1.0]], [[0.0]], [[0.07]])
    obs = np.array([[3.0e5], [-2.0e5]])
    plain = log_likelihood(model, obs)
    assert plain < -5e11
    params = forward.ForwardParams(PrecisionParams(log_bound_bits=44), feature_bound=1e6)
    result = run_forward(keypair_1024, [model], obs, params)
    assert abs(result.outputs["alice"][0] - plain) <= 1e-9 * abs(plain)


def test_near_deterministic_model_is_exact_in_absolute_terms(keypair_1024):
    """log P ~ -1e-6: the old float offsets gave 2.5e-4 relative error; now < 1e-9 absolute."""
    eps = 1e-9
    model = DiscreteHMM([1.0, 0.0], [[1 - eps, eps], [eps, 1 - eps]], [[1.0, 0.0], [0.0, 1.0]])
    obs = np.zeros(1000, dtype=int)
    plain = log_likelihood(model, obs)
    assert -2e-6 < plain < -5e-7
    result = run_forward(keypair_1024, [model], obs)
    assert abs(result.outputs["alice"][0] - plain) <= 1e-9


def test_tiny_transitions_below_the_public_weight_floor_are_refused(keypair_1024):
    model = DiscreteHMM([0.5, 0.5], [[1 - 1e-30, 1e-30], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(PrecisionError, match="weight floor"):
        run_forward(keypair_1024, [model], np.array([0, 1]))
    params = forward.ForwardParams(PrecisionParams(weight_floor_bits=110))
    result = run_forward(keypair_1024, [model], np.array([0, 1]), params)
    assert abs(result.outputs["alice"][0] - log_likelihood(model, np.array([0, 1]))) < 1e-12


def test_a_peer_key_below_the_minimum_is_refused(keypair_1024):
    from smc_hmm.errors import InsecurePeerKeyError

    model = random_discrete(np.random.default_rng(1), 2, 2)
    with pytest.raises(InsecurePeerKeyError, match="1024-bit key"):
        simulate(
            {
                "alice": lambda ctx: forward.alice(ctx, np.array([0])),
                "bob": lambda ctx: forward.bob(ctx, [model]),
            },
            keys={"alice": keypair_1024},
        )


def test_documented_leak_alice_recovers_transition_ratios_from_a_logsum(keypair_1024):
    """docs/security.md: the thesis's multiplicative blinding of a LOGSUM does not hide
    Bob's weights from the party who chose the V_l.  With two states, one modular
    inversion gives the coefficients beta_j w_lj; across two columns the blinds cancel
    and Alice reads a_00 a_11 / (a_10 a_01) exactly.  This characterises the limitation
    (it will fail, as it should, once the LOGSUM hides its coefficients)."""
    a = np.array([[0.7, 0.3], [0.2, 0.8]])
    model = DiscreteHMM([0.6, 0.4], a, [[0.5, 0.5], [0.1, 0.9]])
    result = run_forward(keypair_1024, [model], np.array([0, 1, 1]), V1, record_views=True)
    sk = keypair_1024[1]
    v = [int(x) for x in next(p for _, t, p in result.views["bob"] if t == "fw.v").decrypt_ints(sk)]
    sums = next(p for _, t, p in result.views["alice"] if t == "fw.s").decrypt_ints(sk)
    g = math.gcd(v[0], v[1])
    ratios = []
    for p_j in (int(x) for x in sums):
        x0 = (p_j // g) * pow(v[0] // g, -1, v[1] // g) % (v[1] // g)
        x1 = (p_j - x0 * v[0]) // v[1]
        ratios.append(x0 / x1)
    assert ratios[0] / ratios[1] == pytest.approx(
        a[0, 0] * a[1, 1] / (a[1, 0] * a[0, 1]), rel=1e-12
    )


def test_diagonal_models_send_only_x_and_x_squared(keypair_1024):
    """All-diagonal models: Alice encrypts 2d values per frame (the structure is public)."""
    rng = np.random.default_rng(900)
    diag = random_gaussian(rng, 3, 4, "diag")
    full = random_gaussian(rng, 2, 4, "full")
    assert forward_scoring._ModelBatch.of([diag]).kind == emissions.DIAG
    assert forward_scoring._ModelBatch.of([diag, full]).kind == "gaussian"  # mixed: full products
    obs, _ = diag.sample(8, rng)
    result = run_forward(keypair_1024, [diag], obs, record_views=True)
    check_against_plaintext(result, [diag], obs, keypair_1024[1])
    (enc_obs,) = [p for _, t, p in result.views["bob"] if t == "fw.obs"]
    groups = len(_spec([diag]).emissions(8).groups)  # frames packed into slots
    assert enc_obs.shape == (groups, 2 * 4) and groups < 8


def _recovering_model(rng):
    """States 0 and 1 explain symbol 0; the isolated state 2 (A[2, 2] = 1) emits it with
    probability 1e-6..1e-2, so it falls 5-14 nats behind per step, and it alone emits
    symbol 2: a tail of 2s makes the dropped state the only possible one."""
    stay = rng.uniform(0.5, 0.99)
    a = np.array([[stay, 1 - stay, 0.0], [1 - stay, stay, 0.0], [0.0, 0.0, 1.0]])
    b = np.array([[0.9, 0.1, 0.0], [0.6, 0.4, 0.0], [10 ** rng.uniform(-6, -2), 0.1, 0.5]])
    b /= b.sum(axis=1, keepdims=True)
    return DiscreteHMM(rng.dirichlet(np.ones(3)), a, b)


def test_v1_dropped_mass_bound_never_lets_an_inexact_score_through(keypair_512):
    """v1 at 512 bits: the exponent carries few nats, state 2 drops in most runs.  Every
    run either raises PrecisionError or is exact, and both outcomes occur."""
    rng = np.random.default_rng(2026)
    outcomes = {"exact": 0, "refused": 0}
    for _ in range(14):
        model = _recovering_model(rng)
        tail = [int(rng.choice([1, 2]))] * int(rng.integers(1, 4))
        obs = np.array([0] * int(rng.integers(5, 60)) + tail)
        plain = log_likelihood(model, obs)
        try:
            result = run_forward(keypair_512, [model], obs, V1)
        except PrecisionError:
            outcomes["refused"] += 1
            continue
        assert abs(result.outputs["alice"][0] - plain) <= 1e-9 * abs(plain)
        outcomes["exact"] += 1
    assert outcomes["exact"] > 0 and outcomes["refused"] > 0, outcomes


def test_v2_never_refuses_the_models_v1_refuses(keypair_512):
    """The same 14 recovering models at 512 bits: every run of the v2 recursion is exact."""
    rng = np.random.default_rng(2026)
    for _ in range(14):
        model = _recovering_model(rng)
        tail = [int(rng.choice([1, 2]))] * int(rng.integers(1, 4))
        obs = np.array([0] * int(rng.integers(5, 60)) + tail)
        plain = log_likelihood(model, obs)
        result = run_forward(keypair_512, [model], obs)
        assert abs(result.outputs["alice"][0] - plain) <= 1e-9 * abs(plain)


def test_v2_hides_the_transition_ratio_from_the_v1_attack(keypair_1024):
    """The v1 attack through a whole protocol run: one modular inversion per target and
    the ratio of two targets' coefficient ratios, which in v1 is a_00 a_11 / (a_10 a_01)
    exactly (test_documented_leak_...).  Against v2 it never is."""
    a = np.array([[0.7, 0.3], [0.2, 0.8]])
    model = DiscreteHMM([0.6, 0.4], a, [[0.5, 0.5], [0.1, 0.9]])
    truth = a[0, 0] * a[1, 1] / (a[1, 0] * a[0, 1])
    sk = keypair_1024[1]
    step, _ = _spec([model]).steps
    for obs in ([0, 1, 1], [1, 1, 0], [0, 0, 1]):
        result = run_forward(keypair_1024, [model], np.array(obs), record_views=True)
        edges = next(p for _, t, p in result.views["bob"] if t == "fw.step.edges.0")
        packed = next(p for _, t, p in result.views["alice"] if t == "fw.step.packed.0")
        values = [int(x) for x in edges.decrypt_ints(sk)]
        slots = [
            (int(p) >> (k * step.slot_bits)) & ((1 << step.slot_bits) - 1)
            for p in packed.decrypt_ints(sk)
            for k in range(step.slots)
        ]
        starts = np.cumsum([0, *(len(p) for p in step.preds)])
        ratios = []
        for j in range(2):
            lift = (j % step.slots) * step.slot_bits
            v0, v1 = (values[starts[j] + i] >> lift for i in range(2))
            g = math.gcd(v0, v1)
            x0 = (slots[j] // g) * pow(v0 // g, -1, v1 // g) % (v1 // g)
            x1 = (slots[j] - x0 * v0) // v1
            ratios.append(x0 / x1 if x1 else math.inf)
        assert ratios[0] / ratios[1] != pytest.approx(truth, rel=1e-3)


def test_an_offline_phase_precomputes_every_randomizer(keypair_1024):
    """Pools filled from the public sizes alone (randomizers_needed) cover the whole run:
    online, Alice encrypts and Bob re-randomises without computing one r^n."""
    from party_support import exact_offline_pools

    rng = np.random.default_rng(77)
    models = [random_gaussian(rng, n, 2, "diag") for n in (2, 3)]
    obs, _ = models[0].sample(9, rng)
    pk, sk = keypair_1024
    with exact_offline_pools(pk, _spec(models).randomizers_needed(len(obs))) as randomizers:
        result = simulate(
            {"alice": forward.alice, "bob": forward.bob},
            args={"alice": (obs,), "bob": (models,)},
            keys={"alice": (pk, sk)},
            randomizers=randomizers,
            min_key_bits=512,
        )
    check_against_plaintext(result, models, obs, sk)


def _odd(v: int) -> int:
    return v >> ((v & -v).bit_length() - 1) if v else 0


def test_chosen_frames_do_not_give_a_transition_probability(keypair_1024):
    """The held-out keyword attack through whole runs: Alice picks frames where one state
    wins by thousands of nats (0 and +-100 e_i, each twice), so most targets have a
    single live predecessor whose value is exactly 2^g; over three sessions she reads
    every slot's coefficient above the noise and looks for a float times a power of two
    (a run of zero bits) and for a common odd factor (the gcd).  Neither appears, and no
    transition probability's mantissa divides what she reads (protocols.stages.logsum;
    the same attack on the old coefficients succeeds in tests/protocols/test_stages.py)."""
    a = np.array([[0.6, 0.4, 0.0], [0.0, 0.7, 0.3], [0.0, 0.0, 1.0]])
    model = GaussianHMM(
        [1.0, 0.0, 0.0], a, means=[[0.0, 0.0], [3.0, -1.0], [-2.0, 4.0]], covars=[[1.0, 1.0]] * 3
    )
    frames = [np.zeros(2), *(100 * np.eye(2)), *(-100 * np.eye(2))]
    obs = np.repeat(np.array(frames), 2, axis=0)
    spec = _spec([model])
    step, _ = spec.steps
    sk = keypair_1024[1]
    mantissas = {_odd(int(math.frexp(float(v))[0] * 2**53)) for v in a[a > 0] if v < 1}
    single, tops = 0, {}
    for _session in range(3):
        result = run_forward(keypair_1024, [model], obs, record_views=True)
        check_against_plaintext(result, [model], obs, sk, use_hmmlearn=False)
        edges = [p for _, t, p in result.views["bob"] if t == "fw.step.edges.0"]
        replies = [p for _, t, p in result.views["alice"] if t == "fw.step.packed.0"]
        starts = np.cumsum([0, *(len(p) for p in step.preds)])
        for t, (sent, reply) in enumerate(zip(edges, replies)):
            values = [int(v) for v in sent.decrypt_ints(sk)]
            packed = [int(p) for p in reply.decrypt_ints(sk)]
            for j, preds in enumerate(step.preds):
                lift = (j % step.slots) * step.slot_bits
                v = [values[starts[j] + i] >> lift for i in range(len(preds))]
                live = [x for x in v if x]
                if len(live) != 1 or live[0] != 1 << step.g:
                    continue  # the attack's case: one live predecessor at exactly 2^g
                single += 1
                slot = (packed[j // step.slots] >> lift) & ((1 << step.slot_bits) - 1)
                top = (slot >> step.g) >> (step.noise_bits - step.g + 1)
                assert (top & -top).bit_length() - 1 < 24  # no float-times-power-of-two
                assert not any(_odd(top) % m == 0 for m in mantissas if m > 1)
                tops.setdefault((t, j), []).append(_odd(top))
    assert single >= 10  # the case the attack needs occurred, many times
    for seen in tops.values():
        if len(seen) == 3:
            g = math.gcd(*seen)
            assert g.bit_length() < 40 and not any(g % m == 0 for m in mantissas if m > 1)
