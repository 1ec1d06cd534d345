"""``smc-hmm speaker identify|verify|anonymous --audio FILE.wav``: secure speaker recognition.

Alice computes the speaker features of her WAV file locally (13 MFCCs and their deltas
from the bundled pipeline, :mod:`smc_hmm.data.speakers`), Bob holds one GMM per enrolled
speaker and a UBM (the bundled five FSDD speakers by default, or a labelled model file),
and the registered ``speaker`` protocol (``protocols/speaker.py``, found by name, so this
module does not import the protocol package) runs both roles in-process.  The plaintext
decision is computed locally beside the secure one, for comparison only; the result is
printed as JSON on standard output first, the cost tables after it; warnings and progress
go to standard error (the convention of every command).

``identify``: Alice learns the closest enrolled speaker, or null when the UBM beats every
speaker by more than the margin (2 nats per frame by default): it names one of the N
enrolled speakers, it does not verify one, so an unknown voice can be named (the report
says so); ``verify`` accepts or rejects a claim.  ``verify --claim NAME``: Bob learns
whether the voice is NAME's (the claim is public to him).  ``anonymous --claim NAME``:
Bob learns the same bit, never the claim (Alice sends it as an encrypted one-hot
selection).  A flag the mode does not use
(``--claim`` with identify, ``--margin`` with verify or anonymous, ``--threshold`` with
identify) is a one-line error, as is a missing ``--claim``.

With ``--server HOST:PORT --certs DIR`` only Alice runs here, against a serving Bob
(``smc-hmm serve``): she first checks that the server serves ``speaker`` in the mode she
asked for (and with her ``--margin`` / ``--threshold`` if she gave one) and refuses
otherwise before sending anything that depends on her recording or claim
(:func:`smc_hmm.runtime.client.check_served`); she then prints what she learns, or who
learned the result.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from smc_hmm.cli.common import add_key_arguments, check_key_bits, check_output_path, console
from smc_hmm.compute import Compute
from smc_hmm.crypto import generate_keypair
from smc_hmm.data.speakers import (
    SPEAKER_FEATURES,
    UBM_LABEL,
    decision,
    load_speaker_models,
    scores,
    speaker_features_from_wav,
)
from smc_hmm.errors import ConfigError, InsecureKeyWarning, InvalidInputError
from smc_hmm.limits import DEFAULT_MAX_FRAMES, MAX_SEQUENCE_LENGTH
from smc_hmm.options import TIMEOUT, WORKERS, check_output_dir
from smc_hmm.progress import status
from smc_hmm.protocol import find
from smc_hmm.runtime.simulate import run_protocol

HELP = "identify or verify the speaker of one WAV recording securely (GMMs and a UBM)"
#: what identify's answer means, in its report (an unknown voice gets the closest name)
IDENTIFY_NOTE = (
    "identify names the closest of the {n} enrolled speakers unless the background model "
    "beats them all by the margin; it does not verify: an unknown voice can be named, so use "
    "verify --claim to accept or reject"
)
MODES = ("identify", "verify", "anonymous")


def configure(p) -> None:
    p.add_argument("mode", choices=MODES, help="identify, verify (--claim) or anonymous (--claim)")
    p.add_argument("--audio", required=True, help="Alice's recording (mono WAV, any rate)")
    p.add_argument(
        "--claim",
        help="verify and anonymous: the speaker Alice claims to be (anonymous: Bob never "
        "learns it)",
    )
    p.add_argument(
        "--models",
        help="Bob's labelled GMM file (speakers and a 'ubm'; default: the bundled five FSDD "
        "speakers)",
    )
    p.add_argument("--margin", type=float, help="identify: nats per frame over the UBM")
    p.add_argument("--threshold", type=float, help="verify / anonymous: nats per frame")
    p.add_argument("--workers", type=WORKERS, default=None, help="compute lanes per party")
    add_key_arguments(p, "tests only")
    p.add_argument("--timeout", type=TIMEOUT, default=300.0, help="per-receive timeout, seconds")
    p.add_argument(
        "--max-frames",
        type=int,
        default=DEFAULT_MAX_FRAMES,
        help=f"the longest recording accepted, in 10 ms frames (default {DEFAULT_MAX_FRAMES:,}: "
        "30 s, as smc-hmm serve)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the report and cost as JSON")
    p.add_argument(
        "--views",
        metavar="DIR",
        help="write what each party received (decrypted where it holds the key) to "
        "DIR/alice.json and DIR/bob.json (docs/views.md)",
    )
    p.add_argument("--server", metavar="HOST:PORT", help="a serving Bob (smc-hmm serve)")
    p.add_argument("--certs", metavar="DIR", help="with --server: ca.pem and the client's files")
    p.add_argument("--name", help="with --server: the client certificate's name in --certs")
    p.add_argument("--server-name", default="bob", help="with --server: the server's party name")


def _params(args) -> dict:
    params = {"mode": args.mode}
    if args.margin is not None:
        params["margin"] = args.margin
    if args.threshold is not None:
        params["threshold"] = args.threshold
    return params


def _models(path: str | None):
    if path is None:
        return load_speaker_models()
    from smc_hmm.hmm.io import load_models

    if not Path(path).is_file():
        raise ConfigError(f"--models {path}: no such model file")
    models, labels = load_models(Path(path))
    if not labels or UBM_LABEL not in labels:
        raise ConfigError(
            f"--models {path}: its models must be labelled, one of them {UBM_LABEL!r}"
        )
    return models, labels


def check_flags(args) -> None:
    """One-line errors for flags the mode needs or does not use (before any work)."""
    claims = args.mode in ("verify", "anonymous")
    if claims and not args.claim:
        raise InvalidInputError(f"{args.mode} needs --claim NAME (the speaker Alice claims to be)")
    if not claims and args.claim is not None:
        raise InvalidInputError(
            "--claim means nothing with identify (Alice learns who spoke); use verify or "
            "anonymous to check a claim"
        )
    if args.mode == "identify" and args.threshold is not None:
        raise InvalidInputError("--threshold is for verify and anonymous; identify uses --margin")
    if args.mode != "identify" and args.margin is not None:
        raise InvalidInputError(f"--margin is for identify; {args.mode} uses --threshold")


def run(args) -> int:
    check_key_bits(args)
    check_output_path(args.json)
    check_flags(args)
    if args.views and args.server:
        raise InvalidInputError("--views records an in-process run; drop --server")
    check_output_dir(args.views, "--views")
    out = console(stderr=True)
    protocol = find("speaker")
    params = protocol.params(_params(args))  # bad parameters fail before any work
    frames = speaker_features_from_wav(args.audio)
    if not 1 <= args.max_frames <= MAX_SEQUENCE_LENGTH:
        raise InvalidInputError(f"--max-frames must be in [1, {MAX_SEQUENCE_LENGTH:,}]")
    if len(frames) > args.max_frames:
        raise InvalidInputError(
            f"{args.audio} has {len(frames):,} frames ({len(frames) / 100:.1f} s of audio), "
            f"above --max-frames {args.max_frames:,} (the default, {DEFAULT_MAX_FRAMES:,}, is "
            "smc-hmm serve's too): raise --max-frames to run it anyway"
        )
    if args.server:
        return _run_against_server(args, out, frames)
    models, labels = _models(args.models)
    if {m.n_features for m in models} != {SPEAKER_FEATURES}:
        raise InvalidInputError(f"speaker models must take {SPEAKER_FEATURES} features per frame")
    if args.claim is not None and (args.claim not in labels or args.claim == UBM_LABEL):
        speakers = ", ".join(x for x in labels if x != UBM_LABEL)
        raise InvalidInputError(f"--claim {args.claim}: not an enrolled speaker ({speakers})")
    if args.insecure:
        out.print(f"[yellow]warning: {args.key_bits}-bit keys are INSECURE (tests only)[/]")
    with (
        status(out, f"generating a {args.key_bits}-bit Paillier key pair"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", InsecureKeyWarning)
        keypair = generate_keypair(args.key_bits, insecure=args.insecure)
    sc = scores(models, frames)
    plain = decision(args.mode, sc, labels, params, len(frames), args.claim)
    utterance = frames if args.claim is None else (frames, args.claim)
    with (
        Compute.processes(args.workers) as compute,
        status(out, f"secure speaker {args.mode}: {len(frames)} frames, {len(models)} models"),
    ):
        result = run_protocol(
            protocol,
            params,
            {"alice": ("alice", utterance), "bob": ("bob", (models, labels))},
            keys={"alice": keypair},
            compute={"alice": compute, "bob": compute},
            min_key_bits=min(args.key_bits, 2048) if args.insecure else 2048,
            timeout=args.timeout,
            meta={"audio": str(args.audio), "mode": args.mode},
            record_views=bool(args.views),
        )
    if args.mode == "identify":
        secure, who = result["alice"]["speaker"], "alice"
    else:
        secure, who = result["bob"]["accept"], "bob"
    key = "speaker" if args.mode == "identify" else "accept"
    report = {
        "mode": args.mode,
        "audio": str(args.audio),
        "frames": len(frames),
        "secure": {key: secure, "learned_by": who},
        "plaintext": {key: plain, "log_likelihoods": dict(zip(labels, sc))},
        "agree": secure == plain,
        "seconds": result.elapsed,
        "key_bits": args.key_bits,
        **({"claim": args.claim} if args.claim is not None else {}),
        **({"note": IDENTIFY_NOTE.format(n=len(labels) - 1)} if args.mode == "identify" else {}),
    }
    _emit(report, args.json, {"cost": result.cost.to_dict()}, out)
    result.cost.render(console())  # after the result, on standard output
    if args.views:
        from smc_hmm.runtime.views import write_views

        written = write_views(args.views, result.views, {"alice": keypair})
        out.print(f"views: {', '.join(str(p) for p in written)}")
    return 0 if secure == plain else 1


def _emit(report: dict, path: str | None, extra: dict, out) -> None:
    sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    if path:
        try:
            Path(path).write_text(json.dumps({**report, **extra}, indent=2, sort_keys=True) + "\n")
        except OSError as e:
            raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e
        out.print(f"wrote {path}")


def _run_against_server(args, out, frames) -> int:
    """Alice only, against a serving Bob: his parameters apply, and must be the mode (and
    the margin or threshold, if given) asked for here -- checked before anything that
    depends on the recording or the claim is sent."""
    from smc_hmm.runtime.client import client_tls, parse_server, run_client_session

    if not args.certs:
        raise InvalidInputError("--server needs --certs DIR (ca.pem and a client certificate)")
    address = parse_server(args.server)
    tls, name = client_tls(args.certs, args.name)
    utterance = frames if args.claim is None else (frames, args.claim)
    with status(out, f"secure speaker {args.mode} with {args.server} as {name}"):
        result = run_client_session(
            "speaker",
            "alice",
            utterance,
            server=address,
            tls=tls,
            name=name,
            server_name=args.server_name,
            key_bits=args.key_bits,
            insecure=args.insecure,
            timeout=args.timeout,
            expect=_params(args),
        )
    output = result["output"]
    if output is not None and "speaker" in output:  # identify: Alice learned the label
        secure = {**output, "learned_by": "alice"}
    else:  # verify / anonymous: the decision went to the server
        secure = {"learned_by": "server", "recorded_by_server": result["records"]}
        if output is not None:  # reveal_scores, for measurements
            secure["scores"] = output.get("scores")
    report = {
        "mode": args.mode,
        "audio": str(args.audio),
        "frames": len(frames),
        "secure": secure,
        "session": result["session"],
        "server": args.server,
        "seconds": result["elapsed"],
        **({"claim": args.claim} if args.claim is not None else {}),
    }
    _emit(report, args.json, {"cost": result["cost"]}, out)
    return 0
