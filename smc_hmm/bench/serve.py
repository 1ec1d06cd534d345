"""``smc-hmm bench serve``: throughput and latency of one serving Bob, under load or attack.

Starts ``smc-hmm serve`` (keyword recognition, the bundled diagonal digit HMMs) as its
own process on loopback and, for 1, 2, 4, ... concurrent clients (up to ``--clients``),
runs ``--utterances`` keyword sessions per client, each client in its own process
(``forkserver``) with its own key pair and client certificate, prepared once before the
clock starts.  It reports utterances per minute (sessions completed / wall time of the
level) and the latency percentiles p50 and p95 of one session as a client sees it (TLS
set-up, Alice's encryption and decryptions, Bob's work, all traffic), and checks every
secure decision against the plaintext one (the keyword protocol's ``plaintext``).

``--scheduler tcp://HOST:PORT`` points Bob at a Dask cluster; ``--scheduler local``
starts a ``LocalCluster`` (2 worker processes, 1 thread each) here; ``--both`` runs
the levels with Bob's local process lanes and then with a local Dask cluster.

``--hostile``: the same legitimate workload (``--clients`` concurrent clients,
``--utterances`` sessions each) against one server, alone and then while
``--hostile-count`` hostile connections of mixed kinds attack it from another process
(:mod:`smc_hmm.bench.hostile`: silent sockets, slow TLS handshakes, junk bytes and
frames, oversized frames, certificates of another CA, floods, disconnects in
mid-protocol), from ``--hostile-sources`` loopback addresses other than the clients';
``--repeats`` rounds of the two, alternating; with ``--decoy`` each round also runs the
workload while the same attack hits another server on this machine (what sharing the
machine with the attack costs the clients, as a control).  It reports each run's throughput, p50 /
p95 latency, every decision's correctness, the CPU seconds per session of a client and
of the server, and the server's resident memory, open descriptors and threads before,
at the peak of and after each attack, with the seconds until its descriptors are back
to their baseline; then the targets of ``docs/serving.md`` (section 6).  Everything is
bounded: an attack stops when its run ends or after ``--max-seconds``.
Timing claims live here and in ``docs/benchmarks.md`` / ``docs/serving.md``, never in
unit tests.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from smc_hmm.bench.common import (
    bounded,
    bounded_float,
    check_key_bits,
    common_arguments,
    finish,
    throwaway_keypair,
)
from smc_hmm.errors import ConfigError

#: the targets of a hostile run (docs/serving.md, section 6), checked and printed by ``--hostile``
TARGET_RATIO = 0.8
TARGET_RSS_MIB = 50.0
TARGET_FD_SECONDS = 10.0


def _levels(clients: int) -> list[int]:
    """1, 2, 4, ... up to ``clients`` (1, 2 and 4 by default)."""
    out, n = [], 1
    while n <= clients:
        out.append(n)
        n *= 2
    return out


def add_arguments(parser) -> None:
    parser.add_argument(
        "--clients",
        type=bounded(1, 256),
        default=4,
        help="concurrent clients: levels 1, 2, 4, ... up to N (--hostile: exactly N)",
    )
    with common_arguments(
        parser,
        key_help="the clients' Paillier keys",
        workers=True,
        workers_default=None,
        workers_help="Bob's local lanes (default: cores)",
    ):
        parser.add_argument(
            "--scheduler",
            help="Bob's Dask scheduler (tcp://HOST:PORT) or 'local' (a LocalCluster)",
        )
        parser.add_argument(
            "--both", action="store_true", help="local process lanes, then a local Dask cluster"
        )
        parser.add_argument(
            "--utterances", type=bounded(1, 250), default=2, help="sessions per client per run"
        )
        parser.add_argument(
            "--frames", type=bounded(0, 10_000), default=0, help="cut utterances (0: whole)"
        )
        parser.add_argument(
            "--models", type=bounded(2, 10), default=10, help="Bob's keyword models (2-10)"
        )
    _add_attack_arguments(parser.add_argument_group("attack (--hostile)"))


#: the options of ``--hostile``, in their order in ``--help``: (flag, type, default, help);
#: the two switches have the type ``None`` and no default
_ATTACK_OPTIONS = (
    ("--hostile", None, None, "the clients' run alone, then under attack by hostile connections"),
    ("--hostile-count", bounded(1, 10_000), 200, "hostile connections open at once"),
    (
        "--hostile-sources",
        bounded(1, 200),
        4,
        "loopback addresses the attack comes from (127.0.0.2, ...)",
    ),
    (
        "--hostile-pause",
        bounded_float(0.001, 3600.0),
        0.5,
        "seconds a hostile connection waits before its next attack (mean)",
    ),
    (
        "--hostile-kinds",
        str,
        None,
        "comma-separated kinds of attack (default: the mixed load of smc_hmm.bench.hostile)",
    ),
    ("--settle", bounded_float(0.0, 3600.0), 5.0, "seconds of attack before the clients start"),
    ("--repeats", bounded(1, 100), 1, "rounds of alone / under attack, alternating"),
    (
        "--decoy",
        None,
        None,
        "also a run while the same attack hits another server on this machine (a control)",
    ),
    ("--max-seconds", bounded_float(1.0, 86_400.0), 1800.0, "the attack stops after this at most"),
)


def _add_attack_arguments(hostile) -> None:
    """The options of ``--hostile``: the attack the clients' runs are measured under."""
    for flag, kind, default, text in _ATTACK_OPTIONS:
        if kind is None:
            hostile.add_argument(flag, action="store_true", help=text)
        else:
            hostile.add_argument(flag, type=kind, default=default, help=text)


# -- the client processes -------------------------------------------------------------------

_CLIENT: dict = {}


def _client_init(server, certs: str, key_bits: int, insecure: bool, names) -> None:
    from smc_hmm.runtime.client import client_tls

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keypair = throwaway_keypair(key_bits)
    tls, name = client_tls(certs, names.get(timeout=60))
    _CLIENT.update(server=tuple(server), tls=tls, name=name, key_bits=key_bits, keypair=keypair)
    _CLIENT["insecure"] = insecure


def _client_ready(_: int) -> int:
    return os.getpid()


def _client_session(frames) -> tuple[float, str | None, int, float]:
    """(latency, decision, bytes sent, the client's CPU seconds) of one session."""
    from smc_hmm.runtime.client import run_client_session

    c = _CLIENT
    t0, cpu = time.perf_counter(), time.process_time()
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
    return (
        time.perf_counter() - t0,
        result["output"]["keyword"],
        result["cost"]["bytes"]["sent"],
        time.process_time() - cpu,
    )


def _client_names(count: int) -> list[str]:
    """One client certificate per concurrent client: a session budget is per client name."""
    return [f"client{i}" for i in range(count)]


@contextlib.contextmanager
def _client_pool(args, directory: Path, address, count: int):
    """``count`` client processes, keys generated and imports done before it is yielded."""
    ctx = multiprocessing.get_context("forkserver")
    names = ctx.Queue()
    for name in _client_names(count):
        names.put(name)
    init = (address, str(directory / "certs"), args.key_bits, args.insecure, names)
    pool = ProcessPoolExecutor(count, mp_context=ctx, initializer=_client_init, initargs=init)
    with pool:
        list(pool.map(_client_ready, range(count)))
        yield pool


def _run_clients(pool, jobs) -> dict:
    """The sessions of ``jobs`` ((frames, plaintext decision)) on the pool: wall time,
    throughput, latency percentiles and how many decisions agree with the plaintext."""
    t0 = time.perf_counter()
    results = list(pool.map(_client_session, [f for f, _ in jobs]))
    wall = time.perf_counter() - t0
    latencies = [r[0] for r in results]
    return {
        "utterances": len(jobs),
        "wall_s": wall,
        "utterances_per_min": 60.0 * len(jobs) / wall,
        "p50_s": _percentile(latencies, 50),
        "p95_s": _percentile(latencies, 95),
        "agree": sum(r[1] == want for r, (_, want) in zip(results, jobs)),
        "client_cpu_s": float(np.mean([r[3] for r in results])),
        "load_after": os.getloadavg()[0],
    }


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


def process_resources(pid: int) -> dict:
    """Threads, open file descriptors and resident memory (kB) of process ``pid`` (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {
        "threads": int(fields["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "rss_kb": int(fields["VmRSS"].split()[0]),
    }


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its live descendants (Bob's
    compute lanes start from a fork server, a child of his), from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parent[int(entry)] = int(fields[1])
                cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {pid}, True
    while grew:
        grown = tree | {child for child, up in parent.items() if up in tree}
        grew, tree = len(grown) > len(tree), grown
    return sum(cpu.get(p, 0.0) for p in tree)


class _Sampler:
    """The largest of each of a process's resources, sampled every ``period`` seconds."""

    def __init__(self, pid: int, period: float = 0.2):
        self.pid, self.period = pid, period
        self.peak = process_resources(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="smc-bench-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with contextlib.suppress(OSError, KeyError, ValueError):
                now = process_resources(self.pid)
                self.peak = {k: max(v, now[k]) for k, v in self.peak.items()}

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def _workload(args, sessions: int):
    from smc_hmm.data import load_bundled_models, load_test_utterances
    from smc_hmm.protocol import find

    models, labels = load_bundled_models("diag")
    models, labels = models[: args.models], labels[: args.models]
    keyword = find("keyword")
    params = keyword.params({})  # the served protocol's: the defaults
    cases = []
    for u in load_test_utterances()[:sessions]:
        frames = np.asarray(u.features)
        frames = frames[: args.frames] if args.frames else frames
        plain = keyword.plaintext(params, {"alice": frames, "bob": (models, labels)})["keyword"]
        cases.append((frames, plain))
    return models, labels, cases


def _run_setting(args, directory: Path, scheduler: str | None, label: str, console) -> dict:
    config = directory / "parties.toml"
    log = directory / f"bob-{label}.log"
    proc, address = _start_server(config, scheduler, args.workers, log)
    levels = []
    try:
        for level in _levels(args.clients):
            jobs = args._cases[: level * args.utterances]
            with _client_pool(args, directory, address, level) as pool:
                row = {"clients": level, **_run_clients(pool, jobs)}
            levels.append(row)
            console.print(_run_line(f"{label}: {level} client(s)", row))
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


# -- the attack ------------------------------------------------------------------------------


def _hostile_main(target, count, sources, pause, mix, stop, results, max_seconds) -> None:
    """The attacking process: ``count`` hostile connections until ``stop`` (or the bound)."""
    import resource

    from smc_hmm.bench.hostile import HostileLoad

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    load = HostileLoad(target, count, mix=mix, sources=sources, pause=pause).start()
    results.put({"started": True})
    stop.wait(max_seconds)
    report = load.stop()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    results.put({"kinds": report, "cpu_s": usage.ru_utime + usage.ru_stime})


def _mix(kinds: str | None):
    from smc_hmm.bench.hostile import MIX

    if not kinds:
        return MIX
    weights = dict(MIX)
    chosen = [k.strip() for k in kinds.split(",") if k.strip()]
    unknown = sorted(set(chosen) - set(weights))
    if unknown or not chosen:
        raise ConfigError(f"--hostile-kinds: unknown {unknown}; kinds are {sorted(weights)}")
    return tuple((k, weights[k]) for k in chosen)


class _Attack:
    """The hostile process's life: started on entry, stopped (bounded) on exit."""

    def __init__(self, target, args):
        ctx = multiprocessing.get_context("forkserver")
        self._stop, self._results = ctx.Event(), ctx.Queue()
        sources = tuple(f"127.0.0.{2 + i}" for i in range(args.hostile_sources))
        self.process = ctx.Process(
            target=_hostile_main,
            args=(
                target,
                args.hostile_count,
                sources,
                args.hostile_pause,
                _mix(args.hostile_kinds),
                self._stop,
                self._results,
                args.max_seconds,
            ),
            name="smc-bench-hostile",
            daemon=True,
        )
        self.report: dict = {}

    def __enter__(self) -> _Attack:
        self.process.start()
        self._results.get(timeout=120)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self.report = self._results.get(timeout=60)
        self.process.join(30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(10)


def _hostile_target(directory: Path, address, key_bits: int):
    from smc_hmm.bench.hostile import HostileTarget
    from smc_hmm.certs import make_certificates
    from smc_hmm.transport.tcp import TlsConfig

    certs = directory / "certs"
    rogue = make_certificates(directory / "rogue", ["bob"], clients=["mallory"])
    key, _ = throwaway_keypair(key_bits)
    return HostileTarget(
        address=tuple(address),
        client=TlsConfig(certs / "ca.pem", certs / "mallory.pem", certs / "mallory.key"),
        client_name="mallory",
        rogue=TlsConfig(certs / "ca.pem", rogue.certs["mallory"], rogue.keys["mallory"]),
        key_n=key.n,
    )


_LOG_SESSION = re.compile(r"session \d+ client=(\S+) from \S+: (\w+)")
_LOG_TIMES = re.compile(r"wall=([\d.]+)s compute=([\d.]+)s wait=([\d.]+)s")
_LOG_REFUSED = re.compile(r"refused (?:client=(\S+) from )?\S+: (\w+)")


def _server_outcomes(log: Path, offset: int) -> dict:
    """Outcomes in the server's log from byte ``offset`` on: sessions by client and
    result, refusals by reason class, dropped pending connections."""
    sessions: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    dropped = 0
    bob = []  # Bob's wall, compute and wait seconds of the legitimate sessions
    with open(log, encoding="utf-8", errors="replace") as f:
        f.seek(offset)
        for line in f:
            if m := _LOG_SESSION.search(line):
                if m.group(2) != "started":
                    sessions[f"{m.group(1)}: {m.group(2)}"] += 1
                times = _LOG_TIMES.search(line)
                if m.group(1).startswith("client") and m.group(2) == "ok" and times:
                    bob.append([float(x) for x in times.groups()])
            elif m := _LOG_REFUSED.search(line):
                refused[m.group(2)] += 1
            elif " dropped " in line:
                dropped += 1
    means = np.mean(bob, axis=0) if bob else [float("nan")] * 3
    return {
        "sessions": dict(sessions),
        "refused": dict(refused),
        "dropped": dropped,
        "bob_session_s": dict(zip(("wall", "compute", "wait"), map(float, means))),
    }


def _settle_fds(pid: int, baseline: dict, seconds: float) -> tuple[float | None, dict]:
    """Seconds until the process's descriptors are back to ``baseline`` (None if not within
    ``seconds``), and its resources then."""
    start = time.monotonic()
    while True:
        now = process_resources(pid)
        if now["fds"] <= baseline["fds"]:
            return time.monotonic() - start, now
        if time.monotonic() - start > seconds:
            return None, now
        time.sleep(0.05)


def _timed_run(pool, jobs, pid: int, log: Path) -> dict:
    """One run of the legitimate workload, with the server's CPU seconds, peak resources
    and, from its log, the outcomes and Bob's mean time per legitimate session."""
    cpu, offset = tree_cpu_seconds(pid), log.stat().st_size
    with _Sampler(pid) as sampler:
        row = _run_clients(pool, jobs)
    row["server_cpu_s"] = tree_cpu_seconds(pid) - cpu
    row["server_peak"] = sampler.peak
    time.sleep(0.2)  # the last sessions' log lines
    row["server_log"] = _server_outcomes(log, offset)
    return row


def _run_hostile(args, directory: Path, console) -> dict:
    """``--repeats`` rounds of: the workload alone, then the same workload under attack,
    then the server's recovery; alternating, so that a slow spell of a shared machine
    hits both kinds of run."""
    config = directory / "parties.toml"
    log = directory / "bob-hostile.log"
    proc, address = _start_server(config, None, args.workers, log)
    decoy = None
    jobs = args._cases
    out: dict = {"hostile_count": args.hostile_count, "hostile_sources": args.hostile_sources}
    rounds = out["rounds"] = []
    try:
        target = _hostile_target(directory, address, args.key_bits)
        if args.decoy:  # the same attack on another server: what sharing the machine costs
            decoy, decoy_address = _start_server(
                directory / "decoy" / "parties.toml", None, args.workers, directory / "decoy.log"
            )
            decoy_target = _hostile_target(directory / "decoy", decoy_address, args.key_bits)
        with _client_pool(args, directory, address, args.clients) as pool:
            _run_clients(pool, jobs[: args.clients])  # warm-up: imports, caches, lanes
            out["baseline"] = process_resources(proc.pid)
            for number in range(1, args.repeats + 1):
                r: dict = {"round": number, "alone": _timed_run(pool, jobs, proc.pid, log)}
                console.print(_run_line(f"round {number}, alone", r["alone"]))
                if decoy is not None:
                    with _Attack(decoy_target, args):
                        time.sleep(args.settle)
                        r["decoy"] = _timed_run(pool, jobs, proc.pid, log)
                    console.print(_run_line(f"round {number}, attack on a decoy", r["decoy"]))
                r["before"] = before = process_resources(proc.pid)
                offset = log.stat().st_size
                with _Attack(target, args) as attack, _Sampler(proc.pid) as sampler:
                    time.sleep(args.settle)
                    r["hostile"] = _timed_run(pool, jobs, proc.pid, log)
                r["hostile"]["server_peak"] = sampler.peak  # the settling included
                console.print(
                    _run_line(f"round {number}, {args.hostile_count} hostile", r["hostile"])
                )
                recovery, r["after"] = _settle_fds(proc.pid, before, 2 * TARGET_FD_SECONDS)
                r["fd_recovery_s"] = recovery
                r["attack"] = attack.report
                r["server_outcomes"] = _server_outcomes(log, offset)
                rounds.append(r)
            time.sleep(1.0)
            out["end"] = process_resources(proc.pid)
    finally:
        out["server_exit"] = _stop_server(proc)
        if decoy is not None:
            _stop_server(decoy)
    return out


def _run_line(label: str, row: dict) -> str:
    return (
        f"{label}: {row['utterances_per_min']:.2f} utterances/min, p50 {row['p50_s']:.2f} s, "
        f"p95 {row['p95_s']:.2f} s, {row['agree']}/{row['utterances']} decisions agree "
        f"(load {row['load_after']:.2f})"
    )


def _hostile_verdict(out: dict) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for the targets of a hostile run, over all rounds."""
    rounds = out["rounds"]
    ratios = [r["hostile"]["utterances_per_min"] / r["alone"]["utterances_per_min"] for r in rounds]
    ratio = float(np.median(ratios))
    first = rounds[0]["before"]["rss_kb"]
    growth = max(r["hostile"]["server_peak"]["rss_kb"] - first for r in rounds) / 1024
    recoveries = [r["fd_recovery_s"] for r in rounds]
    slowest = None if None in recoveries else max(recoveries)
    agree = sum(r[k]["agree"] for r in rounds for k in ("alone", "hostile"))
    total = sum(r[k]["utterances"] for r in rounds for k in ("alone", "hostile"))
    return [
        (
            f"throughput under attack >= {TARGET_RATIO:.0%} of alone (median of rounds)",
            f"{ratio:.1%} ({', '.join(f'{x:.0%}' for x in ratios)})",
            ratio >= TARGET_RATIO,
        ),
        ("every legitimate decision correct", f"{agree}/{total}", agree == total),
        (
            f"server RSS growth < {TARGET_RSS_MIB:g} MiB (peak under attack - before)",
            f"{growth:+.1f} MiB",
            growth < TARGET_RSS_MIB,
        ),
        (
            f"descriptors back to baseline within {TARGET_FD_SECONDS:g} s of the attack's end",
            "not within 20 s" if slowest is None else f"{slowest:.2f} s (slowest round)",
            slowest is not None and slowest <= TARGET_FD_SECONDS,
        ),
    ]


def _print_hostile(out: dict, console) -> bool:
    """Print a hostile run's tables (the clients' runs, the server process, the targets);
    True if every target is met.  Adds the targets (and with decoys the shares) to ``out``."""
    console.print(_clients_table(out))
    console.print(_server_table(out))
    console.print(
        f"warm baseline {_resources(out['baseline'])}; at the end {_resources(out['end'])}"
    )
    last = out["rounds"][-1]
    console.print(f"server outcomes during the last attack: {last['server_outcomes']}")
    console.print(f"the last attack: {last['attack']}")
    rows = _hostile_verdict(out)
    verdict = [(name, measured, "yes" if met else "NO") for name, measured, met in rows]
    console.print(_table("targets", ("target", "measured", "met"), verdict))
    if all("decoy" in r for r in out["rounds"]):
        shares = [
            r["hostile"]["utterances_per_min"] / r["decoy"]["utterances_per_min"]
            for r in out["rounds"]
        ]
        out["vs_decoy"] = shares
        console.print(
            "throughput under attack / while the attack hits a decoy server on this machine "
            f"(the server's own share of the loss): {', '.join(f'{x:.0%}' for x in shares)}"
        )
    out["targets"] = [{"target": n, "measured": m, "met": ok} for n, m, ok in rows]
    return all(ok for _, _, ok in rows)


def _table(title: str, columns, rows):
    """A rich table of string cells."""
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    return table


def _clients_table(out: dict):
    """Per round and run (alone, decoy attacked, hostile) the legitimate clients'
    throughput, latency, agreement and CPU, and Bob's seconds per session."""
    columns = ("round", "run", "utterances/min", "p50 (s)", "p95 (s)", "agree")
    columns += ("CPU s / session: client + server", "Bob per session (s)", "load")
    runs = (
        ("alone", "alone"),
        ("decoy attacked", "decoy"),
        (f"{out['hostile_count']} hostile", "hostile"),
    )
    cells = []
    for r in out["rounds"]:
        for label, key in runs:
            if key in r:
                cells.append(_client_cells(r["round"], label, r[key]))
    return _table("smc-hmm serve under attack: the legitimate clients", columns, cells)


def _client_cells(round_: int, label: str, row: dict) -> tuple[str, ...]:
    return (
        str(round_),
        label,
        f"{row['utterances_per_min']:.2f}",
        f"{row['p50_s']:.2f}",
        f"{row['p95_s']:.2f}",
        f"{row['agree']}/{row['utterances']}",
        f"{row['client_cpu_s']:.2f} + {row['server_cpu_s'] / row['utterances']:.2f}",
        "{wall:.2f} (compute {compute:.2f})".format(**row["server_log"]["bob_session_s"]),
        f"{row['load_after']:.1f}",
    )


def _resources(x: dict) -> str:
    return f"{x['rss_kb'] / 1024:.1f} / {x['fds']} / {x['threads']}"


def _server_table(out: dict):
    """Per round the server's resources before, at the peak of and after the attack."""
    columns = ("round", "before the attack", "peak under attack", "fds back", "seconds")
    cells = [
        (
            str(r["round"]),
            _resources(r["before"]),
            _resources(r["hostile"]["server_peak"]),
            _resources(r["after"]),
            "> 20" if r["fd_recovery_s"] is None else f"{r['fd_recovery_s']:.2f}",
        )
        for r in out["rounds"]
    ]
    return _table("the server process: RSS (MiB) / open fds / threads", columns, cells)


def main(args) -> int:
    from rich.console import Console

    check_key_bits(args)
    if args.clients < 1 or args.utterances < 1 or not 2 <= args.models <= 10 or args.frames < 0:
        raise ConfigError("--clients, --utterances >= 1, --models in 2..10, --frames >= 0")
    if args.hostile and (
        args.hostile_count < 1
        or not 1 <= args.hostile_sources <= 200
        or args.hostile_pause <= 0
        or args.settle < 0
        or args.max_seconds <= 0
        or args.repeats < 1
    ):
        raise ConfigError(
            "--hostile-count >= 1, --hostile-sources in 1..200, --hostile-pause > 0, "
            "--settle >= 0, --max-seconds > 0, --repeats >= 1"
        )
    if args.hostile:
        _mix(args.hostile_kinds)  # an unknown kind fails before anything starts
    console = Console()
    sessions = args.clients * args.utterances
    if not args.hostile:
        sessions = max(_levels(args.clients)) * args.utterances
    models, labels, cases = _workload(args, sessions)
    args._cases = cases
    load_before = os.getloadavg()
    out = {
        "key_bits": args.key_bits,
        "models": args.models,
        "frames": args.frames or "whole",
        "utterances_per_client": args.utterances,
        "cores": os.cpu_count(),
        "load_before": load_before,
    }
    with tempfile.TemporaryDirectory(prefix="smc-bench-serve-") as tmp:
        directory = Path(tmp)
        _write_server(directory, args, models, labels)
        if args.hostile and args.decoy:
            _write_server(directory / "decoy", args, models, labels)
        if args.hostile:
            out["clients"] = args.clients
            out.update(_run_hostile(args, directory, console))
        else:
            out["settings"] = _run_levels(args, directory, console)
    out["load_after"] = os.getloadavg()
    ok = _print_hostile(out, console) if args.hostile else _print_levels(out, args, console)
    console.print(f"load average before {load_before}, after {out['load_after']}")
    return finish(args, out, console, met=ok, default=str)


def _write_server(directory: Path, args, models, labels) -> Path:
    """A serving Bob's parties.toml (keyword recognition, ``models``) and its certificates
    (the benchmark's clients and ``mallory``) in ``directory``."""
    from smc_hmm.hmm.io import save_models
    from smc_hmm.runtime import write_config

    directory.mkdir(exist_ok=True)
    save_models(directory / "keywords.npz", models, labels=labels)
    return write_config(
        directory / "parties.toml",
        "keyword",
        {"alice": {"kind": "alice"}, "bob": {"kind": "bob", "models": "keywords.npz"}},
        params={"mode": "private"},
        key_bits=args.key_bits,
        insecure=args.key_bits < 2048,
        timeout=600,
        serve={
            "party": "bob",
            "max_sessions": max(4, args.clients + 2) if args.hostile else args.clients,
            "session_timeout": 3600.0,
        },
        clients=[*_client_names(args.clients), "mallory"],
    )


def _run_levels(args, directory: Path, console) -> list[dict]:
    settings = [("local lanes", None), ("local Dask", "local")] if args.both else []
    if not args.both:
        name = "local lanes" if not args.scheduler else f"Dask {args.scheduler}"
        settings = [(name, args.scheduler)]
    out = []
    for label, scheduler in settings:
        if scheduler == "local":
            with _local_cluster() as address:
                out.append(_run_setting(args, directory, address, label, console))
        else:
            out.append(_run_setting(args, directory, scheduler, label, console))
    return out


def _print_levels(out: dict, args, console) -> bool:
    from rich.table import Table

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
    return all(r["agree"] == r["utterances"] for s in out["settings"] for r in s["levels"])
