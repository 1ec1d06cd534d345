"""The Paillier layer: keys over phe, fixed point, CipherArray, packing, fast randomness."""

from smc_hmm.crypto.cipherarray import CipherArray
from smc_hmm.crypto.keys import (
    DEFAULT_KEY_BITS,
    MAX_KEY_BITS,
    MIN_KEY_BITS,
    Meter,
    PrivateKey,
    PublicKey,
    check_key_bits,
    generate_keypair,
    private_key_from_phe,
    public_key_from_phe,
)
from smc_hmm.crypto.multiexp import multiexp, naive_multiexp
from smc_hmm.crypto.randomness import (
    DJNRandomizer,
    FixedBaseTable,
    NthPowerRandomizer,
    Randomizer,
    RandomizerPool,
)
from smc_hmm.crypto.rng import Rng

__all__ = [
    "DEFAULT_KEY_BITS",
    "MAX_KEY_BITS",
    "MIN_KEY_BITS",
    "CipherArray",
    "DJNRandomizer",
    "FixedBaseTable",
    "Meter",
    "NthPowerRandomizer",
    "PrivateKey",
    "PublicKey",
    "Randomizer",
    "RandomizerPool",
    "Rng",
    "check_key_bits",
    "generate_keypair",
    "multiexp",
    "naive_multiexp",
    "private_key_from_phe",
    "public_key_from_phe",
]
