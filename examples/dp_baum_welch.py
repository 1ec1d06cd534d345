"""Reproduce paper 000's experiment: Viterbi-path similarity of plain vs DP Baum-Welch.

Paper 000 (IPSJ 2014), section 5: HMMs trained on m x n data sets (L = m, the sequence
length, in {10, 20, 30}; |D| = n, the number of sequences, in {100, 200, 300}) with and
without Laplace noise on the expected counts; the metric is the similarity of the most
likely state paths (Viterbi) produced by the normally trained HMM and by the DP HMM.
Experiment 1 adds the noise in the last iteration only, experiment 2 in every iteration
with the budget split. Models: the dice HMMs of the paper's Table 1 (2 states) and a
3-state extension (the paper's 3-state parameters are not in its text):

- 2 states: fair die (1/6 each) and loaded die (1/10 for 1-5, 1/2 for 6: the table's
  "1/5" for six does not sum to one; 1/2 is the classic occasionally-dishonest casino of
  Durbin et al., which the figure follows), a_FF = 0.95, a_FL = 0.05, a_LL = 0.9.
- 3 states: fair, loaded on six (1/2), loaded on one (1/2); stay 0.9, switch 0.05 each.

Training starts from a fixed, data-independent skeleton (the data miner's initial
parameters); plain EM uses the paper's threshold 1e-5 and at most 80 iterations. The
similarity is the fraction of positions where the two Viterbi paths agree, on fresh test
sequences of the same length drawn from the true model, averaged over repetitions.
``last`` = plain EM then one noisy iteration with the whole eps (the paper's experiment 1;
NOT a formal DP guarantee, see ``smc_hmm.dp.baum_welch``); ``every`` = ``--every-iter``
noisy iterations of eps/k each from the skeleton (eps-DP). All counts get Lap(2L/eps)
noise (our accounting: initial, transition and emission counts together have L1
sensitivity 2L); the paper's Lap(L/eps) on A and on E is our eps' = 2 eps.

Noise comes from seeded, INSECURE streams so that the figures are reproducible.

Run (writes dp-baum-welch.png, ``--out docs/dp-baum-welch.png`` the committed figure, and
prints the table; about 5 minutes)::

    python examples/dp_baum_welch.py
    python examples/dp_baum_welch.py --quick      # a few seconds

See ``docs/dp-layer.md`` ("Measured curves").
"""

from __future__ import annotations

import argparse
import itertools
import textwrap
import time
from pathlib import Path

import numpy as np

from smc_hmm.dp.baum_welch import dp_baum_welch, dp_em_step, train_discrete
from smc_hmm.dp.random import DPRandom
from smc_hmm.hmm import DiscreteHMM

FAIR = [1 / 6] * 6
LOADED_SIX = [0.1] * 5 + [0.5]
LOADED_ONE = [0.5] + [0.1] * 5

MODELS = {
    "2 states": DiscreteHMM([0.5, 0.5], [[0.95, 0.05], [0.1, 0.9]], [FAIR, LOADED_SIX]),
    "3 states": DiscreteHMM(
        [1 / 3] * 3,
        [[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]],
        [FAIR, LOADED_SIX, LOADED_ONE],
    ),
}
SKELETONS = {  # the data miner's initial parameters: data-independent, symmetry broken
    "2 states": DiscreteHMM(
        [0.5, 0.5],
        [[0.8, 0.2], [0.2, 0.8]],
        [[0.2, 0.16, 0.16, 0.16, 0.16, 0.16], [0.12, 0.12, 0.12, 0.12, 0.12, 0.4]],
    ),
    "3 states": DiscreteHMM(
        [1 / 3] * 3,
        [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]],
        [
            [0.15, 0.17, 0.17, 0.17, 0.17, 0.17],
            [0.12, 0.12, 0.12, 0.12, 0.12, 0.4],
            [0.4, 0.12, 0.12, 0.12, 0.12, 0.12],
        ],
    ),
}
LENGTHS = (10, 20, 30)
SIZES = (100, 200, 300)
EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
MODES = ("last", "every")


def batch_viterbi(model: DiscreteHMM, batch: np.ndarray) -> np.ndarray:
    """Viterbi paths (B, T) of equal-length symbol sequences (B, T), vectorised."""
    with np.errstate(divide="ignore"):
        log_start = np.log(model.startprob)
        log_trans = np.log(model.transmat)
        log_emit = np.log(model.emissionprob)[:, batch].transpose(1, 2, 0)  # (B, T, N)
    n_batch, length, n_states = log_emit.shape
    back = np.zeros((n_batch, length, n_states), dtype=np.int64)
    delta = log_start + log_emit[:, 0]
    for t in range(1, length):
        scores = delta[:, :, None] + log_trans[None]
        back[:, t] = np.argmax(scores, axis=1)
        delta = np.max(scores, axis=1) + log_emit[:, t]
    path = np.empty((n_batch, length), dtype=np.int64)
    path[:, -1] = np.argmax(delta, axis=1)
    rows = np.arange(n_batch)
    for t in range(length - 1, 0, -1):
        path[:, t - 1] = back[rows, t, path[:, t]]
    return path


def sample_batch(model: DiscreteHMM, count: int, length: int, rng: np.random.Generator):
    """``count`` symbol sequences of ``length`` from ``model``, vectorised, as (count, length)."""
    states = np.empty((count, length), dtype=np.int64)
    states[:, 0] = _choice(model.startprob[None].repeat(count, 0), rng)
    for t in range(1, length):
        states[:, t] = _choice(model.transmat[states[:, t - 1]], rng)
    return _choice(model.emissionprob[states.ravel()], rng).reshape(count, length)


def _choice(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cumulative = np.cumsum(rows, axis=1)
    draws = rng.random(rows.shape[0])[:, None]
    return np.minimum((draws > cumulative).sum(axis=1), rows.shape[1] - 1)


def similarity(paths: np.ndarray, reference: np.ndarray, n_states: int) -> tuple[float, float]:
    """(raw agreement, agreement under the best relabelling of the DP model's states)."""
    raw = float(np.mean(paths == reference))
    best = max(
        float(np.mean(np.asarray(perm)[paths] == reference))
        for perm in itertools.permutations(range(n_states))
    )
    return raw, best


def run(args: argparse.Namespace) -> dict:
    lengths = (10,) if args.quick else LENGTHS
    sizes = (100,) if args.quick else SIZES
    epsilons = (0.1, 1.0, 10.0) if args.quick else EPSILONS
    reps = args.reps if args.reps is not None else (2 if args.quick else 20)
    results: dict = {}
    data_rng = np.random.default_rng(args.seed)
    noise_rng = DPRandom.insecure_seeded(args.seed)
    for name, truth in MODELS.items():
        skeleton = SKELETONS[name]
        for length in lengths:
            test = sample_batch(truth, args.test_sequences, length, data_rng)
            reference_skeleton = batch_viterbi(skeleton, test)
            for size in sizes:
                sims = {mode: np.zeros((reps, len(epsilons))) for mode in MODES}
                relabelled = {mode: np.zeros((reps, len(epsilons))) for mode in MODES}
                skeleton_sim = np.zeros(reps)
                for rep in range(reps):
                    train = list(sample_batch(truth, size, length, data_rng))
                    plain = train_discrete(skeleton, train).model
                    reference = batch_viterbi(plain, test)
                    skeleton_sim[rep] = np.mean(reference_skeleton == reference)
                    for k, eps in enumerate(epsilons):
                        last = dp_em_step(
                            plain,
                            train,
                            eps,
                            max_length=length,
                            rng=noise_rng,
                            formal_guarantee=False,
                        ).model
                        every = dp_baum_welch(
                            skeleton,
                            train,
                            eps,
                            max_length=length,
                            mode="every",
                            n_iter=args.every_iter,
                            rng=noise_rng,
                        ).model
                        for mode, model in (("last", last), ("every", every)):
                            raw, best = similarity(
                                batch_viterbi(model, test), reference, truth.n_states
                            )
                            sims[mode][rep, k] = raw
                            relabelled[mode][rep, k] = best
                results[(name, length, size)] = {
                    "epsilons": epsilons,
                    "mean": {m: sims[m].mean(axis=0) for m in MODES},
                    "std": {m: sims[m].std(axis=0) for m in MODES},
                    "relabelled": {m: relabelled[m].mean(axis=0) for m in MODES},
                    "skeleton": float(skeleton_sim.mean()),
                }
    return results


def print_table(results: dict, key: str = "mean") -> None:
    first = next(iter(results.values()))
    epsilons = first["epsilons"]
    title = "raw similarity" if key == "mean" else "similarity after the best relabelling"
    print(f"\nViterbi path similarity, plain vs DP ({title}); skel. = untrained skeleton")
    header = "model     L    |D|  mode  " + " ".join(f"{e:>6g}" for e in epsilons) + "  skel."
    print(header)
    print("-" * len(header))
    for (name, length, size), entry in results.items():
        for mode in MODES:
            cells = " ".join(f"{v:6.3f}" for v in entry[key][mode])
            print(f"{name:8s} {length:3d} {size:5d}  {mode:5s} {cells}  {entry['skeleton']:.3f}")


def plot(results: dict, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({key[0] for key in results})
    lengths = sorted({key[1] for key in results})
    sizes = sorted({key[2] for key in results})
    fig, axes = plt.subplots(
        len(names), len(lengths), figsize=(4.2 * len(lengths), 3.4 * len(names)), squeeze=False
    )
    colours = dict(zip(sizes, ("tab:blue", "tab:orange", "tab:green")))
    for row, name in enumerate(names):
        for col, length in enumerate(lengths):
            ax = axes[row][col]
            for size in sizes:
                entry = results[(name, length, size)]
                for mode, style in (("last", "-o"), ("every", "--s")):
                    ax.plot(
                        entry["epsilons"],
                        entry["mean"][mode],
                        style,
                        color=colours[size],
                        markersize=3,
                        label=f"|D|={size}, {mode}",
                    )
                ax.axhline(entry["skeleton"], color=colours[size], lw=0.6, ls=":")
            ax.axvline(1.0, color="grey", lw=0.5)
            ax.set_xscale("log")
            ax.set_ylim(0, 1.02)
            ax.set_title(f"{name}, L = {length}")
            ax.set_xlabel("total epsilon")
            if col == 0:
                ax.set_ylabel("Viterbi path similarity")
    axes[0][0].legend(fontsize=7, loc="lower right")
    # wrapped to the figure's width: one column (--quick) is 4.2 inches, too narrow for
    # the title on one line (it used to be clipped at both sides)
    title = (
        "DP Baum-Welch vs plain (paper 000): solid = noise in last iteration, "
        "dashed = every iteration; dotted = untrained skeleton"
    )
    per_line = max(30, int(fig.get_figwidth() * 72 / (9 * 0.6)))
    fig.suptitle(textwrap.fill(title, per_line), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per setting")
    parser.add_argument("--seed", type=int, default=2014)
    parser.add_argument("--every-iter", type=int, default=5, help="iterations of 'every'")
    parser.add_argument("--test-sequences", type=int, default=200)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("dp-baum-welch.png"),
        help="the figure (default: here; docs/dp-baum-welch.png is the committed one)",
    )
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    results = run(args)
    print_table(results)
    print_table(results, "relabelled")
    print(f"\n{time.perf_counter() - start:.1f} s")
    if not args.no_plot:
        plot(results, args.out)


if __name__ == "__main__":
    main()
