"""``smc-hmm bench serve``: throughput and latency of one serving Bob under load.

Starts ``smc-hmm serve`` (keyword recognition, the bundled diagonal digit HMMs) as its
own process on loopback and, for 1, 2, 4, ... concurrent clients (up to ``--clients``),
runs ``--utterances`` keyword sessions per client, each client in its own process
(``forkserver``) with its own key pair, generated once before the clock starts.  It
reports utterances per minute (sessions completed / wall time of the level) and the
latency percentiles p50 and p95 of one session as a client sees it (TLS set-up,
Alice's encryption and decryptions, Bob's work, all traffic), and checks every
secure decision against the plaintext argmax.

``--scheduler tcp://HOST:PORT`` points Bob at a Dask cluster; ``--scheduler local``
starts a ``LocalCluster`` (2 worker processes, 1 thread each) here; ``--both`` runs
the levels with Bob's local process lanes and then with a local Dask cluster.
Timing claims live here and in ``docs/benchmarks.md``, never in unit tests.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from smc_hmm.bench.common import check_key_bits
from smc_hmm.errors import ConfigError, InsecureKeyWarning


def _levels(clients: int) -> list[int]:
    """1, 2, 4, ... up to ``clients`` (1, 2 and 4 by default)."""
    out, n = [], 1
    while n <= clients:
        out.append(n)
        n *= 2
    return out


def add_arguments(parser) -> None:
    parser.add_argument(
        "--clients", type=int, default=4, help="concurrent clients: levels 1, 2, 4, ... up to N"
    )
    parser.add_argument("--key-bits", type=int, default=2048, help="the clients' Paillier keys")
    parser.add_argument("--insecure", action="store_true", help="allow keys below 2048 bits")
    parser.add_argument(
        "--scheduler", help="Bob's Dask scheduler (tcp://HOST:PORT) or 'local' (a LocalCluster)"
    )
    parser.add_argument(
        "--both", action="store_true", help="local process lanes, then a local Dask cluster"
    )
    parser.add_argument("--workers", type=int, help="Bob's local lanes (default: cores)")
    parser.add_argument("--utterances", type=int, default=2, help="sessions per client per level")
    parser.add_argument("--frames", type=int, default=0, help="cut utterances (0: whole)")
    parser.add_argument("--models", type=int, default=10, help="Bob's keyword models (2-10)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")


# -- the client processes -------------------------------------------------------------------

_CLIENT: dict = {}


def _client_init(server, certs: str, key_bits: int, insecure: bool) -> None:
    from smc_hmm.crypto import generate_keypair
    from smc_hmm.runtime.client import client_tls

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        keypair = generate_keypair(key_bits, insecure=insecure)
    tls, name = client_tls(certs, "alice")
    _CLIENT.update(server=tuple(server), tls=tls, name=name, key_bits=key_bits, keypair=keypair)
    _CLIENT["insecure"] = insecure


def _client_ready(_: int) -> int:
    return os.getpid()


def _client_session(frames) -> tuple[float, str | None, int]:
    from smc_hmm.runtime.client import run_client_session

    c = _CLIENT
    t0 = time.perf_counter()
    result = run_client_session(
        "keyword",
        "alice",
        frames,
        server=c["server"],
        tls=c["tls"],
        name=c["name"],
        key_bits=c["key_bits"],
        insecure=c["insecure"],
        keypair=c["keypair"],
        timeout=600.0,
        connect_timeout=600.0,
    )
    return time.perf_counter() - t0, result["output"]["keyword"], result["cost"]["bytes"]["sent"]


# -- the server process ----------------------------------------------------------------------


def _start_server(config: Path, scheduler: str | None, workers: int | None, log: Path):
    from smc_hmm.runtime import load_config

    cmd = [sys.executable, "-m", "smc_hmm.cli", "serve", "--role", "bob"]
    cmd += ["--config", str(config), "--log", str(log)]
    if scheduler:
        cmd += ["--scheduler", scheduler]
    if workers:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    address = load_config(config).party("bob").address
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise ConfigError(f"smc-hmm serve exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            socket.create_connection(address, timeout=1).close()
            return proc, address
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise ConfigError("smc-hmm serve did not listen within 120 s") from None
            time.sleep(0.2)


def _stop_server(proc) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def _percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def _workload(args):
    from smc_hmm.data import load_bundled_models, load_test_utterances
    from smc_hmm.hmm import log_likelihood

    models, labels = load_bundled_models("diag")
    models, labels = models[: args.models], labels[: args.models]
    cases = []
    for u in load_test_utterances()[: max(_levels(args.clients)) * args.utterances]:
        frames = np.asarray(u.features)
        frames = frames[: args.frames] if args.frames else frames
        plain = labels[int(np.argmax([log_likelihood(m, frames) for m in models]))]
        cases.append((frames, plain))
    return models, labels, cases


def _run_setting(args, directory: Path, scheduler: str | None, label: str, console) -> dict:
    config = directory / "parties.toml"
    log = directory / f"bob-{label}.log"
    proc, address = _start_server(config, scheduler, args.workers, log)
    levels = []
    try:
        for level in _levels(args.clients):
            ctx = multiprocessing.get_context("forkserver")
            init = (address, str(directory / "certs"), args.key_bits, args.insecure)
            with ProcessPoolExecutor(
                level, mp_context=ctx, initializer=_client_init, initargs=init
            ) as pool:
                list(pool.map(_client_ready, range(level)))  # keys generated, imports done
                jobs = args._cases[: level * args.utterances]
                t0 = time.perf_counter()
                results = list(pool.map(_client_session, [f for f, _ in jobs]))
                wall = time.perf_counter() - t0
            latencies = [r[0] for r in results]
            agree = sum(r[1] == want for r, (_, want) in zip(results, jobs))
            row = {
                "clients": level,
                "utterances": len(jobs),
                "wall_s": wall,
                "utterances_per_min": 60.0 * len(jobs) / wall,
                "p50_s": _percentile(latencies, 50),
                "p95_s": _percentile(latencies, 95),
                "agree": agree,
                "load_after": os.getloadavg()[0],
            }
            levels.append(row)
            console.print(
                f"{label}: {level} client(s): {row['utterances_per_min']:.2f} utterances/min, "
                f"p50 {row['p50_s']:.2f} s, p95 {row['p95_s']:.2f} s, "
                f"{agree}/{len(jobs)} decisions agree (load {row['load_after']:.2f})"
            )
    finally:
        code = _stop_server(proc)
    return {"setting": label, "scheduler": scheduler, "levels": levels, "server_exit": code}


@contextlib.contextmanager
def _local_cluster():
    try:
        import distributed
    except ImportError as exc:
        raise ConfigError("--scheduler local needs dask.distributed (smc-hmm[dask])") from exc
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def main(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from smc_hmm.hmm.io import save_models
    from smc_hmm.runtime import write_config

    check_key_bits(args)
    if args.clients < 1 or args.utterances < 1 or not 2 <= args.models <= 10 or args.frames < 0:
        raise ConfigError("--clients, --utterances >= 1, --models in 2..10, --frames >= 0")
    console = Console()
    models, labels, cases = _workload(args)
    args._cases = cases
    settings = []
    if args.both:
        settings = [("local lanes", None), ("local Dask", "local")]
    else:
        name = "local lanes" if not args.scheduler else f"Dask {args.scheduler}"
        settings = [(name, args.scheduler)]
    load_before = os.getloadavg()
    out = {
        "key_bits": args.key_bits,
        "models": args.models,
        "frames": args.frames or "whole",
        "utterances_per_client": args.utterances,
        "cores": os.cpu_count(),
        "load_before": load_before,
        "settings": [],
    }
    with tempfile.TemporaryDirectory(prefix="smc-bench-serve-") as tmp:
        directory = Path(tmp)
        save_models(directory / "keywords.npz", models, labels=labels)
        write_config(
            directory / "parties.toml",
            "keyword",
            {"alice": {"kind": "alice"}, "bob": {"kind": "bob", "models": "keywords.npz"}},
            params={"mode": "fast"},
            key_bits=args.key_bits,
            insecure=args.key_bits < 2048,
            timeout=600,
            serve={
                "party": "bob",
                "max_sessions": max(_levels(args.clients)),
                "session_timeout": 3600.0,
            },
            clients=["alice"],
        )
        for label, scheduler in settings:
            if scheduler == "local":
                with _local_cluster() as address:
                    out["settings"].append(_run_setting(args, directory, address, label, console))
            else:
                out["settings"].append(_run_setting(args, directory, scheduler, label, console))
    table = Table(title=f"smc-hmm serve: keyword recognition, {args.key_bits}-bit keys")
    for col in ("Bob computes on", "clients", "utterances/min", "p50 (s)", "p95 (s)", "agree"):
        table.add_column(col)
    for s in out["settings"]:
        for r in s["levels"]:
            table.add_row(
                s["setting"],
                str(r["clients"]),
                f"{r['utterances_per_min']:.2f}",
                f"{r['p50_s']:.2f}",
                f"{r['p95_s']:.2f}",
                f"{r['agree']}/{r['utterances']}",
            )
    console.print(table)
    out["load_after"] = os.getloadavg()
    console.print(f"load average before {load_before}, after {out['load_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        console.print(f"wrote {args.json}")
    ok = all(r["agree"] == r["utterances"] for s in out["settings"] for r in s["levels"])
    return 0 if ok else 1
