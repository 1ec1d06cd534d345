"""What every ``smc-hmm`` command shares: the console, JSON output and the check of
output paths, plugin lookup, key-size options and checks, and the one-line error; and
what the commands that recognise one recording (keyword, speaker, spot, match) share:
their client flags, Alice's key pair, the in-process run (with its offline phase) or the
session with a serving Bob, and the printing of their result.

Command modules (:mod:`smc_hmm.cli.demo`, :mod:`smc_hmm.cli.bench`, ...) import this
module and never one another, so adding a command touches one new module and one line
of :data:`smc_hmm.cli.COMMANDS`.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

from smc_hmm.bench.common import KEY_FLAGS, check_key_bits
from smc_hmm.console import console, end_stdout, stdout_closed, write_stdout
from smc_hmm.errors import ConfigError, InsecureKeyWarning, InvalidInputError, WeakerModeWarning
from smc_hmm.limits import DEFAULT_MAX_FRAMES, MAX_KEY_BITS
from smc_hmm.options import TIMEOUT, WORKERS, add_checked, check_output_dir, check_output_path
from smc_hmm.progress import status

DEFAULT_DEMO = "keyword"
DEMO_GROUP = "smc_hmm.demos"
BENCH_GROUP = "smc_hmm.benchmarks"


def plugins(group: str) -> dict:
    """Entry points of ``group`` by name (loaded only when used)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=group)}


def resolve_entry(group: str, kind: str, name: str) -> tuple[Callable, Callable | None]:
    """(run, add_arguments or None) of the plugin ``name`` in entry-point ``group``."""
    found = plugins(group)
    if name not in found:
        raise ConfigError(f"unknown {kind} {name!r} (known: {', '.join(sorted(found))})")
    try:
        fn = found[name].load()
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{kind} {name!r} failed to load: {e}") from e
    if not callable(fn):
        raise ConfigError(f"{kind} {name!r} is not callable")
    add = getattr(fn, "add_arguments", None)
    if add is None:
        add = getattr(sys.modules.get(getattr(fn, "__module__", ""), None), "add_arguments", None)
    return fn, add


def write_json(path: str | None, data, out) -> None:
    """Write ``data`` as indented JSON to ``path`` (nothing if ``path`` is empty)."""
    if not path:
        return
    try:
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e
    out.print(f"wrote {path}")


# -- the output convention of every command (docs/running.md, "Output") ------------------

#: the keys every command's JSON report holds, whatever its own fields (docs/running.md,
#: "Reports"): null where they do not apply (no plaintext answer against a serving Bob)
REPORT_KEYS = ("command", "mode", "result", "plaintext", "agree", "cost")


def make_report(command: str, mode, result, plaintext, agree, cost, **own) -> dict:
    """A JSON report in the schema every command shares (:data:`REPORT_KEYS`), then the
    command's own fields (which may repeat the answer under the names its docs use)."""
    return {
        "command": command,
        "mode": mode,
        "result": result,
        "plaintext": plaintext,
        "agree": agree,
        "cost": cost,
        **own,
    }


def add_json_argument(p, what: str = "the report and its cost") -> None:
    """``--json PATH``, or ``--json -`` for the report alone on standard output."""
    p.add_argument(
        "--json",
        metavar="PATH",
        help=f"also write {what} as JSON to PATH; '-': print it on standard output instead "
        "of the result lines",
    )


def check_json_path(path: str | None) -> None:
    """``--json PATH`` must be writable (before any work); ``-`` is standard output."""
    if path != "-":
        check_output_path(path)


class Output:
    """One run's output by the convention of every command (docs/running.md, "Output"):
    result lines on standard output (:meth:`line`), or with ``--json -`` the JSON report
    alone; tables, progress, warnings and notes on standard error (:attr:`err`); every
    file written before anything of the result is printed (:meth:`finish`).  A closed
    standard output ends the output, not the run (:func:`console`)."""

    def __init__(self, json_path: str | None = None) -> None:
        self.json = json_path
        self.out = console()
        self.err = console(stderr=True)

    def line(self, text: str) -> None:
        """One result line on standard output (none with ``--json -``)."""
        if self.json != "-":
            self.out.print(text, soft_wrap=True)

    def finish(self, report: dict | None, cost=None, lines=()) -> None:
        """``--json PATH`` first, then ``cost``'s tables (a :class:`~smc_hmm.cost.CostReport`)
        on standard error, then ``lines`` (or, with ``--json -``, ``report``) on standard
        output."""
        if self.json and self.json != "-" and report is not None:
            write_json(self.json, report, self.err)
        if cost is not None:
            cost.render(self.err)
        if self.json == "-" and report is not None:
            write_stdout(json.dumps(report, indent=2, sort_keys=True) + "\n")
        for text in lines:
            self.line(text)


def add_key_arguments(p, insecure_help: str = "tests and reproductions only") -> None:
    """``--key-bits``, ``--insecure`` and ``--allow-large-keys``, spelled alike everywhere;
    :func:`check_key_bits` applies them."""
    p.add_argument("--key-bits", type=int, default=2048, help="Paillier modulus size")
    p.add_argument(
        "--insecure", action="store_true", help=f"allow keys below 2048 bits ({insecure_help})"
    )
    add_large_keys_argument(p)


def add_audio_argument(p, what: str = "recording") -> None:
    """``--audio FILE.wav``: Alice's input of a recording command."""
    p.add_argument("--audio", required=True, help=f"Alice's {what} (mono WAV, any rate)")


def add_run_arguments(p, workers_help: str, timeout: float) -> None:
    """The options of a secure run on a recording: its compute lanes (``--workers``), its
    keys (small ones for tests only) and the per-receive ``--timeout`` (``timeout`` s)."""
    p.add_argument("--workers", type=WORKERS, default=None, help=workers_help)
    add_key_arguments(p, "tests only")
    p.add_argument("--timeout", type=TIMEOUT, default=timeout, help="per-receive timeout, seconds")


def add_large_keys_argument(p) -> None:
    p.add_argument(
        "--allow-large-keys",
        action="store_true",
        help=f"allow keys above {MAX_KEY_BITS} bits (generating one can take hours)",
    )


__all__ = [
    "BENCH_GROUP",
    "KEY_FLAGS",
    "REPORT_KEYS",
    "Output",
    "add_audio_argument",
    "add_json_argument",
    "check_json_path",
    "end_stdout",
    "stdout_closed",
    "make_report",
    "write_stdout",
    "DEFAULT_DEMO",
    "DEMO_GROUP",
    "add_key_arguments",
    "add_large_keys_argument",
    "add_max_frames_argument",
    "add_run_arguments",
    "add_server_arguments",
    "add_views_argument",
    "agreement",
    "check_frames",
    "check_key_bits",
    "check_output_path",
    "check_views",
    "connect",
    "console",
    "finish_compared",
    "frames_bound",
    "frames_limit",
    "generate_keys",
    "given",
    "one_line",
    "plugins",
    "read_model_file",
    "resolve_entry",
    "run_against_server",
    "run_here_or_served",
    "run_in_process",
    "run_with_offline_phase",
    "scored_plaintext",
    "served_session",
    "server_report",
    "session_facts",
    "warn_insecure",
    "write_json",
    "write_party_views",
]


def one_line(exc: BaseException) -> str:
    """The error's message on one line (typed errors print as one line, exit code 2)."""
    return " ".join(str(exc).split()) or type(exc).__name__


# -- the commands that recognise one recording: keyword, speaker, spot, match --------


def frames_bound(n: int, name: str) -> int:
    """``--max-frames``: a whole number of frames in [1, MAX_SEQUENCE_LENGTH]."""
    from smc_hmm.limits import MAX_SEQUENCE_LENGTH, check_at_most

    if n < 1:
        raise InvalidInputError(f"{name} must be at least 1 frame")
    return check_at_most("max_sequence_length", n, MAX_SEQUENCE_LENGTH, name)


def add_max_frames_argument(p) -> None:
    """``--max-frames``: the public bound on the recording's length (as ``smc-hmm serve``),
    checked while parsing; the WAV file's duration is checked against it from its header
    (:func:`frames_limit`) and its frames again once computed (:func:`check_frames`)."""
    add_checked(
        p.add_argument,
        "--max-frames",
        frames_bound,
        convert=int,
        default=DEFAULT_MAX_FRAMES,
        help=f"the longest recording accepted, in 10 ms frames (default {DEFAULT_MAX_FRAMES:,}: "
        "30 s, as smc-hmm serve)",
    )


def add_views_argument(p) -> None:
    p.add_argument(
        "--views",
        metavar="DIR",
        help="write what each party received (decrypted where it holds the key) to "
        "DIR/alice.json and DIR/bob.json (docs/views.md)",
    )


def add_server_arguments(p) -> None:
    """``--server``, ``--certs``, ``--name`` and ``--server-name``: Alice alone, against a
    serving Bob (:func:`connect`, :func:`run_against_server`)."""
    p.add_argument("--server", metavar="HOST:PORT", help="a serving Bob (smc-hmm serve)")
    p.add_argument("--certs", metavar="DIR", help="with --server: ca.pem and the client's files")
    p.add_argument("--name", help="with --server: the client certificate's name in --certs")
    p.add_argument("--server-name", default="bob", help="with --server: the server's party name")


def read_model_file(spec: str, refusal: str):
    """(models, labels, feature pipeline) of the model file ``--models spec`` (if there is
    none, ``refusal`` says what else ``--models`` takes): the file's own pipeline if it
    carries one, else the bundled pipeline (the bundled models were trained with it)."""
    from smc_hmm.data import load_pipeline
    from smc_hmm.features import FeaturePipeline
    from smc_hmm.hmm.io import load_model_pipeline, load_models

    if not Path(spec).is_file():
        raise ConfigError(f"--models {spec}: {refusal}")
    models, labels = load_models(Path(spec))
    stored = load_model_pipeline(Path(spec))
    pipeline = FeaturePipeline.from_dict(stored) if stored is not None else load_pipeline()
    return models, labels, pipeline


def given(**options) -> dict:
    """The options that were given (not None), in order: a protocol's optional parameters."""
    return {name: value for name, value in options.items() if value is not None}


def frames_limit(args) -> str:
    """``--max-frames`` as a refusal of a WAV file names it (the file's duration is
    checked from its header against it before its samples are read)."""
    return f"--max-frames {args.max_frames:,} (raise --max-frames to run it anyway)"


def check_frames(args, frames, cost: str = "") -> None:
    """A public bound on the recording's length, before any key or protocol work;
    ``cost`` tells what a frame costs (appended to the advice)."""
    if len(frames) > args.max_frames:
        raise InvalidInputError(
            f"{args.audio} has {len(frames):,} frames ({len(frames) / 100:.1f} s of audio), "
            f"above --max-frames {args.max_frames:,} (the default, {DEFAULT_MAX_FRAMES:,}, is "
            f"smc-hmm serve's too): raise --max-frames to run it anyway{cost}"
        )


def warn_insecure(args, out) -> None:
    """Say in words, on ``out`` (standard error), that ``--insecure`` keys are for tests."""
    if args.insecure:
        out.print(f"[yellow]warning: {args.key_bits}-bit keys are INSECURE (tests only)[/]")


def generate_keys(args, out):
    """Alice's Paillier key pair of ``--key-bits``, a progress line on ``out`` meanwhile
    (an insecure size was said in words by :func:`warn_insecure`, not as a warning)."""
    from smc_hmm.crypto import generate_keypair

    with (
        status(out, f"generating a {args.key_bits}-bit Paillier key pair"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(args.key_bits, insecure=args.insecure)


def run_in_process(args, protocol, params, alice, bob, keypair, compute, *, third=None,
                   **options):  # fmt: skip
    """One run of ``protocol`` with both roles in this process: Alice (who holds
    ``keypair``) with input ``alice``, Bob with ``bob``, both on ``compute``, under the
    command's ``--key-bits``/``--insecure`` floor and ``--timeout``; ``third``: (a third
    party's role, its input), played as party ``trent``; ``options`` (meta, randomizers,
    record_views, progress) go to :func:`~smc_hmm.runtime.simulate.run_protocol`."""
    from smc_hmm.runtime.simulate import run_protocol

    parties = {"alice": ("alice", alice), "bob": ("bob", bob)}
    if third is not None:
        parties["trent"] = third
    return run_protocol(
        protocol,
        params,
        parties,
        keys={"alice": keypair},
        compute=compute,
        min_key_bits=min(args.key_bits, 2048) if args.insecure else 2048,
        timeout=args.timeout,
        **options,
    )


def run_with_offline_phase(
    args, out, protocol, settings: dict, params, alice, bob, keypair, doing: str, **options
):
    """The offline phase (every randomizer of the run, drawn once the key is known), then
    :func:`run_in_process` on ``--workers`` process lanes with those randomizers and the
    progress line ``doing``; (the run's result, the offline phase).

    ``settings`` are the protocol's parameters as given (the offline phase sizes the run
    from them; a weaker mode's warning was said in words by the command); ``progress``,
    if given, makes the run's progress reporters from the status line."""
    from smc_hmm.compute import Compute
    from smc_hmm.runtime.offline import offline_phase

    progress = options.pop("progress", None)
    inputs = {"alice": alice, "bob": bob}
    with Compute.processes(args.workers) as compute:
        with (
            status(out, "offline phase: the run's randomizers, once the key is known"),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", WeakerModeWarning)
            offline = offline_phase(protocol.name, settings, inputs, keypair[0], compute)
        keypair[0].use_randomizer(offline.alice)
        with status(out, doing) as spinner:
            if progress is not None:
                options["progress"] = progress(spinner)
            result = run_in_process(
                args,
                protocol,
                params,
                alice,
                bob,
                keypair,
                compute,
                randomizers=offline.randomizers(keypair[0]),
                **options,
            )
    return result, offline


def check_views(args) -> None:
    """``--views DIR`` (where the command has it): an in-process run's record only, in a
    directory that can be written."""
    views = getattr(args, "views", None)
    if views and args.server:
        raise InvalidInputError("--views records an in-process run; drop --server")
    check_output_dir(views, "--views")


def run_here_or_served(args, in_process, served) -> int:
    """A recording command's run: its key size, ``--json`` path and ``--views`` checked
    before any work, then ``served(args, output)`` against the serving Bob of
    ``--server``, or ``in_process(args, output)`` with both roles here (``output``: the
    run's :class:`Output`)."""
    check_key_bits(args)
    check_json_path(args.json)
    check_views(args)
    output = Output(args.json)
    return (served if args.server else in_process)(args, output)


def connect(args):
    """(address, TLS context, client name) of ``--server`` with ``--certs`` and ``--name``,
    each refused in one line before any work."""
    from smc_hmm.runtime.client import client_tls, parse_server

    if not args.certs:
        raise InvalidInputError("--server needs --certs DIR (ca.pem and a client certificate)")
    address = parse_server(args.server)
    tls, name = client_tls(args.certs, args.name)
    return address, tls, name


def run_against_server(
    args, out, connection, protocol: str, alice, expect, doing: str, progress=None
) -> dict:
    """Alice's session with the serving Bob of ``connection`` (:func:`connect`): the
    server's parameters apply and must match ``expect`` (checked before anything that
    depends on ``alice`` is sent); a progress line ``doing`` on ``out`` meanwhile, updated
    by ``progress(spinner)`` (a :class:`~smc_hmm.progress.Progress`), if given."""
    from smc_hmm.runtime.client import run_client_session

    address, tls, name = connection
    with status(out, f"{doing} with {args.server} as {name}") as spinner:
        return run_client_session(
            protocol,
            "alice",
            alice,
            server=address,
            tls=tls,
            name=name,
            server_name=args.server_name,
            key_bits=args.key_bits,
            insecure=args.insecure,
            timeout=args.timeout,
            expect=expect,
            progress=None if progress is None else progress(spinner),
        )


def served_session(args, out, protocol: str, read_frames, expect, doing: str):
    """(frames, session result) of Alice's run against the serving Bob of ``--server``:
    the connection's options checked (:func:`connect`) before ``read_frames()`` reads the
    recording, the insecure-key warning on ``out``, then the session
    (:func:`run_against_server`) with a progress line ``doing``."""
    from smc_hmm.progress import Progress

    connection = connect(args)
    frames = read_frames()
    warn_insecure(args, out)
    result = run_against_server(
        args, out, connection, protocol, frames, expect, doing, lambda s: Progress(s, doing)
    )
    return frames, result


def phases(protocol: str, params, role: str = "alice") -> tuple[str, ...]:
    """The phases a role of ``protocol`` enters under ``params`` (a ``[protocol]`` table
    or its parameters), as the protocol declares them: what progress lines count.  Against
    a server whose parameters differ, a phase not listed is shown by name only."""
    from smc_hmm.protocol import find

    descriptor = find(protocol)
    if descriptor.phases is None:
        return ()
    if isinstance(params, Mapping):
        params = descriptor.params(params)
    return tuple(descriptor.phases(params, role))


def session_facts(args, frames, result: dict) -> dict:
    """What a report of a session with a serving Bob says besides the answer."""
    return {
        "frames": len(frames),
        "seconds": result["elapsed"],
        "session": result["session"],
        "server": args.server,
    }


def server_report(args, command: str, mode, answer, frames, result: dict, **own) -> dict:
    """The report of a session with a serving Bob (:func:`run_against_server`'s
    ``result``): the answer Alice's side saw, no plaintext reference (Bob's models are his),
    the session's facts (:func:`session_facts`) and the command's own fields."""
    return make_report(
        command,
        mode,
        answer,
        None,
        None,
        result["cost"],
        audio=str(args.audio),
        **own,
        **session_facts(args, frames, result),
    )


def scored_plaintext(key: str, reference: dict, labels, log_likelihoods) -> dict:
    """The plaintext side of a report of a protocol that scores Bob's models: the
    protocol's plaintext answer (``reference[key]``), its scoring rule and scores, and every
    model's exact log-likelihood by label."""
    return {
        key: reference[key],
        "scoring": reference["scoring"],
        "scores": reference["scores"],
        "log_likelihoods": dict(zip(labels, log_likelihoods)),
    }


def finish_compared(output: Output, report: dict, cost, lines, agree: bool) -> int:
    """The end of an in-process run (:meth:`Output.finish`); its exit code: 0 if the
    secure answer agrees with the plaintext one, 1 if it differs."""
    output.finish(report, cost, lines)
    return 0 if agree else 1


def agreement(same: bool) -> str:
    """How the secure decision compares with the plaintext one, as printed."""
    return "[green]agrees[/]" if same else "[red]DIFFERS[/]"


def write_party_views(args, result, keypair, out) -> None:
    """``--views``: what each party received (Alice's decrypted with ``keypair``)."""
    if args.views:
        from smc_hmm.runtime.views import write_views

        written = write_views(args.views, result.views, {"alice": keypair})
        out.print(f"views: {', '.join(str(p) for p in written)}")
