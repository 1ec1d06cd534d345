"""The two DP releases behind ``smc-hmm release hmm`` and ``smc-hmm release trace``.

Library functions taking plain values; the command line (its options, help text and
printing) is :mod:`smc_hmm.cli.release`.  :func:`release_hmm_model` trains and writes a
DP HMM with its privacy metadata (:class:`HmmReleaseOptions`); :func:`release_trace_states`
releases a state trace (:class:`TraceReleaseOptions`) and returns its JSON record.  The
options keep the command's names and its messages name its flags (``--eps``, ...).  Every
bad input raises a typed :class:`~smc_hmm.errors.SmcHmmError` (``ConfigError`` for files
and options, ``PrivacyParameterError`` / ``SensitivityBoundError`` / ``DPHMMParameterError``
for privacy parameters and bounds).

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

import hashlib
import json
import math
import numbers
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from smc_hmm.dp.mechanisms import HARDENED_SAMPLERS, FloatSamplerWarning
from smc_hmm.dp.params import check_epsilon
from smc_hmm.errors import (
    ConfigError,
    DPHMMParameterError,
    ModelError,
    StateOutsideConstraintError,
)
from smc_hmm.limits import MAX_RELEASE_STATES, MAX_SEQUENCE_LENGTH, MAX_WIDTH
from smc_hmm.options import check_output_path

__all__ = [
    "GRAPHS",
    "SAMPLERS",
    "SKELETON_SEED",
    "TOPOLOGIES",
    "HmmReleaseOptions",
    "TraceReleaseOptions",
    "check_count",
    "check_out",
    "existing_file",
    "load_sequences",
    "metadata_path",
    "read_array",
    "read_json",
    "read_release_metadata",
    "release_hmm_model",
    "release_trace_states",
    "skeleton",
    "write_json",
]

LIMITS = "smc_hmm.limits"
"""Where the bounds on --states, --max-length and --symbols are documented."""

SKELETON_SEED = 20140101
"""Public constant behind the skeleton's symmetry-breaking perturbation (no data in it)."""

TOPOLOGIES = ("ergodic", "left-to-right")
GRAPHS = ("complete", "categorical", "utility", "transition")
SAMPLERS = ("opendp", "float")
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


def write_json(path: Path | str, data: dict) -> None:
    try:
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e


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


@dataclass(frozen=True)
class HmmReleaseOptions:
    """The choices of one ``release hmm`` (the module docstring; the names of the command's
    options, ``--max-length`` as ``max_length``).  ``None``: the option was not given."""

    data: str | Path
    eps: float
    max_length: int | None
    states: int = 3
    every_iteration: bool = False
    not_dp_last_iteration: bool = False
    iterations: int | None = None
    feature_bound: float | None = None
    dimension: int | None = None
    symbols: int | None = None
    init: str | Path | None = None
    topology: str = "ergodic"
    covariance: str = "diag"
    neighbouring: str = "add_remove"
    sampler: str | None = None
    out: str | Path = "released_hmm.npz"
    seed: int | None = None


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


def _declared_kind(options: HmmReleaseOptions) -> str | None:
    """The kind the options declare, before any data is read: ``"gaussian"``
    (--feature-bound or --dimension), ``"discrete"`` (--symbols) or None (then the data
    file's ``n_symbols`` or the --init model declares it).  Both at once is refused."""
    frames = [
        option
        for option, value in (
            ("--feature-bound", options.feature_bound),
            ("--dimension", options.dimension),
        )
        if value is not None
    ]
    if frames and options.symbols is not None:
        raise ConfigError(
            f"{' and '.join(frames)} declare feature frames, --symbols symbol sequences: "
            "declare one kind"
        )
    return "gaussian" if frames else "discrete" if options.symbols is not None else None


def _feature_bound(options: HmmReleaseOptions) -> float:
    if options.feature_bound is None:
        raise ConfigError(
            "--feature-bound R is required for feature frames: every frame is clipped "
            "to ||x||_2 <= R, which bounds the sensitivity"
        )
    return check_epsilon(options.feature_bound, "--feature-bound")


def _init_skeleton(options: HmmReleaseOptions, kind: str | None):
    """Model 0 of ``--init`` and its kind, checked against the declared options."""
    from smc_hmm.hmm.io import load_models
    from smc_hmm.hmm.models import DiscreteHMM

    models, _ = load_models(existing_file(options.init, "--init model file"))
    start = models[0]
    init_kind = "discrete" if isinstance(start, DiscreteHMM) else "gaussian"
    if kind is not None and kind != init_kind:
        declared = "symbol sequences" if kind == "discrete" else "feature frames"
        raise ModelError(
            f"--init {options.init} holds a {type(start).__name__}, the options declare {declared}"
        )
    if init_kind == "discrete" and options.symbols not in (None, start.n_symbols):
        raise ConfigError(
            f"--symbols {options.symbols}, but the --init model has {start.n_symbols} symbols"
        )
    if init_kind == "gaussian" and options.dimension not in (None, start.n_features):
        raise ConfigError(
            f"--dimension {options.dimension}, but the --init model has {start.n_features}-d frames"
        )
    return start, init_kind


def _public_skeleton(options: HmmReleaseOptions, declared: int | None) -> tuple:
    """``(skeleton, kind, feature bound or None, description)`` from the declarations
    alone -- the options, the data file's ``n_symbols`` header, ``--init`` -- never from a
    record: the kind, the alphabet M and the frame dimension D are public."""
    kind = _declared_kind(options)
    if declared is not None and kind == "gaussian":
        raise ConfigError(
            f"data file {options.data} declares n_symbols (symbol sequences), the options "
            "feature frames"
        )
    if options.init:
        start, kind = _init_skeleton(options, kind)
        bound = _feature_bound(options) if kind == "gaussian" else None
        return start, kind, bound, {"source": str(options.init), "seed": None}
    if kind is None and declared is None:
        raise ConfigError(
            "declare what the data file holds: --symbols M (or n_symbols in the file) for "
            "symbol sequences, or --feature-bound R and --dimension D for feature frames "
            "(neither is ever taken from the data)"
        )
    if kind == "gaussian":
        bound = _feature_bound(options)
        if options.dimension is None:
            raise ConfigError(
                "--dimension D is required for feature frames: the public frame dimension "
                "(never taken from the data; frames of another dimension are dropped)"
            )
        start = skeleton(
            "gaussian",
            options.states,
            options.topology,
            n_features=check_count(options.dimension, "--dimension", 1, MAX_WIDTH),
            feature_bound=bound,
            covariance_type=options.covariance,
        )
        desc = {"topology": options.topology, "n_features": start.n_features}
        desc["covariance_type"] = options.covariance
        return start, kind, bound, {**desc, "seed": SKELETON_SEED}
    n_symbols = check_count(
        options.symbols if options.symbols is not None else declared, "--symbols", 1, MAX_WIDTH
    )
    start = skeleton("discrete", options.states, options.topology, n_symbols=n_symbols)
    desc = {"topology": options.topology, "n_symbols": n_symbols, "seed": SKELETON_SEED}
    return start, "discrete", None, desc


def release_hmm_model(options: HmmReleaseOptions) -> tuple[dict, list[str]]:
    """Train and write a DP HMM (module docstring): the model file ``options.out`` and its
    privacy metadata beside it; returns ``(summary, warnings)``, the summary being the
    metadata plus the ``"model"`` and ``"metadata"`` paths, the warnings what the caller
    should show first (they are in the metadata too)."""
    from smc_hmm.hmm.io import save_models

    plan = _HmmRelease.from_options(options)
    _declared_kind(options)  # conflicting options: refused before the data file is opened
    records, declared = load_sequences(options.data)
    start, kind, bound, skeleton_desc = _public_skeleton(options, declared)
    result = _dp_train(options, plan, start, records, bound)
    meta_file = metadata_path(plan.out)
    if result.formal_guarantee:
        label = (
            f"dp-release eps={plan.eps:g} (every iteration); privacy metadata in {meta_file.name}"
        )
    else:
        label = f"NOT-DP last-iteration experiment, no guarantee; metadata in {meta_file.name}"
    save_models(plan.out, [result.model], [label])
    meta = _hmm_metadata(plan, result, kind, bound, skeleton_desc, label)
    write_json(meta_file, meta)
    return {**meta, "model": str(plan.out), "metadata": str(meta_file)}, plan.warnings


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
    def from_options(cls, options: HmmReleaseOptions) -> _HmmRelease:
        eps = check_epsilon(options.eps, "--eps")
        if options.max_length is None:
            raise ConfigError(
                "--max-length L is required: a declared public bound on the sequence length "
                "(taking the longest sequence of the data would leak it)"
            )
        max_length = check_count(options.max_length, "--max-length", 1, MAX_SEQUENCE_LENGTH)
        every = not options.not_dp_last_iteration
        if not every and options.every_iteration:
            raise ConfigError("--every-iteration and --not-dp-last-iteration exclude each other")
        iterations = options.iterations
        iterations = iterations if iterations is not None else (5 if every else 80)
        iterations = check_count(iterations, "--iterations")
        seeded = options.seed is not None
        sampler = _release_sampler(options.sampler, seeded)
        out = check_out(options.out, metadata=True)
        warned = _release_warnings(every, sampler, seeded)
        return cls(eps, max_length, every, iterations, seeded, sampler, out, warned)


def _dp_train(options: HmmReleaseOptions, plan: _HmmRelease, start, records, bound):
    """DP Baum-Welch (paper 000) from the public skeleton on the records cut to the
    public length bound."""
    from smc_hmm.dp.baum_welch import dp_baum_welch, public_sequences
    from smc_hmm.dp.random import DPRandom

    seqs = public_sequences(start, records, plan.max_length)  # never raises on a record
    rng = DPRandom.insecure_seeded(int(options.seed)) if plan.seeded else DPRandom.system()
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
            neighbouring=options.neighbouring,
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
            _guarantee(result, first, plan.max_length, plan.eps)
            if result.formal_guarantee
            else None
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
        # the shares' exact sum never exceeds the request (baum_welch.within_budget): the
        # guarantee is the eps asked for, not a float sum of its shares
        meta["epsilon"] = plan.eps if result.epsilon <= plan.eps else result.epsilon
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


def _guarantee(result, first, max_length: int, requested: float) -> dict:
    """The privacy JSON's statement of what a formally DP release guarantees: the eps
    asked for, which the releases' spends never exceed (a float sum of them may read
    0.9999999999999999)."""
    unit = f"one sequence of length <= {max_length}"
    relation = "added or removed" if result.neighbouring == "add_remove" else "replaced"
    return {
        "definition": "pure epsilon-differential privacy (delta = 0)",
        "epsilon": requested if result.epsilon <= requested else result.epsilon,
        "neighbouring": f"{unit} {relation}",
        "composition": f"sequential over {result.n_noisy_iterations} noisy EM iteration(s)",
        "hardened_sampler": first.sampler in HARDENED_SAMPLERS,
        "secure_randomness": not first.insecure,
    }


# -- release trace ----------------------------------------------------------------------------


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


def _policy(options: TraceReleaseOptions, n: int, f: np.ndarray, transmat: np.ndarray):
    from smc_hmm.dp import policy as pg

    kind = str(options.graph)
    if kind == "complete":
        return pg.complete_graph(n)
    if kind == "transition":
        return pg.transition_graph(transmat)
    if kind == "utility":
        r = options.r
        if r is None or isinstance(r, bool) or not math.isfinite(float(r)) or r < 0:
            raise ConfigError(f"--r must be finite and >= 0, got {r!r}")
        return pg.utility_graph(f, float(r), options.metric)
    if kind == "categorical":
        if not options.categories:
            raise ConfigError("--graph categorical needs --categories FILE.json (n labels)")
        p = existing_file(options.categories, "--categories file")
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


@dataclass(frozen=True)
class TraceReleaseOptions:
    """The choices of one ``release trace`` (module docstring; the names of the command's
    options).  ``None``: the option was not given."""

    model: str | Path
    trace: str | Path
    graph: str
    model_index: int = 0
    eps: float = 1.0
    r: float | None = 1.0
    metric: str = "l2"
    coords: str | Path | None = None
    categories: str | Path | None = None
    repair: str = "greedy"
    budget: float | None = None
    seed: int | None = None


def release_trace_states(options: TraceReleaseOptions) -> dict:
    """Release each state of the trace (module docstring); returns the JSON record of the
    releases (what ``release trace`` prints and writes)."""
    from smc_hmm.hmm.io import load_models

    eps = check_epsilon(options.eps, "--eps")
    models, labels = load_models(existing_file(options.model, "model file"))
    idx = options.model_index
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < len(models):
        raise ConfigError(f"--model-index must be in 0..{len(models) - 1}, got {idx!r}")
    model = models[idx]
    n = model.n_states
    transmat = np.asarray(model.transmat, dtype=float)
    start = np.asarray(model.startprob, dtype=float)
    if options.coords:
        f = _load_coords(options.coords, n)
        query = f"coordinates from {options.coords}"
    else:
        f = np.arange(n, dtype=float)[:, None]
        query = "state index (f(s_i) = i)"
    graph = _policy(options, n, f, transmat)
    trace = _load_trace(options.trace, start, transmat)
    budget = None if options.budget is None else check_epsilon(options.budget, "--budget")
    from smc_hmm.dp.random import DPRandom

    rng = None if options.seed is None else DPRandom.insecure_seeded(int(options.seed))
    cls = _start_dphmm(start)
    mech = cls(
        transmat, f, graph, eps, initial=start, repair=options.repair, budget=budget, rng=rng
    )
    releases = []
    for s in trace:
        (rec,) = mech.release(s)
        releases.append(_record_json(rec, mech.ledger.epsilon_sum()))
    out = {
        "model": str(options.model),
        "model_index": idx,
        "model_label": None if labels is None else labels[idx],
        "n_states": n,
        "graph": graph.name,
        "graph_edges": int(graph.n_edges),
        "query": query,
        "query_dim": int(f.shape[1]),
        "eps": eps,
        "repair": options.repair,
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
    return out
