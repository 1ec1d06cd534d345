"""Paillier core benchmark; same as ``smc-hmm bench crypto`` (see docs/benchmarks.md)."""

import argparse
import sys

from smc_hmm.bench import crypto

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=crypto.__doc__)
    crypto.add_arguments(parser)
    sys.exit(crypto.main(parser.parse_args()))
