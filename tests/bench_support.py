"""Shared by the benchmark smoke tests: a benchmark module's command line, and one run
of it that writes its JSON report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def bench_parser(bench) -> argparse.ArgumentParser:
    """The command line of the benchmark module ``bench`` (``smc-hmm bench NAME``)."""
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser


def run_bench(bench, argv: list[str], report: Path) -> tuple[int, dict]:
    """``bench`` run with ``argv`` and ``--json report``: (its exit status, the report)."""
    code = bench.main(bench_parser(bench).parse_args([*argv, "--json", str(report)]))
    return code, json.loads(report.read_text())
