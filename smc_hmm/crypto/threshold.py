"""Paillier decryption shared by several parties (n-of-n, dealt by a key authority).

Nobody holds the whole decryption key: a trusted dealer (the *key authority*, who
generated the key pair and then leaves) splits the decryption exponent

    d = lambda * (lambda^-1 mod n),   so  d = 0 (mod lambda)  and  d = 1 (mod n),

additively over the integers among ``holders`` parties, d = d_1 + ... + d_h.  For a
ciphertext c = (1 + n)^m r^n mod n^2, every holder computes its *partial decryption*
c^{d_i} mod n^2; their product is c^d = (1 + n)^{m d} r^{n d} = 1 + m n (mod n^2)
(r^{n lambda} = 1 and m d = m mod n), so m = L(c^d) = (c^d - 1) / n.  A decryption
needs every holder: this is the additive (n-of-n) case of the threshold Paillier of
Fouque, Poupard and Stern ("Sharing decryption in the context of voting or
lotteries", FC 2000) and Damgard and Jurik (PKC 2001, section 4), without Shamir
sharing and without the zero-knowledge proofs of correct partial decryption (the
parties are semi-honest).

Shares: d_1 .. d_(h-1) are uniform on [0, 2^(bits(d) + sigma)) and d_h = d - sum, so
any h - 1 shares are within statistical distance 2^-sigma of shares of any other
exponent (sigma >= 40): they say nothing about d.  Shares are integers, not residues
(nobody but the dealer knows the group order n lambda), so a partial decryption is a
full-size exponentiation modulo n^2 with a (2 bits(n) + sigma)-bit exponent: about
six CRT decryptions' worth (``smc-hmm bench eigenvector`` reports the run's count).  The
share is secret, so the exponentiation is constant time (:mod:`smc_hmm.crypto.consttime`;
a negative share exponentiates the inverses of the public ciphertexts).

Written here rather than taken from a library: phe has no shared decryption, and the
one maintained Python implementation we know of (TNO's
``tno.mpc.protocols.distributed_keygen``) is a dealer-free distributed key generation
tied to its own asyncio communication pool and ciphertext objects, where this project
needs a dealt sharing over its own transport, wire codec and cost ledger.  The tests
(``tests/crypto/test_threshold.py``) check every identity above.

On the wire a share is the integer list ``[index, holders, sigma, d_i]``
(:meth:`KeyShare.to_wire`) and partial decryptions are one bytes string of fixed-width
big-endian integers (:func:`pack_partials`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpz

from smc_hmm.crypto.consttime import powmod_jobs
from smc_hmm.crypto.keys import PrivateKey, PublicKey
from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import CryptoError, InvalidCiphertextError, InvalidInputError

__all__ = [
    "SIGMA",
    "KeyShare",
    "combine",
    "deal_shares",
    "decryption_exponent",
    "pack_partials",
    "partial_width",
    "unpack_partials",
]

#: default statistical hiding of the shares (bits)
SIGMA = 40


def decryption_exponent(private_key: PrivateKey) -> int:
    """d = lambda (lambda^-1 mod n): d = 0 mod lambda, d = 1 mod n (the dealer's secret)."""
    if not isinstance(private_key, PrivateKey):
        raise InvalidInputError("the dealer needs an smc_hmm PrivateKey")
    p, q = mpz(private_key.p), mpz(private_key.q)
    n = p * q
    lam = (p - 1) * (q - 1) // gmpy2.gcd(p - 1, q - 1)
    return int(lam * gmpy2.invert(lam, n))


def _share_bits(public_key: PublicKey, sigma: int) -> int:
    # d < n lambda < n^2: a share of bits(n^2) + sigma bits hides any such d
    return 2 * public_key.bits + sigma


def share_bound(public_key: PublicKey, holders: int, sigma: int) -> int:
    """Public bound on |d_i| for every share of a key of this size."""
    return holders << _share_bits(public_key, sigma)


def _check_holders(holders) -> int:
    if isinstance(holders, bool) or not isinstance(holders, int) or holders < 2:
        raise InvalidInputError(f"a shared key needs at least two holders, got {holders!r}")
    return holders


def _check_sigma(sigma) -> int:
    if isinstance(sigma, bool) or not isinstance(sigma, int) or not 40 <= sigma <= 256:
        raise InvalidInputError(f"sigma must be an integer in [40, 256], got {sigma!r}")
    return sigma


@dataclass(frozen=True)
class KeyShare:
    """Holder ``index`` (of ``holders``)'s additive share ``exponent`` of d."""

    public_key: PublicKey
    index: int
    holders: int
    exponent: int
    sigma: int = SIGMA

    def __post_init__(self):
        if not isinstance(self.public_key, PublicKey):
            raise InvalidInputError("a key share needs an smc_hmm PublicKey")
        _check_holders(self.holders)
        _check_sigma(self.sigma)
        if isinstance(self.index, bool) or not isinstance(self.index, int):
            raise InvalidInputError("a share index must be an integer")
        if not 0 <= self.index < self.holders:
            raise InvalidInputError(f"share index {self.index} not in [0, {self.holders})")
        if isinstance(self.exponent, bool) or not isinstance(self.exponent, int):
            raise InvalidInputError("a share exponent must be an integer")
        if abs(int(self.exponent)) >= share_bound(self.public_key, self.holders, self.sigma):
            raise CryptoError("a key share is larger than any dealt share can be")

    def partial(self, ciphertexts: Sequence) -> list[mpz]:
        """c^{d_i} mod n^2 for every ciphertext (validated first)."""
        pk = self.public_key
        cs = [mpz(c) for c in ciphertexts]
        pk.validate_ciphertexts(cs)
        pk.meter.count("partial_decrypt", len(cs))
        e, n2 = mpz(self.exponent), pk.nsquare_mpz
        if e < 0:  # c^e = (c^-1)^|e|: the inverses of public ciphertexts
            cs, e = [gmpy2.invert(c, n2) for c in cs], -e
        # the share is secret: constant time, split over two threads
        return powmod_jobs([(cs, e, n2)], threads=2)[0]

    def to_wire(self) -> list[int]:
        return [self.index, self.holders, self.sigma, int(self.exponent)]

    @classmethod
    def from_wire(cls, public_key: PublicKey, data) -> KeyShare:
        """A share received as ``[index, holders, sigma, d_i]`` (checked)."""
        if (
            isinstance(data, str | bytes)
            or not isinstance(data, Sequence)
            or len(data) != 4
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in data)
        ):
            raise CryptoError("a key share must be the integer list [index, holders, sigma, d_i]")
        index, holders, sigma, exponent = data
        try:
            return cls(public_key, index, holders, exponent, sigma)
        except InvalidInputError as e:
            raise CryptoError(f"malformed key share: {e}") from e

    def __repr__(self) -> str:  # never print the exponent
        return f"<KeyShare {self.index + 1}/{self.holders} for {self.public_key!r}>"


def deal_shares(
    private_key: PrivateKey, holders: int, *, sigma: int = SIGMA, rng: Rng | None = None
) -> list[KeyShare]:
    """The dealer's split of d into ``holders`` additive shares (module docstring)."""
    holders, sigma = _check_holders(holders), _check_sigma(sigma)
    rng = rng if rng is not None else Rng.system()
    pk = private_key.public_key
    d = decryption_exponent(private_key)
    bits = _share_bits(pk, sigma)
    exponents = [rng.randbits(bits) for _ in range(holders - 1)]
    exponents.append(d - sum(exponents))
    return [KeyShare(pk, i, holders, e, sigma) for i, e in enumerate(exponents)]


def combine(public_key: PublicKey, partials: Sequence[Sequence]) -> list[int]:
    """The plaintexts (signed, in (-n/2, n/2]) from every holder's partial decryptions.

    ``partials`` holds one list per holder, all of the same length.  Raises
    :class:`~smc_hmm.errors.CryptoError` if the product is not of the form 1 + m n:
    a missing, repeated or corrupted share.
    """
    lists = [list(p) for p in partials]
    if len(lists) < 2 or len({len(p) for p in lists}) != 1:
        raise InvalidInputError("combine needs two or more partial lists of equal length")
    n, n2 = public_key.n_mpz, public_key.nsquare_mpz
    half = n // 2
    public_key.meter.count("decrypt_combine", len(lists[0]))
    out = []
    for column in zip(*lists):
        x = mpz(1)
        for part in column:
            x = x * mpz(part) % n2
        if (x - 1) % n:
            raise CryptoError("partial decryptions do not combine: a share is missing or wrong")
        m = (x - 1) // n
        out.append(int(m - n) if m > half else int(m))
    return out


def partial_width(public_key: PublicKey) -> int:
    """Bytes per partial decryption on the wire (that of n^2)."""
    return (2 * public_key.bits + 7) // 8


def pack_partials(public_key: PublicKey, partials: Sequence) -> bytes:
    """Partial decryptions as one bytes string of fixed-width big-endian integers."""
    width = partial_width(public_key)
    return b"".join(int(x).to_bytes(width, "big") for x in partials)


def unpack_partials(public_key: PublicKey, blob: bytes, count: int) -> list[mpz]:
    """``count`` partial decryptions from :func:`pack_partials`' bytes (range-checked)."""
    width = partial_width(public_key)
    if not isinstance(blob, bytes) or len(blob) != count * width:
        raise InvalidCiphertextError(
            f"expected {count} partial decryptions of {width} bytes, got "
            f"{len(blob) if isinstance(blob, bytes) else type(blob).__name__}"
        )
    n2 = public_key.nsquare_mpz
    out = [mpz(int.from_bytes(blob[i * width : (i + 1) * width], "big")) for i in range(count)]
    if any(not 0 < x < n2 for x in out):
        raise InvalidCiphertextError("a partial decryption lies outside (0, n^2)")
    return out
