import os
import pickle

import numpy as np
import pytest
from gmpy2 import mpz

from smc_hmm.compute import Compute
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.crypto.bulk import PackedInts
from smc_hmm.errors import ComputeError, InvalidInputError


@pytest.fixture(scope="module")
def pool():
    with Compute.processes(2) as compute:
        compute.warm_up()
        yield compute


def test_parallel_encryption_and_lincomb_match_inline(keypair_512, pool):
    pk, sk = keypair_512
    public_only = PublicKey(pk.n)
    values = np.arange(-100, 100)
    enc = CipherArray.encrypt(public_only, values, 3, compute=pool)
    assert (enc.decrypt(sk) == values).all()
    rng = np.random.default_rng(0)
    w_rows = rng.integers(-(2**40), 2**40, size=(3, 200)).astype(object)
    w_one = w_rows[:1]
    expect = w_rows.dot(values.astype(object) * 8)
    assert (enc.lincomb(w_rows, compute=pool).decrypt_ints(sk) == expect).all()
    assert (enc.lincomb(w_one, compute=pool).decrypt_ints(sk) == expect[:1]).all()
    assert (enc.lincomb(w_rows).decrypt_ints(sk) == expect).all()


def test_parallel_rerandomization_keeps_plaintexts_and_counts_every_value(keypair_512, pool):
    from smc_hmm.cost.ledger import CostLedger

    pk, sk = keypair_512
    ledger = CostLedger("bob")
    public_only = PublicKey(pk.n).with_meter(ledger)
    values = np.arange(-60, 60)
    enc = CipherArray.encrypt(public_only, values, 0, compute=pool)
    again = enc.rerandomize(compute=pool)  # 120 values: one share per lane
    assert ledger.ops["rerandomize"] == values.size
    assert (again.decrypt(sk) == values).all()
    assert not set(again.ciphertexts()) & set(enc.ciphertexts())  # every one fresh
    assert len(set(again.ciphertexts())) == values.size


def test_parallel_window_split_keeps_the_carry_digit(keypair_512, pool):
    # weights of +-(2^41 - 1) recode to one more window than 41 bits suggest
    pk, sk = keypair_512
    values = np.arange(1, 601)
    enc = CipherArray.encrypt(pk, values)
    weights = np.array([(-1) ** i * ((1 << 41) - 1 - i) for i in range(600)], dtype=object)
    expect = int(weights.dot(values.astype(object)))
    assert int(enc.lincomb(weights, compute=pool).decrypt_ints(sk).item()) == expect


def test_map_runs_the_first_item_in_the_caller(pool):
    def local(x):
        return ("caller", os.getpid(), x)

    results = pool.map(abs, [-1, -2], local=local)
    assert results[0] == ("caller", os.getpid(), -1)
    assert results[1] == 2
    assert pool.map(abs, []) == []
    assert Compute.inline().map(abs, [-3, -4]) == [3, 4]


def test_map_propagates_worker_errors(pool):
    with pytest.raises(ZeroDivisionError):
        pool.map(divmod, [4, 4], [2, 0])


def test_chunks_cover_items_in_order():
    c = Compute(executor=None)
    assert c.chunks(list(range(5))) == [list(range(5))]
    c.workers = 3
    parts = c.chunks(list(range(10)))
    assert sum(parts, []) == list(range(10)) and len(parts) == 3
    with pytest.raises(InvalidInputError):
        Compute(workers=0)
    with pytest.raises(InvalidInputError):
        Compute.from_executor(None, workers=1)  # the caller alone is not parallel


@pytest.mark.parametrize(
    "values",
    [[], [mpz(0)], [mpz(7), mpz(0), mpz(0)], [mpz(2**511 - 1), mpz(1), mpz(0), mpz(2**300)]],
)
def test_packed_ints_round_trip_through_pickle(values):
    packed = PackedInts(values, 512)
    back = pickle.loads(pickle.dumps(packed))
    assert back.values == values and back.width == 512 and len(back) == len(values)


def test_a_dead_worker_raises_a_typed_error():
    with Compute.processes(2) as compute, pytest.raises(ComputeError, match="process died"):
        compute.map(os._exit, [3, 3], local=abs)  # the remote lane kills its process


def test_lincomb_blocks_equals_one_lincomb_per_block(keypair_512, pool):
    """Many small blocks spread over the lanes give the concatenated per-block results."""
    pk, sk = keypair_512
    rng = np.random.default_rng(7)
    blocks = []
    for size in (5, 3, 5, 1, 4):
        x = CipherArray.encrypt(pk, rng.integers(0, 1000, size=size), 2)
        w = rng.integers(-(2**60), 2**60, size=(size, size)).astype(object)
        blocks.append((x, w))
    expect = np.concatenate([x.lincomb(w, 5).decrypt_ints(sk) for x, w in blocks])
    for compute in (Compute.inline(), pool):
        got = CipherArray.lincomb_blocks(blocks, 5, compute=compute)
        assert got.scale == 7 and list(got.decrypt_ints(sk)) == list(expect)
    with pytest.raises(InvalidInputError):
        CipherArray.lincomb_blocks([], 0)
