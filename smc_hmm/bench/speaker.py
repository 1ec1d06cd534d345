"""``smc-hmm bench speaker``: secure speaker identification and verification (thesis 5.2.2).

The registered ``speaker`` protocol (``protocols/speaker.py``, found by name) against the
plaintext GMM decisions, on the bundled models and test utterances
(:mod:`smc_hmm.data.speakers`; ``--fsdd DIR`` recomputes the test features from the
recordings instead).  Three parts, each optional:

1. **accuracy** (plaintext, every test utterance): closed-set identification,
   identification with the UBM rule at the protocol's default margin, verification equal
   error rates with the all-speaker UBM and leave-one-speaker-out (the impostor unknown to
   the system) for plain and anonymous verification (both verify the claimed speaker:
   the same trials, the same rule), how many impostor claims the earlier anonymous rule
   ("some enrolled speaker beats the UBM") accepted, and with ``--plot PATH`` the DET
   curves;
2. **speed**: one utterance cut or padded to ``--frames`` (98) in every mode, all frames'
   LOGSUMs in one round trip side by side with one round per frame, medians of
   ``--repeats`` interleaved runs, and the cost ledger's phases and operations;
3. **correctness sweep**: ``--utterances N`` test utterances at their own lengths in every
   mode with the scores revealed to Alice (``reveal_scores``): every secure decision
   against the plaintext one and every log-likelihood's relative error (target 1e-9).
   In ``verify`` and ``anonymous`` each utterance is one (utterance, claim) pair: every
   other utterance claims its own speaker, the others claim the enrolled speakers in turn
   (impostor pairs), so ``--modes anonymous --utterances 100`` sweeps 100 pairs, 50 of
   them impostors.

Targets (2048-bit keys): identification < 3 s and verification < 2 s for 98 frames, 5
speakers and the UBM with 8 components; accuracy >= 98%; decisions equal; errors <= 1e-9.
The exit status is 0 only if every measured target is met.
"""

from __future__ import annotations

import time

import numpy as np

from smc_hmm.bench import common
from smc_hmm.data.speakers import (
    UBM_LABEL,
    best_component_scores,
    decision,
    equal_error_rate,
    identify,
    load_loso_ubms,
    load_speaker_models,
    load_speaker_test_utterances,
    scores,
    speaker_features_from_wav,
)
from smc_hmm.errors import InvalidInputError
from smc_hmm.features import BENCHMARK_FRAMES, pad_or_cut
from smc_hmm.protocol import find

MODES = ("identify", "verify", "anonymous")
#: the acceptance targets (2048-bit keys, the native kernel): the default (scoring max,
#: in circuits Bob garbles), and the thesis's LOGSUM mode kept beside it
SECONDS_TARGET = {"identify": 2.0, "verify": 1.5, "anonymous": 2.0}
LOGSUM_SECONDS_TARGET = {"identify": 3.0, "verify": 2.0}
ACCURACY_TARGET = 0.98
REL_TARGET = 1e-9
#: the claimed speaker of verification runs whose utterance has no claim of its own
CLAIM = "jackson"


def add_arguments(parser) -> None:
    with common.common_arguments(parser, workers=True, short_randomness=""):
        parser.add_argument(
            "--frames",
            type=common.bounded(1, 10_000),
            default=BENCHMARK_FRAMES,
            help="speed runs' T",
        )
        parser.add_argument(
            "--repeats", type=common.bounded(1, 100), default=3, help="timed runs per speed case"
        )
        parser.add_argument(
            "--utterances",
            type=common.bounded(0, 1250),
            default=10,
            help="test utterances of the correctness sweep (0: none; 1250: all)",
        )
        parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
        parser.add_argument(
            "--sweep-scoring",
            choices=("max", "logsum"),
            default="max",
            help="the correctness sweep's scoring: the default (max: decisions against the "
            "plaintext best-component scores) or the thesis's LOGSUM (scores revealed, "
            "relative error checked)",
        )
        parser.add_argument(
            "--fsdd", metavar="DIR", help="recompute the test features from the FSDD recordings"
        )
        parser.add_argument("--skip-speed", action="store_true", help="no speed runs")
        parser.add_argument(
            "--offline",
            action="store_true",
            help="also time the online part with every randomizer precomputed (offline phase)",
        )
        parser.add_argument("--skip-accuracy", action="store_true", help="no plaintext accuracy")
        parser.add_argument(
            "--records",
            metavar="JSONL",
            help="append every sweep trial to this file and skip the trials already in it "
            "(a long sweep resumes where it stopped)",
        )
        parser.add_argument(
            "--shard",
            default="0/1",
            metavar="I/N",
            help="sweep only every N-th utterance from the I-th (share --records between shards)",
        )
        parser.add_argument("--plot", metavar="PNG", help="write the DET curves (matplotlib)")


def evaluation_set(fsdd: str | None, select=None):
    """(features, speaker) of the 1,250 test utterances (or those at positions ``select``):
    bundled, or computed from the recordings."""
    utterances = load_speaker_test_utterances(select)
    if fsdd is None:
        return [(u.features, u.speaker) for u in utterances]
    from pathlib import Path

    root = Path(fsdd)
    folder = root / "recordings" if (root / "recordings").is_dir() else root
    return [(speaker_features_from_wav(folder / u.name), u.speaker) for u in utterances]


# -- 1. plaintext accuracy --------------------------------------------------------------------


def accuracy(tests, models, labels, margin: float, threshold: float, plot: str | None) -> dict:
    """Closed-set and UBM-rule identification, verification EERs (closed and
    leave-one-speaker-out) and the error rates at the protocol's threshold."""
    loso = load_loso_ubms()
    exact = _tally(tests, models, labels, margin, loso, scores)
    best = _tally(tests, models, labels, margin, loso, best_component_scores)  # the default's
    out = _accuracy_results(len(tests), exact, best, margin, threshold)
    if plot:
        det_plot(
            plot,
            {
                "all-speaker UBM": (exact["target"], exact["impostor"]),
                "leave-one-speaker-out": (exact["loso_target"], exact["loso_impostor"]),
            },
            threshold,
        )
    return out


def _tally(tests, models, labels, margin: float, loso, score) -> dict:
    """One scoring's (``score(models, x)``) plaintext decisions on every test utterance:
    correct closed-set and UBM-rule identifications, the verification trials (target and
    impostor ratios per frame, closed and leave-one-speaker-out) and, per impostor trial,
    the best speaker's ratio (the earlier anonymous rule)."""
    speakers = [x for x in labels if x != UBM_LABEL]
    tally = {"closed": 0, "ubm_rule": 0, "old_rule": []}
    tally |= {"target": [], "impostor": [], "loso_target": [], "loso_impostor": []}
    for x, who in tests:
        sc = score(models, x)
        k, t = speakers.index(who), len(x)
        tally["closed"] += int(np.argmax(sc[:-1])) == k
        tally["ubm_rule"] += identify(sc, labels, UBM_LABEL, margin, t) == who
        tally["old_rule"] += [(max(sc[:-1]) - sc[-1]) / t] * (len(speakers) - 1)
        _add_trials(tally, sc, score([loso[h] for h in speakers], x), k, t)
    return tally


def _add_trials(tally: dict, sc, held_out, k: int, t: int) -> None:
    """Speaker ``k``'s utterance of ``t`` frames claimed as every enrolled speaker:
    against the all-speaker UBM, and against the UBM trained without the true speaker
    (``held_out``: the leave-one-speaker-out UBMs' scores)."""
    n = len(held_out)
    for j in range(n):
        tally["target" if j == k else "impostor"].append((sc[j] - sc[-1]) / t)
        if j != k:  # impostor k, unknown to the system: its UBM was trained without k
            tally["loso_impostor"].append((sc[j] - held_out[k]) / t)
        else:
            tally["loso_target"] += [(sc[k] - held_out[h]) / t for h in range(n) if h != k]


def _accuracy_results(n: int, exact: dict, best: dict, margin: float, threshold: float) -> dict:
    """:func:`accuracy`'s results from the two scorings' tallies of ``n`` utterances."""
    target, impostor = exact["target"], exact["impostor"]
    loso_target, loso_impostor = exact["loso_target"], exact["loso_impostor"]
    eer, eer_th = equal_error_rate(target, impostor)
    loso_eer, loso_th = equal_error_rate(loso_target, loso_impostor)
    best_eer, _ = equal_error_rate(best["target"], best["impostor"])
    best_loso_eer, _ = equal_error_rate(best["loso_target"], best["loso_impostor"])
    old_rule = np.asarray(exact["old_rule"])
    return {
        "utterances": n,
        "closed_set_identification": exact["closed"] / n,
        "best_component_identification": best["closed"] / n,
        "best_component_eer_closed": best_eer,
        "best_component_identification_at_margin": best["ubm_rule"] / n,
        "best_component_eer_loso": best_loso_eer,
        "identification_at_margin": exact["ubm_rule"] / n,
        "margin": margin,
        "eer_closed": eer,
        "eer_closed_threshold": eer_th,
        "eer_loso": loso_eer,
        "eer_loso_threshold": loso_th,
        "threshold": threshold,
        "far_frr_closed_at_threshold": _rates(target, impostor, threshold),
        "far_frr_loso_at_threshold": _rates(loso_target, loso_impostor, threshold),
        # anonymous verification verifies the claim as verify does (the same rule on every
        # utterance and claim, tests/protocols/test_protocol_speaker.py): the same trials
        "anonymous_eer_closed": eer,
        "anonymous_eer_loso": loso_eer,
        "anonymous_far_frr_closed_at_threshold": _rates(target, impostor, threshold),
        # the earlier anonymous rule ("some enrolled speaker beats the UBM") on the same
        # impostor claims: it accepted every claim on a voice that beat the UBM
        "old_anonymous_false_accept_at_threshold": float(np.mean(old_rule > threshold)),
        "trials": {
            "closed": [len(target), len(impostor)],
            "loso": [len(loso_target), len(loso_impostor)],
        },
    }


def _rates(target, impostor, threshold: float) -> dict:
    return {
        "false_accept": float(np.mean(np.asarray(impostor) > threshold)),
        "false_reject": float(np.mean(np.asarray(target) <= threshold)),
    }


def det_plot(path: str, curves: dict, threshold: float) -> None:
    """DET curves (false rejection vs false acceptance on normal-deviate axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import norm

    ticks = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4]
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    for name, (target, impostor) in curves.items():
        target, impostor = np.sort(target), np.sort(impostor)
        ths = np.unique(np.concatenate([target, impostor]))
        frr = np.searchsorted(target, ths, side="right") / target.size
        far = 1 - np.searchsorted(impostor, ths, side="right") / impostor.size
        clip = lambda p: np.clip(p, 5e-4, 0.5)  # noqa: E731
        eer, _ = equal_error_rate(target, impostor)
        (line,) = ax.plot(norm.ppf(clip(far)), norm.ppf(clip(frr)), label=f"{name} (EER {eer:.1%})")
        at = _rates(target, impostor, threshold)
        ax.plot(
            norm.ppf(clip(at["false_accept"])),
            norm.ppf(clip(at["false_reject"])),
            "o",
            color=line.get_color(),
        )
    ax.plot(norm.ppf([5e-4, 0.5]), norm.ppf([5e-4, 0.5]), ":", color="grey", lw=0.8)
    ax.set_xticks(norm.ppf(ticks), [f"{100 * t:g}" for t in ticks])
    ax.set_yticks(norm.ppf(ticks), [f"{100 * t:g}" for t in ticks])
    ax.set_xlim(norm.ppf(5e-4), norm.ppf(0.5))
    ax.set_ylim(norm.ppf(5e-4), norm.ppf(0.5))
    ax.set_xlabel("false acceptance (%)")
    ax.set_ylabel("false rejection (%)")
    ax.set_title(
        f"Speaker verification, FSDD test utterances\n(dots: threshold {threshold:g} nats/frame)"
    )
    ax.grid(True, lw=0.3)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- 2. speed and 3. correctness ----------------------------------------------------------------


def _utterance(mode: str, x, who: str | None = None):
    return x if mode == "identify" else (x, who or CLAIM)


def sweep_claim(i: int, who: str, speakers) -> str:
    """The claim of the sweep's i-th utterance: its own speaker for even i; for odd i the
    other enrolled speakers in turn (impostor claims)."""
    k, n = speakers.index(who), len(speakers)
    return who if i % 2 == 0 else speakers[(k + 1 + (i // 2) % (n - 1)) % n]


def secure_run(keypair, mode: str, x, models, labels, compute, claim=None, **params):
    """One in-process run of the registered protocol; returns the RunResult."""
    alice, bob = _utterance(mode, x, claim), (models, labels)
    params = {"mode": mode, **params}
    return common.two_party_run("speaker", params, alice, bob, keypair, compute, timeout=900)[0]


def secure_decision(mode: str, result):
    return result["alice"]["speaker"] if mode == "identify" else result["bob"]["accept"]


def online_run(keypair, mode: str, x, models, labels, compute) -> tuple[float, float]:
    """(offline seconds, online seconds) of one batched run whose randomizers were all
    precomputed once the key was known (the protocol's offline plan, the keyword bench's
    offline phase: Alice's CRT randomizers and Bob's public-key ones on both lanes)."""
    alice, bob = _utterance(mode, x), (models, labels)
    _, pre, online = common.two_party_run(
        "speaker",
        {"mode": mode},
        alice,
        bob,
        keypair,
        compute,
        timeout=900,
        offline=True,
        strict=True,
    )
    return pre, online


def speed(
    keypair, modes, x, models, labels, compute, repeats: int, say, offline: bool = False
) -> tuple[list[common.Row], dict]:
    """Per mode the default (scoring max) beside the thesis's LOGSUM mode (all LOGSUMs in
    one round, and one round per frame), medians of ``repeats`` interleaved runs."""
    rows, details = [], {}
    for mode in modes:
        say(f"speed: {mode}, {len(x)} frames: the default, LOGSUM batched and per frame")
        medians, costs = _timed_scorings(keypair, mode, x, models, labels, compute, repeats)
        rows += _speed_rows(mode, medians, costs, big=keypair[0].bits >= 2048)
        default, per_frame = costs["default"], costs["per-frame"]
        details[mode] = {
            "seconds": medians["default"],
            "logsum_seconds": medians["logsum"],
            "seconds_per_frame_rounds": medians["per-frame"],
            "rounds": default.rounds,
            "rounds_per_frame": per_frame.rounds,
            "cost": default.to_dict(),
        }
        if offline:
            say(f"speed: {mode}, randomizers precomputed (offline / online)")
            row, pre, online = _online_row(keypair, mode, x, models, labels, compute, repeats)
            details[mode] |= {"offline_seconds": pre, "online_seconds": online}
            rows.append(row)
        rows += _operation_rows(mode, default)
    return rows, details


def _timed_scorings(keypair, mode, x, models, labels, compute, repeats: int):
    """(medians, costs) by case of ``repeats`` interleaved runs of the default, LOGSUM
    batched and LOGSUM with one round per frame: the cost ledger of each case's last run."""
    last = {}

    def case(name, params):
        last[name] = secure_run(keypair, mode, x, models, labels, compute, **params)
        return last[name]

    cases = {
        "default": lambda: case("default", {}),
        "logsum": lambda: case("logsum", {"scoring": "logsum"}),
        "per-frame": lambda: case("per-frame", {"scoring": "logsum", "frames_per_round": 1}),
    }
    medians = common.interleaved_medians(cases, repeats, warmup=1)
    return medians, {name: run.cost for name, run in last.items()}


def _speed_rows(mode: str, medians: dict, costs: dict, big: bool) -> list[common.Row]:
    """The default against LOGSUM, and LOGSUM batched against one round per frame (the
    targets hold for 2048-bit keys and more: ``big``)."""
    default, batched, per_frame = (costs[k] for k in ("default", "logsum", "per-frame"))
    return [
        common.Row(
            f"{mode}: the default (circuits Bob garbles, bound inputs) vs LOGSUM",
            medians["default"],
            medians["logsum"],
            "s",
            limit=_limit(mode) if big else None,
            note=f"rounds {default.rounds} vs {batched.rounds}",
            better=common.LOWER,
        ),
        common.Row(
            f"{mode}: LOGSUM, all LOGSUMs in one round vs one round per frame",
            medians["logsum"],
            medians["per-frame"],
            "s",
            limit=LOGSUM_SECONDS_TARGET.get(mode) if big else None,
            note=f"rounds {batched.rounds} vs {per_frame.rounds}",
            better=common.LOWER,
        ),
    ]


def _online_row(keypair, mode, x, models, labels, compute, repeats: int):
    """(row, offline seconds, online seconds): medians of ``repeats`` runs with every
    randomizer precomputed."""
    runs = [online_run(keypair, mode, x, models, labels, compute) for _ in range(repeats)]
    pre, online = (float(np.median(v)) for v in zip(*runs))
    row = common.Row(
        f"{mode}: online part, every randomizer precomputed",
        online,
        None,
        "s",
        note=f"offline (after the key exchange, before the utterance) {pre:.2f} s",
    )
    return row, pre, online


def _limit(mode: str) -> float | None:
    """The default's target where the native kernel runs here (none elsewhere)."""
    from smc_hmm.crypto import native

    return SECONDS_TARGET.get(mode) if native.kernel() is not None else None


def _operation_rows(mode: str, cost) -> list[common.Row]:
    rows = []
    for party in ("alice", "bob"):
        p = cost.parties[party]
        ops = {k: v for k, v in p["ops"].items() if v}
        phases = {
            k: round(v["compute"], 3)
            for k, v in p.get("phases", {}).items()
            if isinstance(v, dict) and "compute" in v
        }
        rows.append(
            common.Row(
                f"{mode}: {party} operations (the default)",
                sum(ops.values()),
                None,
                "ops",
                note=", ".join(f"{k} {v:,}" for k, v in ops.items())
                + f"; compute s by phase {phases}",
            )
        )
    return rows


def sweep_positions(count: int, total: int = 1250) -> list[int]:
    """``count`` test utterances spread evenly over the speakers and digits."""
    step = max(1, total // max(count, 1))
    return list(range(0, total, step))[:count]


def _shard(text: str) -> tuple[int, int]:
    """``I/N`` -> (I, N) with 0 <= I < N."""
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise InvalidInputError(f"--shard takes I/N, e.g. 0/2, not {text!r}") from None
    if not 0 <= i < n:
        raise InvalidInputError(f"--shard {text}: need 0 <= I < N")
    return i, n


def load_records(path: str | None, key_bits: int, scoring: str = "max") -> dict:
    """The sweep's finished trials in ``path`` (JSON lines) for ``key_bits`` and
    ``scoring``, by (mode, test position, claim); a missing file is an empty record
    (records without a scoring are the LOGSUM mode's, from before the default changed)."""
    import json
    from pathlib import Path

    if path is None or not Path(path).exists():
        return {}
    done = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            key = (rec["mode"], int(rec["position"]), rec["claim"])
            bits = int(rec["key_bits"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"{path}:{number}: not a sweep record ({exc})") from None
        same = rec.get("scoring", "logsum") == scoring
        if (
            same
            and bits == key_bits
            and (rec["mode"] != "anonymous" or rec.get("rule") == "claimed")
        ):
            done[key] = rec  # (anonymous trials of the earlier any-speaker rule are not reused)
    return done


def _trial(keypair, mode, x, who, claim, models, labels, params, compute, scoring) -> dict:
    """One secure run against the plaintext: decisions, seconds, and (LOGSUM, whose scores
    it reveals for this) the worst relative error of a log-likelihood.  The default is
    held to the plaintext decision of its own scores (the best component per frame)."""
    if scoring == "max":
        sc = best_component_scores(models, x)
        t0 = time.perf_counter()
        result = secure_run(keypair, mode, x, models, labels, compute, claim=claim)
        return {
            "secure": secure_decision(mode, result),
            "plain": decision(mode, sc, labels, params, len(x), claim),
            "max_rel_err": 0.0,
            "seconds": time.perf_counter() - t0,
            "plain_scores": dict(zip(labels, map(float, sc))),
        }
    sc = scores(models, x)
    t0 = time.perf_counter()
    result = secure_run(keypair, mode, x, models, labels, compute, claim=claim, reveal_scores=True)
    seconds = time.perf_counter() - t0
    secure = result["alice"]["scores"]
    errors = [abs(secure[lb] - s) / abs(s) for lb, s in zip(labels, sc) if lb in secure]
    return {
        "secure": secure_decision(mode, result),
        "plain": decision(mode, sc, labels, params, len(x), claim),
        "max_rel_err": max(errors),
        "seconds": seconds,
        "plain_scores": dict(zip(labels, map(float, sc))),
    }


def sweep(
    keypair,
    modes,
    tests,
    models,
    labels,
    params,
    compute,
    say,
    records=None,
    shard=(0, 1),
    scoring="max",
) -> tuple[list[common.Row], dict]:
    """Every secure decision and log-likelihood against the plaintext, on ``tests``: the
    (test position, (frames, speaker)) pairs of the chosen utterances.  With ``records``
    (a JSON-lines file) every finished trial is appended there at once and trials already
    in it are not run again, so a long sweep can stop and resume.  ``shard`` = (i, n)
    runs only every n-th utterance from the i-th (processes or machines sharing one
    records file split a sweep so)."""
    done = load_records(records, keypair[0].bits, scoring)
    speakers = [x for x in labels if x != UBM_LABEL]  # target and impostor trials
    rows, out = [], {}
    for mode in modes:
        trials = []
        for i, (position, (x, who)) in enumerate(tests):
            if i % shard[1] != shard[0]:
                continue
            claim = sweep_claim(i, who, speakers)
            rec = done.get((mode, position, claim))
            if rec is None:
                say(f"sweep: {mode} {i + 1}/{len(tests)} ({len(x)} frames)")
                rec = _trial_record(keypair[0].bits, mode, position, who, claim, len(x), scoring)
                rec |= _trial(
                    keypair, mode, x, who, claim, models, labels, params, compute, scoring
                )
                _keep(rec, records)
            trials.append(rec)
        mode_rows, out[mode] = _sweep_summary(mode, trials, scoring)
        rows += mode_rows
    return rows, out


def _trial_record(key_bits, mode, position, who, claim, frames, scoring) -> dict:
    """What identifies a sweep trial in its record (:func:`load_records` reads it)."""
    rec = {"key_bits": key_bits, "mode": mode, "position": position}
    rec["scoring"] = scoring
    rec |= {"speaker": who, "claim": claim, "frames": frames}
    if mode == "anonymous":  # the claimed speaker's rule
        rec["rule"] = "claimed"
    return rec


def _keep(rec: dict, records: str | None) -> None:
    """A finished trial's record, appended to ``records`` at once where given; the
    plaintext scores stay only on a mismatch."""
    import json

    if rec["secure"] == rec["plain"]:  # the plaintext scores matter on a mismatch
        del rec["plain_scores"]
    if records is not None:
        with open(records, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def _sweep_summary(mode: str, trials: list[dict], scoring: str) -> tuple[list[common.Row], dict]:
    """(rows, results) of one mode's sweep trials: decisions equal to the plaintext's and
    (LOGSUM) the worst relative error of a log-likelihood."""
    equal = sum(t["secure"] == t["plain"] for t in trials)
    worst = max(t["max_rel_err"] for t in trials)
    seconds = float(np.median([t["seconds"] for t in trials]))
    impostors = sum(t["claim"] != t["speaker"] for t in trials) if mode != "identify" else 0
    what = "utterances" if mode == "identify" else f"pairs ({impostors} impostor)"
    rows = [
        common.Row(
            f"{mode}: secure decisions equal to plaintext"
            + (" (LOGSUM)" if scoring == "logsum" else ""),
            equal,
            len(trials),
            "utterances" if mode == "identify" else "pairs",
            note=f"{len(trials)} {what}, median {seconds:.2f} s each",
            better=common.HIGHER,
        )
    ]
    if scoring == "logsum":  # the default reveals no score to measure
        rows.append(
            common.Row(
                f"{mode}: largest relative error of a log-likelihood (LOGSUM)",
                worst,
                None,
                "rel. error",
                limit=REL_TARGET,
            )
        )
    return rows, {
        "utterances": len(trials),
        "impostor_pairs": impostors,
        "equal": equal,
        "max_relative_error": worst,
        "median_seconds": seconds,
        "mismatches": [t for t in trials if t["secure"] != t["plain"]],
    }


def accuracy_rows(acc: dict, margin: float) -> list[common.Row]:
    """The plaintext identification errors (against the accuracy target) and the
    verification equal error rates, from :func:`accuracy`'s results."""
    rows = _identification_rows(acc, margin) + _eer_rows(acc) + _default_vs_exact_rows(acc, margin)
    rows.append(
        common.Row(
            f"anonymous: impostor claims accepted at threshold {acc['threshold']:g}",
            acc["anonymous_far_frr_closed_at_threshold"]["false_accept"],
            acc["old_anonymous_false_accept_at_threshold"],
            "rate",
            note="vs the earlier rule, 'some enrolled speaker beats the UBM'",
            better=common.LOWER,
        )
    )
    return rows


def _identification_rows(acc: dict, margin: float) -> list[common.Row]:
    """Identification errors, closed set and with the UBM rule, against the target."""
    identification = (
        ("identification error, closed set (best speaker)", "closed_set_identification"),
        (
            f"identification error with the UBM rule (margin {margin:g} nats/frame)",
            "identification_at_margin",
        ),
    )
    return [
        common.Row(
            title,
            1 - acc[key],
            None,
            "rate",
            limit=1 - ACCURACY_TARGET,
            note=f"accuracy {acc[key]:.2%}",
        )
        for title, key in identification
    ]


def _eer_rows(acc: dict) -> list[common.Row]:
    """Verification and anonymous verification equal error rates."""

    def threshold(key: str) -> str:
        return f"threshold {acc[key]:.3f} nats/frame"

    eers = (
        ("verification EER, all-speaker UBM", "eer_closed", threshold("eer_closed_threshold")),
        ("verification EER, leave-one-speaker-out", "eer_loso", threshold("eer_loso_threshold")),
        (
            "anonymous verification EER (claim hidden from Bob), all-speaker UBM",
            "anonymous_eer_closed",
            "the claimed speaker against the UBM, as in verify: the same trials",
        ),
        ("anonymous verification EER, leave-one-speaker-out", "anonymous_eer_loso", ""),
    )
    return [common.Row(title, acc[key], None, "rate", note=note) for title, key, note in eers]


def _default_vs_exact_rows(acc: dict, margin: float) -> list[common.Row]:
    """The default's score (best component per frame) against the exact log-likelihood:
    identification accuracies and equal error rates."""
    versus = (  # (what, the default's key, the exact log-likelihood's key, better)
        ("closed-set identification", "best_component_identification",
         "closed_set_identification", common.HIGHER),
        (f"identification with the UBM rule (margin {margin:g})",
         "best_component_identification_at_margin", "identification_at_margin", common.HIGHER),
        ("verification EER", "best_component_eer_closed", "eer_closed", common.LOWER),
        ("verification EER, leave-one-speaker-out", "best_component_eer_loso", "eer_loso",
         common.LOWER),
    )  # fmt: skip
    rows = []
    for i, (what, best, exact, better) in enumerate(versus):
        lead = "the default's score (best component per frame)" if i == 0 else "the default's score"
        rows.append(
            common.Row(
                f"{lead} vs the exact log-likelihood: {what}",
                acc[best],
                acc[exact],
                "rate",
                note=f"{100 * (acc[best] - acc[exact]):+.2f} points (target within 0.5)",
                better=better,
            )
        )
    return rows


def main(args) -> int:
    console, say = common.start(args)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        raise InvalidInputError(f"--modes takes a comma-separated subset of {', '.join(MODES)}")
    if args.frames < 1 or args.repeats < 1 or args.utterances < 0:
        raise InvalidInputError("--frames and --repeats must be >= 1, --utterances >= 0")
    params = find("speaker").params({})
    models, labels = load_speaker_models()
    rows: list[common.Row] = []
    extra: dict = {}
    if not args.skip_accuracy:
        say("plaintext accuracy on every test utterance")
        tests = evaluation_set(args.fsdd)
        acc = accuracy(tests, models, labels, params.margin, params.threshold, args.plot)
        extra["accuracy"] = acc
        rows += accuracy_rows(acc, params.margin)
    keypair = common.bench_keypair(args, say)
    with common.lanes(args.workers) as compute:
        if not args.skip_speed:
            x = pad_or_cut(evaluation_set(args.fsdd, [0])[0][0], args.frames)
            r, extra["speed"] = speed(
                keypair, modes, x, models, labels, compute, args.repeats, say, args.offline
            )
            rows += r
        if args.utterances:
            positions = sweep_positions(args.utterances)
            tests = list(zip(positions, evaluation_set(args.fsdd, positions)))
            shard = _shard(args.shard)
            r, extra["sweep"] = sweep(
                keypair, modes, tests, models, labels, params, compute, say, args.records,
                shard, args.sweep_scoring,
            )  # fmt: skip
            rows += r
    result = common.BenchResult(
        "speaker",
        args.key_bits,
        rows,
        {
            "frames": args.frames,
            "repeats": args.repeats,
            "utterances": args.utterances,
            "modes": modes,
            "workers": args.workers,
            "fsdd": bool(args.fsdd),
            "short_randomness": args.short_randomness,
        },
        extra=extra,
    )
    equal = all(s["equal"] == s["utterances"] for s in extra.get("sweep", {}).values())
    result.extra["all_targets_met"] = result.targets_met and equal
    result.print_table(console)
    if args.plot and not args.skip_accuracy:
        console.print(f"wrote {args.plot}")
    return common.finish(args, result, console, met=equal)
