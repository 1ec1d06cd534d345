"""``smc-hmm bench speech``: how the speech recipe does for a voice it never heard.

Leave one speaker out over the five speakers of the Free Spoken Digit Dataset: for each
fold the whole recipe of :mod:`smc_hmm.data.recipe` (standardisation, the ten digit
models, the background model, the ten spotting fillers) is retrained on the other four
speakers' 2,000 recordings and tested on the fifth's 500, and once more within speakers
(trained on indices 5-49 of everyone, tested on indices 0-4), the bundled models' split.
Per fold (plaintext):

* **isolated digits**: accuracy by the forward log-likelihood and by the best path's
  (Viterbi) score, the secure default;
* **background**: the same ten models plus the background model with the public margin
  (``KeywordParams.garbage`` / ``margin``, Viterbi scores): the digits' accuracy (a
  rejected digit counts as an error) and how many of ``--clips`` generated clips of
  silence and white noise are rejected ("no keyword");
* **spotting**: ``--recordings`` continuous recordings of 3-5 digits joined from the
  held-out speaker's recordings, searched with spotting's recipe retrained on the other
  speakers (:func:`train_spotting`): detection rate, false alarms (the share of
  recordings without the keyword where it is reported, over the ten keywords), boundary
  error in frames.

The recordings are not bundled: ``--fsdd DIR`` or ``FSDD_DIR`` names the FSDD folder
(``docs/speech-models.md``, which also gives the commands and the numbers).  Targets:
mean LOSO accuracy >= 95% and no fold below 90% (Viterbi), detection >= 85%, false
alarms <= 10% per recording, rejection >= 95%.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from smc_hmm.bench import common
from smc_hmm.data.speaker_features import SPEAKERS
from smc_hmm.errors import InvalidInputError

WITHIN = "within"
#: targets (fractions)
ACCURACY_MEAN, ACCURACY_MIN, VITERBI_GAP = 0.95, 0.90, 0.01
DETECTION, FALSE_ALARMS, REJECTION = 0.85, 0.10, 0.95
#: seeds of the generated rejection clips and the continuous recordings (public)
CLIP_SEED, RECORDING_SEED = 2049, 49
#: generated clips that train the background model
BACKGROUND_CLIPS = 200
_NAME = re.compile(r"^(\d)_([a-z]+)_(\d+)\.wav$")


def add_arguments(parser) -> None:
    parser.add_argument("--fsdd", metavar="DIR", help="the FSDD folder (default: FSDD_DIR)")
    parser.add_argument(
        "--covariance", choices=("diag", "full"), default="diag", help="the models' covariances"
    )
    parser.add_argument(
        "--folds",
        default=",".join((*SPEAKERS, WITHIN)),
        help=f"comma-separated held-out speakers, and {WITHIN!r} for the within-speaker split",
    )
    parser.add_argument(
        "--clips",
        type=common.bounded(0, 1000),
        default=200,
        help="generated silence and noise clips per fold (200)",
    )
    parser.add_argument(
        "--recordings",
        type=common.bounded(0, 200),
        default=40,
        help="continuous recordings per fold for spotting (40; 0: no spotting)",
    )
    parser.add_argument(
        "--spotting-form",
        choices=("loop", "pair"),
        default="loop",
        help="the spotting composite: the F-K loop (bundled) or the thesis's F1-K-F2",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=None,
        help="the background model's margin in nats (default: the bundled manifest's)",
    )
    common.add_json_argument(parser)


@dataclass(frozen=True)
class Utterance:
    digit: int
    speaker: str
    index: int
    samples: np.ndarray
    features: np.ndarray  # the recipe's features before the global standardisation


def load_fsdd(folder: Path, say) -> list[Utterance]:
    """Every FSDD recording with its recipe features (per-utterance: fold-independent)."""
    from smc_hmm.data.recipe import PIPELINE
    from smc_hmm.features import read_wav

    paths = sorted((folder / "recordings").glob("*.wav"))
    if not paths:
        raise InvalidInputError(f"no recordings in {folder / 'recordings'}")
    out = []
    for i, path in enumerate(paths, 1):
        match = _NAME.match(path.name)
        if match is None:
            raise InvalidInputError(f"unexpected FSDD file name {path.name}")
        samples = read_wav(path, PIPELINE.sample_rate, PIPELINE.min_samples)
        features = PIPELINE.extract(samples)
        out.append(Utterance(int(match[1]), match[2], int(match[3]), samples, features))
        if i % 500 == 0:
            say(f"features: {i}/{len(paths)} recordings")
    return out


def split(utterances: list[Utterance], fold: str) -> tuple[list[Utterance], list[Utterance]]:
    """(training, test) of a fold: a held-out speaker, or the within-speaker split."""
    if fold == WITHIN:
        return [u for u in utterances if u.index >= 5], [u for u in utterances if u.index < 5]
    return [u for u in utterances if u.speaker != fold], [
        u for u in utterances if u.speaker == fold
    ]


def train_fold(train: list[Utterance], covariance: str, spotting: bool) -> dict:
    """The recipe retrained on ``train``: pipeline, digit models, background, fillers."""
    from smc_hmm.data import recipe

    pipeline = recipe.PIPELINE.fit_standardisation(u.features for u in train)
    by_digit = [
        [pipeline.standardise(u.features) for u in train if u.digit == d] for d in range(10)
    ]
    models = [recipe.train_word(x, covariance).model for x in by_digit]
    rng = np.random.default_rng(CLIP_SEED + 1)
    signals = recipe.background_signals(rng, BACKGROUND_CLIPS, colours=recipe.BACKGROUND_COLOURS)
    background = [pipeline.features(s) for _, s in signals]
    fold = {
        "pipeline": pipeline,
        "models": models,
        "background": recipe.train_background(background, covariance).model,
    }
    if spotting:
        fold.update(train_spotting(train, rng))
    return fold


def train_spotting(train: list[Utterance], rng: np.random.Generator) -> dict:
    """Keyword spotting's recipe (:func:`smc_hmm.data.recipe.train_spotting`) retrained on
    ``train``."""
    from smc_hmm.data import recipe

    return recipe.train_spotting({(u.digit, u.speaker, u.index): u.samples for u in train}, rng)


def isolated(fold: dict, test: list[Utterance], clips: list, margin: float) -> dict:
    """Accuracy by forward and Viterbi scores, with the background model and margin, and
    the rejection of the generated clips."""
    from smc_hmm.data.recipe import decide
    from smc_hmm.hmm.batched import batched_log_likelihoods, batched_viterbi_scores

    pipeline = fold["pipeline"]
    x = [pipeline.standardise(u.features) for u in test]
    truth = np.array([u.digit for u in test])
    models = [*fold["models"], fold["background"]]
    forward = np.stack([batched_log_likelihoods(m, x) for m in fold["models"]], axis=1)
    best = np.stack([batched_viterbi_scores(m, x) for m in models], axis=1)
    decided = decide(best[:, :10], best[:, 10], margin)
    out = {
        "utterances": len(test),
        "forward": float(np.mean(forward.argmax(axis=1) == truth)),
        "viterbi": float(np.mean(best[:, :10].argmax(axis=1) == truth)),
        "with_background": float(np.mean(decided == truth)),
        "digits_rejected": float(np.mean(decided < 0)),
    }
    if clips:
        noise = [pipeline.features(s) for _, s in clips]
        scores = np.stack([batched_viterbi_scores(m, noise) for m in models], axis=1)
        out["clips"] = len(clips)
        out["rejection"] = float(np.mean(decide(scores[:, :10], scores[:, 10], margin) < 0))
    return out


def spotting(fold: dict, test: list[Utterance], count: int, loop: bool = True) -> dict:
    """Detection, false-alarm rate and boundary error on ``count`` recordings
    joined from ``test`` (seeded), every keyword against every recording; ``loop``: the
    F-K loop (the bundled form), else F1-K-F2."""
    from smc_hmm.data.continuous import word_frames
    from smc_hmm.data.recipe import build_recordings
    from smc_hmm.hmm.spotting import compose, spot

    pipeline, glue = fold["spotting_pipeline"], {**fold["glue"], "loop": loop}
    audio = {(u.digit, u.speaker, u.index): u.samples for u in test}
    rng = np.random.default_rng(RECORDING_SEED)
    recordings = build_recordings(audio, count, rng, pipeline.sample_rate)
    features = [pipeline.features(r.samples) for r in recordings]
    hits = positives = alarms = 0
    errors: list[int] = []
    for k in range(10):
        composite, layout = compose(fold["keywords"][k], fold["fillers"][k], **glue)
        for r, x in zip(recordings, features, strict=True):
            s = spot(composite, layout, x)
            if k not in r.digits:
                alarms += s.found
                continue
            positives += 1
            first, last = word_frames(*r.spans[r.digits.index(k)], pipeline.hop_length)
            if s.found and s.start <= last and s.end >= first:
                hits += 1
                errors += [abs(s.start - first), abs(s.end - last)]
    return {
        "recordings": len(recordings),
        "detection": hits / positives,
        "false_alarm_rate": alarms / (10 * len(recordings) - positives),
        "boundary_error_frames": float(np.mean(errors)) if errors else None,
    }


def _rows(results: dict) -> list[common.Row]:
    """Per fold and the LOSO mean and minimum, with the targets on the LOSO figures."""
    rows = []
    loso = {f: r for f, r in results.items() if f != WITHIN}
    for fold, r in results.items():
        for key in ("viterbi", "forward", "with_background", "rejection", "detection"):
            if key in r:
                rows.append(common.Row(f"{fold}: {key}", 100 * r[key], None, "%"))
        if "false_alarm_rate" in r:
            rows.append(common.Row(f"{fold}: false alarms", 100 * r["false_alarm_rate"], None, "%"))
    if loso:
        rows += _loso_rows(loso)
    return rows


def _loso_rows(loso: dict) -> list[common.Row]:
    def summary(key):
        values = [r[key] for r in loso.values() if r.get(key) is not None]
        return (float(np.mean(values)), float(np.min(values)), float(np.max(values)))

    rows = []
    for key, target in (("viterbi", ACCURACY_MEAN), ("forward", ACCURACY_MEAN)):
        mean, low, _ = summary(key)
        rows.append(common.Row(f"LOSO {key}: mean", mean, target, "", target=1.0, better="higher"))
        rows.append(
            common.Row(f"LOSO {key}: min", low, ACCURACY_MIN, "", target=1.0, better="higher")
        )
    gap = max(abs(r["viterbi"] - r["forward"]) for r in loso.values())
    rows.append(
        common.Row("LOSO |viterbi - forward|, worst fold", gap, None, "", limit=VITERBI_GAP)
    )
    if all("rejection" in r for r in loso.values()):
        mean, low, _ = summary("with_background")
        rows.append(
            common.Row(
                "LOSO with background: mean", mean, ACCURACY_MEAN, "", target=1.0, better="higher"
            )
        )
        low_rej = summary("rejection")[1]
        rows.append(
            common.Row(
                "rejection of silence/noise, worst fold",
                low_rej,
                REJECTION,
                "",
                target=1.0,
                better="higher",
            )
        )
    if all("detection" in r for r in loso.values()):
        rows.append(
            common.Row(
                "LOSO spotting detection: mean",
                summary("detection")[0],
                DETECTION,
                "",
                target=1.0,
                better="higher",
            )
        )
        fa = summary("false_alarm_rate")[0]
        rows.append(
            common.Row("LOSO spotting false alarms: mean", fa, None, "", limit=FALSE_ALARMS)
        )
    return rows


def main(args) -> int:
    from rich.console import Console

    from smc_hmm.data import fsdd_dir, load_manifest
    from smc_hmm.data.recipe import background_signals

    console = Console(stderr=True, width=120)

    def say(msg: str) -> None:
        console.print(f"[dim]... {msg}[/]")

    folds = [f.strip() for f in args.folds.split(",") if f.strip()]
    if not folds or set(folds) - {*SPEAKERS, WITHIN}:
        raise InvalidInputError(f"--folds takes a subset of {', '.join((*SPEAKERS, WITHIN))}")
    margin = load_manifest()["background"]["margin"] if args.margin is None else args.margin
    if not 0.0 <= margin <= 1000.0:
        raise InvalidInputError("--margin must be in [0, 1000] nats")
    started = time.perf_counter()
    utterances = load_fsdd(fsdd_dir(args.fsdd), say)
    clips = background_signals(np.random.default_rng(CLIP_SEED), args.clips)
    results = {}
    for fold in folds:
        train, test = split(utterances, fold)
        say(f"{fold}: training on {len(train)} recordings, testing on {len(test)}")
        trained = train_fold(train, args.covariance, args.recordings > 0)
        results[fold] = isolated(trained, test, clips, margin)
        if args.recordings:
            results[fold].update(
                spotting(trained, test, args.recordings, args.spotting_form == "loop")
            )
        say(f"{fold}: {results[fold]}")
    rows = _rows(results)
    result = common.BenchResult(
        "speech",
        0,
        rows,
        {
            "covariance": args.covariance,
            "clips": args.clips,
            "recordings": args.recordings,
            "spotting_form": args.spotting_form,
            "margin": margin,
            "folds": folds,
            "seconds": time.perf_counter() - started,
        },
        {"folds": results},
    )
    result.print_table(Console(width=120))
    return common.finish(args, result, console)
