"""Differential privacy for hidden Markov models.

The package has no imports of its own: import each module directly.

- :mod:`smc_hmm.dp.random`: the randomness of every mechanism: the operating system's
  CSPRNG by default, an explicitly INSECURE seeded generator for tests and reproducible
  experiments; each mechanism spawns its own stream.
- :mod:`smc_hmm.dp.mechanisms`: Laplace (scalar and vector), geometric (two-sided
  discrete Laplace) and truncated geometric mechanisms, with a plain floating-point
  sampler and two samplers hardened against Mironov's (2012) floating-point attack
  (OpenDP's discrete samplers, Mironov's snapping mechanism); every release reports the
  sampler that ran and the privacy it spent.
- :mod:`smc_hmm.dp.accountant`: a privacy budget with sequential and parallel
  composition that refuses, before sampling, any release that would exceed it.
- :mod:`smc_hmm.dp.audit`: worst-case privacy loss of a finite mechanism (a
  row-stochastic matrix or an HMM's emissions) under a neighbour relation, and
  Pufferfish ratios under attacker priors (paper 002).
- :mod:`smc_hmm.dp.baum_welch`: DP Baum-Welch (paper 000, sections 4-5): Laplace noise
  on the expected counts of discrete HMMs and on the sufficient statistics of Gaussian
  HMMs, in the last iteration or in every iteration.
- :mod:`smc_hmm.dp.lmgmm`: large-margin GMM classifiers trained by objective
  perturbation (thesis 003, section 4.1.2), with the guarantee eps' = eps + k derived for
  their loss; ``smc-hmm release lmgmm`` (``docs/lmgmm.md``).
- :mod:`smc_hmm.dp.knorm`, :mod:`smc_hmm.dp.policy`, :mod:`smc_hmm.dp.dphmm` and
  :mod:`smc_hmm.dp.gridworld` (written separately): the K-norm mechanism, policy graphs
  and sensitivity hulls, the DPHMM release of paper 001/004 and its grid-world data.

See ``docs/dp-layer.md`` for the mechanisms, the sensitivity analysis and the measured
privacy/utility curves.
"""
