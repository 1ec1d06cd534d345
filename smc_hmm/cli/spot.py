"""``smc-hmm spot --audio FILE.wav --keyword seven``: secure keyword spotting in a recording.

Alice computes the features of her WAV file locally (the bundled feature pipeline), Bob
holds keyword models and their fillers (the bundled digit HMMs and fillers by default, or
a model file with models labelled L and fillers labelled "filler-L"), and the registered
``spot`` protocol (``protocols/spotting.py``, found by name: this core module does not
import the protocol package) decodes the filler-keyword-filler composites with secure
Viterbi: Alice learns, per keyword, whether it occurs and its first and last frame.  The
plaintext decision (:mod:`smc_hmm.hmm.spotting`, the same composites) is printed beside.

With ``--server HOST:PORT --certs DIR`` only Alice runs here, against a serving Bob
(``smc-hmm serve`` with ``protocol = "spot"``); the served keywords must be the ones asked
for, and the plaintext comparison uses the bundled models.
"""

from __future__ import annotations

from smc_hmm.cli import common
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.progress import Progress

HELP = "find where keywords occur in one WAV recording, securely (Alice and Bob in-process)"


def configure(p) -> None:
    common.add_audio_argument(p)
    p.add_argument(
        "--keyword",
        required=True,
        action="append",
        help="a keyword to look for (repeat it, or 'all' for every model); the bundled "
        "models are the digits zero .. nine",
    )
    p.add_argument(
        "--models",
        default="bundled",
        help="Bob's models: bundled (digit HMMs and their fillers) or a model file (.npz) "
        "with keyword models labelled L and fillers labelled filler-L",
    )
    common.add_run_arguments(p, "compute lanes per party (default: cores)", 600.0)
    common.add_max_frames_argument(p)
    common.add_json_argument(p, "the decisions and cost")
    common.add_server_arguments(p)


def load_models(spec: str):
    """(``{label: {"keyword", "filler"} and the bundled glue}``, feature pipeline) of
    ``--models`` (:func:`smc_hmm.hmm.spotting.compose`'s arguments per keyword)."""
    from smc_hmm.data.continuous import load_spotting_models, load_spotting_pipeline

    if spec == "bundled":
        return load_spotting_models()[1], load_spotting_pipeline()
    models, labels, pipeline = common.read_model_file(
        spec,
        "not 'bundled' or a model file; give the path of a .npz file "
        "(smc_hmm.hmm.io.save_models) with keyword models labelled L and fillers "
        "labelled filler-L",
    )
    if not labels:
        raise ConfigError(f"--models {spec}: the models carry no labels")
    by_label = dict(zip(labels, models))
    out = {}
    for label, model in by_label.items():
        if label.startswith("filler-"):
            continue
        if "filler-" + label not in by_label:
            raise ConfigError(f"--models {spec}: keyword {label!r} has no filler-{label}")
        out[label] = {"keyword": model, "filler": by_label["filler-" + label]}
    return out, pipeline


def keywords_of(args, models) -> list[str]:
    asked = [k for group in args.keyword for k in group.split(",") if k]
    if "all" in asked:
        return list(models)
    unknown = [k for k in asked if k not in models]
    if unknown:
        raise InvalidInputError(
            f"no model for keyword(s) {unknown}; --models {args.models} has {sorted(models)}"
        )
    return list(dict.fromkeys(asked))


def plaintext(models, frames, keywords) -> dict:
    """The plaintext decisions on the same composites (smc_hmm.hmm.spotting)."""
    from smc_hmm.hmm.spotting import compose, spot

    out = {}
    for label in keywords:
        composite, layout = compose(**models[label])
        s = spot(composite, layout, frames)
        out[label] = {
            "found": s.found,
            "frames": None if not s.found else [s.start, s.end],
            "seconds": None if not s.found else list(s.seconds()),
        }
    return out


def _frames(args, pipeline):
    """Alice's frames of ``--audio``; a file longer than ``--max-frames`` is refused from
    its header, before its samples are read."""
    frames = pipeline.features_from_wav(
        args.audio, max_frames=args.max_frames, limit=common.frames_limit(args)
    )
    common.check_frames(args, frames)
    return frames


def _span(decision) -> str:
    if not decision["found"]:
        return "not found"
    a, b = decision["seconds"]
    f0, f1 = decision["frames"]
    return f"{a:.2f}-{b:.2f} s (frames {f0}-{f1})"


def run(args) -> int:
    """Spot ``args.keyword`` in ``args.audio`` securely: files first, the cost tables on
    stderr, both decisions on stdout (docs/running.md, "Output")."""
    return common.run_here_or_served(args, _run_in_process, _run_against_server)


def _run_in_process(args, output) -> int:
    from smc_hmm.protocol import find

    protocol = find("spot")
    models, pipeline = load_models(args.models)
    keywords = keywords_of(args, models)
    params = {"keywords": keywords}
    descriptor_params = protocol.params(params)  # bad parameters fail before any work
    frames = _frames(args, pipeline)
    common.warn_insecure(args, output.err)
    keypair = common.generate_keys(args, output.err)
    plain = plaintext(models, frames, keywords)
    result, offline = common.run_with_offline_phase(
        args,
        output.err,
        protocol,
        params,
        descriptor_params,
        frames,
        {k: models[k] for k in keywords},
        keypair,
        f"secure keyword spotting: {len(frames)} frames, {len(keywords)} keyword(s)",
        meta={"audio": str(args.audio), "keywords": keywords},
        progress=lambda spinner: {"alice": Progress(spinner, "secure keyword spotting")},
    )
    secure = result["alice"]
    agree = all(secure[k] == plain[k] for k in keywords)
    report = common.make_report(
        "spot",
        descriptor_params.direction,
        secure,
        plain,
        agree,
        result.cost.to_dict(),
        audio=str(args.audio),
        secure=secure,
        keywords=keywords,
        frames=len(frames),
        seconds=result.elapsed,
        offline_seconds=offline.seconds,
    )
    lines = [
        f"{args.audio}: [bold]{k}[/]: secure {_span(secure[k])}; plaintext "
        f"{_span(plain[k])} ({common.agreement(secure[k] == plain[k])})"
        for k in keywords
    ]
    output.err.print(
        f"{len(frames)} frames, {result.elapsed:.1f} s online + {offline.seconds:.1f} s offline, "
        f"{result.cost.bytes_total:,} bytes",
        soft_wrap=True,
    )
    return common.finish_compared(output, report, result.cost, lines, agree)


def _run_against_server(args, output) -> int:
    """Alice only, against a serving Bob whose ``[protocol] keywords`` are the ones asked."""
    from smc_hmm.data.continuous import load_spotting_pipeline

    keywords = [k for group in args.keyword for k in group.split(",") if k]
    if "all" in keywords:
        raise InvalidInputError("with --server name the keywords the server spots")
    frames, result = common.served_session(
        args,
        output.err,
        "spot",
        lambda: _frames(args, load_spotting_pipeline()),
        {"keywords": keywords},
        "secure keyword spotting",
    )
    secure = result["output"]
    output.err.print(
        f"session {result['session']} with {args.server}: {len(frames)} frames, "
        f"{result['elapsed']:.1f} s",
        soft_wrap=True,
    )
    report = common.server_report(
        args, "spot", "spotting", secure, frames, result, secure=secure, keywords=keywords
    )
    lines = [f"{args.audio}: [bold]{k}[/]: secure {_span(secure[k])}" for k in keywords]
    output.finish(report, None, lines)
    return 0
