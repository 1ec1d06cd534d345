"""Every party of a configuration as its own OS process on this machine (``smc-hmm launch``).

Each party runs ``python -m smc_hmm.cli party --role NAME --config PATH
--json RESULT``; the launcher waits, reaps every process and merges the
results, or reports the party whose failure came first as the root cause.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from smc_hmm.cost import CostReport
from smc_hmm.errors import ConfigError, InvalidInputError, PartyProcessError, PeerTimeoutError
from smc_hmm.runtime.config import RunConfig, load_config
from smc_hmm.runtime.result import RunResult

__all__ = ["launch"]


#: errors a party reports when another party failed first (not root causes)
_SECONDARY = {"PeerDisconnectedError", "TransportError", "PeerTimeoutError"}
#: errors of a party's own set-up: the likeliest root causes
_SETUP = {"EndpointError", "ConfigError"}


def _blame(result: dict | None) -> int:
    """Rank a failed party as the root cause: its own set-up error first, then any
    other error of its own, then a party that left no result (crashed or stalled),
    and last the errors that only say a peer went away."""
    if result is None or "error" not in result:
        return 2
    etype = result["error"].get("type", "")
    if etype in _SETUP:
        return 0
    return 3 if etype in _SECONDARY else 1


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(os.environ if env is None else env)
    out.setdefault("PYTHONUNBUFFERED", "1")
    return out


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def _checked(config: RunConfig | str | Path) -> RunConfig:
    """``config`` loaded, with a file of its own, its protocol known, its parameters
    valid and every party a role in it (each party process checks the same after it
    starts)."""
    from smc_hmm.protocol import find

    if not isinstance(config, RunConfig):
        config = load_config(config)
    if config.path is None:
        raise ConfigError("launch needs a configuration file (every process reads it)")

    descriptor = find(config.protocol)
    params = descriptor.params(config.params)
    for name, party in config.parties.items():
        descriptor.assign(params, name, party.kind, party.role)
    return config


def launch(
    config: RunConfig | str | Path,
    *,
    timeout: float | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    grace: float = 3.0,
    affinity: Mapping[str, Iterable[int]] | None = None,
) -> RunResult:
    """Run every party of ``config`` as its own OS process and collect the results.

    Each party runs ``python -m smc_hmm.cli party --role NAME --config PATH
    --json RESULT``.  When one process fails, the others get ``grace``
    seconds to notice (their peers disconnected) and are then killed; after
    ``timeout`` (default ``run.deadline``) everything is killed.  All
    processes are reaped before returning.  Raises :class:`PartyProcessError`
    for the root-cause failure, :class:`PeerTimeoutError` on the deadline;
    returns a :class:`RunResult` only if every party succeeded.

    ``affinity`` pins parties to CPUs (Linux): ``{"alice": [0], "bob": [1]}`` runs each
    party, its threads and its worker lanes on its own core, as two machines would.
    """
    config = _checked(config)  # before any process starts: one line, not three failures
    limit = float(timeout if timeout is not None else config.deadline)
    if not limit > 0:
        raise InvalidInputError("timeout must be positive")
    say = progress or (lambda msg: None)
    python = python or sys.executable
    child_env = _child_env(env)
    names = list(config.parties)
    cpus = _check_affinity(affinity, names)
    run = _run_processes(config, python, child_env, cpus, limit, grace, say)
    if run.timed_out:
        raise PeerTimeoutError(
            f"these parties did not finish within {limit:g} s and were killed: "
            + ", ".join(n for n in names if n not in run.results)
        )
    results, returncodes = run.results, run.returncodes
    failed = [n for n in run.exit_order if returncodes[n] != 0 or not results.get(n, {}).get("ok")]
    if failed:
        _raise_root_cause(
            failed, run.exit_order, results, returncodes, run.killed, run.stderr_tail, grace
        )
    cost = CostReport(
        {n: results[n]["cost"] for n in names},
        meta={"mode": "processes", "protocol": config.protocol},
    )
    return RunResult(
        outputs={n: results[n]["output"] for n in names},
        cost=cost,
        returncodes=returncodes,
        pids=run.pids,
        elapsed=run.elapsed,
    )


@dataclass(frozen=True)
class _Exits:
    """What the party processes of one launch left behind, every one reaped."""

    timed_out: bool
    exit_order: list[str]
    killed: set[str]
    returncodes: dict[str, int]
    pids: dict[str, int]
    results: dict[str, dict]
    stderr_tail: dict[str, str]
    elapsed: float


def _run_processes(
    config: RunConfig,
    python: str,
    child_env: dict[str, str],
    cpus: dict[str, set[int]],
    limit: float,
    grace: float,
    say: Callable[[str], None],
) -> _Exits:
    """Start every party (pinned to its ``cpus``), wait for them as :func:`launch`
    describes, reap them all and read what each wrote."""
    import tempfile

    names = list(config.parties)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="smc-hmm-launch-") as tmp:
        tmpdir = Path(tmp)
        procs: dict = {}
        logs: list = []
        exit_order: list[str] = []
        timed_out = False
        try:
            for name in names:
                procs[name] = _start_party(python, name, config, tmpdir, child_env, logs)
                if name in cpus:  # before the party starts its threads and lanes
                    os.sched_setaffinity(procs[name].pid, cpus[name])
            say(f"started {', '.join(f'{n} (pid {p.pid})' for n, p in procs.items())}")
            timed_out = _wait_for_parties(procs, exit_order, limit, grace, say)
        finally:
            killed = _reap(procs, exit_order, logs)
        elapsed = time.perf_counter() - start
        results: dict[str, dict] = {}
        for name in names:
            with contextlib.suppress(OSError, json.JSONDecodeError):
                results[name] = json.loads((tmpdir / f"{name}.json").read_text())
        return _Exits(
            timed_out=timed_out,
            exit_order=exit_order,
            killed=killed,
            returncodes={n: procs[n].returncode for n in names},
            pids={n: procs[n].pid for n in names},
            results=results,
            stderr_tail={n: _last_line(tmpdir / f"{n}.err") for n in names},
            elapsed=elapsed,
        )


def _check_affinity(affinity, names) -> dict[str, set[int]]:
    """The CPUs of each pinned party, checked against the parties and this machine."""
    if not affinity:
        return {}
    if not hasattr(os, "sched_setaffinity"):
        raise InvalidInputError("pinning parties to CPUs needs Linux (os.sched_setaffinity)")
    available = os.sched_getaffinity(0)
    out = {}
    for name, cpus in affinity.items():
        if name not in names:
            raise InvalidInputError(f"affinity names {name!r}, not a party of the configuration")
        chosen = {int(c) for c in cpus}
        if not chosen or not chosen <= available:
            raise InvalidInputError(
                f"{name}'s CPUs {sorted(chosen)} are not among this process's {sorted(available)}"
            )
        out[name] = chosen
    return out


def _start_party(python: str, name: str, config: RunConfig, tmpdir: Path, env, logs: list):
    """``smc-hmm party --role NAME`` as a process writing its result and output to
    ``tmpdir``; its two log files are appended to ``logs`` (to close)."""
    import subprocess

    cmd = [
        python,
        "-m",
        "smc_hmm.cli",
        "party",
        "--role",
        name,
        "--config",
        str(config.path),
        "--json",
        str(tmpdir / f"{name}.json"),
        "--quiet",
    ]
    out = (tmpdir / f"{name}.out").open("wb")
    err = (tmpdir / f"{name}.err").open("wb")
    logs += [out, err]
    return subprocess.Popen(cmd, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)


def _wait_for_parties(procs: dict, exit_order: list[str], limit: float, grace: float, say) -> bool:
    """Wait until every process exits, ``grace`` seconds after the first failure, or
    ``limit`` seconds in all; ``exit_order`` gets the names as they exit.  Whether the
    deadline passed."""
    deadline = time.monotonic() + limit
    first_failure: float | None = None
    while True:
        for name, p in procs.items():
            if name not in exit_order and p.poll() is not None:
                exit_order.append(name)
                say(f"{name} exited with code {p.returncode}")
                if p.returncode != 0 and first_failure is None:
                    first_failure = time.monotonic()
        if len(exit_order) == len(procs):
            return False
        now = time.monotonic()
        if first_failure is not None and now - first_failure > grace:
            return False
        if now > deadline:
            return True
        time.sleep(0.02)


def _reap(procs: dict, exit_order: list[str], logs: list) -> set[str]:
    """Kill the processes still running, wait for every one, close the logs; the names
    of those killed."""
    killed = {n for n, p in procs.items() if p.poll() is None}
    for n in killed:
        procs[n].kill()
    for name, p in procs.items():
        p.wait()
        if name not in exit_order:
            exit_order.append(name)
    for fh in logs:
        fh.close()
    return killed


def _raise_root_cause(failed, exit_order, results, returncodes, killed, stderr_tail, grace):
    """:class:`PartyProcessError` for the failed party most likely to be the root cause."""
    root = min(failed, key=lambda n: (_blame(results.get(n)), exit_order.index(n)))
    error = results.get(root, {}).get("error")
    if error:
        raise PartyProcessError(root, error["type"], error["message"], returncodes[root])
    if root in killed:
        others = ", ".join(n for n in failed if n != root) or "another party"
        message = (
            f"did not finish and was killed {grace:g} s after {others} failed "
            "(it stalled or was still waiting)"
        )
    else:
        message = f"exited with code {returncodes[root]} without a result"
        if stderr_tail[root]:
            message += f" (last line on stderr: {stderr_tail[root]})"
    raise PartyProcessError(root, "ProcessError", message, returncodes[root])
