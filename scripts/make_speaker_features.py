#!/usr/bin/env python3
"""Regenerate ``smc_hmm/data/fsdd/speaker_features.npz``: utterance-level speaker features.

From the 2,500 Free Spoken Digit Dataset recordings (five speakers, digits 0-9, recording
indices 0-49; CC BY-SA 4.0) this script

1. extracts the MFCC frames of every recording with :mod:`smc_hmm.features` (the keyword
   models' pipeline, raw: no standardisation);
2. keeps, per recording, the mean and the standard deviation over its frames of the 13
   static cepstra c0..c12: 26 numbers (float32);
3. measures the plaintext baseline of the speaker-identification task: per speaker, an
   8-component diagonal-covariance GMM (scikit-learn) on the 39-dimensional frames of
   recordings 0-24, an utterance assigned to the speaker of largest total frame
   log-likelihood, accuracy on recordings 25-49;
4. writes the features, the speaker / digit / index of every recording, the speaker names
   and a JSON metadata member (source, pipeline, the baseline's accuracy) to the archive.

The file serves ``smc-hmm bench lmgmm-speaker`` (``docs/lmgmm.md``); its attribution is in
``smc_hmm/data/fsdd/NOTICE``.  Run from the repository root::

    python3 scripts/make_speaker_features.py FSDD_RECORDINGS_DIR
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _common  # first: one BLAS thread per process, before numpy
import numpy as np

from smc_hmm.data import FSDD_NAME
from smc_hmm.data.speaker_features import FILE_NAME, SPEAKERS
from smc_hmm.features import FeaturePipeline, read_wav

N_STATIC = 13
GMM_COMPONENTS = 8
TRAIN_INDICES = range(0, 25)


def read_recordings(folder: Path) -> list[tuple[int, int, int, np.ndarray]]:
    """(digit, speaker number, index, raw frames (T, 39)) of every FSDD recording."""
    pipeline = FeaturePipeline()
    out = []
    for path in sorted(folder.iterdir()):
        match = FSDD_NAME.match(path.name)
        if not match:
            continue
        if match[2] not in SPEAKERS:
            raise SystemExit(f"unexpected speaker {match[2]!r} in {path.name}")
        signal = read_wav(path, pipeline.sample_rate, pipeline.min_samples)
        frames = pipeline.extract(signal)
        out.append((int(match[1]), SPEAKERS.index(match[2]), int(match[3]), frames))
    if len(out) != 2500:
        raise SystemExit(f"expected the 2500 FSDD recordings, found {len(out)} in {folder}")
    return out


def frame_gmm_accuracy(recordings, seed: int = 0) -> float:
    """The generative baseline: 8-component diagonal GMMs on frames, one per speaker."""
    from sklearn.mixture import GaussianMixture

    train = [r for r in recordings if r[2] in TRAIN_INDICES]
    test = [r for r in recordings if r[2] not in TRAIN_INDICES]
    models = []
    for s in range(len(SPEAKERS)):
        frames = np.concatenate([r[3] for r in train if r[1] == s])
        gmm = GaussianMixture(
            GMM_COMPONENTS, covariance_type="diag", reg_covar=1e-3, random_state=seed
        )
        models.append(gmm.fit(frames))
    hits = [int(np.argmax([m.score_samples(r[3]).sum() for m in models]) == r[1]) for r in test]
    return float(np.mean(hits))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recordings", type=Path, help="the FSDD recordings folder")
    parser.add_argument("--out", type=Path, default=_common.BUNDLED / FILE_NAME)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    recordings = read_recordings(args.recordings)
    statics = [r[3][:, :N_STATIC] for r in recordings]
    features = np.stack([np.concatenate([f.mean(axis=0), f.std(axis=0)]) for f in statics])
    accuracy = frame_gmm_accuracy(recordings)
    metadata = {
        "source": "Free Spoken Digit Dataset, commit 26eb9aa, five speakers, 2500 recordings",
        "license": "CC BY-SA 4.0 (see NOTICE)",
        "features": "per recording: mean (13) then standard deviation (13) over its frames of "
        "the static MFCCs c0..c12 of smc_hmm.features.FeaturePipeline() (raw, unstandardised)",
        "pipeline": FeaturePipeline().to_dict(),
        "split": "train: recording indices 0-24, test: 25-49, of every digit and speaker",
        "frame_gmm": {
            "accuracy": accuracy,
            "components": GMM_COMPONENTS,
            "features": "39-d MFCC frames, diagonal covariances, reg_covar 1e-3, "
            "scikit-learn GaussianMixture(random_state=0)",
        },
        "script": "scripts/make_speaker_features.py",
    }
    np.savez_compressed(
        args.out,
        features=features.astype(np.float32),
        speaker=np.array([r[1] for r in recordings], dtype=np.int8),
        digit=np.array([r[0] for r in recordings], dtype=np.int8),
        index=np.array([r[2] for r in recordings], dtype=np.int8),
        speakers=np.array(SPEAKERS),
        metadata=np.array(json.dumps(metadata, sort_keys=True)),
    )
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes): {features.shape[0]} recordings x "
        f"{features.shape[1]} features; frame-GMM baseline accuracy {accuracy:.4f} "
        f"({time.perf_counter() - start:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
