"""Demonstrations behind ``smc-hmm demo NAME`` (registered in smc_hmm.cli.DEMOS)."""

from __future__ import annotations

import json
import warnings

import numpy as np

from parties.alice import Alice
from parties.bob import Bob
from parties.data_owner import DataOwner
from parties.run import simulate
from parties.trent import Trent
from protocols import forward, secure_sum
from smc_hmm.crypto import Rng
from smc_hmm.errors import InsecureKeyWarning, InvalidInputError
from smc_hmm.hmm import DiscreteHMM, GaussianHMM, log_likelihood


def min_key_bits(args) -> int:
    """The smallest peer key the demo's parties accept: 2048 bits unless --insecure."""
    return min(args.key_bits, 2048) if args.insecure else 2048


def key_holder(args, console) -> Alice:
    """Alice with a fresh key pair of ``--key-bits`` (seeded with ``--seed``), after
    warning about insecure key sizes."""
    if args.insecure:
        console.print(
            f"[yellow]warning: {args.key_bits}-bit keys are INSECURE "
            "(tests and reproductions only)[/]"
        )
    alice = Alice(
        "alice",
        key_bits=args.key_bits,
        insecure=args.insecure,
        rng=Rng.seeded(args.seed) if args.seed is not None else None,
    )
    with (
        console.status(f"generating a {args.key_bits}-bit Paillier key pair"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", InsecureKeyWarning)
        alice.ensure_keypair()
    return alice


def add_secure_sum_arguments(parser) -> None:
    parser.add_argument("--length", type=int, default=8, help="vector length (default 8)")
    parser.add_argument("--owners", type=int, default=1, help="data owners besides Bob (default 1)")


def secure_sum_demo(args, console) -> int:
    """Alice, Bob, Trent and data owners run the secure sum in-process; check and cost table."""
    if args.owners < 0 or args.length < 1:
        raise InvalidInputError("--owners must be >= 0 and --length >= 1")
    seed_rng = Rng.seeded(args.seed) if args.seed is not None else Rng.system()
    gen = np.random.default_rng(seed_rng.randbits(64))
    owners = [f"owner{i + 1}" for i in range(args.owners)]
    params = secure_sum.Params(
        contributors=("bob", *owners), length=args.length, scale=16, max_abs=1e6
    )
    vectors = {
        name: np.round(gen.uniform(-1000, 1000, args.length), 4)
        for name in ("alice", "bob", "trent", *owners)
    }
    alice = Alice(
        "alice",
        vectors["alice"],
        key_bits=args.key_bits,
        insecure=args.insecure,
        rng=seed_rng.spawn() if args.seed is not None else None,
    )
    if args.insecure:
        console.print(
            f"[yellow]warning: {args.key_bits}-bit keys are INSECURE "
            "(tests and reproductions only)[/]"
        )
    with (
        console.status(f"generating a {args.key_bits}-bit Paillier key pair"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", InsecureKeyWarning)
        alice.ensure_keypair()
    parties = [
        alice,
        Bob("bob", vectors["bob"]),
        Trent("trent", vectors["trent"]),
        *[DataOwner(name, vectors[name]) for name in owners],
    ]
    with console.status("running the secure sum (one thread per party)"):
        result = simulate(
            parties,
            secure_sum.PROTOCOL,
            params,
            timeout=args.timeout,
            meta={"demo": "secure-sum", "key_bits": args.key_bits},
            min_key_bits=min_key_bits(args),
        )
    expected = sum(vectors.values())
    got = result["alice"]
    err = float(np.max(np.abs(got - expected)))
    ok = err <= len(vectors) * 2.0**-params.scale
    console.print(
        f"secure sum of {len(vectors)} private vectors of length {args.length} "
        f"({args.key_bits}-bit keys): Alice's result "
        f"{'[green]matches[/]' if ok else '[red]DIFFERS FROM[/]'} the plaintext sum "
        f"(max abs error {err:.2e}, fixed point 2^-{params.scale})"
    )
    result.cost.render(console)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "demo": "secure-sum",
                    "ok": ok,
                    "max_abs_error": err,
                    "result": got.tolist(),
                    "expected": expected.tolist(),
                    "cost": result.cost.to_dict(),
                },
                fh,
                indent=2,
                sort_keys=True,
            )
            fh.write("\n")
        console.print(f"wrote {args.json}")
    return 0 if ok else 1


secure_sum_demo.add_arguments = add_secure_sum_arguments


# -- secure forward algorithm ----------------------------------------------------------------


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


def forward_demo(args, console) -> int:
    """Alice's private sequences, Bob's private HMMs: the secure forward algorithm.

    Runs a discrete (casino) and a Gaussian model in-process with real keys,
    compares Alice's log P with the plaintext forward algorithm and prints
    the cost tables.
    """
    if args.length < 1:
        raise InvalidInputError("--length must be >= 1")
    seed = Rng.seeded(args.seed).randbits(64) if args.seed is not None else None
    gen = np.random.default_rng(seed)
    alice = key_holder(args, console)
    report = {"demo": "forward", "key_bits": args.key_bits, "runs": []}
    ok = True
    for label, model in (
        ("discrete (casino, 2 states, 6 symbols)", casino_hmm()),
        ("Gaussian (3 states, 4 features)", weather_gaussian_hmm()),
    ):
        obs, _ = model.sample(args.length, rng=gen)
        alice_run = Alice("alice", observations=obs, keypair=alice.keypair)
        bob = Bob("bob", models=[model])
        with console.status(f"secure forward, {label}, T={args.length}"):
            result = simulate(
                [alice_run, bob],
                forward.PROTOCOL,
                forward.ForwardParams(),
                timeout=args.timeout,
                meta={"demo": "forward", "model": label},
                min_key_bits=min_key_bits(args),
            )
        secure, plain = result["alice"][0], log_likelihood(model, obs)
        rel = abs(secure - plain) / abs(plain)
        ok &= rel <= 1e-6
        console.print(
            f"[bold]{label}[/], T={args.length}: secure log P = {secure:.12g}, "
            f"plaintext {plain:.12g}, relative error {rel:.1e} "
            f"({'[green]ok[/]' if rel <= 1e-6 else '[red]too large[/]'}), "
            f"{result.elapsed:.1f} s"
        )
        result.cost.render(console)
        report["runs"].append(
            {
                "model": label,
                "secure": secure,
                "plain": plain,
                "relative_error": rel,
                "cost": result.cost.to_dict(),
            }
        )
    report["ok"] = bool(ok)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2, sort_keys=True)
            fh.write("\n")
        console.print(f"wrote {args.json}")
    return 0 if ok else 1


forward_demo.add_arguments = add_forward_arguments
