"""``smc-hmm serve --role bob --config parties.toml``: one session per client (mTLS).

Serves until SIGTERM; the heavy work runs on local process lanes or a Dask scheduler
(:mod:`smc_hmm.runtime.serve`, docs/serving.md).
"""

from __future__ import annotations

import argparse

from smc_hmm.errors import ConfigError
from smc_hmm.options import WORKERS, add_checked

HELP = "serve one protocol session per authenticated client (mutual TLS), until SIGTERM"


def _at_least_one(value: int, name: str) -> int:
    if value < 1:
        raise ConfigError(
            f"{name} must be at least 1, got {value}: it bounds the sessions run at once, "
            "and 0 does not mean unlimited (docs/serving.md, 'Limits')"
        )
    return value


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", default="bob", help="the serving party's name in the config")
    p.add_argument("--config", required=True, help="the configuration file (TOML)")
    p.add_argument(
        "--scheduler",
        help="a Dask scheduler (tcp://HOST:8786) for the heavy work (default: [compute] "
        "scheduler, else local process lanes)",
    )
    p.add_argument(
        "--workers", type=WORKERS, help="local lanes (default: [compute] workers, cores)"
    )
    add_checked(
        p.add_argument,
        "--max-sessions",
        _at_least_one,
        convert=int,
        help="sessions run at once, at least 1 ([serve] max_sessions; 0 does not mean "
        "unlimited: every limit of a serving party is finite)",
    )
    p.add_argument(
        "--when-busy", choices=("wait", "refuse"), help="excess clients wait or are refused"
    )
    p.add_argument(
        "--hiding-nats",
        type=float,
        metavar="E",
        help="bound what one client learns: each client certificate may send the frames "
        "that keep its best estimate of any blinded value E nats from exact, per "
        "--budget-period ([serve] hiding_nats; docs/serving.md section 8)",
    )
    p.add_argument(
        "--max-frames-per-client",
        type=int,
        metavar="N",
        help="frames one client certificate may send per --budget-period "
        "([serve] max_frames_per_client, default 200,000)",
    )
    p.add_argument(
        "--max-sessions-per-period",
        type=int,
        metavar="N",
        help="sessions one client certificate may start per --budget-period "
        "([serve] max_sessions_per_period, default 2,000)",
    )
    p.add_argument(
        "--budget-period",
        type=float,
        metavar="SECONDS",
        help="the client budget's window ([serve] budget_period, default one day)",
    )
    p.add_argument("--log", metavar="PATH", help="append the session log here (default: stderr)")
    p.add_argument(
        "--results",
        metavar="FILE",
        help="append each session's result record here, one JSON line (session, client, "
        "protocol, mode, decision and who learned it, time; [serve] results; "
        "docs/serving.md section 4)",
    )


def run(args) -> int:
    import logging

    from smc_hmm.cli.common import check_output_path
    from smc_hmm.runtime import load_config
    from smc_hmm.runtime.serve import ServeSettings, serve

    check_output_path(args.log, "--log")
    check_output_path(args.results, "--results")
    config = load_config(args.config)
    settings = ServeSettings.from_config(
        config,
        scheduler=args.scheduler,
        workers=args.workers,
        max_sessions=args.max_sessions,
        when_busy=args.when_busy,
        hiding_nats=args.hiding_nats,
        max_frames_per_client=args.max_frames_per_client,
        max_sessions_per_period=args.max_sessions_per_period,
        budget_period=args.budget_period,
        results=args.results,
    )
    handler = logging.FileHandler(args.log) if args.log else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("smc_hmm.serve")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    if config.insecure:
        logger.warning("%d-bit keys with run.insecure = true are INSECURE", config.key_bits)
    return serve(config, args.role, settings=settings)
