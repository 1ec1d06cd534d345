"""Two-party primitives of protocols.primitives, each run with ``simulate``.

Bob's roles start from ciphertexts under Alice's key.  In a real protocol he
has received that key earlier (e.g. the forward algorithm's ``fw.key``
message, which ``PartyContext.recv`` adopts automatically).  Here the test
encrypts Bob's inputs with Alice's public key and hands them to Bob's role as
arguments; the wrapper :func:`as_bob` first adopts the key into Bob's
context (``ctx.adopt_key``: his metered view, registered with his wire codec
so he can decode Alice's replies) and rebuilds the CipherArrays on that view,
so Bob's work is counted in his own ledger.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from protocols import primitives as pr
from protocols.primitives import PrecisionParams
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError
from smc_hmm.runtime import simulate

PREC = PrecisionParams()  # log_scale 48, blind 20 nats, g = h = 122 bits
LN2 = math.log(2)


def as_bob(role):
    """Bob's role with his CipherArray arguments moved onto his own view of Alice's key."""

    def run(ctx, *args):
        moved = []
        for a in args:
            if isinstance(a, CipherArray):
                view = ctx.adopt_key(a.public_key)
                a = CipherArray(view, a.data, a.scale, a.bound)
            moved.append(a)
        return role(ctx, *moved)

    return run


def run_pair(keypair, bob_role, bob_args, alice_role, alice_args=(), **kwargs):
    return simulate(
        {"alice": alice_role, "bob": as_bob(bob_role)},
        args={"alice": tuple(alice_args), "bob": tuple(bob_args)},
        keys={"alice": keypair},
        timeout=30,
        **kwargs,
    )


def encrypt_logs(pk, logs) -> CipherArray:
    return CipherArray.encrypt_encoded(pk, [PREC.encode_log(x) for x in logs], PREC.f)


def decode_logs(enc: CipherArray, sk) -> np.ndarray:
    assert enc.scale == PREC.f
    return np.array([PREC.decode_log(v) for v in enc.decrypt_ints(sk)])


def assert_only_ciphertexts(views, party):
    assert views[party], f"{party} received nothing"
    for _, _, payload in views[party]:
        items = payload if isinstance(payload, list) else [payload]
        assert all(
            isinstance(x, CipherArray) or (isinstance(x, int) and party == "alice") for x in items
        ), payload


def assert_bob_never_decrypted(result):
    assert result.cost.ops("bob")["decrypt"] == 0
    assert result.cost.ops("alice")["decrypt"] > 0


# -- secure exponent -------------------------------------------------------------------------


def test_secure_exp(keypair_512):
    pk, sk = keypair_512
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.uniform(-30.0, 5.0, size=12), [0.0, -math.inf]])
    result = run_pair(
        keypair_512,
        pr.bob_secure_exp,
        (encrypt_logs(pk, xs), PREC),
        pr.alice_secure_exp,
        (PREC,),
        record_views=True,
    )
    out, shift = result.outputs["bob"]
    assert out.scale > 64 and shift.scale == PREC.f
    # exp(x_i) = out_i * 2^-scale * e^shift
    ints = out.decrypt_ints(sk)
    s = int(shift.decrypt_ints(sk)[0]) / 2.0**PREC.f
    for x, v in zip(xs, ints):
        if x == -math.inf:
            assert v == 0
        else:
            assert v > 0
            recovered = math.log(int(v)) - out.scale * LN2 + s
            assert abs(recovered - x) < 1e-9, (recovered, x)
    # float decoding of the output agrees for values that do not underflow
    finite = np.isfinite(xs)
    assert np.allclose(out.decrypt(sk)[finite] * np.exp(s), np.exp(xs[finite]), rtol=1e-9)
    assert_only_ciphertexts(result.views, "bob")
    assert_only_ciphertexts(result.views, "alice")
    assert_bob_never_decrypted(result)


def test_secure_exp_requires_log_scale(keypair_512):
    pk, _ = keypair_512
    enc = CipherArray.encrypt(pk, [1.0], 16)
    with pytest.raises(InvalidInputError, match="scale"):
        run_pair(keypair_512, pr.bob_secure_exp, (enc, PREC), pr.alice_secure_exp, (PREC,))


# -- secure logarithm --------------------------------------------------------------------------


def test_secure_log(keypair_512):
    pk, sk = keypair_512
    scale = 32
    values = np.array([1e-3, 0.5, 1.0, 3.0, 12345.678, 2.0**40, 0.0])
    enc = CipherArray.encrypt(pk, values, scale)
    plain_ints = enc.decrypt_ints(sk)
    result = run_pair(
        keypair_512, pr.bob_secure_log, (enc, PREC), pr.alice_secure_log, (PREC,), record_views=True
    )
    logs = decode_logs(result.outputs["bob"], sk)
    for got, v in zip(logs, plain_ints):
        if v == 0:
            assert got == -math.inf
        else:  # exactly the log of the encrypted fixed-point value
            assert abs(got - (math.log(int(v)) - scale * LN2)) < 1e-9
    assert np.allclose(logs[:-1], np.log(values[:-1]), rtol=0, atol=1e-6)
    assert_only_ciphertexts(result.views, "bob")
    assert_only_ciphertexts(result.views, "alice")
    assert_bob_never_decrypted(result)


# -- secure LOGSUM ---------------------------------------------------------------------------


def test_secure_logsum_matches_weighted_logsumexp(keypair_512):
    pk, sk = keypair_512
    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.uniform(-25.0, 3.0, size=5), [-math.inf]])
    weights = rng.uniform(0.0, 1.0, size=(6, 4))
    weights[0, 1] = weights[3, 2] = 0.0  # some zero weights
    weights[:, 3] = 0.0  # an all-zero column: log 0
    result = run_pair(
        keypair_512,
        pr.bob_secure_logsum,
        (encrypt_logs(pk, xs), weights, PREC),
        pr.alice_secure_logsum,
        (PREC,),
        record_views=True,
    )
    got = decode_logs(result.outputs["bob"], sk)
    finite = xs != -math.inf
    for j in range(weights.shape[1]):
        if not weights[finite, j].any():
            assert got[j] == -math.inf
        else:
            expected = logsumexp(xs[finite], b=weights[finite, j])
            assert abs(got[j] - expected) <= 1e-9 * max(1.0, abs(expected)), (j, got[j], expected)
    assert_only_ciphertexts(result.views, "bob")
    assert_only_ciphertexts(result.views, "alice")
    assert_bob_never_decrypted(result)
    # one exponent round and one log round, one message each way per round
    assert result.cost.parties["bob"]["messages"]["sent"] == 2
    assert result.cost.parties["alice"]["messages"]["sent"] == 3  # E(V), E(c), E(log)


def test_secure_logsum_rejects_negative_weights(keypair_512):
    pk, _ = keypair_512
    with pytest.raises(InvalidInputError, match="non-negative"):
        run_pair(
            keypair_512,
            pr.bob_secure_logsum,
            (encrypt_logs(pk, [0.0, 1.0]), np.array([[1.0], [-0.5]]), PREC),
            pr.alice_secure_logsum,
            (PREC,),
        )


# -- secure multiplication -------------------------------------------------------------------


def test_secure_multiply_is_exact_with_signs_and_scales(keypair_512):
    pk, sk = keypair_512
    rng = np.random.default_rng(4)
    x = rng.uniform(-1000.0, 1000.0, size=(2, 3))
    y = rng.uniform(-50.0, 50.0, size=(2, 3))
    x[0, 0], y[1, 2] = 0.0, -0.0
    enc_x, enc_y = CipherArray.encrypt(pk, x, 8), CipherArray.encrypt(pk, y, 12)
    xi, yi = enc_x.decrypt_ints(sk), enc_y.decrypt_ints(sk)
    result = run_pair(
        keypair_512,
        pr.bob_secure_multiply,
        (enc_x, enc_y),
        pr.alice_secure_multiply,
        record_views=True,
    )
    prod = result.outputs["bob"]
    assert prod.shape == (2, 3) and prod.scale == 20
    got = prod.decrypt_ints(sk)
    assert (got == xi * yi).all()  # exact integer product
    # = the product of the fixed-point inputs (x at 2^-8, y at 2^-12: scales add)
    assert np.allclose(prod.decrypt(sk), enc_x.decrypt(sk) * enc_y.decrypt(sk), rtol=1e-12)
    assert np.allclose(prod.decrypt(sk), x * y, rtol=0, atol=0.25)
    assert (np.sign(prod.decrypt(sk)) == np.sign(np.round(x * y, 6))).all()
    # Alice sees only masked values: none of them equals the true x or y
    masked = [p for _, tag, p in result.views["alice"] if tag == "mul.masked"][0]
    seen_x, seen_y = (m.decrypt_ints(sk) for m in masked)
    assert not (seen_x == xi).any() and not (seen_y == yi).any()
    assert_only_ciphertexts(result.views, "bob")
    assert_only_ciphertexts(result.views, "alice")
    assert_bob_never_decrypted(result)


# -- rescaling ---------------------------------------------------------------------------------


def test_rescale_is_floor_or_floor_plus_one(keypair_512):
    pk, sk = keypair_512
    rng = np.random.default_rng(5)
    ints = np.array(
        [int(v) for v in rng.integers(-(2**40), 2**40, size=40)] + [0, 255, 256, -1, -256, -257],
        dtype=object,
    )
    enc = CipherArray.encrypt_encoded(pk, ints, 20)
    result = run_pair(keypair_512, pr.bob_rescale, (enc, 8), pr.alice_rescale, record_views=True)
    out = result.outputs["bob"]
    assert out.scale == 12
    got = out.decrypt_ints(sk)
    floors = np.array([int(v) >> 8 for v in ints], dtype=object)
    diff = got - floors
    assert set(diff.tolist()) <= {0, 1}
    assert out.bound >= max(abs(int(v)) for v in got)
    # Alice sees x + r, never x itself
    masked, bits = [p for _, tag, p in result.views["alice"] if tag == "rescale.masked"][0]
    assert bits == 8 and not (masked.decrypt_ints(sk) == ints).any()
    assert_only_ciphertexts(result.views, "bob")
    assert_bob_never_decrypted(result)


@pytest.mark.parametrize("bits", [0, 21, -3])
def test_rescale_rejects_bad_widths(keypair_512, bits):
    pk, _ = keypair_512
    enc = CipherArray.encrypt_encoded(pk, [5, 7], 20)
    with pytest.raises(InvalidInputError):
        run_pair(keypair_512, pr.bob_rescale, (enc, bits), pr.alice_rescale)


def test_alice_exp_with_a_scale_beyond_the_float_range():
    """g > 1024 (2048-bit keys): V = 2^g e^(y - c) is built in integers, 53 bits kept."""
    values, c = pr.alice_exp([0.0, -1.5, -600.0, -math.inf], 1700)
    assert c == 0.0 and values[0] == 1 << 1700 and values[3] == 0
    for y, v in zip([-1.5, -600.0], values[1:3]):
        assert abs(math.log(v) - 1700 * LN2 - y) < 1e-12
