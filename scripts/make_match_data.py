#!/usr/bin/env python3
"""Regenerate the bundled audio-matching data in ``smc_hmm/data/fsdd/`` (``docs/matching.md``).

From the 2,500 Free Spoken Digit Dataset recordings (CC BY-SA 4.0) this script

1. draws the collection: 200 recordings at random (seeded), and computes their mel-band
   magnitudes (:class:`smc_hmm.data.match.Spectrogram`) -> ``match_collection.npz``;
2. cuts the queries: ``--queries`` excerpts of 0.25-0.5 s (uniform length, uniform start)
   from recordings of the collection long enough to hold them, and as many from
   recordings *not* in the collection (false matches); each excerpt clean and with white
   Gaussian noise at 20, 10 and 0 dB SNR (relative to the excerpt's own power), every
   version with its own noise and a random gain of -20..+20 dB -> ``match_queries.npz``
   (magnitudes as float16);
3. calibrates the public default threshold of the exact mode and of the approximate
   mode's strides 2-4 on *separate* excerpts (another random stream): the largest
   threshold that keeps ``--accept`` of the 10 dB in-collection excerpts the argmax names
   correctly;
4. writes ``match_manifest.json`` (sources, parameters, thresholds, calibration) and adds
   the matching paragraph to ``NOTICE``.

``--compare-features N`` instead measures why the feature is what it is: the float argmax's
top-1 on N excerpts per SNR with MFCCs, log-mel values and mel magnitudes, normalised per
frame or per window (``docs/matching.md``, "The feature").

The recordings are not bundled: get the FSDD (public repository
``Jakobovski/free-spoken-digit-dataset``, commit 26eb9aa; see ``docs/speech-models.md``,
"Regenerating") and run from the repository root::

    python3 scripts/make_match_data.py FSDD_FOLDER        # or set FSDD_DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from smc_hmm.data import fsdd_dir
from smc_hmm.data.match import (
    CLEAN,
    COLLECTION_FILE,
    MANIFEST_FILE,
    MATCH_NOTICE,
    QUERIES_FILE,
    Collection,
    Quantisation,
    Spectrogram,
    match,
)
from smc_hmm.features import FeaturePipeline, mfcc_numpy, read_wav

REPO = Path(__file__).resolve().parents[1]
SNRS = (CLEAN, "20", "10", "0")
MIN_SECONDS, MAX_SECONDS = 0.25, 0.5
GAIN_DB = 20.0
#: the strides whose threshold is calibrated (1: the exact mode)
STRIDES = (1, 2, 3, 4)


def excerpts(rng, signals: dict[str, np.ndarray], names: list[str], count: int, rate: int):
    """``count`` (name, start, samples) excerpts of 0.25-0.5 s from recordings long enough."""
    out = []
    for _ in range(count):
        samples = int(round(rng.uniform(MIN_SECONDS, MAX_SECONDS) * rate))
        fits = [n for n in names if signals[n].size >= samples]
        name = fits[int(rng.integers(len(fits)))]
        start = int(rng.integers(0, signals[name].size - samples + 1))
        out.append((name, start, samples))
    return out


def noisy(rng, clean: np.ndarray, snr: str) -> np.ndarray:
    """The excerpt with white Gaussian noise at ``snr`` dB (none for ``clean``) and a
    random gain of -20..+20 dB."""
    signal = clean
    if snr != CLEAN:
        power = float(np.mean(clean**2))
        sigma = np.sqrt(power / 10 ** (float(snr) / 10))
        signal = clean + rng.standard_normal(clean.size) * sigma
    return signal * 10 ** (rng.uniform(-GAIN_DB, GAIN_DB) / 20)


def query_rows(rng, spec, signals, cuts, inside: dict[str, int] | None):
    rows = []
    for name, start, samples in cuts:
        clean = signals[name][start : start + samples]
        for snr in SNRS:
            rec = inside.get(name, -1) if inside is not None else -1
            rows.append(
                {
                    "frames": spec.frames(noisy(rng, clean, snr)),
                    "snr": snr,
                    "inside": rec >= 0,
                    "recording": rec,
                    "offset": start / spec.hop_length,
                    "source": name,
                    "start": start,
                    "samples": samples,
                }
            )
    return rows


def save_queries(path: Path, rows) -> None:
    np.savez_compressed(
        path,
        frames=np.concatenate([r["frames"] for r in rows]).astype(np.float16),
        lengths=np.array([r["frames"].shape[0] for r in rows], dtype=np.int64),
        snr=np.array([r["snr"] for r in rows]),
        inside=np.array([r["inside"] for r in rows]),
        recording=np.array([r["recording"] for r in rows], dtype=np.int64),
        offset=np.array([r["offset"] for r in rows]),
        source=np.array([r["source"] for r in rows]),
        start=np.array([r["start"] for r in rows], dtype=np.int64),
        samples=np.array([r["samples"] for r in rows], dtype=np.int64),
    )


def best_correlations(rows, collection, quant, stride: int = 1):
    """Per query: (the best candidate's normalised correlation -- per window, the mean of
    a pooled candidate's ``stride`` windows --, whether it names the source recording)."""
    out = []
    for r in rows:
        frames = r["frames"].astype(np.float16).astype(np.float64)  # as bundled
        res = match(frames, collection, quant=quant, threshold=-2.0, stride=stride)
        unit = quant.score_unit(frames.shape[0], collection.bands) * stride
        out.append((res.value / unit, res.recording == r["recording"]))
    return out


def calibrate(inside_10db, accept: float) -> float:
    """The largest threshold (to 0.001) that keeps ``accept`` of the 10 dB in-collection
    excerpts the argmax names correctly (a threshold turns the others away)."""
    right = sorted(c for c, ok in inside_10db if ok)
    need = int(np.ceil(accept * len(right)))
    return float(np.floor(right[len(right) - need] * 1000 - 1e-9) / 1000)


# -- the feature comparison (--compare-features): why mel magnitudes, normalised per window ------


def _mfcc(signal: np.ndarray) -> np.ndarray:
    """12 MFCCs (c1..c12, 10 ms frames) of the keyword pipeline."""
    return mfcc_numpy(signal, FeaturePipeline())[:, 1:]


def _log_mel(signal: np.ndarray) -> np.ndarray:
    spec = Spectrogram(exponent=1.0)
    return np.log(spec.frames(signal) + 1e-10)


FEATURES = {
    # name: (features of a signal, normalisation: "frame" or "window")
    "MFCC c1-c12, 10 ms, per frame": (_mfcc, "frame"),
    "log mel (24 bands, 20 ms), per frame": (_log_mel, "frame"),
    "log mel (24 bands, 20 ms), per window": (_log_mel, "window"),
    "mel magnitude (24 bands, 20 ms), per window": (lambda y: Spectrogram().frames(y), "window"),
}


def _unit_frames(x: np.ndarray) -> np.ndarray:
    centred = x - x.mean(1, keepdims=True)
    return centred / (np.linalg.norm(centred, axis=1, keepdims=True) + 1e-12)


def _float_best(query: np.ndarray, recordings: list[np.ndarray], norm: str) -> int:
    """The recording of the best window by normalised correlation (floats)."""
    best, where = -np.inf, -1
    if norm == "frame":
        q = _unit_frames(query)
    else:
        q = query - query.mean(0, keepdims=True)
        q = q / (np.linalg.norm(q) + 1e-12)
    for r, x in enumerate(recordings):
        if len(x) < len(q):
            continue
        windows = np.lib.stride_tricks.sliding_window_view(x, q.shape)[:, 0]
        if norm == "frame":
            scores = np.einsum("oij,ij->o", windows, q)
        else:
            centred = windows - windows.mean(axis=1, keepdims=True)
            norms = np.linalg.norm(centred, axis=(1, 2)) + 1e-12
            scores = np.einsum("oij,ij->o", centred, q) / norms
        if scores.max() > best:
            best, where = float(scores.max()), r
    return where


def compare_features(rng, signals, inside_names, count: int) -> dict:
    """Top-1 of the float argmax with each feature on ``count`` in-collection excerpts per
    SNR (the same excerpts and noise for every feature)."""
    cuts = excerpts(rng, signals, inside_names, count, 8000)
    noisy_cuts = {snr: [noisy(rng, signals[n][a : a + k], snr) for n, a, k in cuts] for snr in SNRS}
    out = {}
    for name, (features, norm) in FEATURES.items():
        recordings = [features(signals[n]) for n in inside_names]
        if norm == "frame":  # every frame of the collection centred and of unit norm too
            recordings = [_unit_frames(x) for x in recordings]
        row = {}
        for snr in SNRS:
            hits = [
                _float_best(features(y), recordings, norm) == inside_names.index(n)
                for y, (n, _, _) in zip(noisy_cuts[snr], cuts)
            ]
            row[snr] = float(np.mean(hits))
        out[name] = row
        print(f"{name:48s}", "  ".join(f"{snr}: {row[snr]:.1%}" for snr in SNRS), flush=True)
    return out


def calibrate_thresholds(cal_in, cal_out, collection, quant, accept: float):
    """Per stride, the threshold (``calibrate``) and how it does at 10 dB."""
    thresholds, calibration = {}, {}
    for stride in STRIDES:
        at_10 = [r for r in cal_in if r["snr"] == "10"]
        inside_10 = best_correlations(at_10, collection, quant, stride)
        at_10 = [r for r in cal_out if r["snr"] == "10"]
        outside_10 = best_correlations(at_10, collection, quant, stride)
        tau = calibrate(inside_10, accept)
        thresholds[str(stride)] = tau
        calibration[str(stride)] = {
            "argmax_right_10db": float(np.mean([ok for _, ok in inside_10])),
            "accepted_right_10db": float(np.mean([c > tau and ok for c, ok in inside_10])),
            "false_match_10db": float(np.mean([c > tau for c, _ in outside_10])),
        }
    return thresholds, calibration


def manifest(args, collection, spec, quant, thresholds, calibration) -> dict:
    return {
        "source": "Free Spoken Digit Dataset (CC BY-SA 4.0), commit 26eb9aa, 2,500 recordings",
        "script": "scripts/make_match_data.py",
        "seed": args.seed,
        "collection": {"recordings": len(collection), "frames": sum(collection.lengths)},
        "queries": {
            "per_kind": args.queries,
            "snr_db": list(SNRS),
            "seconds": [MIN_SECONDS, MAX_SECONDS],
            "gain_db": [-GAIN_DB, GAIN_DB],
            "noise": "white Gaussian, SNR relative to the excerpt's own power",
            "outside": "excerpts of recordings not in the collection (same speakers and digits)",
        },
        "spectrogram": spec.to_dict(),
        "quantisation": quant.to_dict(),
        "thresholds": thresholds,
        "calibration": {
            "excerpts_per_kind": args.calibration,
            "rule": f"per stride (1: exact; 2, 3, 4: pooled approximate), the largest "
            f"threshold keeping {args.accept:.0%} of the 10 dB in-collection excerpts the "
            "argmax names correctly (a separate random stream of excerpts)",
            "per_stride": calibration,
        },
    }


def write(out: Path, collection, rows, data: dict) -> None:
    """The collection, the queries, the manifest and the NOTICE paragraph in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    collection.save(out / COLLECTION_FILE)
    save_queries(out / QUERIES_FILE, rows)
    (out / MANIFEST_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    notice = out / "NOTICE"
    text = notice.read_text(encoding="utf-8") if notice.exists() else ""
    if MATCH_NOTICE not in text:
        notice.write_text(text.rstrip("\n") + "\n\n" + MATCH_NOTICE, encoding="utf-8")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fsdd", nargs="?", help="the FSDD folder (holding recordings/); or FSDD_DIR")
    p.add_argument("--out", type=Path, default=REPO / "smc_hmm" / "data" / "fsdd")
    p.add_argument("--recordings", type=int, default=200, help="size of the collection")
    p.add_argument("--queries", type=int, default=200, help="excerpts per kind (in / not in)")
    p.add_argument("--calibration", type=int, default=200, help="calibration excerpts per kind")
    p.add_argument("--accept", type=float, default=0.97, help="10 dB acceptance to calibrate")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument(
        "--compare-features",
        type=int,
        metavar="N",
        default=0,
        help="only compare features: the float argmax's top-1 on N excerpts per SNR",
    )
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    folder = fsdd_dir(args.fsdd) / "recordings"
    spec, quant = Spectrogram(), Quantisation()
    names = sorted(p.stem for p in folder.glob("*.wav"))
    signals = {n: read_wav(folder / f"{n}.wav", spec.sample_rate) for n in names}
    rng = np.random.default_rng(args.seed)
    chosen = sorted(rng.choice(len(names), size=args.recordings, replace=False))
    inside_names = [names[i] for i in chosen]
    outside_names = [n for n in names if n not in set(inside_names)]
    if args.compare_features:
        extra = np.random.default_rng(args.seed + 2)
        compare_features(extra, signals, inside_names, args.compare_features)
        return 0
    collection = Collection(inside_names, [spec.frames(signals[n]) for n in inside_names], spec)
    index = {n: i for i, n in enumerate(inside_names)}
    rate = spec.sample_rate
    inside_cuts = excerpts(rng, signals, inside_names, args.queries, rate)
    rows = query_rows(rng, spec, signals, inside_cuts, index)
    outside_cuts = excerpts(rng, signals, outside_names, args.queries, rate)
    rows += query_rows(rng, spec, signals, outside_cuts, None)
    cal = np.random.default_rng(args.seed + 1)
    cal_in_cuts = excerpts(cal, signals, inside_names, args.calibration, rate)
    cal_in = query_rows(cal, spec, signals, cal_in_cuts, index)
    cal_out_cuts = excerpts(cal, signals, outside_names, args.calibration, rate)
    cal_out = query_rows(cal, spec, signals, cal_out_cuts, None)
    thresholds, calibration = calibrate_thresholds(cal_in, cal_out, collection, quant, args.accept)
    write(
        args.out, collection, rows, manifest(args, collection, spec, quant, thresholds, calibration)
    )
    print(json.dumps({"thresholds": thresholds, "calibration": calibration}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
