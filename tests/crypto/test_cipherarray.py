import math

import numpy as np
import phe
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis_support import with_fixtures

from smc_hmm.crypto import CipherArray
from smc_hmm.errors import (
    InvalidInputError,
    KeyMismatchError,
    PrecisionError,
    ScaleMismatchError,
    ShapeMismatchError,
)

FAST = with_fixtures(25)
ints40 = st.integers(-(2**40), 2**40)
shapes = hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4)


def int_arrays(shape):
    return hnp.arrays(object, shape, elements=ints40)


@FAST
@given(data=st.data(), scale=st.integers(0, 60))
def test_integers_round_trip_exactly(keypair_512, data, scale):
    pk, sk = keypair_512
    shape = data.draw(shapes)
    values = data.draw(int_arrays(shape))
    enc = CipherArray.encrypt(pk, values, scale)
    assert enc.shape == shape and enc.scale == scale
    assert (enc.decrypt_ints(sk) == values * (1 << scale)).all()
    assert (enc.decrypt(sk) == values.astype(float)).all()


@FAST
@given(
    values=hnp.arrays(
        np.float64, st.integers(1, 6), elements=st.floats(-1e6, 1e6, allow_nan=False)
    ),
    scale=st.integers(0, 40),
)
def test_reals_round_trip_within_half_an_ulp_of_the_scale(keypair_512, values, scale):
    pk, sk = keypair_512
    got = CipherArray.encrypt(pk, values, scale).decrypt(sk)
    assert np.all(np.abs(got - values) <= 2.0 ** (-scale - 1) * (1 + 1e-12) + 1e-9 * np.abs(values))


@FAST
@given(
    a=st.lists(ints40, min_size=1, max_size=5),
    b=st.lists(ints40, min_size=1, max_size=5),
    k=st.integers(-(2**30), 2**30),
)
def test_arithmetic_matches_plaintext(keypair_512, a, b, k):
    pk, sk = keypair_512
    m = min(len(a), len(b))
    a, b = np.array(a[:m], dtype=object), np.array(b[:m], dtype=object)
    ea, eb = CipherArray.encrypt(pk, a), CipherArray.encrypt(pk, b)
    assert ((ea + eb).decrypt_ints(sk) == a + b).all()
    assert ((ea - eb).decrypt_ints(sk) == a - b).all()
    assert ((-ea).decrypt_ints(sk) == -a).all()
    assert ((ea + b).decrypt_ints(sk) == a + b).all()
    assert ((b - ea).decrypt_ints(sk) == b - a).all()
    assert (ea.mul(k).decrypt_ints(sk) == a * k).all()
    assert (ea.mul(b).decrypt_ints(sk) == a * b).all()
    assert (ea * 3).decrypt_ints(sk).tolist() == (a * 3).tolist()
    assert ea.sum().decrypt_ints(sk).item() == sum(a)


def test_fixed_point_scales_add_under_multiplication(keypair_512):
    pk, sk = keypair_512
    x = CipherArray.encrypt(pk, [1.5, -0.25], 8)
    y = x.mul_fixed([0.5, -3.0], 4)
    assert y.scale == 12
    assert y.decrypt(sk).tolist() == [0.75, 0.75]
    assert x.rescale_up(4).scale == 12
    assert (x.rescale_up(4) + y).decrypt(sk).tolist() == [2.25, 0.5]


def test_sum_over_an_axis(keypair_512):
    pk, sk = keypair_512
    v = np.arange(12).reshape(3, 4) - 5
    e = CipherArray.encrypt(pk, v)
    assert (e.sum(axis=0).decrypt_ints(sk) == v.sum(axis=0)).all()
    assert (e.sum(axis=1).decrypt_ints(sk) == v.sum(axis=1)).all()


@FAST
@given(data=st.data())
def test_linear_combination_equals_plaintext(keypair_512, data):
    pk, sk = keypair_512
    m = data.draw(st.integers(1, 30))
    k = data.draw(st.integers(1, 4))
    x = np.array(data.draw(st.lists(ints40, min_size=m, max_size=m)), dtype=object)
    w = np.array(
        data.draw(st.lists(st.lists(ints40, min_size=m, max_size=m), min_size=k, max_size=k)),
        dtype=object,
    )
    ex = CipherArray.encrypt(pk, x)
    assert (ex.lincomb(w).decrypt_ints(sk) == w.dot(x)).all()
    assert ex.lincomb(w[0]).decrypt_ints(sk).item() == w[0].dot(x)
    assert ((w @ ex).decrypt_ints(sk) == w.dot(x)).all()


def test_lincomb_fixed_point(keypair_512):
    pk, sk = keypair_512
    x = CipherArray.encrypt(pk, [0.5, 2.0, -1.0], 10)
    got = x.lincomb_fixed([[0.25, -1.5, 2.0]], 12).decrypt(sk)
    assert got.tolist() == [0.125 - 3.0 - 2.0]


def test_precision_is_checked_before_computing(keypair_512):
    pk, sk = keypair_512
    limit = pk.max_plain
    at_limit = CipherArray.encrypt(pk, np.array([limit, -limit], dtype=object))
    assert at_limit.decrypt_ints(sk).tolist() == [limit, -limit]
    with pytest.raises(PrecisionError):
        CipherArray.encrypt(pk, np.array([limit + 1], dtype=object))
    half = CipherArray.encrypt(pk, np.array([limit // 2], dtype=object))
    assert (half + half).decrypt_ints(sk).item() == 2 * (limit // 2)
    with pytest.raises(PrecisionError):
        half + half + 1
    with pytest.raises(PrecisionError):
        half.mul(3)
    with pytest.raises(PrecisionError):
        half.lincomb([2, 1])[0] if False else CipherArray.encrypt(
            pk, np.array([limit // 2, 1], dtype=object)
        ).lincomb([2, 1])
    with pytest.raises(PrecisionError):
        CipherArray.encrypt(pk, [1.0], scale=pk.max_plain.bit_length() + 1)


def test_bad_inputs_raise_typed_errors(keypair_512, other_keypair_512):
    pk, sk = keypair_512
    other_pk, other_sk = other_keypair_512
    a = CipherArray.encrypt(pk, [1, 2], 4)
    with pytest.raises(InvalidInputError):
        CipherArray.encrypt(pk, [float("nan")])
    with pytest.raises(InvalidInputError):
        CipherArray.encrypt(pk, [1.0, math.inf])
    with pytest.raises(InvalidInputError):
        CipherArray.encrypt(pk, ["a"])
    with pytest.raises(InvalidInputError):
        CipherArray.encrypt(pk, [1], scale=-1)
    with pytest.raises(ScaleMismatchError):
        a + CipherArray.encrypt(pk, [1, 2], 5)
    with pytest.raises(KeyMismatchError):
        a + CipherArray.encrypt(other_pk, [1, 2], 4)
    with pytest.raises(KeyMismatchError):
        a.decrypt(other_sk)
    with pytest.raises(ShapeMismatchError):
        a + CipherArray.encrypt(pk, [1, 2, 3], 4)
    with pytest.raises(ShapeMismatchError):
        a.lincomb([[1, 2, 3]])
    with pytest.raises(InvalidInputError):
        a * 0.5
    with pytest.raises(InvalidInputError):
        a.mul([True, False])


def test_rerandomize_changes_ciphertexts_not_values(keypair_512):
    pk, sk = keypair_512
    a = CipherArray.encrypt(pk, [5, -6])
    b = a.rerandomize()
    assert all(x != y for x, y in zip(a.ciphertexts(), b.ciphertexts()))
    assert b.decrypt_ints(sk).tolist() == [5, -6]


def test_phe_round_trip(keypair_512):
    pk, sk = keypair_512
    a = CipherArray.encrypt(pk, [1.5, -2.75, 3.0], 6)  # scale not a multiple of 4
    numbers = a.to_phe()
    assert all(isinstance(x, phe.EncryptedNumber) for x in numbers)
    assert [sk.decrypt(x) for x in numbers] == [1.5, -2.75, 3.0]
    back = CipherArray.from_phe([pk.encrypt(2.5), pk.encrypt(-7), pk.encrypt(0.125)], bound=2**80)
    assert back.decrypt(sk).tolist() == [2.5, -7.0, 0.125]
    with pytest.raises(InvalidInputError):
        CipherArray.from_phe([1, 2])


def test_indexing_reshape_concatenate(keypair_512):
    pk, sk = keypair_512
    a = CipherArray.encrypt(pk, np.arange(6).reshape(2, 3))
    assert a[1].decrypt_ints(sk).tolist() == [3, 4, 5]
    assert a[0, 2].decrypt_ints(sk).item() == 2
    assert a.T.shape == (3, 2)
    assert CipherArray.concatenate([a.ravel(), a[0]]).decrypt_ints(sk).tolist() == [
        0,
        1,
        2,
        3,
        4,
        5,
        0,
        1,
        2,
    ]


@given(x=st.floats(allow_nan=False, allow_infinity=False), e=st.integers(-1100, 3000))
def test_ldexp_int_is_exact_rounding(x, e):
    from fractions import Fraction

    from smc_hmm.crypto.fixedpoint import ldexp_int

    exact = Fraction(x) * Fraction(2) ** e
    got = ldexp_int(x, e)
    assert abs(Fraction(got) - exact) <= Fraction(1, 2)
