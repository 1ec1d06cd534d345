#!/usr/bin/env python3
"""Regenerate the bundled speaker models and test set in ``smc_hmm/data/fsdd/``.

From the 2,500 Free Spoken Digit Dataset recordings (five speakers, digits 0-9, indices
0-49; CC BY-SA 4.0) this script

1. computes the features of every recording with the bundled pipeline
   (:func:`smc_hmm.data.load_pipeline`, the keyword models' standardisation) and keeps
   the speaker models' 26 columns (13 MFCCs and their deltas);
2. enrols each speaker text-independently on recordings 0-24 of every digit (250
   utterances) and trains one diagonal Gaussian mixture per speaker (scikit-learn's EM,
   k-means initialisation with a fixed seed), a universal background model (UBM) on all
   enrolment data, and five leave-one-speaker-out UBMs (enrolment data of the other four
   speakers: the background models of verification trials whose impostor the system has
   never heard);
3. evaluates the plaintext decisions on the test recordings 25-49 (1,250 utterances):
   closed-set identification, identification with the UBM rule at several margins, and
   verification (equal error rates, with the all-speaker UBM and leave-one-speaker-out);
4. checks that each GMM stored as an HMM (start and transition rows = the weights) gives
   scikit-learn's log-likelihood (:func:`smc_hmm.hmm.log_likelihood`, the oracle);
5. writes the models, the test set (13 standardised MFCCs as float16, deltas recomputed on
   load), a manifest and the NOTICE paragraph.

Run from the repository root (``docs/speaker.md``)::

    python3 scripts/make_speaker_models.py FSDD_DIR [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import _common  # first: one BLAS thread per process, before numpy
import numpy as np

from smc_hmm.data import FSDD_NAME, load_pipeline
from smc_hmm.data.speakers import (
    SPEAKER_FEATURES,
    SPEAKER_NOTICE,
    SPEAKERS,
    UBM_LABEL,
    equal_error_rate,
    gmm,
    identify,
    mfcc_to_speaker_features,
    speaker_features,
)
from smc_hmm.hmm import log_likelihood
from smc_hmm.hmm.io import save_models

COMPONENTS = 8
REG_COVAR = 1e-2  # scikit-learn adds it to every variance: a floor for short enrolments
SEED = 0
ENROL = range(0, 25)
MARGINS = (0.0, -0.5, -1.0, -1.5, -2.0, -3.0)


def _recordings(root: Path) -> list[tuple[int, str, int, Path]]:
    folder = root / "recordings" if (root / "recordings").is_dir() else root
    out = []
    for path in sorted(folder.iterdir()):
        match = FSDD_NAME.match(path.name)
        if match:
            out.append((int(match[1]), match[2], int(match[3]), path))
    if len(out) != 2500 or {s for _, s, _, _ in out} != set(SPEAKERS):
        sys.exit(f"{folder}: expected the 2,500 FSDD recordings of {', '.join(SPEAKERS)}")
    return out


def _features(path: Path) -> np.ndarray:
    return load_pipeline().features_from_wav(path)


def _fit(x: np.ndarray, components: int):
    from sklearn.mixture import GaussianMixture

    fitted = GaussianMixture(
        components, covariance_type="diag", reg_covar=REG_COVAR, random_state=SEED, max_iter=200
    ).fit(x)
    return fitted, gmm(fitted.weights_, fitted.means_, fitted.covariances_)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fsdd", type=Path, help="the FSDD folder (or its recordings/)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=_common.BUNDLED)
    parser.add_argument("--components", type=int, default=COMPONENTS)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    recordings = _recordings(args.fsdd)
    with ProcessPoolExecutor(args.jobs) as pool:
        full = list(pool.map(_features, [r[3] for r in recordings], chunksize=50))
    feats = [speaker_features(f) for f in full]
    print(f"features of {len(full)} recordings: {time.perf_counter() - start:.0f} s")

    enrol = {s: [] for s in SPEAKERS}
    tests = []  # (speaker index, digit, index, features, 13 standardised MFCCs)
    for (digit, speaker, index, _), x, f in zip(recordings, feats, full):
        if index in ENROL:
            enrol[speaker].append(x)
        else:
            tests.append((SPEAKERS.index(speaker), digit, index, x, f[:, :13]))
    data = {s: np.concatenate(v) for s, v in enrol.items()}
    sk, models = {}, {}
    for s in SPEAKERS:
        sk[s], models[s] = _fit(data[s], args.components)
    sk_ubm, ubm = _fit(np.concatenate([data[s] for s in SPEAKERS]), args.components)
    loso = {h: _fit(np.concatenate([data[s] for s in SPEAKERS if s != h]), args.components)[1]
            for h in SPEAKERS}  # fmt: skip
    print(f"trained {len(SPEAKERS) * 2 + 1} GMMs: {time.perf_counter() - start:.0f} s")

    # the oracle: a GMM stored as an HMM scores like scikit-learn's GaussianMixture
    oracle = max(
        abs(log_likelihood(models[s], x) - sk[s].score_samples(x).sum())
        / abs(sk[s].score_samples(x).sum())
        for s in SPEAKERS
        for _, _, _, x, _ in tests[::50]
    )
    labels = [*SPEAKERS, UBM_LABEL]
    ordered = [models[s] for s in SPEAKERS] + [ubm]
    pipeline = load_pipeline()
    rows, rows16 = [], []
    for k, _, _, x, mfcc in tests:
        x16 = mfcc_to_speaker_features(mfcc.astype(np.float16), pipeline)
        for out, feats_ in ((rows, x), (rows16, x16)):
            scores = [log_likelihood(m, feats_) for m in ordered]
            out.append((k, len(feats_), scores, log_likelihood(loso[SPEAKERS[k]], feats_)))

    out = {}
    for name, rs in (("full_precision", rows), ("bundled_float16", rows16)):
        closed = float(np.mean([int(np.argmax(sc[:-1])) == k for k, _, sc, _ in rs]))
        by_margin = {
            f"{m:g}": float(
                np.mean(
                    [identify(sc, labels, UBM_LABEL, m, t) == SPEAKERS[k] for k, t, sc, _ in rs]
                )
            )
            for m in MARGINS
        }
        # open set: the speaker k is not enrolled (the system of the other four, its UBM
        # trained without k): the right answer is "none"
        rejected = {
            f"{m:g}": float(
                np.mean([max(sc[j] for j in range(5) if j != k) - u_loso <= m * t
                         for k, t, sc, u_loso in rs])
            )
            for m in MARGINS
        }  # fmt: skip
        out[name] = {
            "closed_set_identification": closed,
            "identification_by_margin": by_margin,
            "open_set_rejection_by_margin": rejected,
        }
    target = np.array([(sc[k] - sc[-1]) / t for k, t, sc, _ in rows])
    impostor = np.array([(sc[j] - sc[-1]) / t for k, t, sc, _ in rows for j in range(5) if j != k])
    eer_closed, th_closed = equal_error_rate(target, impostor)
    # leave-one-speaker-out: the impostor's voice is in neither the models nor the UBM
    loso_target, loso_impostor = [], []
    for (k, t, sc, u_loso), (_, _, _, x, _) in zip(rows, tests):
        loso_impostor += [(sc[j] - u_loso) / t for j in range(5) if j != k]
        others = [h for h in SPEAKERS if h != SPEAKERS[k]]
        loso_target += [(sc[k] - log_likelihood(loso[h], x)) / t for h in others]
    eer_loso, th_loso = equal_error_rate(np.array(loso_target), np.array(loso_impostor))

    args.out.mkdir(parents=True, exist_ok=True)
    save_models(args.out / "speaker_models.npz", ordered, labels=labels)
    loso_models = [loso[h] for h in SPEAKERS]
    save_models(args.out / "speaker_loso_ubms.npz", loso_models, labels=list(SPEAKERS))
    lengths = np.array([len(x) for _, _, _, x, _ in tests])
    np.savez_compressed(
        args.out / "speaker_test.npz",
        mfcc=np.concatenate([m for *_, m in tests]).astype(np.float16),
        lengths=lengths,
        speakers=np.array([SPEAKERS[k] for k, *_ in tests]),
        digits=np.array([d for _, d, *_ in tests]),
        indices=np.array([i for _, _, i, *_ in tests]),
    )
    manifest = {
        "source": "Free Spoken Digit Dataset (CC BY-SA 4.0), 5 speakers x 10 digits x 50",
        "features": {"columns": SPEAKER_FEATURES, "what": "13 MFCCs + deltas, bundled pipeline"},
        "enrolment": "recordings 0-24 of every digit (text-independent)",
        "test": "recordings 25-49 of every digit: 1,250 utterances",
        "training": {
            "library": "scikit-learn GaussianMixture",
            "components": args.components,
            "covariance": "diag",
            "reg_covar": REG_COVAR,
            "init": f"k-means, random_state={SEED}",
        },
        "labels": labels,
        "loso_ubms": "speaker_loso_ubms.npz: one UBM per held-out speaker (its label)",
        "results": {
            **out,
            "verification_eer_closed": eer_closed,
            "verification_eer_closed_threshold": th_closed,
            "verification_eer_loso": eer_loso,
            "verification_eer_loso_threshold": th_loso,
            "trials_closed": [len(target), len(impostor)],
            "trials_loso": [len(loso_target), len(loso_impostor)],
            "oracle_max_relative_difference": oracle,
            "test_frames": {"median": float(np.median(lengths)), "max": int(lengths.max())},
        },
    }
    (args.out / "speaker_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    notice = args.out / "NOTICE"
    text = notice.read_text(encoding="utf-8") if notice.exists() else ""
    if SPEAKER_NOTICE not in text:
        notice.write_text(text.rstrip("\n") + "\n\n" + SPEAKER_NOTICE, encoding="utf-8")
    print(json.dumps(manifest["results"], indent=2))
    print(f"done in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
