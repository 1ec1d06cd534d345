"""Thesis 5.1.1, final output stage: Bob releases DP keyword HMMs, Alice recognises locally.

Bob holds the ten digit HMMs of the keyword-recognition task (``docs/speech-models.md``).
Instead of running the secure protocol for every utterance he publishes differentially
private models; Alice classifies her utterances locally with no further privacy cost
(post-processing). This script measures what the privacy costs in accuracy, for two
ways of training the models on the FSDD training split (indices 5-49, 2,250 utterances;
the recordings are not bundled: pass their directory):

1. **bounded-contribution release** (:mod:`smc_hmm.dp.keyword_models`, the default):
   every utterance contributes one bounded vector (its uniform-segmentation state means,
   clipped), the Gaussian mechanism in zCDP releases the sums once, (eps, delta = 1e-6)
   for the whole set of ten models under add/remove of one utterance. The measurements
   are those of ``smc-hmm bench dp-keyword FSDD_DIR`` (:mod:`smc_hmm.bench.dp_keyword`),
   which this script runs (or reads back with ``--from-json``) and draws.
2. **DP Baum-Welch** (:func:`smc_hmm.dp.baum_welch.dp_baum_welch`, paper 000, the
   earlier approach): Laplace noise on the expected counts, every frame bounded, L = 100
   frames per utterance, ``every`` (K = 5 noisy iterations of eps/K, eps-DP) or ``last``
   (plain EM then one noisy iteration: **not** formally DP). ``--baum-welch`` re-runs
   that experiment (its settings below; about 5 minutes with ``--reps 2``) and writes
   its JSON; the figure draws its "every" curve from ``--baum-welch-json`` or, by
   default, from the measurement recorded in ``docs/dp-keyword-models.md``.

DP Baum-Welch settings (all public and data-independent): features standardised by the
bundled pipeline and clipped to |x_i| <= 5 (``--clip``), frames to ||x||_2 <= R = 10
(``--feature-bound``), sequences cut to L = 100 frames (``--max-length``); skeleton:
5-state left-to-right, means 0, variances 1; composition across the ten disjoint
training sets is parallel. Noise from INSECURE seeded streams (reproducible figures).

Run from the repository root::

    python examples/dp_keyword_models.py FSDD_DIR [--releases 5] [--json bench.json]
    python examples/dp_keyword_models.py --from-json bench.json   # redraw only
    python examples/dp_keyword_models.py FSDD_DIR --baum-welch [--reps 2] [--json bw.json]

The figure goes to ``dp-keyword-models.png`` (``--out``; ``docs/dp-keyword-models.png``
is the committed one). See
``docs/dp-keyword-models.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from smc_hmm.dp.baum_welch import dp_baum_welch, dp_em_step, prepare_sequences
from smc_hmm.dp.random import DPRandom
from smc_hmm.hmm import GaussianHMM, baum_welch, log_likelihood

REPO = Path(__file__).resolve().parents[1]
EPS_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0, math.inf)
QUICK_EPS = (1.0, 100.0, 1000.0, math.inf)
BUNDLED_DIAG_ACCURACY = 0.980  # docs/speech-models.md, test split, diag


# --- the core (also used by tests/dp/test_dp_keyword_models.py on synthetic data) ----------


def left_to_right_skeleton(n_states: int, n_features: int) -> GaussianHMM:
    """The public skeleton: left-to-right, means 0, variances 1 (standardised features)."""
    trans = np.zeros((n_states, n_states))
    for j in range(n_states - 1):
        trans[j, j] = trans[j, j + 1] = 0.5
    trans[-1, -1] = 1.0
    return GaussianHMM(
        np.eye(n_states)[0],
        trans,
        np.zeros((n_states, n_features)),
        np.ones((n_states, n_features)),
        "diag",
    )


def clip(x: np.ndarray, bound: float) -> np.ndarray:
    """The declared per-coordinate clip |x_i| <= bound."""
    return np.clip(np.asarray(x, dtype=float), -bound, bound)


def plain_models(
    train: Mapping[str, Sequence[np.ndarray]],
    *,
    n_states: int,
    max_length: int,
    feature_bound: float,
    n_iter: int,
    tol: float | None = None,
) -> dict[str, GaussianHMM]:
    """Non-private models from the same skeleton on the same prepared (clipped, truncated)
    data: eps = inf. ``tol=None`` runs exactly ``n_iter`` iterations."""
    out = {}
    for label, seqs in train.items():
        skel = left_to_right_skeleton(n_states, seqs[0].shape[1])
        prepared = prepare_sequences(
            skel, seqs, max_length, long_sequences="truncate", feature_bound=feature_bound
        )
        kw = {} if tol is None else {"tol": tol}
        out[label] = baum_welch(skel, prepared, n_iter=n_iter, **kw).model
    return out


def dp_models(
    train: Mapping[str, Sequence[np.ndarray]],
    eps: float,
    *,
    mode: str = "every",
    n_states: int = 5,
    n_iter: int = 5,
    max_length: int = 100,
    feature_bound: float = 10.0,
    rng: DPRandom | None = None,
    converged: Mapping[str, GaussianHMM] | None = None,
) -> tuple[dict[str, GaussianHMM], float]:
    """Bob's release: one DP model per label and the total epsilon of the whole set (the
    max over labels: disjoint training sets, parallel composition).

    ``mode="every"``: :func:`dp_baum_welch` from the skeleton. ``mode="last"``: one
    :func:`dp_em_step` with the whole eps from the plain-EM models ``converged`` (computed
    once for every eps; identical to ``dp_baum_welch(mode="last")``).
    """
    if mode not in ("every", "last"):
        raise ValueError(f"mode must be 'every' or 'last', got {mode!r}")
    if mode == "last" and converged is None:
        raise ValueError("mode='last' needs the converged plain models")
    models, spent = {}, []
    for label, seqs in train.items():
        options = dict(
            max_length=max_length,
            long_sequences="truncate",
            feature_bound=feature_bound,
            rng=rng,
        )
        if mode == "every":
            skel = left_to_right_skeleton(n_states, seqs[0].shape[1])
            res = dp_baum_welch(skel, seqs, eps, mode="every", n_iter=n_iter, **options)
        else:
            res = dp_em_step(converged[label], seqs, eps, **options)
        models[label] = res.model
        spent.append(res.epsilon)
    return models, max(spent)


def accuracy(models: Mapping[str, GaussianHMM], test: Sequence[tuple[np.ndarray, str]]) -> float:
    """Fraction of test utterances whose highest-likelihood model carries their label."""
    labels = list(models)
    hits = 0
    for x, label in test:
        scores = [log_likelihood(models[k], x) for k in labels]
        hits += labels[int(np.argmax(scores))] == label
    return hits / len(test)


# --- speech data ------------------------------------------------------------------------


def _speech_script():
    """``scripts/make_speech_data.py`` as a module (its naming rule and test split)."""
    path = REPO / "scripts" / "make_speech_data.py"
    spec = importlib.util.spec_from_file_location("make_speech_data", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_speech_data", module)  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


def _recordings_dir(fsdd: Path) -> Path:
    """The folder of WAVs: ``fsdd`` itself or its ``recordings/`` subfolder."""
    folder = fsdd / "recordings" if (fsdd / "recordings").is_dir() else fsdd
    if not any(folder.glob("*.wav")):
        sys.exit(f"no FSDD recordings in {fsdd}: the training data are not bundled")
    return folder


def load_training(fsdd: Path, indices: range, clip_bound: float) -> dict[str, list[np.ndarray]]:
    """Standardised, clipped training features per digit word from the FSDD recordings."""
    from smc_hmm.data import DIGIT_WORDS, load_pipeline
    from smc_hmm.features import FeaturePipeline, read_wav

    script = _speech_script()
    pipeline = load_pipeline()
    base = FeaturePipeline()
    train: dict[str, list[np.ndarray]] = {w: [] for w in DIGIT_WORDS}
    paths = sorted(_recordings_dir(fsdd).glob("*.wav"))
    for path in paths:
        match = script._NAME.match(path.name)
        if not match:
            continue
        digit, index = int(match[1]), int(match[3])
        if index in script.TEST_INDICES or index not in indices:
            continue
        raw = base.extract(read_wav(path, base.sample_rate, base.min_samples))
        train[DIGIT_WORDS[digit]].append(clip(pipeline.standardise(raw), clip_bound))
    return train


def load_test(clip_bound: float) -> list[tuple[np.ndarray, str]]:
    from smc_hmm.data import load_test_utterances

    return [(clip(u.features, clip_bound), u.label) for u in load_test_utterances()]


# --- the DP Baum-Welch experiment -------------------------------------------------------


def run_baum_welch(args: argparse.Namespace) -> dict:
    from smc_hmm.data import load_bundled_models

    fsdd = _recordings_dir(Path(args.fsdd))
    t0 = time.perf_counter()
    indices = range(5, 15) if args.quick else range(5, 50)
    train = load_training(fsdd, indices, args.clip)
    test = load_test(args.clip)
    n_train = {k: len(v) for k, v in train.items()}
    print(
        f"features: {sum(n_train.values())} training utterances, {len(test)} test "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    bundled, labels = load_bundled_models("diag")
    bundled_acc = accuracy(dict(zip(labels, bundled, strict=True)), load_test(math.inf))
    common = dict(
        n_states=args.states, max_length=args.max_length, feature_bound=args.feature_bound
    )
    eps_grid = QUICK_EPS if args.quick else EPS_GRID
    reps = args.reps or (1 if args.quick else 3)
    converged = plain_models(train, n_iter=20, tol=1.0, **common)
    plain_k = plain_models(train, n_iter=args.iterations, **common)
    results: dict[str, dict[str, list[float]]] = {"every": {}, "last": {}}
    for i, eps in enumerate(eps_grid):
        key = "inf" if math.isinf(eps) else f"{eps:g}"
        for mode in ("every", "last"):
            if math.isinf(eps):
                acc = accuracy(plain_k if mode == "every" else converged, test)
                results[mode][key] = [acc]
            else:
                accs = []
                for rep in range(reps):
                    rng = DPRandom.insecure_seeded(
                        args.seed + 1000 * i + 10 * rep + (mode == "last")
                    )
                    models, spent = dp_models(
                        train,
                        eps,
                        mode=mode,
                        n_iter=args.iterations,
                        rng=rng,
                        converged=converged,
                        **common,
                    )
                    assert math.isclose(spent, eps, rel_tol=1e-9)
                    accs.append(accuracy(models, test))
                results[mode][key] = accs
            accs = results[mode][key]
            print(
                f"  eps {key:>6} {mode:5}: accuracy {np.mean(accs):6.1%} "
                f"(min {min(accs):.1%}, max {max(accs):.1%}, {len(accs)} run(s)) "
                f"[{time.perf_counter() - t0:.0f} s]",
                flush=True,
            )
    return {
        "eps": [("inf" if math.isinf(e) else e) for e in eps_grid],
        "accuracy": results,
        "bundled_diag_accuracy": bundled_acc,
        "chance": 0.1,
        "reps": reps,
        "quick": bool(args.quick),
        "training_utterances": n_train,
        "test_utterances": len(test),
        "settings": {
            "states": args.states,
            "iterations_every": args.iterations,
            "last_plain_em": "20 iterations at most, tol 1.0",
            "clip": args.clip,
            "feature_bound": args.feature_bound,
            "max_length": args.max_length,
            "neighbouring": "add_remove",
            "seed": args.seed,
            "randomness": "INSECURE seeded (reproducible)",
        },
        "seconds": time.perf_counter() - t0,
    }


def print_table(res: dict) -> None:
    print(
        f"\naccuracy on the {res['test_utterances']} test utterances (mean over "
        f"{res['reps']} run(s)); bundled non-private diag models: "
        f"{res['bundled_diag_accuracy']:.1%}"
    )
    keys = ["inf" if e == "inf" else f"{e:g}" for e in res["eps"]]
    print("| mode | " + " | ".join(f"eps {k}" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for mode, name in (
        ("every", "every iteration (eps-DP)"),
        ("last", "last iteration (not formally DP)"),
    ):
        cells = [f"{np.mean(res['accuracy'][mode][k]):.1%}" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")


def secure_summary(report: dict) -> dict:
    """Agreement with the plaintext decision, median seconds and bytes per utterance of
    a ``smc-hmm demo keyword --json`` report (its runs use the bundled diag models)."""
    runs = report["runs"]
    return {
        "utterances": len(runs),
        "agree": sum(r["secure"] == r["plain"] for r in runs),
        "median_seconds": float(np.median([r["seconds"] for r in runs])),
        "median_megabytes": float(np.median([r["cost"]["totals"]["bytes"] for r in runs]) / 1e6),
        "mode": report["mode"],
    }


# --- the figure --------------------------------------------------------------------------

EARLIER_BAUM_WELCH = {
    0.1: 0.100,
    1.0: 0.104,
    10.0: 0.170,
    100.0: 0.100,
    1000.0: 0.434,
    10000.0: 0.954,
}
"""DP Baum-Welch, noise in every iteration (eps-DP): the measurement recorded in
``docs/dp-keyword-models.md`` (``--baum-welch --reps 2``, 2 runs per eps)."""


def plot(
    bench: dict, path: Path, baum_welch: dict | None = None, secure: dict | None = None
) -> None:
    """Accuracy against eps: the bounded-contribution release (mean, min-max band over its
    releases), DP Baum-Welch, the bundled non-private models, the secure protocol (a
    :func:`secure_summary`), chance and the targets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    accuracy = bench["accuracy"]
    eps = sorted(float(e) for e in accuracy)
    means = [np.mean(accuracy[f"{e:g}"]) for e in eps]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.fill_between(
        eps,
        [min(accuracy[f"{e:g}"]) for e in eps],
        [max(accuracy[f"{e:g}"]) for e in eps],
        color="C0",
        alpha=0.2,
    )
    releases = len(accuracy[f"{eps[0]:g}"])
    label = f"bounded-contribution release, (eps, 1e-6)-DP (mean of {releases})"
    ax.plot(eps, means, "o-", color="C0", label=label)
    if baum_welch is not None:
        finite = [e for e in baum_welch["eps"] if e != "inf"]
        bw = {e: np.mean(baum_welch["accuracy"]["every"][f"{e:g}"]) for e in finite}
    else:
        bw = EARLIER_BAUM_WELCH
    label = "DP Baum-Welch, Laplace, every iteration (eps-DP)"
    ax.plot(list(bw), list(bw.values()), "s--", color="C3", label=label)
    diag = bench["bundled_diag_accuracy"]
    ax.axhline(diag, color="k", ls="--", lw=1, label=f"bundled non-private diag models: {diag:.1%}")
    full = bench.get("bundled_full_accuracy_manifest")
    if full:
        ax.axhline(
            full, color="k", ls=":", lw=1, label=f"bundled non-private full models: {full:.1%}"
        )
    if secure is not None:
        ax.axhline(
            diag,
            color="C2",
            ls=(0, (1, 3)),
            lw=2,
            label=(
                f"secure protocol (bundled diag models; {secure['agree']}/"
                f"{secure['utterances']} decisions checked equal): "
                f"{secure['median_seconds']:.0f} s, "
                f"{secure['median_megabytes']:.1f} MB per utterance"
            ),
        )
    ax.axhline(0.1, color="grey", ls="-.", lw=1, label="chance (10%)")
    ax.plot([3.0, 10.0], [0.6, 0.9], "v", color="C2", ms=9, ls="none", label="targets (eps 3, 10)")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("epsilon (whole set of ten models; delta = 1e-6 for the Gaussian release)")
    ax.set_ylabel("test accuracy (250 utterances)")
    ax.set_title("DP keyword HMMs on FSDD digits (5-state left-to-right, diagonal)")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "fsdd", nargs="?", help="the FSDD recordings or their parent (default: $FSDD_DIR)"
    )
    parser.add_argument("--from-json", type=Path, help="draw a `bench dp-keyword --json` file")
    parser.add_argument("--releases", type=int, default=5, help="releases per eps (5)")
    parser.add_argument("--eps", default=None, help="comma-separated eps (the bench's grid)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("dp-keyword-models.png"),
        help="the figure (default: here; docs/dp-keyword-models.png is the committed one)",
    )
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument("--baum-welch-json", type=Path, help="a --baum-welch JSON to draw")
    parser.add_argument("--baum-welch", action="store_true", help="run DP Baum-Welch instead")
    parser.add_argument(
        "--secure",
        type=Path,
        help="a `smc-hmm demo keyword --json` report: draw the secure protocol beside",
    )
    bw = parser.add_argument_group("DP Baum-Welch (--baum-welch)")
    bw.add_argument("--quick", action="store_true", help="small run (~1 minute)")
    bw.add_argument("--reps", type=int, default=None, help="DP runs per eps (3; quick 1)")
    bw.add_argument("--iterations", type=int, default=5, help="noisy iterations (every)")
    bw.add_argument("--states", type=int, default=5)
    bw.add_argument("--max-length", type=int, default=100, help="declared L (frames)")
    bw.add_argument("--feature-bound", type=float, default=10.0, help="L2 bound R")
    bw.add_argument("--clip", type=float, default=5.0, help="per-coordinate clip")
    bw.add_argument("--seed", type=int, default=511)
    args = parser.parse_args(argv)
    if args.baum_welch:
        args.fsdd = args.fsdd or os.environ.get("FSDD_DIR")
        if not args.fsdd:
            parser.error("--baum-welch needs FSDD_DIR (argument or variable)")
        res = run_baum_welch(args)
        print_table(res)
        if args.json:
            args.json.write_text(json.dumps(res, indent=2) + "\n")
            print(f"wrote {args.json}")
        return 0
    if args.from_json:
        bench = json.loads(args.from_json.read_text())
    elif args.fsdd or os.environ.get("FSDD_DIR"):
        from smc_hmm.bench.dp_keyword import DEFAULT_EPS, _eps_list
        from smc_hmm.bench.dp_keyword import run as run_bench
        from smc_hmm.data import fsdd_dir

        fsdd = args.fsdd or fsdd_dir()
        result = run_bench(fsdd, _eps_list(args.eps or DEFAULT_EPS), args.releases)
        bench = result.to_dict()
        if args.json:
            result.write_json(str(args.json))
            print(f"wrote {args.json}")
    else:
        parser.error("give FSDD_DIR (argument or variable) or --from-json")
    baum_welch = json.loads(args.baum_welch_json.read_text()) if args.baum_welch_json else None
    secure = secure_summary(json.loads(args.secure.read_text())) if args.secure else None
    plot(bench, args.out, baum_welch, secure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
