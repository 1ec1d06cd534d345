"""``smc-hmm bench dp-keyword FSDD_DIR``: accuracy of DP keyword HMMs against epsilon.

Thesis 003, section 5.1.1 (``docs/dp-keyword-models.md``): Bob releases ten digit HMMs
with :func:`smc_hmm.dp.keyword_models.release_keyword_models` (eps, delta = 1e-6 for the
whole set, add/remove one utterance), Alice classifies locally. For every eps of
``--eps`` the benchmark draws ``--releases`` independent releases from the training
split of the Free Spoken Digit Dataset (the recordings in ``FSDD_DIR``, indices 5-49)
and scores the bundled 250 test utterances (indices 0-4) with each, exactly as
``smc-hmm keyword --models RELEASED.npz`` would: the released pipeline's
standardisation, then the plaintext forward algorithm (``smc_hmm.hmm.log_likelihood``).

Rows: mean accuracy per eps (min and max over the releases in the note; the targets,
>= 90% at eps = 10 and >= 60% at eps = 3, as the baseline column with a 1.0x target),
the bundled non-private models, the time per release, and the empirical audit
(:func:`smc_hmm.dp.evaluation.empirical_audit.audit_keyword_release` on the first 40 training
utterances of two digits: ``--audit-releases`` releases on each of two neighbouring
data sets, the histogram-ratio estimate of the loss on one released mean must stay at
most the claimed eps), once for the full release with the most influential real
utterance removed, and once with the standardisation held fixed (the bundled one) and a
crafted canary utterance added whose whole bounded contribution lies on the audited
coordinate.

The noise comes from INSECURE seeded streams by default (``--seed``; reproducible
figures; the same Gaussian distribution as a real release), or from OpenDP's hardened
CSPRNG sampler with ``--sampler opendp``. ``--quick`` runs eps 1, 3, 10 with two
releases each and a 200-release audit.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from smc_hmm.bench.common import (
    HIGHER,
    BenchResult,
    Row,
    add_json_argument,
    bounded,
    bounded_float,
    finish,
    verdict,
)

DEFAULT_EPS = "0.1,0.3,1,3,10,30,100,1000,10000"
QUICK_EPS = "1,3,10"
TARGETS = {10.0: 0.90, 3.0: 0.60}
AUDIT_LABELS = ("zero", "one")  # the audit's reduced data set (speed): two labels


def _accuracy(models, labels, pipeline, test) -> float:
    from smc_hmm.hmm import log_likelihood

    hits = 0
    for raw, label in test:
        frames = pipeline.standardise(raw)
        scores = [log_likelihood(m, frames) for m in models]
        hits += labels[int(np.argmax(scores))] == label
    return hits / len(test)


def _eps_list(text: str) -> list[float]:
    from smc_hmm.errors import InvalidInputError

    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InvalidInputError(
            f"--eps must be a comma-separated list of numbers: {text!r}"
        ) from None
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise InvalidInputError(f"--eps values must be finite and > 0: {text!r}")
    return values


def run(
    fsdd: str | Path,
    eps_values: list[float],
    releases: int = 5,
    *,
    seed: int = 0,
    sampler: str = "float",
    audit_releases: int = 1000,
    audit_eps: float = 3.0,
    design=None,
    log=print,
) -> BenchResult:
    from smc_hmm.data import load_bundled_models, load_pipeline
    from smc_hmm.dp.keyword_models import KeywordDesign

    design = design or KeywordDesign()
    started = time.perf_counter()
    load_before = os.getloadavg()
    train, test = _data(fsdd, log)
    n_train = sum(len(v) for v in train.values())
    bundled, bundled_labels = load_bundled_models("diag")
    bundled_acc = _accuracy(bundled, bundled_labels, load_pipeline(), test)
    accuracies, seconds, guarantee = _releases(
        train, test, eps_values, releases, design, sampler, seed, log
    )
    rows = _accuracy_rows(eps_values, accuracies)
    rows.append(Row("bundled non-private diag models", bundled_acc, None, "accuracy"))
    rows.append(_release_time_row(seconds, sampler))
    audits: dict = {}
    if audit_releases:
        audits, audit_rows = _audits(train, design, audit_eps, audit_releases, seed, log)
        rows += audit_rows
    return BenchResult(
        "dp-keyword",
        0,
        rows,
        {
            "eps": eps_values,
            "releases": releases,
            "seed": seed,
            "sampler": sampler,
            "design": asdict(design),
            "training_utterances": n_train,
            "test_utterances": len(test),
        },
        extra={
            "accuracy": accuracies,
            "bundled_diag_accuracy": bundled_acc,
            "bundled_full_accuracy_manifest": _manifest_full(),
            "audit": audits,
            "guarantee_example": guarantee,
            "load_average_before_after": [load_before, os.getloadavg()],
            "wall_seconds": time.perf_counter() - started,
        },
    )


def _data(fsdd, log) -> tuple[dict, list]:
    """(training recordings by label: FSDD indices 5-49, the bundled test utterances as
    (raw features, label))."""
    from smc_hmm.data import load_test_utterances
    from smc_hmm.dp.keyword_release import read_labelled_recordings

    train = read_labelled_recordings(fsdd, range(5))
    n_train = sum(len(v) for v in train.values())
    test = [(u.features, u.label) for u in load_test_utterances(standardised=False)]
    log(f"{n_train} training utterances, {len(test)} test utterances")
    return train, test


def _release_time_row(seconds: list[float], sampler: str) -> Row:
    """The median seconds of one release of all ten models."""
    return Row(
        "time per release (all ten models)",
        statistics.median(seconds),
        None,
        "s",
        note=f"{sampler} sampler, {len(seconds)} releases",
    )


def _releases(train, test, eps_values, releases: int, design, sampler: str, seed: int, log):
    """``releases`` DP releases per eps, each scored on ``test``: (accuracies by eps,
    seconds per release, the last release's guarantee)."""
    from smc_hmm.dp.keyword_models import release_keyword_models
    from smc_hmm.dp.random import DPRandom

    parent = DPRandom.insecure_seeded(seed) if sampler == "float" else None
    accuracies: dict[str, list[float]] = {}
    seconds: list[float] = []
    guarantee = None
    for eps in eps_values:
        accs = []
        for _ in range(releases):
            t0 = time.perf_counter()
            out = release_keyword_models(
                train,
                eps,
                design=design,
                sampler=sampler,
                rng=parent.spawn() if parent is not None else None,
            )
            seconds.append(time.perf_counter() - t0)
            accs.append(_accuracy(out.models, out.labels, out.pipeline, test))
            guarantee = out.guarantee
        accuracies[f"{eps:g}"] = accs
        spread = f"min {min(accs):.1%}, max {max(accs):.1%}"
        log(f"  eps {eps:g}: accuracy {np.mean(accs):.1%} ({spread})")
    return accuracies, seconds, guarantee


def _accuracy_rows(eps_values, accuracies: dict[str, list[float]]) -> list[Row]:
    """The mean accuracy per eps, against its target where there is one."""
    rows: list[Row] = []
    for eps in eps_values:
        accs = accuracies[f"{eps:g}"]
        goal = TARGETS.get(eps)
        rows.append(
            Row(
                f"accuracy at eps = {eps:g} (mean of {len(accs)} releases)",
                float(np.mean(accs)),
                goal,
                "accuracy",
                target=1.0 if goal is not None else None,
                note=f"min {min(accs):.3f}, max {max(accs):.3f}"
                + ("; baseline = the target accuracy" if goal is not None else ""),
                better=HIGHER,
            )
        )
    return rows


def _audits(train, design, audit_eps: float, audit_releases: int, seed: int, log):
    """The empirical privacy loss of two neighbour pairs: (the audits, their rows)."""
    from dataclasses import replace

    from smc_hmm.dp.evaluation.empirical_audit import audit_keyword_release

    subset = {label: train[label][:40] for label in AUDIT_LABELS}
    fixed = replace(design, standardisation="bundled")
    cases = (
        ("full release, one utterance removed", design, "remove"),
        ("state means alone, a canary added", fixed, "canary"),
    )
    audits, rows = {}, []
    for name, chosen, neighbour in cases:
        log(f"audit ({name}): {audit_releases} releases on each of two neighbours ...")
        audit = audit_keyword_release(
            subset, audit_eps, label=AUDIT_LABELS[0], releases=audit_releases,
            design=chosen, seed=seed + 1, neighbour=neighbour,
        )  # fmt: skip
        audits[name] = asdict(audit)
        rows.append(
            Row(
                f"empirical privacy loss at eps = {audit_eps:g}, {name}",
                audit.estimate,
                None,
                "nats",
                limit=audit.epsilon,
                note=f"histogram ratio, {audit.releases} releases per side; "
                f"{audit.parameter}; {audit.neighbour}; mean shift "
                f"{audit.shift:.2f} sd; limit = claimed eps",
            )
        )
    return audits, rows


def _manifest_full() -> float | None:
    from smc_hmm.data import load_manifest

    return load_manifest().get("results", {}).get("full", {}).get("test")


def add_arguments(parser) -> None:
    parser.add_argument(
        "fsdd",
        nargs="?",
        metavar="FSDD_DIR",
        help="the FSDD recordings or their parent (default: the FSDD_DIR variable)",
    )
    parser.add_argument("--eps", default=None, help=f"comma-separated eps ({DEFAULT_EPS})")
    parser.add_argument(
        "--releases", type=bounded(1, 1000), default=None, help="releases per eps (5)"
    )
    parser.add_argument(
        "--seed", type=bounded(0, 2**63 - 1), default=0, help="seed of the INSECURE float noise"
    )
    parser.add_argument(
        "--sampler", choices=("float", "opendp"), default="float",
        help="float: seeded, reproducible (default); opendp: hardened CSPRNG",
    )  # fmt: skip
    parser.add_argument(
        "--variances", choices=("unit", "tied", "state"), default="unit", help="design option"
    )
    parser.add_argument(
        "--standardisation",
        choices=("dp", "public", "bundled"),
        default="dp",
        help="design option",
    )
    parser.add_argument("--static-means", action="store_true", help="design option")
    parser.add_argument(
        "--record-bound", type=bounded_float(1e-6, 1e6), default=None, help="design option (C)"
    )
    parser.add_argument(
        "--audit-releases",
        type=bounded(0, 1_000_000),
        default=None,
        help="per side (1000; 0: no audit)",
    )
    parser.add_argument(
        "--audit-eps", type=bounded_float(1e-6, 1000.0), default=3.0, help="eps of the audit (3)"
    )
    parser.add_argument("--quick", action="store_true", help="eps 1,3,10, 2 releases, audit 200")
    add_json_argument(parser)


def _print_table(console, result: BenchResult) -> None:
    from rich.table import Table

    table = Table(title="dp-keyword benchmark: DP keyword HMMs on FSDD (250 test utterances)")
    for col in ("row", "value", "goal", "note"):
        table.add_column(col, justify="right" if col in ("value", "goal") else "left")
    for r in result.rows:
        if r.limit is not None:
            goal = f"<= {r.limit:.3g}"
        elif r.baseline is not None:
            goal = f">= {r.baseline:.3g}"
        else:
            goal = "-"
        mark = "" if r.met is None else " " + verdict(r.met)
        table.add_row(r.name, f"{r.ours:.4g} {r.unit}", goal + mark, r.note)
    console.print(table)


def main(args) -> int:
    from smc_hmm.console import console as make_console
    from smc_hmm.console import table_console
    from smc_hmm.dp.keyword_models import KeywordDesign

    console, err = table_console(150), make_console(stderr=True)
    eps_values = _eps_list(args.eps or (QUICK_EPS if args.quick else DEFAULT_EPS))
    releases = args.releases or (2 if args.quick else 5)
    audit = args.audit_releases if args.audit_releases is not None else (
        200 if args.quick else 1000
    )  # fmt: skip
    options = dict(
        variances=args.variances,
        standardisation=args.standardisation,
        static_means=args.static_means,
    )
    if args.record_bound is not None:
        options.update(record_bound=args.record_bound, count_weight=args.record_bound)
    design = KeywordDesign(**options)
    if args.fsdd:
        fsdd = args.fsdd
    else:
        from smc_hmm.data import fsdd_dir

        fsdd = fsdd_dir()
    result = run(
        fsdd,
        eps_values,
        releases,
        seed=args.seed,
        sampler=args.sampler,
        audit_releases=audit,
        audit_eps=args.audit_eps,
        design=design,
        log=lambda text: err.print(f"[dim]{text}[/]"),  # progress: standard error
    )
    _print_table(console, result)
    load = result.extra["load_average_before_after"]
    console.print(
        f"[dim]wall time {result.extra['wall_seconds']:.0f} s; load average before "
        f"{load[0][0]:.1f}, after {load[1][0]:.1f} (1 min)[/]"
    )
    return finish(args, result, console)
