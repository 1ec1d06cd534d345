"""``smc-hmm demo secure-sum``: Alice, Bob, Trent and data owners add private vectors.

The secure sum (:mod:`protocols.secure_sum`) runs in-process with real keys; the demo
checks Alice's result against the plaintext sum and prints the cost table.
"""

from __future__ import annotations

import numpy as np

from demos.common import key_holder, min_key_bits
from parties.bob import Bob
from parties.data_owner import DataOwner
from parties.run import simulate
from parties.trent import Trent
from protocols import secure_sum
from smc_hmm.cli.common import make_report
from smc_hmm.crypto import Rng
from smc_hmm.errors import InvalidInputError
from smc_hmm.progress import status


def add_secure_sum_arguments(parser) -> None:
    parser.add_argument("--length", type=int, default=8, help="vector length (default 8)")
    parser.add_argument("--owners", type=int, default=1, help="data owners besides Bob (default 1)")


def secure_sum_demo(args, output) -> int:
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
    alice = key_holder(
        args, output.err, vectors["alice"], rng=seed_rng.spawn() if args.seed is not None else None
    )
    parties = [
        alice,
        Bob("bob", vectors["bob"]),
        Trent("trent", vectors["trent"]),
        *[DataOwner(name, vectors[name]) for name in owners],
    ]
    with status(output.err, "running the secure sum (one thread per party)"):
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
    report = make_report(
        "demo",
        "secure-sum",
        got.tolist(),
        expected.tolist(),
        ok,
        result.cost.to_dict(),
        demo="secure-sum",
        ok=ok,
        max_abs_error=err,
        expected=expected.tolist(),
    )
    line = (
        f"secure sum of {len(vectors)} private vectors of length {args.length} "
        f"({args.key_bits}-bit keys): Alice's result "
        f"{'[green]matches[/]' if ok else '[red]DIFFERS FROM[/]'} the plaintext sum "
        f"(max abs error {err:.2e}, fixed point 2^-{params.scale})"
    )
    output.finish(report, result.cost, [line])  # a failed write: one line, exit 2
    return 0 if ok else 1


secure_sum_demo.add_arguments = add_secure_sum_arguments
