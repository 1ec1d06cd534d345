"""Shared by the eigenvector protocol's tests (both modes) and its attack tests.

Running a configuration in-process, as party processes (``smc-hmm launch``) or with one
party leaving mid-run; and what each party can read from its recorded view: the attacks
start from exactly these values (an owner's decryptions in the thesis's mode, the
statistically masked values an owner opens in the private mode).  Ground truth that no
party has (the iterates themselves) is recovered here with the whole key, which only
the tests hold.
"""

from __future__ import annotations

import numpy as np

from protocols import eigenvector as eig
from protocols.eigenvector import private
from smc_hmm.crypto import Rng
from smc_hmm.crypto.threshold import KeyShare, combine, unpack_partials
from smc_hmm.errors import SmcHmmError
from smc_hmm.runtime import launch, run_protocol, simulate, write_config
from smc_hmm.transport.faults import FaultyTransport


def owners_of(n: int) -> list[str]:
    return [f"p{i + 1}" for i in range(n)]


def configuration(blocks, **options) -> tuple[dict, dict]:
    """(params, parties) for owners p1..pN holding ``blocks``, Trent and the authority."""
    owners = owners_of(len(blocks))
    params = {
        "owners": owners,
        "cols": [b.shape[1] for b in blocks],
        "rows": blocks[0].shape[0],
        "max_abs": float(max(np.abs(b).max() for b in blocks)) or 1.0,
        **options,
    }
    parties = {"authority": ("key_authority", None), "trent": ("arbitrator", None)}
    for name, b in zip(owners, blocks):
        parties[name] = ("owner", b)
    return params, parties


def run_blocks(keypair, blocks, defaults: dict, timeout: float = 30.0, **options):
    """The protocol in-process on ``blocks`` with parameters ``defaults`` | ``options``
    (``record_views``, ``wrap_transport`` and ``rng`` go to the runtime)."""
    kwargs = {k: options.pop(k) for k in ("record_views", "wrap_transport", "rng") if k in options}
    # seeded unless a test brings its own: masks, scalings and decoys are random, and a
    # test's assertions (rounds to converge, decoys seen) must not depend on luck
    kwargs.setdefault("rng", Rng.seeded(sum(b.size for b in blocks)))
    params, parties = configuration(blocks, **{**defaults, **options})
    return run_eigenvector(keypair, params, parties, timeout=timeout, **kwargs)


#: how close (|cos|) a run's eigenvector must come to the plaintext one
COSINE = 1 - 1e-9


def cosine(x, v):
    """|cos| of the angle between ``x`` and ``v`` (an eigenvector's sign is arbitrary)."""
    return abs(float(x @ v)) / (np.linalg.norm(x) * np.linalg.norm(v))


def run_eigenvector(keypair, params, parties, *, timeout=30.0, **kwargs):
    """The protocol in-process, the key authority holding ``keypair``."""
    return run_protocol(
        "eigenvector",
        params,
        parties,
        keys={"authority": keypair},
        min_key_bits=min(512, keypair[0].bits),
        timeout=timeout,
        **kwargs,
    )


def launch_eigenvector(directory, params, blocks, key_bits: int, timeout: float = 20.0):
    """The protocol as one OS process per party over mutual TLS (``smc-hmm launch``)."""
    parties = {"authority": {"kind": "key_authority"}, "trent": {"kind": "trent"}}
    for name, b in zip(params["owners"], blocks):
        np.save(directory / f"{name}.npy", b)
        parties[name] = {"kind": "data_owner", "data": f"{name}.npy"}
    config = write_config(
        directory / "parties.toml",
        "eigenvector",
        parties,
        params=params,
        key_bits=key_bits,
        insecure=True,
        timeout=timeout,
        connect_timeout=30,
    )
    result = launch(config, timeout=300)
    assert set(result.pids) == set(parties)
    return result


def run_with_a_leaver(keypair, params, parties, party, fail_at, mode, timeout, rng=None):
    """Run with ``party``'s transport failing at its ``fail_at``-th send; every party's
    exception, by name (the run itself raises a typed error)."""
    params = eig.params_from_config(params)
    errors: dict[str, BaseException] = {}

    def recording(name, fn):
        def role(ctx, *args):
            try:
                return fn(ctx, *args)
            except BaseException as e:
                errors[name] = e
                raise

        return role

    def wrap(name, inner):
        return FaultyTransport(inner, fail_at=fail_at, mode=mode) if name == party else inner

    roles = {
        name: recording(name, eig.PROTOCOL.role(role).run) for name, (role, _) in parties.items()
    }
    args = {name: (private_input, params) for name, (_, private_input) in parties.items()}
    try:
        simulate(
            roles,
            args,
            keys={"authority": keypair},
            wrap_transport=wrap,
            timeout=timeout,
            min_key_bits=512,
            rng=rng,
        )
    except SmcHmmError:
        return errors
    raise AssertionError(f"the run survived {party} leaving at send {fail_at}")


def opened_batches(views, owner: str, pk, plan) -> list[tuple[list[int], int]]:
    """Every (X_t, Y_t) ``owner`` opened in the private mode, round by round."""
    view = views[owner]
    count = plan.vector_cts + 1
    from_trent = [p for peer, t, p in view if t == "partial" and peer == "trent"]
    if owner == plan.params.owners[0]:  # the leader computes its own partials
        share = KeyShare.from_wire(pk, next(p for _, t, p in view if t == "key_share"))
        batches = [p for _, t, p in view if t == "masked"]
        theirs = [share.partial(v.ciphertexts() + y.ciphertexts()) for v, y in batches]
    else:
        leader = plan.params.owners[0]
        theirs = [
            unpack_partials(pk, p, count)
            for peer, t, p in view
            if t == "partial" and peer == leader
        ]
    return [
        private.read_batch(combine(pk, [unpack_partials(pk, a, count), b]), plan)
        for a, b in zip(from_trent, theirs)
    ]


def true_masks(views, sk) -> list[list[int]]:
    """Trent's masks rho_t (from the leader's E[rho_t], decrypted with the whole key)."""
    leader = next(
        name for name, view in views.items() if any(t == "mask_vector" for _, t, _ in view)
    )
    return [v.decrypt_ints(sk).tolist() for _, t, v in views[leader] if t == "mask_vector"]


def thesis_vectors(views, owner: str, sk) -> tuple[list[np.ndarray], list[int]]:
    """The thesis's mode: the integer vectors w_t an owner decrypts (it holds the key) and
    the normalisation terms, at the protocol's fixed-point scale."""
    vectors = [
        np.array(p.decrypt_ints(sk).tolist(), dtype=object)
        for _, t, p in views[owner]
        if t == "vector"
    ]
    norms = [int(p.decrypt_ints(sk)[0]) for _, t, p in views[owner] if t == "norm"]
    return vectors, norms


def thesis_sums(views, sk, n_owners: int) -> list[np.ndarray]:
    """Per round, the true u_t = sum of the owners' contributions (Trent's ciphertexts)."""
    contributions = [p for _, t, p in views["trent"] if t == "contribution"]
    return [
        sum(
            np.array(c.decrypt_ints(sk).tolist(), dtype=object)
            for c in contributions[i : i + n_owners]
        )
        for i in range(0, len(contributions), n_owners)
    ]
