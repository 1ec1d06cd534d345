"""Why the 820-term linear combination is built the way it is (docs/benchmarks.md).

Measures, side by side in one run at 2048 bits (medians of interleaved rounds):

1. one 4096-bit modular multiplication from Python (the unit every path pays);
2. signed-digit buckets (what ``CipherArray.lincomb`` uses) against Bos-Coster, which
   needs fewer multiplications but keeps a heap in Python;
3. shipping 820 ciphertexts to a process: pickling the mpz list against
   :class:`smc_hmm.crypto.bulk.PackedInts`.

Run: ``python3 benchmarks/bench_lanes.py [--terms 820] [--rounds 7]``.
"""

from __future__ import annotations

import argparse
import bisect
import pickle
import secrets

import gmpy2
from gmpy2 import mpz

from smc_hmm.bench.common import interleaved_medians
from smc_hmm.crypto import CipherArray, PublicKey, generate_keypair
from smc_hmm.crypto.bulk import PackedInts
from smc_hmm.crypto.multiexp import combine_parts, signed_parts


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--terms", type=int, default=820)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    pk, _ = generate_keypair(2048)
    n2 = pk.nsquare_mpz
    cts = CipherArray.encrypt(
        PublicKey(pk.n), [secrets.randbelow(1 << 30) for _ in range(args.terms)]
    )
    bases = cts.ciphertexts()
    weights = [
        secrets.randbelow(1 << 40) * (1 if secrets.randbits(1) else -1) for _ in range(args.terms)
    ]
    if signed_bos_coster(bases, weights, n2) != combine_parts(
        [signed_parts(bases, weights, n2)], n2
    ):
        raise AssertionError("Bos-Coster and buckets disagree")
    chain = bases[:400]

    def multiplications():
        acc = mpz(1)
        for b in chain:
            acc = acc * b % n2

    packed = PackedInts.for_modulus(bases, n2)
    serial = interleaved_medians(
        {
            "400 multiplications mod n^2": multiplications,
            "buckets (signed digits)": lambda: signed_parts(bases, weights, n2),
            "Bos-Coster (by sign)": lambda: signed_bos_coster(bases, weights, n2),
            "pickle mpz list, both ways": lambda: pickle.loads(pickle.dumps(bases)),
            "PackedInts, both ways": lambda: pickle.loads(
                pickle.dumps(PackedInts(packed.values, packed.width))
            ),
        },
        args.rounds,
    )
    print(f"2048-bit key, {args.terms} terms, medians of {args.rounds} interleaved rounds")
    for name, seconds in serial.items():
        print(f"  {name:40s} {seconds * 1e3:8.2f} ms")
    per_mult = serial["400 multiplications mod n^2"] / len(chain) * 1e6
    print(f"  one multiplication mod n^2: {per_mult:.2f} us")


if __name__ == "__main__":
    main()
