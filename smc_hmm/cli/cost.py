"""``smc-hmm cost REPORT.json``: print a saved cost report; predict other key sizes and networks.

The report is the ``--json`` output of ``smc-hmm demo``, ``launch`` or ``party``, or a
saved :class:`~smc_hmm.cost.CostReport`; the prediction (:class:`~smc_hmm.cost.CostModel`)
scales its counted operations by primitive rates measured at the asked key size.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from smc_hmm.cli import common
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.limits import MAX_KEY_BITS, MIN_KEY_BITS
from smc_hmm.progress import status

HELP = "print a saved cost report; predict other key sizes and networks"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "report",
        help="a cost JSON: the --json file of `smc-hmm demo` (every demo), `launch` or "
        "`party` (that party's costs only), or a saved cost report",
    )
    p.add_argument(
        "--run",
        type=int,
        metavar="N",
        help="a file with several runs (the forward demo writes one per model): show and "
        "predict only run N (1-based; default: every run, one after another)",
    )
    p.add_argument(
        "--bits",
        type=int,
        help=f"predict for this key size ({MIN_KEY_BITS} to {MAX_KEY_BITS} bits; a prediction "
        "generates no key, so small sizes need no --insecure)",
    )
    common.add_large_keys_argument(p)
    p.add_argument("--latency-ms", type=float, help="one-way network latency per round, ms")
    p.add_argument(
        "--bandwidth-mbps",
        type=float,
        help="network bandwidth, megabits per second (default: unlimited)",
    )
    p.add_argument(
        "--input-scale",
        type=float,
        default=None,
        help="inputs this many times larger (operations and bytes scale linearly)",
    )
    p.add_argument(
        "--rates",
        metavar="PATH",
        help="primitive rates from `smc-hmm bench primitives --json` "
        "(default: measure now at the report's key size)",
    )
    p.add_argument(
        "--json",
        metavar="PATH",
        help="write the prediction as JSON (several runs: a list under 'runs')",
    )


#: what a cost JSON that holds no report is told it should have been
_EXPECTED = "expected the --json output of smc-hmm demo, launch or party, or a saved cost report"


def load_report(path: str) -> list[tuple[str, object]]:
    """``[(label, CostReport), ...]`` from a cost JSON: one entry per run it holds.

    Accepted (what the other commands write): a bare report (``version``, ``parties``);
    ``{"cost": report}`` (``demo secure-sum``, ``launch``); ``{"runs": [{"cost":
    report, "model": ...}, ...]}`` (``demo forward``, one run per model); and
    ``{"party": name, "cost": snapshot}`` (``party``: that one party's costs).
    Anything else, a binary or non-JSON file included, is a :class:`ConfigError`.
    """
    from smc_hmm.cost import CostReport

    data = _read_json_object(path)
    if "parties" in data or ("version" in data and not {"cost", "runs"} & set(data)):
        # a bare report (CostReport.save / to_dict)
        return [("", _with_path(path, CostReport.from_dict, data))]
    if isinstance(data.get("runs"), list):
        if not data["runs"]:
            raise ConfigError(f"{path} holds an empty list of runs: no cost to show")
        runs = []
        for i, run in enumerate(data["runs"], 1):
            if not isinstance(run, dict) or "cost" not in run:
                raise ConfigError(f"{path}: run {i} holds no 'cost'")
            label = run.get("model") or run.get("name") or run.get("label") or ""
            runs.append((f"run {i}" + (f": {label}" if label else ""), run["cost"]))
        return [(label, _with_path(path, _report, path, data, cost, label)) for label, cost in runs]
    if "cost" in data:
        cost = _with_path(path, _report, path, data, data["cost"], "'cost'", data.get("party"))
        return [("", cost)]
    if data.get("ok") is False and isinstance(data.get("error"), dict):
        who = f"party {data['party']}" if isinstance(data.get("party"), str) else "a run"
        error = data["error"]
        raise ConfigError(
            f"{path} records a failed run of {who} ({error.get('type', 'error')}: "
            f"{error.get('message', '')}): it holds no cost"
        )
    keys = ", ".join(sorted(str(k) for k in data)[:8]) or "none"
    raise ConfigError(f"{path} holds no cost report (top-level keys: {keys}; {_EXPECTED})")


def _read_json_object(path: str) -> dict:
    """The JSON object in ``path`` (a :class:`ConfigError` for an unreadable, binary or
    non-JSON file, or JSON that is not an object)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(
            f"{path} is not a cost report: it is a binary file, not JSON (expected the "
            "--json output of smc-hmm demo, launch or party)"
        ) from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise ConfigError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds no cost report ({_EXPECTED})")
    return data


def _report(path: str, data: dict, d, where: str, party=None):
    """The CostReport in ``d`` (``where`` in the file ``data``): a whole report, or one
    party's snapshot (named in it or by ``party``)."""
    from smc_hmm.cost import CostReport

    if isinstance(d, dict) and "parties" in d:
        return CostReport.from_dict(d)
    if isinstance(d, dict) and isinstance(d.get("ops"), dict):  # one party's snapshot
        name = d.get("party", party)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}: the cost in {where} does not name its party")
        meta = {"mode": "party"}
        if isinstance(data.get("protocol"), str):
            meta["protocol"] = data["protocol"]
        return CostReport({name: d}, meta=meta)
    raise ConfigError(f"{path}: {where} is not a cost report ({_EXPECTED})")


def _with_path(path: str, fn, *args):
    """``fn(*args)``, its ConfigError's message led by ``path`` where it is not already."""
    try:
        return fn(*args)
    except ConfigError as e:
        text = str(e)
        raise ConfigError(text if text.startswith(str(path)) else f"{path}: {text}") from e


def check_numbers(args) -> None:
    """Every numeric option, before any table is printed: a key size the other commands
    accept, finite non-negative latency, finite positive bandwidth and input scale."""
    if args.bits is not None:
        from smc_hmm.crypto import check_key_bits

        try:
            check_key_bits(
                args.bits, insecure=True, allow_large=args.allow_large_keys, hints=common.KEY_FLAGS
            )
        except InvalidInputError as e:
            raise InvalidInputError(f"--bits {args.bits}: {e}") from None
    if args.latency_ms is not None and not (
        math.isfinite(args.latency_ms) and args.latency_ms >= 0
    ):
        raise InvalidInputError(f"--latency-ms must be a finite number >= 0, got {args.latency_ms}")
    for flag, value in (
        ("--bandwidth-mbps", args.bandwidth_mbps),
        ("--input-scale", args.input_scale),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InvalidInputError(f"{flag} must be a finite number > 0, got {value}")


def run(args) -> int:
    from smc_hmm.cost import PrimitiveRates

    check_numbers(args)  # before anything is read or printed
    common.check_output_path(args.json)
    wants_model = any(
        v is not None
        for v in (args.bits, args.latency_ms, args.bandwidth_mbps, args.input_scale, args.rates)
    )
    if args.json and not wants_model:  # never a silently ignored --json
        raise ConfigError(
            "--json writes a prediction: add --bits, --latency-ms, --bandwidth-mbps, "
            "--input-scale or --rates (the report itself is already JSON)"
        )
    runs = load_report(args.report)
    if args.run is not None:
        if not 1 <= args.run <= len(runs):
            raise ConfigError(
                f"--run {args.run}: {args.report} holds "
                + (f"runs 1 to {len(runs)}" if len(runs) > 1 else "a single run (--run 1)")
            )
        runs = [(args.run, *runs[args.run - 1])]
    else:
        runs = [(i, *run) for i, run in enumerate(runs, 1)]
    rates = None
    if args.rates:  # read before printing anything: a bad file is an error, not a half output
        try:
            rates = PrimitiveRates.from_dict(json.loads(Path(args.rates).read_bytes()))
        except OSError as e:
            raise ConfigError(f"cannot read rates {args.rates}: {e.strerror or e}") from e
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise ConfigError(f"rates {args.rates} are not valid JSON: {e}") from None
    out = common.console()
    tables = _tables(args, runs, out.width)  # a malformed report fails before any output
    predictions = _predictions(args, runs, rates) if wants_model else []
    if predictions:  # files first (docs/running.md, "Output")
        data = {"rates": predictions[0]["rates"]}
        if len(predictions) == 1:
            data["prediction"] = predictions[0]["prediction"].to_dict()
        else:
            data["runs"] = [
                {"run": p["run"], "label": p["label"], "prediction": p["prediction"].to_dict()}
                for p in predictions
            ]
        common.write_json(args.json, data, common.console(stderr=True))  # the note: stderr
    for label, run_tables in tables:
        if label:
            out.print(f"[bold]{label}[/]")
        for table in run_tables:
            out.print(table)
    for p in predictions:
        if p["label"] and len(runs) > 1:
            out.print(f"[bold]{p['label']}[/]")
        out.print(p["prediction"].table())
    return 0


def _tables(args, runs, width) -> list:
    """(label, the tables of its report laid out for ``width``) of every run."""
    out = []
    for _, label, report in runs:
        try:
            out.append((label, report.tables(width)))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            where = f" ({label})" if label else ""
            raise ConfigError(
                f"malformed cost report in {args.report}{where}: {type(e).__name__}: {e}"
            ) from e
    return out


def _predictions(args, runs, rates) -> list[dict]:
    """The cost model's prediction of every run at the asked settings (rates measured
    now at the report's key size unless ``--rates`` gave them)."""
    from smc_hmm.bench.common import throwaway_keypair
    from smc_hmm.bench.rates import measure_rates
    from smc_hmm.cost import CostModel

    if rates is None:
        bits = runs[0][2].key_bits or 2048
        with status(common.console(stderr=True), f"measuring primitive rates at {bits} bits"):
            rates = measure_rates(*throwaway_keypair(bits))
    model = CostModel(rates)
    return [
        {
            "run": number,
            "label": label,
            "rates": rates.to_dict(),
            "prediction": model.predict(
                report,
                bits=args.bits,
                latency=(args.latency_ms or 0.0) / 1e3,
                bandwidth=None if args.bandwidth_mbps is None else args.bandwidth_mbps * 1e6 / 8,
                input_scale=args.input_scale or 1.0,
            ),
        }
        for number, label, report in runs
    ]
