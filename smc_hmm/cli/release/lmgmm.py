"""``smc-hmm release lmgmm``: train a large-margin GMM classifier with differential privacy
and release it to a file with its guarantee (thesis 003, section 4.1.2; ``docs/lmgmm.md``).

The options (:func:`add_arguments`) and the command (:func:`run`, ``run(args, console) ->
exit code``); the data file's reader, the training and the release file are
:mod:`smc_hmm.dp.lmgmm`.  Every bad option or file format raises a typed
:class:`~smc_hmm.errors.SmcHmmError`:
``ConfigError`` for files and options, ``ShapeMismatchError`` for a file whose labels and
rows differ in number, ``PrivacyParameterError`` for eps <= 0 or k >= ``--eps-total`` and
``PrivacyBudgetError`` when eps' exceeds ``--budget`` (k and eps' depend on the public n,
C, M, d, lam and h only).  No record is refused (**records** below).

- **data** (``--data``): ``.npz`` with members ``x`` (n, d) and ``y`` (n,) (integer labels
  0..C-1), or ``.json`` ``{"x": [[...], ...], "y": [...]}``.  Rows are mapped by the public
  scaling: ``--radius R`` (and optionally ``--centre FILE``, a ``.npy``/``.json`` vector of
  d numbers) gives (x - centre)/R; every row still outside the unit L2 ball (without
  ``--radius``: every row outside it) is scaled onto its sphere.  R and the centre must be
  public (fixed without looking at the data); they are written into the release, since
  new inputs need the same map.
- **public sizes**: ``--classes C`` is required (the labels are 0..C-1, never taken from
  the data).  The dimension d is the npz's ``x`` columns (its format), else ``--dimension
  D`` or the length of ``--centre`` / the last axis of ``--centres``; a JSON file needs
  one of them.  Declarations that disagree are refused.
- **records** (:data:`~smc_hmm.dp.lmgmm.model.RECORD_RULE`): n, the number of records
  in the file, is public (the guarantee's neighbours replace one record).  A record whose
  features are not d finite numbers or whose label is not an integer in 0..C-1 is a null
  record: counted in n, weight 0 (no loss).  An empty file is trained as one null record,
  and a class without records (or with one) is trained like any other, so no record makes
  the release fail.  Only the file's format is refused: not JSON or npz, other members or
  keys than x and y, an npz ``x`` that is not an (n, d) numeric matrix, as many labels as
  rows.
- **privacy**: ``--eps E`` is the noise parameter of (4.12) and the release is
  eps' = E + k-DP; ``--eps-total E'`` asks for eps' instead (E = E' - k, refused when
  k >= E').  ``--budget B`` refuses a release with eps' > B before any noise is drawn.
  ``--lam`` (0.01) and ``--huber`` h (0.5) shape both the classifier and k.  With a small
  n, k can exceed a requested ``--eps-total``: refused, a function of the public n.
- **mixtures**: ``--components M`` with ``--centres FILE`` (``.npy``/``.json`` of shape
  (C, M, d), public): each record's component is its class's nearest centre.
- ``--no-psd`` trains without the positive-semidefinite constraint; ``--solver cvxpy`` uses
  the conic reference solver; ``--seed N`` draws INSECURE reproducible noise (default: the
  OS CSPRNG).
- **output**: ``--out`` (default ``released_lmgmm.npz``): ``phi`` and a ``metadata`` JSON
  member (:func:`smc_hmm.dp.lmgmm.load_release`): eps, eps', the full guarantee (lam, h, n,
  C, M, d, Delta, alpha, k), mechanism, sampler, randomness, the scaling, the record rule,
  the solver's method and tolerance.  The same summary is printed and written to ``--json``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from smc_hmm.cli.release.shared import warn
from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.release import check_out, read_array, write_json
from smc_hmm.errors import ConfigError
from smc_hmm.options import add_checked, check_output_path

__all__ = ["add_arguments", "run"]

DEFAULT_OUT = "released_lmgmm.npz"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``smc-hmm release lmgmm`` (module docstring)."""
    parser.add_argument("--data", required=True, help=".npz (x, y) or .json {x, y}")
    eps = parser.add_mutually_exclusive_group(required=True)
    add_checked(
        eps.add_argument,
        "--eps",
        check_epsilon,
        help="noise parameter eps of (4.12); eps' = eps + k",
    )
    add_checked(
        eps.add_argument,
        "--eps-total",
        check_epsilon,
        help="the guarantee eps' to reach",
    )
    add_checked(
        parser.add_argument,
        "--budget",
        check_epsilon,
        help="refuse if eps' exceeds this",
    )
    parser.add_argument("--lam", type=float, default=0.01, help="regularisation (0.01)")
    parser.add_argument("--huber", type=float, default=0.5, help="Huber parameter h (0.5)")
    parser.add_argument(
        "--classes", type=int, help="number of classes C (required: public, labels 0..C-1)"
    )
    parser.add_argument(
        "--dimension",
        type=int,
        help="feature dimension d (public; needed for .json data without --centre/--centres)",
    )
    parser.add_argument("--components", type=int, default=1, help="components per class M")
    parser.add_argument("--centres", help=".npy/.json (C, M, d) public component centres")
    parser.add_argument("--radius", type=float, help="public radius: x -> (x - centre)/R")
    parser.add_argument("--centre", help=".npy/.json public centre (d,) subtracted first")
    parser.add_argument("--no-psd", action="store_true", help="drop the PSD constraint")
    parser.add_argument("--solver", choices=("fista", "cvxpy"), default="fista")
    parser.add_argument("--seed", type=int, help="INSECURE reproducible noise")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"release file ({DEFAULT_OUT})")
    parser.add_argument("--json", metavar="PATH", help="also write the summary as JSON")


def _array(path: object, what: str) -> np.ndarray:
    """A numeric array from a ``.npy`` or ``.json`` file."""
    p, raw = read_array(path, what)
    try:
        return np.asarray(raw, dtype=float)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{what} {p} is not a numeric array: {e}") from None


def _dimension(declared: dict[str, int]) -> int:
    """The public d: every declaration must agree, and one is needed."""
    values = set(declared.values())
    if len(values) > 1:
        said = ", ".join(f"{name} {value}" for name, value in declared.items())
        raise ConfigError(f"the feature dimension is declared differently: {said}")
    if not values:
        raise ConfigError(
            "declare the feature dimension: --dimension D (or --centre / --centres); a JSON "
            "data file does not fix it, and the records must not"
        )
    return values.pop()


def run(args: argparse.Namespace, console=None) -> int:
    """Run ``smc-hmm release lmgmm`` (module docstring); returns 0."""
    from smc_hmm.dp.lmgmm import RECORD_RULE, save_release

    out = check_out(args.out)  # every output path, before any data is read
    check_output_path(args.json)
    n_classes = _check_options(args)
    centre, centres, declared = _public_geometry(args, n_classes)
    data, weights, scaling = _public_training_data(args, n_classes, centre, centres, declared)
    release = _train(args, data, weights)
    extra = {"scaling": scaling, "classes_from_data": False, "records": RECORD_RULE}
    save_release(out, release, extra)
    _report(args, console, {"model": str(out), **release.metadata(), **extra}, release.insecure)
    return 0


def _check_options(args: argparse.Namespace) -> int:
    """The public numbers of the options, refused in one line before any file is read;
    the number of classes C."""
    from smc_hmm.dp.lmgmm.model import check_count

    if args.classes is None:
        raise ConfigError(
            "--classes C is required: the public number of classes (labels 0..C-1; never "
            "taken from the data)"
        )
    n_classes = check_count(args.classes, "--classes", 2)
    check_count(args.components, "--components")
    for value, name in ((args.lam, "--lam"), (args.huber, "--huber")):
        check_epsilon(value, name)
    if args.radius is not None:
        check_epsilon(args.radius, "--radius")
    if args.centre is not None and args.radius is None:
        raise ConfigError("--centre needs --radius")
    return n_classes


def _public_geometry(args: argparse.Namespace, n_classes: int):
    """(centre or None, component centres or None, the declarations of d): the public
    scaling and mixture centres, read from their files and checked against C and M."""
    from smc_hmm.dp.lmgmm.model import check_count

    declared: dict[str, int] = {}
    if getattr(args, "dimension", None) is not None:
        declared["--dimension"] = check_count(args.dimension, "--dimension")
    centre = None
    if args.centre is not None:
        centre = _array(args.centre, "--centre")
        if centre.ndim != 1:
            raise ConfigError(f"--centre must be a vector of d numbers, got shape {centre.shape}")
        declared["--centre"] = int(centre.shape[0])
    centres = None
    if args.components != 1 or args.centres is not None:
        if args.centres is None:
            raise ConfigError(
                "--components M > 1 needs --centres FILE (public centres; labels from a "
                "GMM fitted on the private data would void the guarantee)"
            )
        centres = _array(args.centres, "--centres")
        if centres.ndim != 3 or centres.shape[:2] != (n_classes, args.components):
            raise ConfigError(
                f"--centres must have shape (C, M, d) = ({n_classes}, {args.components}, d), "
                f"got {centres.shape}"
            )
        declared["--centres"] = int(centres.shape[2])
    return centre, centres, declared


def _public_training_data(args, n_classes: int, centre, centres, declared: dict[str, int]):
    """(training data, record weights, the scaling as released): the records mapped by
    the public rules -- null records weighted 0, rows scaled into the unit ball, each
    record's component its class's nearest public centre."""
    from smc_hmm.dp.lmgmm import assign_components, into_unit_ball, public_records, training_data
    from smc_hmm.dp.lmgmm.train import load_data

    rows, labels, file_dim = load_data(args.data)
    if file_dim is not None:
        declared[f"{args.data}'s x"] = file_dim
    x, y, weights = public_records(rows, labels, n_classes, _dimension(declared))
    radius = 1.0 if args.radius is None else args.radius
    x = into_unit_ball(x, radius, centre)  # rows outside the ball: onto its sphere
    scaling: dict[str, Any] = {
        "radius": None if args.radius is None else float(args.radius),
        "centre": None if centre is None else centre.tolist(),
    }
    components = None if centres is None else assign_components(x, y, centres)
    data = training_data(
        x,
        y,
        n_classes=n_classes,
        n_components=args.components,
        components=components,
        min_per_class=0,
        weights=weights,
    )
    return data, weights, scaling


def _train(args: argparse.Namespace, data, weights):
    """Objective perturbation with the noise parameter of ``--eps`` (or the one that
    reaches ``--eps-total``), within ``--budget``."""
    from smc_hmm.dp.lmgmm import noise_epsilon, train_dp
    from smc_hmm.dp.random import DPRandom

    eps = args.eps
    if args.eps_total is not None:
        eps = noise_epsilon(
            args.eps_total,
            data.n,
            data.n_classes,
            lam=args.lam,
            h=args.huber,
            n_components=data.n_components,
        )
    return train_dp(
        data.x,
        data.y,
        eps,
        lam=args.lam,
        h=args.huber,
        n_classes=data.n_classes,
        n_components=data.n_components,
        components=data.components if data.n_components > 1 else None,
        psd=not args.no_psd,
        budget=args.budget,
        rng=None if args.seed is None else DPRandom.insecure_seeded(args.seed),
        method=args.solver,
        weights=weights,
        min_per_class=0,
    )


def _report(args: argparse.Namespace, console, summary: dict, insecure: bool) -> None:
    """The summary, printed and written to ``--json``."""
    text = json.dumps(summary, indent=2, sort_keys=True)
    if console is not None:
        console.print_json(text)
        if insecure:
            warn(console, "INSECURE seeded noise (--seed): not a real release")
    if args.json:
        write_json(args.json, summary)
