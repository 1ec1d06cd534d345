"""``smc-hmm demo keyword``: secure keyword recognition on the bundled real speech.

Alice holds bundled test-split utterances (spoken digits, Free Spoken Digit
Dataset, CC BY-SA 4.0: ``smc_hmm/data/fsdd/NOTICE``); Bob holds the ten bundled digit
HMMs.  :mod:`protocols.keyword` runs in-process; the demo checks every decision
against the plaintext one of the same scoring (:func:`protocols.keyword.plaintext`: each
model's best path by default, log P in the thesis's fast mode) and prints the cost table.
"""

from __future__ import annotations

from pathlib import Path

from demos.common import key_holder, min_key_bits
from protocols import keyword
from smc_hmm.cli.common import make_report
from smc_hmm.compute import Compute
from smc_hmm.data import load_bundled_models, load_test_utterances
from smc_hmm.errors import InvalidInputError
from smc_hmm.progress import status
from smc_hmm.runtime import run_protocol
from smc_hmm.runtime.offline import offline_phase
from smc_hmm.runtime.views import write_views


def add_keyword_arguments(parser) -> None:
    parser.add_argument(
        "--mode",
        choices=keyword.MODES,
        default="private",
        help="argmax: private (Alice learns only the label) or fast (opt-in: Alice also "
        "learns the order of all scores and the ratios of their differences)",
    )
    parser.add_argument(
        "--models",
        choices=("diag", "full"),
        default="diag",
        help="bundled digit models (default diag)",
    )
    parser.add_argument(
        "--utterances",
        type=int,
        default=3,
        help="how many bundled test utterances, one digit after another (default 3; at most "
        "250, the whole bundled test split, each once)",
    )
    parser.add_argument(
        "--frames",
        type=int,
        default=None,
        help="use only the first FRAMES frames of each utterance",
    )


def keyword_demo(args, output) -> int:
    """Recognise bundled utterances securely; compare with the plaintext decision."""
    chosen = _chosen_utterances(args)
    models, labels = load_bundled_models(args.models)
    alice = key_holder(args, output.err)
    runs = []
    # the caller plus one worker process per core for the heavy batches (Compute lanes)
    with Compute.processes() as compute:
        for n, utt in enumerate(chosen, 1):
            run, result = _recognise(args, output, alice, compute, models, labels, utt, n, chosen)
            runs.append(run)
    agree = sum(run["secure"] == run["plain"] for run in runs)
    report = make_report(
        "demo",
        args.mode,
        [run["secure"] for run in runs],
        [run["plain"] for run in runs],
        agree == len(chosen),
        [run["cost"] for run in runs],
        demo="keyword",
        models=args.models,
        runs=runs,
        ok=agree == len(chosen),
    )
    output.finish(report)  # files first; a failed write: one line, exit 2
    output.err.print(f"cost of utterance {len(chosen)} in detail:")
    result.cost.render(output.err)
    output.line(f"{agree}/{len(chosen)} secure decisions agree with the plaintext ones")
    return 0 if report["ok"] else 1


def _chosen_utterances(args) -> list:
    """``--utterances`` bundled test utterances, one digit after another."""
    if args.utterances < 1 or (args.frames is not None and args.frames < 1):
        raise InvalidInputError("--utterances and --frames must be >= 1")
    utterances = load_test_utterances()
    if args.utterances > len(utterances):
        raise InvalidInputError(
            f"--utterances {args.utterances}: the bundled test split holds {len(utterances)} "
            "utterances (10 digits x 5 speakers x 5 recordings); ask for at most that many"
        )
    # utterance i: digit i mod 10, speaker (i // 10) mod 5, recording (i // 50) mod 5; the
    # bundled test split is ordered digit, speaker, recording (10 x 5 x 5), so the first
    # 250 are all of it, each once
    return [
        utterances[(i % 10) * 25 + ((i // 10) % 5) * 5 + (i // 50) % 5]
        for i in range(args.utterances)
    ]


def _recognise(args, output, alice, compute, models, labels, utt, n: int, chosen):
    """Utterance ``n``: its offline phase, the secure run and the plaintext decision,
    printed on one line; (its record for the report, the run's result)."""
    pk = alice.keypair[0]
    base = pk.randomizer  # Alice's own; each utterance's offline phase draws from it
    frames = utt.features[: args.frames] if args.frames else utt.features
    inputs = {"alice": frames, "bob": (models, labels)}
    params = keyword.PROTOCOL.params({"mode": args.mode})
    plain = keyword.plaintext(params, inputs)["keyword"]
    with status(output.err, f"[{n}/{len(chosen)}] offline phase: the run's randomizers"):
        offline = offline_phase("keyword", {"mode": args.mode}, inputs, pk, compute, base)
    pk.use_randomizer(offline.alice)
    try:
        with status(
            output.err,
            f"[{n}/{len(chosen)}] secure keyword recognition, {len(frames)} frames, "
            f"{len(models)} keywords, {args.mode} mode",
        ):
            result = run_protocol(
                keyword.PROTOCOL,
                {"mode": args.mode},
                {"alice": ("alice", frames), "bob": ("bob", inputs["bob"])},
                keys={"alice": alice.keypair},
                min_key_bits=min_key_bits(args),
                timeout=args.timeout,
                compute={"alice": compute, "bob": compute},
                meta={"demo": "keyword", "utterance": n},
                randomizers=offline.randomizers(pk),
                record_views=bool(getattr(args, "views", None)),
            )
    finally:
        pk.use_randomizer(base)
    if getattr(args, "views", None):
        write_views(Path(args.views) / f"utterance-{n}", result.views, {"alice": alice.keypair})
    got = result["alice"]["keyword"]
    same = got == plain
    output.line(
        f"utterance {n} (spoken '{labels[utt.digit]}', speaker {utt.speaker}, "
        f"{len(frames)} frames): Alice hears [bold]{got}[/], plaintext "
        f"{plain} ({'[green]agrees[/]' if same else '[red]DIFFERS[/]'}); "
        f"{result.elapsed:.1f} s online + {offline.seconds:.1f} s offline, "
        f"{result.cost.bytes_total / 1e6:.1f} MB, "
        f"{result.cost.rounds} rounds"  # one line per utterance, whatever the width
    )
    run = {
        "spoken": labels[utt.digit],
        "speaker": utt.speaker,
        "frames": len(frames),
        "secure": got,
        "plain": plain,
        "seconds": result.elapsed,
        "offline_seconds": offline.seconds,
        "cost": result.cost.to_dict(),
    }
    return run, result


keyword_demo.add_arguments = add_keyword_arguments
