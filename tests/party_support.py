"""Shared by tests that run parties: real ones in threads (``run_party``, one per thread
over TCP + mutual TLS on loopback), and scripted ones that misbehave on purpose."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from smc_hmm.errors import SmcHmmError
from smc_hmm.runtime import run_party


def run_parties_in_threads(
    config,
    names: Iterable[str],
    *,
    join: float,
    catch: type[BaseException] = SmcHmmError,
    options: Callable[[str], dict] = lambda name: {},
) -> tuple[dict[str, object], dict[str, BaseException]]:
    """``run_party(name, config, **options(name))`` for every name, each in its own thread,
    each joined for ``join`` seconds: (each party's result, each party's ``catch`` error);
    the test checks both."""
    results: dict[str, object] = {}
    errors: dict[str, BaseException] = {}

    def run(name):
        try:
            results[name] = run_party(name, config, **options(name))
        except catch as e:  # reported by the caller's assertions
            errors[name] = e

    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join)
    return results, errors


def alice_declaring_a_length(ctx, length):
    """A forward-protocol Alice who sends her key and declares ``length`` observations,
    then waits for Bob's emissions (Bob is expected to refuse the length first)."""
    pk, _ = ctx.keypair
    ctx.send("bob", "fw.key", pk)
    ctx.recv("bob", "fw.spec")
    ctx.send("bob", "fw.length", length)
    ctx.recv("bob", "fw.emit")
