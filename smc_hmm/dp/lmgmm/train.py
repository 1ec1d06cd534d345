"""Training and releasing large-margin GMM classifiers, privately or not (thesis 003,
section 4.1.2).

:func:`train` minimises the unperturbed objective; :func:`train_dp` draws the perturbation,
charges eps' to an accountant (or checks a budget) before drawing it, and returns an
:class:`LMGMMRelease` with the :class:`~smc_hmm.dp.lmgmm.privacy.Guarantee`.
:func:`save_release` / :func:`load_release` write and read ``.npz`` files without pickle;
:func:`load_data` reads a training data file (``smc-hmm release lmgmm --data``).
See ``docs/lmgmm.md``.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.dp.lmgmm.model import MIN_PER_CLASS, LargeMarginGMM, training_data
from smc_hmm.dp.lmgmm.privacy import (
    Guarantee,
    guarantee,
    sample_perturbation,
    sample_thesis_perturbation,
)
from smc_hmm.dp.lmgmm.solve import Method, Solution, solve
from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.random import DPRandom, resolve_rng
from smc_hmm.dp.release import existing_file, read_json
from smc_hmm.errors import ConfigError, ModelError, PrivacyBudgetError, PrivacyError

FORMAT = "smc-hmm lmgmm release v1"


# -- training and release ---------------------------------------------------------------------


def train(
    x: ArrayLike,
    y: ArrayLike,
    *,
    lam: float = 0.01,
    h: float = 0.5,
    n_classes: int | None = None,
    n_components: int = 1,
    components: ArrayLike | None = None,
    psd: bool = True,
    method: Method = "fista",
    tol: float = 1e-7,
) -> tuple[LargeMarginGMM, Solution]:
    """The non-private large-margin GMM: argmin J_0 (no perturbation)."""
    data = training_data(
        x, y, n_classes=n_classes, n_components=n_components, components=components
    )
    sol = solve(data, lam=lam, h=h, psd=psd, method=method, tol=tol)
    return LargeMarginGMM(sol.phi), sol


@dataclass(frozen=True, eq=False)
class LMGMMRelease:
    """A trained DP classifier and what it guarantees.

    ``guarantee`` is None for ``perturbation="thesis"`` (``formal_guarantee`` False).
    ``randomness`` names the bit source (INSECURE for seeded streams).  The perturbation
    itself is never part of the release.
    """

    model: LargeMarginGMM
    guarantee: Guarantee | None
    formal_guarantee: bool
    mechanism: str
    sampler: str
    randomness: str
    solver: dict[str, Any]
    psd: bool

    @property
    def insecure(self) -> bool:
        return "INSECURE" in self.randomness

    def metadata(self) -> dict[str, Any]:
        """JSON-ready description: the guarantee (eps, eps', lam, h, n, ...) and provenance."""
        g = self.guarantee
        return {
            "format": FORMAT,
            "formal_guarantee": self.formal_guarantee,
            "epsilon": None if g is None else g.epsilon,
            "epsilon_total": None if g is None else g.epsilon_total,
            "guarantee": None if g is None else g.as_dict(),
            "mechanism": self.mechanism,
            "sampler": self.sampler,
            "randomness": self.randomness,
            "solver": self.solver,
            "psd": self.psd,
            "n_classes": self.model.n_classes,
            "n_components": self.model.n_components,
            "dim": self.model.dim,
        }


SAMPLER = (
    "float: the K-norm mechanism of the L2 ball of radius Delta in the K svec coordinates "
    "(smc_hmm.dp.knorm: r ~ Gamma(K+1, 1/eps) as a sum of exponentials, U uniform in the "
    "ball from Box-Muller normals); bits from smc_hmm.dp.random"
)


def train_dp(
    x: ArrayLike,
    y: ArrayLike,
    epsilon: float,
    *,
    lam: float = 0.01,
    h: float = 0.5,
    n_classes: int | None = None,
    n_components: int = 1,
    components: ArrayLike | None = None,
    psd: bool = True,
    budget: float | None = None,
    accountant=None,
    label: str = "lmgmm",
    rng: DPRandom | None = None,
    perturbation: Literal["objective", "thesis"] = "objective",
    method: Method = "fista",
    tol: float = 1e-7,
    phi0: np.ndarray | None = None,
    weights: ArrayLike | None = None,
    min_per_class: int = MIN_PER_CLASS,
) -> LMGMMRelease:
    """Train by objective perturbation (module docstring) with noise parameter ``epsilon``.

    The release is eps'-DP with eps' = ``epsilon`` + k (:func:`guarantee`).  ``budget``
    refuses (PrivacyBudgetError, before any noise is drawn) when eps' exceeds it;
    ``accountant`` (a :class:`~smc_hmm.dp.accountant.PrivacyAccountant` or a parallel group)
    is charged eps' around the sampling and solving.  :func:`noise_epsilon` turns a target
    eps' into ``epsilon``.  ``perturbation="thesis"`` uses the thesis's shared b: no
    guarantee, refused with a budget or an accountant.  Mixture labels (``components``)
    must come from a per-record rule (:func:`assign_components`).  ``weights`` marks null
    records (:func:`~smc_hmm.dp.lmgmm.model.public_records`: counted in n, no loss);
    ``min_per_class`` is :func:`training_data`'s check (0 accepts a class without records,
    as the release command does: the guarantee needs no minimum).
    """
    eps = check_epsilon(epsilon, "epsilon")
    data = training_data(
        x,
        y,
        n_classes=n_classes,
        n_components=n_components,
        components=components,
        min_per_class=min_per_class,
        weights=weights,
    )
    stream = resolve_rng(rng)
    solver = {"lam": lam, "h": h, "psd": psd, "method": method, "tol": tol, "phi0": phi0}
    if perturbation == "thesis":
        if budget is not None or accountant is not None:
            raise PrivacyError(
                "the thesis's shared perturbation has no privacy guarantee to charge"
            )
        return _thesis_release(data, eps, stream, solver)
    if perturbation != "objective":
        raise ConfigError(f"perturbation must be 'objective' or 'thesis', got {perturbation!r}")
    return _objective_release(data, eps, stream, solver, budget, accountant, label)


def _thesis_release(data, eps: float, stream: DPRandom, solver: dict) -> LMGMMRelease:
    """The perturbation as printed in the thesis: one b for every class -- no guarantee."""
    c, m, d = data.n_classes, data.n_components, data.dim
    b = sample_thesis_perturbation(d, eps, stream)
    b_sym = np.broadcast_to(0.5 * (b + b.T), (c, m, d + 1, d + 1))
    sol = solve(data, perturbation=b_sym, **solver)
    return LMGMMRelease(
        LargeMarginGMM(sol.phi),
        None,
        False,
        "objective perturbation as printed in the thesis (one b shared by all classes, "
        "||b|| ~ Gamma((d+1)^2, 2/eps)): NO privacy guarantee",
        SAMPLER,
        stream.description,
        sol.public_summary(solver["tol"]),
        solver["psd"],
    )


def _objective_release(
    data, eps: float, stream: DPRandom, solver: dict, budget, accountant, label: str
) -> LMGMMRelease:
    """Objective perturbation (thesis 4.13, corrected): eps' = eps + k checked against
    ``budget`` and charged to ``accountant`` before the noise is drawn; nothing is
    released unless the solver reaches its tolerance."""
    c, m, d = data.n_classes, data.n_components, data.dim
    g = guarantee(data.n, c, d, eps, lam=solver["lam"], h=solver["h"], n_components=m)
    if budget is not None and g.epsilon_total > check_epsilon(budget, "budget") * (1 + 1e-12):
        raise PrivacyBudgetError(
            f"this release is eps' = {g.epsilon_total:.6g}-DP (eps {eps:g} + Jacobian term "
            f"{g.jacobian_term:.4g}), more than the budget {budget:g}"
        )
    charge = accountant.charge(g.epsilon_total, label) if accountant is not None else nullcontext()
    with charge:
        b = sample_perturbation(c, m, d, eps, g.sensitivity, stream)
        sol = solve(data, perturbation=b, **solver)
        if not sol.converged:
            raise PrivacyError(
                f"the solver stopped before its tolerance ({sol.iterations} iterations, "
                f"gradient mapping {sol.gradient_mapping:.3g}): nothing released"
            )
    return LMGMMRelease(
        LargeMarginGMM(sol.phi),
        g,
        True,
        f"objective perturbation (thesis 4.13, corrected): one symmetric B per class and "
        f"component, density prop. to exp(-eps ||B||_F / Delta), Delta = {g.sensitivity:.4g}, "
        f"eps' = eps + {g.jacobian_term:.4g}",
        SAMPLER,
        stream.description,
        sol.public_summary(solver["tol"]),
        solver["psd"],
    )


def save_release(
    path: str | Path, release: LMGMMRelease, extra: dict[str, Any] | None = None
) -> None:
    """Write ``phi`` and the metadata JSON (plus ``extra`` keys, e.g. the public scaling of
    the features) to an ``.npz`` archive, read back without pickle by :func:`load_release`."""
    meta = json.dumps({**(extra or {}), **release.metadata()}, sort_keys=True)
    with open(path, "wb") as fh:
        np.savez(fh, phi=release.model.phi, metadata=np.array(meta))


def load_release(path: str | Path) -> tuple[LargeMarginGMM, dict[str, Any]]:
    """Read a file of :func:`save_release`: (model, metadata).  ModelError if malformed."""
    try:
        with np.load(path, allow_pickle=False) as files:
            if set(files.files) != {"phi", "metadata"}:
                raise ModelError(f"{path}: expected members phi and metadata, got {files.files}")
            phi = files["phi"]
            meta = json.loads(str(files["metadata"]))
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: not a large-margin GMM release ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelError(
            f"{path}: unknown format {meta.get('format') if isinstance(meta, dict) else meta!r}"
        )
    return LargeMarginGMM(phi), meta


def load_data(path: object) -> tuple[Any, Any, int | None]:
    """``(rows, labels, d or None)`` from a ``.npz`` (members x, y) or ``.json``
    (``{"x": [...], "y": [...]}``) file.  Only the format is checked (ConfigError); the
    records are not (:func:`~smc_hmm.dp.lmgmm.model.public_records` maps them).  d is
    the npz ``x``'s number of columns, None for JSON."""
    p = existing_file(path, "--data")
    if p.suffix == ".npz":
        try:
            with np.load(p, allow_pickle=False) as files:
                if set(files.files) != {"x", "y"}:
                    raise ConfigError(f"{p}: expected members x and y, got {sorted(files.files)}")
                x, y = files["x"], files["y"]
        except (OSError, ValueError, EOFError) as e:
            raise ConfigError(f"cannot read --data {p}: {e}") from None
        if x.ndim != 2 or x.shape[1] == 0 or x.dtype.kind not in "iuf":
            raise ConfigError(f"{p}: x must be an (n, d) numeric matrix, got shape {x.shape}")
        if y.ndim != 1:
            raise ConfigError(f"{p}: y must be a 1-d array of labels, got shape {y.shape}")
        return list(x), list(y), int(x.shape[1])
    if p.suffix == ".json":
        raw = read_json(p, "--data")
        if not isinstance(raw, dict) or set(raw) != {"x", "y"}:
            raise ConfigError(f'{p}: expected a JSON object {{"x": [[...]], "y": [...]}}')
        if not isinstance(raw["x"], list) or not isinstance(raw["y"], list):
            raise ConfigError(f"{p}: x and y must be lists (one entry per record)")
        return raw["x"], raw["y"], None
    raise ConfigError(f"--data must be a .npz or .json file, got {p}")
