#!/usr/bin/env python3
"""Regenerate the bundled speech data in ``smc_hmm/data/fsdd/`` (``docs/speech-models.md``).

From the 2,500 Free Spoken Digit Dataset recordings (five speakers, digits 0-9, indices
0-49; CC BY-SA 4.0) this script follows the recipe of :mod:`smc_hmm.data.recipe`:

1. extracts the features of every recording with the recipe's pipeline (39 MFCC + delta
   + delta-delta with a noise floor and per-utterance cepstral mean normalisation); if
   librosa is installed it also reports the largest numpy-vs-librosa difference;
2. fits the global standardisation on the training split (indices 5-49 of every speaker
   and digit) and trains, on it: the ten 8-state digit models (diagonal and full
   covariances), the garbage models of the keywords one, four, seven (the other digits),
   the background models (generated silence and white noise);
3. evaluates on the test split (indices 0-4: 250 utterances) and on 200 generated clips
   of silence and noise;
4. writes the test split's features, the models, the pipeline, a manifest and the NOTICE.

Keyword spotting's models and test recordings come from
``scripts/make_continuous_speech.py``.  Leave-one-speaker-out figures come from
``smc-hmm bench speech`` (same recipe, retrained per fold).  The keyword task is that
of thesis 003, section 4.2.1.

The recordings are not bundled: get the Free Spoken Digit Dataset (FSDD), public
repository ``Jakobovski/free-spoken-digit-dataset`` on GitHub, licensed CC BY-SA 4.0, at
commit 26eb9aa (the five speakers the bundled data come from).  Then run from the
repository root::

    python3 scripts/make_speech_data.py FSDD_FOLDER     # or set FSDD_DIR
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _common  # first: one BLAS thread per process, before numpy
import numpy as np

from smc_hmm.bench.speech import CLIP_SEED, load_fsdd
from smc_hmm.data import DIGIT_WORDS, NOTICE_TEXT, recipe
from smc_hmm.features import read_wav
from smc_hmm.hmm.batched import batched_log_likelihoods, batched_viterbi_scores
from smc_hmm.hmm.io import save_models

KEYWORDS = (1, 4, 7)
#: the background model's public margin, nats (the bench measures it: docs/speech-models.md)
MARGIN = 0.0
#: seed of the clips that train the background model (the evaluation's: CLIP_SEED)
BACKGROUND_SEED = CLIP_SEED + 1
BACKGROUND_CLIPS = 200


def librosa_difference(fsdd: Path, utterances) -> float | None:
    try:
        import librosa  # noqa: F401
    except ImportError:
        return None
    worst = 0.0
    for u in utterances:
        path = fsdd / "recordings" / f"{u.digit}_{u.speaker}_{u.index}.wav"
        ref = recipe.PIPELINE.extract(read_wav(path), backend="librosa")
        worst = max(worst, float(np.max(np.abs(ref - u.features))))
    return worst


def train_all(train) -> dict:
    """Every bundled model, trained on ``train`` (the training split)."""
    pipeline = recipe.PIPELINE.fit_standardisation(u.features for u in train)
    by_digit = [
        [pipeline.standardise(u.features) for u in train if u.digit == d] for d in range(10)
    ]
    others = [x for d in range(10) if d not in KEYWORDS for x in by_digit[d]]
    out = {"pipeline": pipeline, "info": {}}
    out |= train_backgrounds(pipeline)
    for cov in ("diag", "full"):
        results = [recipe.train_word(x, cov) for x in by_digit]
        out[f"models_{cov}"] = [r.model for r in results]
        out["info"][f"iterations_{cov}"] = [len(r.history) - 1 for r in results]
        out[f"garbage_{cov}"] = recipe.train_word(others, cov).model
        print(f"  trained the {cov} models")
    return out


def train_backgrounds(pipeline) -> dict:
    """The background models over ``pipeline``'s features (they need no recording)."""
    rng = np.random.default_rng(BACKGROUND_SEED)
    signals = recipe.background_signals(rng, BACKGROUND_CLIPS, colours=recipe.BACKGROUND_COLOURS)
    clips = [pipeline.features(s) for _, s in signals]
    return {f"background_{c}": recipe.train_background(clips, c).model for c in ("diag", "full")}


def background_only(out: Path) -> None:
    """``--background-only``: retrain the background models over the bundled pipeline and
    rewrite their files, the manifest's background entry and its figures (the test split
    with the background, the generated clips rejected), nothing else."""
    from smc_hmm.data import load_bundled_models, load_manifest, load_pipeline, load_test_utterances

    pipeline = load_pipeline()
    trained = train_backgrounds(pipeline)
    meta = load_manifest()
    test = load_test_utterances()
    x, truth = [u.features for u in test], np.array([u.digit for u in test])
    noise = [pipeline.features(s) for _, s in recipe.background_signals(
        np.random.default_rng(CLIP_SEED), 200)]  # fmt: skip
    for cov in ("diag", "full"):
        background = trained[f"background_{cov}"]
        save_models(
            out / f"background_{cov}.npz", [background], ["background"],
            pipeline=pipeline.to_dict(),
        )  # fmt: skip
        models, _ = load_bundled_models(cov)
        vt = np.stack([batched_viterbi_scores(m, x) for m in models], axis=1)
        clips = np.stack([batched_viterbi_scores(m, noise) for m in models], axis=1)
        bg, clip_bg = (
            batched_viterbi_scores(background, x),
            batched_viterbi_scores(background, noise),
        )
        meta["results"][cov] |= {
            "test_with_background": float(np.mean(recipe.decide(vt, bg, MARGIN) == truth)),
            "clips_rejected": float(np.mean(recipe.decide(clips, clip_bg, MARGIN) < 0)),
        }
    meta["background"] = background_entry()
    (out / "manifest.json").write_text(json.dumps(meta, indent=2) + "\n")


def background_entry() -> dict:
    return {
        "margin": MARGIN,
        "states": recipe.BACKGROUND_STATES,
        "training": f"{BACKGROUND_CLIPS} generated clips (smc_hmm.data.recipe."
        f"background_signals, seed {BACKGROUND_SEED}): silence and "
        f"{', '.join(recipe.BACKGROUND_COLOURS)} noise",
        "rule": "no keyword when the background model's Viterbi score plus the margin "
        "reaches the best digit's (KeywordParams.garbage / margin)",
    }


def evaluate(trained: dict, test) -> dict:
    """Test-split accuracy (forward, Viterbi, with the background model), the rejection of
    generated clips, and the garbage models' keyword spotting."""
    pipeline = trained["pipeline"]
    x = [pipeline.standardise(u.features) for u in test]
    truth = np.array([u.digit for u in test])
    clips = recipe.background_signals(np.random.default_rng(CLIP_SEED), 200)
    noise = [pipeline.features(s) for _, s in clips]
    results = {}
    for cov in ("diag", "full"):
        models = trained[f"models_{cov}"]
        background = trained[f"background_{cov}"]
        fw = np.stack([batched_log_likelihoods(m, x) for m in models], axis=1)
        vt = np.stack([batched_viterbi_scores(m, x) for m in models], axis=1)
        bg = batched_viterbi_scores(background, x)
        clip_scores = np.stack([batched_viterbi_scores(m, noise) for m in models], axis=1)
        clip_bg = batched_viterbi_scores(background, noise)
        garbage = batched_log_likelihoods(trained[f"garbage_{cov}"], x)
        results[cov] = {
            "test_forward": float(np.mean(fw.argmax(1) == truth)),
            "test_viterbi": float(np.mean(vt.argmax(1) == truth)),
            "test_with_background": float(np.mean(recipe.decide(vt, bg, MARGIN) == truth)),
            "clips_rejected": float(np.mean(recipe.decide(clip_scores, clip_bg, MARGIN) < 0)),
            "garbage_spotting": _garbage_spotting(fw, garbage, truth),
        }
    return results


def _garbage_spotting(scores: np.ndarray, garbage: np.ndarray, truth: np.ndarray) -> dict:
    kw = scores[:, list(KEYWORDS)]
    best = np.array(KEYWORDS)[np.argmax(kw, axis=1)]
    accepted = kw.max(axis=1) > garbage
    is_kw = np.isin(truth, KEYWORDS)
    return {
        "detection": float(np.mean(accepted[is_kw] & (best[is_kw] == truth[is_kw]))),
        "false_alarm": float(np.mean(accepted[~is_kw])),
        "n_keyword": int(is_kw.sum()),
        "n_other": int((~is_kw).sum()),
    }


def write_outputs(out: Path, trained: dict, test, results: dict, lib_diff) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pipeline = trained["pipeline"]
    (out / "pipeline.json").write_text(pipeline.to_json())
    with open(out / "test_features.npz", "wb") as fh:
        np.savez_compressed(
            fh,
            features=np.concatenate([u.features for u in test]).astype(np.float32),
            lengths=np.array([len(u.features) for u in test], dtype=np.int32),
            digits=np.array([u.digit for u in test], dtype=np.int8),
            speakers=np.array([u.speaker for u in test]),
            indices=np.array([u.index for u in test], dtype=np.int8),
        )
    meta = {"pipeline": pipeline.to_dict()}
    for cov in ("diag", "full"):
        save_models(out / f"models_{cov}.npz", trained[f"models_{cov}"], list(DIGIT_WORDS), **meta)
        save_models(out / f"garbage_{cov}.npz", [trained[f"garbage_{cov}"]], ["garbage"], **meta)
        save_models(
            out / f"background_{cov}.npz", [trained[f"background_{cov}"]], ["background"], **meta
        )
    (out / "manifest.json").write_text(
        json.dumps(manifest(trained, results, lib_diff), indent=2) + "\n"
    )
    write_notice(out / "NOTICE")


def write_notice(path: Path) -> None:
    """The NOTICE's head (:data:`NOTICE_TEXT`), keeping the paragraphs the other scripts
    appended about their files (speaker, matching, spotting)."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    marks = [old.find(m) for m in ("\nThe speaker files", "\nThe matching files", "\nThe keyword-")]
    tail = old[min(i for i in marks if i >= 0) :] if any(i >= 0 for i in marks) else ""
    path.write_text(NOTICE_TEXT + tail, encoding="utf-8")


def manifest(trained: dict, results: dict, lib_diff) -> dict:
    return {
        "source": "Free Spoken Digit Dataset, commit 26eb9aa, five speakers, 2500 recordings",
        "labels": list(DIGIT_WORDS),
        "n_states": recipe.STATES,
        "n_features": trained["pipeline"].n_features,
        "topology": f"left-to-right: start in any of the first {recipe.START_STATES} states, "
        f"a_jj, a_j,j+1, a_j,j+2 (initially 0.5, {recipe.ADVANCE}, {recipe.SKIP}), the last "
        "absorbing; one Gaussian per state",
        "training": {
            "split": "indices 5-49 of every speaker and digit (2250 utterances)",
            "algorithm": "smc_hmm.data.recipe.train_word: flat start, Baum-Welch (batched E-step)",
            "n_iter": recipe.N_ITER,
            "tol": recipe.TOL,
            "min_covar": recipe.MIN_COVAR,
            "iterations": {k: v for k, v in trained["info"].items()},
        },
        "test_split": "indices 0-4 of every speaker and digit (250 utterances)",
        "test_features": "the recipe's per-utterance features (noise floor, cepstral mean "
        "normalisation) as float32, before the global standardisation of pipeline.json",
        "keywords": [DIGIT_WORDS[k] for k in KEYWORDS],
        "garbage": "one model of the same form on the training utterances of the other digits",
        "background": background_entry(),
        "spotting_keywords": "spotting_keywords_diag.npz, made by "
        "scripts/make_continuous_speech.py (docs/spotting.md)",
        "numpy_vs_librosa_max_abs_difference": lib_diff,
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fsdd", nargs="?", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=_common.BUNDLED)
    parser.add_argument("--no-librosa-check", action="store_true")
    parser.add_argument(
        "--background-only",
        action="store_true",
        help="retrain only the background models, over the bundled pipeline (no recordings)",
    )
    args = parser.parse_args(argv)
    if args.background_only:
        background_only(args.out)
        print(f"wrote the background models to {args.out}")
        return 0
    fsdd = _common.fsdd_folder(parser, args)
    started = time.perf_counter()
    utterances = load_fsdd(fsdd, print)
    lib_diff = None if args.no_librosa_check else librosa_difference(fsdd, utterances)
    train = [u for u in utterances if u.index >= 5]
    test = [u for u in utterances if u.index < 5]
    trained = train_all(train)
    results = evaluate(trained, test)
    print(json.dumps(results, indent=1))
    write_outputs(args.out, trained, test, results, lib_diff)
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
