"""``smc-hmm digits --audio FILE.wav``: a spoken digit string (a PIN, a phone or an
account number), recognised securely.

Alice computes the features of her WAV file locally (the bundled pipeline); Bob holds
the digit HMMs and a silence model (the bundled ones by default, or a model file with
models labelled zero .. nine and silence), joined in a loop by the public grammar
(``--max-digits``, ``--insertion-penalty``); the registered ``digits`` protocol
(``protocols/digits.py``, found by name) decodes the loop with secure Viterbi.  Alice
learns the string; with ``--pin PIN`` the PIN is enrolled first (Alice's key, Bob's
one-time-padded record) and Bob learns only whether the spoken string equals it.  The
plaintext decoding of the same loop is printed beside.

With ``--server HOST:PORT --certs DIR`` only Alice runs here, against a serving Bob
(``smc-hmm serve`` with ``protocol = "digits"``).
"""

from __future__ import annotations

from smc_hmm.cli import common
from smc_hmm.errors import InvalidInputError
from smc_hmm.progress import Progress

HELP = "recognise a spoken digit string (a PIN) in one WAV recording, securely"
DOING = "secure digit recognition"


def configure(p) -> None:
    common.add_audio_argument(p)
    p.add_argument(
        "--models",
        default="bundled",
        help="Bob's models: bundled (the digit HMMs and a silence state) or a model file "
        "(.npz) with models labelled zero .. nine and silence",
    )
    p.add_argument("--pin", help="enrol this PIN and let Bob learn only whether it was spoken")
    p.add_argument("--max-digits", type=int, default=None, help="the grammar's longest string")
    p.add_argument(
        "--insertion-penalty", type=float, default=None, help="nats charged for each digit"
    )
    common.add_run_arguments(p, "compute lanes per party (default: cores)", 600.0)
    common.add_max_frames_argument(p)
    common.add_json_argument(p, "the string, the plaintext one, the PIN's bit and the cost")
    common.add_server_arguments(p)


def _settings(args) -> dict:
    """The protocol's parameters as given (the grammar is public)."""
    return common.given(
        mode="pin" if args.pin else None,
        max_digits=args.max_digits,
        insertion_penalty=args.insertion_penalty,
    )


def _frames(args, pipeline):
    """Alice's frames of ``--audio``: a file longer than ``--max-frames`` is refused from
    its header, and one that holds no speech (silence, a tone) before any key work."""
    from smc_hmm.features import speech_warning

    samples = pipeline.read_wav(args.audio, args.max_frames, common.frames_limit(args))
    problem = speech_warning(samples, pipeline.sample_rate)
    if problem:
        raise InvalidInputError(f"{args.audio}: {problem}")
    frames = pipeline.features(samples)
    common.check_frames(args, frames)
    return frames


def _shown(value) -> str:
    return value if value else "none"


def run(args) -> int:
    """Recognise ``args.audio``: the tables on stderr, the strings on stdout."""
    return common.run_here_or_served(args, _run_in_process, _run_against_server)


def _inputs(args, params, frames):
    """(Alice's input, Bob's input) and the plaintext decoding of the same loop."""
    from smc_hmm.data.digits import load_digit_models
    from smc_hmm.hmm.digits import decode_digits, enrol

    models = load_digit_models(args.models)
    model, layout = models.loop(params.grammar, params.layout)
    plain = decode_digits(model, layout, frames, params.grammar)
    if not args.pin:
        return frames, models, plain
    key, record = enrol(args.pin, params.max_digits)
    return {"frames": frames, "key": key}, {"models": models, "enrolled": record}, plain


def _run_in_process(args, output) -> int:
    from smc_hmm.data.digits import digit_pipeline
    from smc_hmm.protocol import find

    protocol = find("digits")
    settings = _settings(args)
    params = protocol.params(settings)  # a grammar beyond the maximum fails here
    frames = _frames(args, digit_pipeline())
    alice, bob, plain = _inputs(args, params, frames)
    common.warn_insecure(args, output.err)
    keypair = common.generate_keys(args, output.err)
    result, offline = common.run_with_offline_phase(
        args,
        output.err,
        protocol,
        settings,
        params,
        alice,
        bob,
        keypair,
        f"{DOING}: {len(frames)} frames",
        meta={"audio": str(args.audio)},
        progress=lambda spinner: {"alice": Progress(spinner, DOING)},
    )
    secure = result["alice"]
    equal = None if not args.pin else bool(result["bob"]["equal"])
    agree = equal == (plain.text == args.pin) if args.pin else secure["digits"] == plain.text
    report = common.make_report(
        "digits",
        params.mode,
        secure,
        plain.text,
        agree,
        result.cost.to_dict(),
        audio=str(args.audio),
        digits=None if args.pin else secure["digits"],
        equal=equal,
        frames=len(frames),
        seconds=result.elapsed,
        offline_seconds=offline.seconds,
    )
    output.err.print(
        f"{len(frames)} frames, {result.elapsed:.1f} s online + {offline.seconds:.1f} s offline, "
        f"{result.cost.bytes_total:,} bytes",
        soft_wrap=True,
    )
    lines = [_line(args, secure, plain, equal, agree)]
    return common.finish_compared(output, report, result.cost, lines, agree)


def _line(args, secure, plain, equal, agree) -> str:
    said = f"plaintext {_shown(plain.text)}"
    if plain.reason:
        said += f" ({plain.reason})"
    if args.pin:
        return (
            f"{args.audio}: Bob learns [bold]{'equal' if equal else 'not equal'}[/] to the "
            f"enrolled PIN; {said} ({common.agreement(agree)})"
        )
    why = f" ({secure['reason']})" if secure["reason"] else ""
    return (
        f"{args.audio}: [bold]{_shown(secure['digits'])}[/]{why}; {said} "
        f"({common.agreement(agree)})"
    )


def _run_against_server(args, output) -> int:
    """Alice only, against a serving Bob (string mode: the PIN mode needs Bob's record)."""
    from smc_hmm.data.digits import digit_pipeline

    if args.pin:
        raise InvalidInputError("with --server the PIN is the server's: --pin is for local runs")
    frames, result = common.served_session(
        args, output.err, "digits", lambda: _frames(args, digit_pipeline()), _settings(args), DOING
    )
    secure = result["output"]
    report = common.server_report(
        args, "digits", "string", secure, frames, result, digits=secure["digits"], equal=None
    )
    output.finish(report, None, [f"{args.audio}: [bold]{_shown(secure['digits'])}[/]"])
    return 0
