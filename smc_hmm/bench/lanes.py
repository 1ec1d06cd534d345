"""``smc-hmm bench lanes``: why the 820-term linear combination is built the way it is.

Measures, side by side in one run (medians of interleaved rounds; docs/benchmarks.md):

1. one 4096-bit modular multiplication from Python (the unit every path pays);
2. signed-digit buckets (what ``CipherArray.lincomb`` uses) against Bos-Coster, which
   needs fewer multiplications but keeps a heap in Python;
3. shipping 820 ciphertexts to a process: pickling the mpz list against
   :class:`smc_hmm.crypto.bulk.PackedInts`.

Run: ``smc-hmm bench lanes [--terms 820] [--rounds 7] [--key-bits 2048]``.
"""

from __future__ import annotations

import bisect
import secrets
from multiprocessing.reduction import ForkingPickler

import gmpy2
from gmpy2 import mpz

from smc_hmm.bench import common
from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.crypto.bulk import PackedInts
from smc_hmm.crypto.multiexp import combine_parts, signed_parts
from smc_hmm.errors import InvalidInputError
from smc_hmm.progress import status


def bos_coster(bases, exps, modulus) -> mpz:
    """prod g_i^e_i for e_i >= 0 by Bos-Coster (sorted list of e << 16 | index)."""
    gs = list(bases)
    keyed = sorted((int(e) << 16) | i for i, e in enumerate(exps) if e > 0)
    mask = (1 << 16) - 1
    while len(keyed) > 1:
        top = keyed.pop()
        e1, i1, e2, i2 = top >> 16, top & mask, keyed[-1] >> 16, keyed[-1] & mask
        q, r = divmod(e1, e2)
        gs[i2] = (gs[i1] if q == 1 else gmpy2.powmod(gs[i1], q, modulus)) * gs[i2] % modulus
        if r:
            bisect.insort(keyed, (r << 16) | i1)
    if not keyed:
        return mpz(1)
    return gmpy2.powmod(gs[keyed[0] & mask], keyed[0] >> 16, modulus)


def signed_bos_coster(bases, exps, modulus) -> mpz:
    """Bos-Coster on the positive and on the negated negative weights, one inversion."""
    pos = bos_coster(bases, [max(e, 0) for e in exps], modulus)
    neg = bos_coster(bases, [max(-e, 0) for e in exps], modulus)
    return pos * gmpy2.invert(neg, modulus) % modulus


def add_arguments(parser) -> None:
    """Options of ``smc-hmm bench lanes``."""
    with common.common_arguments(parser):
        parser.add_argument(
            "--terms", type=common.bounded(1, 100_000), default=820, help="linear-combination terms"
        )
        parser.add_argument(
            "--rounds",
            type=common.bounded(1, 1000),
            default=7,
            help="interleaved timed rounds (median)",
        )


def run(key_bits: int = 2048, terms: int = 820, rounds: int = 7) -> common.BenchResult:
    """Time the rows above at ``key_bits``; the ratios say how many times faster ours is."""
    pk, _ = common.throwaway_keypair(key_bits)
    n2 = pk.nsquare_mpz
    cts = CipherArray.encrypt(PublicKey(pk.n), [secrets.randbelow(1 << 30) for _ in range(terms)])
    bases = cts.ciphertexts()
    weights = [
        secrets.randbelow(1 << 40) * (1 if secrets.randbits(1) else -1) for _ in range(terms)
    ]
    if signed_bos_coster(bases, weights, n2) != combine_parts(
        [signed_parts(bases, weights, n2)], n2
    ):
        raise AssertionError("Bos-Coster and buckets disagree")
    chain = bases[: min(400, len(bases))]

    def multiplications():
        acc = mpz(1)
        for b in chain:
            acc = acc * b % n2

    packed = PackedInts.for_modulus(bases, n2)
    t = common.interleaved_medians(
        {
            "multiplications": multiplications,
            "buckets": lambda: signed_parts(bases, weights, n2),
            "bos-coster": lambda: signed_bos_coster(bases, weights, n2),
            # what a worker lane's executor does with its arguments (local, never a peer's)
            "pickle": lambda: ForkingPickler.loads(ForkingPickler.dumps(bases)),
            "packed": lambda: ForkingPickler.loads(
                ForkingPickler.dumps(PackedInts(packed.values, packed.width))
            ),
        },
        rounds,
    )
    rows = [
        common.Row(
            f"one multiplication mod n^2 from Python (of {len(chain)})",
            t["multiplications"] / len(chain) * 1e6,
            None,
            "us",
        ),
        common.Row(
            f"{terms}-term signed combination: buckets vs Bos-Coster (by sign)",
            t["buckets"] * 1e3,
            t["bos-coster"] * 1e3,
            "ms",
            better=common.LOWER,
        ),
        common.Row(
            f"ship {terms} ciphertexts both ways: PackedInts vs pickled mpz list",
            t["packed"] * 1e3,
            t["pickle"] * 1e3,
            "ms",
            better=common.LOWER,
        ),
    ]
    return common.BenchResult("lanes", key_bits, rows, params={"terms": terms, "rounds": rounds})


def main(args) -> int:
    """Run from parsed arguments, print the table, optionally write JSON."""
    if args.terms < 1 or args.rounds < 1:
        raise InvalidInputError("--terms and --rounds must be >= 1")
    console, _ = common.start(args, width=120)
    with status(console, f"timing {args.terms} terms at {args.key_bits} bits"):
        result = run(args.key_bits, args.terms, args.rounds)
    return common.finish(args, result, console, table=True)
