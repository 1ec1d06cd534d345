"""``smc-hmm bench digits``: connected-digit recognition on the bundled digit strings.

Thesis 003, 2.2.4 (continuous recognition, as a spoken PIN); the protocol is the
registered ``digits`` plugin (found by name: this core module does not import it), the
data the bundled strings (:mod:`smc_hmm.data.digits`, ``docs/digits.md``).  In one run:

* **Plaintext quality** of the loop on every bundled string: word error rate and string
  accuracy, and beside them the leave-one-speaker-out figures the data script measured
  (fold models trained without the speaker; ``scripts/make_digit_strings.py``).
* **Secure == plaintext** on ``--recordings`` strings: the string Alice learns must be the
  plaintext decoding of the same loop, every one.
* **Timing**: the 4-digit string closest to ``--frames`` frames, ``--repeats`` runs of
  the ``digits`` protocol in-process (two lanes a party, randomizers precomputed after
  the key exchange), the median beside plaintext decoding; the cost per digit and per
  second of audio; target at 2048 bits 10 s with the native kernel.  Then one run of
  the PIN mode on the same string.

Commands and numbers: ``docs/digits.md``.
"""

from __future__ import annotations

import time
from statistics import median

from smc_hmm.bench import common
from smc_hmm.bench.common import lanes
from smc_hmm.errors import InvalidInputError
from smc_hmm.features import FRAME_SECONDS

#: 2048 bits, idle two-core machine, native kernel: a 4-digit string of about 2.5 s
SECONDS_TARGET = 10.0


def _plain(recordings, params):
    from smc_hmm.data.digits import bundled_digit_models
    from smc_hmm.hmm.digits import DigitGrammar, decode_digits

    grammar = DigitGrammar(params["max_digits"], params["insertion_penalty"])
    model, layout = bundled_digit_models().loop(grammar)
    return [decode_digits(model, layout, r.features, grammar) for r in recordings]


def _quality_rows(rows, recordings, plain, checks) -> None:
    from smc_hmm.data.digits import load_digit_strings_manifest
    from smc_hmm.hmm.digits import word_errors

    q = word_errors([(r.digits, p) for r, p in zip(recordings, plain)])
    rows.append(common.Row("plaintext word error rate", q["wer"], None, "", note=f"{q}"))
    rows.append(common.Row("plaintext string accuracy", q["string_accuracy"], None, ""))
    loso = load_digit_strings_manifest()["results"].get("leave_one_speaker_out")
    if loso:
        for key in ("wer", "string_accuracy"):
            rows.append(common.Row(f"leave one speaker out: {key}", loso["all"][key], None, ""))
    checks["plaintext WER below 10%"] = q["wer"] < 0.10


def _sweep_rows(rows, args, recordings, plain, keypair, compute, say, checks) -> None:
    same, times = 0, []
    for i, (r, p) in enumerate(zip(recordings, plain)):
        result, _, online = common.two_party_run(
            "digits", _settings(args), r.features, _models(), keypair, compute, timeout=3600
        )
        same += result["alice"]["digits"] == p.text
        times.append(online)
        say(f"sweep: {i + 1}/{len(recordings)}, {same} equal")
    rows.append(
        common.Row(
            f"secure string == plaintext ({args.key_bits} bits)",
            same,
            None,
            f"of {len(recordings)}",
            note=f"median {median(times):.1f} s a string",
        )
    )
    checks["every secure string == plaintext"] = same == len(recordings)


def _settings(args, mode: str = "string") -> dict:
    return {"mode": mode, "max_digits": args.max_digits, "insertion_penalty": args.penalty}


def _models():
    from smc_hmm.data.digits import bundled_digit_models

    return bundled_digit_models()


def _timed_rows(rows, args, timed, keypair, compute, say, checks) -> dict:
    """The timed string: repeats of the secure run beside plaintext, then the PIN mode."""
    from smc_hmm.hmm.digits import enrol

    models, frames = _models(), timed.features
    seconds = len(frames) * FRAME_SECONDS
    t0 = time.perf_counter()
    plain = _plain([timed], _settings(args))[0]
    plain_s = time.perf_counter() - t0
    totals, result = [], None
    for k in range(args.repeats):
        result, pre, online = common.two_party_run(
            "digits", _settings(args), frames, models, keypair, compute, timeout=3600, offline=True
        )
        totals.append(pre + online)
        say(f"timing: run {k + 1}/{args.repeats}: {pre + online:.2f} s")
    total = median(totals)
    limit = SECONDS_TARGET if args.key_bits >= 2048 and _kernel() else None
    rows.append(
        common.Row(
            f"{len(timed.digits)} digits, {len(frames)} frames ({seconds:.2f} s): total",
            total,
            plain_s,
            "s",
            limit=limit,
            better=common.LOWER,
            note=f"runs {', '.join(f'{t:.2f}' for t in totals)}; {result.cost.bytes_total:,} "
            f"bytes; secure {result['alice']['digits']}, plaintext {plain.text}",
        )
    )
    rows.append(common.Row("  per digit", total / len(timed.digits), None, "s"))
    rows.append(common.Row("  per second of audio", total / seconds, None, "s"))
    rows += common.phase_rows(result.cost, "  ", traffic=False)
    checks["timed string == plaintext"] = result["alice"]["digits"] == plain.text
    if limit is not None:
        checks["within the time target"] = total <= limit
    key, record = enrol(timed.text, args.max_digits)
    pin, pre, online = common.two_party_run(
        "digits", _settings(args, "pin"), {"frames": frames, "key": key},
        {"models": models, "enrolled": record}, keypair, compute, timeout=3600, offline=True,
    )  # fmt: skip
    rows.append(
        common.Row(
            "PIN mode, the same string: total", pre + online, None, "s",
            note=f"Bob's bit {pin['bob']['equal']}, plaintext {plain.text == timed.text}",
        )
    )  # fmt: skip
    checks["PIN bit == plaintext"] = pin["bob"]["equal"] == (plain.text == timed.text)
    return {"frames": len(frames), "digits": timed.text, "seconds": totals, "median": total}


def _kernel() -> bool:
    from smc_hmm.crypto import native

    return native.kernel() is not None


def run(args, say=lambda msg: None) -> common.BenchResult:
    """Plaintext quality, the secure == plaintext sweep, the timed string."""
    from smc_hmm.data.digits import load_digit_strings

    recordings = load_digit_strings()
    if not 0 <= args.recordings <= len(recordings):
        raise InvalidInputError(f"--recordings must be in [0, {len(recordings)}]")
    rows, checks, extra = [], {}, {}
    plain = _plain(recordings, _settings(args))
    _quality_rows(rows, recordings, plain, checks)
    keypair = common.bench_keypair(args, say)
    fours = [r for r in recordings if len(r.digits) == 4]
    timed = min(fours, key=lambda r: abs(len(r.features) - args.frames))
    with lanes(args.workers) as compute:
        if args.recordings:
            chosen = recordings[: args.recordings]
            _sweep_rows(rows, args, chosen, plain, keypair, compute, say, checks)
        extra["timed"] = _timed_rows(rows, args, timed, keypair, compute, say, checks)
    extra.update({"checks": checks, "targets_met": all(checks.values())})
    names = ("recordings", "frames", "repeats", "workers", "max_digits", "penalty")
    params = {name: getattr(args, name) for name in names}
    return common.BenchResult("digits", args.key_bits, rows, params, extra=extra)


def add_arguments(parser) -> None:
    with common.common_arguments(parser, workers=True):
        parser.add_argument(
            "--recordings",
            type=common.bounded(0, 100),
            default=100,
            help="strings of the secure == plaintext sweep (0: none)",
        )
        parser.add_argument(
            "--frames", type=common.bounded(1, 10_000), default=250, help="the timed string"
        )
        parser.add_argument("--repeats", type=common.bounded(1, 20), default=3)
        parser.add_argument("--max-digits", type=common.bounded(1, 16), default=8)
        parser.add_argument("--penalty", type=common.bounded_float(0, 80), default=80.0)


def main(args) -> int:
    return common.main_with_checks(args, run)
