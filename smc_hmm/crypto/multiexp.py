"""Multi-exponentiation: prod_i g_i^{e_i} mod M with signed exponents.

A linear combination of Paillier ciphertexts, E(sum_i w_i x_i), is the
multi-exponentiation prod_i E(x_i)^{w_i} mod n^2.  Computing each power on its
own costs ~1.5 * bits(w) modular multiplications per term; Pippenger's bucket
method with signed digits costs about ``(bits(w) + 1) / c * (m + 2^(c+1))``
multiplications for m terms and window c, i.e. a few per term.

Negative digits are collected on a separate accumulator that is inverted once
at the end (``P * Q^{-1}``): a negative weight is never raised as ``n - |w|``,
which would cost a full-size exponentiation.
"""

from __future__ import annotations

from collections.abc import Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

from smc_hmm.crypto import native

ONE = mpz(1)


def signed_digits(e: int, c: int) -> list[int]:
    """Digits |d_j| <= 2^(c-1) with e = sum_j d_j 2^(c j), lowest first."""
    sign, e = (-1, -e) if e < 0 else (1, e)
    half, full, mask = 1 << (c - 1), 1 << c, (1 << c) - 1
    digits = []
    while e:
        d = e & mask
        if d >= half:
            d -= full
        digits.append(sign * d)
        e = (e - d) >> c
    return digits


def _signed_window_for(terms: int, exp_bits: int) -> int:
    """Window c minimising (bits+1)/c * (terms + 2^(c+1)) for signed-digit buckets."""
    return min(range(2, 17), key=lambda c: -(-(exp_bits + 1) // c) * (terms + (1 << (c + 1))))


def window_count(top: int, c: int) -> int:
    """How many signed digits of width c the exponents |e| <= top need.

    With digits in [-2^(c-1), 2^(c-1)), W digits represent exactly the e with
    0 <= e + K_W < 2^(cW), K_W = 2^(c-1) (2^(cW) - 1) / (2^c - 1): one more
    window than the bit length suggests may be needed (2^41 - 1 at c = 7 takes 7).
    """
    windows = 0
    while top + ((1 << (c - 1)) * ((1 << (c * windows)) - 1)) // ((1 << c) - 1) >= 1 << (
        c * windows
    ):
        windows += 1
    return windows


def window_plan(exps: Sequence[int]) -> tuple[int, int]:
    """(c, windows): the signed-digit window width and the exact number of windows."""
    nonzero = [abs(int(e)) for e in exps if e]
    if not nonzero:
        return 2, 0
    top = max(nonzero)
    c = _signed_window_for(len(nonzero), top.bit_length())
    return c, window_count(top, c)


def signed_digit_columns(exps: Sequence[int], c: int) -> list[list[int]]:
    """Signed digits of every exponent, one list per window (lowest window first).

    Column j holds digit j of each exponent (0 where an exponent has fewer
    digits).  Vectorised with numpy when every |e| < 2^62, else per exponent.
    """
    if not exps:
        return []
    if max(abs(int(e)) for e in exps) < (1 << 62):
        values = np.array([int(e) for e in exps], dtype=np.int64)
        sign, rest = np.sign(values), np.abs(values)
        half, full, mask = 1 << (c - 1), 1 << c, (1 << c) - 1
        columns = []
        while rest.any():
            digit = rest & mask
            digit -= np.where(digit >= half, full, 0)
            columns.append((sign * digit).tolist())
            rest = (rest - digit) >> c
        return columns
    rows = [signed_digits(int(e), c) for e in exps]
    windows = max(len(r) for r in rows)
    return [[r[j] if j < len(r) else 0 for r in rows] for j in range(windows)]


def signed_parts(
    bases: Sequence[mpz],
    exps: Sequence[int],
    modulus: mpz,
    *,
    window: int | None = None,
    lo: int = 0,
    hi: int | None = None,
    use_native: bool | None = None,
) -> tuple[mpz, mpz]:
    """(P, Q) with prod g_i^{e_i} = P * Q^{-1}, for exponents of either sign.

    Signed-digit Pippenger: each exponent is recoded into digits |d| <= 2^(c-1);
    a digit d > 0 puts g into positive bucket d, a digit d < 0 into negative
    bucket |d|.  Both bucket sets have 2^(c-1) buckets, so a window costs about
    m + 2^(c+1) multiplications whatever the signs, and the negative side is
    inverted once at the very end (by the caller).

    With ``lo``/``hi`` only the digit windows [lo, hi) are evaluated and the
    result is that part divided by 2^(c lo) in the exponent: chunks of windows
    can run on different workers and be merged by :func:`merge_window_parts`.
    The native kernel, where it runs (``use_native`` as in :func:`shared_base_parts`),
    computes the same buckets.
    """
    pairs = [(g, int(e)) for g, e in zip(bases, exps) if e]
    if not pairs:
        return ONE, ONE
    terms = [g for g, _ in pairs]
    c = window or window_plan([e for _, e in pairs])[0]
    columns = signed_digit_columns([e for _, e in pairs], c)
    hi = len(columns) if hi is None else min(hi, len(columns))
    kernel = native.kernel() if use_native is not False else None
    if kernel is not None and kernel.fits(modulus) and c <= 12:
        if lo >= hi:
            return ONE, ONE
        return kernel.pippenger(terms, columns[lo:hi], c, modulus)
    half = 1 << (c - 1)
    pos_acc = neg_acc = None
    for w in range(hi - 1, lo - 1, -1):
        for _ in range(c):
            if pos_acc is not None:
                pos_acc = pos_acc * pos_acc % modulus
            if neg_acc is not None:
                neg_acc = neg_acc * neg_acc % modulus
        pos: list = [None] * (half + 1)
        neg: list = [None] * (half + 1)
        for g, d in zip(terms, columns[w]):
            if d > 0:
                b = pos[d]
                pos[d] = g if b is None else b * g % modulus
            elif d < 0:
                b = neg[-d]
                neg[-d] = g if b is None else b * g % modulus
        pos_sum = _aggregate(pos, modulus)
        neg_sum = _aggregate(neg, modulus)
        if pos_sum is not None:
            pos_acc = pos_sum if pos_acc is None else pos_acc * pos_sum % modulus
        if neg_sum is not None:
            neg_acc = neg_sum if neg_acc is None else neg_acc * neg_sum % modulus
    return (ONE if pos_acc is None else pos_acc), (ONE if neg_acc is None else neg_acc)


def merge_window_parts(
    parts: Sequence[tuple[int, tuple[mpz, mpz]]], c: int, modulus: mpz
) -> tuple[mpz, mpz]:
    """Merge (lo, (P, Q)) results of window chunks: prod P^(2^(c lo)), prod Q^(2^(c lo))."""
    positive, negative = ONE, ONE
    for lo, (p, q) in parts:
        shift = ONE << (c * lo)
        positive = positive * gmpy2.powmod(p, shift, modulus) % modulus
        negative = negative * gmpy2.powmod(q, shift, modulus) % modulus
    return positive, negative


def _aggregate(buckets: list, modulus: mpz):
    """prod_k B_k^k with two running products (2 multiplications per bucket)."""
    running = total = None
    for k in range(len(buckets) - 1, 0, -1):
        b = buckets[k]
        if b is not None:
            running = b if running is None else running * b % modulus
        if running is not None:
            total = running if total is None else total * running % modulus
    return total


def multiexp(bases: Sequence[mpz], exps: Sequence[int], modulus: mpz) -> mpz:
    """prod_i g_i^{e_i} mod modulus, exponents of either sign; one inversion in all."""
    return combine_parts([signed_parts(bases, exps, modulus)], modulus)


#: up to this many terms, rows sharing their bases use :func:`shared_base_parts`
SHARED_BASE_MAX_TERMS = 32


def _shared_window_for(terms: int, rows: int, exp_bits: int) -> int:
    """Window c minimising rows * (bits + terms * windows) + 2 * terms * 2^(c-1)."""
    return min(
        range(2, 9),
        key=lambda c: (
            rows * (exp_bits + terms * -(-(exp_bits + 1) // c)) + 2 * terms * (1 << (c - 1))
        ),
    )


def shared_base_parts(
    bases: Sequence[mpz],
    rows: Sequence[Sequence[int]],
    modulus: mpz,
    *,
    use_native: bool | None = None,
) -> list[tuple[mpz, mpz]]:
    """prod_i bases_i^{w_ri} for every row r, as ``(value, 1)`` parts.

    Straus's interleaved method for few bases shared by many rows: a table of
    b_i^d and b_i^-d (|d| <= 2^(c-1), one inversion per base) is built once and
    serves every row, so a row costs about bits(w) squarings plus one
    multiplication per nonzero signed digit -- fewer than Pippenger's buckets
    when there are only a handful of terms (a LOGSUM over one model's states,
    an emission over a small alphabet).

    Where the native kernel runs (:mod:`smc_hmm.crypto.native`; ``use_native``
    None: wherever it is available, False: never), the same method runs there on
    unsigned windows, a base with negative weights entering once more, inverted.
    """
    rows = [[int(w) for w in row] for row in rows]
    top = max((abs(w) for row in rows for w in row), default=0)
    if top == 0:
        return [(ONE, ONE) for _ in rows]
    kernel = native.kernel() if use_native is not False else None
    if kernel is not None and kernel.fits(modulus):
        return [(v, ONE) for v in _native_rows(kernel, bases, rows, modulus)]
    m = len(bases)
    c = _shared_window_for(m, len(rows), top.bit_length())
    half = 1 << (c - 1)
    positive, negative = [], []
    for b in bases:
        pos = [ONE, b]
        for _ in range(half - 1):
            pos.append(pos[-1] * b % modulus)
        inv = gmpy2.invert(b, modulus)
        neg = [ONE, inv]
        for _ in range(half - 1):
            neg.append(neg[-1] * inv % modulus)
        positive.append(pos)
        negative.append(neg)
    out = []
    for row in rows:
        columns = signed_digit_columns(row, c)
        acc = ONE
        for column in reversed(columns):
            if acc != ONE:
                for _ in range(c):
                    acc = acc * acc % modulus
            for i, d in enumerate(column):
                if d > 0:
                    acc = acc * positive[i][d] % modulus
                elif d < 0:
                    acc = acc * negative[i][-d] % modulus
        out.append((acc, ONE))
    return out


def _native_rows(kernel, bases: Sequence[mpz], rows: list[list[int]], modulus: mpz) -> list[mpz]:
    """:func:`shared_base_parts` on the kernel: b^-1 joins the bases for each base
    that has a negative weight in some row (one inversion each), which takes |w|."""
    signed = [i for i in range(len(bases)) if any(row[i] < 0 for row in rows)]
    if not signed:
        return kernel.multiexp_rows(bases, rows, modulus)
    inverses = [gmpy2.invert(bases[i], modulus) for i in signed]
    unsigned = [[max(w, 0) for w in row] + [max(-row[i], 0) for i in signed] for row in rows]
    return kernel.multiexp_rows([*bases, *inverses], unsigned, modulus)


def uses_native(modulus) -> bool:
    """Whether linear combinations modulo ``modulus`` run on the native kernel here."""
    kernel = native.kernel()
    return kernel is not None and kernel.fits(modulus)


def multiplication_count(terms: int, rows: int, exp_bits: int) -> int:
    """About how many modular multiplications ``rows`` multi-exponentiations over the same
    ``terms`` bases with exponents of ``exp_bits`` bits cost on the path a linear
    combination takes (:func:`shared_base_parts` up to ``SHARED_BASE_MAX_TERMS`` terms,
    else :func:`signed_parts` per row): the estimates their windows are chosen by, plus
    the squarings (both accumulators in the bucket method) and, for the shared tables,
    about 8 multiplications' worth per inversion.  The cost model prices these."""
    if terms < 1 or rows < 1 or exp_bits < 1:
        return 0
    if terms <= SHARED_BASE_MAX_TERMS:
        c = _shared_window_for(terms, rows, exp_bits)
        windows = -(-(exp_bits + 1) // c)
        return rows * (exp_bits + terms * windows) + 2 * terms * (1 << (c - 1)) + 8 * terms
    c = _signed_window_for(terms, exp_bits)
    return rows * (-(-(exp_bits + 1) // c) * (terms + (1 << (c + 1))) + 2 * exp_bits)


def combine_parts(parts: Sequence[tuple[mpz, mpz]], modulus: mpz) -> mpz:
    """Merge (P, Q) partial results of chunks into one value (still one inversion)."""
    positive, negative = ONE, ONE
    for p, q in parts:
        positive = positive * p % modulus
        negative = negative * q % modulus
    if negative == 1:
        return positive
    return positive * gmpy2.invert(negative, modulus) % modulus


def naive_multiexp(bases: Sequence[mpz], exps: Sequence[int], modulus: mpz) -> mpz:
    """Reference: one powmod per term (used by tests and as a benchmark baseline)."""
    acc = ONE
    for g, e in zip(bases, exps):
        acc = acc * gmpy2.powmod(g, int(e), modulus) % modulus
    return acc
