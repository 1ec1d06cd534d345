"""The estimator attack on repeated inputs, measured through real runs (docs/security.md,
"What a client learns over many frames").

A client who wants one of Bob's log-densities sends the same frame k times -- inside one
session, or once in each of k sessions -- and averages what it decrypts (the maximum-
likelihood estimate of a shift of the smooth blind is within a few percent of the mean
here).  This script runs the speaker protocol in-process on small, explicitly insecure
keys (the blinds do not depend on the key size), recovers the client's estimate of
component 0 of model 0 at that frame, and prints its root-mean-square error against k
beside the Cramer-Rao floor R / (6.41 sqrt(k)) and, for comparison, the R / k-like error
the old uniform blind allowed (the extremes of k uniform draws).

    python scripts/blind_leakage.py [--trials 40] [--key-bits 512]

Takes about a minute on two cores (40 trials).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from protocols import speaker as sp
from protocols.stages import emissions
from smc_hmm.crypto import generate_keypair
from smc_hmm.data.speakers import gmm, gmm_parts
from smc_hmm.leakage import estimation_floor
from smc_hmm.runtime import run_protocol

BLIND_NATS = 20.0


def _speakers(rng, dims=4):
    def model():
        w = rng.dirichlet(np.ones(2))
        return gmm(w, rng.normal(size=(2, dims)), rng.uniform(0.5, 2.0, (2, dims)))

    return [model(), model()], ["s0", "ubm"]


def _truth(speakers, frame) -> float:
    w, mu, var = gmm_parts(speakers[0][0])
    return float(
        np.log(w[0]) - 0.5 * (np.log(2 * np.pi * var[0]) + (frame - mu[0]) ** 2 / var[0]).sum()
    )


def _seen(keypair, speakers, frames) -> list[float]:
    """Run identify on these frames; what Alice decrypted for component 0 of model 0."""
    result = run_protocol(
        sp.PROTOCOL,
        {"mode": "identify"},
        {"alice": ("alice", frames), "bob": ("bob", speakers)},
        keys={"alice": keypair},
        min_key_bits=keypair[0].bits,
        record_views=True,
        timeout=600,
    )
    spec = sp.SpeakerSpec(sp.SpeakerParams(), frames.shape[1], (2, 2), len(frames), keypair[0].bits)
    view = {t: p for _, t, p in result.views["alice"]}
    y = emissions.alice_unpack(view["spk.emit"].decrypt_ints(keypair[1]), spec.emissions)
    return [row[0] / 2**spec.f for row in y]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--key-bits", type=int, default=512)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    keypair = generate_keypair(args.key_bits, insecure=True)
    speakers = _speakers(rng)
    frame = rng.normal(size=4)
    truth = _truth(speakers, frame)
    ks = (1, 4, 16, 64)
    # inside one session: one run of trials x max(k) copies of the frame
    inside = np.array(_seen(keypair, speakers, np.tile(frame, (args.trials * max(ks), 1))))
    inside = inside.reshape(args.trials, max(ks)) - truth
    # across sessions: one frame per run
    across_k = ks
    across = (
        np.array(
            [
                _seen(keypair, speakers, frame[None, :])[0]
                for _ in range(args.trials * max(across_k))
            ]
        ).reshape(args.trials, max(across_k))
        - truth
    )
    uniform = np.random.default_rng(2).uniform(0, BLIND_NATS, (2000, max(ks)))
    print(
        "| k | Cramer-Rao floor (nats) | measured, one session | measured, k sessions "
        "| old uniform blind, extremes |"
    )
    print("|---|---|---|---|---|")

    def rmse(samples, k):
        return math.sqrt(float(np.mean((samples[:, :k].mean(axis=1) - BLIND_NATS / 2) ** 2)))

    for k in ks:
        mid = (uniform[:, :k].min(axis=1) + uniform[:, :k].max(axis=1)) / 2 - BLIND_NATS / 2
        across_cell = f"{rmse(across, k):.3f}" if k in across_k else "-"
        floor = estimation_floor(BLIND_NATS, k)
        print(
            f"| {k} | {floor:.3f} | {rmse(inside, k):.3f} | {across_cell} "
            f"| {math.sqrt(float(np.mean(mid**2))):.3f} |"
        )


if __name__ == "__main__":
    main()
