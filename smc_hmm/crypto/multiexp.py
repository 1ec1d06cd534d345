"""Multi-exponentiation: prod_i g_i^{e_i} mod M with signed exponents.

A linear combination of Paillier ciphertexts, E(sum_i w_i x_i), is the
multi-exponentiation prod_i E(x_i)^{w_i} mod n^2.  Computing each power on its
own costs ~1.5 * bits(w) modular multiplications per term; Pippenger's bucket
method costs about ``bits(w) / c * (m + 2^(c+1))`` multiplications for m terms
and window c, i.e. a few per term.

Negative exponents are split off and the whole negative part is inverted once
(``P * Q^{-1}``): a negative weight is never raised as ``n - |w|``, which would
cost a full-size exponentiation.
"""

from __future__ import annotations

from collections.abc import Sequence

import gmpy2
from gmpy2 import mpz

ONE = mpz(1)


def _window_for(terms: int, exp_bits: int) -> int:
    """The Pippenger window c minimising bits/c * (terms + 2^(c+1)) multiplications."""
    if terms <= 0 or exp_bits <= 0:
        return 1
    return min(
        range(1, 17),
        key=lambda c: -(-exp_bits // c) * (terms + (1 << (c + 1))) + c,
    )


def pippenger(bases: Sequence[mpz], exps: Sequence[int], modulus: mpz) -> mpz:
    """prod g_i^{e_i} mod modulus for non-negative exponents (Pippenger's bucket method)."""
    if len(bases) != len(exps):
        raise ValueError("bases and exponents differ in length")
    pairs = [(g, int(e)) for g, e in zip(bases, exps) if e]
    if not pairs:
        return ONE
    if len(pairs) == 1:
        g, e = pairs[0]
        return gmpy2.powmod(g, e, modulus)
    exp_bits = max(e for _, e in pairs).bit_length()
    c = _window_for(len(pairs), exp_bits)
    mask = (1 << c) - 1
    windows = -(-exp_bits // c)
    result = None
    for w in range(windows - 1, -1, -1):
        if result is not None:
            for _ in range(c):
                result = result * result % modulus
        shift = w * c
        buckets: list = [None] * (mask + 1)
        for g, e in pairs:
            digit = (e >> shift) & mask
            if digit:
                b = buckets[digit]
                buckets[digit] = g if b is None else b * g % modulus
        # sum_k k * B_k with two running products (2 * 2^c multiplications)
        running = None
        window_sum = None
        for k in range(mask, 0, -1):
            b = buckets[k]
            if b is not None:
                running = b if running is None else running * b % modulus
            if running is not None:
                window_sum = running if window_sum is None else window_sum * running % modulus
        if window_sum is not None:
            result = window_sum if result is None else result * window_sum % modulus
    return ONE if result is None else result


def split_signed(bases: Sequence[mpz], exps: Sequence[int]):
    """Split (g_i, e_i) into positive-exponent and |negative|-exponent lists."""
    pos_b, pos_e, neg_b, neg_e = [], [], [], []
    for g, e in zip(bases, exps):
        e = int(e)
        if e > 0:
            pos_b.append(g)
            pos_e.append(e)
        elif e < 0:
            neg_b.append(g)
            neg_e.append(-e)
    return pos_b, pos_e, neg_b, neg_e


def signed_parts(bases: Sequence[mpz], exps: Sequence[int], modulus: mpz) -> tuple[mpz, mpz]:
    """(P, Q) with prod g_i^{e_i} = P * Q^{-1}: the positive and negative parts."""
    pos_b, pos_e, neg_b, neg_e = split_signed(bases, exps)
    return pippenger(pos_b, pos_e, modulus), pippenger(neg_b, neg_e, modulus)


def multiexp(bases: Sequence[mpz], exps: Sequence[int], modulus: mpz) -> mpz:
    """prod_i g_i^{e_i} mod modulus, exponents of either sign; one inversion in all."""
    positive, negative = signed_parts(bases, exps, modulus)
    if negative == 1:
        return positive
    return positive * gmpy2.invert(negative, modulus) % modulus


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
