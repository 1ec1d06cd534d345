"""``smc-hmm demo forward``: Alice's private sequences, Bob's private HMMs.

The secure forward algorithm (:mod:`protocols.forward`) runs in-process with real keys
on a discrete (casino) and a Gaussian model; the demo compares Alice's log P with the
plaintext forward algorithm and prints the cost tables.
"""

from __future__ import annotations

import numpy as np

from demos.common import key_holder, min_key_bits
from parties.alice import Alice
from parties.bob import Bob
from parties.run import simulate
from protocols import forward
from smc_hmm.cli.common import make_report
from smc_hmm.crypto import Rng
from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, log_likelihood
from smc_hmm.progress import status


def casino_hmm() -> DiscreteHMM:
    """The occasionally dishonest casino (Durbin et al.): a fair and a loaded die."""
    loaded = [0.1] * 5 + [0.5]
    return DiscreteHMM([0.5, 0.5], [[0.95, 0.05], [0.1, 0.9]], [[1 / 6] * 6, loaded])


def weather_gaussian_hmm() -> GaussianHMM:
    """A 3-state Gaussian HMM over 4 features (diagonal covariances)."""
    return GaussianHMM(
        [0.6, 0.3, 0.1],
        [[0.8, 0.15, 0.05], [0.2, 0.7, 0.1], [0.1, 0.3, 0.6]],
        [[0.0, 1.0, -1.0, 0.5], [2.0, -1.0, 0.0, 1.5], [-2.0, 0.0, 2.0, -1.0]],
        [[1.0, 0.5, 0.8, 1.2], [0.7, 1.0, 0.6, 0.9], [1.5, 0.8, 1.0, 0.5]],
    )


def add_forward_arguments(parser) -> None:
    parser.add_argument("--length", type=int, default=30, help="sequence length T (default 30)")


def forward_demo(args, output) -> int:
    """Alice's private sequences, Bob's private HMMs: the secure forward algorithm.

    Runs a discrete (casino) and a Gaussian model in-process with real keys,
    compares Alice's log P with the plaintext forward algorithm and prints
    the cost tables.
    """
    if args.length < 1:
        raise InvalidInputError("--length must be >= 1")
    seed = Rng.seeded(args.seed).randbits(64) if args.seed is not None else None
    gen = np.random.default_rng(seed)
    alice = key_holder(args, output.err)
    runs, results = [], []
    for label, model in (
        ("discrete (casino, 2 states, 6 symbols)", casino_hmm()),
        ("Gaussian (3 states, 4 features)", weather_gaussian_hmm()),
    ):
        run, result = _run_model(args, output, alice, label, model, gen)
        runs.append(run)
        results.append(result)
    ok = all(run["relative_error"] <= 1e-6 for run in runs)
    report = make_report(
        "demo",
        "forward",
        [run["secure"] for run in runs],
        [run["plain"] for run in runs],
        ok,
        [run["cost"] for run in runs],
        demo="forward",
        key_bits=args.key_bits,
        runs=runs,
        ok=ok,
    )
    output.finish(report)  # a failed write: one line, exit 2
    for result in results:
        result.cost.render(output.err)
    return 0 if ok else 1


def _run_model(args, output, alice, label: str, model, gen):
    """One secure forward run on a sample of ``model``, its line printed: (its record
    for the report, the run's result)."""
    obs, _ = model.sample(args.length, rng=gen)
    alice_run = Alice("alice", observations=obs, keypair=alice.keypair)
    with status(output.err, f"secure forward, {label}, T={args.length}"):
        result = simulate(
            [alice_run, Bob("bob", models=[model])],
            forward.PROTOCOL,
            forward.ForwardParams(),
            timeout=args.timeout,
            meta={"demo": "forward", "model": label},
            min_key_bits=min_key_bits(args),
        )
    secure, plain = result["alice"][0], log_likelihood(model, obs)
    rel = abs(secure - plain) / abs(plain)
    output.line(
        f"[bold]{label}[/], T={args.length}: secure log P = {secure:.12g}, "
        f"plaintext {plain:.12g}, relative error {rel:.1e} "
        f"({'[green]ok[/]' if rel <= 1e-6 else '[red]too large[/]'}), "
        f"{result.elapsed:.1f} s"
    )
    run = {
        "model": label,
        "secure": secure,
        "plain": plain,
        "relative_error": rel,
        "cost": result.cost.to_dict(),
    }
    return run, result


forward_demo.add_arguments = add_forward_arguments
