#!/usr/bin/env python3
"""Regenerate the bundled connected-digit recordings (``smc_hmm/data/fsdd/digit_strings*``;
``docs/digits.md``) and their plaintext recognition figures.

1. **Recordings** (:data:`RECORDINGS`): strings of 3 to 6 digits (repeats allowed, as in a
   PIN), each by one speaker (20 a speaker, so that leave-one-speaker-out is clean), from
   the *test split* (indices 0-4, never seen by a model), joined by
   ``make_continuous_speech.join`` with noise pauses of 0.1-0.5 s at the neighbouring
   recordings' noise floor (0.05-0.2 s before and after).
2. **Plaintext recognition** on the stored features (float16 statics, deltas recomputed:
   what :func:`smc_hmm.data.digits.load_digit_strings` gives): the loop of the bundled
   digit HMMs and silence (:func:`smc_hmm.data.digits.digit_loop`), word error rate and
   string accuracy; then leave one speaker out: per speaker, spotting's recipe
   (:func:`smc_hmm.data.recipe.train_spotting`: the loop's digit models, its silence
   state -- the fillers' pause -- and the standardisation) trained on the other four
   speakers' recordings, decoding that speaker's strings.

From the repository root, with the FSDD checkout (``docs/speech-models.md``)::

    python3 scripts/make_digit_strings.py FSDD_FOLDER [--wav-dir DIR] [--jobs 2]

Deterministic (seeded); ``--wav-dir`` also writes the recordings as WAV files (for
``smc-hmm digits --audio``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import _common  # first: one BLAS thread per process, before numpy
import make_continuous_speech as joined
import numpy as np

from smc_hmm.data import recipe
from smc_hmm.data.continuous import STATIC_MFCC, statics_to_features, word_frames
from smc_hmm.data.digits import DIGIT_STRINGS_NOTICE, digit_loop, digit_pipeline, silence_model
from smc_hmm.data.speaker_features import SPEAKERS
from smc_hmm.hmm.digits import DigitGrammar, decode_digits, word_errors

RECORDINGS = 100
WORDS = (3, 6)
PAUSE = (0.1, 0.5)
SEED = 51


def build(audio, count: int, rng, rate: int):
    """``count`` strings of 3-6 digits, recording r by speaker r mod 5."""
    out = []
    for r in range(count):
        speaker = SPEAKERS[r % len(SPEAKERS)]
        digits = rng.integers(0, 10, size=int(rng.integers(WORDS[0], WORDS[1] + 1)))
        parts = []
        for d in digits:
            i = int(rng.choice(list(joined.TEST_INDICES)))
            parts.append((int(d), speaker, audio[(int(d), speaker, i)]))
        out.append(recipe.join_words(parts, rng, rate, pause=PAUSE, edge=joined.EDGE))
    return out


def _evaluate(task):
    """Worker: decode strings with one loop; (references, DigitStrings)."""
    digits, silence, grammar, recordings = task
    model, layout = digit_loop(grammar, digits, silence)
    return [(ref, decode_digits(model, layout, x, grammar)) for ref, x in recordings]


def _train_fold(task) -> tuple[str, dict]:
    """Worker: one fold's digit models, silence and pipeline, by spotting's recipe."""
    speaker, audio = task
    return speaker, recipe.train_spotting(audio, np.random.default_rng(SEED + 1))


def loso(audio, test, statics, grammar, pool) -> dict:
    """Leave one speaker out: per speaker, the loop's models trained on the other
    speakers' recordings (``audio``: every FSDD recording by (digit, speaker, index))."""
    tasks = [(s, {k: x for k, x in audio.items() if k[1] != s}) for s in SPEAKERS]
    print(f"training {len(tasks)} folds ...")
    jobs = []
    for s, fold in pool.map(_train_fold, tasks):
        recs = [
            (r.digits, statics_to_features(st, fold["spotting_pipeline"]))
            for r, st in zip(test, statics)
            if r.speakers[0] == s
        ]
        jobs.append((fold["keywords"], silence_model(fold["fillers"][0]), grammar, recs))
    results = list(pool.map(_evaluate, jobs))
    per = {s: word_errors(p) for s, p in zip(SPEAKERS, results)}
    return {"per_speaker": per, "all": word_errors([p for r in results for p in r])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fsdd", nargs="?", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=_common.BUNDLED)
    parser.add_argument("--wav-dir", type=Path, default=None)
    parser.add_argument("--recordings", type=int, default=RECORDINGS)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-loso", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="evaluate, write nothing")
    args = parser.parse_args(argv)
    fsdd = _common.fsdd_folder(parser, args)
    started = time.perf_counter()
    pipeline = digit_pipeline()
    audio = joined.load_fsdd(fsdd, pipeline.sample_rate)
    test = build(audio, args.recordings, np.random.default_rng(SEED), pipeline.sample_rate)
    statics = [pipeline.extract(r.samples)[:, :STATIC_MFCC].astype(np.float16) for r in test]
    grammar = DigitGrammar()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        recs = [(r.digits, statics_to_features(s, pipeline)) for r, s in zip(test, statics)]
        (pairs,) = pool.map(_evaluate, [(None, None, grammar, recs)])
        results = {"bundled_models": word_errors(pairs)}
        print(json.dumps(results))
        if not args.no_loso:
            results["leave_one_speaker_out"] = loso(audio, test, statics, grammar, pool)
            print(json.dumps(results["leave_one_speaker_out"]["all"]))
    if not args.dry_run:
        write(args, test, statics, pipeline, grammar, results)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


def write(args, test, statics, pipeline, grammar, results) -> None:
    out = args.out
    words = WORDS[1]
    digits = np.full((len(test), words), -1, dtype=np.int8)
    bounds = np.full((len(test), words, 2), -1, dtype=np.int32)
    for i, r in enumerate(test):
        digits[i, : len(r.digits)] = r.digits
        bounds[i, : len(r.digits)] = [word_frames(a, b, pipeline.hop_length) for a, b in r.spans]
    with open(out / "digit_strings.npz", "wb") as fh:
        np.savez_compressed(
            fh,
            mfcc=np.concatenate(statics),
            lengths=np.array([len(s) for s in statics], dtype=np.int32),
            digits=digits,
            bounds=bounds,
            speakers=np.array([r.speakers[0] for r in test], dtype="<U8"),
        )
    manifest = {
        "source": "Free Spoken Digit Dataset, commit 26eb9aa (five speakers)",
        "recordings": len(test),
        "from": "test split (indices 0-4 of every speaker and digit)",
        "words": list(WORDS),
        "speakers": "recording r by speaker r mod 5 (20 each)",
        "pause_seconds": list(PAUSE),
        "edge_seconds": list(joined.EDGE),
        "frames": int(sum(len(s) for s in statics)),
        "seed": SEED,
        "grammar": vars(grammar) | {"silence": "the bundled fillers' pause state"},
        "results": results,
    }
    (out / "digit_strings_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    notice = out / "NOTICE"
    text = notice.read_text(encoding="utf-8")
    if DIGIT_STRINGS_NOTICE not in text:
        notice.write_text(text.rstrip("\n") + "\n\n" + DIGIT_STRINGS_NOTICE, encoding="utf-8")
    if args.wav_dir:
        from scipy.io import wavfile

        args.wav_dir.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(test):
            name = f"digits_{i:03d}_{''.join(map(str, r.digits))}.wav"
            wavfile.write(args.wav_dir / name, pipeline.sample_rate, r.samples.astype(np.float32))


if __name__ == "__main__":
    raise SystemExit(main())
