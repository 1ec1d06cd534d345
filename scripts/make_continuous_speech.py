#!/usr/bin/env python3
"""Regenerate the bundled continuous-speech test set and the keyword models and pause of
keyword spotting (``smc_hmm/data/fsdd/continuous_*``, ``spotting_keywords_diag.npz``;
``docs/spotting.md``).

Keyword spotting (thesis 003, 2.2.3, Figure 2.4) looks for a keyword inside a longer
recording.  The Free Spoken Digit Dataset holds single words, so this script makes
continuous recordings by joining real FSDD recordings -- 3 to 5 distinct digits each, one
speaker or a mix of speakers, with short pauses between them -- and keeps the true word
boundaries:

1. **Test set** (:data:`TEST_RECORDINGS` recordings): built from the *test split*
   (indices 0-4 of every speaker and digit, the bundled single-word test set), so no
   model has heard any of its words.  A pause is low-level Gaussian noise at the
   neighbouring recordings' own noise floor (the RMS of their outer 10 ms), 0.15-0.5 s
   between words and 0.05-0.2 s before the first and after the last.  A word's frames are
   those whose centre (frame k at sample 80 k) lies inside its recording.
2. **Keyword models and fillers**, by the recipe ``smc-hmm bench speech`` measures for
   voices the models never heard (:func:`smc_hmm.data.recipe.train_spotting`,
   ``docs/speech-models.md``, "Keyword spotting"), on the *training split* (indices 5-49)
   of all five speakers: every training recording joined once into continuous recordings
   of one speaker each, normalised as a whole (noise floor 40 dB below the recording's
   mean power, cepstral mean normalisation, then a global standardisation fitted on
   them); the ten 8-state keyword models trained on the words cut from them with 3
   frames of pause; filler k a pause state and the other nine keyword models in
   parallel.  The composite is the F-K loop with the recipe's glue
   (``recipe.SPOTTING_GLUE``, stored in the manifest).
3. **Plaintext evaluation** against the true boundaries: per keyword, the composite
   (:func:`smc_hmm.hmm.spotting.compose`) decodes every test recording; detection rate,
   false alarms and boundary errors in frames go to the manifest and ``docs/spotting.md``
   quotes them.

Features: spotting's pipeline (stored in ``spotting_keywords_diag.npz``) on the joined
signal.  Stored compactly: the 13 static MFCCs (after the cepstral mean
normalisation) as float32; the loader
(:func:`smc_hmm.data.continuous.load_continuous_test`) recomputes the deltas as the
pipeline does and standardises.

The recordings are not bundled: get the FSDD (public repository
``Jakobovski/free-spoken-digit-dataset``, CC BY-SA 4.0, commit 26eb9aa; see
``docs/speech-models.md``), then from the repository root::

    python3 scripts/make_continuous_speech.py FSDD_FOLDER [--wav-dir DIR] [--jobs 2]

``--wav-dir`` also writes the test recordings as WAV files (for ``smc-hmm spot --audio``).
Deterministic (seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import _common  # first: one BLAS thread per process, before numpy
import numpy as np

from smc_hmm.data import DIGIT_WORDS, FSDD_NAME, recipe
from smc_hmm.data.continuous import (
    CONTINUOUS_NOTICE,
    PAUSE_LABEL,
    STATIC_MFCC,
    word_frames,
)
from smc_hmm.features import read_wav
from smc_hmm.hmm.io import save_models
from smc_hmm.hmm.spotting import compose, spot

TEST_INDICES = range(0, 5)
TRAIN_INDICES = range(5, 50)
TEST_RECORDINGS = 120
WORDS = (3, 5)
PAUSE = (0.15, 0.5)
EDGE = (0.05, 0.2)
SEED = 39


def load_fsdd(fsdd: Path, sample_rate: int) -> dict[tuple[int, str, int], np.ndarray]:
    """Every recording's samples by (digit, speaker, index)."""
    out = {}
    paths = sorted((fsdd / "recordings").glob("*.wav"))
    if len(paths) != 2500:
        sys.exit(f"expected 2500 recordings in {fsdd / 'recordings'}, found {len(paths)}")
    for path in paths:
        m = FSDD_NAME.match(path.name)
        if not m:
            sys.exit(f"unexpected file name {path.name}")
        out[(int(m[1]), m[2], int(m[3]))] = read_wav(path, sample_rate)
    return out


def join(parts, rng, rate: int) -> recipe.Recording:
    """Join ``parts`` [(digit, speaker, samples)] with noise pauses at their noise floor
    (:func:`smc_hmm.data.recipe.join_words`, this set's pause and edge ranges)."""
    return recipe.join_words(parts, rng, rate, pause=PAUSE, edge=EDGE)


def build(audio, indices, digits_allowed, count: int, rng, rate: int) -> list[recipe.Recording]:
    """``count`` recordings of 3-5 distinct digits from ``digits_allowed``, half of them by
    one speaker, half by a mix."""
    speakers = sorted({s for _, s, _ in audio})
    out = []
    for r in range(count):
        words = int(rng.integers(WORDS[0], WORDS[1] + 1))
        digits = rng.choice(sorted(digits_allowed), size=words, replace=False)
        one = r % 2 == 0
        speaker = speakers[int(rng.integers(len(speakers)))]
        parts = []
        for d in digits:
            s = speaker if one else speakers[int(rng.integers(len(speakers)))]
            i = int(rng.choice(list(indices)))
            parts.append((int(d), s, audio[(int(d), s, i)]))
        out.append(join(parts, rng, rate))
    return out


def evaluate(task):
    """Worker: plaintext spotting of one keyword over every test recording."""
    keyword, model, filler, features, glue = task
    composite, layout = compose(model, filler, **glue)
    return keyword, [spot(composite, layout, x) for x in features]


def summarise(decisions, recordings, words_frames) -> dict:
    """Per keyword: detection rate, false alarms, boundary errors (frames)."""
    out = {}
    for k, spots in decisions.items():
        hits, misses, false_alarms, wrong_place, errors = 0, 0, 0, 0, []
        positives = 0
        for s, rec, frames in zip(spots, recordings, words_frames):
            if k in rec.digits:
                positives += 1
                first, last = frames[rec.digits.index(k)]
                if s.found and s.start <= last and s.end >= first:
                    hits += 1
                    errors += [abs(s.start - first), abs(s.end - last)]
                elif s.found:
                    wrong_place += 1
                else:
                    misses += 1
            elif s.found:
                false_alarms += 1
        negatives = len(recordings) - positives
        out[DIGIT_WORDS[k]] = {
            "positives": positives,
            "negatives": negatives,
            "detected": hits,
            "detection_rate": hits / positives if positives else None,
            "missed": misses,
            "found_elsewhere": wrong_place,
            "false_alarms": false_alarms,
            "false_alarm_rate": false_alarms / negatives if negatives else None,
            "boundary_error_mean": float(np.mean(errors)) if errors else None,
            "boundary_error_median": float(np.median(errors)) if errors else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fsdd", nargs="?", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=_common.BUNDLED)
    parser.add_argument("--wav-dir", type=Path, default=None)
    parser.add_argument("--recordings", type=int, default=TEST_RECORDINGS)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--dry-run", action="store_true", help="evaluate, write nothing")
    args = parser.parse_args(argv)
    fsdd = _common.fsdd_folder(parser, args)
    started = time.perf_counter()
    rate = recipe.CONTINUOUS_PIPELINE.sample_rate
    print(f"FSDD: {fsdd}")
    audio = load_fsdd(fsdd, rate)
    test = build(audio, TEST_INDICES, range(10), args.recordings, np.random.default_rng(SEED), rate)
    print(f"built {len(test)} test recordings; training spotting's models ...")
    train = {key: x for key, x in audio.items() if key[2] in TRAIN_INDICES}
    trained = recipe.train_spotting(train, np.random.default_rng(SEED + 1))
    pipeline, glue = trained["spotting_pipeline"], trained["glue"]
    features = [pipeline.features(r.samples) for r in test]
    print("plaintext spotting ...")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        tasks = [
            (k, trained["keywords"][k], trained["fillers"][k], features, glue) for k in range(10)
        ]
        decisions = dict(pool.map(evaluate, tasks))
    frames = [[word_frames(a, b, pipeline.hop_length) for a, b in r.spans] for r in test]
    results = summarise(decisions, test, frames)
    rates = [v["detection_rate"] for v in results.values()]
    fas = [v["false_alarm_rate"] for v in results.values()]
    errs = [v["boundary_error_mean"] for v in results.values() if v["boundary_error_mean"]]
    overall = {
        "detection_rate": float(np.mean(rates)),
        "false_alarm_rate": float(np.mean(fas)),
        "boundary_error_mean": float(np.mean(errs)),
    }
    print(json.dumps(results, indent=1))
    print(json.dumps(overall))
    if args.dry_run:
        return 0
    write(args, test, frames, trained, results, overall)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


def write(args, test, frames, trained, results, overall) -> None:
    out = args.out
    pipeline, glue = trained["spotting_pipeline"], trained["glue"]
    out.mkdir(parents=True, exist_ok=True)
    statics = [pipeline.extract(r.samples)[:, :STATIC_MFCC] for r in test]
    words = max(len(r.digits) for r in test)
    digits = np.full((len(test), words), -1, dtype=np.int8)
    bounds = np.full((len(test), words, 2), -1, dtype=np.int32)
    speakers = np.full((len(test), words), "", dtype="<U8")
    for i, r in enumerate(test):
        digits[i, : len(r.digits)] = r.digits
        bounds[i, : len(r.digits)] = frames[i]
        speakers[i, : len(r.digits)] = r.speakers
    with open(out / "continuous_test.npz", "wb") as fh:
        np.savez_compressed(
            fh,
            mfcc=np.concatenate(statics).astype(np.float32),
            lengths=np.array([len(s) for s in statics], dtype=np.int32),
            digits=digits,
            bounds=bounds,
            speakers=speakers,
        )
    save_models(  # the fillers follow from these (smc_hmm.hmm.spotting.spotting_fillers)
        out / "spotting_keywords_diag.npz",
        [*trained["keywords"], trained["pause"]],
        [*DIGIT_WORDS, PAUSE_LABEL],
        pipeline=pipeline.to_dict(),
    )

    manifest = {
        "source": "Free Spoken Digit Dataset, commit 26eb9aa (five speakers)",
        "test_set": {
            "recordings": len(test),
            "from": "test split (indices 0-4 of every speaker and digit)",
            "words": list(WORDS),
            "distinct_digits_per_recording": True,
            "speakers": "even recordings one speaker, odd ones a mix",
            "pause_seconds": list(PAUSE),
            "edge_seconds": list(EDGE),
            "pause": "Gaussian noise at the neighbouring recordings' noise floor (RMS of "
            "their outer 10 ms)",
            "word_frames": "frame k (centre at sample 80 k) belongs to a word if its centre "
            "lies inside the word's recording",
            "frames": int(sum(len(s) for s in statics)),
            "seed": SEED,
        },
        "keyword_models": {
            "states": recipe.STATES,
            "start_states": recipe.START_STATES,
            "topology": "left to right with skips (a_jj, a_j,j+1, a_j,j+2), the last absorbing",
            "min_covar": recipe.SPOTTING_MIN_COVAR,
            "covariance_type": "diag",
            "training": "smc_hmm.data.recipe.train_spotting on the training split (indices "
            "5-49) of all five speakers: words cut, with "
            f"{recipe.SPOTTING_WORD_PAD} frames of pause, from continuous recordings of one "
            "speaker each, normalised as a whole",
        },
        "fillers": {
            "states": int(trained["fillers"][0].n_states),
            "topology": "state 0 the pause; the other nine keyword models in parallel, "
            "looping through the pause",
        },
        "glue": glue,
        "composite": {
            "form": "F-K loop" if glue["loop"] else "F1-K-F2",
            "states": int(trained["fillers"][0].n_states + trained["keywords"][0].n_states),
        },
        "results": {"per_keyword": results, "overall": overall},
    }
    (out / "continuous_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    notice = out / "NOTICE"
    text = notice.read_text(encoding="utf-8") if notice.exists() else ""
    if CONTINUOUS_NOTICE not in text:
        notice.write_text(text.rstrip("\n") + "\n\n" + CONTINUOUS_NOTICE, encoding="utf-8")
    if args.wav_dir is not None:
        from scipy.io import wavfile

        args.wav_dir.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(test):
            name = f"{i:03d}_" + "-".join(DIGIT_WORDS[d] for d in r.digits) + ".wav"
            wavfile.write(
                args.wav_dir / name, pipeline.sample_rate, (r.samples * 32767).astype(np.int16)
            )


if __name__ == "__main__":
    sys.exit(main())
