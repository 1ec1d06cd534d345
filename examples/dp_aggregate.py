"""Thesis 003, Figure 4.6 on breast cancer: test error of the DP aggregate classifier vs eps.

Scikit-learn's bundled breast-cancer data (569 instances, 30 features + a constant; the
thesis used UCI Adult, a download, and this project runs offline) is split 70/30 into
training and test sets (10 random stratified splits); the training set is divided among
2 or 4 owners, evenly or unevenly (25/75; 10/20/30/40 %).  Each owner trains an
L2-regularised logistic regression (lambda = 1, the thesis's value; also 0.1 and 0.01 in
the second panel); the published classifier is the mean plus the L2 K-norm noise of the
smallest owner (:mod:`protocols.aggregate`), 20 noise draws per split.  Baselines: the
non-private classifier on the pooled data, its DP version (one owner with everything),
and, dotted, the thesis's per-coordinate Laplace at the same scale (only sqrt(d) eps-DP).

Writes ``aggregate-classifier.png`` (``--png``; ``docs/aggregate-classifier.png`` is
the committed one) and prints the smallest eps on the grid at which
the mean error is within 5 points of the pooled non-private classifier.  About a minute::

    python examples/dp_aggregate.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from smc_hmm.bench.aggregate import classifier_sweep
from smc_hmm.bench.common import load_average

REPO = Path(__file__).resolve().parents[1]
LAMBDAS = (1.0, 0.1, 0.01)


def plot(sweeps: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    main = sweeps[1.0]
    eps = main["eps"]
    ax = axes[0]
    for i, (name, mean) in enumerate(main["mean_error"].items()):
        ax.plot(eps, mean, marker="o", ms=3, color=f"C{i}", label=name)
        if name in main["thesis_laplace_error"]:
            ax.plot(eps, main["thesis_laplace_error"][name], ls=":", color=f"C{i}", lw=0.8)
    ax.axhline(main["pooled_error"], color="k", lw=0.8, label="pooled, non-private")
    ax.axhline(main["pooled_error"] + 0.05, color="k", lw=0.5, ls="--", label="+5 points")
    ax.set_xscale("log")
    ax.set_xlabel("eps")
    ax.set_ylabel("test error")
    ax.set_title("lambda = 1 (dotted: thesis's Laplace, only sqrt(d) eps-DP)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    for j, (lam, sweep) in enumerate(sweeps.items()):
        for name, ls in (("2 owners, even", "-"), ("4 owners, uneven", "--")):
            ax.plot(
                eps,
                sweep["mean_error"][name],
                ls=ls,
                color=f"C{j}",
                marker="o",
                ms=2,
                label=f"lambda {lam:g}: {name}",
            )
        ax.axhline(sweep["pooled_error"], color=f"C{j}", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("eps")
    ax.set_title("regularisation (thin lines: pooled non-private error)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--noise", type=int, default=20)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument(
        "--png",
        default="aggregate-classifier.png",
        help="the figure (default: here; docs/aggregate-classifier.png is the committed one)",
    )
    args = parser.parse_args(argv)
    n_splits, n_noise = (3, 5) if args.quick else (args.splits, args.noise)
    print(load_average())
    sweeps = {}
    for lam in LAMBDAS:
        s = classifier_sweep(lam=lam, n_splits=n_splits, n_noise=n_noise)
        sweeps[lam] = s
        print(
            f"\nlambda {lam:g}: pooled non-private error {s['pooled_error']:.3f}; "
            f"train {s['train_size']}, test {s['test_size']}, d = {s['dim']} "
            f"({s['seconds']:.0f} s)"
        )
        print(f"  {'eps':42s}" + "".join(f"{e:>7g}" for e in s["eps"]))
        for name, mean in s["mean_error"].items():
            hit = s["smallest_eps_within_5_points"][name]
            print(
                f"  {name:42s}"
                + "".join(f"{m:7.3f}" for m in mean)
                + f"   within 5 points from eps {hit}"
            )
        for name, mean in s["thesis_laplace_error"].items():
            print(f"  {'(thesis Laplace) ' + name:42s}" + "".join(f"{m:7.3f}" for m in mean))
        print("  owner sizes: " + ", ".join(f"{k}: {v}" for k, v in s["owner_sizes"].items()))
    plot(sweeps, Path(args.png))
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in sweeps.items()}, indent=2))
    print(load_average())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
