"""``smc-hmm bench primitives``: single-thread primitive rates for the cost model.

Times encryption, decryption, homomorphic addition, scalar multiplication,
multi-exponentiation terms and re-randomisation at one key size; ``--json``
writes the rates that ``smc-hmm cost --rates`` reads.
"""

from __future__ import annotations

from smc_hmm.bench.common import (
    bounded,
    bounded_float,
    check_key_bits,
    common_arguments,
    finish,
    throwaway_keypair,
)
from smc_hmm.progress import status


def add_arguments(parser) -> None:
    with common_arguments(parser, json_help="write the rates (input of `smc-hmm cost --rates`)"):
        parser.add_argument(
            "--scalar-bits",
            type=bounded(1, 4096),
            default=64,
            help="bits of scalars and multi-exponentiation weights",
        )
        parser.add_argument(
            "--min-seconds",
            type=bounded_float(0.001, 600.0),
            default=0.2,
            help="minimum timing per operation",
        )


def main(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from smc_hmm.bench.rates import measure_rates

    check_key_bits(args)
    console = Console()
    with status(console, f"generating a throw-away {args.key_bits}-bit key pair"):
        pk, sk = throwaway_keypair(args.key_bits)
    with status(console, "timing encrypt, decrypt, add, scalar multiply, multiexp, rerandomize"):
        rates = measure_rates(pk, sk, scalar_bits=args.scalar_bits, min_seconds=args.min_seconds)
    table = Table(
        title=f"primitive rates, {rates.bits}-bit keys, one thread "
        f"({rates.scalar_bits}-bit scalars)"
    )
    for col in ("operation", "per second", "us each", "scales as bits^"):
        table.add_column(col, justify="left" if col == "operation" else "right", no_wrap=True)
    for op, rate in sorted(rates.rates.items()):
        table.add_row(op, f"{rate:,.0f}", f"{1e6 / rate:.1f}", f"{rates.exponents[op]:g}")
    console.print(table)
    return finish(args, rates.to_dict(), console, sort_keys=True)
