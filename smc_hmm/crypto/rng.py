"""Randomness for the crypto and protocol layers.

Everything draws from an :class:`Rng`.  The default wraps the operating
system's CSPRNG (:mod:`secrets`); a seeded generator exists only for tests and
reproducible experiments and says so in its ``repr`` (``insecure=True``).
"""

from __future__ import annotations

import random
import secrets

from gmpy2 import mpz

from smc_hmm.errors import InvalidInputError


class Rng:
    """A source of uniform integers: CSPRNG by default, seeded only on request."""

    __slots__ = ("_gen", "insecure")

    def __init__(self, generator: random.Random | None = None, *, insecure: bool = False):
        self._gen = generator if generator is not None else secrets.SystemRandom()
        self.insecure = insecure

    @classmethod
    def system(cls) -> Rng:
        """The operating system's CSPRNG (``secrets.SystemRandom``)."""
        return cls()

    @classmethod
    def seeded(cls, seed: int) -> Rng:
        """A deterministic Mersenne-Twister generator. For tests only: not cryptographic."""
        if not isinstance(seed, int):
            raise InvalidInputError(f"seed must be an int, got {type(seed).__name__}")
        return cls(random.Random(seed), insecure=True)

    def spawn(self) -> Rng:
        """An independent generator (seeded children for seeded parents)."""
        if self.insecure:
            return Rng(random.Random(self._gen.getrandbits(128)), insecure=True)
        return Rng()

    def randbits(self, k: int) -> int:
        return self._gen.getrandbits(k) if k > 0 else 0

    def randbelow(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        if n <= 0:
            raise InvalidInputError(f"randbelow needs n > 0, got {n}")
        return self._gen.randrange(int(n))

    def unit_mod(self, n) -> mpz:
        """Uniform element of Z*_n (nonzero and coprime to n, overwhelmingly likely)."""
        import gmpy2

        while True:
            r = mpz(self._gen.randrange(1, int(n)))
            if gmpy2.gcd(r, n) == 1:
                return r

    def signed_mask(self, bits: int) -> int:
        """Uniform integer in [-2^bits, 2^bits): an additive blinding mask."""
        return self._gen.getrandbits(bits + 1) - (1 << bits)

    def random(self) -> float:
        return self._gen.random()

    def shuffle(self, items: list) -> None:
        self._gen.shuffle(items)

    def __repr__(self) -> str:
        return "Rng(seeded, insecure)" if self.insecure else "Rng(system CSPRNG)"
