"""Shared Paillier decryption (smc_hmm.crypto.threshold): the dealt n-of-n sharing.

Every identity of the module docstring is checked on small insecure keys: d = 0 mod
lambda and d = 1 mod n, the shares add up to d, every holder is needed, the product of
the partials is 1 + m n, a wrong or missing share is detected, the shares' spread
(statistical hiding) and the wire forms.
"""

from __future__ import annotations

import math

import gmpy2
import numpy as np
import pytest

from smc_hmm.crypto import CipherArray, Rng
from smc_hmm.crypto.threshold import (
    KeyShare,
    combine,
    deal_shares,
    decryption_exponent,
    pack_partials,
    partial_width,
    share_bound,
    unpack_partials,
)
from smc_hmm.errors import CryptoError, InvalidCiphertextError, InvalidInputError
from smc_hmm.wire import WireCodec


def _lambda(sk):
    p, q = int(sk.p), int(sk.q)
    return (p - 1) * (q - 1) // math.gcd(p - 1, q - 1)


def test_the_decryption_exponent_is_zero_mod_lambda_and_one_mod_n(keypair_512):
    pk, sk = keypair_512
    d = decryption_exponent(sk)
    assert d % _lambda(sk) == 0
    assert d % pk.n == 1
    assert 0 < d < pk.n * _lambda(sk)


@pytest.mark.parametrize("holders", [2, 3, 5])
def test_every_holders_partials_combine_to_the_plaintext(keypair_512, holders):
    pk, sk = keypair_512
    shares = deal_shares(sk, holders, rng=Rng.seeded(holders))
    assert sum(s.exponent for s in shares) == decryption_exponent(sk)
    values = [0, 1, -1, 12345, -(pk.max_plain), pk.max_plain, 2**200 + 7]
    cts = CipherArray.encrypt_encoded(pk, np.array(values, dtype=object), 0).ciphertexts()
    partials = [s.partial(cts) for s in shares]
    assert combine(pk, partials) == values
    # the same as the private key's own decryption
    assert sk.decrypt_ints(cts) == values


def test_combination_is_order_free_and_works_on_computed_ciphertexts(keypair_512):
    pk, sk = keypair_512
    shares = deal_shares(sk, 3, rng=Rng.seeded(1))
    a = CipherArray.encrypt_encoded(pk, np.array([5, -7, 11], dtype=object), 0)
    b = (a + a).mul(3).rerandomize()  # 6 x
    parts = [s.partial(b.ciphertexts()) for s in shares]
    assert combine(pk, parts[::-1]) == [30, -42, 66]


def test_a_missing_repeated_or_foreign_share_is_detected(keypair_512, other_keypair_512):
    pk, sk = keypair_512
    shares = deal_shares(sk, 3, rng=Rng.seeded(2))
    cts = CipherArray.encrypt_encoded(pk, np.array([3, 4], dtype=object), 0).ciphertexts()
    parts = [s.partial(cts) for s in shares]
    with pytest.raises(CryptoError, match="missing or wrong"):
        combine(pk, parts[:2])  # one holder short: garbage, not a plaintext
    with pytest.raises(CryptoError, match="missing or wrong"):
        combine(pk, [parts[0], parts[0], parts[2]])
    # the first shares of a seeded deal do not depend on the key (they hide d); the last
    # one of another key's deal with the same seed is the wrong share in the right place
    foreign = deal_shares(other_keypair_512[1], 3, rng=Rng.seeded(2))
    assert foreign[0].exponent == shares[0].exponent
    mixed = KeyShare(pk, 2, 3, foreign[2].exponent, foreign[2].sigma)
    with pytest.raises(CryptoError, match="missing or wrong"):
        combine(pk, [parts[0], parts[1], mixed.partial(cts)])


def test_fewer_than_all_shares_look_like_shares_of_any_other_exponent(keypair_512):
    """Statistical hiding: the first h - 1 shares do not depend on d; the last one is d
    minus a sum that is sigma bits wider than d, so its range moves by d only."""
    pk, sk = keypair_512
    d = decryption_exponent(sk)
    bits = 2 * pk.bits + 40
    firsts = [deal_shares(sk, 2, rng=Rng.seeded(s))[0].exponent for s in range(200)]
    assert all(0 <= e < 2**bits for e in firsts)
    assert max(firsts).bit_length() == bits  # uniform over the whole range
    lasts = [deal_shares(sk, 2, rng=Rng.seeded(s))[1].exponent for s in range(200)]
    assert all(d - 2**bits < e <= d for e in lasts)
    # d is 2^-40 of the range: a share's top 32 bits carry (almost) no information about d
    assert d < 2 ** (bits - 40)
    top = [(e + 2**bits) >> (bits - 31) for e in lasts]
    assert len(set(top)) > 150
    assert all(abs(s.exponent) < share_bound(pk, 2, 40) for s in deal_shares(sk, 2))


def test_shares_travel_as_integer_lists_and_partials_as_fixed_width_bytes(keypair_512):
    pk, sk = keypair_512
    shares = deal_shares(sk, 2, rng=Rng.seeded(3))
    codec = WireCodec()
    wired = [KeyShare.from_wire(pk, codec.decode(codec.encode(s.to_wire()))) for s in shares]
    assert wired == shares
    assert "exponent" not in repr(shares[0]) and str(shares[0].exponent) not in repr(shares[0])
    cts = CipherArray.encrypt_encoded(pk, np.array([9, -9, 0], dtype=object), 0).ciphertexts()
    parts = [s.partial(cts) for s in wired]
    blobs = [pack_partials(pk, p) for p in parts]
    assert all(len(b) == 3 * partial_width(pk) for b in blobs)
    assert combine(pk, [unpack_partials(pk, b, 3) for b in blobs]) == [9, -9, 0]


@pytest.mark.parametrize(
    "data",
    [[0, 2, 40], [0, 2, 40, 1, 5], "share", [0, 2, 40, True], [2, 2, 40, 1], [0, 1, 40, 1]],
)
def test_malformed_shares_are_refused_with_a_typed_error(keypair_512, data):
    with pytest.raises(CryptoError):
        KeyShare.from_wire(keypair_512[0], data)


def test_an_oversized_share_is_refused(keypair_512):
    pk = keypair_512[0]
    with pytest.raises(CryptoError, match="larger"):
        KeyShare.from_wire(pk, [0, 2, 40, share_bound(pk, 2, 40)])


def test_bad_partials_and_bad_parameters_are_refused(keypair_512):
    pk, sk = keypair_512
    width = partial_width(pk)
    with pytest.raises(InvalidCiphertextError):
        unpack_partials(pk, b"\x00" * width, 1)  # zero is no partial decryption
    with pytest.raises(InvalidCiphertextError):
        unpack_partials(pk, b"\x01" * (width - 1), 1)
    with pytest.raises(InvalidCiphertextError):
        unpack_partials(pk, (pk.n**2).to_bytes(width, "big"), 1)
    share = deal_shares(sk, 2, rng=Rng.seeded(4))[0]
    with pytest.raises(InvalidCiphertextError):
        share.partial([pk.n])  # not a unit mod n^2
    with pytest.raises(InvalidInputError):
        deal_shares(sk, 1)
    with pytest.raises(InvalidInputError):
        deal_shares(sk, 2, sigma=20)
    with pytest.raises(InvalidInputError):
        combine(pk, [[1, 2]])
    with pytest.raises(InvalidInputError):
        decryption_exponent(pk)


def test_partial_decryption_is_metered(keypair_512):
    from smc_hmm.cost import CostLedger

    pk, sk = keypair_512
    ledger = CostLedger("holder")
    view = pk.with_meter(ledger)
    share = KeyShare(view, 0, 2, deal_shares(sk, 2, rng=Rng.seeded(5))[0].exponent)
    share.partial([gmpy2.mpz(c) for c in pk.encrypt_ints([1, 2, 3, 4, 5])])
    assert ledger.ops["partial_decrypt"] == 5
