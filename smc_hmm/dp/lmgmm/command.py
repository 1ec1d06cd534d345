"""``smc-hmm release lmgmm``: train a large-margin GMM classifier with differential privacy
and release it to a file with its guarantee (thesis 003, section 4.1.2; ``docs/lmgmm.md``).

For the CLI: :func:`add_arguments` (the options) and :func:`run` (``run(args, console) ->
exit code``).  Every bad input raises a typed :class:`~smc_hmm.errors.SmcHmmError`:
``ConfigError`` for files and options, ``ShapeMismatchError`` / ``InvalidInputError`` for
malformed data or too few points per class, ``SensitivityBoundError`` for points outside
the unit ball, ``PrivacyParameterError`` for eps <= 0 and ``PrivacyBudgetError`` when
eps' exceeds ``--budget``.

- **data** (``--data``): ``.npz`` with members ``x`` (n, d) and ``y`` (n,) (integer labels
  0..C-1), or ``.json`` ``{"x": [[...], ...], "y": [...]}``.  Rows must lie in the unit L2
  ball, or give ``--radius R`` (and optionally ``--centre FILE``, a ``.npy``/``.json``
  vector of d numbers): rows become (x - centre)/R, those still longer than 1 are scaled
  onto the sphere.  R and the centre must be public (fixed without looking at the data);
  they are written into the release, since new inputs need the same map.
- **classes**: ``--classes C`` declares the number of classes; without it C = 1 + the
  largest label (then derived from the data, which the metadata says).
- **privacy**: ``--eps E`` is the noise parameter of (4.12) and the release is
  eps' = E + k-DP; ``--eps-total E'`` asks for eps' instead (E = E' - k, refused when
  k >= E').  ``--budget B`` refuses a release with eps' > B before any noise is drawn.
  ``--lam`` (0.01) and ``--huber`` h (0.5) shape both the classifier and k.
- **mixtures**: ``--components M`` with ``--centres FILE`` (``.npy``/``.json`` of shape
  (C, M, d), public): each record's component is its class's nearest centre.
- ``--no-psd`` trains without the positive-semidefinite constraint; ``--solver cvxpy`` uses
  the conic reference solver; ``--seed N`` draws INSECURE reproducible noise (default: the
  OS CSPRNG).
- **output**: ``--out`` (default ``released_lmgmm.npz``): ``phi`` and a ``metadata`` JSON
  member (:func:`smc_hmm.dp.lmgmm.load_release`): eps, eps', the full guarantee (lam, h, n,
  C, M, d, Delta, alpha, k), mechanism, sampler, randomness, the scaling, the solver's
  method and tolerance.  The same summary is printed and written to ``--json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.release import check_out, existing_file, read_json
from smc_hmm.errors import ConfigError
from smc_hmm.options import check_output_path, option_type

__all__ = ["add_arguments", "load_data", "run"]

DEFAULT_OUT = "released_lmgmm.npz"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``smc-hmm release lmgmm`` (module docstring)."""
    parser.add_argument("--data", required=True, help=".npz (x, y) or .json {x, y}")
    eps = parser.add_mutually_exclusive_group(required=True)
    eps.add_argument(
        "--eps",
        type=option_type(check_epsilon, "--eps"),
        help="noise parameter eps of (4.12); eps' = eps + k",
    )
    eps.add_argument(
        "--eps-total",
        type=option_type(check_epsilon, "--eps-total"),
        help="the guarantee eps' to reach",
    )
    parser.add_argument(
        "--budget",
        type=option_type(check_epsilon, "--budget"),
        help="refuse if eps' exceeds this",
    )
    parser.add_argument("--lam", type=float, default=0.01, help="regularisation (0.01)")
    parser.add_argument("--huber", type=float, default=0.5, help="Huber parameter h (0.5)")
    parser.add_argument("--classes", type=int, help="number of classes C (public)")
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
    p = existing_file(path, what)
    if p.suffix == ".json":
        raw: Any = read_json(p, what)
    elif p.suffix == ".npy":
        try:
            raw = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read {what} {p}: {e}") from None
    else:
        raise ConfigError(f"{what} must be a .npy or .json file, got {p}")
    try:
        return np.asarray(raw, dtype=float)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{what} {p} is not a numeric array: {e}") from None


def load_data(path: object) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) from a ``.npz`` (members x, y) or ``.json`` ({"x": ..., "y": ...}) file."""
    p = existing_file(path, "--data")
    if p.suffix == ".npz":
        try:
            with np.load(p, allow_pickle=False) as files:
                if set(files.files) != {"x", "y"}:
                    raise ConfigError(f"{p}: expected members x and y, got {sorted(files.files)}")
                x, y = files["x"], files["y"]
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read --data {p}: {e}") from None
    elif p.suffix == ".json":
        raw = read_json(p, "--data")
        if not isinstance(raw, dict) or set(raw) != {"x", "y"}:
            raise ConfigError(f'{p}: expected a JSON object {{"x": [[...]], "y": [...]}}')
        x, y = raw["x"], raw["y"]
    else:
        raise ConfigError(f"--data must be a .npz or .json file, got {p}")
    try:
        x = np.asarray(x, dtype=float)
        y = np.asarray(y)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{p}: x must be numeric: {e}") from None
    return x, y


def run(args: argparse.Namespace, console=None) -> int:
    """Run ``smc-hmm release lmgmm`` (module docstring); returns 0."""
    from smc_hmm.dp.lmgmm import (
        assign_components,
        into_unit_ball,
        noise_epsilon,
        save_release,
        train_dp,
        training_data,
    )
    from smc_hmm.dp.random import DPRandom

    out = check_out(args.out)  # every output path, before any data is read
    check_output_path(args.json)
    x, y = load_data(args.data)
    scaling: dict[str, Any] = {"radius": None, "centre": None}
    if args.centre is not None and args.radius is None:
        raise ConfigError("--centre needs --radius")
    if args.radius is not None:
        centre = _array(args.centre, "--centre") if args.centre is not None else None
        x = into_unit_ball(x, args.radius, centre)
        scaling = {
            "radius": float(args.radius),
            "centre": None if centre is None else centre.tolist(),
        }
    components = None
    if args.components != 1 or args.centres is not None:
        if args.centres is None:
            raise ConfigError(
                "--components M > 1 needs --centres FILE (public centres; labels from a "
                "GMM fitted on the private data would void the guarantee)"
            )
        components = assign_components(x, y, _array(args.centres, "--centres"))
    data = training_data(
        x, y, n_classes=args.classes, n_components=args.components, components=components
    )
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
    release = train_dp(
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
    )
    extra = {"scaling": scaling, "classes_from_data": args.classes is None}
    save_release(out, release, extra)
    summary = {"model": str(out), **release.metadata(), **extra}
    text = json.dumps(summary, indent=2, sort_keys=True)
    if console is not None:
        console.print_json(text)
        if release.insecure:
            console.print("[yellow]INSECURE seeded noise (--seed): not a real release[/]")
    if args.json:
        try:
            Path(args.json).write_text(text + "\n")
        except OSError as e:
            raise ConfigError(f"cannot write {args.json}: {e.strerror or e}") from e
    return 0
