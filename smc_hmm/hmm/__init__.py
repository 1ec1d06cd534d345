"""Plaintext hidden Markov models: the reference every secure protocol is checked against.

- :mod:`~smc_hmm.hmm.models`: validated, immutable :class:`DiscreteHMM` and
  :class:`GaussianHMM`, with emission log-densities, sampling and hmmlearn interop.
- :mod:`~smc_hmm.hmm.inference`: log-space forward, backward, Viterbi and posteriors,
  from a model and observations or from log parameters.
- :mod:`~smc_hmm.hmm.training`: the Baum-Welch E-step (:func:`expected_counts`),
  M-step (:func:`reestimate`) and loop (:func:`baum_welch`).
- :mod:`~smc_hmm.hmm.gaussian_forms`: Gaussian log-densities as quadratic forms
  z^T W_j z and their distinct-product form (thesis 003, section 4.2.1).
"""

from smc_hmm.hmm.gaussian_forms import (
    constant_index,
    diag_emission_weights,
    emission_weights,
    n_products,
    product_indices,
    quadratic_form_matrices,
    quadratic_form_matrix,
    quadratic_products,
    quadratic_weights,
)
from smc_hmm.hmm.inference import (
    LogParameters,
    backward,
    backward_from_logs,
    forward,
    forward_from_logs,
    log_likelihood,
    log_likelihood_from_logs,
    log_parameters,
    posteriors,
    posteriors_from_logs,
    viterbi,
    viterbi_from_logs,
)
from smc_hmm.hmm.models import HMM, DiscreteHMM, GaussianHMM
from smc_hmm.hmm.training import (
    BaumWelchResult,
    ExpectedCounts,
    baum_welch,
    expected_counts,
    reestimate,
)

__all__ = [
    "HMM",
    "BaumWelchResult",
    "DiscreteHMM",
    "ExpectedCounts",
    "GaussianHMM",
    "LogParameters",
    "backward",
    "backward_from_logs",
    "baum_welch",
    "constant_index",
    "diag_emission_weights",
    "emission_weights",
    "expected_counts",
    "forward",
    "forward_from_logs",
    "log_likelihood",
    "log_likelihood_from_logs",
    "log_parameters",
    "n_products",
    "posteriors",
    "posteriors_from_logs",
    "product_indices",
    "quadratic_form_matrices",
    "quadratic_form_matrix",
    "quadratic_products",
    "quadratic_weights",
    "reestimate",
    "viterbi",
    "viterbi_from_logs",
]
