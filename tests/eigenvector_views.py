"""What each party of the eigenvector protocol can read from its recorded view.

Shared by the private mode's tests and the attack tests: the attacks start from
exactly these values (an owner's decryptions in the thesis's mode, the statistically
masked values an owner opens in the private mode).  Ground truth that no party has
(the iterates themselves) is recovered here with the whole key, which only the tests
hold.
"""

from __future__ import annotations

import numpy as np

from protocols import eigenvector_private as private
from smc_hmm.crypto.threshold import KeyShare, combine, unpack_partials


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
