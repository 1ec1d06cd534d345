"""Two-party primitives of protocols.primitives, each run with ``simulate``.

Bob's roles start from ciphertexts under Alice's key.  In a real protocol he
has received that key earlier; here :func:`as_bob` adopts it into Bob's
context and moves his CipherArray arguments onto his metered view.  Every
primitive is checked against its plaintext result, by the transcript harness
(frames independent of the private values) and, for the blinded ones, by a
two-sample KS test on what Alice decrypts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp
from transcript_harness import assert_same_transcripts

from protocols import primitives as pr
from protocols.primitives import ExpSpec, LogSpec, LogsumSpec, MaskSpec, PrecisionParams
from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.errors import InvalidInputError, PrecisionError
from smc_hmm.runtime import simulate

PREC = PrecisionParams()


def as_bob(role):
    def run(ctx, *args):
        moved = []
        for a in args:
            if isinstance(a, CipherArray):
                a = CipherArray(ctx.adopt_key(a.public_key), a.data, a.scale, a.bound)
            moved.append(a)
        return role(ctx, *moved)

    return run


def run_pair(keypair, bob_role, bob_args, alice_role, alice_args=(), **kwargs):
    return simulate(
        {"alice": alice_role, "bob": as_bob(bob_role)},
        args={"alice": tuple(alice_args), "bob": tuple(bob_args)},
        keys={"alice": keypair},
        timeout=30,
        min_key_bits=512,
        **kwargs,
    )


def encrypt_logs(pk, logs) -> CipherArray:
    return CipherArray.encrypt_encoded(pk, [PREC.encode_log(x) for x in logs], PREC.f)


def decode_logs(enc: CipherArray, sk) -> np.ndarray:
    assert enc.scale == PREC.f
    return np.array([PREC.decode_log(v) for v in enc.decrypt_ints(sk)])


LN2_50_DIGITS = "0.69314718055994530941723212145817656807550013436026"


def test_fixed_point_log_and_exp_are_exact():
    from decimal import Decimal, getcontext

    getcontext().prec = 80
    assert pr.log_fixed(1, 96) == 0
    exact = Decimal(LN2_50_DIGITS) * 2000 * 2**96
    assert abs(Decimal(pr.log_fixed(2**2000, 96)) - exact) <= Decimal("0.5") + Decimal(1e-20)
    # exp(-ln 2) at 96 fractional bits of input: 1/2 up to the input's rounding
    assert abs(pr.exp_fixed(-pr.log_fixed(2, 96), 96, 200) - 2**199) < 2 ** (199 - 90)
    assert pr.exp_fixed(-(10_000 << 96), 96, 200) == 0
    with pytest.raises(InvalidInputError):
        pr.exp_fixed(1, 96, 10)


def test_log_uniform_blinds_are_integers_with_log_uniform_law():
    rng = Rng.seeded(7)
    betas = [pr.log_uniform_integer(rng, 64, 8) for _ in range(4000)]
    assert all(2**64 <= b < 2**72 for b in betas)
    # no float structure: the low bits are uniform (a float-built blind has ~19 zero bits)
    assert np.mean([b & 1 for b in betas]) == pytest.approx(0.5, abs=0.05)
    logs = np.array([math.log(b) - 64 * math.log(2) for b in betas]) / (8 * math.log(2))
    assert stats.kstest(logs, "uniform").pvalue > 1e-3


def test_secure_exp(keypair_512):
    pk, sk = keypair_512
    xs = [0.0, -3.25, 5.5, -400.0, -math.inf]
    spec = ExpSpec(len(xs), pk.bits)
    result = run_pair(
        keypair_512, pr.bob_secure_exp, (encrypt_logs(pk, xs), spec), pr.alice_secure_exp, (spec,)
    )
    out, shift = result["bob"]
    assert out.scale == spec.g + PREC.weight_scale and shift.scale == PREC.f
    s = int(shift.decrypt_ints(sk)[0]) / 2.0**PREC.f
    got = out.decrypt(sk)
    with np.errstate(divide="ignore"):
        assert np.allclose(np.log(got[:-2]) + s, xs[:-2], atol=1e-12)
    assert got[-1] == 0.0
    assert result["alice"] is True  # -400 is beyond (g - 53) ln 2 = 133 nats at 512 bits


def test_secure_log(keypair_512):
    pk, sk = keypair_512
    thetas = [1, 7, 2**40 + 3, 0]
    spec = LogSpec(len(thetas), 10, 2**50)
    enc = CipherArray.encrypt_encoded(pk, thetas, 10, 2**50)
    result = run_pair(keypair_512, pr.bob_secure_log, (enc, spec), pr.alice_secure_log, (spec,))
    got = decode_logs(result["bob"], sk)
    expected = [math.log(t / 2**10) for t in thetas[:-1]]
    assert np.allclose(got[:-1], expected, atol=1e-20, rtol=0)
    assert got[-1] == -math.inf


def test_secure_logsum_matches_weighted_logsumexp(keypair_512):
    pk, sk = keypair_512
    xs = np.array([-1.0, -2.5, -300.0, -math.inf])
    weights = np.array([[0.5, 0.0], [0.25, 1.0], [0.25, 0.0], [0.0, 1.0]])
    spec = LogsumSpec(4, 2, pk.bits)
    result = run_pair(
        keypair_512,
        pr.bob_secure_logsum,
        (encrypt_logs(pk, xs), weights, spec),
        pr.alice_secure_logsum,
        (spec,),
    )
    got = decode_logs(result["bob"], sk)
    with np.errstate(divide="ignore"):
        expected = [logsumexp(xs, b=weights[:, j]) for j in range(2)]
    assert np.allclose(got, expected, rtol=0, atol=1e-13)


def test_secure_logsum_rejects_bad_weights(keypair_512):
    pk, _ = keypair_512
    spec = LogsumSpec(2, 1, pk.bits)
    for bad in (np.array([[1.0], [-0.5]]), np.array([[1.0], [2.0]]), np.array([[1.0, 0.0]])):
        with pytest.raises(InvalidInputError):
            run_pair(
                keypair_512,
                pr.bob_secure_logsum,
                (encrypt_logs(pk, [0.0, 1.0]), bad, spec),
                pr.alice_secure_logsum,
                (spec,),
            )
    tiny = np.array([[1.0], [1e-30]])  # too small for the public weight scale
    with pytest.raises(PrecisionError):
        run_pair(
            keypair_512,
            pr.bob_secure_logsum,
            (encrypt_logs(pk, [0.0, 1.0]), tiny, spec),
            pr.alice_secure_logsum,
            (spec,),
        )


def test_secure_multiply_is_exact_with_signs_and_scales(keypair_512):
    pk, sk = keypair_512
    x, y = np.array([3, -7, 0, 2**30], dtype=object), np.array([-5, -2, 9, 2**20], dtype=object)
    spec = MaskSpec((4, 6), (2**31, 2**21), (4,))
    ex = CipherArray.encrypt_encoded(pk, x, 4, 2**31)
    ey = CipherArray.encrypt_encoded(pk, y, 6, 2**21)
    result = run_pair(
        keypair_512, pr.bob_secure_multiply, (ex, ey, spec), pr.alice_secure_multiply, (spec,)
    )
    out = result["bob"]
    assert out.scale == 10
    assert [int(v) for v in out.decrypt_ints(sk)] == [int(a * b) for a, b in zip(x, y)]


def test_multiply_refuses_operands_beyond_their_declaration(keypair_512):
    pk, _ = keypair_512
    spec = MaskSpec((0, 0), (2**10, 2**10), (1,))
    big = CipherArray.encrypt_encoded(pk, [2**20], 0)
    with pytest.raises(InvalidInputError):
        run_pair(
            keypair_512, pr.bob_secure_multiply, (big, big, spec), pr.alice_secure_multiply, (spec,)
        )


def test_rescale_is_floor_or_floor_plus_one(keypair_512):
    pk, sk = keypair_512
    values = [1000, -1000, 255, 256, 0, -1]
    spec = MaskSpec((12,), (2**12,), (len(values),))
    enc = CipherArray.encrypt_encoded(pk, values, 12, 2**12)
    result = run_pair(keypair_512, pr.bob_rescale, (enc, 8, spec), pr.alice_rescale, (8, spec))
    out = result["bob"]
    assert out.scale == 4
    for v, got in zip(values, out.decrypt_ints(sk)):
        assert int(got) in (v >> 8, (v >> 8) + 1)


@pytest.mark.parametrize("bits", [0, -1, 13])
def test_rescale_rejects_bad_widths(keypair_512, bits):
    pk, _ = keypair_512
    spec = MaskSpec((12,), (2**12,), (1,))
    enc = CipherArray.encrypt_encoded(pk, [5], 12)
    with pytest.raises(InvalidInputError):
        run_pair(keypair_512, pr.bob_rescale, (enc, bits, spec), pr.alice_rescale, (bits, spec))


def test_alice_exp_values_report_values_out_of_range():
    f, g = PREC.f, 100
    logs = [0, -(10 << f), -(200 << f), PREC.log_zero]
    values, c, dropped = pr.alice_exp_values(logs, PREC, g)
    assert c == 0 and values[0] == 2**g and values[-1] == 0
    assert dropped == pytest.approx(-200.0)  # 200 nats is beyond (100 - 53) ln 2
    _, _, dropped = pr.alice_exp_values(logs[:2] + logs[3:], PREC, g)
    assert dropped == -math.inf


# -- the metadata rule and what Alice's decryptions reveal -----------------------------------


def assert_transcripts(keypair, make_args, bob_role, alice_role, alice_args, declarations, cases):
    def run(case, wrap):
        run_pair(keypair, bob_role, make_args(case), alice_role, alice_args, wrap_transport=wrap)

    return assert_same_transcripts(run, cases, declarations)


def test_transcripts_of_exp_log_and_logsum(keypair_512):
    pk, _ = keypair_512
    exp_spec = ExpSpec(3, pk.bits)
    assert_transcripts(
        keypair_512,
        lambda xs: (encrypt_logs(pk, xs), exp_spec),
        pr.bob_secure_exp,
        pr.alice_secure_exp,
        (exp_spec,),
        exp_spec.messages(),
        [[0.0, -1.0, 2.0], [-500.0, -math.inf, 30.0]],
    )
    log_spec = LogSpec(2, 0, 2**60)
    assert_transcripts(
        keypair_512,
        lambda t: (CipherArray.encrypt_encoded(pk, t, 0, 2**60), log_spec),
        pr.bob_secure_log,
        pr.alice_secure_log,
        (log_spec,),
        log_spec.messages(),
        [[1, 2], [2**59, 0]],
    )
    sum_spec = LogsumSpec(2, 2, pk.bits)
    assert_transcripts(
        keypair_512,
        lambda c: (encrypt_logs(pk, c[0]), np.array(c[1]), sum_spec),
        pr.bob_secure_logsum,
        pr.alice_secure_logsum,
        (sum_spec,),
        [*sum_spec.exp.messages(), *sum_spec.log.messages()],
        [([0.0, -1.0], [[0.5, 0.5], [0.5, 0.5]]), ([-90.0, -math.inf], [[1.0, 0.0], [1e-9, 1.0]])],
    )


def test_transcripts_of_multiply_and_rescale(keypair_512):
    pk, _ = keypair_512
    spec = MaskSpec((0, 0), (2**16, 2**16), (2,))

    def enc(v):
        return CipherArray.encrypt_encoded(pk, v, 0, 2**16)

    assert_transcripts(
        keypair_512,
        lambda c: (enc(c[0]), enc(c[1]), spec),
        pr.bob_secure_multiply,
        pr.alice_secure_multiply,
        (spec,),
        pr._multiply_messages(spec),
        [([1, 2], [3, 4]), ([2**16, -(2**16)], [0, 7])],
    )
    one = MaskSpec((8,), (2**16,), (2,))
    assert_transcripts(
        keypair_512,
        lambda v: (CipherArray.encrypt_encoded(pk, v, 8, 2**16), 4, one),
        pr.bob_rescale,
        pr.alice_rescale,
        (4, one),
        pr._rescale_messages(one, 4),
        [[1, 2], [2**16, -(2**16)]],
    )


def _alice_sees(keypair, bob_role, bob_args, alice_role, alice_args, tag, runs):
    """The integers Alice decrypts from message ``tag`` over ``runs`` runs."""
    _, sk = keypair
    seen = []
    for _ in range(runs):
        result = run_pair(keypair, bob_role, bob_args, alice_role, alice_args, record_views=True)
        (payload,) = [p for _, t, p in result.views["alice"] if t == tag]
        payload = payload[0] if isinstance(payload, list) else payload
        seen.extend(int(v) for v in payload.decrypt_ints(sk))
    return np.array(seen, dtype=object)


def test_exp_blinds_hide_a_log_value_within_the_range(keypair_512):
    """Alice sees x + rho, rho uniform on [0, R): two secrets 0.2 nats apart give
    distributions whose statistical distance is 0.2 / R (KS cannot tell them apart)."""
    pk, _ = keypair_512
    spec = ExpSpec(40, pk.bits)
    samples = []
    for x in (0.0, 0.2):
        args = (encrypt_logs(pk, [x] * 40), spec)
        seen = _alice_sees(
            keypair_512, pr.bob_secure_exp, args, pr.alice_secure_exp, (spec,), "exp.blinded", 5
        )
        samples.append(np.array([int(v) for v in seen], dtype=float) / 2.0**PREC.f)
    assert all(s.min() >= 0 and s.max() < PREC.blind_nats + 0.2 for s in samples)
    assert stats.ks_2samp(*samples).pvalue > 1e-3


def test_log_blinds_hide_a_value_within_the_range(keypair_512):
    """Alice sees theta * beta; log of it is log theta + U[B ln 2, (B + K) ln 2)."""
    pk, _ = keypair_512
    spec = LogSpec(40, 0, 2**20)
    samples = []
    for theta in (1000, 1200):
        args = (CipherArray.encrypt_encoded(pk, [theta] * 40, 0, 2**20), spec)
        seen = _alice_sees(
            keypair_512, pr.bob_secure_log, args, pr.alice_secure_log, (spec,), "log.blinded", 5
        )
        samples.append(np.array([math.log(int(v)) for v in seen]))
    assert stats.ks_2samp(*samples).pvalue > 1e-3


def test_additive_masks_hide_the_operands_statistically(keypair_512):
    pk, _ = keypair_512
    spec = MaskSpec((0, 0), (2**16, 2**16), (40,))
    samples = []
    for v in (0, 2**16):
        e = CipherArray.encrypt_encoded(pk, [v] * 40, 0, 2**16)
        seen = _alice_sees(
            keypair_512,
            pr.bob_secure_multiply,
            (e, e, spec),
            pr.alice_secure_multiply,
            (spec,),
            "mul.masked",
            3,
        )
        samples.append(np.array([int(x) for x in seen], dtype=float))
    assert stats.ks_2samp(*samples).pvalue > 1e-3
