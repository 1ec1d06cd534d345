"""Evaluation tools of the DP layer: they measure releases, they release nothing.

The package has no imports of its own: import each module directly.

- :mod:`smc_hmm.dp.evaluation.gridworld`: the synthetic grid-world mobility model and the
  DPHMM evaluation of the paper's section 8 (``docs/dphmm.md``,
  ``examples/dphmm_gridworld.py``, ``smc-hmm bench dphmm``).
- :mod:`smc_hmm.dp.evaluation.empirical_audit`: a histogram-ratio estimate of a sampled
  release's privacy loss, applied to the DP keyword models (``docs/dp-keyword-models.md``,
  ``smc-hmm bench dp-keyword``).
"""
