"""DPHMM on a synthetic grid world: the evaluation of the DPHMM paper's section 8.

A walker with momentum moves on a 20 x 20 grid (states = cells, f = cell coordinates; see
``smc_hmm/dp/evaluation/gridworld.py`` for the model).  The Markov model is learned from 200
simulated trajectories by counting transitions; 20 further sequences of 100 timestamps are released
with DPHMM (Algorithm 2, K-norm mechanism) under

- G_util(r): cells within Euclidean distance r (in cells) are indistinguishable,
- G_trs: the one-step transition graph of the learned model,
- DPLS: the delta-location-set baseline of [27] (complete graph on the smallest set of
  cells holding prior mass >= 0.99; surrogate release when the true cell is outside it),

and the script reports runtime per release, DoP of the true state and the error
||z_t - f(s*_t)||_2 over time, against eps and against r, with plots in ``--out`` (the
current folder by default; ``--out docs`` for the committed ones).

    python examples/dphmm_gridworld.py            # full run (a few minutes)
    python examples/dphmm_gridworld.py --quick    # 4 sequences x 30 timestamps
    python examples/dphmm_gridworld.py --json out.json --out docs

See ``docs/dphmm.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from smc_hmm.dp.evaluation.gridworld import METHODS, GridWorld, evaluate, run_benchmark, sweep

LABELS = {"util": "DPHMM, G_util(r)", "trs": "DPHMM, G_trs", "dpls": "DPLS (delta = 0.01)"}


def smooth(x: np.ndarray, w: int = 5) -> np.ndarray:
    if len(x) < w:
        return x
    return np.convolve(x, np.ones(w) / w, mode="valid")


def plot(main: dict, sw: dict, r: float, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = []

    def save(fig, name: str) -> None:
        fig.tight_layout()
        paths.append(out / name)
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)

    label = {k: v.replace("(r)", f"(r={r:g})") for k, v in LABELS.items()}

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for k, res in main.items():
        ax.plot(
            np.arange(1, res.seconds.shape[1] + 1), np.median(res.seconds, 0) * 1e3, label=label[k]
        )
    ax.set(xlabel="timestamp t", ylabel="ms per release (median)", title="Runtime per release")
    ax.legend()
    save(fig, "dphmm-runtime.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for k, res in main.items():
        t = np.arange(1, res.dop.shape[1] + 1)
        d, e = smooth(res.dop.mean(0)), smooth(res.error.mean(0))
        axes[0].plot(t[len(t) - len(d) :], d, label=label[k])
        axes[1].plot(t[len(t) - len(e) :], e, label=label[k])
    axes[0].set(
        xlabel="timestamp t", ylabel="DoP of the true state", title="DoP over time", yscale="log"
    )
    axes[1].set(
        xlabel="timestamp t",
        ylabel="error ||z - f(s*)||_2 (cells)",
        title="Error over time",
        yscale="log",
    )
    axes[0].legend()
    save(fig, "dphmm-time.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    eps_values = sorted(sw["by_eps"])
    for k in METHODS:
        axes[0].plot(
            eps_values, [sw["by_eps"][e][k]["dop_mean"] for e in eps_values], "o-", label=label[k]
        )
        axes[1].plot(
            eps_values, [sw["by_eps"][e][k]["error_mean"] for e in eps_values], "o-", label=label[k]
        )
    axes[0].set(xlabel="eps", ylabel="mean DoP", xscale="log", yscale="log", title="Impact of eps")
    axes[1].set(
        xlabel="eps", ylabel="mean error (cells)", xscale="log", yscale="log", title="Impact of eps"
    )
    for ax in axes:
        ax.minorticks_off()
        ax.set_xticks(eps_values, [f"{e:g}" for e in eps_values])
    axes[0].legend()
    save(fig, "dphmm-eps.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    r_values = sorted(sw["by_r"])
    axes[0].plot(
        r_values, [sw["by_r"][v]["dop_mean"] for v in r_values], "o-", label=LABELS["util"]
    )
    axes[1].plot(
        r_values, [sw["by_r"][v]["error_mean"] for v in r_values], "o-", label=LABELS["util"]
    )
    eps_ref = min(sw["by_eps"], key=lambda e: abs(e - 1.0))
    for k in ("trs", "dpls"):
        ref = sw["by_eps"][eps_ref][k]
        axes[0].axhline(
            ref["dop_mean"], ls="--", color="C1" if k == "trs" else "C2", label=LABELS[k]
        )
        axes[1].axhline(
            ref["error_mean"], ls="--", color="C1" if k == "trs" else "C2", label=LABELS[k]
        )
    axes[0].set(xlabel="r (cells)", ylabel="mean DoP", yscale="log", title="Impact of r")
    axes[1].set(xlabel="r (cells)", ylabel="mean error (cells)", title="Impact of r")
    axes[0].legend()
    save(fig, "dphmm-r.png")
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 sequences x 30 timestamps")
    ap.add_argument(
        "--out", type=Path, default=Path("."), help="folder of the plots (default: here)"
    )
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--json", type=Path, help="write all numbers as JSON")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grid", type=int, default=20, help="grid side (>= 20 for the paper)")
    ap.add_argument("--r", type=float, default=2.0, help="G_util distance (cells)")
    ap.add_argument("--eps", type=float, default=1.0)
    args = ap.parse_args(argv)

    n_seq, n_steps = (4, 30) if args.quick else (20, 100)
    eps_values = (0.5, 1.0, 2.0) if args.quick else (0.2, 0.5, 1.0, 2.0, 5.0)
    r_values = (1.0, 2.0, 3.0) if args.quick else (1.0, 1.5, 2.0, 3.0, 4.0)
    grid = GridWorld(width=args.grid, height=args.grid)
    print(
        f"grid {grid.width} x {grid.height} ({grid.n_states} states), {n_seq} sequences x "
        f"{n_steps} timestamps, eps = {args.eps}, r = {args.r}, seed = {args.seed}"
    )

    # the run's settings, one set for the main comparison and the sweeps
    run = dict(n_sequences=n_seq, n_steps=n_steps, eps=args.eps, r=args.r, seed=args.seed)
    t0 = time.perf_counter()
    main_res = evaluate(grid, **run)
    print(
        f"\n{'method':22} {'ms/release':>10} {'(mean)':>8} {'DoP':>8} {'error':>8} "
        f"{'rms err':>8} {'|C_t|':>7}"
    )
    for k, res in main_res.items():
        s = res.summary()
        print(
            f"{LABELS[k]:22} {s['ms_per_release_median']:10.2f} {s['ms_per_release_mean']:8.2f} "
            f"{s['dop_mean']:8.1f} {s['error_mean']:8.2f} {s['error_rms']:8.2f} "
            f"{s['c_size_mean']:7.1f}"
        )

    sw = sweep(grid, eps_values=eps_values, r_values=r_values, **run)
    print("\nimpact of eps (mean DoP / mean error):")
    print(f"{'eps':>6} " + " ".join(f"{LABELS[k]:>24}" for k in METHODS))
    for e, row in sw["by_eps"].items():
        cells = " ".join(
            f"{row[k]['dop_mean']:>11.1f} / {row[k]['error_mean']:<10.2f}" for k in METHODS
        )
        print(f"{e:6g} {cells}")
    print(f"\nimpact of r on G_util (eps = {args.eps}):")
    print(f"{'r':>6} {'DoP':>8} {'error':>8} {'ms/release':>10}")
    for rv, s in sw["by_r"].items():
        print(
            f"{rv:6g} {s['dop_mean']:8.1f} {s['error_mean']:8.2f} "
            f"{s['ms_per_release_median']:10.2f}"
        )

    bench = run_benchmark(args.grid, eps=args.eps, r=args.r, seed=args.seed)
    print(
        f"\nrun_benchmark({args.grid}): "
        + ", ".join(
            f"{k} {v['ms_per_release_median']:.2f} ms/release" for k, v in bench["methods"].items()
        )
    )
    print(f"total {time.perf_counter() - t0:.1f} s")

    if args.json:
        data = {
            "main": {k: v.summary() for k, v in main_res.items()},
            "over_time": {
                k: {
                    "dop": v.dop.mean(0).tolist(),
                    "error": v.error.mean(0).tolist(),
                    "ms": (np.median(v.seconds, 0) * 1e3).tolist(),
                }
                for k, v in main_res.items()
            },
            "sweep": {
                "by_eps": {str(k): v for k, v in sw["by_eps"].items()},
                "by_r": {str(k): v for k, v in sw["by_r"].items()},
            },
            "benchmark": bench,
        }
        args.json.write_text(json.dumps(data, indent=1))
    if not args.no_plots:
        for p in plot(main_res, sw, args.r, args.out):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
