"""Two-party primitives of protocols.stages.primitives, each run with ``simulate``.

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
from transcript_harness import VIEW_P_MIN, assert_same_transcripts

from protocols.stages import primitives as pr
from protocols.stages.primitives import MaskSpec, PrecisionParams
from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.errors import InvalidInputError
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

    return assert_same_transcripts(run, cases, declarations, keys=[keypair])


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
        pr.rescale_messages(one, 4),
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
    assert stats.ks_2samp(*samples).pvalue > VIEW_P_MIN
