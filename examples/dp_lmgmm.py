"""DP large-margin GMM classifiers (thesis 003, section 4.1.2): Figure 4.4 and DP speaker
identification, plotted.

Runs the two benchmarks of :mod:`smc_hmm.bench.lmgmm` (or reads their ``--json`` output)
and draws

- ``lmgmm-figure-4-4.png`` (in ``--out``, default the current folder; ``--out docs``
  regenerates the committed figures): test error against eps on 5 synthetic Gaussian classes in
  10 dimensions (500 training and 500 test points, lambda = 0.01, mean and standard error
  over the runs), beside the non-private large-margin and generative classifiers, with the
  guarantee eps' = eps + k on a second axis and, with ``--thesis``, the thesis's shared
  perturbation (no guarantee);
- ``lmgmm-speaker.png``: accuracy against eps of DP speaker identification on the
  bundled FSDD utterance features, beside the non-private classifiers.

Noise comes from seeded, INSECURE streams so that the figures are reproducible.  Run::

    python examples/dp_lmgmm.py                       # 100 / 20 runs per eps: minutes
    python examples/dp_lmgmm.py --quick               # 5 / 3 runs per eps
    python examples/dp_lmgmm.py --from-json synthetic.json speaker.json

See ``docs/lmgmm.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from smc_hmm.bench import lmgmm as bench

#: the two figures, in the order of --from-json: the benchmark, its runs per eps (--quick,
#: else), the file, whether it plots accuracy (else the test error) and its title
FIGURES = (
    (
        "synthetic",
        (5, 100),
        "lmgmm-figure-4-4.png",
        False,
        "Figure 4.4: 5 Gaussian classes, 10 dims, n = 500, lambda = 0.01",
    ),
    (
        "speaker",
        (3, 20),
        "lmgmm-speaker.png",
        True,
        "DP speaker identification (FSDD, 5 speakers, 26 features)",
    ),
)


def _run(kind: str, runs: int, thesis: bool, jobs: int) -> dict:
    parser = argparse.ArgumentParser()
    add = bench.add_synthetic_arguments if kind == "synthetic" else bench.add_speaker_arguments
    add(parser)
    argv = ["--runs", str(runs), "--jobs", str(jobs)] + (["--thesis"] if thesis else [])
    run = bench.run_synthetic if kind == "synthetic" else bench.run_speaker
    return run(parser.parse_args(argv)).to_dict()


def _curve(ax, res: dict, mode: str, scale, **style) -> None:
    pts = res["results"]["curves"][mode]
    eps = [p["eps"] for p in pts]
    mean = np.array([scale(p["error_mean"]) for p in pts])
    sem = np.array([100 * p["error_sem"] for p in pts])
    ax.errorbar(eps, mean, yerr=sem, capsize=3, marker="o", **style)


def plot(res: dict, path: Path, *, accuracy: bool, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def scale(err: float) -> float:
        return 100 * (1 - err) if accuracy else 100 * err

    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    _curve(ax, res, "objective", scale, label="DP (objective perturbation, eps'-DP)")
    if "thesis" in res["results"]["curves"]:
        _curve(ax, res, "thesis", scale, linestyle="--", label="thesis's shared b (no guarantee)")
    ax.axhline(
        scale(res["results"]["non_private_error"]),
        color="k",
        linewidth=1,
        label="non-private large-margin GMM",
    )
    ax.axhline(
        scale(res["results"]["generative_error"]),
        color="gray",
        linestyle=":",
        label="generative Gaussian per class",
    )
    frame = res["params"].get("frame_gmm")
    if frame:
        ax.axhline(
            100 * frame["accuracy"],
            color="gray",
            linestyle="-.",
            label=f"generative {frame['components']}-component GMM on frames",
        )
    ax.set_xscale("log")
    ax.set_xlabel("eps (noise parameter of (4.12))")
    ax.set_ylabel("accuracy %" if accuracy else "test error %")
    pts = res["results"]["curves"]["objective"]
    top = ax.secondary_xaxis("top")
    top.set_xticks([p["eps"] for p in pts])
    top.set_xticklabels([f"{p['eps_total']:.3g}" for p in pts], fontsize=7)
    top.set_xlabel("eps' = eps + k (the guarantee)", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 / 3 runs per eps")
    parser.add_argument("--thesis", action="store_true", help="add the thesis's shared b")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("."),
        help="folder of the two figures (default: here; --out docs regenerates the committed ones)",
    )
    parser.add_argument(
        "--from-json",
        nargs=2,
        metavar=("SYNTHETIC", "SPEAKER"),
        help="plot saved --json outputs of the two benchmarks",
    )
    args = parser.parse_args()
    if args.from_json:
        results = [json.loads(Path(p).read_text()) for p in args.from_json]
    else:
        results = [
            _run(kind, quick if args.quick else full, args.thesis, args.jobs)
            for kind, (quick, full), *_ in FIGURES
        ]
    for res, (_, _, name, accuracy, title) in zip(results, FIGURES):
        runs = res["params"]["runs"]
        plot(res, args.out / name, accuracy=accuracy, title=f"{title}, {runs} runs")


if __name__ == "__main__":
    main()
