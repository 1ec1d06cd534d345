"""``smc-hmm bench forward``: the secure forward algorithm against the plaintext one.

For a discrete and a Gaussian HMM of the requested size, and a near-deterministic
discrete HMM whose log P is about -1e-6, it runs in one process the plaintext
log-space forward algorithm and the two-party secure protocol
(:mod:`protocols.forward`, in-process transport) on the same data, and reports
the time overhead, the absolute and relative error of log P (targets 1e-9
each; for the near-deterministic case, whose log P is itself ~1e-6, the
absolute error), and each party's bytes, messages, rounds and crypto
operations from the cost ledger.
"""

from __future__ import annotations

import math

import numpy as np

from smc_hmm.bench.common import (
    LOWER,
    BenchResult,
    Row,
    bounded,
    common_arguments,
    finish,
    lanes,
    median_seconds,
    start,
    throwaway_keypair,
    two_party_run,
)
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, log_likelihood
from smc_hmm.limits import MAX_RELEASE_STATES, MAX_SEQUENCE_LENGTH, MAX_WIDTH

#: precision targets: absolute (nats) and relative error of log P (docs/benchmarks.md)
ABS_TARGET = 1e-9
REL_TARGET = 1e-9
#: log P of the near-deterministic case
TINY_LOG_P = -1e-6


def random_discrete(n_states: int, n_symbols: int, rng: np.random.Generator) -> DiscreteHMM:
    def stochastic(rows, cols):
        x = rng.dirichlet(np.ones(cols), size=rows)
        return x

    return DiscreteHMM(
        stochastic(1, n_states)[0], stochastic(n_states, n_states), stochastic(n_states, n_symbols)
    )


def random_gaussian(n_states: int, dims: int, rng: np.random.Generator) -> GaussianHMM:
    return GaussianHMM(
        rng.dirichlet(np.ones(n_states)),
        rng.dirichlet(np.ones(n_states), size=n_states),
        rng.normal(0.0, 2.0, size=(n_states, dims)),
        rng.uniform(0.5, 2.0, size=(n_states, dims)),
    )


def near_deterministic(length: int) -> DiscreteHMM:
    """Two sticky states that each emit one symbol: all-zero symbols give log P ~ -1e-6."""
    eps = -TINY_LOG_P / max(1, length - 1)
    return DiscreteHMM([1.0, 0.0], [[1 - eps, eps], [eps, 1 - eps]], [[1.0, 0.0], [0.0, 1.0]])


def _secure_run(model, obs, keypair, compute):
    """The registered ``forward`` protocol in-process (found by name: no import of it)."""
    result, _, seconds = two_party_run("forward", {}, obs, [model], keypair, compute, timeout=600)
    return seconds, result.outputs["alice"][0], result.cost


def _rows(
    label: str, model, obs, keypair, compute, say, relative: bool = True
) -> tuple[list[Row], dict]:
    plain_value = log_likelihood(model, obs)
    t_plain = median_seconds(lambda: log_likelihood(model, obs), repeats=7)
    say(f"{label}: secure run")
    t_secure, secure_value, cost = _secure_run(model, obs, keypair, compute)
    abs_err = abs(secure_value - plain_value)
    rel = abs_err / abs(plain_value)
    note = f"secure {secure_value:.15g}, plain {plain_value:.15g}"
    rows = [
        Row(
            f"{label}: time, secure vs plaintext forward",
            t_secure,
            t_plain,
            "s",
            note=f"overhead {t_secure / t_plain:,.0f}x",
            better=LOWER,
        ),
        Row(
            f"{label}: absolute error of log P", abs_err, None, "nats", limit=ABS_TARGET, note=note
        ),
        Row(
            f"{label}: relative error of log P",
            rel,
            None,
            "rel. error",
            limit=REL_TARGET if relative else None,
            note="" if relative else "log P ~ -1e-6: the absolute error is the target",
        ),
    ]
    rows += _party_rows(label, cost)
    rows.append(Row(f"{label}: rounds (causal depth)", cost.rounds, None, "rounds"))
    errors = {
        "absolute": abs_err,
        "relative": rel,
        "seconds": t_secure,
        "met": abs_err <= ABS_TARGET and (rel <= REL_TARGET or not relative),
    }
    return rows, errors


def _party_rows(label: str, cost) -> list[Row]:
    """Per party the bytes it sent (received in the note) and the operations it counted."""
    rows = []
    for party in ("alice", "bob"):
        p = cost.parties[party]
        ops = {k: v for k, v in p["ops"].items() if v}
        rows.append(
            Row(
                f"{label}: {party} bytes sent / received",
                p["bytes"]["sent"],
                None,
                "bytes",
                note=f"recv {p['bytes']['recv']:,}; messages "
                f"{p['messages']['sent']}/{p['messages']['recv']}",
            )
        )
        rows.append(
            Row(
                f"{label}: {party} crypto operations",
                sum(ops.values()),
                None,
                "ops",
                note=", ".join(f"{k} {v:,}" for k, v in ops.items()),
            )
        )
    return rows


def run(
    key_bits: int = 2048,
    states: int = 5,
    symbols: int = 8,
    length: int = 50,
    dims: int = 4,
    workers: int = 2,
    seed: int = 0,
    progress=None,
) -> BenchResult:
    say = progress or (lambda msg: None)
    rng = np.random.default_rng(seed)
    say(f"generating a {key_bits}-bit key pair")
    keypair = throwaway_keypair(key_bits)
    discrete = random_discrete(states, symbols, rng)
    d_obs, _ = discrete.sample(length, rng=rng)
    gaussian = random_gaussian(states, dims, rng)
    g_obs, _ = gaussian.sample(length, rng=rng)
    sticky = near_deterministic(length)
    cases = [
        ("discrete", discrete, d_obs, True),
        ("gaussian", gaussian, g_obs, True),
        ("near-deterministic", sticky, np.zeros(length, dtype=int), False),
    ]
    rows: list[Row] = []
    errors = {}
    with lanes(workers) as compute:
        for label, model, obs, relative in cases:
            r, err = _rows(label, model, obs, keypair, compute, say, relative)
            rows += r
            errors[label] = err
    return BenchResult(
        "forward",
        key_bits,
        rows,
        {
            "states": states,
            "symbols": symbols,
            "length": length,
            "dims": dims,
            "workers": workers,
            "seed": seed,
        },
        extra={
            "errors": errors,
            "absolute_error_target": ABS_TARGET,
            "relative_error_target": REL_TARGET,
            "all_within_target": all(e["met"] for e in errors.values())
            and not any(math.isnan(e["absolute"]) for e in errors.values()),
        },
    )


def add_arguments(parser) -> None:
    with common_arguments(parser, workers=True, workers_help="processes for Bob's work"):
        states, width = bounded(1, MAX_RELEASE_STATES), bounded(1, MAX_WIDTH)
        parser.add_argument("--states", type=states, default=5, help="HMM states N")
        parser.add_argument("--symbols", type=width, default=8, help="discrete alphabet size M")
        parser.add_argument(
            "--length", type=bounded(1, MAX_SEQUENCE_LENGTH), default=50, help="sequence length T"
        )
        parser.add_argument("--dims", type=width, default=4, help="Gaussian feature dimension d")
        parser.add_argument("--seed", type=int, default=0)


def main(args) -> int:
    console, say = start(args)
    options = (args.states, args.symbols, args.length, args.dims, args.workers, args.seed)
    result = run(args.key_bits, *options, progress=say)
    return finish(args, result, console, met=result.extra["all_within_target"], table=True)
