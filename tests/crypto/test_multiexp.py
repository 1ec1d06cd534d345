import gmpy2
from gmpy2 import mpz
from hypothesis import given, settings
from hypothesis import strategies as st

from smc_hmm.crypto.multiexp import (
    combine_parts,
    merge_window_parts,
    multiexp,
    naive_multiexp,
    shared_base_parts,
    signed_digit_columns,
    signed_digits,
    signed_parts,
    window_count,
    window_plan,
)

MOD = mpz(1000000007) * mpz(998244353)  # a composite modulus like n^2


@given(st.integers(-(2**70), 2**70), st.integers(2, 9))
def test_signed_digits_recompose(e, c):
    digits = signed_digits(e, c)
    assert sum(d << (c * j) for j, d in enumerate(digits)) == e
    assert all(abs(d) <= (1 << (c - 1)) for d in digits)


@given(st.lists(st.integers(-(2**80), 2**80), max_size=30), st.integers(2, 9), st.booleans())
def test_digit_columns_match_per_exponent_digits(exps, c, small):
    if small:  # the vectorised numpy path (|e| < 2^62)
        exps = [e >> 20 for e in exps]
    columns = signed_digit_columns(exps, c)
    assert window_count(max((abs(e) for e in exps), default=0), c) == len(columns)
    for i, e in enumerate(exps):
        digits = [col[i] for col in columns]
        assert sum(d << (c * j) for j, d in enumerate(digits)) == e
        assert all(abs(d) <= (1 << (c - 1)) for d in digits)
        assert digits[len(signed_digits(e, c)) :] == [0] * (len(digits) - len(signed_digits(e, c)))


def test_window_split_keeps_the_top_carry_digit():
    # e = 2^41 - 1 recodes with c = 7 to 7 digits (a carry past the 6 windows of 41 bits)
    exps = [(1 << 41) - 1, -((1 << 41) - 1), 5]
    bases = [mpz(3), mpz(5), mpz(7)]
    c = 7
    columns = signed_digit_columns(exps, c)
    assert len(columns) == 7
    assert window_count((1 << 40) - 1, 7) == 6 and window_count((1 << 41) - 1, 7) == 7
    parts = [
        (0, signed_parts(bases, exps, MOD, window=c, lo=0, hi=3)),
        (3, signed_parts(bases, exps, MOD, window=c, lo=3, hi=None)),
    ]
    assert combine_parts([merge_window_parts(parts, c, MOD)], MOD) == naive_multiexp(
        bases, exps, MOD
    )


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(2, 10**12), st.integers(-(2**45), 2**45)), max_size=40))
def test_multiexp_equals_naive_product(pairs):
    bases = [mpz(b) for b, _ in pairs if gmpy2.gcd(b, MOD) == 1]
    exps = [e for b, e in pairs if gmpy2.gcd(b, MOD) == 1]
    assert multiexp(bases, exps, MOD) == naive_multiexp(bases, exps, MOD)


def test_chunked_parts_combine_to_the_whole():
    bases = [mpz(3 + 2 * i) for i in range(300)]
    exps = [(-1) ** i * (i * 7919 + 13) ** 3 for i in range(300)]
    parts = [signed_parts(bases[i : i + 70], exps[i : i + 70], MOD) for i in range(0, 300, 70)]
    assert combine_parts(parts, MOD) == naive_multiexp(bases, exps, MOD)


def test_empty_and_zero_exponents():
    assert multiexp([], [], MOD) == 1
    assert multiexp([mpz(5), mpz(7)], [0, 0], MOD) == 1
    assert multiexp([mpz(5)], [-1], MOD) == gmpy2.invert(5, MOD)


def test_window_chunks_merge_to_the_whole():
    bases = [mpz(5 + 2 * i) for i in range(200)]
    exps = [(-1) ** i * (i * 104729 + 7) ** 3 for i in range(200)]
    c, windows = window_plan(exps)
    assert windows >= 3
    cuts = [0, 1, windows // 2, windows]
    parts = [
        (lo, signed_parts(bases, exps, MOD, window=c, lo=lo, hi=hi))
        for lo, hi in zip(cuts, cuts[1:])
    ]
    merged = merge_window_parts(parts, c, MOD)
    assert combine_parts([merged], MOD) == naive_multiexp(bases, exps, MOD)


def _bases(m: int, seed: int = 7) -> list[mpz]:
    rnd = __import__("random").Random(seed)
    return [mpz(rnd.randrange(2, int(MOD) - 1)) | 1 for _ in range(m)]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 6),
    st.integers(1, 300),
    st.randoms(use_true_random=False),
)
def test_shared_base_parts_match_naive_for_every_row(m, k, bits, rnd):
    """Straus with tables shared by the rows: signed weights, zeros, whole zero rows."""
    bases = _bases(m, seed=rnd.randrange(2**32))
    rows = [
        [rnd.choice([0, rnd.randrange(-(2**bits), 2**bits)]) for _ in range(m)] for _ in range(k)
    ]
    rows[0] = [0] * m if k > 1 and rnd.random() < 0.3 else rows[0]
    got = [combine_parts([p], MOD) for p in shared_base_parts(bases, rows, MOD)]
    assert got == [naive_multiexp(bases, row, MOD) for row in rows]


def test_shared_base_parts_extremes():
    bases = _bases(3)
    rows = [[0, 0, 0], [1, -1, 0], [2**200 - 1, -(2**200) + 1, 2**199]]
    got = [combine_parts([p], MOD) for p in shared_base_parts(bases, rows, MOD)]
    assert got == [naive_multiexp(bases, row, MOD) for row in rows]
    assert shared_base_parts(bases, [[0, 0, 0]], MOD) == [(1, 1)]
