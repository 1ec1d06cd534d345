"""Paillier key pairs built on phe's key classes (interoperable with phe).

:class:`PublicKey` and :class:`PrivateKey` subclass ``phe.PaillierPublicKey``
and ``phe.PaillierPrivateKey``: a phe ``EncryptedNumber`` made with our key
decrypts with phe and vice versa.  On top they add what the fast paths need:
gmpy2 copies of n and n^2, a fingerprint for the wire, a precision bound, a
pluggable randomizer (DJN fixed-base table by default, see
:mod:`smc_hmm.crypto.randomness`), batched CRT decryption whose secret exponents run in
constant time (:mod:`smc_hmm.crypto.consttime`), and a *meter* that counts operations
for the cost ledger (thesis 3.1.2, Paillier 1999).
"""

from __future__ import annotations

import hashlib
import warnings

import gmpy2
import phe
from gmpy2 import mpz

from smc_hmm.crypto import consttime
from smc_hmm.crypto.randomness import (
    DJNRandomizer,
    NthPowerRandomizer,
    Randomizer,
    public_randomizer,
)
from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import (
    InsecureKeyWarning,
    InvalidCiphertextError,
    InvalidInputError,
    KeyMismatchError,
)

DEFAULT_KEY_BITS = 2048
MIN_SECURE_BITS = 2048
#: the smallest modulus that works at all: DJN randomness draws exponents of half the
#: modulus's size, and they need at least 128 bits (:mod:`smc_hmm.crypto.randomness`)
MIN_KEY_BITS = 256
#: the largest modulus the command line and configuration files generate without an
#: explicit allowance: the prime search grows roughly with the fourth power of the size, so
#: a key far beyond this one takes hours or days (the library itself sets no upper bound)
MAX_KEY_BITS = 8192
#: |plaintext| must stay below n / 2^(1 + PRECISION_MARGIN_BITS): headroom for masks.
PRECISION_MARGIN_BITS = 2


class Meter:
    """Counts crypto operations. The default counts nothing; the cost ledger subclasses it."""

    def count(self, op: str, k: int = 1) -> None:  # intentionally a no-op
        pass


NULL_METER = Meter()


def all_units(values, n) -> bool:
    """Whether every value is coprime to ``n``: one gcd for the whole batch, since a
    product is coprime to n exactly when each factor is (a gcd costs several
    multiplications mod n, the running product one)."""
    product = mpz(1)
    for v in values:
        product = product * v % n
    return gmpy2.gcd(product, n) == 1


class PublicKey(phe.PaillierPublicKey):
    """A Paillier public key (g = n + 1) with fast-path state.

    ``meter`` counts operations; ``with_meter`` returns a view sharing the
    randomizer and tables, so each party can count its own work.
    """

    def __init__(
        self,
        n: int,
        *,
        rng: Rng | None = None,
        randomizer: Randomizer | None = None,
        meter: Meter | None = None,
    ):
        n = int(n)
        if n < 3 or n % 2 == 0:
            raise InvalidInputError("a Paillier modulus must be an odd integer > 2")
        super().__init__(n)
        self.n_mpz = mpz(n)
        self.nsquare_mpz = self.n_mpz * self.n_mpz
        self.bits = n.bit_length()
        self.fingerprint = hashlib.sha256(n.to_bytes((self.bits + 7) // 8, "big")).digest()[:16]
        self.max_plain = (n // 2) >> PRECISION_MARGIN_BITS
        self.rng = rng if rng is not None else Rng.system()
        self._randomizer = randomizer
        self.meter = meter if meter is not None else NULL_METER
        #: the executor of heavy batches on ciphertexts under this key (None: inline)
        self.compute = None
        self._primes: tuple[mpz, mpz] | None = None  # set by PrivateKey: CRT encryption

    # -- views and configuration ------------------------------------------------

    def with_meter(self, meter: Meter, compute=None) -> PublicKey:
        """A view of this key that counts into ``meter`` and runs its heavy batches on
        ``compute`` (a :class:`~smc_hmm.compute.Compute`; shares tables and pools)."""
        _ = self.randomizer  # create it first so every view shares one table/pool
        view = object.__new__(PublicKey)
        view.__dict__.update(self.__dict__)
        view.meter = meter
        view.compute = compute
        return view

    @property
    def randomizer(self) -> Randomizer:
        if self._randomizer is None:
            if self._primes is None and not self.rng.insecure:  # a peer's key: shared tables
                self._randomizer = public_randomizer(self.n_mpz)
            else:
                self._randomizer = DJNRandomizer(self.n_mpz, self.rng, primes=self._primes)
        return self._randomizer

    def use_randomizer(self, randomizer: Randomizer) -> None:
        """Replace the randomizer (shared by every view made after this call)."""
        self._randomizer = randomizer

    def use_djn(self, alpha_bits: int | None = None, window: int | None = None) -> DJNRandomizer:
        """DJN short-exponent randomness; ``alpha_bits`` defaults to bits(n)/2."""
        r = DJNRandomizer(self.n_mpz, self.rng, alpha_bits, window, primes=self._primes)
        self._randomizer = r
        return r

    def use_full_randomness(self) -> NthPowerRandomizer:
        """Textbook r^n randomness (CRT-accelerated when the private key is known)."""
        r = NthPowerRandomizer(self.n_mpz, self.rng, self._primes)
        self._randomizer = r
        return r

    # -- raw integer operations ---------------------------------------------------

    def check_plain(self, bound: int, what: str = "value") -> None:
        """Raise PrecisionError if a plaintext of magnitude ``bound`` could wrap."""
        if bound > self.max_plain:
            from smc_hmm.errors import PrecisionError

            raise PrecisionError(
                f"{what} needs {int(bound).bit_length()} bits but the plaintext space of a "
                f"{self.bits}-bit key allows {self.max_plain.bit_length()} "
                f"(|x| < n/2^{1 + PRECISION_MARGIN_BITS}); lower the scale or rescale first"
            )

    def encrypt_ints(self, values, randomizers: list[mpz] | None = None) -> list[mpz]:
        """Encrypt signed integers (caller has checked |v| <= max_plain)."""
        values = [int(v) for v in values]
        if randomizers is None:
            randomizers = self.randomizer.draw(len(values))
        n2 = self.nsquare_mpz
        self.meter.count("encrypt", len(values))
        return [self.message_factor(v) * r % n2 for v, r in zip(values, randomizers)]

    def message_factor(self, value: int) -> mpz:
        """g^m = 1 + m n mod n^2, written as 1 + (m mod n + n) n: the same-size factor
        (between n^2 and 2 n^2) for every m, so encrypting a secret 0 costs what a 1
        does (1 + 0 n = 1 would make the multiplication by it nearly free)."""
        n = self.n_mpz
        return 1 + (int(value) % n + n) * n

    def rerandomize(self, ciphertexts: list[mpz]) -> list[mpz]:
        n2 = self.nsquare_mpz
        rs = self.randomizer.draw(len(ciphertexts))
        self.meter.count("rerandomize", len(ciphertexts))
        return [c * r % n2 for c, r in zip(ciphertexts, rs)]

    def validate_ciphertexts(self, ciphertexts, check_gcd: bool = True) -> None:
        """Raise InvalidCiphertextError unless every c is in Z*_{n^2}."""
        n, n2 = self.n_mpz, self.nsquare_mpz
        for c in ciphertexts:
            if not (0 < c < n2):
                raise InvalidCiphertextError("ciphertext outside (0, n^2)")
        if check_gcd and not all_units(ciphertexts, n):
            raise InvalidCiphertextError("ciphertext not coprime to n")

    def same_key(self, other: PublicKey) -> None:
        if other is not self and other.fingerprint != self.fingerprint:
            raise KeyMismatchError("values encrypted under different public keys were combined")

    def __repr__(self) -> str:
        return f"<PublicKey {self.bits} bits {self.fingerprint[:4].hex()}>"

    def __reduce__(self):  # local process pools only; never used on the wire
        return (PublicKey, (self.n,))


class PrivateKey(phe.PaillierPrivateKey):
    """A Paillier private key with batched CRT decryption of signed integers."""

    def __init__(self, public_key: PublicKey, p: int, q: int):
        if not isinstance(public_key, PublicKey):
            public_key = PublicKey(public_key.n)
        super().__init__(public_key, int(p), int(q))
        self._p, self._q = mpz(self.p), mpz(self.q)
        self._psq, self._qsq = mpz(self.psquare), mpz(self.qsquare)
        self._hp, self._hq = mpz(self.hp), mpz(self.hq)
        self._p_inv = mpz(self.p_inverse)
        public_key._primes = (self._p, self._q)
        #: threads of a decryption batch: the p and q halves (and the ciphertexts) are
        #: split over them when the constant-time backend releases the GIL
        self.decrypt_threads = 2
        #: the constant-time exponentiation (None: :func:`consttime.default_backend`)
        self.secret_powmod: consttime.SecretPowmod | None = None

    def h_function(self, x, xsquare):
        """phe's h_p = L_p(g^(p-1) mod p^2)^-1 mod p, its secret exponent in constant time
        (phe's own uses a variable-time powmod)."""
        g = self.public_key.g
        return int(gmpy2.invert(self.l_function(consttime.secret_powmod(g, x - 1, xsquare), x), x))

    def _residues(self, cs: list[mpz]) -> list[mpz]:
        """m mod n in [0, n) for each ciphertext: c^(p-1) mod p^2 and c^(q-1) mod q^2 in
        constant time (the two halves on two threads), then L and CRT."""
        p, q = self._p, self._q
        xp, xq = consttime.powmod_jobs(
            [(cs, p - 1, self._psq), (cs, q - 1, self._qsq)],
            self.decrypt_threads,
            self.secret_powmod,
        )
        hp, hq, p_inv = self._hp, self._hq, self._p_inv
        out = []
        for a, b in zip(xp, xq):
            mp = (a - 1) // p * hp % p
            mq = (b - 1) // q * hq % q
            out.append(mp + ((mq - mp) * p_inv % q) * p)
        return out

    def decrypt_ints(self, ciphertexts) -> list[int]:
        """Decrypt to signed integers in (-n/2, n/2], using threads for big batches."""
        cs = [mpz(c) for c in ciphertexts]
        self.public_key.validate_ciphertexts(cs, check_gcd=False)
        self.public_key.meter.count("decrypt", len(cs))
        n = self.public_key.n_mpz
        half = n // 2
        return [int(m - n) if m > half else int(m) for m in self._residues(cs)]

    def raw_decrypt(self, ciphertext):
        """phe's interface (m in [0, n) of one ciphertext), through the constant-time path."""
        if not isinstance(ciphertext, int):
            raise TypeError(f"Expected ciphertext to be an int, not: {type(ciphertext)}")
        return int(self._residues([mpz(ciphertext)])[0])

    def __repr__(self) -> str:
        return f"<PrivateKey for {self.public_key!r}>"


def _random_prime(bits: int, rng: Rng) -> mpz:
    while True:
        start = mpz(rng.randbits(bits)) | (mpz(3) << (bits - 2)) | 1
        p = gmpy2.next_prime(start)
        if p.bit_length() == bits:
            return p


def check_key_bits(
    bits: object,
    *,
    insecure: bool = False,
    allow_large: bool = False,
    hints: tuple[str, str] = ("insecure=True", "allow_large=True"),
) -> int:
    """The key-size rule of every entry point; returns ``bits``.

    An even integer of at least :data:`MIN_KEY_BITS`; below :data:`MIN_SECURE_BITS` only
    with ``insecure``, above :data:`MAX_KEY_BITS` only with ``allow_large``.  ``hints``
    name how the caller's user grants each (``--insecure``, ``run.insecure = true``, ...).
    The checks run in this order so that no "insecure" warning precedes a refusal.
    """
    if isinstance(bits, bool) or not isinstance(bits, int) or bits % 2:
        raise InvalidInputError(f"key size must be an even number of bits, got {bits!r}")
    if bits < MIN_KEY_BITS:
        raise InvalidInputError(
            f"{bits}-bit keys are below the smallest working size, {MIN_KEY_BITS} bits "
            "(Paillier randomness here draws exponents of half the key size, at least 128 "
            "bits); 2048 bits are the secure default"
        )
    if bits > MAX_KEY_BITS and not allow_large:
        raise InvalidInputError(
            f"{bits}-bit keys are above {MAX_KEY_BITS} bits: generating one takes minutes to "
            "days (the prime search grows roughly as bits^4: ~bits candidates, each test "
            f"~bits^3); add {hints[1]} to allow it"
        )
    if bits < MIN_SECURE_BITS and not insecure:
        raise InvalidInputError(
            f"{bits}-bit keys are insecure: add {hints[0]} (tests and reproductions only)"
        )
    return bits


def generate_keypair(
    bits: int = DEFAULT_KEY_BITS, *, insecure: bool = False, rng: Rng | None = None
) -> tuple[PublicKey, PrivateKey]:
    """A fresh Paillier key pair with an n of exactly ``bits`` bits.

    Keys shorter than 2048 bits need ``insecure=True`` (tests, reproductions of
    the thesis's 256/512-bit figures) and emit :class:`InsecureKeyWarning`; so
    do keys of any size drawn from a seeded (non-cryptographic) ``rng``.  Sizes
    below :data:`MIN_KEY_BITS` are refused (:func:`check_key_bits`); the library sets
    no upper bound, the command line does.
    """
    check_key_bits(bits, insecure=insecure, allow_large=True)
    if bits < MIN_SECURE_BITS:
        warnings.warn(
            f"generating an insecure {bits}-bit Paillier key", InsecureKeyWarning, stacklevel=2
        )
    if rng is not None and rng.insecure and not insecure:
        raise InvalidInputError(
            "keys from a seeded (non-cryptographic) generator are insecure: pass insecure=True "
            "(tests and reproducible experiments only)"
        )
    rng = rng if rng is not None else Rng.system()
    while True:
        p = _random_prime(bits // 2, rng)
        q = _random_prime(bits // 2, rng)
        n = p * q
        if p != q and n.bit_length() == bits and gmpy2.gcd(n, (p - 1) * (q - 1)) == 1:
            break
    public = PublicKey(int(n), rng=rng.spawn())
    return public, PrivateKey(public, int(p), int(q))


def public_key_from_phe(key: phe.PaillierPublicKey, **kwargs) -> PublicKey:
    """Wrap a phe public key (same n) in a :class:`PublicKey`."""
    return key if isinstance(key, PublicKey) else PublicKey(key.n, **kwargs)


def private_key_from_phe(key: phe.PaillierPrivateKey) -> PrivateKey:
    """Wrap a phe private key in a :class:`PrivateKey`."""
    if isinstance(key, PrivateKey):
        return key
    return PrivateKey(public_key_from_phe(key.public_key), key.p, key.q)
