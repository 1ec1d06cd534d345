"""``smc-hmm bench match``: private audio matching (thesis 003, 2.2.2; ``docs/matching.md``).

The registered ``match`` protocol (``protocols/match.py``, found by name) against the
plaintext matcher (:mod:`smc_hmm.data.match`) on the bundled collection of 200 FSDD
recordings and the bundled noisy queries.  Parts, each optional:

1. **accuracy** (plaintext, every bundled query): per SNR (clean, 20, 10, 0 dB) the top-1
   rate (the answer names the snippet's recording), the argmax's top-1 without the
   threshold, the offset error and the false-match rate on excerpts of recordings not in
   the collection, for the exact mode and the approximate one, with their comparisons;
2. **speed**: ``--queries`` in-collection 10 dB queries (spread over the snippet lengths)
   against ``--recordings`` recordings in every mode, in-process, two compute lanes per
   party, every randomizer drawn in an offline phase once the key is known: offline and
   online seconds, comparisons, traffic, and the secure answer against the plaintext one;
3. **growth**: one query against the first 50, 100 and 200 recordings (``--growth``):
   seconds per query and per window; the log-log slope must be at most 1.1 (linear);
4. **Dask** (``--dask``): the same query with Bob's work on a ``LocalCluster`` of two
   workers against his local lanes;
5. **sweep** (``--sweep N``): N queries (all SNRs, in and not in the collection) in every
   mode at ``--sweep-key-bits``: every secure answer must equal the plaintext one;
6. **extrapolation** (``--extrapolate R``): the cost model (primitive rates measured at the
   key size) scales the speed run's operations to R recordings, one machine and a cluster
   of ``--cluster-workers`` workers for Bob's multi-exponentiations.

Targets: secure == plaintext on every query; plaintext top-1 >= 95% at 10 dB; time per
query < 30 s against 200 recordings at 2048 bits (the exact mode's slowest timed query);
growth linear or better.  The exit status is 0 only if every measured target is met.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import numpy as np

from smc_hmm.bench import common
from smc_hmm.data.match import (
    CLEAN,
    Collection,
    Query,
    candidates,
    load_bundled_collection,
    load_bundled_queries,
    load_match_manifest,
    match,
)
from smc_hmm.errors import InvalidInputError
from smc_hmm.protocol import find

SNRS = (CLEAN, "20", "10", "0")
MODES = ("exact", "approx")
#: the acceptance targets
SECONDS_TARGET = 30.0
#: a query against 1,000 recordings at 2048 bits: with the native kernel, without it; the
#: extrapolation to 10,000 recordings with the kernel
THOUSAND_TARGET = 10.0
THOUSAND_TARGET_NO_KERNEL = 30.0
EXTRAPOLATION_TARGET = 120.0
TOP1_TARGET = 0.95
SLOPE_LIMIT = 1.1
#: the random order whose prefixes are the growth measurement's collections
GROWTH_SEED = 0


def add_arguments(parser) -> None:
    with common.common_arguments(parser, workers=True):
        parser.add_argument(
            "--queries", type=common.bounded(0, 1000), default=3, help="timed queries per mode"
        )
        parser.add_argument(
            "--collection",
            default=None,
            metavar="DIR",
            help="a folder of WAV files as Bob's collection (default: the bundled 200); the "
            "timed queries are then 10 dB excerpts of its own recordings",
        )
        parser.add_argument(
            "--recordings",
            type=common.bounded(1, 100_000),
            default=None,
            help="collection size (default: all of it; the bundled one has 200)",
        )
        parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
        parser.add_argument(
            "--stride", type=common.bounded(2, 16), default=2, help="the approximate mode's stride"
        )
        parser.add_argument(
            "--growth",
            default="50,100,200",
            help="collection sizes of the growth measurement ('' for none)",
        )
        parser.add_argument(
            "--sweep",
            type=common.bounded(0, 10_000),
            default=0,
            help="queries of the equality sweep",
        )
        parser.add_argument(
            "--sweep-key-bits",
            type=common.bounded(256, 8192),
            default=None,
            help="key size of the sweep (default: --key-bits)",
        )
        _add_measurement_arguments(parser)


def _add_measurement_arguments(parser) -> None:
    """What is measured beside the timed queries: accuracy, Dask, the extrapolation."""
    parser.add_argument("--skip-accuracy", action="store_true", help="no plaintext accuracy")
    parser.add_argument("--skip-speed", action="store_true", help="no timed queries")
    parser.add_argument(
        "--accuracy-queries",
        type=common.bounded(1, 200),
        default=200,
        help="queries per SNR and kind (<= 200)",
    )
    parser.add_argument("--dask", action="store_true", help="Bob on a 2-worker LocalCluster too")
    parser.add_argument(
        "--extrapolate",
        type=common.bounded(0, 10_000_000),
        default=10_000,
        help="recordings to extrapolate to (0: none)",
    )
    parser.add_argument(
        "--cluster-workers",
        type=common.bounded(1, 4096),
        default=16,
        help="Bob's workers in the extrapolation",
    )


def _params(mode: str, stride: int) -> dict:
    return {"mode": mode, "stride": stride} if mode == "approx" else {"mode": mode}


# -- 1. plaintext accuracy ----------------------------------------------------------------------


def accuracy(collection, modes, stride: int, per: int, say) -> dict:
    """Per mode and SNR: top-1 with the threshold, the argmax's top-1, offset errors (frames)
    and the false-match rate, over ``per`` queries of each kind."""
    protocol = find("match")
    out = {}
    for mode in modes:
        params = protocol.params(_params(mode, stride))
        threshold, pool = params.threshold_value(), params.pool
        rows = {}
        for snr in SNRS:
            say(f"accuracy: {mode}, {snr}{'' if snr == CLEAN else ' dB'}")
            inside = load_bundled_queries(snr, inside=True)[:per]
            outside = load_bundled_queries(snr, inside=False)[:per]
            right = argmax_right = 0
            errors, comparisons = [], []
            for q in inside:
                res = match(q.frames, collection, quant=params.quant, threshold=-2.0, stride=pool)
                unit = params.quant.score_unit(len(q.frames), collection.bands) * pool
                hit = res.recording == q.recording
                argmax_right += hit
                right += hit and res.value > threshold * unit
                if hit:
                    errors.append(abs(res.offset - q.offset))
                comparisons.append(_comparisons(params, len(q.frames), collection))
            false = sum(
                match(
                    q.frames, collection, quant=params.quant, threshold=threshold, stride=pool
                ).matched
                for q in outside
            )
            rows[snr] = {
                "queries": len(inside),
                "top1": right / len(inside),
                "argmax_top1": argmax_right / len(inside),
                "offset_error_median": float(np.median(errors)) if errors else None,
                "offset_error_max": float(np.max(errors)) if errors else None,
                "false_match": false / len(outside),
                "outside_queries": len(outside),
                "comparisons_mean": float(np.mean(comparisons)),
            }
        out[mode] = {"threshold": threshold, "stride": pool, "snr": rows}
    return out


def _comparisons(params, length: int, collection) -> int:
    """The tournament's comparisons: one per candidate after the threshold."""
    return len(candidates(collection.lengths, length, params.pool))


def accuracy_rows(acc: dict) -> list[common.Row]:
    rows = []
    for mode, data in acc.items():
        for snr in SNRS:
            r = data["snr"][snr]
            target = mode == "exact" and snr == "10"
            rows.append(
                common.Row(
                    f"{mode}: plaintext top-1 error at {snr}{'' if snr == CLEAN else ' dB'}",
                    1 - r["top1"],
                    None,
                    "rate",
                    limit=1 - TOP1_TARGET if target else None,
                    note=f"top-1 {r['top1']:.1%} (argmax alone {r['argmax_top1']:.1%}); "
                    f"false matches {r['false_match']:.1%}; offset error median "
                    f"{r['offset_error_median']} frames; {r['comparisons_mean']:.0f} "
                    f"comparisons; threshold {data['threshold']}",
                )
            )
    return rows


# -- 2. speed, 3. growth, 4. Dask, 5. sweep -----------------------------------------------------


def _seconds_limit(recordings: int) -> float | None:
    """The time target of one exact query against ``recordings`` recordings."""
    from smc_hmm.crypto import native

    if recordings >= 1000:
        return THOUSAND_TARGET if native.kernel() is not None else THOUSAND_TARGET_NO_KERNEL
    return SECONDS_TARGET if recordings >= 200 else None


def _extrapolation_limit(recordings: int, key_bits: int) -> float | None:
    """The target of the extrapolation to 10,000 recordings (2048 bits, the native kernel)."""
    from smc_hmm.crypto import native

    if recordings < 10_000 or key_bits < 2048 or native.kernel() is None:
        return None
    return EXTRAPOLATION_TARGET


def timed_queries(collection, count: int):
    """``count`` 10 dB in-collection queries spread over the snippet lengths (shortest to
    longest), from recordings in ``collection``."""
    pool = [q for q in load_bundled_queries("10", inside=True) if q.recording < len(collection)]
    if not pool:
        raise InvalidInputError("no bundled query comes from this collection")
    pool.sort(key=lambda q: (len(q.frames), q.start))
    picks = (
        np.linspace(0, len(pool) - 1, count).round().astype(int) if count > 1 else [len(pool) // 2]
    )
    return [pool[i] for i in picks]


def folder_queries(folder, collection, count: int, seed: int = 0) -> list[Query]:
    """``count`` timed queries cut from the collection's own recordings (a folder of WAV
    files): 0.25-0.5 s excerpts of recordings spread over the collection, with white
    Gaussian noise at 10 dB SNR, featurised as Alice would (the bundled queries' recipe,
    ``scripts/make_match_data.py``)."""
    from smc_hmm.features import read_wav

    rng = np.random.default_rng(seed)
    spec = collection.spectrogram
    out = []
    picks = np.linspace(0, len(collection) - 1, count).round().astype(int) if count else []
    for r in picks:
        signal = read_wav(Path(folder) / f"{collection.ids[r]}.wav", spec.sample_rate)
        samples = min(signal.size, int(rng.uniform(0.25, 0.5) * spec.sample_rate))
        start = int(rng.integers(0, signal.size - samples + 1))
        clean = signal[start : start + samples]
        noise = rng.standard_normal(samples) * np.sqrt(np.mean(clean**2) / 10)
        out.append(
            Query(
                spec.frames(clean + noise),
                "10",
                True,
                int(r),
                start / spec.hop_length,
                collection.ids[r],
                start,
                samples,
            )  # fmt: skip
        )
    return out


def secure_run(keypair, mode: str, stride: int, frames, collection, compute, bob_compute=None):
    """One in-process run after an offline phase: (RunResult, offline seconds, online s)."""
    params = _params(mode, stride)
    return common.two_party_run(
        "match",
        params,
        frames,
        collection,
        keypair,
        compute,
        timeout=3600,
        bob_compute=bob_compute,
        offline=True,
    )


def plain_answer(mode: str, stride: int, frames, collection) -> dict:
    """Alice's answer in the clear: the match protocol's ``plaintext`` hook."""
    protocol = find("match")
    params = protocol.params(_params(mode, stride))
    return protocol.plaintext(params, {"alice": frames, "bob": collection})["alice"]


def _run_record(result, offline, online, plain, query) -> dict:
    alice = result["alice"]
    return {
        "frames": len(query.frames),
        "source": query.source,
        "snr": query.snr,
        "secure": alice["match"],
        "offset": alice["offset_frames"],
        "plaintext": plain["match"],
        "plaintext_offset": plain["offset_frames"],
        "equal": (alice["match"], alice["offset_frames"])
        == (plain["match"], plain["offset_frames"]),
        "candidates": alice["candidates"],
        "offline_s": offline,
        "online_s": online,
        "total_s": offline + online,
        "rounds": result.cost.rounds,
        "bytes": result.cost.bytes_total,
    }


def speed(
    keypair, modes, stride, collection, queries, compute, say
) -> tuple[list[common.Row], dict]:
    rows, out, reports = [], {}, {}
    for mode in modes:
        runs = []
        for q in queries:
            say(f"speed: {mode}, {len(q.frames)} frames against {len(collection)} recordings")
            result, offline, online = secure_run(
                keypair, mode, stride, q.frames, collection, compute
            )
            plain = plain_answer(mode, stride, q.frames, collection)
            runs.append(_run_record(result, offline, online, plain, q))
            reports.setdefault(mode, result.cost)
        worst = max(r["total_s"] for r in runs)
        rows.append(
            common.Row(
                f"{mode}: seconds per query, {len(collection)} recordings (slowest of {len(runs)})",
                worst,
                None,
                "s",
                limit=_seconds_limit(len(collection)) if mode == "exact" else None,
                note="; ".join(
                    f"{r['frames']} frames: {r['total_s']:.1f} s ({r['online_s']:.1f} online), "
                    f"{r['candidates']} candidates"
                    for r in runs
                ),
            )
        )
        rows.append(
            common.Row(
                f"{mode}: timed answers that differ from plaintext",
                sum(not r["equal"] for r in runs),
                None,
                "queries",
                limit=0,
            )
        )
        out[mode] = runs
    return rows, {"runs": out, "reports": {m: r.to_dict() for m, r in reports.items()}}


def growth(keypair, sizes, collection, compute, say) -> tuple[list[common.Row], dict]:
    """One middle-length query against nested collections of ``sizes`` recordings: the
    prefixes of one fixed random order of the collection (so every size holds recordings
    of the same lengths on average), the query cut from a recording of the smallest."""
    order = np.random.default_rng(GROWTH_SEED).permutation(len(collection))
    smallest = set(order[: min(sizes)].tolist())
    pool = [q for q in load_bundled_queries("10", inside=True) if q.recording in smallest]
    pool.sort(key=lambda q: (len(q.frames), q.start))
    query = pool[len(pool) // 2]
    points = []
    for size in sizes:
        say(f"growth: {size} recordings")
        sub = collection.take(sorted(order[:size].tolist()))
        result, offline, online = secure_run(keypair, "exact", 2, query.frames, sub, compute)
        plain = plain_answer("exact", 2, query.frames, sub)
        record = _run_record(result, offline, online, plain, query)
        record["recordings"] = size
        points.append(record)
    xs = np.log([p["recordings"] for p in points])
    ys = np.log([p["total_s"] for p in points])
    slope = float(np.polyfit(xs, ys, 1)[0]) if len(points) > 1 else 0.0
    note = "; ".join(
        f"{p['recordings']}: {p['total_s']:.2f} s, {p['candidates']} windows, "
        f"{1000 * p['total_s'] / max(1, p['candidates']):.1f} ms/window"
        for p in points
    )
    rows = [
        common.Row(
            "growth: log-log slope of seconds vs recordings",
            slope,
            None,
            "",
            limit=SLOPE_LIMIT,
            note=note,
        ),
        common.Row(
            "growth: answers that differ from plaintext",
            sum(not p["equal"] for p in points),
            None,
            "queries",
            limit=0,
        ),
    ]
    return rows, {"query_frames": len(query.frames), "points": points, "slope": slope}


def dask_comparison(keypair, collection, compute, say) -> tuple[list[common.Row], dict]:
    """Bob on a 2-worker LocalCluster against his local lanes, one query."""
    from distributed import Client, LocalCluster

    from smc_hmm.compute_dask import DaskCompute

    query = timed_queries(collection, 1)[0]
    say("dask: Bob's lanes on this machine")
    local, _, local_online = secure_run(keypair, "exact", 2, query.frames, collection, compute)
    say("dask: Bob on a LocalCluster of 2 workers")
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dask = DaskCompute(client)
        dask.warm_up()
        with dask.session() as session:
            remote, _, remote_online = secure_run(
                keypair, "exact", 2, query.frames, collection, compute, session
            )
    scores = {
        name: r.cost.parties["bob"]["phases"]["scores"]["wall"]
        for name, r in (("local", local), ("dask", remote))
    }
    rows = [
        common.Row(
            "dask: Bob's scoring (multi-exponentiations), 2-worker LocalCluster vs local lanes",
            scores["dask"],
            scores["local"],
            "s",
            better=common.LOWER,
            note=f"whole online run {remote_online:.2f} s vs {local_online:.2f} s; answers "
            f"{remote['alice']['match']} / {local['alice']['match']}",
        )
    ]
    return rows, {
        "scores_s": scores,
        "online_s": {"local": local_online, "dask": remote_online},
        "equal": remote["alice"] == local["alice"],
    }


def sweep(
    keypair, modes, stride, collection, count: int, compute, say
) -> tuple[list[common.Row], dict]:
    """``count`` queries cycling over SNRs and kinds; every secure answer against plaintext."""
    kinds = [(snr, inside) for snr in SNRS for inside in (True, False)]
    pools = {k: load_bundled_queries(k[0], inside=k[1]) for k in kinds}
    chosen = [pools[kinds[i % len(kinds)]][i // len(kinds)] for i in range(count)]
    rows, out = [], {}
    for mode in modes:
        records = []
        for i, q in enumerate(chosen):
            say(f"sweep: {mode}, query {i + 1}/{count}")
            result, offline, online = secure_run(
                keypair, mode, stride, q.frames, collection, compute
            )
            plain = plain_answer(mode, stride, q.frames, collection)
            records.append(_run_record(result, offline, online, plain, q))
        differ = sum(not r["equal"] for r in records)
        rows.append(
            common.Row(
                f"sweep, {mode}: secure answers that differ from plaintext",
                differ,
                None,
                "queries",
                limit=0,
                note=f"{count} queries at {keypair[0].bits} bits, median "
                f"{statistics.median(r['total_s'] for r in records):.1f} s each",
            )
        )
        out[mode] = records
    return rows, out


# -- 6. extrapolation -------------------------------------------------------------------------


DGK_OPS = ("dgk_encrypt", "dgk_rerandomize", "dgk_zero_test")


def dgk_seconds(keypair, bits: int = 32, batch: int = 256) -> dict[str, float]:
    """Seconds per DGK operation at this key's size (the cost model prices Paillier
    operations only): the best of three batches of each."""
    from smc_hmm.crypto import Rng
    from smc_hmm.crypto.dgk import dgk_keypair_for

    dgk_pk, dgk_sk = dgk_keypair_for(keypair[0], bits)
    rng = Rng()
    values = [i & 1 for i in range(batch)]
    cts = dgk_sk.encrypt(values, rng)
    calls = {
        "dgk_encrypt": lambda: dgk_sk.encrypt(values, rng),
        "dgk_rerandomize": lambda: dgk_pk.rerandomize(cts, rng),
        "dgk_zero_test": lambda: dgk_sk.is_zero(cts),
    }
    out = {}
    for op, fn in calls.items():
        fn()
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        out[op] = best / batch
    return out


def extrapolate(
    keypair, run: dict, report: dict, recordings: int, target: int, workers: int
) -> tuple[list[common.Row], dict]:
    """One query against ``target`` recordings, from a measured one against ``recordings``:
    (a) the measured seconds scaled linearly (the growth rows measure the linearity);
    (b) the cost model -- Paillier operations at primitive rates measured now, DGK
    operations at DGK rates measured now, times the scale -- per party, and with Bob's
    multi-exponentiations (his per-window work) on ``workers`` cluster workers."""
    scale = target / recordings
    parties = report["parties"]
    (alice, rest, scoring), dgk = _modelled_seconds(keypair, parties, scale)
    # the DGK tournament's rounds grow with log2 of the candidates (4 messages a round);
    # the garbled maximum is one circuit whatever their number
    dgk_run = any(parties[p]["ops"].get(op) for p in parties for op in DGK_OPS)
    extra_rounds = 4 * math.ceil(math.log2(scale)) if scale > 1 and dgk_run else 0
    data = {
        "recordings": target,
        "from_recordings": recordings,
        "query_frames": run["frames"],
        "candidates": round(run["candidates"] * scale),
        "measured_linear_s": run["total_s"] * scale,
        "model": {
            "alice_s": alice,
            "bob_tournament_s": rest,
            "bob_scoring_s": scoring,
            "bob_scoring_cluster_s": scoring / workers,
            "one_machine_s": alice + rest + scoring,
            "cluster_s": alice + rest + scoring / workers,
        },
        "cluster_workers": workers,
        "dgk_seconds": dgk,
        "rounds": report["totals"]["rounds"] + extra_rounds,
        "bytes": report["totals"]["bytes"] * scale,
    }
    return _extrapolation_rows(data, scale, keypair[0].bits), data


def _modelled_seconds(keypair, parties: dict, scale: float):
    """((Alice's, Bob's maximum's, Bob's multi-exponentiations') seconds, DGK seconds per
    operation): the cost model's at rates measured now, times ``scale``."""
    from smc_hmm.bench.rates import measure_rates
    from smc_hmm.cost.model import CostModel

    model, dgk = CostModel(measure_rates(*keypair)), dgk_seconds(keypair)

    def seconds(ops: dict) -> float:
        return model.compute_seconds(ops) + sum(dgk[op] * ops.get(op, 0) for op in DGK_OPS)

    alice = scale * seconds(parties["alice"]["ops"])
    scoring = scale * seconds(parties["bob"]["phases"].get("scores", {}).get("ops", {}))
    rest = scale * seconds(parties["bob"]["ops"]) - scoring
    return (alice, rest, scoring), dgk


def _extrapolation_rows(data: dict, scale: float, key_bits: int) -> list[common.Row]:
    """The measured query scaled linearly (against the target), and the model's cluster
    against its one machine."""
    target, workers, model = data["recordings"], data["cluster_workers"], data["model"]
    note = (
        f"{data['query_frames']}-frame query, ~{data['candidates']:,} candidates; model: Alice "
        f"{model['alice_s']:.0f} s, Bob's maximum {model['bob_tournament_s']:.0f} s, Bob's "
        f"multi-exponentiations {model['bob_scoring_s']:.0f} s; {data['rounds']} rounds, "
        f"{data['bytes'] / 1e6:.0f} MB"
    )
    return [
        common.Row(
            f"extrapolated: one query, {target:,} recordings, one machine (measured x {scale:g})",
            data["measured_linear_s"],
            None,
            "s",
            limit=_extrapolation_limit(target, key_bits),
            note=note,
        ),
        common.Row(
            f"extrapolated: one query, {target:,} recordings, Bob's multi-exponentiations on "
            f"{workers} workers (model)",
            model["cluster_s"],
            model["one_machine_s"],
            "s",
            better=common.LOWER,
            note="baseline: the model's one machine; the maximum stays on Bob's machine",
        ),
    ]


def _checked(args):
    """(modes, growth sizes, the full collection) once every option is in range."""
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        raise InvalidInputError(f"--modes takes a comma-separated subset of {', '.join(MODES)}")
    full = (
        load_bundled_collection() if args.collection is None else Collection.load(args.collection)
    )
    if args.collection is not None and not Path(args.collection).is_dir():
        raise InvalidInputError("--collection takes a folder of WAV files")
    if args.collection is not None and (args.sweep or not args.skip_accuracy):
        raise InvalidInputError(
            "the accuracy and the sweep use the bundled queries, cut from the bundled "
            "collection: with --collection add --skip-accuracy (and no --sweep)"
        )
    if args.recordings is None:
        args.recordings = len(full)
    if not 1 <= args.recordings <= len(full) or args.queries < 0 or args.sweep < 0:
        raise InvalidInputError(
            f"--recordings must be in [1, {len(full)}]; --queries and --sweep >= 0"
        )
    if not 2 <= args.stride <= 64 or not 1 <= args.accuracy_queries <= 200:
        raise InvalidInputError("--stride must be in [2, 64] and --accuracy-queries in [1, 200]")
    sizes = sorted({int(s) for s in args.growth.split(",") if s.strip()})
    if any(not 1 <= s <= len(full) for s in sizes):
        raise InvalidInputError(f"--growth sizes must be in [1, {len(full)}]")
    if args.sweep_key_bits is not None:
        from smc_hmm.crypto import check_key_bits as check

        check(args.sweep_key_bits, insecure=args.insecure, hints=common.KEY_FLAGS)
    return modes, sizes, full


def _secure_parts(args, modes, sizes, full, say) -> tuple[list[common.Row], dict]:
    """Parts 2-6: every part that runs the protocol, on two compute lanes per party."""
    rows: list[common.Row] = []
    extra: dict = {}
    collection = full.head(args.recordings)
    keypair = common.bench_keypair(args, say)
    with common.lanes(args.workers) as compute:
        if not args.skip_speed and args.queries:
            if args.collection is None:
                queries = timed_queries(collection, args.queries)
            else:
                queries = folder_queries(args.collection, collection, args.queries)
            r, extra["speed"] = speed(
                keypair, modes, args.stride, collection, queries, compute, say
            )
            rows += r
            if args.extrapolate and "exact" in extra["speed"]["reports"]:
                first, report = (
                    extra["speed"]["runs"]["exact"][0],
                    extra["speed"]["reports"]["exact"],
                )
                r, extra["extrapolation"] = extrapolate(
                    keypair, first, report, len(collection), args.extrapolate, args.cluster_workers
                )
                rows += r
        if sizes:
            r, extra["growth"] = growth(keypair, sizes, full, compute, say)
            rows += r
        if args.dask:
            r, extra["dask"] = dask_comparison(keypair, collection, compute, say)
            rows += r
        if args.sweep:
            bits = args.sweep_key_bits or args.key_bits
            keys = keypair if bits == args.key_bits else common.throwaway_keypair(bits)
            r, extra["sweep"] = sweep(keys, modes, args.stride, full, args.sweep, compute, say)
            rows += r
    return rows, extra


def main(args) -> int:
    console, say = common.start(args)
    modes, sizes, full = _checked(args)
    rows: list[common.Row] = []
    extra: dict = {"manifest": load_match_manifest()}
    if not args.skip_accuracy:
        extra["accuracy"] = accuracy(full, modes, args.stride, args.accuracy_queries, say)
        rows += accuracy_rows(extra["accuracy"])
    secure_rows, secure_extra = _secure_parts(args, modes, sizes, full, say)
    rows += secure_rows
    extra.update(secure_extra)
    params = {
        "recordings": args.recordings,
        "queries": args.queries,
        "modes": modes,
        "stride": args.stride,
        "growth": sizes,
        "sweep": args.sweep,
        "sweep_key_bits": args.sweep_key_bits or args.key_bits,
        "workers": args.workers,
        "dask": args.dask,
        "quantisation": find("match").params({}).quant.to_dict(),
    }
    result = common.BenchResult("match", args.key_bits, rows, params, extra=extra)
    return common.finish(args, result, console, table=True)
