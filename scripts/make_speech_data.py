#!/usr/bin/env python3
"""Regenerate the bundled speech data in ``smc_hmm/data/fsdd/`` and ``docs/speech-models.md``.

From the 2,500 Free Spoken Digit Dataset recordings (five speakers, digits 0-9, indices
0-49; CC BY-SA 4.0) this script

1. extracts 39-dimensional MFCC features with :mod:`smc_hmm.features` (numpy backend;
   if librosa is installed it also reports the largest numpy-vs-librosa difference);
2. fits the global standardisation on the training split (indices 5-49 of every speaker
   and digit) and trains one 5-state left-to-right Gaussian HMM per digit with
   :func:`smc_hmm.hmm.baum_welch`, with diagonal and with full covariances, plus a
   5-state garbage (background) model on the non-keyword digits for keyword spotting;
3. evaluates plaintext accuracy on the test split (indices 0-4: 250 utterances) and
   leave-one-speaker-out (train on all 50 indices of four speakers, standardisation
   refitted on them, test on the fifth speaker's 500 utterances);
4. cross-checks training against hmmlearn's GaussianHMM started from the same model;
5. writes the test split's features, the models, the pipeline, a manifest and the NOTICE.

The keyword task is that of thesis 003, section 4.2.1; the numbers are in
``docs/speech-models.md``.

The recordings are not bundled: get the Free Spoken Digit Dataset (FSDD), public
repository ``Jakobovski/free-spoken-digit-dataset`` on GitHub, licensed CC BY-SA 4.0, at
commit 26eb9aa (the five speakers the bundled data come from), e.g.
``git clone https://github.com/Jakobovski/free-spoken-digit-dataset fsdd && git -C fsdd
checkout 26eb9aa``.  Then run from the repository root::

    python3 scripts/make_speech_data.py FSDD_FOLDER [--jobs N]   # or set FSDD_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import _common  # first: one BLAS thread per process, before numpy
import numpy as np

from smc_hmm.data import DIGIT_WORDS, NOTICE_TEXT
from smc_hmm.features import BENCHMARK_FRAMES, FeaturePipeline, pad_or_cut, read_wav
from smc_hmm.hmm import GaussianHMM, baum_welch, log_likelihood
from smc_hmm.hmm.io import save_models

REPO = Path(__file__).resolve().parents[1]
N_STATES = 5
SELF_LOOP = 0.5
SPEAKERS = ("george", "jackson", "nicolas", "theo", "yweweler")
TEST_INDICES = range(0, 5)
_NAME = re.compile(r"^(\d)_([a-z]+)_(\d+)\.wav$")


@dataclass(frozen=True)
class Utterance:
    digit: int
    speaker: str
    index: int
    features: np.ndarray  # raw (un-standardised) MFCCs, float64 (T, 39)


# --- models ---------------------------------------------------------------------------


def left_to_right_init(sequences: list[np.ndarray], covariance_type: str) -> GaussianHMM:
    """Flat start: each sequence cut into N equal segments, state j gets segment j's moments.

    pi = (1, 0, ..., 0); a_jj = a_j,j+1 = 0.5, the last state absorbing. Baum-Welch keeps
    the zeros of A, so the trained model stays left-to-right.
    """
    frames, transmat = _common.left_to_right_start(sequences, N_STATES, SELF_LOOP)
    means = np.array([f.mean(axis=0) for f in frames])
    dim = means.shape[1]
    if covariance_type == "diag":
        covars = np.array([f.var(axis=0) + 1e-3 for f in frames])
    else:
        covars = np.array([np.cov(f.T, bias=True) + 1e-3 * np.eye(dim) for f in frames])
    return GaussianHMM(np.eye(N_STATES)[0], transmat, means, covars, covariance_type)


def train(task: tuple[str, str, list[np.ndarray], int, float]) -> tuple[str, GaussianHMM, dict]:
    """Worker: Baum-Welch from the flat start; also hmmlearn from the same start if asked."""
    name, covariance_type, sequences, n_iter, tol = task
    start = left_to_right_init(sequences, covariance_type)
    result = baum_welch(start, sequences, n_iter=n_iter, tol=tol)
    iterations, ll_per_frame, n_frames = _common.fit_summary(result, sequences)
    info = {
        "iterations": iterations,
        "converged": bool(result.converged),
        "ll_per_frame": ll_per_frame,
    }
    if name.startswith("hmmlearn/"):
        from hmmlearn import hmm

        ref = hmm.GaussianHMM(
            n_components=N_STATES,
            covariance_type=covariance_type,
            n_iter=n_iter,
            tol=tol,
            min_covar=1e-3,
            init_params="",
            params="stmc",
        )
        ref.startprob_, ref.transmat_ = start.startprob.copy(), start.transmat.copy()
        ref.means_, ref.covars_ = start.means.copy(), start.covars.copy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref.fit(np.concatenate(sequences), [len(x) for x in sequences])
        info["hmmlearn_ll_per_frame"] = float(
            ref.score(np.concatenate(sequences), [len(x) for x in sequences]) / n_frames
        )
        return name, GaussianHMM.from_hmmlearn(ref), info
    return name, result.model, info


def scores(task: tuple[list[GaussianHMM], list[np.ndarray]]) -> np.ndarray:
    """Worker: matrix (utterances, models) of log-likelihoods."""
    models, sequences = task
    return np.array([[log_likelihood(m, x) for m in models] for x in sequences])


# --- data -----------------------------------------------------------------------------


def load_recordings(fsdd: Path, pipeline: FeaturePipeline) -> list[Utterance]:
    paths = sorted((fsdd / "recordings").glob("*.wav"))
    if len(paths) != 2500:
        sys.exit(f"expected 2500 recordings in {fsdd / 'recordings'}, found {len(paths)}")
    utterances = []
    for i, path in enumerate(paths, 1):
        match = _NAME.match(path.name)
        if not match:
            sys.exit(f"unexpected file name {path.name}")
        digit, speaker, index = int(match[1]), match[2], int(match[3])
        features = pipeline.extract(read_wav(path, pipeline.sample_rate, pipeline.min_samples))
        utterances.append(Utterance(digit, speaker, index, features))
        if i % 250 == 0 or i == len(paths):
            print(f"\r  features: {i}/{len(paths)} recordings", end="", flush=True)
    print()
    return utterances


def librosa_difference(
    fsdd: Path, utterances: list[Utterance], pipeline: FeaturePipeline
) -> float | None:
    try:
        import librosa  # noqa: F401
    except ImportError:
        return None
    worst = 0.0
    for i, u in enumerate(utterances, 1):
        path = fsdd / "recordings" / f"{u.digit}_{u.speaker}_{u.index}.wav"
        ref = pipeline.extract(read_wav(path), backend="librosa")
        worst = max(worst, float(np.max(np.abs(ref - u.features))))
        if i % 250 == 0:
            print(f"\r  librosa check: {i}/{len(utterances)}", end="", flush=True)
    print()
    return worst


def split(utterances: list[Utterance], test: bool) -> list[Utterance]:
    return [u for u in utterances if (u.index in TEST_INDICES) == test]


def accuracy(score_matrix: np.ndarray, digits: list[int]) -> float:
    return float(np.mean(np.argmax(score_matrix, axis=1) == np.array(digits)))


# --- main -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "fsdd",
        nargs="?",
        type=Path,
        default=None,
        help="the FSDD folder holding recordings/ (default: the FSDD_DIR variable)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "smc_hmm/data/fsdd")
    parser.add_argument("--docs", type=Path, default=REPO / "docs/speech-models.md")
    parser.add_argument(
        "--keywords",
        type=int,
        nargs="+",
        default=[1, 4, 7],
        help="keyword digits of the garbage-model experiment (default 1 4 7)",
    )
    parser.add_argument("--n-iter", type=int, default=20, help="Baum-Welch iterations (20)")
    parser.add_argument(
        "--tol",
        type=float,
        default=1.0,
        help="stop when the total log-likelihood gains less (default 1.0)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-librosa-check", action="store_true")
    parser.add_argument("--no-loso", action="store_true", help="skip leave-one-speaker-out")
    args = parser.parse_args(argv)
    fsdd = _common.fsdd_folder(parser, args)
    if (
        sorted(set(args.keywords)) != sorted(args.keywords)
        or not all(0 <= k <= 9 for k in args.keywords)
        or not 1 <= len(args.keywords) <= 9
    ):
        parser.error("--keywords must be distinct digits 0-9 (at most nine)")
    keywords = sorted(args.keywords)
    started = time.perf_counter()

    print(f"FSDD: {fsdd}")
    base = FeaturePipeline()
    utterances = load_recordings(fsdd, base)
    lib_diff = None if args.no_librosa_check else librosa_difference(fsdd, utterances, base)
    if lib_diff is not None:
        print(f"  numpy vs librosa features: max |difference| {lib_diff:.2e}")

    train_set, test_set = split(utterances, False), split(utterances, True)
    pipeline = base.fit_standardisation(u.features for u in train_set)
    std = {id(u): pipeline.standardise(u.features) for u in utterances}
    folds = [] if args.no_loso else list(SPEAKERS)
    fold_pipelines = {
        s: base.fit_standardisation(u.features for u in utterances if u.speaker != s) for s in folds
    }

    def sequences(selection: list[Utterance], p: FeaturePipeline | None = None):
        return [std[id(u)] if p is None else p.standardise(u.features) for u in selection]

    tasks = []
    for cov in ("diag", "full"):
        tasks.append(
            (
                f"garbage/{cov}",
                cov,
                sequences([u for u in train_set if u.digit not in keywords]),
                args.n_iter,
                args.tol,
            )
        )
        for d in range(10):
            digit_train = [u for u in train_set if u.digit == d]
            tasks.append((f"main/{cov}/{d}", cov, sequences(digit_train), args.n_iter, args.tol))
            tasks.append(
                (f"hmmlearn/{cov}/{d}", cov, sequences(digit_train), args.n_iter, args.tol)
            )
            for s in folds:
                fold_train = [u for u in utterances if u.speaker != s and u.digit == d]
                tasks.append(
                    (
                        f"loso/{s}/{cov}/{d}",
                        cov,
                        sequences(fold_train, fold_pipelines[s]),
                        args.n_iter,
                        args.tol,
                    )
                )
    tasks.sort(key=lambda t: -sum(len(x) for x in t[2]) * (3 if t[1] == "full" else 1))
    print(f"training {len(tasks)} models with {args.jobs} processes ...")
    models: dict[str, GaussianHMM] = {}
    infos: dict[str, dict] = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for i, (name, model, info) in enumerate(pool.map(train, tasks), 1):
            models[name], infos[name] = model, info
            print(f"\r  trained {i}/{len(tasks)}", end="", flush=True)
        print()

        # evaluation: every scoring job in parallel
        test_digits = [u.digit for u in test_set]
        jobs: dict[str, tuple[list[GaussianHMM], list[np.ndarray]]] = {}
        test_std = sequences(test_set)
        test_fixed = [pad_or_cut(x, BENCHMARK_FRAMES) for x in test_std]
        for cov in ("diag", "full"):
            digit_models = [models[f"main/{cov}/{d}"] for d in range(10)]
            jobs[f"test/{cov}"] = (digit_models, test_std)
            jobs[f"fixed/{cov}"] = (digit_models, test_fixed)
            jobs[f"hmmlearn/{cov}"] = ([models[f"hmmlearn/{cov}/{d}"] for d in range(10)], test_std)
            jobs[f"garbage/{cov}"] = ([models[f"garbage/{cov}"]], test_std)
            for s in folds:
                held_out = [u for u in utterances if u.speaker == s]
                jobs[f"loso/{s}/{cov}"] = (
                    [models[f"loso/{s}/{cov}/{d}"] for d in range(10)],
                    sequences(held_out, fold_pipelines[s]),
                )
        print(f"scoring {len(jobs)} model sets ...")
        score = dict(zip(jobs, pool.map(scores, jobs.values()), strict=True))

    results: dict[str, dict] = {}
    for cov in ("diag", "full"):
        r: dict = {
            "test": accuracy(score[f"test/{cov}"], test_digits),
            "test_98_frames": accuracy(score[f"fixed/{cov}"], test_digits),
            "hmmlearn_test": accuracy(score[f"hmmlearn/{cov}"], test_digits),
            "train_ll_per_frame": float(
                np.mean([infos[f"main/{cov}/{d}"]["ll_per_frame"] for d in range(10)])
            ),
            "hmmlearn_train_ll_per_frame": float(
                np.mean([infos[f"hmmlearn/{cov}/{d}"]["hmmlearn_ll_per_frame"] for d in range(10)])
            ),
            "iterations": [infos[f"main/{cov}/{d}"]["iterations"] for d in range(10)],
        }
        if folds:
            r["loso"] = {
                s: accuracy(
                    score[f"loso/{s}/{cov}"], [u.digit for u in utterances if u.speaker == s]
                )
                for s in folds
            }
            r["loso_mean"] = float(np.mean(list(r["loso"].values())))
        # keyword spotting: accept the best keyword model if it beats the garbage model
        kw = score[f"test/{cov}"][:, keywords]
        best = np.array(keywords)[np.argmax(kw, axis=1)]
        accepted = kw.max(axis=1) > score[f"garbage/{cov}"][:, 0]
        truth = np.array(test_digits)
        is_kw = np.isin(truth, keywords)
        r["spotting"] = {
            "detection": float(np.mean(accepted[is_kw] & (best[is_kw] == truth[is_kw]))),
            "miss": float(np.mean(~accepted[is_kw])),
            "false_alarm": float(np.mean(accepted[~is_kw])),
            "n_keyword": int(is_kw.sum()),
            "n_other": int((~is_kw).sum()),
        }
        results[cov] = r
    elapsed = time.perf_counter() - started

    write_outputs(args.out, pipeline, test_set, models, keywords, results, lib_diff, args)
    table = results_table(results, folds, keywords)
    print(table)
    write_docs(args.docs, table, results, keywords, lib_diff, elapsed, args)
    print(f"wrote {args.out} and {args.docs} in {elapsed:.0f} s")
    return 0


def write_outputs(
    out: Path,
    pipeline: FeaturePipeline,
    test_set: list[Utterance],
    models: dict[str, GaussianHMM],
    keywords: list[int],
    results: dict,
    lib_diff: float | None,
    args: argparse.Namespace,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "pipeline.json").write_text(pipeline.to_json())
    with open(out / "test_features.npz", "wb") as fh:
        np.savez_compressed(
            fh,
            features=np.concatenate([u.features for u in test_set]).astype(np.float32),
            lengths=np.array([len(u.features) for u in test_set], dtype=np.int32),
            digits=np.array([u.digit for u in test_set], dtype=np.int8),
            speakers=np.array([u.speaker for u in test_set]),
            indices=np.array([u.index for u in test_set], dtype=np.int8),
        )
    for cov in ("diag", "full"):
        save_models(
            out / f"models_{cov}.npz",
            [models[f"main/{cov}/{d}"] for d in range(10)],
            list(DIGIT_WORDS),
            pipeline=pipeline.to_dict(),  # the same WAV gives the same features everywhere
        )
        save_models(
            out / f"garbage_{cov}.npz",
            [models[f"garbage/{cov}"]],
            ["garbage"],
            pipeline=pipeline.to_dict(),
        )
    manifest = {
        "source": "Free Spoken Digit Dataset, commit 26eb9aa, five speakers, 2500 recordings",
        "labels": list(DIGIT_WORDS),
        "n_states": N_STATES,
        "topology": "left-to-right, pi = e_1, initial a_jj = a_j,j+1 = 0.5, last absorbing",
        "training": {
            "split": "indices 5-49 of every speaker and digit (2250 utterances)",
            "algorithm": "smc_hmm.hmm.baum_welch from a flat (uniform segmentation) start",
            "n_iter": args.n_iter,
            "tol": args.tol,
            "min_covar": 1e-3,
        },
        "test_split": "indices 0-4 of every speaker and digit (250 utterances)",
        "test_features": "raw (un-standardised) features as float32; standardise with "
        "pipeline.json",
        "keywords": [DIGIT_WORDS[k] for k in keywords],
        "garbage": "one model on the training utterances of the other digits",
        "numpy_vs_librosa_max_abs_difference": lib_diff,
        "results": results,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "NOTICE").write_text(NOTICE_TEXT)


def results_table(results: dict, folds: list[str], keywords: list[int]) -> str:
    def pct(x: float) -> str:
        return f"{100 * x:.1f}%"

    rows = [
        ("test split (250 utterances)", "test"),
        (f"test split, cut/padded to {BENCHMARK_FRAMES} frames", "test_98_frames"),
        ("test split, hmmlearn-trained models", "hmmlearn_test"),
    ]
    lines = ["| accuracy | diag | full |", "|---|---|---|"]
    for label, key in rows:
        lines.append(f"| {label} | {pct(results['diag'][key])} | {pct(results['full'][key])} |")
    for s in folds:
        lines.append(
            f"| leave-one-speaker-out: {s} (500) | {pct(results['diag']['loso'][s])} "
            f"| {pct(results['full']['loso'][s])} |"
        )
    if folds:
        lines.append(
            f"| **leave-one-speaker-out, mean** | **{pct(results['diag']['loso_mean'])}"
            f"** | **{pct(results['full']['loso_mean'])}** |"
        )
    words = ", ".join(DIGIT_WORDS[k] for k in keywords)
    sp = {c: results[c]["spotting"] for c in ("diag", "full")}
    lines.append(
        f"| spotting {{{words}}} vs garbage: detection ({sp['diag']['n_keyword']}) "
        f"| {pct(sp['diag']['detection'])} | {pct(sp['full']['detection'])} |"
    )
    lines.append(
        f"| spotting: miss (rejected keyword) | {pct(sp['diag']['miss'])} "
        f"| {pct(sp['full']['miss'])} |"
    )
    lines.append(
        f"| spotting: false alarm ({sp['diag']['n_other']} other digits) "
        f"| {pct(sp['diag']['false_alarm'])} | {pct(sp['full']['false_alarm'])} |"
    )
    ll = (
        f"| mean training log-likelihood per frame: ours / hmmlearn | "
        f"{results['diag']['train_ll_per_frame']:.3f} / "
        f"{results['diag']['hmmlearn_train_ll_per_frame']:.3f} | "
        f"{results['full']['train_ll_per_frame']:.3f} / "
        f"{results['full']['hmmlearn_train_ll_per_frame']:.3f} |"
    )
    lines.append(ll)
    return "\n".join(lines)


DOC_TEMPLATE = """\
# Speech features and keyword models (Free Spoken Digit Dataset)

The secure keyword recognition of thesis 003, section 4.2.1, scores an utterance with
one Gaussian HMM per keyword. This page describes the real-speech features and models
bundled in `smc_hmm/data/fsdd/` and how they were made. Everything there is derived from
the Free Spoken Digit Dataset and licensed CC BY-SA 4.0 (see `smc_hmm/data/fsdd/NOTICE`).

## Data

2,500 recordings of the digits 0-9 (mono, 8 kHz, 16-bit), five speakers (george,
jackson, nicolas, theo, yweweler), 50 per speaker and digit (indices 0-49).

- **Test split** (speaker-dependent): indices 0-4 of every speaker and digit, 250
  utterances. The models are trained on indices 5-49 (2,250 utterances).
- **Leave-one-speaker-out** (speaker-independent): for each speaker, models trained on
  *all* 50 indices of the other four speakers (2,000 utterances, standardisation refitted
  on them) and tested on the held-out speaker's 500 utterances.

## Features (`smc_hmm.features`)

39 values per 10 ms frame: 13 MFCCs (c0 included, standing for the log-energy), deltas
and delta-deltas. 25 ms (200-sample) periodic Hamming window, 80-sample hop, `n_fft` 200,
centred frames with zero padding, no pre-emphasis, power spectrum, 40 Slaney mel bands
0-4000 Hz (Slaney area normalisation), `10 log10` with a 1e-10 floor and an 80 dB
dynamic range, orthonormal DCT-II, no liftering; deltas by Savitzky-Golay regression over
9 frames (`librosa.feature.delta(width=9)`). A recording of N samples gives
`ceil(N / 80)` frames (the frames whose centre lies inside the recording: 0.98 s gives 98
frames), so recordings shorter than 641 samples (9 frames) are rejected.

`FeaturePipeline` (frozen dataclass) holds every parameter and the global
standardisation `(x - mean) / std` (per dimension, fitted on the training frames); it is
stored in `pipeline.json`. `smc_hmm.features.mfcc_numpy` needs only numpy/scipy;
`mfcc_librosa` (the `audio` extra) is the reference.{librosa_line}
Per-utterance cepstral mean normalisation is not used: on these short utterances an
earlier experiment with the same kind of models measured it worse than global
standardisation (96.4% vs 98.4% on the test split).

For the fixed-length benchmark, `pad_or_cut(features, 98)` repeats the first/last frame
(edge padding, no synthetic silence) or cuts, keeping the utterance centred. Most
recordings are much shorter than 0.98 s (median 0.4 s), so often more than half of a
padded sequence repeats an edge frame; this costs the diagonal models accuracy
({pad_diag} instead of {test_diag} on the test split) and the full models less
({pad_full} instead of {test_full}). Padding with the edge frames' cepstra but zero
deltas (a truly still signal) measured worse with the bundled models (81.6% / 92.8%).

## Models

One 5-state left-to-right Gaussian HMM per digit (start in state 1; each state loops or
moves to the next; the last state is absorbing), flat start (every training utterance cut
into five equal segments, state j initialised with the mean and covariance of segment
j), then `smc_hmm.hmm.baum_welch` ({n_iter} iterations at most, tolerance {tol} on the
total log-likelihood, variance floor 1e-3). Baum-Welch keeps the zeros of the transition
matrix, so the models stay left-to-right. Diagonal (`models_diag.npz`) and full
(`models_full.npz`) covariances; labels "zero" .. "nine" in digit order. The garbage
(background) models `garbage_diag.npz` / `garbage_full.npz` (label "garbage") are
5-state models of the same form trained on the training utterances of the seven
non-keyword digits ({keywords} are the keywords).

The cross-check trains hmmlearn's `GaussianHMM` from the same initial models with the
same iteration budget (`init_params=""`, `min_covar=1e-3`; hmmlearn adds the floor to the
covariance instead of clipping at it, so the fits differ slightly).

## Results (plaintext)

Classification = the model with the highest log-likelihood. Keyword spotting = the best
keyword model is accepted if its log-likelihood exceeds the garbage model's; detection
= accepted with the right keyword, false alarm = a non-keyword utterance accepted.

{table}

## Bundled files (`smc_hmm/data/fsdd/`)

- `test_features.npz`: the 250 test utterances; `features` holds all their frames
  concatenated (raw, un-standardised MFCCs as float32, 39 columns), split by `lengths`;
  `digits`, `speakers` and `indices` identify them.
- `models_diag.npz`, `models_full.npz`: the ten digit models
  (`smc_hmm.hmm.io.load_models`), labels "zero" .. "nine".
- `garbage_diag.npz`, `garbage_full.npz`: the garbage model for the keywords
  {keywords}.
- `pipeline.json`: `FeaturePipeline.to_dict()`, standardisation included.
- `manifest.json`: splits, training settings, keywords and the results above.
- `NOTICE`: the FSDD attribution and the CC BY-SA 4.0 license.

Loaders (`smc_hmm.data`): `load_pipeline()`, `load_bundled_models(kind="diag" | "full")`,
`load_garbage_model(kind)`, `load_test_utterances(standardised=True)`. Neither the WAVs
nor librosa are needed to use them.

## Regenerating

The recordings are not bundled.  Get the Free Spoken Digit Dataset (FSDD), public
repository `Jakobovski/free-spoken-digit-dataset` on GitHub, license CC BY-SA 4.0; the
bundled files come from its commit 26eb9aa (five speakers, 2,500 recordings; a later
commit with more speakers would change the splits and the numbers).  Then, from the
repository root:

```
git clone https://github.com/Jakobovski/free-spoken-digit-dataset fsdd
git -C fsdd checkout 26eb9aa
python3 scripts/make_speech_data.py fsdd --jobs {jobs}    # or FSDD_DIR=fsdd python3 ...
```

took {elapsed:.0f} s with {jobs} processes (feature extraction, the librosa comparison,
and training {n_models} models: 100 of them for leave-one-speaker-out, 20 by hmmlearn).
The script is deterministic (no random initialisation).
"""


def write_docs(
    path: Path,
    table: str,
    results: dict,
    keywords: list[int],
    lib_diff: float | None,
    elapsed: float,
    args: argparse.Namespace,
) -> None:
    librosa_line = (
        ""
        if lib_diff is None
        else "\nOver all 2,500 recordings the two implementations differ by at most "
        f"{lib_diff:.1e}\n(absolute; the features reach a few hundred in magnitude)."
    )

    def pct(key: str, cov: str) -> str:
        return f"{100 * results[cov][key]:.1f}%"

    n_models = 2 * (1 + 10 + 10 + (0 if args.no_loso else 50))
    path.write_text(
        DOC_TEMPLATE.format(
            librosa_line=librosa_line,
            n_iter=args.n_iter,
            tol=args.tol,
            keywords=", ".join(f'"{DIGIT_WORDS[k]}"' for k in keywords),
            table=table,
            jobs=args.jobs,
            elapsed=elapsed,
            n_models=n_models,
            pad_diag=pct("test_98_frames", "diag"),
            test_diag=pct("test", "diag"),
            pad_full=pct("test_98_frames", "full"),
            test_full=pct("test", "full"),
        )
    )


if __name__ == "__main__":
    sys.exit(main())
