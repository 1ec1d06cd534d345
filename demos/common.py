"""What the bundled demos share: the insecure-key warning and Alice's fresh key pair."""

from __future__ import annotations

import warnings

from parties.alice import Alice
from smc_hmm.crypto import Rng
from smc_hmm.errors import InsecureKeyWarning
from smc_hmm.progress import status


def min_key_bits(args) -> int:
    """The smallest peer key the demo's parties accept: 2048 bits unless --insecure."""
    return min(args.key_bits, 2048) if args.insecure else 2048


def key_holder(args, err, vector=None, rng: Rng | None = None) -> Alice:
    """Alice (holding ``vector``, if given) with a fresh key pair of ``--key-bits``, drawn
    from ``rng`` (default: seeded with ``--seed``), after warning about insecure key sizes
    on ``err`` (standard error: standard output carries the demo's result)."""
    if args.insecure:
        err.print(
            f"[yellow]warning: {args.key_bits}-bit keys are INSECURE "
            "(tests and reproductions only)[/]"
        )
    if rng is None and args.seed is not None:
        rng = Rng.seeded(args.seed)
    alice = Alice("alice", vector, key_bits=args.key_bits, insecure=args.insecure, rng=rng)
    with (
        status(err, f"generating a {args.key_bits}-bit Paillier key pair"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", InsecureKeyWarning)
        alice.ensure_keypair()
    return alice
