"""Moved to :mod:`smc_hmm.dp.evaluation.gridworld`; import it from there.

This alias stays only while :mod:`smc_hmm.bench.dphmm` still imports the old path; it goes
with that import."""

from smc_hmm.dp.evaluation.gridworld import (
    GridWorld,
    MethodResult,
    evaluate,
    learn_markov_model,
    run_benchmark,
    sweep,
)

__all__ = ["GridWorld", "MethodResult", "evaluate", "learn_markov_model", "run_benchmark", "sweep"]
