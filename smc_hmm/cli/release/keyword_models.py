"""``smc-hmm release hmm --keyword-models``: the options and the command that release DP
keyword HMMs and their guarantee (:func:`smc_hmm.dp.keyword_models.release_keyword_models`
on the training data read by :func:`smc_hmm.dp.keyword_release.read_training_data`,
written by :func:`smc_hmm.dp.keyword_release.save_release`; the data formats and the
public record rule: :mod:`smc_hmm.dp.keyword_release`, ``docs/dp-keyword-models.md``).

Every bad input raises a typed :class:`~smc_hmm.errors.SmcHmmError`.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from smc_hmm.cli.release.shared import print_json, warn
from smc_hmm.dp.keyword_release import read_training_data, save_release
from smc_hmm.dp.params import check_delta, check_epsilon
from smc_hmm.dp.release import write_json
from smc_hmm.errors import ConfigError
from smc_hmm.limits import DEFAULT_MAX_FRAMES, MAX_SEQUENCE_LENGTH
from smc_hmm.options import add_checked, check_output_path

__all__ = ["add_arguments", "release_command"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The keyword-model options of ``smc-hmm release hmm`` (an argument group)."""
    g = parser.add_argument_group(
        "keyword models (--keyword-models; docs/dp-keyword-models.md)",
        "one DP HMM per label from a labelled data set, every utterance's contribution "
        "bounded, Gaussian mechanism in zCDP; uses --data, --eps, --states (5), --out, "
        "--json and --seed (INSECURE float noise; without it OpenDP's hardened sampler)",
    )
    a = g.add_argument
    a(
        "--keyword-models",
        action="store_true",
        help="release keyword HMMs (--data: FSDD recordings directory or labelled .npz)",
    )
    add_checked(
        a,
        "--delta",
        check_delta,
        default=1e-6,
        help="delta of the (eps, delta) guarantee (1e-6)",
    )
    add_checked(
        a,
        "--record-bound",
        check_epsilon,
        default=6.0,
        help="L2 bound C of one utterance's means",
    )
    add_checked(
        a,
        "--coord-clip",
        check_epsilon,
        default=3.0,
        help="per-coordinate clip of standardised frames",
    )
    a(
        "--standardisation",
        choices=("dp", "public", "bundled"),
        default="dp",
        help="dp: released with 10%% of the budget (default); public: the bundled test "
        "split's mean and spread; bundled: the published pipeline, NOT covered",
    )
    a(
        "--static-means",
        action="store_true",
        help="release the static MFCC state means only, derive the deltas",
    )
    a(
        "--variances",
        choices=("unit", "tied", "state"),
        default="unit",
        help="released variances: none (unit, default), one tied vector, or per state",
    )
    _add_data_arguments(a)


def _add_data_arguments(a) -> None:
    """Which records are read: the label set, the recordings left out, their length."""
    a(
        "--labels",
        metavar="A,B,...",
        help="the public label set, in model order (default: zero..nine, the bundled "
        "data's digit words); needed for an .npz with string labels",
    )
    add_checked(
        a,
        "--max-frames",
        _frames,
        convert=int,
        default=None,
        help=f"recordings of a directory holding more audio than this many 10 ms frames "
        f"are left out, from their header, before their samples are read (default "
        f"{DEFAULT_MAX_FRAMES:,}: 30 s, as the recognition commands)",
    )
    a(
        "--skip-indices",
        default="0-4",
        metavar="A-B",
        help="recording indices left out of a directory (default 0-4: the public test "
        "split); 'none' keeps all",
    )


def _frames(n: int, name: str) -> int:
    if not 1 <= n <= MAX_SEQUENCE_LENGTH:
        raise ConfigError(f"{name} must be from 1 to {MAX_SEQUENCE_LENGTH:,} frames, got {n}")
    return n


def _indices(text: str) -> range:
    if text == "none":
        return range(0)
    match = re.fullmatch(r"(\d+)-(\d+)", text)
    if not match or int(match[1]) > int(match[2]):
        raise ConfigError(f"--skip-indices must be A-B (A <= B) or 'none', got {text!r}")
    return range(int(match[1]), int(match[2]) + 1)


def _labels(text: str | None) -> list[str] | None:
    """``--labels A,B,...``: the declared label set (distinct, non-empty)."""
    if text is None:
        return None
    names = [name.strip() for name in str(text).split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise ConfigError(f"--labels must be distinct comma-separated names, got {text!r}")
    return names


_BAUM_WELCH_ONLY = {
    "every_iteration": "--every-iteration",
    "max_length": "--max-length",
    "truncate": "--truncate",
    "feature_bound": "--feature-bound",
    "dimension": "--dimension",
    "iterations": "--iterations",
    "symbols": "--symbols",
    "init": "--init",
}


def _refuse_baum_welch_options(args: argparse.Namespace) -> None:
    """DP Baum-Welch's options mean nothing here: refuse them rather than ignore them."""
    given = [flag for name, flag in _BAUM_WELCH_ONLY.items() if getattr(args, name, None)]
    if given:
        raise ConfigError(
            f"--keyword-models does not take {', '.join(given)} (DP Baum-Welch options): "
            "each utterance's contribution is bounded by --record-bound, whatever its length"
        )
    if getattr(args, "neighbouring", "add_remove") != "add_remove":
        raise ConfigError("--keyword-models guarantees add/remove of one utterance only")


def release_command(args: argparse.Namespace, console, guarantee_path: Path) -> int:
    """Run ``smc-hmm release hmm --keyword-models`` (:mod:`smc_hmm.dp.keyword_release`);
    returns 0."""
    from smc_hmm.dp.keyword_models import release_keyword_models
    from smc_hmm.dp.random import DPRandom

    _refuse_baum_welch_options(args)
    out = Path(str(args.out))
    if out.suffix != ".npz":
        raise ConfigError(f"--out must name a .npz file, got {out}")
    check_output_path(out, "--out")  # every output path, before any data is read
    check_output_path(guarantee_path, "--out's privacy metadata")
    check_output_path(getattr(args, "json", None))
    train, labels = _training_set(args)
    seeded = args.seed is not None
    rng = DPRandom.insecure_seeded(int(args.seed)) if seeded else None
    release = release_keyword_models(
        train,
        args.eps,
        labels=labels,
        design=_design(args),
        sampler="float" if seeded else "opendp",
        rng=rng,
    )
    guarantee = save_release(release, out, guarantee_path)
    summary = {
        **guarantee,
        "model": str(out),
        "metadata": str(guarantee_path),
        "training_utterances": "not released (only through the noisy counts)",
    }
    if args.json:  # files first (docs/running.md, "Output")
        write_json(args.json, summary)
    if console is not None:
        if seeded:
            warn(console, "--seed: INSECURE seeded float noise (reproducible experiments only)")
        if release.guarantee["not_covered"]:
            warn(
                console,
                "not covered by the guarantee: " + "; ".join(release.guarantee["not_covered"]),
            )
        print_json(console, summary)
    return 0


def _training_set(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """(the training data by label, the labels: ``--labels`` or the ten digit words)."""
    labels = _labels(getattr(args, "labels", None))
    data_path = Path(str(args.data))
    skip = _indices(args.skip_indices) if data_path.is_dir() else range(0)
    max_frames = DEFAULT_MAX_FRAMES if args.max_frames is None else args.max_frames
    train = read_training_data(data_path, labels, skip, max_frames)
    if labels is None:
        from smc_hmm.data import DIGIT_WORDS

        labels = list(DIGIT_WORDS)
    return train, labels


def _design(args: argparse.Namespace):
    """The public design of the release (:class:`~smc_hmm.dp.keyword_models.KeywordDesign`)
    from the command line; ``--states`` defaults to 5 here."""
    from smc_hmm.dp.keyword_models import KeywordDesign

    return KeywordDesign(
        n_states=5 if args.states is None else args.states,
        coord_clip=args.coord_clip,
        record_bound=args.record_bound,
        count_weight=args.record_bound,
        standardisation=args.standardisation,
        static_means=bool(args.static_means),
        variances=args.variances,
        delta=args.delta,
    )
