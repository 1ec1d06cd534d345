"""Cost accounting: a ledger per party, merged reports, and a cost model.

See ``docs/architecture.md`` ("The cost ledger").  The package has one module
per job:

* :mod:`smc_hmm.cost.ledger` -- :class:`CostLedger` *counts* one party's
  crypto operations, traffic, rounds (causal depth) and time per phase;
* :mod:`smc_hmm.cost.report` -- :class:`CostReport` *merges* the ledgers of a
  run, validates and writes JSON, and renders tables that fit the console;
* :mod:`smc_hmm.cost.model` -- :class:`CostModel` *predicts* running time at
  other key sizes, input sizes and networks from :class:`PrimitiveRates`.

Measuring the rates is a benchmark: :func:`smc_hmm.bench.rates.measure_rates`
(the bench layer sits above this one; importing :mod:`smc_hmm.cost`
does not import :mod:`smc_hmm.bench`).
"""

from __future__ import annotations

from smc_hmm.cost.ledger import OPS, ROOT_PHASE, CostLedger
from smc_hmm.cost.model import (
    CRYPTO_OPS,
    SCALING_EXPONENTS,
    CostModel,
    Prediction,
    PrimitiveRates,
)
from smc_hmm.cost.report import REPORT_VERSION, CostReport

__all__ = [
    "CRYPTO_OPS",
    "OPS",
    "REPORT_VERSION",
    "ROOT_PHASE",
    "SCALING_EXPONENTS",
    "CostLedger",
    "CostModel",
    "CostReport",
    "Prediction",
    "PrimitiveRates",
]
