"""``smc-hmm bench eigenvector``: both modes of the eigenvector protocol side by side.

Thesis 4.1.1 (``docs/eigenvector.md``): scikit-learn's bundled digits in the thesis's
orientation, k = ``--rows`` (64) pixel features as rows, n = ``--cols`` (1,797)
samples as columns split evenly over ``--owners`` (4) owners, so the vector that crosses
the network has length k and the eigenvector of M^T M (length n) stays in the owners'
shares.  ``--data random`` uses uniform [-1, 1] entries instead.

For each data variant (``--centred``: the raw digits, whose mean dominates and gives
a large eigengap, and/or the digits minus their mean, i.e. PCA proper, with a small
eigengap) and each mode (``--modes``: ``private``, the default mode, in which nobody
sees an iterate; ``thesis``, the thesis's protocol with every hardening, the baseline),
it reports in the same run: rounds, seconds to convergence (key generation not timed:
the key authority's pair is made beforehand; each owner's own key pair in the private
mode is part of the run), seconds per round, 1 - cosine to numpy's principal
eigenvector (SVD), bytes, and the operations that dominate (partial decryptions in the
private mode), against a plaintext numpy power iteration with the same stopping test.
Each run is repeated ``--repeats`` times (median reported).  The load average is
recorded beside the timings: a shared machine slows every figure.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from smc_hmm.bench import common
from smc_hmm.eigen import power_iteration, principal_eigenvector
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.progress import status

TARGET_SECONDS = 60.0
TARGET_COSINE_GAP = 1e-9
MODES = ("private", "thesis")
CENTRED = {"no": (False,), "yes": (True,), "both": (False, True)}


#: the benchmark's numeric options, in their order in ``--help``: (flag, type, default, help)
_NUMERIC_OPTIONS = (
    ("--repeats", int, 1, "runs per mode (median)"),
    ("--tol", float, 1e-7, "the convergence test"),
    ("--max-rounds", int, 400, "give up after this many"),
    ("--check-every", int, 8, "private mode: rounds between tests"),
    ("--precision", int, 64, "private mode: bits of the iterate (smaller plans fit smaller keys)"),
    ("--gram-bits", int, 40, "private mode: Gram matrix fixed-point bits"),
    ("--decoy-p", float, 0.8, "thesis mode: probability of a real round"),
    (
        "--slots",
        int,
        0,
        "thesis mode: values per ciphertext (0: as many as the key holds; 1: none)",
    ),
    ("--seed", int, 0, "random data and numpy's start"),
    ("--timeout", float, 300.0, "receive timeout (s)"),
)


def add_arguments(parser) -> None:
    with common.common_arguments(parser):
        parser.add_argument("--owners", type=common.bounded(2, 64), default=4, help="data owners N")
        parser.add_argument(
            "--rows", type=common.bounded(2, 4096), default=64, help="k: rows (digits: features)"
        )
        parser.add_argument(
            "--cols",
            type=common.bounded(2, 100_000),
            default=1797,
            help="n: columns (digits: samples)",
        )
        parser.add_argument("--data", choices=["digits", "random"], default="digits")
        parser.add_argument(
            "--centred",
            choices=sorted(CENTRED),
            default="both",
            help="subtract the mean of every feature (PCA proper): no, yes or both",
        )
        parser.add_argument(
            "--modes", nargs="+", choices=MODES, default=list(MODES), help="modes to run"
        )
        for flag, kind, default, text in _NUMERIC_OPTIONS:
            parser.add_argument(flag, type=kind, default=default, help=text)
        parser.add_argument(
            "--protocol", default="eigenvector", help='registered name or "module:object"'
        )


def load_data(kind: str, rows: int, cols: int, seed: int, centred: bool = False):
    """(M, public bound on |entries|): digits features x samples, or uniform random;
    ``centred`` subtracts every feature's mean over the samples."""
    if rows < 2 or cols < 2:
        raise InvalidInputError("--rows and --cols must be at least 2")
    if kind == "random":
        m, bound = np.random.default_rng(seed).uniform(-1, 1, (rows, cols)), 1.0
    else:
        try:
            from sklearn.datasets import load_digits
        except ImportError as e:  # the test extra has it; the benchmark names the fix
            raise ConfigError("the digits data needs scikit-learn: pip install scikit-learn") from e
        x = load_digits().data  # 1,797 samples x 64 features, values 0..16
        if rows > x.shape[1] or cols > x.shape[0]:
            raise InvalidInputError(f"digits has {x.shape[1]} features and {x.shape[0]} samples")
        m, bound = x[:cols, :rows].T.copy(), 16.0
    if centred:  # the public bound follows from the data's public range, not its values
        m = m - m.mean(axis=1, keepdims=True)
        bound = bound if kind == "digits" else 2 * bound  # [0, 16] - mean; [-1, 1] - mean
    return m, bound


def split(m: np.ndarray, owners: int) -> list[np.ndarray]:
    if not 2 <= owners <= m.shape[1]:
        raise InvalidInputError(f"--owners must be in [2, {m.shape[1]}]")
    return [m[:, s] for s in np.array_split(np.arange(m.shape[1]), owners)]


def protocol_params(blocks, max_abs, args, mode: str, slots: int = 1) -> dict:
    params = {
        "owners": [f"p{i + 1}" for i in range(len(blocks))],
        "cols": [b.shape[1] for b in blocks],
        "rows": blocks[0].shape[0],
        "max_abs": max_abs,
        "tol": args.tol,
        "max_rounds": args.max_rounds,
        "mode": mode,
    }
    if mode == "thesis":
        params |= {"decoy_p": args.decoy_p, "slots": slots}
    else:
        params |= {
            "check_every": args.check_every,
            "precision": args.precision,
            "gram_bits": args.gram_bits,
        }
    return params


def thesis_slots(protocol, blocks, max_abs, args) -> int:
    """The most values per ciphertext a key holds in the thesis mode (its own plan)."""
    from smc_hmm.protocol import find

    params = find(protocol).params(protocol_params(blocks, max_abs, args, "thesis"))
    return params.max_slots(args.key_bits) if hasattr(params, "max_slots") else 1


def run_secure(protocol, params, blocks, keypair, timeout, min_key_bits):
    from smc_hmm.runtime import run_protocol

    owners = params["owners"]
    parties = {"authority": ("key_authority", None), "trent": ("arbitrator", None)}
    for name, b in zip(owners, blocks):
        parties[name] = ("owner", b)
    t0 = time.perf_counter()
    result = run_protocol(
        protocol,
        params,
        parties,
        keys={"authority": keypair},
        timeout=timeout,
        min_key_bits=min_key_bits,
        meta={"benchmark": "eigenvector"},
    )
    elapsed = time.perf_counter() - t0
    x = np.concatenate([result[o] for o in owners])
    return result, x, elapsed


def _gap(x, v) -> float:
    return max(0.0, 1.0 - abs(float(x @ v)) / (np.linalg.norm(x) * np.linalg.norm(v)))


def main(args) -> int:
    """The ``smc-hmm bench eigenvector`` entry point: 1 if a target was missed."""
    return common.finish(args, measure(args))


def _check_args(args) -> None:
    common.check_key_bits(args)
    if args.repeats < 1:
        raise InvalidInputError("--repeats must be >= 1")
    if args.slots < 0:
        raise InvalidInputError("--slots must be >= 0 (0: as many as the key holds)")
    if not 0 < args.decoy_p <= 1:
        raise InvalidInputError("--decoy-p must be in (0, 1]")
    if not 0 < args.tol < 1:
        raise InvalidInputError("--tol must be in (0, 1)")


def _numpy_baseline(blocks, tol, seed) -> tuple[float, int, float]:
    """(median seconds of 5, iterations, 1 - cosine) of the plaintext power iteration."""
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        x, iterations = power_iteration(blocks, tol, max_rounds=100_000, seed=seed)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), iterations, x


def _per_party(cost) -> dict:
    return {
        name: {
            "bytes_sent": d["bytes"]["sent"],
            "bytes_recv": d["bytes"]["recv"],
            "messages_sent": d["messages"]["sent"],
            "rounds": d["rounds"],
            "ops": d["ops"],
            "wall_s": d["time"]["wall"],
        }
        for name, d in cost.parties.items()
    }


def _measure_mode(args, mode, blocks, max_abs, keypair, v, np_seconds, np_iterations) -> dict:
    slots = 1
    if mode == "thesis":
        slots = args.slots or thesis_slots(args.protocol, blocks, max_abs, args)
    params = protocol_params(blocks, max_abs, args, mode, slots)
    min_bits = min(args.key_bits, 2048)
    runs = sorted(
        (
            run_secure(args.protocol, params, blocks, keypair, args.timeout, min_bits)
            for _ in range(args.repeats)
        ),
        key=lambda r: r[2],
    )
    result, x, elapsed = runs[len(runs) // 2]  # the median run (its costs are reported)
    trent = result["trent"]
    rounds = trent["rounds"]
    parties = _per_party(result.cost)
    return {
        "mode": mode,
        "seconds": elapsed,
        "rounds": rounds,
        "decoys": trent.get("decoys", 0),
        "seconds_per_round": elapsed / rounds,
        "one_minus_cosine": max(_gap(xr, v) for _, xr, _ in runs),
        "overhead_ratio": elapsed / np_seconds,
        "overhead_ratio_per_iteration": (elapsed / rounds) / (np_seconds / np_iterations),
        "bytes_total": result.cost.bytes_total,
        "rounds_causal": result.cost.rounds,
        "partial_decryptions": {
            name: d["ops"].get("partial_decrypt", 0) for name, d in parties.items()
        },
        "slots": slots,
        "repeats": [{"seconds": el, "rounds": r["trent"]["rounds"]} for r, _, el in runs],
        "per_party": parties,
    }


def measure(args) -> common.BenchResult:
    """Run the benchmark and print its tables; the results."""
    _check_args(args)
    load_before = os.getloadavg()
    from rich.console import Console

    with status(Console(), f"generating a throw-away {args.key_bits}-bit key pair"):
        keypair = common.throwaway_keypair(args.key_bits)
    runs, rows = [], []
    for centred in CENTRED[args.centred]:
        label = "centred" if centred else "uncentred"
        m, max_abs = load_data(args.data, args.rows, args.cols, args.seed, centred)
        blocks = split(m, args.owners)
        v = principal_eigenvector(m)
        np_seconds, np_iterations, x_np = _numpy_baseline(blocks, args.tol, args.seed)
        for mode in args.modes:
            run = _measure_mode(args, mode, blocks, max_abs, keypair, v, np_seconds, np_iterations)
            run |= {
                "data": label,
                "numpy_seconds": np_seconds,
                "numpy_iterations": np_iterations,
                "numpy_one_minus_cosine": _gap(x_np, v),
            }
            runs.append(run)
            rows.extend(_rows(args, run))
    load_after = os.getloadavg()
    bench = common.BenchResult(
        benchmark="eigenvector",
        key_bits=args.key_bits,
        rows=rows,
        params={
            "owners": args.owners,
            "rows_k": args.rows,
            "cols_n": args.cols,
            "data": args.data,
            "centred": args.centred,
            "modes": list(args.modes),
            "layout": "k features as rows, n samples as columns split over the owners",
            "tol": args.tol,
            "check_every": args.check_every,
            "precision": args.precision,
            "gram_bits": args.gram_bits,
            "decoy_p": args.decoy_p,
            "repeats": args.repeats,
        },
        extra={
            "runs": runs,
            "load_average": {"before": load_before, "after": load_after},
            "cpus": os.cpu_count(),
        },
    )
    bench.print_table()
    _print_runs(runs)
    return bench


def _rows(args, run: dict) -> list[common.Row]:
    what = f"{run['mode']}, {run['data']}"
    limit = TARGET_SECONDS if args.key_bits >= 2048 and run["data"] == "uncentred" else None
    decoys = f", {run['decoys']} decoys" if run["mode"] == "thesis" else ""
    return [
        common.Row(
            f"{what}: seconds to convergence",
            run["seconds"],
            run["numpy_seconds"],
            "s",
            limit=limit,
            note=f"{run['rounds']} rounds{decoys}; numpy {run['numpy_iterations']} iterations",
            better=common.LOWER,
        ),
        common.Row(
            f"{what}: 1 - cosine to numpy's eigenvector",
            run["one_minus_cosine"],
            None,
            "",
            limit=TARGET_COSINE_GAP,
            note=f"numpy's power iteration: {run['numpy_one_minus_cosine']:.1e}",
        ),
    ]


def _print_runs(runs: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="eigenvector modes side by side (the median run of each)")
    columns = (
        "data",
        "mode",
        "rounds",
        "seconds",
        "s / round",
        "1 - cos",
        "bytes",
        "partial decryptions (trent / p1)",
    )
    for col in columns:
        table.add_column(col, justify="left" if col in ("data", "mode") else "right")
    for r in runs:
        pd = r["partial_decryptions"]
        table.add_row(
            r["data"],
            r["mode"],
            str(r["rounds"]),
            f"{r['seconds']:.2f}",
            f"{r['seconds_per_round']:.3f}",
            f"{r['one_minus_cosine']:.1e}",
            str(r["bytes_total"]),
            f"{pd.get('trent', 0)} / {pd.get('p1', 0)}",
        )
    Console().print(table)
