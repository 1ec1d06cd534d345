#!/usr/bin/env python3
"""Measure what ``smc-hmm keyword``'s background model catches and what it costs.

The keyword command answers "no keyword" unless the best keyword model beats the garbage
model (by default the background model of :mod:`smc_hmm.data.background`) by more than
``--margin`` nats.  This script measures, in plaintext (the secure decision equals the
plaintext one: ``tests/runtime/test_cli.py``), for any keyword models:

1. **the cost in accuracy** on the bundled test split (250 utterances): correct, wrong
   and rejected ("no keyword") with the background, against correct without it;
2. **false accepts on non-speech**: digital silence, -70 dBFS dither, and white, pink and
   brown noise at four levels, each 0.5, 1 and 2 s long (42 signals, drawn from a seed
   other than the model's), plus out-of-family sounds (violet noise, band-limited noise,
   a mains hum, clicks, a sweep): how many are named as a digit;
3. **speech of a held-out speaker** (with ``--fsdd`` or FSDD_DIR): models trained on the
   other four speakers (as ``scripts/make_speech_data.py``'s leave-one-speaker-out, the
   standardisation refitted on them; the background derived from that pipeline), scored
   on the held-out speaker's 500 recordings: correct, wrong and rejected, with and
   without the background.

Re-run it after retraining the models (``--models FILE.npz``; a file's own pipeline is
used) and copy its table into ``docs/speech-models.md``, "Background model"::

    python3 scripts/measure_background.py [--models diag|full|FILE.npz] [--margin M]
        [--fsdd DIR] [--held-out SPEAKER|none] [--jobs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from smc_hmm.data import (
    DIGIT_WORDS,
    fsdd_dir,
    load_bundled_models,
    load_pipeline,
    load_test_utterances,
)
from smc_hmm.data.background import background_model, coloured_noise
from smc_hmm.errors import ConfigError
from smc_hmm.hmm import log_likelihood

#: the seed of the measured signals (the background model's is another)
SIGNAL_SEED = 777
LEVELS_DBFS = (-45, -25, -12, -6)
LENGTHS_S = (0.5, 1.0, 2.0)


def decide(scores, background: float | None, margin: float) -> int | None:
    """The keyword index, or None ("no keyword") when the background comes within
    ``margin`` nats of the best keyword (the protocol's rule)."""
    best = int(np.argmax(scores))
    if background is not None and scores[best] <= background + margin:
        return None
    return best


def tally(score_rows, truths, background_scores, margin) -> dict:
    """correct / wrong / rejected of decisions against the true digits (None: noise)."""
    out = {"correct": 0, "wrong": 0, "rejected": 0, "total": len(truths)}
    for scores, truth, bg in zip(score_rows, truths, background_scores):
        got = decide(scores, bg, margin)
        key = "rejected" if got is None else ("correct" if got == truth else "wrong")
        out[key] += 1
    return out


def non_speech(rate: int) -> dict[str, np.ndarray]:
    """The measured non-speech signals, by name (see the module docstring)."""
    from scipy.signal import butter, sosfilt

    rng = np.random.default_rng(SIGNAL_SEED)
    signals = {}
    for secs in LENGTHS_S:
        n = int(rate * secs)
        signals[f"silence {secs:g} s"] = np.zeros(n)
        signals[f"dither -70 dBFS {secs:g} s"] = rng.normal(size=n) * 10 ** (-70 / 20)
        for colour, beta in (("white", 0.0), ("pink", 1.0), ("brown", 2.0)):
            for db in LEVELS_DBFS:
                x = coloured_noise(n, beta, rng) * 10 ** (db / 20)
                signals[f"{colour} {db} dBFS {secs:g} s"] = np.clip(x, -1, 1)
    t = np.arange(rate) / rate
    clicks = np.zeros(rate)
    clicks[:: rate // 10] = 0.9
    band = sosfilt(
        butter(4, [1000, 2000], btype="band", fs=rate, output="sos"), rng.normal(size=rate)
    )
    others = {
        "other: violet noise": np.clip(coloured_noise(rate, -1.0, rng) * 0.1, -1, 1),
        "other: noise 1-2 kHz": np.clip(0.3 * band, -1, 1),
        "other: 50 Hz hum": 0.3 * sum(np.sin(2 * np.pi * 50 * h * t) / h for h in range(1, 8)),
        "other: clicks": clicks,
        "other: sweep 100-1600 Hz": 0.3 * np.sin(2 * np.pi * (100 + 1500 * t) * t),
    }
    return {**signals, **others}


def _scores(task):
    models, sequences = task
    return [[log_likelihood(m, x) for m in models] for x in sequences]


def measure(models, pipeline, sets: dict, margin: float, jobs: int) -> dict:
    """Decisions with and without the background on every set: name -> (frames, truths,
    the signals' names or None)."""
    background = background_model(pipeline, models[0].covariance_type)
    everything = [*models, background]
    with ProcessPoolExecutor(jobs) as pool:
        scored = dict(zip(sets, pool.map(_scores, [(everything, s[0]) for s in sets.values()])))
    out = {}
    for name, (_, truths, signals) in sets.items():
        rows = np.array(scored[name])
        named = {}
        for signal, row in zip(signals or [], rows):
            got = decide(row[:-1], row[-1], margin)
            named[signal] = None if got is None else DIGIT_WORDS[got]
        out[name] = {
            "without": tally(rows[:, :-1], truths, [None] * len(truths), 0.0),
            "with": tally(rows[:, :-1], truths, rows[:, -1], margin),
            "named": named,
        }
    return out


def held_out_set(fsdd: Path, speaker: str, kind: str, jobs: int):
    """(models trained without ``speaker``, their pipeline, its 500 frames, their digits)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import make_speech_data as make

    from smc_hmm.features import FeaturePipeline

    base = FeaturePipeline()
    utterances = make.load_recordings(fsdd, base)
    pipeline = base.fit_standardisation(u.features for u in utterances if u.speaker != speaker)
    tasks = [
        (f"{kind}/{d}", kind, [pipeline.standardise(u.features) for u in utterances
                              if u.speaker != speaker and u.digit == d], 20, 1.0)
        for d in range(10)
    ]  # fmt: skip
    print(f"training 10 {kind} models without {speaker} ...", file=sys.stderr)
    with ProcessPoolExecutor(jobs) as pool:
        models = [model for _, model, _ in pool.map(make.train, tasks)]
    held = [u for u in utterances if u.speaker == speaker]
    return (
        models,
        pipeline,
        [pipeline.standardise(u.features) for u in held],
        [u.digit for u in held],
    )


def _models(spec: str):
    if spec in ("diag", "full"):
        return (*load_bundled_models(spec), load_pipeline())
    from smc_hmm.features import FeaturePipeline
    from smc_hmm.hmm.io import load_model_pipeline, load_models

    models, labels = load_models(Path(spec))
    stored = load_model_pipeline(Path(spec))
    return models, labels, FeaturePipeline.from_dict(stored) if stored else load_pipeline()


def table(results: dict) -> str:
    """The markdown rows of docs/speech-models.md, "Background model"."""

    def pct(d, key):
        return f"{d[key]}/{d['total']} ({100 * d[key] / d['total']:.1f}%)"

    lines = [
        "| set | without: correct | without: a wrong digit | with: correct | with: a wrong "
        "digit | with: no keyword |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {pct(r['without'], 'correct')} | {pct(r['without'], 'wrong')} | "
            f"{pct(r['with'], 'correct')} | {pct(r['with'], 'wrong')} | "
            f"{pct(r['with'], 'rejected')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="diag", help="diag, full or a model file (.npz)")
    parser.add_argument("--margin", type=float, default=0.0, help="nats (default 0)")
    parser.add_argument("--fsdd", help="the FSDD folder for the held-out speaker (or FSDD_DIR)")
    parser.add_argument("--held-out", default="theo", help="the held-out speaker, or none")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--json", help="also write the results as JSON")
    args = parser.parse_args(argv)
    models, labels, pipeline = _models(args.models)
    utterances = load_test_utterances(standardised=False)
    signals = non_speech(pipeline.sample_rate)
    names = list(signals)
    noise = [n for n in names if not n.startswith("other")]
    others = [n for n in names if n.startswith("other")]
    sets = {
        "test split (250 utterances)": (
            [pipeline.standardise(u.features) for u in utterances],
            [u.digit for u in utterances],
            None,
        ),
        f"silence and noise ({len(noise)} signals)": (
            [pipeline.features(signals[n]) for n in noise],
            [None] * len(noise),
            noise,
        ),
        "out-of-family sounds (5)": (
            [pipeline.features(signals[n]) for n in others],
            [None] * len(others),
            others,
        ),
    }
    results = measure(models, pipeline, sets, args.margin, args.jobs)
    if args.held_out != "none":
        try:
            fsdd = fsdd_dir(args.fsdd)
        except ConfigError as e:
            print(f"held-out speaker skipped: {e}", file=sys.stderr)
        else:
            kind = models[0].covariance_type
            loso, fold, frames, digits = held_out_set(fsdd, args.held_out, kind, args.jobs)
            name = f"held-out speaker {args.held_out} ({len(frames)} utterances)"
            results |= measure(loso, fold, {name: (frames, digits, None)}, args.margin, args.jobs)
    print(f"models {args.models}, margin {args.margin:g} nats")
    print(table(results))
    for name, r in results.items():
        named = {k: v for k, v in r["named"].items() if v is not None}
        if named:
            print(f"{name}: named as digits: {named}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
