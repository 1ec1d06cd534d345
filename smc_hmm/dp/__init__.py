"""Differential privacy for hidden Markov models: a library, with no command line (the
``smc-hmm release`` commands are :mod:`smc_hmm.cli.release`; ``lint-imports`` keeps
argparse and :mod:`smc_hmm.cli` out of this package).

The package has no imports of its own: import each module directly.

- :mod:`smc_hmm.dp.params`: the checks of privacy parameters (eps, delta, sensitivities)
  every module shares; a leaf.
- :mod:`smc_hmm.dp.random`: the randomness of every mechanism: the operating system's
  CSPRNG by default, an explicitly INSECURE seeded generator for tests and reproducible
  experiments; each mechanism spawns its own stream.
- :mod:`smc_hmm.dp.mechanisms`: Laplace (scalar and vector), geometric (two-sided
  discrete Laplace) and truncated geometric mechanisms, with a plain floating-point
  sampler and two samplers hardened against Mironov's (2012) floating-point attack
  (OpenDP's discrete samplers, Mironov's snapping mechanism); every release reports the
  sampler that ran and the privacy it spent.
- :mod:`smc_hmm.dp.zcdp`: the Gaussian mechanism with zero-concentrated DP accounting,
  converted to (eps, delta).
- :mod:`smc_hmm.dp.accountant`: a privacy budget with sequential and parallel
  composition that refuses, before sampling, any release that would exceed it.
- :mod:`smc_hmm.dp.audit`: worst-case privacy loss of a finite mechanism (a
  row-stochastic matrix or an HMM's emissions) under a neighbour relation, and
  Pufferfish ratios under attacker priors (paper 002).
- :mod:`smc_hmm.dp.baum_welch`: DP Baum-Welch (paper 000, sections 4-5): Laplace noise
  on the expected counts of discrete HMMs and on the sufficient statistics of Gaussian
  HMMs, in the last iteration or in every iteration; :mod:`smc_hmm.dp.federated`, the
  same with several data owners and one noisy total per E-step.
- :mod:`smc_hmm.dp.keyword_models`: DP keyword HMMs whose every record has a bounded
  contribution (Gaussian mechanism, zCDP); :mod:`smc_hmm.dp.keyword_release`, their
  training files in and their model file and guarantee out (``docs/dp-keyword-models.md``).
- :mod:`smc_hmm.dp.classifier`: the DP aggregate classifier of thesis 003, 4.1.3, in the
  clear (local training and noise).
- :mod:`smc_hmm.dp.lmgmm`: large-margin GMM classifiers trained by objective
  perturbation (thesis 003, section 4.1.2), with the guarantee eps' = eps + k derived for
  their loss (``docs/lmgmm.md``).
- :mod:`smc_hmm.dp.knorm`, :mod:`smc_hmm.dp.policy` and :mod:`smc_hmm.dp.dphmm`: the
  K-norm mechanism, policy graphs and sensitivity hulls, and the DPHMM release of paper
  001/004.
- :mod:`smc_hmm.dp.release`: the releases behind ``smc-hmm release hmm`` and ``smc-hmm
  release trace``, as functions of plain options (data files, the public skeleton, the
  privacy metadata).
- :mod:`smc_hmm.dp.evaluation`: tools that measure releases and release nothing: the
  DPHMM grid world (``evaluation.gridworld``) and the empirical privacy audit
  (``evaluation.empirical_audit``).

See ``docs/dp-layer.md`` for the mechanisms, the sensitivity analysis and the measured
privacy/utility curves.
"""
