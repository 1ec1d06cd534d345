import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis_support import with_fixtures

from smc_hmm.crypto.packing import PackedCipherArray, PackingPlan
from smc_hmm.errors import InvalidInputError, PrecisionError, ShapeMismatchError

FAST = with_fixtures(25)


def test_plan_width_and_slots(keypair_1024):
    pk, _ = keypair_1024
    plan = PackingPlan.for_key(pk, 40, growth_bits=10, mask_bits=40)
    assert plan.slot_bits == 92
    assert plan.slots * plan.slot_bits <= pk.max_plain.bit_length() - 1
    assert (plan.slots + 1) * plan.slot_bits > pk.max_plain.bit_length() - 1
    assert PackingPlan.for_key(pk, 40, max_slots=3).slots == 3
    with pytest.raises(PrecisionError):
        PackingPlan.for_key(pk, 2000)
    with pytest.raises(InvalidInputError):
        PackingPlan.for_key(pk, -1)


@given(
    st.integers(2, 64).flatmap(
        lambda w: st.tuples(
            st.just(w),
            st.lists(st.integers(-(2 ** (w - 1)) + 1, 2 ** (w - 1) - 1), min_size=1, max_size=8),
        )
    )
)
def test_pack_unpack_round_trip_including_extremes(args):
    w, values = args
    plan = PackingPlan(w, 8)
    assert plan.unpack(plan.pack(values), len(values)) == values
    extremes = [plan.slot_limit, -plan.slot_limit] * 4
    assert plan.unpack(plan.pack(extremes), 8) == extremes


def test_pack_rejects_overflow():
    plan = PackingPlan(8, 4)
    with pytest.raises(PrecisionError):
        plan.pack([128])
    with pytest.raises(ShapeMismatchError):
        plan.pack([1] * 5)


@FAST
@given(data=st.data())
def test_packed_arithmetic_keeps_slots_independent(keypair_1024, data):
    pk, sk = keypair_1024
    plan = PackingPlan.for_key(pk, 30, growth_bits=12)
    rows = data.draw(st.integers(1, 5))
    width = data.draw(st.integers(1, plan.slots))
    lim = 2**30 - 1
    v = np.array(
        data.draw(
            st.lists(
                st.lists(st.integers(-lim, lim), min_size=width, max_size=width),
                min_size=rows,
                max_size=rows,
            )
        ),
        dtype=object,
    )
    w = np.array(
        data.draw(
            st.lists(
                st.lists(st.integers(-64, 64), min_size=rows, max_size=rows), min_size=1, max_size=3
            )
        ),
        dtype=object,
    )
    p = PackedCipherArray.encrypt(pk, v, 0, plan)
    assert (p.decrypt_ints(sk) == v).all()
    assert ((p + p).decrypt_ints(sk) == 2 * v).all()
    assert (p.mul(-7).decrypt_ints(sk) == -7 * v).all()
    assert ((p + v).decrypt_ints(sk) == 2 * v).all()
    assert (p.lincomb(w).decrypt_ints(sk) == w.dot(v)).all()


def test_worst_case_slots_survive_planned_growth(keypair_1024):
    pk, sk = keypair_1024
    plan = PackingPlan.for_key(pk, 20, growth_bits=4)  # room for sums of 16 terms
    worst = np.full((16, plan.slots), -(2**20 - 1), dtype=object)
    worst[::2] = 2**20 - 1
    p = PackedCipherArray.encrypt(pk, worst, 0, plan)
    ones = np.ones((1, 16), dtype=object)
    assert (p.lincomb(ones).decrypt_ints(sk) == ones.dot(worst)).all()
    with pytest.raises(PrecisionError):
        p.lincomb(ones * 4)  # 2^20 * 64 exceeds a 26-bit slot: refused before computing


def test_fixed_point_packing(keypair_1024):
    pk, sk = keypair_1024
    plan = PackingPlan.for_key(pk, 40, growth_bits=8)
    vals = np.array([[0.5, -1.25, 3.0], [2.0, 0.0, -0.125]])
    p = PackedCipherArray.encrypt(pk, vals, 16, plan)
    assert p.scale == 16
    assert (p.decrypt(sk) == vals).all()
    assert (p.lincomb([[1, -2]]).decrypt(sk) == np.array([[1, -2]]) @ vals).all()
    with pytest.raises(ShapeMismatchError):
        PackedCipherArray.encrypt(pk, [1.0, 2.0], 16, plan)
