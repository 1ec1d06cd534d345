"""Shared by tests that run parties: the configuration of a two-party run, real parties
in threads (``run_party``, one per thread over TCP + mutual TLS on loopback), Alice and
Bob in-process with the tests' short keys, and scripted ones that misbehave on purpose."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import SmcHmmError
from smc_hmm.runtime import run_party, run_protocol, simulate, write_config


def write_two_party_config(
    directory: Path, protocol: str, alice: dict, bob: dict, params: dict, *, key_bits, timeout
) -> Path:
    """``directory``/parties.toml of Alice and Bob (``kind`` alice and bob, then the
    entries of ``alice`` and ``bob``): INSECURE ``key_bits`` keys, ``timeout`` seconds a
    receive, 30 s to connect."""
    return write_config(
        directory / "parties.toml",
        protocol,
        {"alice": {"kind": "alice", **alice}, "bob": {"kind": "bob", **bob}},
        params=params,
        key_bits=key_bits,
        insecure=True,
        timeout=timeout,
        connect_timeout=30,
    )


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


def run_alice_and_bob(protocol, params, alice, bob, keypair, **options):
    """``protocol`` in-process: Alice plays role alice on input ``alice`` and holds
    ``keypair`` (the tests' INSECURE keys, from 512 bits), Bob plays role bob on ``bob``;
    ``options`` go to :func:`~smc_hmm.runtime.run_protocol`."""
    return run_protocol(
        protocol,
        params,
        {"alice": ("alice", alice), "bob": ("bob", bob)},
        keys={"alice": keypair},
        min_key_bits=512,
        **options,
    )


def simulate_alice_and_bob(alice, bob, keypair, *, seed: int, **options):
    """The role functions ``alice`` and ``bob`` in-process, Alice holding ``keypair`` (the
    tests' INSECURE keys, from 512 bits), randomness seeded with ``seed``; ``options`` go
    to :func:`~smc_hmm.runtime.simulate`."""
    return simulate(
        {"alice": alice, "bob": bob},
        keys={"alice": keypair},
        min_key_bits=512,
        rng=Rng.seeded(seed),
        **options,
    )


def alice_declaring_a_length(ctx, length):
    """A forward-protocol Alice who sends her key and declares ``length`` observations,
    then waits for Bob's emissions (Bob is expected to refuse the length first)."""
    pk, _ = ctx.keypair
    ctx.send("bob", "fw.key", pk)
    ctx.recv("bob", "fw.spec")
    ctx.send("bob", "fw.length", length)
    ctx.recv("bob", "fw.emit")


@contextmanager
def exact_offline_pools(pk, need: dict[str, int]) -> Iterator[dict]:
    """An offline phase sized from the public counts ``need`` alone: Alice's key encrypts
    from a pool of exactly need["alice"] randomizers, Bob re-randomises from one of
    need["bob"] (yielded as a run's ``randomizers`` argument); on leaving, both pools must
    be used up with no miss -- the counts were exact -- and the key has its own again."""
    from smc_hmm.crypto import DJNRandomizer, RandomizerPool, Rng

    own = pk.randomizer
    alice_pool = RandomizerPool(own, capacity=max(need["alice"], 1))
    bob_pool = RandomizerPool(DJNRandomizer(pk.n_mpz, Rng.seeded(6)), capacity=max(need["bob"], 1))
    alice_pool.fill(need["alice"])  # a party planned to draw none gets an empty pool
    bob_pool.fill(need["bob"])
    pk.use_randomizer(alice_pool)
    try:
        yield {"bob": {pk.fingerprint: bob_pool}}
    finally:
        pk.use_randomizer(own)
    assert alice_pool.misses == 0 and bob_pool.misses == 0
    assert len(alice_pool) == 0 and len(bob_pool) == 0


def write_secure_sum_config(
    tmp_path: Path,
    vectors: dict[str, list[float]],
    *,
    timeout: float = 10.0,
    bob_input: str | None = None,
    connect_timeout: float = 10,
) -> Path:
    """``tmp_path``/parties.toml of a secure sum over mutual TLS on loopback: one party per
    entry of ``vectors`` (alice, bob and trent by name, any other a data owner) with its
    vector as input (``bob_input``: Bob's input file's text instead), INSECURE 512-bit
    keys, certificates in ``tmp_path``/certs."""
    from smc_hmm.certs import make_certificates
    from smc_hmm.transport import free_loopback_ports

    names = list(vectors)
    certs = make_certificates(tmp_path / "certs", names)
    ports = free_loopback_ports(len(names))
    contributors = [n for n in names if n not in ("alice", "trent")]
    length = len(next(iter(vectors.values())))
    lines = [
        "[run]",
        'protocol = "secure_sum"',
        f"timeout = {timeout}",
        "key_bits = 512",
        "insecure = true",
        f"connect_timeout = {connect_timeout}",
        "",
        "[protocol]",
        f"contributors = {json.dumps(contributors)}",
        f"length = {length}",
        "scale = 16",
        "max_abs = 1000.0",
        "",
        "[tls]",
        'ca_cert = "certs/ca.pem"',
        "",
    ]
    for name, port in zip(names, ports):
        kind = name if name in ("alice", "bob", "trent") else "data_owner"
        input_path = tmp_path / f"{name}.json"
        input_path.write_text(json.dumps(vectors[name]))
        if name == "bob" and bob_input is not None:
            input_path.write_text(bob_input)
        lines += [
            f"[parties.{name}]",
            f'kind = "{kind}"',
            'host = "127.0.0.1"',
            f"port = {port}",
            f'cert = "certs/{name}.pem"',
            f'key = "certs/{name}.key"',
            f'input = "{name}.json"',
            "",
        ]
    path = tmp_path / "parties.toml"
    path.write_text("\n".join(lines))
    assert certs.ca_cert.exists()
    return path


def forge_output_labels(monkeypatch) -> None:
    """From now on the garbled stage's output labels (:mod:`protocols.stages.garbled`)
    come out with one bit flipped: a forged label, which its decoder must refuse
    (:class:`~smc_hmm.errors.GarbledCircuitError`)."""
    from smc_hmm.gc import garble

    real = garble.garbler_output_labels

    def forged(circuit, labels):
        out = real(circuit, labels).copy()
        out[:, 0] ^= np.uint64(2)
        return out

    monkeypatch.setattr("protocols.stages.garbled.garbler_output_labels", forged)
