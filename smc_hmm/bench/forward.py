"""``smc-hmm bench forward``: the secure forward algorithm against the plaintext one.

For a discrete and a Gaussian HMM of the requested size it runs, in one
process, the plaintext log-space forward algorithm and the two-party secure
protocol (:mod:`protocols.forward`, in-process transport) on the same data,
and reports the time overhead, the relative error of log P, and each party's
bytes, messages, rounds and crypto operations from the cost ledger.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from smc_hmm.bench.common import BenchResult, Row, median_seconds
from smc_hmm.compute import Compute
from smc_hmm.crypto import generate_keypair
from smc_hmm.errors import InsecureKeyWarning
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, log_likelihood

ERROR_TARGET = 1e-6


def random_discrete(n_states: int, n_symbols: int, rng: np.random.Generator) -> DiscreteHMM:
    def stochastic(rows, cols):
        x = rng.dirichlet(np.ones(cols), size=rows)
        return x
    return DiscreteHMM(stochastic(1, n_states)[0], stochastic(n_states, n_states),
                       stochastic(n_states, n_symbols))


def random_gaussian(n_states: int, dims: int, rng: np.random.Generator) -> GaussianHMM:
    return GaussianHMM(rng.dirichlet(np.ones(n_states)),
                       rng.dirichlet(np.ones(n_states), size=n_states),
                       rng.normal(0.0, 2.0, size=(n_states, dims)),
                       rng.uniform(0.5, 2.0, size=(n_states, dims)))


def _secure_run(model, obs, keypair, compute):
    from protocols import forward
    from smc_hmm.runtime import simulate

    t0 = time.perf_counter()
    result = simulate({"alice": lambda ctx: forward.alice(ctx, obs),
                       "bob": lambda ctx: forward.bob(ctx, [model])},
                      keys={"alice": keypair}, compute={"alice": compute, "bob": compute},
                      timeout=600)
    return time.perf_counter() - t0, result.outputs["alice"][0], result.cost


def _rows(label: str, model, obs, keypair, compute, say) -> tuple[list[Row], float]:
    plain_value = log_likelihood(model, obs)
    t_plain = median_seconds(lambda: log_likelihood(model, obs), repeats=7)
    say(f"{label}: secure run")
    t_secure, secure_value, cost = _secure_run(model, obs, keypair, compute)
    rel = abs(secure_value - plain_value) / abs(plain_value)
    rows = [
        Row(f"{label}: time, secure vs plaintext forward", t_secure, t_plain, "s",
            note=f"overhead {t_secure / t_plain:,.0f}x"),
        Row(f"{label}: relative error of log P", rel, None, "rel. error", limit=ERROR_TARGET,
            note=f"secure {secure_value:.10g}, plain {plain_value:.10g}"),
    ]
    d = cost.to_dict()
    for party in ("alice", "bob"):
        p = d["parties"][party]
        ops = {k: v for k, v in p["ops"].items() if v}
        rows.append(Row(f"{label}: {party} bytes sent / received", p["bytes"]["sent"], None,
                        "bytes", note=f"recv {p['bytes']['recv']:,}; messages "
                                      f"{p['messages']['sent']}/{p['messages']['recv']}"))
        rows.append(Row(f"{label}: {party} crypto operations", sum(ops.values()), None, "ops",
                        note=", ".join(f"{k} {v:,}" for k, v in ops.items())))
    rows.append(Row(f"{label}: rounds (causal depth)", cost.rounds, None, "rounds"))
    return rows, rel


def run(key_bits: int = 2048, states: int = 5, symbols: int = 8, length: int = 50,
        dims: int = 4, workers: int = 2, seed: int = 0, progress=None) -> BenchResult:
    say = progress or (lambda msg: None)
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        say(f"generating a {key_bits}-bit key pair")
        keypair = generate_keypair(key_bits, insecure=key_bits < 2048)
    discrete = random_discrete(states, symbols, rng)
    d_obs, _ = discrete.sample(length, rng=rng)
    gaussian = random_gaussian(states, dims, rng)
    g_obs, _ = gaussian.sample(length, rng=rng)
    rows: list[Row] = []
    errors = {}
    with Compute.processes(workers) as compute:
        compute.warm_up()
        for label, model, obs in (("discrete", discrete, d_obs), ("gaussian", gaussian, g_obs)):
            r, rel = _rows(label, model, obs, keypair, compute, say)
            rows += r
            errors[label] = rel
    return BenchResult(
        "forward", key_bits, rows,
        {"states": states, "symbols": symbols, "length": length, "dims": dims,
         "workers": workers, "seed": seed},
        extra={"relative_error": errors,
               "relative_error_target": ERROR_TARGET,
               "all_within_target": all(e <= ERROR_TARGET for e in errors.values())
               and not any(math.isnan(e) for e in errors.values())})


def add_arguments(parser) -> None:
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--states", type=int, default=5, help="HMM states N")
    parser.add_argument("--symbols", type=int, default=8, help="discrete alphabet size M")
    parser.add_argument("--length", type=int, default=50, help="sequence length T")
    parser.add_argument("--dims", type=int, default=4, help="Gaussian feature dimension d")
    parser.add_argument("--workers", type=int, default=2, help="processes for Bob's work")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")


def main(args) -> int:
    from rich.console import Console

    console = Console(width=max(150, Console().width))
    result = run(args.key_bits, args.states, args.symbols, args.length, args.dims,
                 args.workers, args.seed, progress=lambda m: console.print(f"[dim]... {m}[/]"))
    result.print_table(console)
    if args.json:
        result.write_json(args.json)
        console.print(f"wrote {args.json}")
    return 0 if result.extra["all_within_target"] else 1
