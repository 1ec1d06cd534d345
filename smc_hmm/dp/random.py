"""Randomness for differential-privacy mechanisms.

DP noise must be unpredictable to the analyst: a generator whose state can be guessed or
recovered from its outputs lets an attacker subtract the noise. :class:`DPRandom` gives
every mechanism its own stream of uniform bits from one of two sources:

- ``DPRandom.system()`` (the default everywhere): 64-bit words read from ``os.urandom``,
  the operating system's CSPRNG (``getrandom(2)`` on Linux, a ChaCha20 DRBG seeded from
  the kernel's entropy pool). This is a cryptographically secure generator, not a
  pseudo-random generator seeded from ``secrets``: numpy's PCG64 is fast but predictable
  from its outputs, so we do not use it for real releases. Every conversion from bits to
  noise (uniforms, signs, exponents) is vectorised numpy over those words.
- ``DPRandom.insecure_seeded(seed)``: numpy's PCG64 seeded through a
  :class:`numpy.random.SeedSequence`. Deterministic, for tests and reproducible
  experiments only; ``insecure`` is True and every release made with it says so.

Streams are never shared between mechanisms: a mechanism given a ``DPRandom`` calls
:meth:`DPRandom.spawn` and keeps the child (an independent ``SeedSequence`` child for a
seeded parent, a fresh handle on the OS CSPRNG otherwise).

Uniform conversions:

- :meth:`DPRandom.uniform` returns doubles on the 53-bit grid ``(k + 1/2) 2^-53``, strictly
  inside (0, 1), for inverse-CDF sampling (Laplace, geometric).
- :meth:`DPRandom.exponential`, :meth:`DPRandom.standard_normal` (Box-Muller) and
  :meth:`DPRandom.categorical` (inverse CDF) are exact transforms of those uniforms, for
  the K-norm mechanism's samplers (:mod:`smc_hmm.dp.knorm`).
- :meth:`DPRandom.uniform_full` returns doubles in (0, 1) where every double of the
  interval is reachable, with probability equal to the length of the real interval it
  represents (a geometric binade exponent and 52 uniform mantissa bits), the uniform
  ``U*`` that Mironov's snapping mechanism (Mironov 2012, section 5) requires.

Paper 000 (section 2.3, Laplace mechanism) and ``docs/dp-layer.md`` ("Randomness").
"""

from __future__ import annotations

import os

import numpy as np

from smc_hmm.errors import PrivacyParameterError

_TWO_POW_53 = float(2**53)


class DPRandom:
    """A source of uniform random bits for one DP mechanism.

    Build it with :meth:`system` (CSPRNG, the default) or :meth:`insecure_seeded`
    (deterministic, tests only); never with the constructor.
    """

    __slots__ = ("_generator", "_seed_sequence", "insecure")

    def __init__(self, _seed_sequence: np.random.SeedSequence | None = None) -> None:
        self._seed_sequence = _seed_sequence
        self._generator = None if _seed_sequence is None else np.random.PCG64(_seed_sequence)
        self.insecure = _seed_sequence is not None

    @classmethod
    def system(cls) -> DPRandom:
        """The operating system's CSPRNG (``os.urandom``): the default."""
        return cls()

    @classmethod
    def insecure_seeded(cls, seed: int) -> DPRandom:
        """A deterministic PCG64 stream. INSECURE: for tests and reproducible experiments."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise PrivacyParameterError(f"seed must be a nonnegative int, got {seed!r}")
        return cls(np.random.SeedSequence(int(seed)))

    @property
    def description(self) -> str:
        """Human-readable name of the bit source, recorded in every release."""
        if self.insecure:
            return "PCG64 seeded (INSECURE: tests and reproducible experiments only)"
        return "os.urandom CSPRNG"

    def spawn(self) -> DPRandom:
        """An independent stream for one mechanism (seeded children for seeded parents)."""
        if self._seed_sequence is None:
            return DPRandom()
        return DPRandom(self._seed_sequence.spawn(1)[0])

    # --- raw bits ---------------------------------------------------------------

    def words(self, size: int) -> np.ndarray:
        """``size`` independent uniform 64-bit words (uint64)."""
        if size < 0:
            raise PrivacyParameterError(f"size must be >= 0, got {size}")
        if self._generator is None:
            return np.frombuffer(os.urandom(8 * size), dtype=np.uint64).copy()
        return self._generator.random_raw(size).astype(np.uint64)

    # --- conversions ------------------------------------------------------------

    def uniform(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        """Uniform doubles strictly inside (0, 1) on the grid (k + 1/2) 2^-53."""
        count = int(np.prod(shape, dtype=np.int64))
        top = (self.words(count) >> np.uint64(11)).astype(np.float64)
        return ((top + 0.5) / _TWO_POW_53).reshape(shape)

    def signs(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        """Independent fair signs, +1.0 or -1.0."""
        count = int(np.prod(shape, dtype=np.int64))
        bits = (self.words(count) >> np.uint64(63)).astype(np.float64)
        return (1.0 - 2.0 * bits).reshape(shape)

    def exponential(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        """Independent Exp(1) draws, -ln U with U from :meth:`uniform` (finite, > 0)."""
        return -np.log(self.uniform(shape))

    def standard_normal(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        """Independent N(0, 1) draws by the Box-Muller transform of two uniforms."""
        count = int(np.prod(shape, dtype=np.int64))
        radius = np.sqrt(2.0 * self.exponential(count))
        angle = 2.0 * np.pi * self.uniform(count)
        return (radius * np.cos(angle)).reshape(shape)

    def categorical(self, p: np.ndarray, size: int) -> np.ndarray:
        """``size`` indices drawn with probabilities ``p`` (nonnegative, summing to ~1),
        by inverting the cumulative sum with :meth:`uniform`."""
        weights = np.asarray(p, dtype=np.float64)
        if weights.ndim != 1 or weights.size == 0 or np.any(weights < 0):
            raise PrivacyParameterError("p must be a non-empty vector of nonnegative weights")
        cumulative = np.cumsum(weights)
        if not (np.isfinite(cumulative[-1]) and cumulative[-1] > 0):
            raise PrivacyParameterError("p must have a finite, positive total")
        picks = np.searchsorted(cumulative, self.uniform(size) * cumulative[-1], side="right")
        return np.minimum(picks, weights.size - 1)

    def uniform_full(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        """Uniform doubles in (0, 1) at full floating-point resolution (Mironov's U*).

        The binade [2^-(k+1), 2^-k) is chosen with probability 2^-(k+1) (k = number of
        leading zero bits of a stream of uniform bits) and the 52 mantissa bits are
        uniform, so every double in (0, 1) has probability equal to its spacing.
        """
        count = int(np.prod(shape, dtype=np.int64))
        exponent = np.zeros(count, dtype=np.int64)
        pending = np.arange(count)
        while pending.size:
            word = self.words(pending.size)
            bit_length = _bit_length(word)
            exponent[pending] += 64 - bit_length
            pending = pending[word == 0]  # probability 2^-64 per draw: draw again
        mantissa = (self.words(count) >> np.uint64(12)).astype(np.float64)
        values = np.ldexp(1.0 + mantissa * 2.0**-52, -(exponent + 1))
        return values.reshape(shape)


def _bit_length(words: np.ndarray) -> np.ndarray:
    """Exact bit length of each uint64 (0 for 0), by a vectorised binary search."""
    remaining = words.copy()
    length = np.zeros(words.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        high = remaining >= (np.uint64(1) << np.uint64(shift))
        length[high] += shift
        remaining[high] >>= np.uint64(shift)
    return length + (remaining > 0)


def resolve_rng(rng: DPRandom | None) -> DPRandom:
    """The stream a new mechanism owns: a fresh CSPRNG for ``None``, else ``rng.spawn()``."""
    if rng is None:
        return DPRandom.system()
    if not isinstance(rng, DPRandom):
        raise PrivacyParameterError(
            "rng must be a smc_hmm.dp.random.DPRandom (DPRandom.system() or "
            f"DPRandom.insecure_seeded(seed)) or None, not {type(rng).__name__}"
        )
    return rng.spawn()
