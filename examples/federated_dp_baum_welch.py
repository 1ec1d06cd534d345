"""Federated DP Baum-Welch: held-out likelihood and recognition accuracy against eps and K.

Two tasks (``docs/aggregate.md``, "Federated DP Baum-Welch"):

1. **Dice HMM** (seed 000's 2-state casino; :func:`smc_hmm.bench.aggregate.hmm_sweep`):
   400 sequences of length 20 shared by K owners; 5 noisy EM iterations of eps/5 from a
   public skeleton.  Curves: federated (the secure sum adds the noise once, so its
   output distribution is that of the centralised DP Baum-Welch on the 400 sequences,
   whatever K), one owner alone (400/K sequences) and every owner adding its own noise
   (no secure sum).  Metrics: held-out log-likelihood per symbol and Viterbi state
   accuracy on 200 fresh sequences.
2. **Keyword speech** (the bundled FSDD digits, Gaussian HMMs over 39-d MFCC frames;
   ``examples/dp_keyword_models.py`` for the pipeline): the owners are the speakers
   (K = 1, 2 or 5 of the five; each holds indices 5-49 of its own digits), one 5-state
   left-to-right diagonal model per digit trained federatedly from the public skeleton
   (5 noisy iterations).  Declared bounds (the bounded-feature sensitivity): every
   standardised coordinate clipped to |x_i| <= 5, every frame to ||x||_2 <= R = 10,
   sequences cut to L = 100 frames, so one utterance moves the counts by at most
   L (occupancy), L sqrt(39) R (mean sums) and L R^2 (diagonal second moments) in L1
   (:func:`smc_hmm.dp.baum_welch.count_sensitivities`).  The ten digit models are trained
   on disjoint data (parallel composition): the set is eps-DP per utterance under
   add/remove.  Accuracy on the 250 bundled test utterances (all five speakers).

The sweeps use :func:`smc_hmm.dp.federated.plain_aggregate` (the secure protocol's output
distribution, up to 2^-24 rounding; ``tests/dp/test_federated.py`` checks that the
secure path gives the same model); ``--secure`` also runs one secure federated E-step of
a digit model through the ``dp_sum`` protocol at 2048 bits and reports its cost.

Noise comes from INSECURE seeded streams (reproducible figures).  Run from the
repository root (writes ``aggregate-hmm.png`` here, ``--png docs/aggregate-hmm.png`` the
committed figure)::

    python examples/federated_dp_baum_welch.py [--quick] [--json out.json] [--secure]

The speech part reads the FSDD recordings, which are not bundled: get the Free Spoken
Digit Dataset (github.com/Jakobovski/free-spoken-digit-dataset, CC BY-SA 4.0) and name its
folder with ``--fsdd DIR`` or ``FSDD_DIR=DIR``; without it only the dice part runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from smc_hmm.bench.aggregate import hmm_sweep
from smc_hmm.bench.common import load_average
from smc_hmm.data import fsdd_dir
from smc_hmm.dp.federated import federated_dp_baum_welch
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SPEECH_EPS = (100.0, 1e3, 1e4, 1e5, math.inf)
SPEAKER_SETS = {1: ("george",), 2: ("george", "jackson"), 5: None}


def _keyword_example():
    path = REPO / "examples" / "dp_keyword_models.py"
    spec = importlib.util.spec_from_file_location("dp_keyword_models", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("dp_keyword_models", module)
    spec.loader.exec_module(module)
    return module


def load_by_speaker(fsdd: Path, clip_bound: float) -> dict[str, dict[str, list[np.ndarray]]]:
    """speaker -> digit word -> standardised, clipped training features (indices 5-49)."""
    from smc_hmm.data import DIGIT_WORDS, load_pipeline
    from smc_hmm.features import FeaturePipeline, read_wav

    kw = _keyword_example()
    script = kw._speech_script()
    pipeline, base = load_pipeline(), FeaturePipeline()
    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for path in sorted((fsdd / "recordings").glob("*.wav")):
        match = script._NAME.match(path.name)
        if not match or int(match[3]) in script.TEST_INDICES or int(match[3]) >= 50:
            continue
        raw = base.extract(read_wav(path, base.sample_rate, base.min_samples))
        feats = kw.clip(pipeline.standardise(raw), clip_bound)
        out.setdefault(match[2], {}).setdefault(DIGIT_WORDS[int(match[1])], []).append(feats)
    return out


def speech_sweep(fsdd: Path, *, eps_grid=SPEECH_EPS, n_iter=5, seed=0, quick=False) -> dict:
    kw = _keyword_example()
    t0 = time.perf_counter()
    data = load_by_speaker(fsdd, 5.0)
    test = kw.load_test(5.0)
    print(f"speech: features of {len(data)} speakers loaded ({time.perf_counter() - t0:.0f} s)")
    res: dict = {
        "eps": [("inf" if math.isinf(e) else e) for e in eps_grid],
        "accuracy": {},
        "held_out_ll_per_frame": {},
    }
    speakers_all = sorted(data)
    for k, chosen in SPEAKER_SETS.items():
        speakers = chosen or tuple(speakers_all)
        accs, lls = [], []
        for i, eps in enumerate(eps_grid):
            models = {}
            for word in data[speakers[0]]:
                owners = [data[s][word] for s in speakers]
                skel = kw.left_to_right_skeleton(5, 39)
                fit = federated_dp_baum_welch(
                    skel,
                    owners,
                    1e15 if math.isinf(eps) else eps,
                    max_length=100,
                    n_iter=n_iter,
                    long_sequences="truncate",
                    feature_bound=10.0,
                    rng=DPRandom.insecure_seeded(seed + 100 * k + i),
                )
                models[word] = fit.model
            accs.append(kw.accuracy(models, test))
            from smc_hmm.hmm import log_likelihood

            frames = sum(x.shape[0] for x, _ in test)
            lls.append(sum(log_likelihood(models[label], x) for x, label in test) / frames)
            print(
                f"  K={k} ({', '.join(speakers)}) eps {res['eps'][i]!s:>6}: accuracy "
                f"{accs[-1]:.1%}, held-out LL/frame {lls[-1]:.2f} "
                f"[{time.perf_counter() - t0:.0f} s]",
                flush=True,
            )
            if quick and i >= 2 and k != 5:
                accs += [math.nan] * (len(eps_grid) - i - 1)
                lls += [math.nan] * (len(eps_grid) - i - 1)
                break
        res["accuracy"][k] = accs
        res["held_out_ll_per_frame"][k] = lls
    res["seconds"] = time.perf_counter() - t0
    return res


def secure_step(fsdd_data=None, key_bits=2048) -> dict:
    """One secure federated E-step (dp_sum, 5 speakers) of the digit 'zero' model."""
    import warnings

    from protocols.aggregate import secure_count_aggregator
    from smc_hmm.crypto import generate_keypair
    from smc_hmm.dp.federated import count_bound
    from smc_hmm.errors import InsecureKeyWarning

    kw = _keyword_example()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        keypair = generate_keypair(key_bits, insecure=key_bits < 2048)
    skel = kw.left_to_right_skeleton(5, 39)
    owners = [fsdd_data[s]["zero"] for s in sorted(fsdd_data)]
    agg = secure_count_aggregator(
        keypair,
        max_abs=count_bound(skel, 45, 100, 10.0),
        min_key_bits=min(key_bits, 2048),
        timeout=600,
    )
    t0 = time.perf_counter()
    federated_dp_baum_welch(
        skel,
        owners,
        10.0,
        max_length=100,
        n_iter=1,
        long_sequences="truncate",
        feature_bound=10.0,
        aggregate=agg,
    )
    result = agg.results[0]
    return {
        "key_bits": key_bits,
        "seconds_with_local_e_steps": time.perf_counter() - t0,
        "protocol_elapsed": result.elapsed,
        "totals": result.cost.totals(),
        "length": int(result.outputs["trent"].size),
        "load": os.getloadavg(),
    }


def plot(dice: dict, speech: dict | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = 3 if speech else 2
    fig, axes = plt.subplots(1, ncols, figsize=(5.2 * ncols, 4.0))
    xs = [1e4 if e == "inf" else e for e in dice["eps"]]
    for name, c in dice["curves"].items():
        style = "-" if name.startswith("federated") else ("--" if "alone" in name else ":")
        axes[0].plot(xs, c["ll"], style, marker="o", ms=3, label=name)
        axes[1].plot(xs, c["acc"], style, marker="o", ms=3, label=name)
    for ax, ref in ((axes[0], "ll"), (axes[1], "acc")):
        ax.axhline(dice["true_model"][ref], color="k", lw=0.6, label="true model")
        ax.axhline(dice["skeleton"][ref], color="grey", lw=0.6, ls="--", label="skeleton")
        ax.set_xscale("log")
        ax.set_xlabel("eps (rightmost point: no noise)")
    axes[0].set_ylim(-2.2, -1.7)
    axes[0].set_ylabel("held-out log-likelihood per symbol")
    axes[1].set_ylabel("Viterbi state accuracy")
    axes[0].set_title("dice HMM, 400 sequences in all")
    axes[1].legend(fontsize=6, loc="lower right")
    if speech:
        xs = [1e6 if e == "inf" else e for e in speech["eps"]]
        for k, accs in speech["accuracy"].items():
            axes[2].plot(xs, accs, marker="o", ms=3, label=f"{k} speaker(s) as owners")
        axes[2].axhline(0.1, color="grey", lw=0.6, ls="--", label="chance")
        axes[2].set_xscale("log")
        axes[2].set_xlabel("eps (rightmost point: no noise)")
        axes[2].set_ylabel("digit accuracy, 250 test utterances")
        axes[2].set_title("keyword speech, Gaussian HMMs")
        axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument(
        "--fsdd",
        help="the FSDD folder holding recordings/, for the speech part (default: the FSDD_DIR "
        "variable; without either the speech part is skipped)",
    )
    parser.add_argument("--no-speech", action="store_true")
    parser.add_argument("--secure", action="store_true", help="one secure E-step at 2048 bits")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument(
        "--png",
        default="aggregate-hmm.png",
        help="the figure (default: here; docs/aggregate-hmm.png is the committed one)",
    )
    args = parser.parse_args(argv)
    print(load_average())
    dice = hmm_sweep(reps=2 if args.quick else args.reps)
    print(f"dice HMM ({dice['seconds']:.0f} s); eps {dice['eps']}")
    print(
        f"  true model LL {dice['true_model']['ll']:.3f} acc {dice['true_model']['acc']:.3f}; "
        f"skeleton LL {dice['skeleton']['ll']:.3f} acc {dice['skeleton']['acc']:.3f}"
    )
    for name, c in dice["curves"].items():
        print(f"  {name:42s} LL " + " ".join(f"{v:.3f}" for v in c["ll"]))
        print(f"  {'':42s} acc " + " ".join(f"{v:.3f}" for v in c["acc"]))
    speech = None
    if not args.no_speech:
        try:
            fsdd = fsdd_dir(args.fsdd)
        except ConfigError as e:
            print(f"speech part skipped: {e}")
        else:
            speech = speech_sweep(fsdd, quick=args.quick)
            if args.secure:
                speech["secure_step"] = secure_step(load_by_speaker(fsdd, 5.0))
                print(f"secure E-step: {speech['secure_step']}")
    plot(dice, speech, Path(args.png))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"dice": dice, "speech": speech}, indent=2, default=float)
        )
    print(load_average())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
