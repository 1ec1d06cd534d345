"""Paillier randomizers: the factor rho in c = (1 + m n) * rho mod n^2.

Three sources, all producing elements of the subgroup of n-th residues:

* :class:`NthPowerRandomizer` -- rho = r^n for uniform r in Z*_n (textbook
  Paillier, as phe does).  When the encryptor also holds the private key the
  power is taken by CRT modulo p^2 and q^2 (about 3x faster), with the exponents
  n mod p(p-1) and n mod q(q-1): they derive from the primes, so these run in constant
  time (:mod:`smc_hmm.crypto.consttime`).
* :class:`DJNRandomizer` -- Damgard-Jurik-Nielsen short exponents: rho = h_s^alpha
  with h_s = (-x^2)^n mod n^2 fixed and alpha uniform of ``alpha_bits`` bits.
  With ``alpha_bits = bits(n)/2`` (default) this is DJN's original setting: the
  distribution is statistically close to a random n-th residue under the
  factoring-related assumption of DJN 2010, Sec. 2.  ``alpha_bits = 2 * kappa``
  (e.g. 224 for kappa = 112) is faster but rests on the stronger *short
  exponent* assumption for the group of n-th residues; it is an explicit option.
  A fixed-base table (window w, :func:`table_window`: 10 for a 2048-bit key holder's CRT
  pair, else 8) turns each draw into bits/w multiplications.
* :class:`RandomizerPool` -- offline/online split: a background thread fills a
  queue of precomputed randomizers; online encryption is one multiplication.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

import gmpy2
import numpy as np
from gmpy2 import mpz

from smc_hmm.crypto import native
from smc_hmm.crypto.consttime import powmod_jobs
from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import InvalidInputError


class FixedBaseTable:
    """Precomputed g^(d * 2^(w i)) mod M for fast g^e with e < 2^bits (Brickell et al.).

    Where the native kernel runs (:mod:`smc_hmm.crypto.native`) the table lives in its
    Montgomery form and the products are computed there, one multiplication per nonzero
    digit as here; the results are the same numbers."""

    __slots__ = ("modulus", "window", "bits", "rows", "native")

    def __init__(self, base: mpz, modulus: mpz, bits: int, window: int = 8):
        self.modulus, self.window, self.bits = modulus, window, bits
        count = -(-bits // window)
        kernel = native.kernel()
        self.native = None
        if kernel is not None and kernel.fits(modulus):
            self.native = (kernel, kernel.comb_table(base, modulus, count, window), count)
            self.rows = None
            return
        rows = []
        g = mpz(base)
        for _ in range(count):
            row = [mpz(1), g]
            for _ in range(2, 1 << window):
                row.append(row[-1] * g % modulus)
            rows.append(row)
            g = row[-1] * g % modulus  # g^(2^w) for the next row
        self.rows = rows

    def _check(self, exponents: list[int]) -> None:
        if any(e < 0 or e.bit_length() > self.bits for e in exponents):
            raise InvalidInputError(f"exponent out of the table's range [0, 2^{self.bits})")

    def pow(self, e: int) -> mpz:
        """g^e for one exponent (:meth:`pow_many` cuts a batch's digits faster)."""
        e = int(e)
        self._check([e])
        if self.native is not None:
            return self.pow_many([e])[0]
        mask, w, mod = (1 << self.window) - 1, self.window, self.modulus
        acc = None
        for row in self.rows:
            if not e:
                break
            d = e & mask
            if d:
                acc = row[d] if acc is None else acc * row[d] % mod
            e >>= w
        return mpz(1) if acc is None else acc

    def _digits(self, exponents: list[int], count: int) -> np.ndarray:
        """Every exponent's base-2^w digits, lowest first (numpy cuts the whole batch)."""
        w = self.window
        size = (count * w + 7) // 8
        raw = np.frombuffer(b"".join(e.to_bytes(size, "little") for e in exponents), np.uint8)
        bits = np.unpackbits(raw.reshape(len(exponents), size), axis=1, bitorder="little")
        return bits[:, : count * w].reshape(len(exponents), count, w) @ (1 << np.arange(w))

    def pow_many(self, exponents) -> list[mpz]:
        """g^e for each e: one multiplication per nonzero window digit, the digits of the
        whole batch cut at once (numpy) instead of by shifting each big integer."""
        exponents = [int(e) for e in exponents]
        self._check(exponents)
        if not exponents:
            return []
        if self.native is not None:
            kernel, table, count = self.native
            digits = self._digits(exponents, count)
            return kernel.comb_product(table, self.modulus, count, self.window, digits)
        digits = self._digits(exponents, len(self.rows))
        mod, out = self.modulus, []
        for row_digits in digits.tolist():
            acc = None
            for row, d in zip(self.rows, row_digits):
                if d:
                    acc = row[d] if acc is None else acc * row[d] % mod
            out.append(mpz(1) if acc is None else acc)
        return out


class Randomizer:
    """Interface: ``draw(count)`` returns ``count`` fresh randomizers rho (n-th residues)."""

    name = "abstract"

    def draw(self, count: int) -> list[mpz]:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


class NthPowerRandomizer(Randomizer):
    """rho = r^n mod n^2, r uniform in Z*_n; CRT when the primes are known."""

    name = "r^n"

    def __init__(self, n: mpz, rng: Rng, primes: tuple[mpz, mpz] | None = None):
        self.n, self.nsquare, self.rng = mpz(n), mpz(n) * mpz(n), rng
        self._crt = None
        if primes is not None:
            p, q = (mpz(x) for x in primes)
            p2, q2 = p * p, q * q
            self._crt = (
                p2,
                q2,
                self.n % (p * (p - 1)),
                self.n % (q * (q - 1)),
                gmpy2.invert(q2, p2),
                q2,
            )
            self.name = "r^n (CRT)"

    def draw(self, count: int) -> list[mpz]:
        rs = [self.rng.unit_mod(self.n) for _ in range(count)]
        if self._crt is None:
            return list(gmpy2.powmod_base_list(rs, self.n, self.nsquare)) if rs else []
        p2, q2, ep, eq, q2inv, _ = self._crt
        # exponents derived from the primes: constant time, the halves on two threads
        xp, xq = powmod_jobs([(rs, ep, p2), (rs, eq, q2)])
        return [b + ((a - b) * q2inv % p2) * q2 for a, b in zip(xp, xq)]


#: memory one randomizer's fixed-base tables may take (the CRT pair counts as one)
TABLE_BUDGET_BYTES = 64 << 20


def table_window(n: mpz, alpha_bits: int, primes=None) -> int:
    """The window of a DJN randomizer's fixed-base tables: for the key holder's CRT pair
    (entries modulo p^2 and q^2) the widest in 8..10 that fits ``TABLE_BUDGET_BYTES`` --
    10 for a 2048-bit key (60 MB, 103 instead of 128 multiplications per table) --, and 8
    for a table modulo n^2 (a peer's key: fewer draws, twice the entry size)."""
    if primes is None:
        return 8
    entry = (n.bit_length() + 7) // 8 + 32  # an mpz modulo p^2 (about n's size)
    kernel = native.kernel()
    if kernel is not None and kernel.fits(n):  # the kernel's limbs (p^2 has n's size)
        entry = kernel.comb_entry_bytes(n)
    for w in (10, 9):
        if 2 * -(-alpha_bits // w) * (entry << w) <= TABLE_BUDGET_BYTES:
            return w
    return 8


class DJNRandomizer(Randomizer):
    """rho = h_s^alpha, alpha uniform of ``alpha_bits`` bits, from a fixed-base table."""

    def __init__(
        self,
        n: mpz,
        rng: Rng,
        alpha_bits: int | None = None,
        window: int | None = None,
        primes: tuple[mpz, mpz] | None = None,
        h_s: mpz | None = None,
    ):
        n = mpz(n)
        self.n, self.nsquare, self.rng = n, n * n, rng
        self.alpha_bits = alpha_bits if alpha_bits is not None else (n.bit_length() + 1) // 2
        if self.alpha_bits < 128:
            raise InvalidInputError(f"alpha_bits={self.alpha_bits} is too short (need >= 128)")
        if h_s is None:
            x = rng.unit_mod(n)
            h_s = gmpy2.powmod((-x * x) % n, n, self.nsquare)
        self.h_s = mpz(h_s)
        self.window = window if window is not None else table_window(n, self.alpha_bits, primes)
        self._tables = None
        self._primes = primes
        self._lock = threading.Lock()
        self.name = f"DJN h_s^alpha, |alpha|={self.alpha_bits}" + (" (CRT)" if primes else "")

    def _build(self):
        with self._lock:
            if self._tables is None:
                if self._primes is None:
                    self._tables = FixedBaseTable(
                        self.h_s, self.nsquare, self.alpha_bits, self.window
                    )
                else:
                    p, q = (mpz(x) for x in self._primes)
                    p2, q2 = p * p, q * q
                    self._tables = (
                        FixedBaseTable(self.h_s % p2, p2, self.alpha_bits, self.window),
                        FixedBaseTable(self.h_s % q2, q2, self.alpha_bits, self.window),
                        gmpy2.invert(q2, p2),
                        p2,
                        q2,
                    )
        return self._tables

    def precompute(self) -> None:
        """Build the fixed-base table now (otherwise on first draw)."""
        self._build()

    def draw(self, count: int) -> list[mpz]:
        tables = self._tables or self._build()
        alphas = [self.rng.randbits(self.alpha_bits) for _ in range(count)]
        if isinstance(tables, FixedBaseTable):
            return tables.pow_many(alphas)
        tp, tq, q2inv, p2, q2 = tables
        return [
            rq + ((rp - rq) * q2inv % p2) * q2
            for rp, rq in zip(tp.pow_many(alphas), tq.pow_many(alphas))
        ]

    def params(self) -> dict:
        """What a worker process needs to rebuild this randomizer (no secrets but primes)."""
        return {
            "n": int(self.n),
            "h_s": int(self.h_s),
            "alpha_bits": self.alpha_bits,
            "window": self.window,
            "primes": None if self._primes is None else tuple(int(x) for x in self._primes),
        }


class RandomizerPool(Randomizer):
    """Offline/online split: precomputed randomizers consumed by online encryption.

    ``fill(k)`` precomputes k values now (offline phase); ``start()`` runs a
    daemon thread that keeps the pool topped up to ``capacity``.  ``draw`` takes
    from the pool and computes any shortfall synchronously (counted in
    ``misses``), so encryption never blocks on the background worker.  Each
    value is handed out once.
    """

    def __init__(self, source: Randomizer, capacity: int = 4096, chunk: int = 32):
        if capacity <= 0:
            raise InvalidInputError("pool capacity must be positive")
        self.source, self.capacity, self.chunk = source, capacity, chunk
        self._values: deque = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.hits = 0
        self.misses = 0
        self.name = f"pool({source.describe()})"

    def __len__(self) -> int:
        return len(self._values)

    def fill(self, count: int | None = None) -> None:
        """Offline phase: precompute until the pool holds ``count`` (default capacity)."""
        target = min(self.capacity, count if count is not None else self.capacity)
        while len(self._values) < target:
            batch = self.source.draw(min(self.chunk, target - len(self._values)))
            with self._cond:
                self._values.extend(batch)

    def offer(self, values) -> None:
        """Add randomizers precomputed elsewhere (e.g. by a worker process), up to capacity."""
        with self._cond:
            room = self.capacity - len(self._values)
            self._values.extend(mpz(v) for v in list(values)[: max(0, room)])
            self._cond.notify_all()

    def start(self) -> RandomizerPool:
        """Start the background filler thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="randomizer-pool", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while len(self._values) >= self.capacity and not self._stop.is_set():
                    self._cond.wait(0.5)
            if self._stop.is_set():
                return
            batch = self.source.draw(self.chunk)
            with self._cond:
                self._values.extend(batch)

    def draw(self, count: int) -> list[mpz]:
        out = []
        with self._cond:
            take = min(count, len(self._values))
            for _ in range(take):
                out.append(self._values.popleft())
            self._cond.notify_all()
        self.hits += take
        if take < count:
            self.misses += count - take
            out.extend(self.source.draw(count - take))
        return out

    def __enter__(self) -> RandomizerPool:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# -- randomizers kept per process -------------------------------------------------------------

#: DJN randomizers (and so fixed-base tables: 18 MB for a peer's 2048-bit key, 60 MB for a
#: key holder's CRT pair) that one process keeps; the least recently used beyond are dropped
TABLES_KEPT = 4


class _Kept:
    """A small thread-safe LRU of randomizers by key (one per process and purpose)."""

    def __init__(self, size: int = TABLES_KEPT):
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.size = size

    def get(self, key, make):
        with self._lock:
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = make()
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
            self._items.move_to_end(key)
            return item

    def __len__(self) -> int:
        return len(self._items)


_FROM_PARAMS = _Kept()  # e.g. in a worker lane: rebuilt from a caller's parameters
_PUBLIC = _Kept()  # keys without their primes (a peer's key), by modulus


def public_randomizer(n: mpz) -> DJNRandomizer:
    """The DJN randomizer this process uses for a public key ``n`` whose primes it does not
    know.  Every key object of the modulus shares it, so a peer's key received anew in each
    session does not rebuild the fixed-base table (here, nor in the worker lanes, which key
    theirs by the same h_s); its h_s is as public as n."""
    n = mpz(n)
    return _PUBLIC.get(int(n), lambda: DJNRandomizer(n, Rng.system()))


def randomizer_from_params(params: dict) -> DJNRandomizer:
    """The DJN randomizer described by :meth:`DJNRandomizer.params`, built once per process
    (its fixed-base table is the expensive part) and kept while in use."""
    key = (params["n"], params["h_s"], params["alpha_bits"], params["window"])

    def make() -> DJNRandomizer:
        primes = params["primes"]
        return DJNRandomizer(
            mpz(params["n"]),
            Rng.system(),
            params["alpha_bits"],
            params["window"],
            primes=None if primes is None else tuple(mpz(p) for p in primes),
            h_s=mpz(params["h_s"]),
        )

    return _FROM_PARAMS.get(key, make)


# -- the offline phase over compute lanes ----------------------------------------------------


def draw_from_params(params: dict, count: int) -> list[int]:
    """``count`` randomizers of :func:`randomizer_from_params`, e.g. in a worker lane."""
    return [int(v) for v in randomizer_from_params(params).draw(count)]


def precompute(randomizer: Randomizer, count: int, compute=None) -> RandomizerPool:
    """The offline phase for one key: ``count`` randomizers, drawn before they are needed
    and spread over ``compute``'s lanes (a :class:`~smc_hmm.compute.Compute`; the caller
    draws its own share), in a pool that online encryption then takes them from."""
    if count < 0:
        raise InvalidInputError("the number of randomizers to precompute must be >= 0")
    pool = RandomizerPool(randomizer, capacity=max(count, 1))
    if compute is None or not compute.parallel or not hasattr(randomizer, "params"):
        pool.fill(count)
        return pool
    shares = [len(c) for c in compute.chunks(range(count))]
    params = randomizer.params()
    parts = compute.map(
        draw_from_params,
        [params] * len(shares),
        shares,
        local=lambda _p, k: randomizer.draw(k),
    )
    for part in parts:
        pool.offer(part)
    return pool
