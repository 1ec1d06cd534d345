"""``smc-hmm match --audio SNIPPET.wav``: which recording of a collection a snippet comes from.

Alice computes the snippet's mel-band magnitudes locally (:mod:`smc_hmm.data.match`),
Bob holds the collection -- the bundled 200 FSDD recordings (``--collection fsdd``, the
default), a folder of WAV files (any rate, music included) or an ``.npz`` collection --
and the registered ``match`` protocol (``protocols/match.py``, found by name, so this
module does not import the protocol package) runs both roles in-process, every
randomizer drawn in an offline phase once the key is known. The plaintext matcher's
answer is computed locally beside the secure one, for comparison only. Both answers
(recording id and offset, or "no match") are printed as one line on standard output
(``--json -``: the JSON report instead); the cost tables, warnings and progress go to
standard error (the convention of every command, docs/running.md). ``--start`` and
``--seconds`` cut the snippet out of a longer recording.

With ``--server HOST:PORT --certs DIR`` only Alice runs here, against a serving Bob
(``smc-hmm serve`` with ``protocol = "match"``): she checks that the server matches in
the mode (and with the stride and threshold) asked for, and refuses otherwise before
sending anything that depends on her snippet.  The plaintext answer is then the
``--collection``'s (the bundled one by default): a serving Bob's own collection is his
secret, so it is a reference only.
"""

from __future__ import annotations

import math

from smc_hmm.cli import common
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.options import add_checked
from smc_hmm.progress import PhaseProgress, status

HELP = "find which recording of a collection a snippet comes from, securely"


def _check_start(value: float, name: str) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name} must be a second of --audio >= 0, got {value:g}")
    return value


def _check_seconds(value: float, name: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a duration > 0 seconds, got {value:g}")
    return value


#: the longest WAV file ``match`` reads unless told otherwise (songs included)
DEFAULT_MAX_SECONDS = 600.0
#: the longest it reads at all: an hour (28.8 M samples at 8 kHz, 230 MB as float64)
MAX_SECONDS = 3600.0


def _check_max_seconds(value: float, name: str) -> float:
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise ConfigError(
            f"{name} must be a duration in (0, {MAX_SECONDS:g}] seconds, got {value:g}"
        )
    return value


def configure(p) -> None:
    common.add_audio_argument(p, "snippet")
    add_checked(
        p.add_argument,
        "--start",
        _check_start,
        help="cut the snippet from this second of --audio",
    )
    add_checked(
        p.add_argument,
        "--seconds",
        _check_seconds,
        help="cut this many seconds of --audio",
    )
    p.add_argument(
        "--collection",
        default="fsdd",
        help="Bob's recordings: fsdd (the bundled 200), a folder of WAV files or an .npz "
        "collection (default: fsdd)",
    )
    # the protocol validates these (this core module does not import protocols/)
    p.add_argument(
        "--mode",
        choices=("exact", "approx"),
        default="exact",
        help="exact: every window; approx: every --stride-th offset, adjacent windows "
        "pooled (about 1/stride of the comparisons)",
    )
    p.add_argument("--stride", type=int, help="approx: the stride (default 2)")
    p.add_argument(
        "--threshold",
        type=float,
        help="no match unless the best window's normalised correlation beats this "
        "(default: the bundled data's calibrated threshold for the mode)",
    )
    add_checked(
        p.add_argument,
        "--max-seconds",
        _check_max_seconds,
        default=DEFAULT_MAX_SECONDS,
        help="the longest WAV file read, the snippet's and every recording of a --collection "
        f"folder, checked from its header before its samples are read (default "
        f"{DEFAULT_MAX_SECONDS:g}: ten minutes)",
    )
    common.add_run_arguments(p, "compute lanes per party", 600.0)
    common.add_json_argument(p)
    common.add_server_arguments(p)


def _params(args) -> dict:
    if args.stride is not None and args.mode != "approx":
        raise InvalidInputError("--stride is for --mode approx (the exact mode takes every offset)")
    return {"mode": args.mode, **common.given(stride=args.stride, threshold=args.threshold)}


def _answer(result, frame_seconds: float) -> dict:
    """A plaintext :class:`~smc_hmm.data.match.MatchResult` or the protocol's output, as
    the report prints it."""
    if isinstance(result, dict):
        out = {"match": result["match"], "offset_frames": result["offset_frames"]}
    else:
        out = {"match": result.id, "offset_frames": result.offset}
    if out["offset_frames"] is not None:
        out["offset_seconds"] = round(out["offset_frames"] * frame_seconds, 6)
    return out


def run(args) -> int:
    common.check_key_bits(args)
    common.check_json_path(args.json)
    output = common.Output(args.json)
    out = output.err
    from smc_hmm.data.match import Collection, Spectrogram, match
    from smc_hmm.protocol import find

    protocol = find("match")
    params = protocol.params(_params(args))  # bad parameters fail before any work
    spectrogram = Spectrogram()
    frames = spectrogram.from_wav(args.audio, args.start, args.seconds, args.max_seconds)
    with status(out, f"reading the collection {args.collection}"):
        collection = Collection.load(args.collection, max_seconds=args.max_seconds)
    if collection.spectrogram != spectrogram:
        raise ConfigError(f"{args.collection} was made with other spectrogram parameters")
    plain = match(
        frames,
        collection,
        quant=params.quant,
        threshold=params.threshold_value(),
        stride=params.pool,
    )
    common.warn_insecure(args, out)
    if args.server:
        return _run_against_server(args, output, frames, plain, spectrogram.frame_seconds)
    result, offline_seconds = _secure_run(args, out, protocol, params, frames, collection)
    secure = _answer(result["alice"], spectrogram.frame_seconds)
    plaintext = _answer(plain, spectrogram.frame_seconds)
    report = common.make_report(
        "match",
        args.mode,
        secure,
        plaintext,
        secure == plaintext,
        result.cost.to_dict(),
        audio=str(args.audio),
        collection=str(args.collection),
        recordings=len(collection),
        stride=params.pool,
        threshold=params.threshold_value(),
        frames=len(frames),
        candidates=result["alice"]["candidates"],
        secure=secure,
        seconds={"online": result.elapsed, "offline": offline_seconds},
        key_bits=args.key_bits,
    )
    line = (
        f"{args.audio}: secure {_said(secure)}; plaintext {_said(plaintext)} "
        f"({common.agreement(secure == plaintext)})"
    )
    return common.finish_compared(output, report, result.cost, [line], secure == plaintext)


def _said(answer: dict) -> str:
    """A match in words: the recording and the offset, or no match."""
    if answer["match"] is None:
        return "no match"
    return f"[bold]{answer['match']}[/] at {answer['offset_seconds']:.2f} s"


def _secure_run(args, out, protocol, params, frames, collection):
    """Alice and Bob in this process after an offline phase: (RunResult, offline seconds)."""
    keypair = common.generate_keys(args, out)
    result, offline = common.run_with_offline_phase(
        args,
        out,
        protocol,
        _params(args),
        params,
        frames,
        collection,
        keypair,
        f"secure matching: {len(frames)} frames against {len(collection)} recordings, "
        f"{args.mode} mode",
        meta={"audio": str(args.audio), "mode": args.mode},
        progress=lambda spinner: {
            "alice": PhaseProgress(spinner, "secure matching", common.phases("match", {}))
        },
    )
    return result, offline.seconds


def _run_against_server(args, output, frames, plain, frame_seconds: float) -> int:
    """Alice only, against a serving Bob whose parameters must be the ones asked for."""
    connection = common.connect(args)
    result = common.run_against_server(
        args,
        output.err,
        connection,
        "match",
        frames,
        _params(args),
        "secure matching",
        lambda spinner: PhaseProgress(spinner, "secure matching", common.phases("match", {})),
    )
    secure = _answer(result["output"], frame_seconds)
    reference = _answer(plain, frame_seconds)
    report = common.server_report(
        args,
        "match",
        args.mode,
        secure,
        frames,
        result,
        secure=secure,
        plaintext_reference={"collection": str(args.collection), **reference},
    )
    line = (
        f"{args.audio}: secure {_said(secure)} (session {result['session']} with "
        f"{args.server}); in {args.collection}: {_said(reference)}"
    )
    output.finish(report, None, [line])
    return 0
