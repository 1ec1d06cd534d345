"""Large-margin Gaussian mixture classifiers trained with differential privacy (thesis 003,
section 4.1.2 and appendix A.2; Sha and Saul 2006; Chaudhuri, Monteleoni and Sarwate 2011).

**Who learns what.**  The data owner (the curator) trains on her own labelled points and
publishes the classifier.  Anyone who sees the release -- the matrices and the metadata
(eps, eps', lam, h, n, C, M, d, the public scaling, the solver's method and tolerance) --
learns about any one training record only what eps'-differential privacy allows
(neighbouring data sets: one record replaced; n is public).  Nothing else about the
data leaves the curator: not the objective value, the iteration count, nor the
perturbation B.  Whether a release happens must not depend on a record either:
``smc-hmm release lmgmm`` maps every record by a public rule (:data:`RECORD_RULE`,
:func:`public_records`: a malformed record or an undeclared label becomes a null record,
counted in n with no loss; rows are scaled into the unit ball; a class may have no
records), so it refuses only options and the file's format.  The library functions
(:func:`training_data`, :func:`train_dp`) still refuse malformed input from a direct
caller.

**The model.**  Class c, or each mixture component m of class c, is a symmetric
(d+1) x (d+1) matrix Phi_cm acting on z = [x; 1]; the distance of x to the component is
a_cm(x) = z^T Phi_cm z and to the class the soft-min -log sum_m exp(-a_cm(x)).  An
instance goes to the class at the smallest distance (:class:`LargeMarginGMM`).  Training
keeps every Phi_cm positive semidefinite (a Mahalanobis distance plus an offset).

**The objective** (:func:`objective`), in the averaged form whose n lambda appears in
Theorem 4.1.2, over n records (x_i, y_i, m_i) with ||x_i||_2 <= 1:

    J_B(Phi) = (1/n) sum_i sum_{c != y_i} H_h(u_ic)
               + lam sum_cm [ tr(I_Phi Phi_cm I_Phi) + 1/2 ||Phi_cm||_F^2 ]
               + (1/n) sum_cm <B_cm, Phi_cm>,

    u_ic = 1 + a_{y_i m_i}(x_i) + log sum_m exp(-a_cm(x_i)),

the margin violations of constraint (4.8) ((4.6) when M = 1), with H_h the Huber hinge
(4.10): 0 for u <= -h, (u + h)^2 / (4h) for |u| <= h, u for u >= h.  The trace term is
the thesis's regulariser (4.11); the ridge term is ours: the trace is linear, so without
it J is not strongly convex (the thesis's Lemma A.2.2 claims that the Huber loss is, which
it is not) and Theorem 4.1.2's Jacobian argument has nothing to stand on.  Mixture labels
m_i must be a per-record function (:func:`assign_components` with public centres); the
thesis's labels from a generative GMM fitted on the private data (:func:`gmm_components`)
make every label depend on every record and void the analysis: they serve non-private
training only.

**Objective perturbation** (4.13), corrected (``docs/lmgmm.md`` derives each step):

- B is one symmetric matrix per (class, component), not one matrix shared by all
  classes: with a shared b the stationarity conditions force grad_c L = grad_c' L at the
  release for every pair of classes, a data-dependent surface, so a release under a data
  set is impossible under a neighbour.  ``perturbation="thesis"`` keeps the shared b
  (norm Gamma((d+1)^2, 2/eps), a general matrix) to reproduce the thesis; it carries no
  guarantee and :func:`train_dp` says so (``formal_guarantee=False``).
- Sensitivity (Lemma A.2.1): one record's loss gradient has Frobenius norm at most
  ||z||^2 sqrt(C (C - 1)) <= 2 sqrt(C (C - 1)) (the thesis's "1" uses ||x x^T|| = ||x||
  and forgets the appended 1 of z), so neighbouring data sets (one record replaced)
  differ by at most Delta = 4 sqrt(C (C - 1)) (:func:`sensitivity`).
- B has density proportional to exp(-eps ||B||_F / Delta) on the K = C M (d+1)(d+2)/2
  dimensional space of the parameters: ||B||_F ~ Gamma(K, Delta/eps) and a uniform
  direction (:func:`sample_perturbation`); with Delta = 2 this is the thesis's (4.12).
- The guarantee is eps' = eps + k (Theorem 4.1.2) with k = sup log det(I + H/(n lam)) over
  one record's loss Hessian H (:func:`jacobian_term`).  For M = 1 the supremum is exact:
  k = log(1 + 2C/(h n lam)) + (C - 2) log(1 + 2/(h n lam)); its largest eigenvalue bound
  alpha = 2C/h plays the role of Chaudhuri et al.'s c in the thesis's two-factor
  log(1 + 2 alpha/(n lam) + alpha^2/(n lam)^2), which covers Hessians of rank <= 2 only.
- The PSD constraint: Kifer, Smith and Thakurta (2012) extend objective perturbation to
  hard convex constraints (a limit of smooth penalties whose Hessians only add to the
  common part of the two Jacobians); ``psd=False`` trains without it.

The guarantee is that of the exact minimiser; :func:`solve` reaches the gradient-mapping
tolerance ``tol`` (suboptimality <= tol^2 / (2 lam)), as every objective-perturbation
implementation does.  Randomness: :mod:`smc_hmm.dp.random` (CSPRNG by default); why a
floating-point sampler is acceptable here (the release is a minimiser, not f(D) + noise)
is argued in ``docs/lmgmm.md``.

Modules: :mod:`~smc_hmm.dp.lmgmm.model` (classifier, records, scaling, mixture labels,
generative baseline), :mod:`~smc_hmm.dp.lmgmm.loss` (objective and derivatives),
:mod:`~smc_hmm.dp.lmgmm.privacy` (sensitivity, Jacobian term, guarantee, perturbation),
:mod:`~smc_hmm.dp.lmgmm.solve` (FISTA and the cvxpy reference),
:mod:`~smc_hmm.dp.lmgmm.train` (training, releases, files).  Everything public is
re-exported here.  The command ``smc-hmm release lmgmm`` is :mod:`smc_hmm.cli.release.lmgmm`.
"""

from smc_hmm.dp.lmgmm.loss import (
    example_gradients,
    example_hessians,
    huber_hinge,
    objective,
    objective_and_gradient,
)
from smc_hmm.dp.lmgmm.model import (
    BALL_TOLERANCE,
    MIN_PER_CLASS,
    RECORD_RULE,
    LargeMarginGMM,
    TrainingData,
    assign_components,
    generative_classifier,
    gmm_components,
    into_unit_ball,
    public_records,
    training_data,
)
from smc_hmm.dp.lmgmm.privacy import (
    Guarantee,
    guarantee,
    jacobian_term,
    noise_epsilon,
    sample_perturbation,
    sample_thesis_perturbation,
    sensitivity,
)
from smc_hmm.dp.lmgmm.solve import Solution, solve
from smc_hmm.dp.lmgmm.train import (
    LMGMMRelease,
    load_data,
    load_release,
    save_release,
    train,
    train_dp,
)

__all__ = [
    "BALL_TOLERANCE",
    "MIN_PER_CLASS",
    "RECORD_RULE",
    "Guarantee",
    "LMGMMRelease",
    "LargeMarginGMM",
    "Solution",
    "TrainingData",
    "assign_components",
    "example_gradients",
    "example_hessians",
    "generative_classifier",
    "gmm_components",
    "guarantee",
    "huber_hinge",
    "into_unit_ball",
    "jacobian_term",
    "load_data",
    "load_release",
    "noise_epsilon",
    "objective",
    "objective_and_gradient",
    "public_records",
    "sample_perturbation",
    "sample_thesis_perturbation",
    "save_release",
    "sensitivity",
    "solve",
    "train",
    "train_dp",
    "training_data",
]
