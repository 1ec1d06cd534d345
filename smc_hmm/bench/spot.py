"""``smc-hmm bench spot``: secure keyword spotting on the bundled continuous speech.

Thesis 003, 2.2.3 (keyword spotting and speech mining); the protocols are the registered
``spot`` and ``viterbi`` plugins (found by name: this core module does not import them),
the data the bundled continuous recordings and fillers (:mod:`smc_hmm.data.continuous`,
``docs/spotting.md``).  In one run:

* **Plaintext quality** on every bundled recording and keyword: detection rate, false
  alarms per keyword and the boundary error in frames, against the true word boundaries.
* **Secure == plaintext** on ``--recordings`` recordings (recording i against keyword
  i mod 10): the secure Viterbi (``viterbi``, the spotting composite, the spotting
  parameters, output ``path`` and the score revealed for the check) must give the
  plaintext path exactly (so the same detection and boundaries), the score to 1e-9.
* **Timing**: the 3-digit recording closest to ``--frames`` frames against ``--keyword``
  and its filler, the ``spot`` protocol in-process (two lanes per party, randomizers
  precomputed after the key exchange): total (offline + online) and online seconds,
  bytes, rounds, the cost per phase; target < 60 s at 2048 bits.
* **All ten keywords at once** on that recording: one ``spot`` run with the ten
  composites in lockstep; its cost, and the cost model's prediction of it from the
  one-keyword run's ledger times ten (:func:`predict`: Paillier operations priced by
  :class:`smc_hmm.cost.CostModel` at this machine's single-thread rates, DGK operations
  at rates measured here on the lanes, where the protocol runs them), checked within 20%
  of the measured total.
* **Speech mining** (2.2.3 (b)): the same recording as Bob's, the keyword model as Alice's.

Commands and numbers: ``docs/spotting.md``.
"""

from __future__ import annotations

import time

import numpy as np

from smc_hmm.bench.common import (
    HIGHER,
    BenchResult,
    Row,
    add_json_argument,
    add_key_arguments,
    add_workers_argument,
    check_key_bits,
    finish,
    throwaway_keypair,
)
from smc_hmm.compute import Compute
from smc_hmm.errors import InvalidInputError

#: targets at 2048 bits on an idle two-core machine
SECONDS_TARGET = 60.0
PREDICTION_TOLERANCE = 0.20
REL_TARGET = 1e-9
#: the spotting parameters (protocols.spotting.SpotParams' defaults), for the viterbi sweep
SPOT_VITERBI = {
    "output": "path",
    "reveal_score": True,
    "score_scale": 24,
    "emission_bound_bits": 15,
    "feature_bound": 12.0,
    "weight_floor_bits": 128,
}
DGK_OPS = ("dgk_encrypt", "dgk_zero_test", "dgk_rerandomize")
#: Alice's DJN exponent with --short-randomness (2 kappa for kappa = 112, as bench keyword)
SHORT_ALPHA_BITS = 224


def _models():
    from smc_hmm.data import load_bundled_models
    from smc_hmm.data.continuous import load_fillers

    models, labels = load_bundled_models("diag")
    fillers, _ = load_fillers("diag")
    return labels, {k: (m, f) for k, m, f in zip(labels, models, fillers)}


def plaintext_quality(recordings, labels, models) -> dict:
    """Per keyword: detection, false alarms, boundary errors (frames) over ``recordings``."""
    from smc_hmm.hmm.spotting import compose, spot

    out = {}
    for digit, label in enumerate(labels):
        composite, layout = compose(*models[label])
        hits = misses = elsewhere = alarms = positives = 0
        errors = []
        for r in recordings:
            s = spot(composite, layout, r.features)
            span = r.span_of(digit)
            if span is None:
                alarms += s.found
                continue
            positives += 1
            if s.found and s.start <= span[1] and s.end >= span[0]:
                hits += 1
                errors += [abs(s.start - span[0]), abs(s.end - span[1])]
            elif s.found:
                elsewhere += 1
            else:
                misses += 1
        negatives = len(recordings) - positives
        out[label] = {
            "positives": positives,
            "detected": hits,
            "missed": misses,
            "found_elsewhere": elsewhere,
            "false_alarms": alarms,
            "negatives": negatives,
            "detection_rate": hits / positives if positives else None,
            "false_alarm_rate": alarms / negatives if negatives else None,
            "boundary_error_mean": float(np.mean(errors)) if errors else None,
            "boundary_error_median": float(np.median(errors)) if errors else None,
        }
    return out


def _decoder(models, label):
    """The spotting composite of ``label`` as the viterbi plugin's decoder mapping."""
    from smc_hmm.hmm.spotting import compose

    composite, layout = compose(*models[label])
    k = layout.keyword_states
    return {"model": composite, "rows": list(layout.rows), "segment": [k.start, k.stop]}, layout


def _run(name, params, alice, bob, keypair, compute, offline=True):
    """One in-process run with an offline phase; (total s, online s, offline s, result)."""
    from smc_hmm.runtime import run_protocol
    from smc_hmm.runtime.offline import offline_phase

    pk = keypair[0]
    base = pk.randomizer
    pre, randomizers = 0.0, None
    if offline:
        phase = offline_phase(name, params, {"alice": alice, "bob": bob}, pk, compute)
        pk.use_randomizer(phase.alice)
        pre, randomizers = phase.seconds, phase.randomizers(pk)
    try:
        t0 = time.perf_counter()
        result = run_protocol(
            name,
            params,
            {"alice": ("alice", alice), "bob": ("bob", bob)},
            keys={"alice": keypair},
            compute={"alice": compute, "bob": compute},
            timeout=3600,
            min_key_bits=min(2048, pk.bits),
            randomizers=randomizers,
        )
        online = time.perf_counter() - t0
    finally:
        pk.use_randomizer(base)
    return pre + online, online, pre, result


def sweep(recordings, labels, models, keypair, compute, say) -> tuple[list, float]:
    """Secure path == plaintext path (the viterbi plugin on the spotting composites)."""
    from smc_hmm.hmm import viterbi as plain_viterbi

    runs, worst = [], 0.0
    for i, r in enumerate(recordings):
        label = labels[i % len(labels)]
        decoder, layout = _decoder(models, label)
        say(f"[{i + 1}/{len(recordings)}] secure Viterbi, {label}, {len(r.features)} frames")
        seconds, _, _, result = _run(
            "viterbi", SPOT_VITERBI, r.features, [decoder], keypair, compute, offline=False
        )
        (secure,) = result["alice"]
        path, score = plain_viterbi(decoder["model"], r.features)
        rel = abs(secure["score"] - score) / abs(score)
        worst = max(worst, rel)
        k = layout.keyword_states
        inside = np.flatnonzero((path >= k.start) & (path < k.stop))
        runs.append(
            {
                "recording": i,
                "keyword": label,
                "frames": len(r.features),
                "digits": list(r.digits),
                "path_equal": secure["path"] == path.tolist(),
                "found": bool(inside.size),
                "relative_error": rel,
                "seconds": seconds,
            }
        )
    return runs, worst


def dgk_rates(keypair, bits_l: int = 64, count: int = 200) -> dict[str, float]:
    """Seconds per DGK operation on one thread at this key size: a bit encryption, a zero
    test, and a blinded term of Bob's step 3 (the ledger counts it as one
    ``dgk_rerandomize``; it also raises the term to a random exponent below u and builds
    it from a few products, which the ledger does not count)."""
    from smc_hmm.crypto import Rng
    from smc_hmm.crypto.dgk import dgk_keypair_for

    pk, _ = keypair
    dgk_pk, dgk_sk = dgk_keypair_for(pk, bits_l)
    rng = Rng.system()
    dgk_sk.encrypt([1, 0], rng)
    _ = dgk_pk.table
    n, g, u = dgk_pk.n, dgk_pk.g, dgk_pk.u
    out = {}
    t0 = time.perf_counter()
    cts = dgk_sk.encrypt([i & 1 for i in range(count)], rng)
    out["dgk_encrypt"] = (time.perf_counter() - t0) / count
    t0 = time.perf_counter()
    dgk_sk.is_zero(cts)
    out["dgk_zero_test"] = (time.perf_counter() - t0) / count
    t0 = time.perf_counter()
    terms = [pow(c * g % n * c % n * c % n, 1 + rng.randbelow(u - 1), n) for c in cts]
    dgk_pk.rerandomize(terms, rng)
    out["dgk_rerandomize"] = (time.perf_counter() - t0) / count
    return out


def predict(cost, keypair, bits: int, scale: float, lanes: float, dgk: dict) -> float:
    """The cost model's time for ``scale`` times the ledger ``cost``, the parties in turn:
    its Paillier operations priced by :class:`~smc_hmm.cost.model.CostModel` at this
    machine's single-thread rates (the protocol's batches are per frame and round, below
    the lanes' threshold), its DGK operations at the rates of :func:`dgk_rates` spread
    over the lanes (``lanes``: their measured scaling), where the protocol runs them."""
    from smc_hmm.bench.rates import measure_rates
    from smc_hmm.cost.model import CostModel

    model = CostModel(measure_rates(*keypair))
    total = 0.0
    for party in cost.parties.values():
        ops = dict(party.get("ops", {}))
        dgk_ops = {op: int(ops.pop(op, 0) or 0) for op in DGK_OPS}
        total += model.compute_seconds(ops, bits)
        total += sum(dgk_ops[op] * dgk[op] for op in DGK_OPS) / lanes
    return scale * total


def run(args, say=lambda msg: None) -> BenchResult:
    from smc_hmm.bench.crypto import lane_scaling
    from smc_hmm.data.continuous import load_continuous_test

    recordings = load_continuous_test()
    labels, models = _models()
    if args.keyword not in models:
        raise InvalidInputError(f"--keyword must be one of {labels}")
    if not 0 <= args.recordings <= len(recordings):
        raise InvalidInputError(f"--recordings must be in [0, {len(recordings)}]")
    rows: list[Row] = []
    checks: dict[str, bool] = {}
    say("plaintext spotting of every bundled recording and keyword")
    quality = plaintext_quality(recordings, labels, models)
    for label, q in quality.items():
        rows.append(
            Row(
                f"plaintext {label}: detection / false alarms / boundary error",
                q["detection_rate"],
                None,
                "rate",
                note=f"{q['detected']}/{q['positives']} detected, {q['false_alarms']}/"
                f"{q['negatives']} false alarms, {q['found_elsewhere']} elsewhere; boundary "
                f"error mean {q['boundary_error_mean']:.2f} frames",
            )
        )
    overall = {
        "detection_rate": float(np.mean([q["detection_rate"] for q in quality.values()])),
        "false_alarm_rate": float(np.mean([q["false_alarm_rate"] for q in quality.values()])),
        "boundary_error_mean": float(np.mean([q["boundary_error_mean"] for q in quality.values()])),
    }
    rows.append(
        Row(
            "plaintext, mean over keywords: detection rate",
            overall["detection_rate"],
            None,
            "rate",
            note=f"false alarms {overall['false_alarm_rate']:.3f} per negative recording, "
            f"boundary error {overall['boundary_error_mean']:.2f} frames",
        )
    )
    three = [r for r in recordings if len(r.digits) == 3]
    timed = min(three, key=lambda r: abs(len(r.features) - args.frames))
    index = recordings.index(timed)
    say(f"generating a {args.key_bits}-bit key pair")
    keypair = throwaway_keypair(args.key_bits)
    if args.short_randomness:
        keypair[0].use_djn(alpha_bits=SHORT_ALPHA_BITS)
    extra: dict = {"quality": quality, "quality_overall": overall}
    with Compute.processes(args.workers) as compute:
        compute.warm_up()
        scaling = lane_scaling(compute, keypair[0].nsquare_mpz) if compute.parallel else 1.0
        # secure == plaintext
        if args.recordings:
            runs, worst = sweep(
                recordings[: args.recordings], labels, models, keypair, compute, say
            )
            equal = sum(r["path_equal"] for r in runs)
            rows.append(
                Row(
                    "secure path == plaintext path (recording i vs keyword i mod 10)",
                    float(equal),
                    float(len(runs)),
                    "recordings",
                    note=f"{sum(r['found'] for r in runs)} with the keyword found; paths equal "
                    "means detection and boundaries equal",
                    better=HIGHER,
                )
            )
            rows.append(
                Row("path score: largest relative error", worst, None, "rel.", limit=REL_TARGET)
            )
            checks["secure == plaintext"] = equal == len(runs)
            checks["relative error"] = worst <= REL_TARGET
            extra["sweep"] = runs
        # timing: one keyword and its filler
        say(
            f"timing: recording {index} ({'-'.join(labels[d] for d in timed.digits)}, "
            f"{len(timed.features)} frames) against {args.keyword}"
        )
        one = {args.keyword: models[args.keyword]}
        total, online, pre, result = _run(
            "spot", {"keywords": [args.keyword]}, timed.features, one, keypair, compute
        )
        from smc_hmm.hmm.spotting import compose, spot

        plain = spot(*compose(*models[args.keyword]), timed.features)
        secure = result["alice"][args.keyword]
        agree = secure["frames"] == (None if not plain.found else [plain.start, plain.end])
        checks["timed decision == plaintext"] = agree
        limit = SECONDS_TARGET if args.key_bits >= 2048 else None
        rows.append(
            Row(
                f"one keyword ({args.keyword}) + filler, {len(timed.features)} frames: total",
                total,
                None,
                "s",
                limit=limit,
                note=f"online {online:.1f} s, offline {pre:.1f} s; "
                f"{result.cost.bytes_total:,} bytes, {result.cost.rounds} rounds; secure "
                f"{secure['frames']}, plaintext "
                f"{None if not plain.found else [plain.start, plain.end]}",
            )
        )
        if limit is not None:
            checks["one keyword within the time target"] = total <= limit
        for party, data in result.cost.parties.items():
            for phase, p in data.get("phases", {}).items():
                ops = {k: v for k, v in p["ops"].items() if v}
                rows.append(
                    Row(
                        f"  {party} / {phase}",
                        float(p["wall"]),
                        None,
                        "s",
                        note=f"compute {p['compute']:.2f} s; "
                        + ", ".join(f"{k} {v:,}" for k, v in ops.items()),
                    )
                )
        extra["timed"] = {
            "recording": index,
            "digits": list(timed.digits),
            "frames": len(timed.features),
            "keyword": args.keyword,
            "seconds": total,
            "online_seconds": online,
            "offline_seconds": pre,
            "secure": secure,
            "plaintext": None if not plain.found else [plain.start, plain.end],
            "cost": result.cost.to_dict(),
        }
        one_cost = result.cost
        # all ten keywords at once, and the cost model's prediction
        if args.ten:
            say("all ten keywords at once")
            ten_total, ten_online, ten_pre, ten = _run(
                "spot", {"keywords": list(labels)}, timed.features, models, keypair, compute
            )
            wrong = [
                k
                for k in labels
                if ten["alice"][k]["found"] != spot(*compose(*models[k]), timed.features).found
            ]
            checks["ten keywords == plaintext"] = not wrong
            say("cost model: DGK and Paillier rates of this machine")
            dgk = dgk_rates(keypair)
            predicted = predict(
                one_cost, keypair, args.key_bits, len(labels), max(1.0, scaling), dgk
            )
            ratio = predicted / ten_total
            checks["cost model within 20%"] = abs(ratio - 1) <= PREDICTION_TOLERANCE
            rows.append(
                Row(
                    "all ten keywords at once: total",
                    ten_total,
                    None,
                    "s",
                    note=f"online {ten_online:.1f} s, offline {ten_pre:.1f} s; "
                    f"{ten.cost.bytes_total:,} bytes, {ten.cost.rounds} rounds; found "
                    f"{[k for k in labels if ten['alice'][k]['found']]}",
                )
            )
            rows.append(
                Row(
                    "cost model: predicted ten-keyword total (from the one-keyword ledger x 10)",
                    predicted,
                    None,
                    "s",
                    note=f"prediction / measured = {ratio:.2f} (tolerance "
                    f"{PREDICTION_TOLERANCE:.0%}); lane scaling {scaling:.2f}; DGK "
                    + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in dgk.items()),
                )
            )
            extra["ten"] = {
                "seconds": ten_total,
                "online_seconds": ten_online,
                "offline_seconds": ten_pre,
                "predicted_seconds": predicted,
                "prediction_ratio": ratio,
                "dgk_seconds_per_op": dgk,
                "found": {k: ten["alice"][k] for k in labels},
                "cost": ten.cost.to_dict(),
            }
        # speech mining: Bob's recording, Alice's keyword model
        if args.mining:
            say("speech mining: Bob's recording, Alice's keyword model")
            m_total, m_online, m_pre, mined = _run(
                "spot", {"direction": "mining"}, one, timed.features, keypair, compute
            )
            got = mined["alice"][args.keyword]
            checks["mining == plaintext"] = got["frames"] == secure["frames"]
            rows.append(
                Row(
                    f"speech mining ({args.keyword} as Alice's model): total",
                    m_total,
                    None,
                    "s",
                    note=f"online {m_online:.1f} s, offline {m_pre:.1f} s; "
                    f"{mined.cost.bytes_total:,} bytes; found {got['frames']}",
                )
            )
            extra["mining"] = {
                "seconds": m_total,
                "online_seconds": m_online,
                "offline_seconds": m_pre,
                "found": got,
                "cost": mined.cost.to_dict(),
            }
    rows.append(Row("machine: lane scaling (all lanes vs one)", scaling, None, "x"))
    extra.update({"checks": checks, "targets_met": all(checks.values()), "lane_scaling": scaling})
    return BenchResult(
        "spot",
        args.key_bits,
        rows,
        {
            "recordings": args.recordings,
            "frames": args.frames,
            "keyword": args.keyword,
            "workers": args.workers,
            "ten": args.ten,
            "mining": args.mining,
            "short_randomness": args.short_randomness,
        },
        extra=extra,
    )


def add_arguments(parser) -> None:
    add_key_arguments(parser)
    parser.add_argument(
        "--recordings",
        type=int,
        default=100,
        help="recordings of the secure == plaintext sweep (0: none; the bundled set has 120)",
    )
    parser.add_argument(
        "--frames", type=int, default=250, help="the timed 3-digit recording: closest to this"
    )
    parser.add_argument("--keyword", default="seven", help="the timed keyword")
    parser.add_argument(
        "--no-ten", dest="ten", action="store_false", help="skip all ten keywords at once"
    )
    parser.add_argument(
        "--no-mining", dest="mining", action="store_false", help="skip speech mining"
    )
    parser.add_argument(
        "--short-randomness",
        action="store_true",
        help=f"Alice's encryptions with {SHORT_ALPHA_BITS}-bit DJN exponents instead of "
        "bits(n)/2 (faster; rests on the stronger short-exponent assumption, "
        "smc_hmm/crypto/randomness.py)",
    )
    add_workers_argument(parser)
    add_json_argument(parser)


def main(args) -> int:
    from rich.console import Console

    check_key_bits(args)
    console = Console(width=max(150, Console().width))
    if args.short_randomness:
        console.print(
            "[yellow]warning: --short-randomness rests on the short-exponent assumption[/]"
        )
    result = run(args, say=lambda m: console.print(f"[dim]... {m}[/]"))
    result.print_table(console)
    for name, ok in result.extra["checks"].items():
        console.print(f"{name}: {'[green]ok[/]' if ok else '[red]MISSED[/]'}")
    return finish(args, result, console, met=result.extra["targets_met"])
