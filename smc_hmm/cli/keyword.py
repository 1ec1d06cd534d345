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

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from smc_hmm.cli import common
from smc_hmm.errors import ConfigError, InvalidInputError, WeakerModeWarning
from smc_hmm.options import add_checked
from smc_hmm.progress import Progress, status

if TYPE_CHECKING:
    import numpy as np

HELP = "recognise the keyword of one WAV recording securely (Alice and Bob in-process)"
#: the largest --margin, nats (the protocol's bound)
MAX_MARGIN = 1000.0


def configure(p) -> None:
    common.add_audio_argument(p)
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
        "--garbage",
        metavar="background|none|LABEL",
        default=None,
        help="the reference a keyword must beat, else the answer is 'no keyword': background "
        "(the default: a model of silence and noise, docs/speech-models.md), none (always "
        "name a keyword) or the label of a model in --models; with --server the server's "
        "applies, and one given here must be it",
    )
    add_checked(
        p.add_argument,
        "--margin",
        _check_margin,
        default=None,
        help="nats by which a keyword must beat the --garbage model (default 0)",
    )
    common.add_run_arguments(p, "compute lanes per party (default: the machine's cores)", 300.0)
    common.add_max_frames_argument(p)
    common.add_json_argument(p, "the decisions and cost")
    common.add_views_argument(p)
    common.add_server_arguments(p)


def _check_margin(value: float, name: str) -> float:
    if not (math.isfinite(value) and 0 <= value <= MAX_MARGIN):
        raise ConfigError(f"{name} must be a number of nats in [0, {MAX_MARGIN:g}], got {value:g}")
    return value


def _with_garbage(args, models, labels, pipeline, warn):
    """(models, labels, the garbage label or None) with ``--garbage``: the bundled
    background model of silence and noise appended (unless the models hold one), none, or
    a model of ``--models`` named by its label.  The bundled background is the bundled
    pipeline's: models with a pipeline of their own get no garbage model by default (a
    note says so) and a one-line error if ``--garbage background`` is asked for."""
    from smc_hmm.data import BACKGROUND_LABEL, load_background_model, load_pipeline

    choice = args.garbage or "background"
    own_pipeline = BACKGROUND_LABEL not in labels and pipeline != load_pipeline()
    if choice == "background" and own_pipeline and args.garbage is None and not args.margin:
        warn.print(
            f"note: --models {args.models} carries its own feature pipeline; the bundled "
            "background model is the bundled pipeline's, so no garbage model is used "
            "(--garbage LABEL names one of the file's models)"
        )
        choice = "none"
    if choice == "none":
        if args.margin:
            raise InvalidInputError("--margin needs a --garbage model (background or a label)")
        return models, labels, None
    if choice == "background" and BACKGROUND_LABEL not in labels:
        if own_pipeline:
            raise InvalidInputError(
                f"--models {args.models} has its own feature pipeline, and the bundled "
                "background model is the bundled pipeline's: give --garbage LABEL (a "
                "model of the file) or --garbage none"
            )
        kind = "full" if getattr(models[0], "covariance_type", "diag") == "full" else "diag"
        background, _ = load_background_model(kind)
        return [*models, background], [*labels, BACKGROUND_LABEL], BACKGROUND_LABEL
    if choice not in labels:
        raise InvalidInputError(
            f"--garbage {choice}: no model of --models {args.models} is labelled so (its "
            f"labels: {', '.join(labels)}); use background, none or one of them"
        )
    return models, labels, choice


def _said(keyword) -> str:
    return "no keyword" if keyword is None else keyword


def _stderr():
    """Warnings, progress and tables go to stderr: stdout carries the result alone."""
    return common.console(stderr=True)


def _models(spec: str):
    """(models, labels, feature pipeline): a model file's own pipeline if it carries one,
    else the bundled pipeline (the bundled models were trained with it)."""
    from smc_hmm.data import load_bundled_models, load_pipeline

    if spec in ("diag", "full"):
        return (*load_bundled_models(spec), load_pipeline())
    if not Path(spec).exists():
        raise ConfigError(
            f"--models {spec}: no such model file (use diag or full for the bundled digit "
            "HMMs, or the path of a .npz model file written by smc_hmm.hmm.io.save_models)"
        )
    models, labels, pipeline = common.read_model_file(
        spec,
        "not diag, full or a model file; use diag or full (the bundled digit HMMs, diagonal "
        "or full covariances) or the path of a .npz model file (written by "
        "smc_hmm.hmm.io.save_models)",
    )
    labels = labels or [str(i) for i in range(len(models))]
    return models, labels, pipeline


def run(args) -> int:
    """Recognise ``args.audio`` securely: files first (``--json``, ``--views``), the cost
    tables and warnings on stderr, both decisions on stdout (one convention for every
    command, docs/running.md)."""
    return common.run_here_or_served(args, _run_in_process, _run_against_server)


def _features(args, pipeline) -> tuple[np.ndarray, str | None]:
    """Alice's frames of ``--audio``, and why it holds no speech (None if it may)."""
    from smc_hmm.features import speech_warning

    samples = pipeline.read_wav(args.audio, args.max_frames, common.frames_limit(args))
    return pipeline.features(samples), speech_warning(samples, pipeline.sample_rate)


def _check_length(args, frames) -> None:
    """A public bound on the recording's length, before any key or protocol work."""
    common.check_frames(args, frames, " (about 0.1 s a frame at 2048 bits)")


def _warn_no_speech(args, problem, warn) -> None:
    if problem:
        warn.print(f"[yellow]warning: {args.audio}: {problem}; the result below means nothing[/]")


def _run_in_process(args, output) -> int:
    """Alice and Bob in this process, one thread each."""
    from smc_hmm.hmm import log_likelihood
    from smc_hmm.protocol import find

    args.mode = args.mode or "private"
    protocol = find("keyword")
    models, labels, pipeline = _models(args.models)
    models, labels, garbage = _with_garbage(args, models, labels, pipeline, output.err)
    settings = {"mode": args.mode, "garbage": garbage, "margin": args.margin or 0.0}
    with warnings.catch_warnings():  # fast mode: the warning is printed below, in words
        warnings.simplefilter("ignore", WeakerModeWarning)
        params = protocol.params(settings)  # a bad mode fails before any work
    warn = output.err
    frames, problem = _features(args, pipeline)
    _check_length(args, frames)
    _check_models(args, models, frames)
    _warn_no_speech(args, problem, warn)
    common.warn_insecure(args, warn)
    keypair = common.generate_keys(args, warn)
    scores = [log_likelihood(m, frames) for m in models]
    reference = protocol.plaintext(params, {"alice": frames, "bob": (models, labels)})
    plain = reference["keyword"]
    if args.mode == "fast":
        warn.print(
            "[yellow]warning: fast mode reveals the order of all keywords' scores to Alice[/]"
        )
    result, offline = _secure_run(
        args, protocol, settings, params, keypair, frames, (models, labels)
    )
    secure = result["alice"]["keyword"]
    common.write_party_views(args, result, keypair, output.err)
    report = common.make_report(
        "keyword",
        args.mode,
        {"keyword": secure},
        common.scored_plaintext("keyword", reference, labels, scores),
        secure == plain,
        result.cost.to_dict(),
        secure={"keyword": secure},
        audio=str(args.audio),
        frames=len(frames),
        seconds=result.elapsed,
        offline_seconds=offline.seconds,
        garbage=garbage,
        margin=settings["margin"],
    )
    line = (
        f"{args.audio}: secure decision [bold]{_said(secure)}[/] ({args.mode} mode, "
        f"{result.elapsed:.1f} s online + {offline.seconds:.1f} s offline), plaintext decision "
        f"{_said(plain)} ({common.agreement(secure == plain)})"
    )
    return common.finish_compared(output, report, result.cost, [line], secure == plain)


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


def _secure_run(args, protocol, settings, params, keypair, frames, keywords):
    """The offline phase, then both roles in-process on the compute lanes, with progress
    lines; (the run's result, the offline phase)."""
    estimate = _cost_model_estimate(args, protocol, params, keypair, frames, keywords)
    return common.run_with_offline_phase(
        args,
        _stderr(),
        protocol,
        settings,
        params,
        frames,
        keywords,
        keypair,
        f"secure keyword recognition: {len(frames)} frames, {len(keywords[0])} keywords, "
        f"{args.mode} mode",
        meta={"audio": str(args.audio), "mode": args.mode},
        record_views=bool(args.views),
        progress=lambda spinner: {
            "alice": Progress(spinner, "secure keyword recognition", estimate=estimate)
        },
    )


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
    from smc_hmm.compute import Compute
    from smc_hmm.cost.model import CostModel

    sample = frames[:ESTIMATE_SAMPLE_FRAMES]
    with status(_stderr(), f"cost model: pricing {len(frames):,} frames from {len(sample)}"):
        small = common.run_in_process(
            args, protocol, params, sample, keywords, keypair, Compute.inline()
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


def _run_against_server(args, output) -> int:
    """Alice only, against a serving Bob; Bob's parameters (his mode) apply."""
    from smc_hmm.data import load_pipeline

    def read_frames():
        frames, problem = _features(args, load_pipeline())
        _check_length(args, frames)
        _warn_no_speech(args, problem, output.err)
        return frames

    expect = common.given(mode=args.mode, garbage=args.garbage, margin=args.margin) or None
    frames, result = common.served_session(
        args, output.err, "keyword", read_frames, expect, "secure keyword recognition"
    )
    secure, mode = result["output"]["keyword"], result["output"]["mode"]
    report = common.server_report(
        args, "keyword", mode, {"keyword": secure}, frames, result, secure={"keyword": secure}
    )
    line = (
        f"{args.audio}: secure decision [bold]{_said(secure)}[/] (session {result['session']} with "
        f"{args.server}, {mode} mode, {result['elapsed']:.1f} s)"
    )
    output.finish(report, None, [line])
    return 0
