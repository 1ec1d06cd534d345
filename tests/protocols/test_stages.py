"""The secure stages (protocols/stages): exactness, and the attacks a client who chooses
its inputs would run on what it decrypts (docs/security.md, "Chosen inputs").

Every attack is first run against a control that has the structure the held-out review
exploited (Bob's old coefficients beta * round(2^h a) with an integer beta, exact sums,
uniform blinds), so the test shows the attack is real, then against the stage, where it
must fail.  No case is skipped: the single live element, the leader at exactly 2^g and
the smallest blind are the cases these tests are about.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from protocols.stages import blinds, logsum
from protocols.stages.primitives import PrecisionParams
from smc_hmm.crypto.rng import Rng

PREC = PrecisionParams()


def _plan(preds, key_bits=1024):
    return logsum.LogsumPlan.build(preds, PREC.logsum, key_bits)


def _run_stage(keypair, plan, u, weights, rho, refs, seed):
    """One LOGSUM round: Alice's values, Bob's coefficients and sums, Alice's logs."""
    pk, sk = keypair
    values, shifts = logsum.alice_values(u, plan, PREC)
    enc = logsum.alice_encrypt(pk, values, plan)
    rng = Rng.seeded(seed)
    coefs, new_blinds = logsum.bob_coefficients(rng, plan, weights, rho, refs, PREC.f)
    packed = logsum.bob_sums(enc, plan, coefs, rng)
    decrypted = packed.decrypt_ints(sk)
    logs = logsum.alice_logs(decrypted, plan, shifts, PREC)
    slots = [
        (int(p) >> (k * plan.slot_bits)) & ((1 << plan.slot_bits) - 1)
        for p in decrypted
        for k in range(plan.slots)
    ]
    return logs, new_blinds, slots[: plan.targets], coefs, values


def test_the_stage_computes_the_blinded_logsum(keypair_1024):
    rng = np.random.default_rng(3)
    preds = [[0, 1], [1, 2], [0, 1, 2], [2]]
    plan = _plan(preds)
    x = rng.normal(scale=30, size=3)  # the hidden log-values
    rho = [int(v) for v in blinds.log_blinds(Rng.seeded(1), 3, PREC.blind_nats, PREC.f)]
    u = [PREC.encode_log(float(v)) + r for v, r in zip(x, rho)]
    weights = [rng.uniform(1e-9, 1, size=len(p)).tolist() for p in preds]
    refs = [min(rho)] * len(preds)
    logs, new_blinds, *_ = _run_stage(keypair_1024, plan, u, weights, rho, refs, 9)
    for j, p in enumerate(preds):
        plain = float(np.log(sum(w * math.exp(x[e]) for w, e in zip(weights[j], p))))
        got = (logs[j] - new_blinds[j]) / 2**PREC.f
        assert got == pytest.approx(plain, rel=2**-40, abs=1e-12)


def test_a_target_whose_elements_are_all_log_zero_is_log_zero(keypair_1024):
    plan = _plan([[0], [0, 1]])
    u = [PREC.log_zero, 0]
    logs, *_ = _run_stage(keypair_1024, plan, u, [[0.5], [0.5, 0.5]], [0, 0], [0, 0], 2)
    assert PREC.is_log_zero(logs[0]) and not PREC.is_log_zero(logs[1])


# -- the held-out keyword attack: one live predecessor, the leader at 2^g --------------------


def _trailing_zeros(v: int) -> int:
    return (v & -v).bit_length() - 1 if v else 0


def _single_live_attack(slots, plan) -> list[int]:
    """The review's attack: with one live predecessor at V = 2^g, slot >> g is the
    coefficient up to the noise; above the noise, a coefficient a 2^h beta with a float a
    shows a long run of zero bits, and the odd part beta * mantissa(a) follows."""
    above = plan.noise_bits - plan.g + 1  # bits of (slot >> g) the noise can touch
    out = []
    for s in slots:
        top = (s >> plan.g) >> above
        out.append(top >> _trailing_zeros(top))
    return out


def _old_coefficients(a: float, sessions: int, seed: int) -> list[int]:
    """The construction the review broke: w = round(2^144 a) at the smallest blind (exact:
    a float times a power of two), times an integer beta log-uniform on [2^48, 2^77)."""
    from protocols.stages.primitives import log_uniform_integer

    rng = Rng.seeded(seed)
    w = int(a * 2**144)
    return [w * log_uniform_integer(rng, 48, 29) for _ in range(sessions)]


def test_single_live_predecessor_does_not_give_the_transition_probability(keypair_1024):
    a = 0.123456789  # the secret transition probability, a float
    mantissa, _ = math.frexp(a)
    odd = int(mantissa * 2**53)
    odd >>= _trailing_zeros(odd)
    # control: the old coefficients fall to the attack (the gcd over sessions is a's odd
    # mantissa times a small factor, and the mantissa divides every one of them)
    old = _old_coefficients(a, 3, 11)
    tops = [c >> _trailing_zeros(c) for c in old]
    assert all(t % odd == 0 for t in tops)
    assert math.gcd(*tops) % odd == 0
    # the stage: element 0 alone and at the smallest blind, the leader at exactly 2^g
    plan = _plan([[0, 1]])
    tops, zeros = [], []
    for session in range(6):
        logs, _, slots, coefs, values = _run_stage(
            keypair_1024, plan, [0, PREC.log_zero], [[a, 0.5]], [0, 0], [0], 100 + session
        )
        assert values[0] == 1 << plan.g  # the case the attack targets is really here
        (top,) = _single_live_attack(slots, plan)
        tops.append(top)
        zeros.append(_trailing_zeros(coefs[0][0]))
        assert top % odd != 0
    assert max(zeros) < 24  # no float-times-power-of-two structure in a coefficient
    g = math.gcd(*tops)
    assert g % odd != 0 and g.bit_length() < 40


# -- two live predecessors: residues modulo Alice's own values --------------------------------


def _residue_attack(slot: int, v_lead: int, v_other: int) -> tuple[int, int]:
    """S = c_lead v_lead + c_other v_other: modulo the leader's value, c_other = S v_other^-1."""
    g = math.gcd(v_lead, v_other)
    modulus = v_lead // g
    return (slot // g) * pow(v_other // g, -1, modulus) % modulus, modulus


def test_the_noise_hides_residues_modulo_alices_values(keypair_1024):
    plan = _plan([[0, 1]])
    recovered = 0
    for trial in range(8):
        u = [0, -(trial + 1) << (PREC.f - 1)]  # both live, the leader at 2^g
        _, _, slots, coefs, values = _run_stage(
            keypair_1024, plan, u, [[0.3, 0.7]], [0, 0], [0], trial
        )
        exact = coefs[0][0] * values[0] + coefs[0][1] * values[1]
        guess, modulus = _residue_attack(exact, values[0], values[1])
        assert guess == coefs[0][1] % modulus  # the attack works on the exact sum
        assert slots[0] >= exact and slots[0] - exact < 1 << plan.noise_bits
        guess, modulus = _residue_attack(slots[0], values[0], values[1])
        recovered += guess == coefs[0][1] % modulus
    assert recovered == 0


# -- blinds: no arithmetic structure, smooth density -------------------------------------------


def _integer_behind_log(value: int, scale: int) -> int | None:
    """The sparse-set test: the integer k with round(2^scale ln k) == value, if any (one
    revealed value then decides k, and with it everything the blind hid)."""
    import gmpy2

    from protocols.stages.fixedlog import log_fixed, round_mpfr

    ctx = gmpy2.context(precision=scale + 128)
    k = round_mpfr(ctx.exp(ctx.div(gmpy2.mpz(value), gmpy2.mpz(1) << scale)))
    return k if k > 0 and log_fixed(k, scale) == value else None


def test_blinds_are_not_rounded_logs_of_bounded_integers():
    """The held-out speaker attack: Alice decrypted Q(x) - round(2^80 ln k) with k an
    integer in [2^32, 2^61); the rounded logs of bounded integers form a sparse set, so
    within a block of identical frames every difference named its k's ratio.  The
    control shows the old blinds are such logs (each names its k); the stage's blinds,
    sums of uniform integers at scale f, are not."""
    from protocols.stages.primitives import log_fixed, log_uniform_integer

    f, rng = 80, Rng.seeded(5)
    ks = [log_uniform_integer(rng, 32, 29) for _ in range(6)]
    assert [_integer_behind_log(log_fixed(k, f), f) for k in ks] == ks
    new = [int(v) for v in blinds.log_blinds(rng, 200, 20.0, f)]
    assert not any(_integer_behind_log(v, f) for v in new)


def test_fisher_information_of_the_blind():
    assert pytest.approx(blinds._irwin_hall_fisher() * 9, rel=1e-9) == blinds.FISHER_CONSTANT
    assert blinds.estimation_floor(20.0, 1) == pytest.approx(20 / math.sqrt(41.0587), rel=1e-4)
    assert blinds.samples_for_error(20.0, 1.0) == math.floor(400 / blinds.FISHER_CONSTANT)


def _estimator_rmse(draw, k: int, trials: int, rng) -> float:
    """Root-mean-square error of the best simple estimator of a value hidden by k draws:
    the mean for a smooth blind (efficient to within a few percent here)."""
    errors = [np.mean(draw(k)) - 10.0 for _ in range(trials)]  # blind mean R / 2 = 10
    return float(np.sqrt(np.mean(np.square(errors))))


@pytest.mark.parametrize("k", [4, 16, 64, 256])
def test_the_estimator_attack_stays_at_the_cramer_rao_floor(k):
    """A client repeats one input k times (one session or many: the blinds are
    independent either way) and estimates the hidden value.  With the smooth blind the
    error follows R / (6.4 sqrt(k)), never the R / k that a uniform blind's sharp edges
    give (the docs' table, scripts/blind_leakage.py)."""
    rng = Rng.seeded(k)
    top = blinds.blind_top(20.0, 16)

    def smooth(count):
        return [blinds.smooth_blind(rng, top) / 2**16 for _ in range(count)]

    rmse = _estimator_rmse(smooth, k, 400, rng)
    floor = blinds.estimation_floor(20.0, k)
    assert 0.85 * floor <= rmse <= 1.35 * floor
    # the uniform control: the midrange estimator beats the smooth blind's floor by far
    # once k is large (R / k against R / sqrt(k))
    gen = np.random.default_rng(k)
    mid = [(lambda s: (s.min() + s.max()) / 2 - 10)(gen.uniform(0, 20, k)) for _ in range(400)]
    uniform_rmse = float(np.sqrt(np.mean(np.square(mid))))
    if k >= 64:
        assert uniform_rmse < 0.6 * floor
