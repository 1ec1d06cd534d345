"""smc_hmm.compute_dask: Bob's batches on a dask.distributed LocalCluster (2 worker
processes) give exactly the results of the inline lanes, and inputs are scattered once
per session and reused by every later call that passes the same content."""

from __future__ import annotations

import time

import numpy as np
import pytest

from smc_hmm.compute import Compute
from smc_hmm.crypto import CipherArray

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def dask_compute():
    from smc_hmm.compute_dask import DaskCompute

    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=40,
    )
    client = distributed.Client(cluster, set_as_default=False)
    compute = DaskCompute(client)
    compute.warm_up()
    try:
        yield compute
    finally:
        compute.close()
        client.close()
        cluster.close()


def test_lincomb_and_encrypt_match_inline_and_scatter_once(dask_compute, keypair_512):
    pk, sk = keypair_512
    rng = np.random.default_rng(1)
    x = CipherArray.encrypt_encoded(pk, rng.integers(-1000, 1000, size=80), 0)
    weights = rng.integers(-(2**20), 2**20, size=(12, 80))
    want = x.lincomb(weights, compute=Compute.inline()).decrypt_ints(sk)
    assert dask_compute.workers == 3  # the caller plus two worker processes
    with dask_compute.session() as session:
        first = x.lincomb(weights, compute=session)
        scattered = session.scattered
        assert scattered >= 1  # the packed ciphertexts (and the big weight groups)
        # the same ciphertexts against other weight rows: the resident copy is reused
        again = x.lincomb(weights[::-1].copy(), compute=session)
        assert session.scattered > scattered - 1 and session.reused >= 1
        # few outputs: the digit windows are split, every lane gets all the terms
        single = x.lincomb(weights[:1], compute=session)
        enc = CipherArray.encrypt_encoded(pk, np.arange(200), 0, compute=session)
    assert list(first.decrypt_ints(sk)) == list(want)
    assert list(again.decrypt_ints(sk)) == list(want[::-1])
    assert list(single.decrypt_ints(sk)) == list(want[:1])
    assert list(enc.decrypt_ints(sk)) == list(range(200))


def test_keyword_protocol_identical_with_and_without_dask(dask_compute, keypair_1024):
    from smc_hmm.data import load_bundled_models, load_test_utterances
    from smc_hmm.protocol import find
    from smc_hmm.runtime import run_protocol

    models, labels = load_bundled_models("diag")
    protocol = find("keyword")
    outputs = []
    for utterance in load_test_utterances()[:2]:
        frames = np.asarray(utterance.features)[:8]
        runs = []
        for compute in (None, dask_compute):
            with (compute or Compute.inline()).session() as bob_compute:
                result = run_protocol(
                    protocol,
                    {"mode": "fast"},
                    {"alice": ("alice", frames), "bob": ("bob", (models[:3], labels[:3]))},
                    keys={"alice": keypair_1024},
                    compute={"bob": bob_compute},
                    min_key_bits=1024,
                    timeout=60,
                )
                if compute is not None:  # reuse of scattered inputs: the test above
                    assert bob_compute.scattered >= 1
            runs.append(result["alice"])
        assert runs[0] == runs[1]
        outputs.append(runs[0])
    assert all(o["keyword"] in labels[:3] for o in outputs)


def test_a_serving_bob_on_dask_releases_each_sessions_inputs(dask_compute, tmp_path):
    """smc-hmm serve with a Dask backend: correct sessions, and nothing a session
    scattered stays on the cluster once it has ended."""
    from serve_harness import client, utterances, write_serve_config

    from smc_hmm.runtime import load_config
    from smc_hmm.runtime.serve import Server

    config = load_config(write_serve_config(tmp_path))
    cases = utterances(2)
    before = dask_compute.scattered
    with Server(config, "bob", compute=dask_compute, port=0) as srv:
        for frames, want in cases:
            assert client(srv.address, tmp_path / "certs", frames)["keyword"] == want
        deadline = time.monotonic() + 10
        while srv.counts["ok"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert dask_compute.scattered > before  # Bob's batches went to the cluster
    deadline = time.monotonic() + 10
    while _keys_on_cluster(dask_compute.client) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _keys_on_cluster(dask_compute.client) == 0


def _keys_on_cluster(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
