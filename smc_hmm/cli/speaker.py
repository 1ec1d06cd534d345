"""``smc-hmm speaker identify|verify|anonymous --audio FILE.wav``: secure speaker recognition.

Alice computes the speaker features of her WAV file locally (13 MFCCs and their deltas
from the bundled pipeline, :mod:`smc_hmm.data.speakers`), Bob holds one GMM per enrolled
speaker and a UBM (the bundled five FSDD speakers by default, or a labelled model file),
and the registered ``speaker`` protocol (``protocols/speaker.py``, found by name, so this
module does not import the protocol package) runs both roles in-process.  The plaintext
decision is computed locally beside the secure one, for comparison only; both decisions
are printed as one line on standard output (``--json -``: the JSON report instead), the
cost tables, warnings and progress on standard error (the convention of every command,
docs/running.md).

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

from pathlib import Path

from smc_hmm.cli import common
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.progress import PhaseProgress, status

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
    common.add_audio_argument(p)
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
    p.add_argument(
        "--to",
        choices=("alice", "trent"),
        default="alice",
        help="identify: who learns the label; trent runs a third party in-process (the "
        "speaker-trent protocol: Alice and Bob learn nothing)",
    )
    p.add_argument(
        "--hide-count",
        type=int,
        default=None,
        metavar="N",
        help="identify: pad the speakers to N with dummies that never win (N alone is public)",
    )
    p.add_argument("--threshold", type=float, help="verify / anonymous: nats per frame")
    common.add_run_arguments(p, "compute lanes per party", 300.0)
    common.add_max_frames_argument(p)
    common.add_json_argument(p)
    common.add_views_argument(p)
    common.add_server_arguments(p)


def _params(args) -> dict:
    given = common.given(margin=args.margin, threshold=args.threshold, hide_count=args.hide_count)
    return {"mode": args.mode, **given}


def _models(path: str | None):
    from smc_hmm.data.speakers import UBM_LABEL, load_speaker_models

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
    if args.to == "trent" and (args.mode != "identify" or args.server):
        raise InvalidInputError("--to trent is for identify, in-process (Trent is a third party)")
    if args.mode != "identify" and args.hide_count is not None:
        raise InvalidInputError("--hide-count is for identify (a claim names its speaker)")
    if args.mode != "identify" and args.margin is not None:
        raise InvalidInputError(f"--margin is for identify; {args.mode} uses --threshold")


def run(args) -> int:
    from smc_hmm.data.speakers import scores, speaker_features_from_wav
    from smc_hmm.protocol import find

    common.check_key_bits(args)
    common.check_json_path(args.json)
    check_flags(args)
    common.check_views(args)
    output = common.Output(args.json)
    protocol = find("speaker-trent" if args.to == "trent" else "speaker")
    params = protocol.params(_params(args))  # bad parameters fail before any work
    frames = speaker_features_from_wav(args.audio, args.max_frames, common.frames_limit(args))
    common.check_frames(args, frames)
    if args.server:
        return _run_against_server(args, output, frames)
    models, labels = _models(args.models)
    _check_speakers(args, models, labels)
    common.warn_insecure(args, output.err)
    keypair = common.generate_keys(args, output.err)
    sc = scores(models, frames)
    utterance = frames if args.claim is None else (frames, args.claim)
    reference = protocol.plaintext(params, {"alice": utterance, "bob": (models, labels)})
    key = "speaker" if args.mode == "identify" else "accept"
    plain = reference[key]
    result = _secure_run(args, output.err, protocol, params, frames, (models, labels), keypair)
    if args.mode == "identify":
        secure, who = result[args.to]["speaker"], args.to
    else:
        secure, who = result["bob"]["accept"], "bob"
    common.write_party_views(args, result, keypair, output.err)
    report = common.make_report(
        "speaker",
        args.mode,
        {key: secure, "learned_by": who},
        common.scored_plaintext(key, reference, labels, sc),
        secure == plain,
        result.cost.to_dict(),
        audio=str(args.audio),
        frames=len(frames),
        secure={key: secure, "learned_by": who},
        seconds=result.elapsed,
        key_bits=args.key_bits,
        **_claim_and_note(args, labels),
    )
    line = (
        f"{args.audio}: secure {args.mode} [bold]{_said(args, secure)}[/] (learned by {who}), "
        f"plaintext {_said(args, plain)} ({common.agreement(secure == plain)})"
    )
    return common.finish_compared(output, report, result.cost, [line], secure == plain)


def _check_speakers(args, models, labels) -> None:
    """Bob's models take the speaker features, and ``--claim`` names an enrolled speaker."""
    from smc_hmm.data.speakers import SPEAKER_FEATURES, UBM_LABEL

    if {m.n_features for m in models} != {SPEAKER_FEATURES}:
        raise InvalidInputError(f"speaker models must take {SPEAKER_FEATURES} features per frame")
    if args.claim is not None and (args.claim not in labels or args.claim == UBM_LABEL):
        speakers = ", ".join(x for x in labels if x != UBM_LABEL)
        raise InvalidInputError(f"--claim {args.claim}: not an enrolled speaker ({speakers})")


def _claim_and_note(args, labels=None) -> dict:
    """The report's ``claim`` (verify, anonymous) and, for identify with ``labels`` known,
    the ``note`` on what its answer means."""
    out = {"claim": args.claim} if args.claim is not None else {}
    if labels is not None and args.mode == "identify":
        out["note"] = IDENTIFY_NOTE.format(n=len(labels) - 1)
    return out


def _secure_run(args, out, protocol, params, frames, speakers, keypair):
    """Both roles in this process on ``--workers`` lanes, with a progress line per phase
    of Alice's on ``out``."""
    from smc_hmm.compute import Compute

    utterance = frames if args.claim is None else (frames, args.claim)
    doing = f"secure speaker {args.mode}"
    with (
        Compute.processes(args.workers) as compute,
        status(out, f"{doing}: {len(frames)} frames, {len(speakers[0])} models") as spinner,
    ):
        return common.run_in_process(
            args,
            protocol,
            params,
            utterance,
            speakers,
            keypair,
            compute,
            meta={"audio": str(args.audio), "mode": args.mode},
            record_views=bool(args.views),
            progress={"alice": PhaseProgress(spinner, doing, common.phases("speaker", params))},
            **({"third": ("trent", None)} if args.to == "trent" else {}),
        )


def _said(args, decision) -> str:
    """A decision in words: the speaker (identify) or the claim's outcome."""
    if args.mode == "identify":
        return decision if decision is not None else "nobody enrolled (the background wins)"
    return f"{args.claim} {'accepted' if decision else 'rejected'}"


def _run_against_server(args, output, frames) -> int:
    """Alice only, against a serving Bob: his parameters apply, and must be the mode (and
    the margin or threshold, if given) asked for here -- checked before anything that
    depends on the recording or the claim is sent."""
    connection = common.connect(args)
    utterance = frames if args.claim is None else (frames, args.claim)
    result = common.run_against_server(
        args,
        output.err,
        connection,
        "speaker",
        utterance,
        _params(args),
        f"secure speaker {args.mode}",
        lambda spinner: PhaseProgress(
            spinner, f"secure speaker {args.mode}", common.phases("speaker", _params(args))
        ),
    )
    out = result["output"]
    if out is not None and "speaker" in out:  # identify: Alice learned the label
        secure = {**out, "learned_by": "alice"}
        line = f"secure identify [bold]{_said(args, out['speaker'])}[/]"
    else:  # verify / anonymous: the decision went to the server
        secure = {"learned_by": "server", "recorded_by_server": result["records"]}
        if out is not None:  # reveal_scores, for measurements
            secure["scores"] = out.get("scores")
        line = f"secure {args.mode} of the claim {args.claim}: the server learned the decision"
    report = common.server_report(
        args, "speaker", args.mode, secure, frames, result, secure=secure, **_claim_and_note(args)
    )
    line = f"{args.audio}: {line} (session {result['session']} with {args.server})"
    output.finish(report, None, [line])
    return 0
