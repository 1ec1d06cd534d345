"""``smc-hmm keyword --audio FILE.wav``: secure keyword recognition of one recording.

Alice computes the features of her WAV file locally (the bundled feature pipeline,
:mod:`smc_hmm.features`; the bundled models expect its standardisation), Bob holds
the keyword models (the bundled digit HMMs by default, or a model file), and the
registered ``keyword`` protocol (``protocols/keyword.py``, found by name, so this
module does not import the protocol package) runs both roles in-process.  The
plaintext decision is computed locally beside it, for comparison only.

With ``--server HOST:PORT --certs DIR`` only Alice runs here: she connects to a
serving Bob (``smc-hmm serve``, :mod:`smc_hmm.runtime.client`) with the client
certificate in ``DIR``, and the plaintext comparison uses the bundled models (a
serving Bob's own models are his secret).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from smc_hmm.cli.common import (
    add_key_arguments,
    check_key_bits,
    check_output_path,
    console,
    write_json,
)
from smc_hmm.compute import Compute
from smc_hmm.crypto import generate_keypair
from smc_hmm.errors import ConfigError, InsecureKeyWarning, InvalidInputError, WeakerModeWarning
from smc_hmm.hmm import log_likelihood
from smc_hmm.limits import DEFAULT_MAX_FRAMES, MAX_SEQUENCE_LENGTH
from smc_hmm.options import TIMEOUT, WORKERS, check_output_dir, option_type
from smc_hmm.progress import Progress, status
from smc_hmm.protocol import find
from smc_hmm.runtime.offline import offline_phase
from smc_hmm.runtime.simulate import run_protocol

HELP = "recognise the keyword of one WAV recording securely (Alice and Bob in-process)"


def configure(p) -> None:
    p.add_argument("--audio", required=True, help="Alice's recording (mono WAV, any rate)")
    p.add_argument(
        "--models",
        default="diag",
        help="Bob's keyword models: diag or full (bundled digit HMMs) or a model file (.npz)",
    )
    # the protocol validates the mode (this core module does not import protocols/)
    p.add_argument(
        "--mode",
        choices=("private", "fast"),
        default=None,
        help="argmax: private (the default: Alice learns only the label) or fast (opt-in: "
        "Alice also learns the order of all keywords' scores and the ratios of their "
        "differences, docs/security.md); with --server the server's mode applies, and a "
        "--mode given here must be it (checked before anything is sent)",
    )
    p.add_argument(
        "--workers",
        type=WORKERS,
        default=None,
        help="compute lanes per party (default: the machine's cores)",
    )
    add_key_arguments(p, "tests only")
    p.add_argument("--timeout", type=TIMEOUT, default=300.0, help="per-receive timeout, seconds")
    p.add_argument(
        "--max-frames",
        type=option_type(_frames_bound, "--max-frames", int),
        default=DEFAULT_MAX_FRAMES,
        help=f"the longest recording accepted, in 10 ms frames (default {DEFAULT_MAX_FRAMES:,}: "
        "30 s, as smc-hmm serve)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the decisions and cost as JSON")
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


def _frames_bound(n: int, name: str) -> int:
    """``--max-frames``: a whole number of frames in [1, MAX_SEQUENCE_LENGTH]."""
    from smc_hmm.limits import check_at_most

    if n < 1:
        raise InvalidInputError(f"{name} must be at least 1 frame")
    return check_at_most("max_sequence_length", n, MAX_SEQUENCE_LENGTH, name)


def _stderr():
    """Warnings go to stderr, so that stdout carries the result first."""
    return console(stderr=True)


def _models(spec: str):
    """(models, labels, feature pipeline): a model file's own pipeline if it carries one,
    else the bundled pipeline (the bundled models were trained with it)."""
    from smc_hmm.data import load_bundled_models, load_pipeline
    from smc_hmm.features import FeaturePipeline
    from smc_hmm.hmm.io import load_model_pipeline, load_models

    if spec in ("diag", "full"):
        return (*load_bundled_models(spec), load_pipeline())
    if not Path(spec).is_file():
        raise ConfigError(
            f"--models {spec}: not diag, full or a model file; use diag or full (the bundled "
            "digit HMMs, diagonal or full covariances) or the path of a .npz model file "
            "(written by smc_hmm.hmm.io.save_models)"
        )
    models, labels = load_models(Path(spec))
    labels = labels or [str(i) for i in range(len(models))]
    stored = load_model_pipeline(Path(spec))
    pipeline = FeaturePipeline.from_dict(stored) if stored is not None else load_pipeline()
    return models, labels, pipeline


def run(args) -> int:
    """Recognise ``args.audio`` securely; print both decisions first (stdout), then the
    cost tables; warnings go to stderr (one convention for every command)."""
    check_key_bits(args)
    check_output_path(args.json)
    if args.views:
        if args.server:
            raise InvalidInputError("--views records an in-process run; drop --server")
        check_output_dir(args.views, "--views")
    if args.server:
        return _run_against_server(args, console())
    return _run_in_process(args, console())


def _features(args, pipeline) -> tuple[np.ndarray, str | None]:
    """Alice's frames of ``--audio``, and why it holds no speech (None if it may)."""
    from smc_hmm.features import read_wav, speech_warning

    samples = read_wav(args.audio, pipeline.sample_rate, pipeline.min_samples)
    return pipeline.features(samples), speech_warning(samples, pipeline.sample_rate)


def _check_length(args, frames) -> None:
    """A public bound on the recording's length, before any key or protocol work."""
    if len(frames) > args.max_frames:
        raise InvalidInputError(
            f"{args.audio} has {len(frames):,} frames ({len(frames) / 100:.1f} s of audio), "
            f"above --max-frames {args.max_frames:,} (the default, {DEFAULT_MAX_FRAMES:,}, is "
            "smc-hmm serve's too): raise --max-frames to run it anyway (about 0.1 s a frame "
            "at 2048 bits)"
        )


def _warn_no_speech(args, problem, warn) -> None:
    if problem:
        warn.print(f"[yellow]warning: {args.audio}: {problem}; the result below means nothing[/]")


def _run_in_process(args, console) -> int:
    """Alice and Bob in this process, one thread each."""
    args.mode = args.mode or "private"
    protocol = find("keyword")
    with warnings.catch_warnings():  # fast mode: the warning is printed below, in words
        warnings.simplefilter("ignore", WeakerModeWarning)
        params = protocol.params({"mode": args.mode})  # a bad mode fails before any work
    warn = _stderr()
    models, labels, pipeline = _models(args.models)
    frames, problem = _features(args, pipeline)
    _check_length(args, frames)
    _check_models(args, models, frames)
    _warn_no_speech(args, problem, warn)
    if args.insecure:
        warn.print(f"[yellow]warning: {args.key_bits}-bit keys are INSECURE (tests only)[/]")
    with (
        status(_stderr(), f"generating a {args.key_bits}-bit Paillier key pair"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", InsecureKeyWarning)
        keypair = generate_keypair(args.key_bits, insecure=args.insecure)
    scores = [log_likelihood(m, frames) for m in models]
    plain = labels[int(np.argmax(scores))]
    if args.mode == "fast":
        warn.print(
            "[yellow]warning: fast mode reveals the order of all keywords' scores to Alice[/]"
        )
    result, offline = _secure_run(args, protocol, params, keypair, frames, (models, labels))
    secure = result["alice"]["keyword"]
    console.print(
        f"{args.audio}: secure decision [bold]{secure}[/] ({args.mode} mode, "
        f"{result.elapsed:.1f} s online + {offline.seconds:.1f} s offline), plaintext decision "
        f"{plain} "
        f"({'[green]agrees[/]' if secure == plain else '[red]DIFFERS[/]'})",
        soft_wrap=True,
    )
    result.cost.render(console)
    if args.views:
        from smc_hmm.runtime.views import write_views

        written = write_views(args.views, result.views, {"alice": keypair})
        console.print(f"views: {', '.join(str(p) for p in written)}")
    if args.json:
        report = {
            "secure": {"keyword": secure},
            "plaintext": {"keyword": plain, "log_likelihoods": dict(zip(labels, scores))},
            "mode": args.mode,
            "frames": len(frames),
            "seconds": result.elapsed,
            "offline_seconds": offline.seconds,
            "cost": result.cost.to_dict(),
        }
        write_json(args.json, report, console)
    return 0 if secure == plain else 1


def _check_models(args, models, frames) -> None:
    """The models must be Gaussian HMMs over the pipeline's features (public facts)."""
    dims = {getattr(m, "n_features", None) for m in models}
    if dims != {frames.shape[1]}:
        found = (
            "discrete (symbol) models"
            if None in dims
            else "models over " + ", ".join(str(d) for d in sorted(dims)) + " features"
        )
        raise InvalidInputError(
            f"keyword models must be Gaussian HMMs over {frames.shape[1]} features per frame "
            f"(their feature pipeline's); {args.models} holds {found}"
        )


def _secure_run(args, protocol, params, keypair, frames, keywords):
    """The offline phase, then both roles in-process on the compute lanes, with progress
    lines; (the run's result, the offline phase)."""
    inputs = {"alice": frames, "bob": keywords}
    estimate = _cost_model_estimate(args, protocol, params, keypair, frames, keywords)
    with Compute.processes(args.workers) as compute:  # the bench's and demo's lanes
        with (
            status(_stderr(), "offline phase: the run's randomizers, once the key is known"),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", WeakerModeWarning)
            offline = offline_phase("keyword", {"mode": args.mode}, inputs, keypair[0], compute)
        keypair[0].use_randomizer(offline.alice)
        with status(
            _stderr(),
            f"secure keyword recognition: {len(frames)} frames, {len(keywords[0])} keywords, "
            f"{args.mode} mode",
        ) as spinner:
            result = run_protocol(
                protocol,
                params,
                {"alice": ("alice", frames), "bob": ("bob", keywords)},
                keys={"alice": keypair},
                compute={"alice": compute, "bob": compute},
                min_key_bits=min(args.key_bits, 2048) if args.insecure else 2048,
                timeout=args.timeout,
                meta={"audio": str(args.audio), "mode": args.mode},
                randomizers=offline.randomizers(keypair[0]),
                record_views=bool(args.views),
                progress={
                    "alice": Progress(spinner, "secure keyword recognition", estimate=estimate)
                },
            )
    return result, offline


#: from this many frames on, the command prices the run with the cost model before it
#: starts (a 20-frame run at this key size, priced at this machine's measured rates)
ESTIMATE_FROM_FRAMES = 300
ESTIMATE_SAMPLE_FRAMES = 20


def _cost_model_estimate(args, protocol, params, keypair, frames, keywords) -> float | None:
    """The cost model's prediction of the whole run, for long recordings: the ledger of a
    short run scaled to the recording's length (operation counts grow linearly with T)
    and priced at this machine's single-lane rates (:mod:`smc_hmm.cost.model`)."""
    if len(frames) < ESTIMATE_FROM_FRAMES:
        return None
    from smc_hmm.bench.rates import measure_rates
    from smc_hmm.cost.model import CostModel

    sample = frames[:ESTIMATE_SAMPLE_FRAMES]
    with status(_stderr(), f"cost model: pricing {len(frames):,} frames from {len(sample)}"):
        small = run_protocol(
            protocol,
            params,
            {"alice": ("alice", sample), "bob": ("bob", keywords)},
            keys={"alice": keypair},
            compute=Compute.inline(),
            min_key_bits=min(args.key_bits, 2048) if args.insecure else 2048,
            timeout=args.timeout,
        )
        rates = measure_rates(*keypair)
        seconds = (
            CostModel(rates)
            .predict(small.cost, bits=args.key_bits, input_scale=len(frames) / len(sample))
            .serial_seconds
        )
    _stderr().print(
        f"cost model: about {seconds:.0f} s for {len(frames):,} frames on one lane "
        "(two lanes take less)"
    )
    return seconds


def _run_against_server(args, console) -> int:
    """Alice only, against a serving Bob; Bob's parameters (his mode) apply."""
    from smc_hmm.data import load_pipeline
    from smc_hmm.runtime.client import client_tls, parse_server, run_client_session

    if not args.certs:
        raise InvalidInputError("--server needs --certs DIR (ca.pem and a client certificate)")
    address = parse_server(args.server)
    tls, name = client_tls(args.certs, args.name)
    warn = _stderr()
    frames, problem = _features(args, load_pipeline())
    _check_length(args, frames)
    _warn_no_speech(args, problem, warn)
    if args.insecure:
        warn.print(f"[yellow]warning: {args.key_bits}-bit keys are INSECURE (tests only)[/]")
    with status(_stderr(), f"secure keyword recognition with {args.server} as {name}"):
        result = run_client_session(
            "keyword",
            "alice",
            frames,
            server=address,
            tls=tls,
            name=name,
            server_name=args.server_name,
            key_bits=args.key_bits,
            insecure=args.insecure,
            timeout=args.timeout,
            expect=None if args.mode is None else {"mode": args.mode},
        )
    secure = result["output"]["keyword"]
    console.print(
        f"{args.audio}: secure decision [bold]{secure}[/] (session {result['session']} with "
        f"{args.server}, {result['output']['mode']} mode, {result['elapsed']:.1f} s)",
        soft_wrap=True,
    )
    if args.json:
        report = {
            "secure": {"keyword": secure},
            "mode": result["output"]["mode"],
            "frames": len(frames),
            "seconds": result["elapsed"],
            "session": result["session"],
            "server": args.server,
            "cost": result["cost"],
        }
        write_json(args.json, report, console)
    return 0
