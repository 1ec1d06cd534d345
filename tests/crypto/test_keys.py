import warnings

import phe
import pytest
from gmpy2 import mpz

from smc_hmm.crypto import (
    PublicKey,
    Rng,
    generate_keypair,
    private_key_from_phe,
    public_key_from_phe,
)
from smc_hmm.errors import InsecureKeyWarning, InvalidCiphertextError, InvalidInputError


def test_short_keys_need_the_insecure_flag():
    with pytest.raises(InvalidInputError, match="insecure"):
        generate_keypair(512)
    with pytest.warns(InsecureKeyWarning):
        pk, _ = generate_keypair(256, insecure=True)
    assert pk.bits == 256


@pytest.mark.parametrize("bits", [127, 255, "2048", 0])
def test_bad_key_sizes_are_rejected(bits):
    with pytest.raises(InvalidInputError):
        generate_keypair(bits, insecure=True)


def test_key_has_exact_size_and_fingerprint(keypair_512):
    pk, sk = keypair_512
    assert pk.bits == 512 and pk.n.bit_length() == 512
    assert sk.p * sk.q == pk.n
    assert len(pk.fingerprint) == 16
    assert PublicKey(pk.n).fingerprint == pk.fingerprint


def test_seeded_keygen_is_reproducible():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        a, _ = generate_keypair(256, insecure=True, rng=Rng.seeded(7))
        b, _ = generate_keypair(256, insecure=True, rng=Rng.seeded(7))
        c, _ = generate_keypair(256, insecure=True, rng=Rng.seeded(8))
    assert a.n == b.n != c.n


def test_interoperates_with_phe_both_ways(keypair_512):
    pk, sk = keypair_512
    # our key encrypting with phe's API, decrypted by a plain phe private key
    plain_sk = phe.PaillierPrivateKey(phe.PaillierPublicKey(pk.n), sk.p, sk.q)
    x = pk.encrypt(-3.25)
    assert (
        plain_sk.decrypt(phe.EncryptedNumber(plain_sk.public_key, x.ciphertext(), x.exponent))
        == -3.25
    )
    # a phe ciphertext decrypted by our batch decryption
    y = plain_sk.public_key.encrypt(-12345)
    assert sk.decrypt_ints([y.ciphertext()]) == [-12345]
    # wrapping phe keys
    wrapped = private_key_from_phe(plain_sk)
    assert wrapped.decrypt_ints(pk.encrypt_ints([7, -7])) == [7, -7]
    assert public_key_from_phe(plain_sk.public_key).n == pk.n


def test_decrypt_ints_signs_and_threads(keypair_512):
    pk, sk = keypair_512
    values = list(range(-40, 40))
    assert sk.decrypt_ints(pk.encrypt_ints(values)) == values
    sk.decrypt_threads = 1
    try:
        assert sk.decrypt_ints(pk.encrypt_ints(values)) == values
    finally:
        sk.decrypt_threads = 2


def test_ciphertext_range_is_validated(keypair_512):
    pk, sk = keypair_512
    for bad in (0, pk.nsquare, pk.nsquare + 5, -1):
        with pytest.raises(InvalidCiphertextError):
            sk.decrypt_ints([bad])
    with pytest.raises(InvalidCiphertextError):
        pk.validate_ciphertexts([mpz(sk.p)])  # shares a factor with n


def test_meter_view_counts_without_touching_the_original(keypair_512):
    from smc_hmm.crypto import Meter

    class Counter(Meter):
        def __init__(self):
            self.ops = {}

        def count(self, op, k=1):
            self.ops[op] = self.ops.get(op, 0) + k

    pk, sk = keypair_512
    counter = Counter()
    view = pk.with_meter(counter)
    view.encrypt_ints([1, 2, 3])
    pk.encrypt_ints([4])
    assert counter.ops == {"encrypt": 3}
    assert view.randomizer is pk.randomizer


def test_encrypting_a_secret_0_or_1_multiplies_operands_of_the_same_size(keypair_512):
    """No shortcut on a secret: g^m is a full-size factor for m = 0 and m = 1 alike, and
    the ciphertexts still decrypt."""
    pk, sk = keypair_512
    sizes = {pk.message_factor(m).bit_length() for m in (0, 1, -1, 2**100)}
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= pk.nsquare_mpz.bit_length()
    cts = pk.encrypt_ints([0, 1, -1, 2**100])
    assert [int(v) for v in sk.decrypt_ints(cts)] == [0, 1, -1, 2**100]
