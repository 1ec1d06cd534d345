"""DGK encryption: the small-plaintext scheme of the DGK comparison protocol.

Damgard, Geisler and Kroigaard, "Efficient and secure comparison for on-line
auctions" (ACISP 2007) and its correction (IJACT 2009); used with Veugen's
improvements by :mod:`protocols.stages.dgk` (Veugen 2012, ePrint 2018/1100).

Key (``bits``-bit n, ``t``-bit subgroup primes, a small prime ``u``):

* n = p q with u | p - 1, u | q - 1, v_p | p - 1, v_q | q - 1, where v_p, v_q
  are distinct t-bit primes (t = 160 for a 2048-bit n; smaller only for tests);
* g of order u v_p v_q in Z*_n and h of order v_p v_q;
* E(m, r) = g^m h^r mod n for m in Z_u; r uniform of ``r_bits`` = ceil(2.5 t)
  bits for a public-key encryptor (statistically close to uniform on <h>; DGK
  2007, Sec. 4).  The key holder draws h^r exactly uniform on <h> by CRT
  (r_p mod v_p, r_q mod v_q) with fixed-base tables modulo p and q.

Written over gmpy2 rather than taken from ``tno-mpc-encryption-schemes-dgk``:
its keys and ciphertexts are its own objects (not our wire codec's fixed-width
fields, our cost ledger or our typed errors), its key generation took 25-300 s
here against well under a second, and it has neither the fixed-base tables
nor the key holder's CRT paths that make this one fast.

Only the *zero test* is needed: c = E(m) has c^{v_p} = g^{m v_p} mod p, which
is 1 iff u | m (:meth:`DGKPrivateKey.is_zero`); v_p and p are secret, so the
exponentiation is constant time (:mod:`smc_hmm.crypto.consttime`), as is every other
one whose exponent comes from the private key (decryption, key generation).  Full
decryption of the small plaintext space is offered for tests (a table of u entries).

Homomorphic helpers (:class:`DGKPublicKey`): E(m1) E(m2) = E(m1 + m2),
E(m)^k = E(k m), E(m)^-1 = E(-m), constants g^m without randomness,
re-randomisation by h^r.  Encryption by the public key uses a window-8
fixed-base table of h (r_bits / 8 multiplications each).

On the wire a DGK public key is the plain integer list ``[n, g, h, u, t]``
(:meth:`DGKPublicKey.to_wire` / :meth:`DGKPublicKey.from_wire`: the codec
carries big ints; nothing is pickled) and ciphertexts are one bytes string of
fixed-width big-endian integers (:meth:`DGKPublicKey.pack` / ``unpack``).

Key generation is the slow part (measured on the 2-core development machine,
gmpy2 2.3, one thread, n = 2048 bits, t = 160, u = 193: 0.23 to 0.87 s over
five runs, median 0.61 s; 0.06-0.1 s at 1024 bits; ``smc-hmm bench compare``
prints it), so :func:`dgk_keypair_for` caches one DGK key pair per Paillier key
fingerprint in a small LRU (:class:`DGKKeyCache`): a process-level instance
by default, or one owned by the caller.
"""

from __future__ import annotations

import hashlib
import math
import threading
import warnings
from collections import OrderedDict

import gmpy2
from gmpy2 import mpz

from smc_hmm.crypto import consttime
from smc_hmm.crypto.keys import NULL_METER, Meter, all_units
from smc_hmm.crypto.randomness import FixedBaseTable
from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import (
    CryptoError,
    InsecureKeyWarning,
    InvalidCiphertextError,
    InvalidInputError,
)
from smc_hmm.limits import MAX_DGK_T, MAX_DGK_U_BITS, MAX_KEY_BITS, check_at_most, check_key_bits

__all__ = [
    "DGKKeyCache",
    "DGKPrivateKey",
    "DGKPublicKey",
    "default_t",
    "dgk_keypair_for",
    "generate_dgk_keypair",
    "min_u",
]

DEFAULT_DGK_BITS = 2048
SECURE_T = 160
MIN_SECURE_DGK_BITS = 2048
#: the smallest l a cached key's u is chosen for (one key serves every l up to it)
_U_FLOOR_BITS = 64


def min_u(l_bits: int) -> int:
    """The smallest admissible u for l-bit comparisons: every Veugen/DGK term
    c_i lies in [-2, 3 l - 1] and c_{-1} in [0, l + 1], so u >= 3 l keeps each
    nonzero term nonzero modulo u."""
    return 3 * l_bits


def default_t(bits: int) -> int:
    """t = 160 for n of 2048 bits or more; a proportionally smaller t (>= 32) for
    the insecure test sizes."""
    return SECURE_T if bits >= MIN_SECURE_DGK_BITS else max(32, min(SECURE_T, bits // 16))


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | type(mpz(0))) or value < lo:
        raise InvalidInputError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


class DGKPublicKey:
    """A DGK public key (n, g, h, u, t) with a lazily built fixed-base table of h."""

    __slots__ = (
        "n",
        "g",
        "h",
        "u",
        "t",
        "bits",
        "width",
        "r_bits",
        "fingerprint",
        "_g_inv",
        "_table",
        "_lock",
    )

    def __init__(self, n: int, g: int, h: int, u: int, t: int):
        n = _check_int("DGK n", n, 15)
        t = _check_int("DGK t", t, 8)
        u = _check_int("DGK u", u, 3)
        if n % 2 == 0:
            raise CryptoError("a DGK modulus must be odd")
        if not gmpy2.is_prime(u) or u.bit_length() > 32:
            raise CryptoError(f"DGK u must be a prime below 2^32, got {u}")
        for name, x in (("g", g), ("h", h)):
            x = _check_int(f"DGK {name}", x, 2)
            if x >= n or gmpy2.gcd(x, n) != 1:
                raise CryptoError(f"DGK {name} must be a unit of Z_n other than 1")
        self.n, self.g, self.h = mpz(n), mpz(g), mpz(h)
        self.u, self.t = u, t
        self.bits = n.bit_length()
        self.width = (self.bits + 7) // 8
        self.r_bits = math.ceil(2.5 * t)
        digest = hashlib.sha256()
        for x in (n, int(g), int(h), u, t):
            digest.update(int(x).to_bytes((int(x).bit_length() + 8) // 8, "big"))
        self.fingerprint = digest.digest()[:16]
        self._g_inv = gmpy2.invert(self.g, self.n)
        self._table: FixedBaseTable | None = None
        self._lock = threading.Lock()

    # -- wire --------------------------------------------------------------------------

    def to_wire(self) -> list[int]:
        """``[n, g, h, u, t]`` as plain ints (the codec carries big ints)."""
        return [int(self.n), int(self.g), int(self.h), self.u, self.t]

    @classmethod
    def from_wire(cls, data, *, max_bits: int = MAX_KEY_BITS) -> DGKPublicKey:
        """The inverse of :meth:`to_wire`; any malformed value is a :class:`CryptoError`.

        A peer's modulus above ``max_bits``, t above ``max_dgk_t`` or u above
        ``max_dgk_u_bits`` (:mod:`smc_hmm.limits`) raises ParameterBoundError before
        anything is computed with them (a primality test of u, the table of h).
        """
        if not isinstance(data, list | tuple) or len(data) != 5:
            raise CryptoError("a DGK public key is the list [n, g, h, u, t]")
        n, _, _, u, t = (x if type(x) is int else 0 for x in data)  # types: the constructor's
        check_key_bits(abs(n).bit_length(), max_bits, "the peer's DGK modulus")
        check_at_most("max_dgk_t", max(t, 0), MAX_DGK_T, "the peer's DGK t")
        check_at_most(
            "max_dgk_u_bits", abs(u).bit_length(), MAX_DGK_U_BITS, "the peer's DGK u (bits)"
        )
        try:
            return cls(*data)
        except InvalidInputError as e:
            raise CryptoError(f"malformed DGK public key: {e}") from e

    def pack(self, ciphertexts) -> bytes:
        """Fixed-width big-endian bytes of the ciphertexts (``width`` bytes each)."""
        w = self.width
        return b"".join(int(c).to_bytes(w, "big") for c in ciphertexts)

    def unpack(self, blob: bytes, count: int) -> list[mpz]:
        """Ciphertexts from :meth:`pack`'s bytes, each checked to be a unit of Z_n."""
        w, n = self.width, self.n
        if not isinstance(blob, bytes) or len(blob) != count * w:
            raise InvalidCiphertextError(
                f"expected {count} DGK ciphertexts of {w} bytes, got "
                f"{len(blob) if isinstance(blob, bytes) else type(blob).__name__}"
            )
        out = [mpz(int.from_bytes(blob[i * w : (i + 1) * w], "big")) for i in range(count)]
        if not all(0 < c < n for c in out) or not all_units(out, n):
            raise InvalidCiphertextError("DGK ciphertext is not a unit of Z_n")
        return out

    # -- encryption and homomorphic helpers ------------------------------------------------

    @property
    def table(self) -> FixedBaseTable:
        with self._lock:
            if self._table is None:
                self._table = FixedBaseTable(self.h, self.n, self.r_bits, window=8)
            return self._table

    def constant(self, m: int) -> mpz:
        """g^m mod n: the deterministic encryption of m (for homomorphic arithmetic only)."""
        m = int(m)
        if m >= 0:
            return gmpy2.powmod(self.g, m, self.n)
        return gmpy2.powmod(self._g_inv, -m, self.n)

    def randomizers(self, count: int, rng: Rng) -> list[mpz]:
        """``count`` fresh h^r, r uniform of ``r_bits`` bits."""
        table = self.table
        return table.pow_many([rng.randbits(self.r_bits) for _ in range(count)])

    def encrypt(self, values, rng: Rng, meter: Meter = NULL_METER) -> list[mpz]:
        """E(m) = g^m h^r for integers m (taken modulo u)."""
        values = [int(v) % self.u for v in values]
        hs = self.randomizers(len(values), rng)
        n = self.n
        meter.count("dgk_encrypt", len(values))
        return [self.constant(m) * r % n if m else r for m, r in zip(values, hs)]

    def rerandomize(self, ciphertexts, rng: Rng, meter: Meter = NULL_METER) -> list[mpz]:
        n = self.n
        hs = self.randomizers(len(ciphertexts), rng)
        meter.count("dgk_rerandomize", len(hs))
        return [c * r % n for c, r in zip(ciphertexts, hs)]

    def add(self, c1, c2) -> mpz:
        """E(m1 + m2)."""
        return c1 * c2 % self.n

    def neg(self, c) -> mpz:
        """E(-m)."""
        return gmpy2.invert(c, self.n)

    def scalar_mul(self, c, k: int) -> mpz:
        """E(k m) for an integer k (negative k by inversion)."""
        k = int(k)
        return gmpy2.powmod(c, k, self.n) if k >= 0 else gmpy2.powmod(self.neg(c), -k, self.n)

    def __eq__(self, other) -> bool:
        return isinstance(other, DGKPublicKey) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"<DGKPublicKey {self.bits} bits t={self.t} u={self.u} {self.fingerprint[:4].hex()}>"

    def __reduce__(self):
        return (DGKPublicKey, tuple(self.to_wire()))


class DGKPrivateKey:
    """The DGK private key: p, q, v_p, v_q; zero test, exact CRT encryption, small decryption."""

    __slots__ = (
        "public_key",
        "p",
        "q",
        "v_p",
        "v_q",
        "threads",
        "secret_powmod",
        "_tables",
        "_q_inv",
        "_lock",
        "_dlog",
    )

    def __init__(self, public_key: DGKPublicKey, p: int, q: int, v_p: int, v_q: int):
        if not isinstance(public_key, DGKPublicKey):
            raise InvalidInputError("DGKPrivateKey needs a DGKPublicKey")
        p, q, v_p, v_q = mpz(p), mpz(q), mpz(v_p), mpz(v_q)
        if p * q != public_key.n:
            raise CryptoError("p q does not match the DGK modulus")
        u = public_key.u
        for prime, v in ((p, v_p), (q, v_q)):
            if (prime - 1) % (u * v) != 0:
                raise CryptoError("u v_p must divide p - 1 and u v_q must divide q - 1")
        self.public_key = public_key
        self.p, self.q, self.v_p, self.v_q = p, q, v_p, v_q
        self._q_inv = gmpy2.invert(q, p)
        self._tables = None
        self._dlog = None
        self._lock = threading.Lock()
        #: threads of batched zero tests (the constant-time backend releases the GIL)
        self.threads = 2
        #: the constant-time exponentiation (None: :func:`consttime.default_backend`)
        self.secret_powmod: consttime.SecretPowmod | None = None

    def _crt_tables(self):
        with self._lock:
            if self._tables is None:
                pk = self.public_key
                p, q = self.p, self.q
                hp, hq = pk.h % p, pk.h % q
                tp = FixedBaseTable(hp, p, self.v_p.bit_length(), window=8)
                tq = FixedBaseTable(hq, q, self.v_q.bit_length(), window=8)
                # g^m h^c for every m in Z_u, with one fixed secret c per prime (nonzero
                # mod v): a value's encryption is then one table lookup and one
                # full-size multiplication whatever m is (no branch, no multiplication by
                # 1), and h^(r + c) is as uniform on <h> as h^r
                rng = Rng.system()
                cp, cq = 1 + rng.randbelow(int(self.v_p) - 1), 1 + rng.randbelow(int(self.v_q) - 1)
                secret = self.secret_powmod  # c is secret: h^c in constant time
                self._tables = (
                    tp,
                    tq,
                    _powers(pk.g % p, pk.u, consttime.secret_powmod(hp, cp, p, secret), p),
                    _powers(pk.g % q, pk.u, consttime.secret_powmod(hq, cq, q, secret), q),
                )
            return self._tables

    def encrypt(self, values, rng: Rng, meter: Meter = NULL_METER) -> list[mpz]:
        """E(m) with h^r exactly uniform on <h> (by CRT: r_p < v_p, r_q < v_q); m in Z_u.

        The same big-integer operations for every m (a secret bit costs the same
        whether it is 0 or 1): two fixed-base powers, two table lookups, two
        full-size multiplications and the CRT recombination."""
        tp, tq, gp, gq = self._crt_tables()
        p, q, q_inv, u = self.p, self.q, self._q_inv, self.public_key.u
        vp, vq = int(self.v_p), int(self.v_q)
        out = []
        for m in values:
            m = int(m) % u
            xp = tp.pow(rng.randbelow(vp)) * gp[m] % p
            xq = tq.pow(rng.randbelow(vq)) * gq[m] % q
            out.append(xq + q * ((xp - xq) * q_inv % p))
        meter.count("dgk_encrypt", len(out))
        return out

    def _powers_v_p(self, ciphertexts) -> list[mpz]:
        """c^{v_p} mod p for each c: v_p and p are secret, so in constant time, split over
        :attr:`threads` threads (:func:`consttime.powmod_jobs`)."""
        cs = [mpz(c) for c in ciphertexts]
        return consttime.powmod_jobs([(cs, self.v_p, self.p)], self.threads, self.secret_powmod)[0]

    def is_zero(self, ciphertexts, meter: Meter = NULL_METER) -> list[bool]:
        """For each c = E(m): whether m = 0 mod u, i.e. c^{v_p} = 1 mod p."""
        cs = list(ciphertexts)
        meter.count("dgk_zero_test", len(cs))
        return [x == 1 for x in self._powers_v_p(cs)]

    def decrypt(self, ciphertexts) -> list[int]:
        """m in [0, u) for each c (a table of the u values of g^{m v_p} mod p)."""
        p = self.p
        with self._lock:
            if self._dlog is None:
                base = consttime.secret_powmod(self.public_key.g, self.v_p, p, self.secret_powmod)
                table, x = {}, mpz(1)
                for m in range(self.public_key.u):
                    table[x] = m
                    x = x * base % p
                self._dlog = table
        out = []
        for x in self._powers_v_p(ciphertexts):
            if x not in self._dlog:
                raise InvalidCiphertextError("not a DGK ciphertext under this key")
            out.append(self._dlog[x])
        return out

    def __repr__(self) -> str:
        return f"<DGKPrivateKey for {self.public_key!r}>"


# -- key generation ---------------------------------------------------------------------


def _prime_of_bits(bits: int, rng: Rng) -> mpz:
    while True:
        p = gmpy2.next_prime(mpz(rng.randbits(bits)) | (mpz(1) << (bits - 1)))
        if p.bit_length() == bits:
            return p


def _powers(g: mpz, u: int, blind: mpz, prime: mpz) -> list[mpz]:
    """[g^m * blind mod prime for m in range(u)]."""
    out, x = [], blind % prime
    for _ in range(u):
        out.append(x)
        x = x * g % prime
    return out


def _structured_prime(bits: int, u: int, v: mpz, rng: Rng) -> mpz:
    """A ``bits``-bit prime p = 2 u v f + 1 (f random)."""
    step = 2 * u * v
    f_bits = bits - step.bit_length()
    if f_bits < 16:
        raise InvalidInputError(f"{bits}-bit primes leave no room for u and a t-bit v")
    while True:
        f = mpz(rng.randbits(f_bits)) | (mpz(1) << (f_bits - 1))
        p = step * f + 1
        if p.bit_length() == bits and gmpy2.is_prime(p, 30):
            return p


def _generator(prime: mpz, order_factors: tuple, rng: Rng) -> mpz:
    """An element of Z*_prime of order exactly prod(order_factors) (distinct primes)."""
    order = math.prod(int(f) for f in order_factors)
    cofactor = (prime - 1) // order
    while True:  # exponents and modulus are the secret key's: constant time
        x = consttime.secret_powmod(2 + rng.randbelow(int(prime) - 3), cofactor, prime)
        if all(consttime.secret_powmod(x, order // int(f), prime) != 1 for f in order_factors):
            return x


def generate_dgk_keypair(
    bits: int = DEFAULT_DGK_BITS,
    *,
    u: int | None = None,
    l_bits: int = _U_FLOOR_BITS,
    t: int | None = None,
    insecure: bool = False,
    rng: Rng | None = None,
) -> tuple[DGKPublicKey, DGKPrivateKey]:
    """A fresh DGK key pair with an n of exactly ``bits`` bits.

    ``u`` defaults to the smallest prime >= :func:`min_u` (``l_bits``);
    ``t`` to :func:`default_t` (``bits``).  Keys below 2048 bits need
    ``insecure=True`` and emit :class:`InsecureKeyWarning` (tests only).
    """
    bits = _check_int("DGK key bits", bits, 128)
    if bits % 2:
        raise InvalidInputError(f"DGK key bits must be even, got {bits}")
    l_bits = _check_int("l", l_bits, 1)
    t = default_t(bits) if t is None else _check_int("t", t, 16)
    if u is None:
        u = int(gmpy2.next_prime(min_u(l_bits) - 1))
    u = _check_int("u", u, 3)
    if not gmpy2.is_prime(u) or u < min_u(l_bits):
        raise InvalidInputError(f"u must be a prime >= {min_u(l_bits)} for {l_bits}-bit inputs")
    if bits // 2 < u.bit_length() + t + 18:
        raise InvalidInputError(f"{bits}-bit DGK keys are too small for t = {t}, u = {u}")
    if bits < MIN_SECURE_DGK_BITS or t < SECURE_T:
        if not insecure:
            raise InvalidInputError(
                f"a {bits}-bit DGK key with t = {t} is insecure; pass insecure=True for tests only"
            )
        warnings.warn(
            f"generating an insecure {bits}-bit DGK key (t = {t})", InsecureKeyWarning, stacklevel=2
        )
    rng = rng if rng is not None else Rng.system()
    half = bits // 2
    while True:
        v_p = _prime_of_bits(t, rng)
        v_q = _prime_of_bits(t, rng)
        if v_p in (v_q, u) or v_q == u:
            continue
        p = _structured_prime(half, u, v_p, rng)
        q = _structured_prime(half, u, v_q, rng)
        n = p * q
        if p != q and n.bit_length() == bits:
            break
    # g: order u v_p mod p and u v_q mod q; h: order v_p mod p and v_q mod q (CRT)
    gp, gq = _generator(p, (u, v_p), rng), _generator(q, (u, v_q), rng)
    hp, hq = _generator(p, (v_p,), rng), _generator(q, (v_q,), rng)
    q_inv = gmpy2.invert(q, p)

    def crt(xp, xq):
        return xq + q * ((xp - xq) * q_inv % p)

    public = DGKPublicKey(int(n), int(crt(gp, gq)), int(crt(hp, hq)), u, t)
    return public, DGKPrivateKey(public, p, q, v_p, v_q)


# -- the cache -------------------------------------------------------------------------------


class DGKKeyCache:
    """A small LRU of DGK key pairs keyed by (Paillier fingerprint, bits, t).

    A cached key pair is reused for every l its u supports (u >= 3 l); a
    larger l replaces it with a new key pair.  Thread-safe.
    """

    def __init__(self, maxsize: int = 8):
        self.maxsize = _check_int("maxsize", maxsize, 1)
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.generated = 0

    def get(
        self,
        fingerprint: bytes,
        l_bits: int,
        bits: int,
        t: int | None = None,
        *,
        rng: Rng | None = None,
    ) -> tuple[DGKPublicKey, DGKPrivateKey]:
        l_bits = _check_int("l", l_bits, 1)
        t = default_t(bits) if t is None else t
        key = (bytes(fingerprint), int(bits), int(t))
        with self._lock:  # generation under the lock: one key per fingerprint, never two
            entry = self._entries.get(key)
            if entry is not None and entry[0].u >= min_u(l_bits):
                self._entries.move_to_end(key)
                return entry
            with warnings.catch_warnings():
                if bits < MIN_SECURE_DGK_BITS:  # the caller's Paillier key is as small
                    warnings.simplefilter("ignore", InsecureKeyWarning)
                entry = generate_dgk_keypair(
                    bits,
                    l_bits=max(l_bits, _U_FLOOR_BITS),
                    t=t,
                    insecure=bits < MIN_SECURE_DGK_BITS or t < SECURE_T,
                    rng=rng,
                )
            self.generated += 1
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
            return entry

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_PROCESS_CACHE = DGKKeyCache()


def dgk_keypair_for(
    paillier_public_key,
    l_bits: int,
    *,
    bits: int | None = None,
    t: int | None = None,
    cache: DGKKeyCache | None = None,
    rng: Rng | None = None,
) -> tuple[DGKPublicKey, DGKPrivateKey]:
    """The DGK key pair that goes with a Paillier key, generated once and reused.

    ``bits`` defaults to the Paillier key's size, ``t`` to :func:`default_t`.
    Keys below 2048 bits are generated only for a Paillier key that is itself
    below 2048 bits (tests), without a second warning.
    """
    fingerprint = getattr(paillier_public_key, "fingerprint", None)
    if not isinstance(fingerprint, bytes):
        raise InvalidInputError("dgk_keypair_for needs an smc_hmm Paillier PublicKey")
    bits = paillier_public_key.bits if bits is None else _check_int("DGK bits", bits, 128)
    if bits < MIN_SECURE_DGK_BITS and paillier_public_key.bits >= MIN_SECURE_DGK_BITS:
        raise InvalidInputError(
            f"a {bits}-bit DGK key would weaken a {paillier_public_key.bits}-bit Paillier key"
        )
    return (cache if cache is not None else _PROCESS_CACHE).get(
        fingerprint, l_bits, bits, t, rng=rng
    )
