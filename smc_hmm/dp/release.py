"""The two release commands: ``smc-hmm release hmm`` and ``smc-hmm release trace``.

Plain functions for :mod:`smc_hmm.cli`: :func:`add_hmm_arguments` / :func:`release_hmm`
and :func:`add_trace_arguments` / :func:`release_trace` (``add(parser)``,
``main(args, console) -> exit code``).  Every bad input raises a typed
:class:`~smc_hmm.errors.SmcHmmError` (``ConfigError`` for files and options,
``PrivacyParameterError`` / ``SensitivityBoundError`` / ``DPHMMParameterError`` for privacy
parameters and bounds).

``release hmm`` -- DP Baum-Welch (:func:`smc_hmm.dp.baum_welch.dp_baum_welch`) on the
sequences of a data file, from a *public* skeleton that depends on no data:

- **data file** (``--data``):

  - ``.json``: a list of sequences, or an object ``{"sequences": [...], "n_symbols": M}``.
    A sequence is a list of ints (discrete symbols 0..M-1) or a list of frames, each a
    list of D numbers (Gaussian features);
  - ``.npz``: every member except ``n_symbols`` is one sequence, taken in name order: a
    1-d integer array (symbols) or a 2-d real array of shape (T_i, D) (frames); an
    optional 0-d integer member ``n_symbols`` declares the alphabet size.

  Only the file's **format** is refused (``ConfigError``, before any noise): a missing
  file, an unknown suffix, text that is not JSON or a file that is not an npz archive,
  a JSON value that is not a list of sequences or an object with other keys than
  ``sequences`` and ``n_symbols``, a bad ``n_symbols``, and a file whose ``n_symbols``
  contradicts the declared kind (feature frames).
- **public declarations** (never read from a record): the kind and its size.  Symbol
  sequences: the alphabet size M is ``--symbols``, else the file's ``n_symbols``.
  Feature frames: ``--feature-bound R`` and ``--dimension D``.  ``--init MODEL.npz``
  fixes both (its kind, M or D).  Declaring neither, or both kinds, is refused.
- **records** (:data:`smc_hmm.dp.baum_welch.RECORD_RULE`,
  :func:`~smc_hmm.dp.baum_welch.public_sequences`): no record makes the release fail,
  so adding or removing one sequence never changes whether it succeeds nor the shape of
  the released model.  A record that is not a non-empty sequence of the declared kind
  (1-d integers in 0..M-1; a (T, D) real array of finite values) is dropped: an empty
  one, a NaN or inf frame, a frame of another dimension, a symbol outside the alphabet, a
  value of another type or a member that cannot be read without pickle.  A sequence
  longer than L is cut to its first L observations (always; ``--truncate`` is kept for
  older command lines).  Frames are clipped to ||x||_2 <= R.  An empty data set releases
  the noise alone.  What was dropped or cut is counted nowhere.
- **skeleton** (``--topology``): ``ergodic`` (default; start and transitions uniform) or
  ``left-to-right`` (start in state 0, each state loops or moves to the next with 1/2
  each, the last absorbing; the zeros stay zeros).  Emissions: discrete rows uniform
  times a small fixed perturbation; Gaussian means 0 (left-to-right) or a small fixed
  perturbation of scale R/(2 sqrt d) (ergodic; identical states would never separate),
  variances (R/sqrt d)^2.  The perturbations come from the public constant
  :data:`SKELETON_SEED`, so the skeleton is public.  ``--init MODEL.npz`` uses model 0 of
  a model file instead (it must be public too).
- **release**: ``--eps`` E (finite > 0), ``--max-length`` L (required: a declared public
  bound; longer sequences are cut), ``--feature-bound`` R (frames only: every frame is
  clipped to ||x||_2 <= R).  The default mode is the formally DP one (``mode="every"``;
  ``--every-iteration`` spells it out): K = ``--iterations`` (default 5) noisy iterations
  of E/K each, eps-DP on the data set.  ``--not-dp-last-iteration`` (``mode="last"``) is
  paper 000's experiment 1, plain EM (at most K = ``--iterations``, default 80) then one
  noisy iteration: **not** differentially private, so its privacy JSON claims no
  guarantee (``"guarantee": null``, no ``epsilon``; the noise's calibration is
  ``noise_parameter_eps``, labelled as not a guarantee) and it prints a warning.
  A sequence that the public skeleton (``--init``) gives probability zero is dropped
  (no counts), never refused: an error would reveal that it is present
  (:mod:`smc_hmm.dp.baum_welch`, "Impossible sequences").
- **sampler**: OpenDP's hardened Laplace sampler by default; ``--sampler float`` is the
  unhardened one (warned).  ``--seed`` (INSECURE, reproducible) uses the float sampler,
  since OpenDP cannot be seeded; ``--seed`` with ``--sampler opendp`` is refused.
- **output**: the model file ``--out`` (default ``released_hmm.npz``) written by
  :func:`smc_hmm.hmm.io.save_models`, with one model labelled
  ``"dp-release eps=E (every iteration); privacy metadata in NAME.privacy.json"`` (a
  last-iteration model's label says NOT-DP and names no eps; :func:`~smc_hmm.hmm.io.load_models`
  reads it unchanged: it refuses unknown members), and the sidecar
  ``<out stem>.privacy.json`` next to it holding the privacy metadata
  (:func:`metadata_path`, :func:`read_release_metadata`): mode, formal_guarantee,
  guarantee (definition, epsilon, neighbouring relation, composition, whether the sampler
  was hardened and the randomness secure; null without a guarantee), warnings, epsilon
  spent and per iteration (formal mode only), mechanism, sampler, randomness,
  sensitivities, Laplace scales, max_length, feature_bound, the record rule
  (``records``, ``long_sequences``: truncate), how impossible sequences are
  treated, skeleton and the SHA-256 of the model file.  The same JSON (plus ``"model"``
  and ``"metadata"`` paths) is printed and written to ``--json``; warnings are printed
  first.  Nothing data-dependent beyond the model is released: neither the number of
  sequences nor their lengths.

``release hmm --keyword-models`` -- one DP keyword HMM per label from a labelled data
set (FSDD recordings or labelled features), every utterance's contribution bounded, the
Gaussian mechanism in zCDP, (eps, delta) guarantee in ``<out stem>.privacy.json``:
:mod:`smc_hmm.dp.keyword_release` and ``docs/dp-keyword-models.md``.

``release trace`` -- DPHMM (:class:`smc_hmm.dp.dphmm.DPHMM`) on a state trace:

- **Markov chain**: model ``--model-index`` (default 0) of ``--model``: its transition
  matrix M, and its start distribution pi as the prior of the *first* release
  (p_1^- = pi; then p_t^- = p_{t-1}^+ M), so a trace the model can produce is never
  outside C_t;
- **query** f: ``--coords FILE`` (``.json`` nested list or ``.npy``, shape (n_states, d),
  row i = f(s_i)), else the state index as a 1-d coordinate, f(s_i) = i;
- **policy graph** ``--graph``: ``complete``, ``categorical`` (needs ``--categories
  FILE.json``, a list of n labels), ``utility`` (G_util(r) on f, ``--r`` (default 1),
  ``--metric``), ``transition`` (G_trs of M), or a ``.json`` file of undirected edges
  ``[[i, j], ...]`` (or ``{"edges": [...]}``);
- **trace** ``--trace``: a ``.json`` list of state indices 0..n-1; a trace the chain
  cannot produce (a first state of start probability 0 or a transition of probability
  0) raises ``StateOutsideConstraintError`` before any noise is drawn;
- ``--eps`` (default 1), ``--repair`` (greedy | min_area | none), ``--budget`` (cap on the
  Theorem 7.2 total), ``--seed`` (INSECURE reproducible noise, warned; default: the OS
  CSPRNG through :func:`smc_hmm.dp.knorm.noise_source`; the K-norm output is floating
  point, the stated exception of :mod:`smc_hmm.dp.knorm`).
- **neighbouring traces** (what a release protects): the private input is one trace, and
  the secret is its state at each timestamp.  Its length T is public (one release per
  timestamp).  Two traces are neighbours when the chain can produce both, they have the
  same length and they differ in the state at one timestamp t, by an edge of the policy
  graph among the states C_t the chain allows at t (repair edges included).  Nothing
  that depends on the state at t decides whether the release succeeds: the only checks
  of the trace are its format (a non-empty list of state indices 0..n-1) and its support
  (a trace the chain cannot produce is outside the domain, has no neighbour, and is
  refused before any noise by design).  ``--repair none`` and ``--budget`` refusals
  depend on C_t, the graph and eps only, and C_t on the chain and the values released
  before t (post-processing of earlier releases), never on the state at t.

The JSON output lists per timestamp the released value z_t, the privacy spent (Theorem 6.2
eps_t, Theorem 6.3 constrained-DP term, Theorem 7.1 sums at t, Theorem 7.2 cumulative
total, plain eps sum) and the public facts of the release (|C_t|, exposed states and
added repair edges, rank of K_t, sampler).  Evaluation-only facts that depend on the true
state (DoP, error) are never printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import numbers
import sys
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from smc_hmm.dp.mechanisms import HARDENED_SAMPLERS, FloatSamplerWarning
from smc_hmm.dp.params import check_epsilon, check_sensitivity
from smc_hmm.errors import (
    ConfigError,
    DPHMMParameterError,
    ModelError,
    StateOutsideConstraintError,
)
from smc_hmm.limits import MAX_RELEASE_STATES, MAX_SEQUENCE_LENGTH, MAX_WIDTH
from smc_hmm.options import check_output_path, option_type

__all__ = [
    "SKELETON_SEED",
    "add_hmm_arguments",
    "add_trace_arguments",
    "load_sequences",
    "metadata_path",
    "read_release_metadata",
    "release_hmm",
    "release_trace",
    "skeleton",
]

LIMITS = "smc_hmm.limits"
"""Where the bounds on --states, --max-length and --symbols are documented."""

SKELETON_SEED = 20140101
"""Public constant behind the skeleton's symmetry-breaking perturbation (no data in it)."""

TOPOLOGIES = ("ergodic", "left-to-right")
GRAPHS = ("complete", "categorical", "utility", "transition")
METADATA_SUFFIX = ".privacy.json"
FORMAT = "smc-hmm dp release v1"
IMPOSSIBLE_SEQUENCES = (
    "dropped: a sequence the public skeleton gives probability zero adds no counts "
    "(how many were dropped is not released)"
)
KNORM_NOTE = (
    "K-norm noise from exact samplers over the OS CSPRNG; the output is floating point, "
    "not hardened against floating-point attacks (no OpenDP K-norm sampler exists)"
)
NOT_A_GUARANTEE = (
    "the eps that calibrated the last iteration's Laplace noise, as if the model of that "
    "E-step were public; it was fitted to the data without noise, so this is NOT a "
    "privacy guarantee"
)


# -- small helpers ----------------------------------------------------------------------------


def check_count(value: object, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be at most {maximum:,}, got {value:,} ({LIMITS})")
    return int(value)


def _bounded(maximum: int):
    """A check for :func:`~smc_hmm.options.option_type`: an integer from 1 to ``maximum``."""
    return lambda value, name: check_count(value, name, 1, maximum)


def _num(x: float) -> float | str:
    """A JSON-safe number: +inf (a flat K-norm body) becomes the string "inf"."""
    x = float(x)
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


def existing_file(path: object, what: str) -> Path:
    if not path:
        raise ConfigError(f"{what}: no file given")
    p = Path(str(path))
    if not p.is_file():
        raise ConfigError(f"{what} {p} does not exist or is not a file")
    return p


def read_json(path: Path, what: str) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read {what} {path}: {e.strerror or e}") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{what} {path} is not valid JSON: {e}") from e


def read_array(path: object, what: str) -> tuple[Path, object]:
    """(path, contents) of a ``.json`` or ``.npy`` file of numbers; the caller checks
    the numbers."""
    p = existing_file(path, what)
    if p.suffix.lower() == ".json":
        return p, read_json(p, what)
    if p.suffix.lower() == ".npy":
        try:
            return p, np.load(p, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ConfigError(f"{what} {p} is not a readable .npy array: {e}") from None
    raise ConfigError(f"{what} {p}: use .json or .npy")


def _write_json(path: Path | str, data: dict) -> None:
    try:
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e


def _print_json(console, data: dict) -> None:
    text = json.dumps(data, indent=2, sort_keys=True)
    if console is None:
        print(text)
    else:
        console.print(text, markup=False, highlight=False, soft_wrap=True)


# -- data files (release hmm) -----------------------------------------------------------------


def _number(value: object) -> bool:
    """A JSON number (a bool is not one, although Python calls it an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_record(raw: object) -> np.ndarray | None:
    """One JSON sequence as an array -- a list of integers (symbols, int64), of numbers
    (1-d floats) or of equally long lists of numbers (frames, float64) -- or None for
    anything else.  None is a record the public rule drops, never an error."""
    if not isinstance(raw, list) or not raw:
        return None
    try:
        if all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
            out = np.array(raw)
            return out if out.dtype.kind in "iu" else None  # beyond int64: object
        if all(_number(v) for v in raw):
            return np.array(raw, dtype=np.float64)
        if all(isinstance(row, list) and all(_number(v) for v in row) for row in raw):
            if len({len(row) for row in raw}) != 1:
                return None
            return np.array(raw, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        return None
    return None


def _npz_record(npz, name: str) -> np.ndarray | None:
    """One member of an npz data file, or None when it cannot be read without pickle
    (an object array) or is damaged: a record the public rule drops."""
    try:
        return np.asarray(npz[name])
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error):
        return None


def _declared_symbols(value: object, where: str) -> int:
    arr = np.asarray(value)
    if arr.ndim != 0 or arr.dtype.kind not in "iu" or int(arr) < 1:
        raise ConfigError(f"{where}: n_symbols must be an integer >= 1, got {value!r}")
    return int(arr)


def load_sequences(path: str | Path) -> tuple[list[np.ndarray | None], int | None]:
    """``(records, declared n_symbols or None)`` from a data file (module docstring).

    Only the file's format is checked (:class:`ConfigError`: missing, not JSON or not an
    npz archive, no ``sequences`` list, unknown keys, a bad ``n_symbols``).  Its records
    are not: each is an array (or None when it is not even numeric) for the public rule
    of :func:`smc_hmm.dp.baum_welch.public_sequences`, which drops what does not fit the
    declared skeleton, so that no record can make the release fail."""
    p = existing_file(path, "data file")
    declared: int | None = None
    suffix = p.suffix.lower()
    if suffix == ".json":
        data = read_json(p, "data file")
        if isinstance(data, dict):
            unknown = set(data) - {"sequences", "n_symbols"}
            if unknown or "sequences" not in data:
                raise ConfigError(
                    f"data file {p}: a JSON object needs 'sequences' (and optionally "
                    f"'n_symbols'), got keys {sorted(data)}"
                )
            if "n_symbols" in data:
                if isinstance(data["n_symbols"], bool) or not isinstance(data["n_symbols"], int):
                    raise ConfigError(f"data file {p}: n_symbols must be an integer")
                declared = _declared_symbols(data["n_symbols"], f"data file {p}")
            data = data["sequences"]
        if not isinstance(data, list):
            raise ConfigError(f"data file {p}: expected a list of sequences")
        return [_json_record(s) for s in data], declared
    if suffix != ".npz":
        raise ConfigError(f"data file {p}: unknown format '{p.suffix}' (use .json or .npz)")
    try:
        with open(p, "rb") as fh:
            head = fh.read(4)
    except OSError as e:
        raise ConfigError(f"cannot read data file {p}: {e.strerror or e}") from e
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):  # numpy would try to unpickle it
        raise ConfigError(
            f"data file {p} is not an npz archive (a zip of .npy arrays, as numpy.savez writes)"
        )
    try:
        with np.load(p, allow_pickle=False) as npz:
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise ConfigError(f"data file {p} is not a .npz archive")
            names = sorted(npz.files)
            if "n_symbols" in names:
                try:
                    header = npz["n_symbols"]
                except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
                    raise ConfigError(f"data file {p}: cannot read n_symbols ({e})") from None
                declared = _declared_symbols(header, f"data file {p}")
            records = [_npz_record(npz, k) for k in names if k != "n_symbols"]
    except ConfigError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ConfigError(f"data file {p} is not a readable .npz archive: {e}") from None
    return records, declared


# -- the public skeleton ----------------------------------------------------------------------


def _topology(n: int, topology: str) -> tuple[np.ndarray, np.ndarray]:
    if topology == "ergodic":
        return np.full(n, 1.0 / n), np.full((n, n), 1.0 / n)
    start = np.eye(n)[0]
    trans = np.zeros((n, n))
    for j in range(n - 1):
        trans[j, j] = trans[j, j + 1] = 0.5
    trans[-1, -1] = 1.0
    return start, trans


def skeleton(
    kind: str,
    n_states: int,
    topology: str = "ergodic",
    *,
    n_symbols: int | None = None,
    n_features: int | None = None,
    feature_bound: float | None = None,
    covariance_type: str = "diag",
):
    """The public initial model of ``release hmm`` (module docstring): it depends only on
    the declared shape, the topology, R and :data:`SKELETON_SEED`, never on the data."""
    from smc_hmm.hmm.models import DiscreteHMM, GaussianHMM

    n = check_count(n_states, "--states", 1, MAX_RELEASE_STATES)
    if topology not in TOPOLOGIES:
        raise ConfigError(f"--topology must be one of {TOPOLOGIES}, got {topology!r}")
    start, trans = _topology(n, topology)
    rng = np.random.default_rng(SKELETON_SEED)
    if kind == "discrete":
        m = check_count(n_symbols, "n_symbols", 1, MAX_WIDTH)
        emis = 1.0 + 0.2 * rng.random((n, m))
        return DiscreteHMM(start, trans, emis / emis.sum(axis=1, keepdims=True))
    d = check_count(n_features, "n_features")
    r = check_epsilon(feature_bound, "--feature-bound")
    spread = r / math.sqrt(d)
    means = (
        np.zeros((n, d)) if topology == "left-to-right" else 0.5 * spread * rng.normal(size=(n, d))
    )
    if covariance_type == "diag":
        covars = np.full((n, d), spread**2)
    elif covariance_type == "full":
        covars = np.stack([np.eye(d) * spread**2] * n)
    else:
        raise ConfigError(f"--covariance must be 'diag' or 'full', got {covariance_type!r}")
    return GaussianHMM(start, trans, means, covars, covariance_type)


# -- release hmm ------------------------------------------------------------------------------


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, except where there is none (``None``, an off flag):
    there the help text says what happens without the option."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


HMM_DESCRIPTION = (
    "Train an HMM on the sequences of a data file from a public skeleton and release it "
    "with eps-differential privacy (DP Baum-Welch, paper 000: Laplace noise on the expected "
    "counts in every EM iteration, OpenDP's hardened sampler)."
)
TRACE_DESCRIPTION = (
    "Release a state trace of a public Markov chain under a policy graph (DPHMM, papers "
    "001/004: the K-norm mechanism on a sensitivity hull, per timestamp)."
)
HELP_EPILOG = (
    "The commands, data formats and modes: docs/dp-release.md; the guarantees: docs/dp-layer.md."
)
SAMPLERS = ("opendp", "float")
EPS = option_type(check_epsilon, "--eps")
"""``type=`` of ``--eps``: checked while the command line is parsed."""


def _describe_parser(parser: argparse.ArgumentParser, description: str) -> None:
    parser.description = description
    parser.epilog = HELP_EPILOG
    parser.formatter_class = HelpFormatter


def add_hmm_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``smc-hmm release hmm`` (and its description and help format)."""
    _describe_parser(parser, HMM_DESCRIPTION)
    _add_data_arguments(parser)
    _add_mode_arguments(parser)
    _add_model_arguments(parser)
    _add_noise_and_output_arguments(parser)
    from smc_hmm.dp.keyword_release import add_arguments as add_keyword_arguments

    add_keyword_arguments(parser)


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The data set, the budget and the public sizes."""
    a = parser.add_argument
    a(
        "--data",
        required=True,
        metavar="FILE",
        help='sequences: .json (e.g. [[0, 1, 5], [3, 3]] or {"sequences": [...], '
        '"n_symbols": 6}) or .npz (one array per sequence)',
    )
    a("--eps", type=EPS, required=True, metavar="E", help="total privacy budget (> 0)")
    a(
        "--states",
        type=option_type(_bounded(MAX_RELEASE_STATES), "--states", int),
        metavar="N",
        help=f"hidden states (default 3; 5 with --keyword-models), at most {MAX_RELEASE_STATES:,}",
    )
    a(
        "--max-length",
        type=option_type(_bounded(MAX_SEQUENCE_LENGTH), "--max-length", int),
        metavar="L",
        help="declared maximum sequence length (required: a public bound), at most "
        f"{MAX_SEQUENCE_LENGTH:,}",
    )


def _add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the noise goes (every EM iteration, or -- not DP -- the last only)."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--every-iteration",
        action="store_true",
        help="noise in every EM iteration, eps/K each: eps-DP on the data set (the default "
        "mode; the flag only spells it out)",
    )
    mode.add_argument(
        "--not-dp-last-iteration",
        action="store_true",
        help="paper 000's experiment 1: plain EM, then noise in the last iteration only. "
        "NOT differentially private: no guarantee is claimed (the privacy JSON has "
        "guarantee null); for reproducing the paper only",
    )
    parser.add_argument(
        "--truncate",
        action="store_true",
        help="kept for older command lines: a sequence longer than L is always cut to its "
        "first L observations (a refusal would reveal that it is there)",
    )


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The public skeleton: the kind of records, their bound and shape, the EM rounds."""
    a = parser.add_argument
    a(
        "--feature-bound",
        type=option_type(check_epsilon, "--feature-bound"),
        metavar="R",
        help="frames are clipped to ||x||_2 <= R (required for feature frames)",
    )
    a(
        "--dimension",
        type=option_type(_bounded(MAX_WIDTH), "--dimension", int),
        metavar="D",
        help="the public dimension of feature frames (required for them unless --init "
        "gives it; frames of another dimension are dropped)",
    )
    a(
        "--iterations",
        type=int,
        metavar="K",
        help="noisy EM iterations (default 5); with --not-dp-last-iteration the cap on "
        "plain EM iterations (default 80)",
    )
    a("--topology", choices=TOPOLOGIES, default="ergodic", help="the public skeleton's shape")
    a("--covariance", choices=("diag", "full"), default="diag", help="Gaussian covariances")
    a(
        "--symbols",
        type=option_type(_bounded(MAX_WIDTH), "--symbols", int),
        metavar="M",
        help="alphabet size of symbol sequences (without it: the file's n_symbols; never "
        "taken from the data; symbols outside 0..M-1 drop their sequence)",
    )
    a(
        "--init",
        metavar="MODEL.npz",
        help="public skeleton: model 0 of this model file (sequences it gives probability "
        "zero add no counts)",
    )


def _add_noise_and_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The neighbouring relation, the noise's sampler and seed, and the output files."""
    a = parser.add_argument
    a(
        "--neighbouring",
        choices=("add_remove", "substitute"),
        default="add_remove",
        help="neighbouring data sets: one sequence added/removed, or replaced",
    )
    a(
        "--sampler",
        choices=SAMPLERS,
        help="Laplace sampler: opendp (the default: hardened, OpenDP's CSPRNG) or float "
        "(NOT hardened against floating-point attacks; the sampler of --seed, since "
        "OpenDP cannot be seeded)",
    )
    a("--out", default="released_hmm.npz", metavar="MODEL.npz", help="released model file")
    a("--json", metavar="PATH", help="also write the release summary as JSON")
    a(
        "--seed",
        type=int,
        metavar="S",
        help="INSECURE seeded noise with the float sampler (reproducible experiments only)",
    )


def metadata_path(model_path: str | Path) -> Path:
    """The privacy-metadata sidecar of a released model file: ``x.npz`` -> ``x.privacy.json``."""
    p = Path(model_path)
    return (
        p.with_name(p.stem + METADATA_SUFFIX)
        if p.suffix == ".npz"
        else p.with_name(p.name + METADATA_SUFFIX)
    )


def read_release_metadata(model_path: str | Path) -> dict:
    """The privacy metadata of a model file written by ``release hmm``; checks that the
    sidecar belongs to this very file (SHA-256)."""
    p = existing_file(model_path, "model file")
    meta_file = existing_file(metadata_path(p), "privacy metadata")
    meta = read_json(meta_file, "privacy metadata")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ConfigError(f"{meta_file} is not smc-hmm release metadata")
    if meta.get("model_sha256") != _sha256(p):
        raise ConfigError(f"{meta_file} does not describe {p}: the SHA-256 differs")
    return meta


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_out(path: object, metadata: bool = False) -> Path:
    """``--out`` (and, with ``metadata``, its privacy-metadata sidecar): a ``.npz`` file
    that can be written, checked before any data is read."""
    p = Path(str(path))
    if p.suffix != ".npz":
        raise ConfigError(f"--out must name a .npz model file, got {p}")
    check_output_path(p, "--out")
    if metadata:
        check_output_path(metadata_path(p), "--out's privacy metadata")
    return p


def _declared_kind(args: argparse.Namespace) -> str | None:
    """The kind the options declare, before any data is read: ``"gaussian"``
    (--feature-bound or --dimension), ``"discrete"`` (--symbols) or None (then the data
    file's ``n_symbols`` or the --init model declares it).  Both at once is refused."""
    frames = [
        option
        for option, value in (
            ("--feature-bound", args.feature_bound),
            ("--dimension", args.dimension),
        )
        if value is not None
    ]
    if frames and args.symbols is not None:
        raise ConfigError(
            f"{' and '.join(frames)} declare feature frames, --symbols symbol sequences: "
            "declare one kind"
        )
    return "gaussian" if frames else "discrete" if args.symbols is not None else None


def _feature_bound(args: argparse.Namespace) -> float:
    if args.feature_bound is None:
        raise ConfigError(
            "--feature-bound R is required for feature frames: every frame is clipped "
            "to ||x||_2 <= R, which bounds the sensitivity"
        )
    return check_epsilon(args.feature_bound, "--feature-bound")


def _init_skeleton(args: argparse.Namespace, kind: str | None):
    """Model 0 of ``--init`` and its kind, checked against the declared options."""
    from smc_hmm.hmm.io import load_models
    from smc_hmm.hmm.models import DiscreteHMM

    models, _ = load_models(existing_file(args.init, "--init model file"))
    start = models[0]
    init_kind = "discrete" if isinstance(start, DiscreteHMM) else "gaussian"
    if kind is not None and kind != init_kind:
        declared = "symbol sequences" if kind == "discrete" else "feature frames"
        raise ModelError(
            f"--init {args.init} holds a {type(start).__name__}, the options declare {declared}"
        )
    if init_kind == "discrete" and args.symbols not in (None, start.n_symbols):
        raise ConfigError(
            f"--symbols {args.symbols}, but the --init model has {start.n_symbols} symbols"
        )
    if init_kind == "gaussian" and args.dimension not in (None, start.n_features):
        raise ConfigError(
            f"--dimension {args.dimension}, but the --init model has {start.n_features}-d frames"
        )
    return start, init_kind


def _public_skeleton(args: argparse.Namespace, declared: int | None) -> tuple:
    """``(skeleton, kind, feature bound or None, description)`` from the declarations
    alone -- the options, the data file's ``n_symbols`` header, ``--init`` -- never from a
    record: the kind, the alphabet M and the frame dimension D are public."""
    kind = _declared_kind(args)
    if declared is not None and kind == "gaussian":
        raise ConfigError(
            f"data file {args.data} declares n_symbols (symbol sequences), the options "
            "feature frames"
        )
    if args.init:
        start, kind = _init_skeleton(args, kind)
        bound = _feature_bound(args) if kind == "gaussian" else None
        return start, kind, bound, {"source": str(args.init), "seed": None}
    if kind is None and declared is None:
        raise ConfigError(
            "declare what the data file holds: --symbols M (or n_symbols in the file) for "
            "symbol sequences, or --feature-bound R and --dimension D for feature frames "
            "(neither is ever taken from the data)"
        )
    if kind == "gaussian":
        bound = _feature_bound(args)
        if args.dimension is None:
            raise ConfigError(
                "--dimension D is required for feature frames: the public frame dimension "
                "(never taken from the data; frames of another dimension are dropped)"
            )
        start = skeleton(
            "gaussian",
            args.states,
            args.topology,
            n_features=check_count(args.dimension, "--dimension", 1, MAX_WIDTH),
            feature_bound=bound,
            covariance_type=args.covariance,
        )
        desc = {"topology": args.topology, "n_features": start.n_features}
        desc["covariance_type"] = args.covariance
        return start, kind, bound, {**desc, "seed": SKELETON_SEED}
    n_symbols = check_count(
        args.symbols if args.symbols is not None else declared, "--symbols", 1, MAX_WIDTH
    )
    start = skeleton("discrete", args.states, args.topology, n_symbols=n_symbols)
    desc = {"topology": args.topology, "n_symbols": n_symbols, "seed": SKELETON_SEED}
    return start, "discrete", None, desc


def release_hmm(args: argparse.Namespace, console=None) -> int:
    """Run ``smc-hmm release hmm`` (module docstring); returns 0."""
    check_output_path(args.json)
    if getattr(args, "keyword_models", False):  # smc_hmm.dp.keyword_release
        from smc_hmm.dp.keyword_release import release_command

        return release_command(args, console, metadata_path(check_out(args.out, metadata=True)))
    from smc_hmm.hmm.io import save_models

    plan = _HmmRelease.from_args(args)
    _declared_kind(args)  # conflicting options: refused before the data file is opened
    records, declared = load_sequences(args.data)
    start, kind, bound, skeleton_desc = _public_skeleton(args, declared)
    result = _dp_train(args, plan, start, records, bound)
    meta_file = metadata_path(plan.out)
    if result.formal_guarantee:
        label = (
            f"dp-release eps={plan.eps:g} (every iteration); privacy metadata in {meta_file.name}"
        )
    else:
        label = f"NOT-DP last-iteration experiment, no guarantee; metadata in {meta_file.name}"
    save_models(plan.out, [result.model], [label])
    meta = _hmm_metadata(plan, result, kind, bound, skeleton_desc, label)
    _write_json(meta_file, meta)
    summary = {**meta, "model": str(plan.out), "metadata": str(meta_file)}
    for text in plan.warnings:
        _warn(console, text)
    _print_json(console, summary)
    if args.json:
        _write_json(args.json, summary)
        if console is not None:
            console.print(f"wrote {args.json}")
    return 0


@dataclass(frozen=True)
class _HmmRelease:
    """The public choices of one ``release hmm``, checked before any data is read."""

    eps: float
    max_length: int
    every: bool  # noise in every iteration (DP), or the last only (NOT DP)
    iterations: int
    seeded: bool
    sampler: str
    out: Path
    warnings: list[str]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> _HmmRelease:
        if args.states is None:
            args.states = 3
        for name in ("dimension", "symbols", "feature_bound", "init"):  # older Namespaces
            if not hasattr(args, name):
                setattr(args, name, None)
        eps = check_epsilon(args.eps, "--eps")
        if args.max_length is None:
            raise ConfigError(
                "--max-length L is required: a declared public bound on the sequence length "
                "(taking the longest sequence of the data would leak it)"
            )
        max_length = check_count(args.max_length, "--max-length", 1, MAX_SEQUENCE_LENGTH)
        every = not getattr(args, "not_dp_last_iteration", False)
        if not every and getattr(args, "every_iteration", False):
            raise ConfigError("--every-iteration and --not-dp-last-iteration exclude each other")
        iterations = args.iterations if args.iterations is not None else (5 if every else 80)
        iterations = check_count(iterations, "--iterations")
        seeded = args.seed is not None
        sampler = _release_sampler(args.sampler, seeded)
        out = check_out(args.out, metadata=True)
        warned = _release_warnings(every, sampler, seeded)
        return cls(eps, max_length, every, iterations, seeded, sampler, out, warned)


def _dp_train(args: argparse.Namespace, plan: _HmmRelease, start, records, bound):
    """DP Baum-Welch (paper 000) from the public skeleton on the records cut to the
    public length bound."""
    from smc_hmm.dp.baum_welch import dp_baum_welch, public_sequences
    from smc_hmm.dp.random import DPRandom

    seqs = public_sequences(start, records, plan.max_length)  # never raises on a record
    rng = DPRandom.insecure_seeded(int(args.seed)) if plan.seeded else DPRandom.system()
    with warnings.catch_warnings():  # the float sampler's warning is in plan.warnings
        warnings.simplefilter("ignore", FloatSamplerWarning)
        return dp_baum_welch(
            start,
            seqs,
            plan.eps,
            max_length=plan.max_length,
            mode="every" if plan.every else "last",
            n_iter=plan.iterations if plan.every else 1,
            rng=rng,
            sampler=plan.sampler,
            neighbouring=args.neighbouring,
            long_sequences="truncate",  # public_sequences has cut them already
            feature_bound=bound,
            plain_iter=plan.iterations,
        )


def _hmm_metadata(plan: _HmmRelease, result, kind, bound, skeleton_desc, label: str) -> dict:
    """The privacy metadata of a released model (its sidecar, and the printed summary)."""
    from smc_hmm.dp.baum_welch import RECORD_RULE

    first = result.releases[0]
    meta = {
        "format": FORMAT,
        "mode": result.mode,
        "formal_guarantee": result.formal_guarantee,
        "guarantee": (
            _guarantee(result, first, plan.max_length) if result.formal_guarantee else None
        ),
        "warnings": plan.warnings,
        "mechanism": "Laplace on expected counts (DP Baum-Welch, paper 000)",
        "mechanism_detail": result.mechanism,
        "sampler": first.sampler,
        "hardened_sampler": first.sampler in HARDENED_SAMPLERS,
        "randomness": first.randomness,
        "insecure": bool(first.insecure),
        "noisy_iterations": result.n_noisy_iterations,
        "iterations": plan.iterations,
        "max_length": result.max_length,
        "long_sequences": "truncate",
        "records": RECORD_RULE,
        "impossible_sequences": IMPOSSIBLE_SEQUENCES,
        "feature_bound": bound,
        "neighbouring": result.neighbouring,
        "sensitivity": dict(result.sensitivities),
        "laplace_scale": dict(result.scales),
        "kind": kind,
        "n_states": int(result.model.n_states),
        "skeleton": skeleton_desc,
        "public_parameters_from_data": [],
        "model_sha256": _sha256(plan.out),
        "model_label": label,
    }
    if result.formal_guarantee:
        meta["epsilon"] = result.epsilon
        meta["epsilon_requested"] = plan.eps
        meta["epsilon_per_iteration"] = dict(result.epsilons)
    else:  # the noise's calibration, never presented as a privacy level
        meta["noise_parameter_eps"] = {
            "total": plan.eps,
            "per_component": dict(result.epsilons),
            "note": NOT_A_GUARANTEE,
        }
    return meta


def _release_sampler(sampler: object, seeded: bool) -> str:
    """``--sampler`` resolved: opendp by default, float with ``--seed`` (OpenDP cannot be
    seeded); ``--seed`` with ``--sampler opendp`` is refused."""
    if sampler is None:
        return "float" if seeded else "opendp"
    if sampler not in SAMPLERS:
        raise ConfigError(f"--sampler must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "opendp" and seeded:
        raise ConfigError(
            "--seed needs the float sampler: OpenDP draws its own randomness and cannot be "
            "seeded (drop --seed for a real release)"
        )
    return str(sampler)


def _release_warnings(every: bool, sampler: str, seeded: bool) -> list[str]:
    """The warnings a release prints and writes into its privacy JSON."""
    out = []
    if not every:
        out.append(
            "NOT differentially private: --not-dp-last-iteration runs plain EM on the data "
            "and adds noise in the last iteration only (paper 000's experiment 1); the "
            "released model carries no privacy guarantee"
        )
    if seeded:
        out.append(
            "INSECURE: --seed makes the noise reproducible by anyone who knows the seed "
            "(experiments only)"
        )
    elif sampler == "float":
        out.append(
            "the float sampler is not hardened against floating-point attacks "
            "(Mironov 2012); the default sampler (opendp) is"
        )
    return out


def _guarantee(result, first, max_length: int) -> dict:
    """The privacy JSON's statement of what a formally DP release guarantees."""
    unit = f"one sequence of length <= {max_length}"
    relation = "added or removed" if result.neighbouring == "add_remove" else "replaced"
    return {
        "definition": "pure epsilon-differential privacy (delta = 0)",
        "epsilon": result.epsilon,
        "neighbouring": f"{unit} {relation}",
        "composition": f"sequential over {result.n_noisy_iterations} noisy EM iteration(s)",
        "hardened_sampler": first.sampler in HARDENED_SAMPLERS,
        "secure_randomness": not first.insecure,
    }


def _warn(console, text: str) -> None:
    if console is None:
        print(f"warning: {text}", file=sys.stderr)
    else:
        from rich.markup import escape

        console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False, soft_wrap=True)


# -- release trace ----------------------------------------------------------------------------


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``smc-hmm release trace`` (and its description and help format)."""
    _describe_parser(parser, TRACE_DESCRIPTION)
    a = parser.add_argument
    a("--model", required=True, metavar="MODEL.npz", help="the public model (a model file)")
    a("--model-index", type=int, default=0, metavar="I", help="which model of the file")
    a("--trace", required=True, metavar="FILE", help=".json list of state indices")
    a(
        "--graph",
        required=True,
        metavar="KIND",
        help="policy graph: complete | categorical | utility | transition | FILE.json (edges)",
    )
    a("--eps", type=EPS, default=1.0, metavar="E", help="eps per release")
    a(
        "--r",
        type=option_type(check_sensitivity, "--r"),
        default=1.0,
        metavar="R",
        help="radius of the utility graph",
    )
    a("--metric", choices=("l2", "l1", "linf"), default="l2", help="utility-graph metric")
    a(
        "--coords",
        metavar="FILE",
        help="query f: .json/.npy (n_states, d) (without it: f(s) = s, the state index)",
    )
    a("--categories", metavar="FILE", help="categorical graph: .json list of n labels")
    a(
        "--repair",
        choices=("greedy", "min_area", "none"),
        default="greedy",
        help="how exposed states are protected: greedy (Algorithm 1), min_area "
        "(Algorithm 3, 2-D) or none (refuse)",
    )
    a(
        "--budget",
        type=option_type(check_epsilon, "--budget"),
        metavar="B",
        help="cap on the Theorem 7.2 total (without it: none)",
    )
    a("--json", metavar="PATH", help="write the releases as JSON")
    a(
        "--seed",
        type=int,
        metavar="S",
        help="INSECURE seeded noise (reproducible experiments only; default: the OS CSPRNG)",
    )


def _load_coords(path: object, n: int) -> np.ndarray:
    from smc_hmm.dp.policy import check_query

    p, raw = read_array(path, "--coords file")
    try:
        return check_query(raw, n)
    except DPHMMParameterError as e:
        raise ConfigError(f"--coords file {p}: {e}") from None


def _load_trace(path: object, start: np.ndarray, transmat: np.ndarray) -> list[int]:
    """The trace's state indices; a trace the chain cannot produce (a first state of start
    probability 0, or a transition of probability 0) is refused before any noise is drawn:
    no DPHMM guarantee covers it."""
    n = len(start)
    p = existing_file(path, "trace file")
    if p.suffix.lower() != ".json":
        raise ConfigError(f"trace file {p}: expected a .json list of state indices")
    data = read_json(p, "trace file")
    if not isinstance(data, list) or not data:
        raise ConfigError(f"trace file {p}: expected a non-empty list of state indices")
    for t, s in enumerate(data):
        if isinstance(s, bool) or not isinstance(s, int):
            raise ConfigError(f"trace file {p}, position {t}: {s!r} is not a state index")
        if not 0 <= s < n:
            raise ConfigError(f"trace file {p}, position {t}: state {s} is not in 0..{n - 1}")
    if start[data[0]] <= 0:
        raise StateOutsideConstraintError(
            f"trace file {p}, position 0: state {data[0]} has start probability 0 in the "
            "chain model: the chain cannot produce this trace (nothing was released)"
        )
    for t in range(1, len(data)):
        if transmat[data[t - 1], data[t]] <= 0:
            raise StateOutsideConstraintError(
                f"trace file {p}, position {t}: the transition {data[t - 1]} -> {data[t]} "
                "has probability 0 in the chain model: the chain cannot produce this trace "
                "(nothing was released)"
            )
    return [int(s) for s in data]


def _policy(args: argparse.Namespace, n: int, f: np.ndarray, transmat: np.ndarray):
    from smc_hmm.dp import policy as pg

    kind = str(args.graph)
    if kind == "complete":
        return pg.complete_graph(n)
    if kind == "transition":
        return pg.transition_graph(transmat)
    if kind == "utility":
        r = args.r
        if r is None or isinstance(r, bool) or not math.isfinite(float(r)) or r < 0:
            raise ConfigError(f"--r must be finite and >= 0, got {r!r}")
        return pg.utility_graph(f, float(r), args.metric)
    if kind == "categorical":
        if not args.categories:
            raise ConfigError("--graph categorical needs --categories FILE.json (n labels)")
        p = existing_file(args.categories, "--categories file")
        labels = read_json(p, "--categories file")
        if not isinstance(labels, list) or len(labels) != n:
            raise ConfigError(f"--categories file {p}: expected a list of {n} labels")
        if not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in labels):
            raise ConfigError(f"--categories file {p}: labels must be strings or integers")
        return pg.categorical_graph(labels)
    if kind.lower().endswith(".json"):
        p = existing_file(kind, "--graph edge file")
        data = read_json(p, "--graph edge file")
        if isinstance(data, dict):
            data = data.get("edges")
        if not isinstance(data, list) or not all(isinstance(e, list) and len(e) == 2 for e in data):
            raise ConfigError(f"--graph edge file {p}: expected a list of [i, j] pairs")
        return pg.graph_from_edges(n, [tuple(e) for e in data])
    raise ConfigError(f"--graph must be one of {GRAPHS} or an edge-list .json file, got {kind!r}")


def _start_dphmm(start: np.ndarray):
    """DPHMM whose first prior is the model's start distribution (then p^+ M)."""
    from smc_hmm.dp.dphmm import DPHMM

    class StartDPHMM(DPHMM):
        def prior(self) -> tuple[np.ndarray, np.ndarray]:
            if self.t == 0:
                return start.copy(), start > 0
            return super().prior()

    return StartDPHMM


def _record_json(rec, eps_cumulative: float) -> dict:
    return {
        "t": rec.t,
        "z": [float(v) for v in np.atleast_1d(rec.z)],
        "epsilon": rec.epsilon,
        "constrained_epsilon": _num(rec.constrained_epsilon),
        "timestamp_epsilon": rec.timestamp_epsilon,
        "timestamp_constrained_epsilon": _num(rec.timestamp_constrained_epsilon),
        "cumulative_constrained_epsilon": _num(rec.sequence_constrained_epsilon),
        "cumulative_epsilon": eps_cumulative,
        "constraint_size": int(rec.constraint.size),
        "exposed": [int(s) for s in rec.exposed],
        "repair_edges": [[int(i), int(j)] for i, j in np.asarray(rec.added_edges).reshape(-1, 2)],
        "rank": int(rec.rank),
        "sampler": rec.sampler,
    }


def release_trace(args: argparse.Namespace, console=None) -> int:
    """Run ``smc-hmm release trace`` (module docstring); returns 0."""
    from smc_hmm.hmm.io import load_models

    eps = check_epsilon(args.eps, "--eps")
    check_output_path(args.json)
    models, labels = load_models(existing_file(args.model, "model file"))
    idx = args.model_index
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < len(models):
        raise ConfigError(f"--model-index must be in 0..{len(models) - 1}, got {idx!r}")
    model = models[idx]
    n = model.n_states
    transmat = np.asarray(model.transmat, dtype=float)
    start = np.asarray(model.startprob, dtype=float)
    if args.coords:
        f = _load_coords(args.coords, n)
        query = f"coordinates from {args.coords}"
    else:
        f = np.arange(n, dtype=float)[:, None]
        query = "state index (f(s_i) = i)"
    graph = _policy(args, n, f, transmat)
    trace = _load_trace(args.trace, start, transmat)
    budget = None if args.budget is None else check_epsilon(args.budget, "--budget")
    from smc_hmm.dp.random import DPRandom

    rng = None if args.seed is None else DPRandom.insecure_seeded(int(args.seed))
    cls = _start_dphmm(start)
    mech = cls(transmat, f, graph, eps, initial=start, repair=args.repair, budget=budget, rng=rng)
    releases = []
    for s in trace:
        (rec,) = mech.release(s)
        releases.append(_record_json(rec, mech.ledger.epsilon_sum()))
    out = {
        "model": str(args.model),
        "model_index": idx,
        "model_label": None if labels is None else labels[idx],
        "n_states": n,
        "graph": graph.name,
        "graph_edges": int(graph.n_edges),
        "query": query,
        "query_dim": int(f.shape[1]),
        "eps": eps,
        "repair": args.repair,
        "budget": budget,
        "randomness": mech.randomness,
        "insecure": rng is not None,
        "hardened_sampler": False,
        "sampler_note": KNORM_NOTE,
        "releases": releases,
        "total": {
            "epsilon_sum": mech.ledger.epsilon_sum(),
            "sequence_constrained_epsilon": _num(mech.ledger.sequence()),
        },
        "accounting": "per release: Theorem 6.2 eps (DPHMM) and Theorem 6.3 constrained-DP "
        "term; per timestamp: Theorem 7.1 sums; cumulative: Theorem 7.2 (sum over timestamps)",
    }
    if rng is not None:
        _warn(
            console, f"INSECURE: --seed {args.seed} makes the noise reproducible (experiments only)"
        )
    if console is not None:
        _trace_table(console, out)
    if args.json:
        _write_json(args.json, out)
        if console is not None:
            console.print(f"wrote {args.json}")
    elif console is None:
        _print_json(None, out)
    return 0


def _trace_table(console, out: dict) -> None:
    from rich.table import Table

    table = Table(
        title=f"DPHMM release: {out['graph']} graph, eps {out['eps']:g}, query {out['query']}"
    )
    for col in ("t", "z", "eps", "constrained eps", "cumulative (Thm 7.2)", "|C_t|", "repairs"):
        table.add_column(col, justify="right")
    for r in out["releases"]:
        z = ", ".join(f"{v:.3f}" for v in r["z"])
        rep = f"exposed {r['exposed']} + {len(r['repair_edges'])} edges" if r["exposed"] else "-"
        c = r["constrained_epsilon"]
        cum = r["cumulative_constrained_epsilon"]
        table.add_row(
            str(r["t"]),
            z,
            f"{r['epsilon']:g}",
            c if isinstance(c, str) else f"{c:.4g}",
            cum if isinstance(cum, str) else f"{cum:.4g}",
            str(r["constraint_size"]),
            rep,
        )
    console.print(table)
