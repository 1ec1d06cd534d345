"""``smc-hmm certs --out DIR --parties alice,bob,trent``: a CA and party certificates."""

from __future__ import annotations

import argparse

from smc_hmm.cli.common import console
from smc_hmm.options import add_checked

HELP = "make a CA and per-party certificates for mutual TLS"


#: the longest validity --days takes (smc_hmm.certs.MAX_CERT_DAYS, which checks it: this
#: module imports smc_hmm.certs, and so the cryptography package, only when it runs)
MAX_DAYS = 3650


def _check_days(value: int, name: str) -> int:
    from smc_hmm.certs import check_days

    return check_days(value, name)


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="directory for ca.pem, NAME.pem, NAME.key")
    p.add_argument("--parties", required=True, help="comma-separated party names")
    p.add_argument(
        "--clients",
        default="",
        help="comma-separated client names: certificates with the client role, for clients "
        "of a serving party (smc-hmm serve)",
    )
    add_checked(
        p.add_argument,
        "--days",
        _check_days,
        convert=int,
        default=365,
        help=f"validity in days (1 to {MAX_DAYS:,}: ten years)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a certificate set already in --out: its ca.pem and the certificates "
        "it issued (with their keys) are removed first, so none is left stale",
    )


def run(args) -> int:
    from smc_hmm.certs import make_certificates

    certs = make_certificates(
        args.out, args.parties, days=args.days, force=args.force, clients=args.clients
    )
    out = console()
    for path in certs.removed:
        out.print(f"removed stale {path} (from the replaced certificate set)")
    out.print(f"CA certificate: {certs.ca_cert}")
    for name in certs.certs:
        out.print(f"{name}: {certs.certs[name]} (key {certs.keys[name]}, mode 0600)")
    return 0
