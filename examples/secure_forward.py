"""Secure forward algorithm end to end: Alice's observations, Bob's HMMs, log P(x | lambda).

Alice holds an observation sequence and the Paillier key pair; Bob holds HMMs
(several, batched into the same messages).  They run the secure forward
algorithm of :mod:`protocols.forward`: Bob learns nothing about the
observations, Alice learns log P(x | lambda_k) for each of Bob's models (and,
within a blinding range, the per-step values listed in that module's
docstring) but not the models.

In-process (each party in its own thread; every message still goes through the
wire codec, and each party's work is metered separately)::

    PYTHONPATH=. python examples/secure_forward.py                  # 2048-bit keys
    PYTHONPATH=. python examples/secure_forward.py --key-bits 1024 --insecure

It runs a discrete example (3 models with 2, 3 and 4 states over 5 symbols,
T = 40) and a Gaussian example (a diagonal and a full-covariance model, d = 3,
T = 15), about 10 s at 2048 bits on one core, prints
the secure and the plaintext log P side by side with the relative error, and
the cost tables (operations per party and phase, messages, bytes, rounds).

As two OS processes over TCP with mutual TLS (``smc_hmm.runtime.run_party``
/ ``launch``): the registered ``forward`` protocol reads Alice's
``observations`` and Bob's ``models`` from the files its parties.toml names::

    PYTHONPATH=. python examples/secure_forward.py --setup /tmp/fw [--kind gaussian] \\
        [--key-bits 1024 --insecure]
    # writes /tmp/fw: certificates (CA, alice, bob), obs.npy (observations),
    # models.npz (models), parties.toml and expected.json (the plaintext log P)

    # then either both parties as child processes, with the merged cost report:
    PYTHONPATH=. python -m smc_hmm.cli launch --config /tmp/fw/parties.toml
    # or one process per terminal (or machine: edit host/port in parties.toml):
    PYTHONPATH=. python -m smc_hmm.cli party --role bob --config /tmp/fw/parties.toml
    PYTHONPATH=. python -m smc_hmm.cli party --role alice --config /tmp/fw/parties.toml

(``smc-hmm`` is the same CLI when the package is installed.)  Alice's printed
output is the list of log P; compare it with ``expected.json``.  Bob's output
is a summary only: he keeps E(log P), which is not JSON (``[protocol] reveal =
false`` makes Alice return nothing, as for keyword recognition).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from protocols import forward
from smc_hmm.crypto import Rng, generate_keypair
from smc_hmm.errors import InsecureKeyWarning
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, log_likelihood
from smc_hmm.runtime import simulate

# -- the example's data ------------------------------------------------------------------------


def discrete_example(rng: np.random.Generator, n_steps: int):
    """Three discrete HMMs over 5 symbols (2, 3, 4 states) and a sequence from the second."""
    models = [
        DiscreteHMM(
            startprob=rng.dirichlet(np.ones(n)),
            transmat=rng.dirichlet(np.ones(n), size=n),
            emissionprob=rng.dirichlet(np.ones(5), size=n),
        )
        for n in (2, 3, 4)
    ]
    obs, _ = models[1].sample(n_steps, rng)
    return models, obs


def gaussian_example(rng: np.random.Generator, n_steps: int):
    """A diagonal (2 states) and a full-covariance (3 states) Gaussian HMM, d = 3."""
    d = 3
    diag = GaussianHMM(
        startprob=[0.7, 0.3],
        transmat=[[0.9, 0.1], [0.2, 0.8]],
        means=rng.normal(scale=2.0, size=(2, d)),
        covars=rng.uniform(0.5, 2.0, size=(2, d)),
        covariance_type="diag",
    )
    factors = rng.normal(size=(3, d, d))
    full = GaussianHMM(
        startprob=rng.dirichlet(np.ones(3)),
        transmat=rng.dirichlet(np.ones(3), size=3),
        means=rng.normal(scale=2.0, size=(3, d)),
        covars=factors @ np.swapaxes(factors, 1, 2) + 0.5 * np.eye(d),
        covariance_type="full",
    )
    obs, _ = full.sample(n_steps, rng)
    return [diag, full], obs


# -- in-process run ------------------------------------------------------------------------------


def run_in_process(title, models, obs, keypair, console, params=None):
    """Run both parties in this process and print secure vs plaintext log P and the cost."""
    from rich.table import Table

    result = simulate(
        {"alice": forward.alice, "bob": forward.bob},
        args={"alice": (obs, params), "bob": (models, params)},
        keys={"alice": keypair},
        timeout=120,
        meta={"protocol": "secure forward", "example": title},
        min_key_bits=min(keypair[0].bits, 2048),  # main() refused small keys without --insecure
    )
    prec = (params or forward.ForwardParams()).precision
    bob_plain = [prec.decode_log(v) for v in result.outputs["bob"].decrypt_ints(keypair[1])]
    table = Table(title=f"{title}: T = {len(obs)}, {result.elapsed:.2f} s")
    for col in (
        "model",
        "states",
        "secure log P (Alice)",
        "plaintext log P",
        "rel. error",
        "Bob's E(log P), decrypted",
    ):
        table.add_column(col, justify="right")
    worst = 0.0
    for k, (model, secure, bob_value) in enumerate(
        zip(models, result.outputs["alice"], bob_plain, strict=True)
    ):
        plain = log_likelihood(model, obs)
        err = 0.0 if secure == plain else abs(secure - plain) / abs(plain)
        worst = max(worst, err)
        table.add_row(
            str(k),
            str(model.n_states),
            f"{secure:.12f}",
            f"{plain:.12f}",
            f"{err:.2e}",
            f"{bob_value:.12f}",
        )
    console.print(table)
    result.cost.render(console)
    return worst


# -- two processes: the files a parties.toml names ------------------------------------------


def setup(
    directory: Path, kind: str, key_bits: int, insecure: bool, n_steps: int, seed: int
) -> Path:
    """Write certificates, both inputs, parties.toml and expected.json into ``directory``."""
    from smc_hmm.hmm.io import save_models
    from smc_hmm.runtime import write_config

    rng = np.random.default_rng(seed)
    models, obs = (discrete_example if kind == "discrete" else gaussian_example)(rng, n_steps)
    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / "obs.npy", obs)
    save_models(directory / "models.npz", models)
    expected = [log_likelihood(m, obs) for m in models]
    (directory / "expected.json").write_text(json.dumps(expected) + "\n")
    return write_config(
        directory / "parties.toml",
        "forward",
        {
            "alice": {"kind": "alice", "observations": "obs.npy"},
            "bob": {"kind": "bob", "models": "models.npz"},
        },
        params={"reveal": True},
        key_bits=key_bits,
        insecure=insecure,
        timeout=120,
        deadline=600,
    )


# -- command line ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key-bits", type=int, default=2048, help="Paillier modulus size")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow keys below 2048 bits (tests and quick looks only)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="sequence length (default: 40 discrete symbols, 15 Gaussian frames)",
    )
    parser.add_argument("--seed", type=int, default=2024, help="seed of models and data")
    parser.add_argument("--kind", choices=["discrete", "gaussian", "both"], default="both")
    parser.add_argument(
        "--setup",
        metavar="DIR",
        type=Path,
        help="write a two-process configuration to DIR instead of running",
    )
    args = parser.parse_args(argv)
    if args.key_bits < 2048 and not args.insecure:
        parser.error(f"{args.key_bits}-bit keys are insecure: add --insecure (tests only)")

    if args.setup is not None:
        kind = "discrete" if args.kind == "both" else args.kind
        steps = args.steps or (40 if kind == "discrete" else 15)
        path = setup(args.setup, kind, args.key_bits, args.insecure, steps, args.seed)
        print(
            f"wrote {path} ({kind}, T = {steps}); plaintext log P in "
            f"{args.setup / 'expected.json'}:\n  "
            + json.dumps(json.loads((args.setup / "expected.json").read_text()))
        )
        print(f"run: PYTHONPATH=. python -m smc_hmm.cli launch --config {path}")
        return 0

    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 88)  # readable in a log
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        if args.insecure:
            warnings.simplefilter("ignore", InsecureKeyWarning)
        keypair = generate_keypair(args.key_bits, insecure=args.insecure, rng=Rng.system())
    console.print(
        f"{args.key_bits}-bit key pair for Alice in {time.perf_counter() - t0:.2f} s"
        + (" (INSECURE key size)" if args.key_bits < 2048 else "")
    )
    rng = np.random.default_rng(args.seed)
    worst = 0.0
    if args.kind in ("discrete", "both"):
        models, obs = discrete_example(rng, args.steps or 40)
        worst = max(worst, run_in_process("discrete HMMs", models, obs, keypair, console))
    if args.kind in ("gaussian", "both"):
        models, obs = gaussian_example(rng, args.steps or 15)
        worst = max(worst, run_in_process("Gaussian HMMs", models, obs, keypair, console))
    console.print(f"largest relative error in log P: {worst:.2e} (bound 1e-6)")
    return 0 if worst <= 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
