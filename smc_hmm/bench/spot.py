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
  plaintext path exactly (so the same detection and boundaries), the score to 1e-5
  relative (the garbled default computes on rounded frames and weights).
* **Timing**: the 3-digit recording closest to ``--frames`` frames against ``--keyword``
  and its filler, the ``spot`` protocol in-process (two lanes per party, randomizers
  precomputed after the key exchange): total (offline + online) and online seconds,
  bytes, rounds, the cost per phase; target at 2048 bits 8 s with the native kernel and
  20 s without (ten keywords at once: 60 s with the kernel).
* **All ten keywords at once** on that recording: one ``spot`` run with the ten
  composites in lockstep; its cost, and the cost model's prediction of it from the
  one-keyword run's ledger times ten (:func:`predict`: Paillier operations priced by
  :class:`smc_hmm.cost.CostModel` at this machine's single-thread rates, the offline
  randomizers and the DGK operations at rates measured here, spread over the lanes where
  the protocol runs them), checked within 20% of the measured total.
* **Speech mining** (2.2.3 (b)): the same recording as Bob's, the keyword model as Alice's.

Commands and numbers: ``docs/spotting.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from smc_hmm.bench import common
from smc_hmm.bench.common import lanes
from smc_hmm.errors import InvalidInputError

#: targets at 2048 bits on an idle two-core machine: one keyword with the native kernel
#: and without it (:mod:`smc_hmm.crypto.native`), ten keywords at once with the kernel
SECONDS_TARGET = 8.0
SECONDS_TARGET_NO_KERNEL = 20.0
TEN_TARGET = 60.0
PREDICTION_TOLERANCE = 0.20
#: a path score's relative error: the garbled default computes on features rounded to
#: 2^-(fs+1) and weights to 2^-(f-fs+1) (protocols.stages.decoding.score_error_bound bounds it
#: per model; on the bundled recordings it stays below this)
REL_TARGET = 1e-5
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
#: the garbled stage's work in the ledger, which the two sides do side by side
GARBLED_OPS = ("and_gates", "gc_layers", "garbled_bytes")
#: the multi-exponentiations of the emission stage, which run on the compute lanes, and
#: the key holder's decryptions, whose two CRT halves run on two threads
LANE_OPS = ("multiexp_bits", "multiexp_terms", "multiexp_mults", "native_mults", "decrypt")


def _models():
    from smc_hmm.data.continuous import load_spotting_models

    return load_spotting_models()


def plaintext_quality(recordings, labels, models) -> dict:
    """Per keyword: detection, false alarms, boundary errors (frames) over ``recordings``."""
    from smc_hmm.hmm.spotting import compose, spot

    out = {}
    for digit, label in enumerate(labels):
        composite, layout = compose(**models[label])
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

    composite, layout = compose(**models[label])
    k = layout.keyword_states
    return {"model": composite, "rows": list(layout.rows), "segment": [k.start, k.stop]}, layout


def _run(name, params, alice, bob, keypair, compute, offline=True):
    """One in-process run, by default after its offline phase; (total s, online s,
    offline s, result)."""
    result, pre, online = common.two_party_run(
        name, params, alice, bob, keypair, compute, timeout=3600, offline=offline
    )
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


def randomizer_rates(keypair, count: int = 64) -> dict[str, float]:
    """Seconds per Paillier randomizer on one thread, as the offline phase draws them
    (:mod:`smc_hmm.runtime.offline`): Alice's from her key's own randomizer (CRT), Bob's
    from a public-key DJN randomizer."""
    from smc_hmm.crypto.randomness import public_randomizer

    pk, _ = keypair
    out = {}
    for party, source in (("alice", pk.randomizer), ("bob", public_randomizer(int(pk.n)))):
        source.draw(2)  # its fixed-base tables, built once per key
        t0 = time.perf_counter()
        source.draw(count)
        out[party] = (time.perf_counter() - t0) / count
    return out


def predict(cost, keypair, bits: int, scale: float, lanes: float, rates: dict):
    """The cost model's time for ``scale`` times the ledger ``cost``: the parties in turn,
    but for the garbled stage, where they work side by side; plus the offline phase.
    ``rates``: ``dgk`` (:func:`dgk_rates`), ``draws`` (:func:`randomizer_rates`) and
    ``sides`` (:func:`smc_hmm.bench.rates.garbling_sides`).

    * Paillier operations at this machine's single-thread rates
      (:class:`~smc_hmm.cost.model.CostModel`, which prices scalar multiplications by their
      exponents' bits and inversions): the protocol runs them in the party's own thread,
      but for the emission stage's multi-exponentiations and the decryptions
      (:data:`LANE_OPS`), which it spreads over the lanes (two threads).
    * Every encryption and re-randomisation took its randomizer from the offline phase:
      online it is one multiplication (priced as an addition); the randomizer costs its
      draw (``draws``) spread over the lanes, where the offline phase draws them.
    * DGK operations at the rates of ``dgk``, spread over the lanes (``lanes``: their
      measured scaling), where the protocol runs them.
    * The garbled circuits of each phase at the larger of the two sides' times: the
      garbler garbles the gates and sends the tables while the evaluator receives and
      evaluates the step before (the ledger counts the gates, layers and bytes once, at
      the garbler).  Gates and layers at the rates of ``sides``; a byte of tables at
      each side's price in the ledger's own ``recursion`` phase (:func:`_byte_prices`).
      ``scale`` composites in lockstep are one chain of circuits ``scale`` times wider,
      so its AND gates and bytes scale and its layers do not.  The random OTs of the
      setup are priced with the Paillier operations (one side).
    * The ``setup`` and ``emissions`` phases do not scale: Alice's frames are one
      recording's, and the composites' emission rows are one table (``share_rows``: the
      bundled composites are the same 81 rows), so their emissions, Alice's inputs of them
      (the bound inputs circuits, which the ledger counts to ``emissions``) and the random
      OTs those take are computed once for every composite."""
    from smc_hmm.bench.rates import measure_rates
    from smc_hmm.cost.model import CostModel

    model = CostModel(measure_rates(*keypair))
    total, garbled = 0.0, {}
    for name, party in cost.parties.items():
        ops: dict[str, int] = {}
        for phase, spent in party.get("phases", {}).items():
            factor = 1 if phase in ("setup", "emissions") else scale
            for op, k in spent.get("ops", {}).items():
                into = garbled.setdefault(phase, {}) if op in GARBLED_OPS else ops
                into[op] = into.get(op, 0) + (1 if op == "gc_layers" else factor) * int(k or 0)
        dgk_ops = {op: int(ops.pop(op, 0) or 0) for op in DGK_OPS}
        drawn = int(ops.pop("encrypt", 0) or 0) + int(ops.pop("rerandomize", 0) or 0)
        ops["add"] = int(ops.get("add", 0) or 0) + drawn
        spread = {op: ops.pop(op) for op in LANE_OPS if op in ops}
        total += model.compute_seconds(ops, bits) + model.compute_seconds(spread, bits) / lanes
        total += drawn * rates["draws"][name] / lanes
        total += sum(dgk_ops[op] * rates["dgk"][op] for op in DGK_OPS) / lanes
    sides = _byte_prices(cost, rates["sides"])
    for ops in garbled.values():
        total += max(sum(k * side[op] for op, k in ops.items()) for side in sides.values())
    return total


def _byte_prices(cost, sides: dict, phase: str = "recursion") -> dict[str, dict]:
    """``sides`` with each side's seconds per byte of garbled tables (``garbled_bytes``):
    its compute time in the ledger's ``phase``, less the gates and layers at their
    rates, per byte of the phase's tables.  A microbenchmark of the tables' trip through
    the wire codec read 0.45 or 1.55 ns a byte on the garbler's side, as the allocator
    reused buffers or gave fresh pages; the protocol's own steps are what the larger run
    repeats.  A ledger without one garbler in ``phase`` prices the bytes at zero."""
    parties = cost.parties
    garbling = [n for n, p in parties.items() if _phase(p, phase)["ops"].get("and_gates")]
    if len(garbling) != 1 or len(parties) != 2:  # no garbled phase to calibrate on
        return {side: rate | {"garbled_bytes": 0.0} for side, rate in sides.items()}
    garbler, evaluator = garbling[0], next(n for n in parties if n != garbling[0])
    ops = {op: int(_phase(parties[garbler], phase)["ops"].get(op) or 0) for op in GARBLED_OPS}
    out = {}
    for side, name in (("garbler", garbler), ("evaluator", evaluator)):
        rate = sides[side]
        rest = float(_phase(parties[name], phase).get("compute", 0.0)) - sum(
            ops[op] * rate[op] for op in ("and_gates", "gc_layers")
        )
        out[side] = rate | {"garbled_bytes": max(rest, 0.0) / max(ops["garbled_bytes"], 1)}
    return out


def _phase(party: dict, phase: str) -> dict:
    return party.get("phases", {}).get(phase, {"ops": {}})


def _plain_frames(found):
    """A plaintext spotting's [start, end], or None without a detection."""
    return None if not found.found else [found.start, found.end]


@dataclass
class _Spot:
    """What the steps of one spotting benchmark share: its options, the keywords, the key
    pair, the timed recording, and what the steps add (the rows, the checks, the JSON's
    parts)."""

    args: Any
    say: Callable[[str], None]
    labels: list
    models: dict
    keypair: tuple = ()
    timed: Any = None
    index: int = 0
    rows: list[common.Row] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


def _quality_rows(s: _Spot, recordings) -> None:
    """Plaintext spotting of every bundled recording and keyword, and the mean."""
    s.say("plaintext spotting of every bundled recording and keyword")
    quality = plaintext_quality(recordings, s.labels, s.models)
    for label, q in quality.items():
        s.rows.append(
            common.Row(
                f"plaintext {label}: detection / false alarms / boundary error",
                q["detection_rate"],
                None,
                "rate",
                note=f"{q['detected']}/{q['positives']} detected, {q['false_alarms']}/"
                f"{q['negatives']} false alarms, {q['found_elsewhere']} elsewhere; boundary "
                f"error mean {q['boundary_error_mean']:.2f} frames",
            )
        )
    keys = ("detection_rate", "false_alarm_rate", "boundary_error_mean")
    overall = {key: float(np.mean([q[key] for q in quality.values()])) for key in keys}
    s.rows.append(
        common.Row(
            "plaintext, mean over keywords: detection rate",
            overall["detection_rate"],
            None,
            "rate",
            note=f"false alarms {overall['false_alarm_rate']:.3f} per negative recording, "
            f"boundary error {overall['boundary_error_mean']:.2f} frames",
        )
    )
    s.extra.update({"quality": quality, "quality_overall": overall})


def _sweep_rows(s: _Spot, recordings, compute) -> None:
    """Secure path == plaintext path on --recordings recordings."""
    runs, worst = sweep(recordings, s.labels, s.models, s.keypair, compute, s.say)
    equal = sum(r["path_equal"] for r in runs)
    s.rows += [
        common.Row(
            "secure path == plaintext path (recording i vs keyword i mod 10)",
            float(equal),
            float(len(runs)),
            "recordings",
            note=f"{sum(r['found'] for r in runs)} with the keyword found; paths equal "
            "means detection and boundaries equal",
            better=common.HIGHER,
        ),
        common.Row(
            "path score: largest relative error",
            worst,
            None,
            "rel.",
            limit=REL_TARGET,
            note="the frames' and weights' rounding (protocols.stages.decoding.score_error_bound)",
        ),
    ]
    s.checks["secure == plaintext"] = equal == len(runs)
    s.checks["relative error"] = worst <= REL_TARGET
    s.extra["sweep"] = runs


def _timed_rows(s: _Spot, compute):
    """One keyword and its filler on the timed recording, against plaintext spotting;
    returns the run's result."""
    from smc_hmm.hmm.spotting import compose, spot

    args, timed, index = s.args, s.timed, s.index
    s.say(
        f"timing: recording {index} ({'-'.join(s.labels[d] for d in timed.digits)}, "
        f"{len(timed.features)} frames) against {args.keyword}"
    )
    one = {args.keyword: s.models[args.keyword]}
    params = {"keywords": [args.keyword]}
    if args.transport == "tcp":
        total, online, pre, result = _launched(args, params, timed.features, one)
    else:
        total, online, pre, result = _run("spot", params, timed.features, one, s.keypair, compute)
    plain = _plain_frames(spot(*compose(**s.models[args.keyword]), timed.features))
    secure = result["alice"][args.keyword]
    s.checks["timed decision == plaintext"] = secure["frames"] == plain
    limit = _limit(args, SECONDS_TARGET, SECONDS_TARGET_NO_KERNEL)
    s.rows.append(
        common.Row(
            f"one keyword ({args.keyword}) + filler, {len(timed.features)} frames: total",
            total,
            None,
            "s",
            limit=limit,
            note=f"online {online:.1f} s, offline {pre:.1f} s; "
            f"{result.cost.bytes_total:,} bytes, {result.cost.rounds} rounds; secure "
            f"{secure['frames']}, plaintext {plain}",
        )
    )
    if limit is not None:
        s.checks["one keyword within the time target"] = total <= limit
    s.rows += common.phase_rows(result.cost, "  ", traffic=False)
    s.extra["timed"] = {
        "recording": index,
        "digits": list(timed.digits),
        "frames": len(timed.features),
        "keyword": args.keyword,
        "seconds": total,
        "online_seconds": online,
        "offline_seconds": pre,
        "secure": secure,
        "plaintext": plain,
        "cost": result.cost.to_dict(),
    }
    return result


def _launched(args, params, frames, models):
    """The timed run as two OS processes over mutual TLS (``--transport tcp``; ``--pin``:
    a core each, as two machines): Alice's frames in a file, Bob's bundled models."""
    from tempfile import TemporaryDirectory

    with TemporaryDirectory(prefix="smc-hmm-bench-") as tmp:
        np.save(Path(tmp) / "frames.npy", frames)
        parties = {
            "alice": {"kind": "alice", "input": "frames.npy"},
            "bob": {"kind": "bob", "input": "bundled"},
        }
        result = common.launched_run(
            "spot", params, parties, Path(tmp), args.key_bits, args.workers,
            inputs={"alice": frames, "bob": models}, pin=args.pin,
        )  # fmt: skip
    total = result.cost.totals()["wall_max"]
    pre = common.phase_wall(result.cost, "alice", "offline")
    return total, total - pre, pre, result


def _limit(args, with_kernel: float, without: float | None) -> float | None:
    """A time target at 2048 bits: ``with_kernel`` where the native kernel runs here,
    else ``without`` (None: no target); none at other key sizes."""
    from smc_hmm.crypto import native

    if args.key_bits < 2048:
        return None
    return with_kernel if native.kernel() is not None else without


def _ten_rows(s: _Spot, compute, one_cost, scaling: float) -> None:
    """All ten keywords at once, and the cost model's prediction of them from the
    one-keyword run's ledger."""
    from smc_hmm.hmm.spotting import compose, spot

    labels, features = s.labels, s.timed.features
    s.say("all ten keywords at once")
    total, online, pre, ten = _run(
        "spot", {"keywords": list(labels)}, features, s.models, s.keypair, compute
    )
    found = ten["alice"]
    wrong = [
        k for k in labels if found[k]["found"] != spot(*compose(**s.models[k]), features).found
    ]
    s.checks["ten keywords == plaintext"] = not wrong
    # one measurement of the lanes' scaling can read above their count on a noisy machine
    lanes = min(max(1.0, scaling), float(compute.workers))
    rates = _rates(s)
    predicted = predict(one_cost, s.keypair, s.args.key_bits, len(labels), lanes, rates)
    ratio = predicted / total
    s.checks["cost model within 20%"] = abs(ratio - 1) <= PREDICTION_TOLERANCE
    limit = _limit(s.args, TEN_TARGET, None)
    if limit is not None:
        s.checks["ten keywords within the time target"] = total <= limit
    s.rows += [
        common.Row(
            "all ten keywords at once: total",
            total,
            None,
            "s",
            limit=limit,
            note=f"online {online:.1f} s, offline {pre:.1f} s; "
            f"{ten.cost.bytes_total:,} bytes, {ten.cost.rounds} rounds; found "
            f"{[k for k in labels if found[k]['found']]}",
        ),
        common.Row(
            "cost model: predicted ten-keyword total (from the one-keyword ledger x 10)",
            predicted,
            None,
            "s",
            note=f"prediction / measured = {ratio:.2f} (tolerance "
            f"{PREDICTION_TOLERANCE:.0%}); lanes priced at {lanes:.2f}x; {_rates_note(rates)}",
        ),
    ]
    s.extra["ten"] = {
        "seconds": total,
        "online_seconds": online,
        "offline_seconds": pre,
        "predicted_seconds": predicted,
        "prediction_ratio": ratio,
        "dgk_seconds_per_op": rates["dgk"],
        "randomizer_seconds": rates["draws"],
        "garbling_seconds_per_unit": _byte_prices(one_cost, rates["sides"]),
        "found": {k: found[k] for k in labels},
        "cost": ten.cost.to_dict(),
    }


def _rates(s: _Spot) -> dict:
    """The cost model's rates of this machine (:func:`predict`)."""
    from smc_hmm.bench.rates import garbling_sides

    s.say("cost model: DGK, Paillier and garbling rates of this machine")
    return {
        "dgk": dgk_rates(s.keypair),
        "draws": randomizer_rates(s.keypair),
        "sides": garbling_sides(),
    }


def _rates_note(rates: dict) -> str:
    return (
        "DGK "
        + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in rates["dgk"].items())
        + "; randomizers "
        + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in rates["draws"].items())
        + "; garbled, per AND gate: "
        + ", ".join(f"{k} {v['and_gates'] * 1e9:.0f} ns" for k, v in rates["sides"].items())
    )


def _mining_rows(s: _Spot, compute, secure) -> None:
    """Speech mining: the timed recording as Bob's, the keyword model as Alice's; it must
    find what the timed run found (``secure``)."""
    keyword = s.args.keyword
    s.say("speech mining: Bob's recording, Alice's keyword model")
    one = {keyword: s.models[keyword]}
    total, online, pre, mined = _run(
        "spot", {"direction": "mining"}, one, s.timed.features, s.keypair, compute
    )
    got = mined["alice"][keyword]
    s.checks["mining == plaintext"] = got["frames"] == secure["frames"]
    s.rows.append(
        common.Row(
            f"speech mining ({keyword} as Alice's model): total",
            total,
            None,
            "s",
            note=f"online {online:.1f} s, offline {pre:.1f} s; "
            f"{mined.cost.bytes_total:,} bytes; found {got['frames']}",
        )
    )
    s.extra["mining"] = {
        "seconds": total,
        "online_seconds": online,
        "offline_seconds": pre,
        "found": got,
        "cost": mined.cost.to_dict(),
    }


def _setup(args, say) -> tuple[_Spot, list]:
    """The keywords and recordings once the options fit them, plaintext quality, the timed
    recording (the 3-digit one closest to --frames) and the key pair."""
    from smc_hmm.data.continuous import load_continuous_test

    recordings = load_continuous_test()
    labels, models = _models()
    if args.keyword not in models:
        raise InvalidInputError(f"--keyword must be one of {labels}")
    if not 0 <= args.recordings <= len(recordings):
        raise InvalidInputError(f"--recordings must be in [0, {len(recordings)}]")
    if args.pin and args.transport != "tcp":
        raise InvalidInputError("--pin applies to --transport tcp (party processes)")
    if args.short_randomness and args.transport == "tcp":
        raise InvalidInputError("--short-randomness applies to --transport local only")
    s = _Spot(args, say, labels, models)
    _quality_rows(s, recordings)
    three = [r for r in recordings if len(r.digits) == 3]
    s.timed = min(three, key=lambda r: abs(len(r.features) - args.frames))
    s.index = recordings.index(s.timed)
    s.keypair = common.bench_keypair(args, say)
    return s, recordings


def run(args, say=lambda msg: None) -> common.BenchResult:
    """Every part in turn: plaintext quality, secure == plaintext, the timed keyword, all
    ten at once with the cost model's prediction, speech mining."""
    from smc_hmm.bench.crypto import lane_scaling

    s, recordings = _setup(args, say)
    with lanes(args.workers) as compute:
        scaling = lane_scaling(compute, s.keypair[0].nsquare_mpz) if compute.parallel else 1.0
        if args.recordings:
            _sweep_rows(s, recordings[: args.recordings], compute)
        result = _timed_rows(s, compute)
        if args.ten:
            _ten_rows(s, compute, result.cost, scaling)
        if args.mining:
            _mining_rows(s, compute, result["alice"][args.keyword])
    s.rows.append(common.Row("machine: lane scaling (all lanes vs one)", scaling, None, "x"))
    checks = s.checks
    s.extra.update({"checks": checks, "targets_met": all(checks.values()), "lane_scaling": scaling})
    names = ("recordings", "frames", "keyword", "workers", "ten", "mining", "short_randomness",
             "transport", "pin")  # fmt: skip
    params = {name: getattr(args, name) for name in names}
    return common.BenchResult("spot", args.key_bits, s.rows, params, extra=s.extra)


def add_arguments(parser) -> None:
    with common.common_arguments(parser, workers=True, short_randomness=""):
        parser.add_argument(
            "--recordings",
            type=common.bounded(0, 120),
            default=100,
            help="recordings of the secure == plaintext sweep (0: none; the bundled set has 120)",
        )
        parser.add_argument(
            "--frames",
            type=common.bounded(1, 10_000),
            default=250,
            help="the timed 3-digit recording: closest to this",
        )
        parser.add_argument("--keyword", default="seven", help="the timed keyword")
        parser.add_argument(
            "--no-ten", dest="ten", action="store_false", help="skip all ten keywords at once"
        )
        parser.add_argument(
            "--no-mining", dest="mining", action="store_false", help="skip speech mining"
        )
        parser.add_argument(
            "--transport",
            choices=("local", "tcp"),
            default="local",
            help="the timed keyword in one process (local) or as two processes over mutual "
            "TLS (tcp)",
        )
        parser.add_argument(
            "--pin",
            action="store_true",
            help="--transport tcp: each party process on its own core (as two machines)",
        )


def main(args) -> int:
    return common.main_with_checks(args, run)
