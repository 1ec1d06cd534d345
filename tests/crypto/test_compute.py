import numpy as np
import pytest

from smc_hmm.compute import Compute
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.errors import InvalidInputError


@pytest.fixture(scope="module")
def pool():
    with Compute.processes(2) as compute:
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


def test_chunks_cover_items_in_order():
    c = Compute(executor=None)
    assert c.chunks(list(range(5))) == [list(range(5))]
    c.workers = 3
    parts = c.chunks(list(range(10)))
    assert sum(parts, []) == list(range(10)) and len(parts) == 3
    with pytest.raises(InvalidInputError):
        Compute(workers=0)
