"""Running protocols: party contexts, in-process simulation, one party per OS process, launcher.

One protocol code path for every setting (DESIGN 3).  A protocol role is a
function ``role(ctx, *args)`` that talks only through its
:class:`PartyContext`: ``ctx.send(peer, tag, payload)``, ``ctx.recv(peer,
tag)``, ``ctx.phase(name)``, ``ctx.count(op)``, its keys and its executor.
Where the messages go is the runner's business:

* :func:`simulate` runs every role in its own thread of this process over a
  :class:`~smc_hmm.transport.local.LocalNetwork` (or any other
  :class:`~smc_hmm.transport.base.Network`, e.g. TCP with mutual TLS on
  loopback) and returns every party's output and the merged
  :class:`~smc_hmm.cost.CostReport`.
* :func:`run_party` runs one role of a ``parties.toml`` configuration in this
  process over TCP with mutual TLS (``smc-hmm party --role NAME --config
  parties.toml``).
* :func:`launch` starts every party of a configuration as its own OS process
  (``python -m smc_hmm.cli party ...``) and collects their results
  (``smc-hmm launch --config parties.toml``).

Reliability: every receive has a timeout; when any party fails, every other
party's transport is closed so it raises a typed transport error promptly;
all threads are joined (all processes are reaped) before returning; a run
with any failure raises its root-cause error and never returns partial
results.

Metering: each context gives its party its own view of every public key it
uses (``pk.with_meter(ledger)``) and its own :class:`~smc_hmm.wire.WireCodec`
with those views registered, so ciphertexts a party receives count the work
done on them into that party's ledger.  A :class:`~smc_hmm.crypto.PublicKey`
received from a peer is adopted automatically (metered and registered) by
:meth:`PartyContext.recv`.  Because a channel decodes frames from a peer in
order, a key must arrive before (or in an earlier frame than) ciphertexts
under it.

Configuration files name the protocol and the party factory as import paths
(``protocols.<name>`` and ``parties:role_from_config`` by default) that are
resolved at run time: the core package has no static dependency on the
``protocols`` or ``parties`` packages.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger, CostReport
from smc_hmm.crypto import CipherArray, PrivateKey, PublicKey, Rng
from smc_hmm.crypto.keys import MIN_SECURE_BITS
from smc_hmm.errors import (
    AuthenticationError,
    ConfigError,
    InsecurePeerKeyError,
    InvalidInputError,
    PeerTimeoutError,
    SmcHmmError,
    TransportError,
)
from smc_hmm.messages import Message
from smc_hmm.transport.base import Channel, Network, Transport
from smc_hmm.transport.local import LocalNetwork
from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES, WireCodec

__all__ = [
    "LaunchResult",
    "PartyConfig",
    "PartyContext",
    "PartyProcessError",
    "RunConfig",
    "RunResult",
    "launch",
    "load_config",
    "run_party",
    "simulate",
]

DEFAULT_TIMEOUT = 30.0


class PartyProcessError(SmcHmmError):
    """A party running in another OS process failed (its error type and message attached)."""

    def __init__(self, party: str, error_type: str, message: str, returncode: int | None = None):
        super().__init__(f"party {party} failed: {error_type}: {message}")
        self.party = party
        self.error_type = error_type
        self.message = message
        self.returncode = returncode


# -- the party context ---------------------------------------------------------------------


def _metered_private_key(private_key: PrivateKey, view: PublicKey) -> PrivateKey:
    """A shallow copy of ``private_key`` whose decryptions count into ``view``'s meter."""
    metered = copy.copy(private_key)
    metered.public_key = view
    return metered


class PartyContext:
    """Everything a protocol role may touch: its channel, keys, ledger, executor and rng.

    ``send`` / ``recv`` move declared messages (:class:`~smc_hmm.messages.Message`:
    the sender checks its payload against the declaration, the receiver
    validates it and attaches the declared scales and bounds); a plain ``str``
    tag is allowed for payloads without ciphertexts.  ``phase(name)`` times a
    phase; ``count(op, k)`` records composite invocations (``"ot"``,
    ``"compare"``) for the ledger.  ``keypair`` is this party's own key pair
    (metered views) if it holds one.  A public key received from a peer below
    ``min_key_bits`` (2048 unless the party's configuration says insecure) is
    refused with :class:`~smc_hmm.errors.InsecurePeerKeyError`.
    """

    def __init__(
        self,
        name: str,
        channel: Channel,
        *,
        keypair: tuple[PublicKey, PrivateKey] | None = None,
        ledger: CostLedger | None = None,
        compute: Compute | None = None,
        rng: Rng | None = None,
        record: bool = False,
        min_key_bits: int = MIN_SECURE_BITS,
    ):
        self.name = name
        self.min_key_bits = int(min_key_bits)
        self.channel = channel
        self.ledger = ledger if ledger is not None else CostLedger(name)
        self.compute = compute if compute is not None else Compute.inline()
        self.rng = rng if rng is not None else Rng.system()
        self._keys: dict[bytes, PublicKey] = {}
        self.public_key: PublicKey | None = None
        self.private_key: PrivateKey | None = None
        #: (peer, tag, payload) of every message received, if recording was asked for
        self.received: list[tuple[str, str, Any]] | None = [] if record else None
        if keypair is not None:
            pk, sk = keypair
            if not isinstance(pk, PublicKey) or not isinstance(sk, PrivateKey):
                raise InvalidInputError("keypair must be (PublicKey, PrivateKey)")
            if sk.public_key.n != pk.n:
                raise InvalidInputError("the private key does not match the public key")
            self.public_key = self.adopt_key(pk)
            self.private_key = _metered_private_key(sk, self.public_key)

    # -- keys ------------------------------------------------------------------------

    @property
    def keypair(self) -> tuple[PublicKey, PrivateKey]:
        if self.private_key is None:
            raise InvalidInputError(f"party {self.name} holds no key pair")
        return self.public_key, self.private_key

    def adopt_key(self, public_key: PublicKey) -> PublicKey:
        """This party's metered view of ``public_key``, registered with its codec."""
        view = self._keys.get(public_key.fingerprint)
        if view is None:
            view = public_key.with_meter(self.ledger)
            self.channel.codec.add_key(view)
            self._keys[public_key.fingerprint] = view
            if self.ledger.key_bits is None:
                self.ledger.key_bits = view.bits
        return view

    @property
    def keys(self) -> dict[bytes, PublicKey]:
        """The public keys this party knows, by fingerprint (metered views)."""
        return dict(self._keys)

    # -- messages ----------------------------------------------------------------------

    @property
    def peers(self) -> list[str]:
        return self.channel.peers

    def send(self, peer: str, message: Message | str, payload) -> int:
        """Send ``payload`` to ``peer`` as ``message``; returns the encoded size in bytes.

        Ciphertexts may only travel in declared messages: their scale and bound
        are the declaration's (public), never the sender's.
        """
        if isinstance(message, Message):
            return self.channel.send(peer, message.tag, message.outgoing(payload))
        if _holds_ciphertexts(payload):
            raise InvalidInputError(
                f"{message!r}: ciphertexts travel only in declared messages (smc_hmm.messages)"
            )
        return self.channel.send(peer, message, payload)

    def recv(self, peer: str, message: Message | str, timeout: float | None = None):
        """The next ``message`` from ``peer`` (typed errors on timeout / disconnect)."""
        tag = message.tag if isinstance(message, Message) else message
        payload = self.channel.recv(peer, tag, timeout)
        if isinstance(message, Message):
            payload = message.incoming(payload)
        if isinstance(payload, PublicKey):
            if payload.bits < self.min_key_bits:
                raise InsecurePeerKeyError(
                    f"{self.name}: {peer} sent a {payload.bits}-bit key; this party accepts "
                    f"{self.min_key_bits} bits or more"
                )
            payload = self.adopt_key(payload)
        if self.received is not None:
            self.received.append((peer, tag, payload))
        return payload

    # -- accounting -------------------------------------------------------------------

    def phase(self, name: str):
        """``with ctx.phase("name"):`` -- time a phase (wall, CPU, compute vs waiting)."""
        return self.ledger.phase(name)

    def count(self, op: str, k: int = 1) -> None:
        """Record ``k`` invocations of a composite operation (e.g. ``"ot"``, ``"compare"``)."""
        self.ledger.count(op, k)

    def __repr__(self) -> str:
        return f"<PartyContext {self.name} peers={self.peers}>"


def _holds_ciphertexts(payload) -> bool:
    stack = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, CipherArray):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


# -- in-process runs ------------------------------------------------------------------------


@dataclass
class RunResult:
    """Every party's output and the merged cost report of one successful run."""

    outputs: dict[str, Any]
    cost: CostReport
    elapsed: float
    #: per party, (peer, tag, payload) of every message it received (``record_views=True``)
    views: dict[str, list[tuple[str, str, Any]]] | None = None

    def __getitem__(self, party: str):
        return self.outputs[party]


class _Failures:
    """First-come record of party failures (the first one is the root cause)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self.items: list[tuple[int, str, BaseException]] = []

    def add(self, party: str, exc: BaseException) -> bool:
        """Record; True if this is the first failure."""
        with self._lock:
            self.items.append((next(self._seq), party, exc))
            return len(self.items) == 1

    def root(self) -> tuple[str, BaseException] | None:
        with self._lock:
            if not self.items:
                return None
            _, party, exc = min(self.items, key=lambda t: t[0])
            return party, exc


def _annotate(exc: BaseException, party: str, others: list[tuple[str, BaseException]]) -> None:
    if not hasattr(exc, "add_note"):
        return
    exc.add_note(f"(raised by party {party})")
    for other, e in others:
        exc.add_note(f"then {other}: {type(e).__name__}: {e}")


def _close_quietly(transport: Transport) -> None:
    with contextlib.suppress(Exception):  # tearing down after a failure: keep the root cause
        transport.close()


def simulate(
    roles: Mapping[str, Callable[..., Any]],
    args: Mapping[str, tuple] | None = None,
    *,
    keys: Mapping[str, tuple[PublicKey, PrivateKey]] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    network: Network | Callable[[list[str]], Network] | None = None,
    wrap_transport: Callable[[str, Transport], Transport] | None = None,
    compute: Compute | Mapping[str, Compute] | None = None,
    rng: Rng | None = None,
    record_views: bool = False,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    meta: Mapping | None = None,
    join_timeout: float | None = None,
    min_key_bits: int = MIN_SECURE_BITS,
) -> RunResult:
    """Run every role ``roles[name](ctx, *args[name])`` in its own thread and collect results.

    ``keys`` gives the key pairs of the parties that hold one.  ``network``
    is a :class:`Network` (or a factory ``names -> Network``) covering every
    party; the default is an in-process :class:`LocalNetwork`.
    ``wrap_transport(name, transport)`` may wrap a party's transport (fault
    injection, simulated latency).  Every receive times out after
    ``timeout`` seconds.  If any role raises, every party's transport is
    closed (so the others fail promptly with typed transport errors), all
    threads are joined and the first error is raised again (the others are
    attached as notes); otherwise returns a :class:`RunResult`.  Every party
    refuses peer keys below ``min_key_bits`` (lower it only for tests).
    """
    if not roles:
        raise InvalidInputError("simulate needs at least one role")
    names = list(roles)
    args = dict(args or {})
    keys = dict(keys or {})
    unknown = (set(args) | set(keys)) - set(names)
    if unknown:
        raise InvalidInputError(f"args or keys given for unknown parties: {sorted(unknown)}")
    for name, fn in roles.items():
        if not callable(fn):
            raise InvalidInputError(f"role of {name!r} is not callable")
    if not timeout > 0:
        raise InvalidInputError("timeout must be positive")
    own_network = network is None or not isinstance(network, Network)
    if network is None:
        net = LocalNetwork(names)
    elif isinstance(network, Network):
        net = network
    else:
        net = network(names)
    rng = rng if rng is not None else Rng.system()

    contexts: dict[str, PartyContext] = {}
    try:
        for name in names:
            transport = net.transport(name)
            if wrap_transport is not None:
                transport = wrap_transport(name, transport)
            ledger = CostLedger(name)
            codec = WireCodec(max_frame_bytes=max_frame_bytes)
            channel = Channel(transport, codec, timeout=timeout, observer=ledger, strict=True)
            party_compute = compute.get(name) if isinstance(compute, Mapping) else compute
            contexts[name] = PartyContext(
                name,
                channel,
                keypair=keys.get(name),
                ledger=ledger,
                compute=party_compute,
                rng=rng.spawn(),
                record=record_views,
                min_key_bits=min_key_bits,
            )
    except BaseException:
        for ctx in contexts.values():
            _close_quietly(ctx.channel.transport)
        if own_network:
            net.close()
        raise

    outputs: dict[str, Any] = {}
    failures = _Failures()

    def abort_all(reason: str) -> None:
        for ctx in contexts.values():
            _close_quietly(ctx.channel.transport)

    def body(name: str) -> None:
        ctx = contexts[name]
        try:
            with ctx.ledger.running():
                outputs[name] = roles[name](ctx, *args.get(name, ()))
            ctx.channel.close()  # strict: unrequested messages are a protocol error
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            if failures.add(name, exc):
                abort_all(f"{name} failed")
            else:
                _close_quietly(ctx.channel.transport)

    start = time.perf_counter()
    threads = [
        threading.Thread(target=body, args=(n,), name=f"smc-party-{n}", daemon=True) for n in names
    ]
    for t in threads:
        t.start()
    limit = join_timeout if join_timeout is not None else 2 * timeout + 30
    deadline = time.monotonic() + limit
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        abort_all("run did not finish")
        for t in threads:
            t.join(5.0)
        stuck = [t.name for t in threads if t.is_alive()]
    if own_network:
        net.close()
    elapsed = time.perf_counter() - start

    root = failures.root()
    if root is not None:
        party, exc = root
        others = [(p, e) for _, p, e in failures.items if e is not exc]
        _annotate(exc, party, others)
        raise exc
    if stuck:
        raise PeerTimeoutError(f"parties did not finish within {limit:g} s: {', '.join(stuck)}")
    report = CostReport.from_ledgers(
        [contexts[n].ledger for n in names], meta={"mode": "in-process", **(meta or {})}
    )
    views = {n: contexts[n].received for n in names} if record_views else None
    return RunResult(
        outputs={n: outputs.get(n) for n in names}, cost=report, elapsed=elapsed, views=views
    )


# -- configuration (parties.toml) ----------------------------------------------------------


@dataclass
class PartyConfig:
    """One ``[parties.NAME]`` table: who the party is and where it listens."""

    name: str
    kind: str
    host: str
    port: int
    cert: Path | None = None
    key: Path | None = None
    input: Path | None = None
    #: any further keys of the table (party-specific options, e.g. an inline ``vector``)
    options: dict = field(default_factory=dict)

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port


@dataclass
class RunConfig:
    """A validated ``parties.toml``: the run, the protocol's public parameters, the parties."""

    path: Path | None
    protocol: str
    parties: dict[str, PartyConfig]
    params: dict = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    key_bits: int = 2048
    insecure: bool = False
    deadline: float = 300.0
    ca_cert: Path | None = None
    factory: str = "parties:role_from_config"
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    connect_timeout: float = 30.0

    @property
    def min_key_bits(self) -> int:
        """The smallest peer key this run accepts: 2048 bits unless it says insecure."""
        return min(self.key_bits, MIN_SECURE_BITS) if self.insecure else MIN_SECURE_BITS

    def party(self, name: str) -> PartyConfig:
        try:
            return self.parties[name]
        except KeyError:
            raise ConfigError(
                f"no party {name!r} in {self.path or 'the configuration'} "
                f"(parties: {', '.join(self.parties)})"
            ) from None


_RUN_KEYS = {
    "protocol",
    "timeout",
    "key_bits",
    "insecure",
    "deadline",
    "factory",
    "max_frame_bytes",
    "connect_timeout",
}
_PARTY_KEYS = {"kind", "host", "port", "cert", "key", "input"}


def _typed(table: Mapping, key: str, kinds, where: str, default=None, *, required=False):
    if key not in table:
        if required:
            raise ConfigError(f"{where}: missing {key!r}")
        return default
    value = table[key]
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise ConfigError(f"{where}.{key} must be {_kind_names(kinds)}, got {value!r}")
    if not isinstance(value, kinds):
        raise ConfigError(f"{where}.{key} must be {_kind_names(kinds)}, got {value!r}")
    return value


def _kind_names(kinds) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(k.__name__ for k in kinds)


def _path(base: Path, value: str | None) -> Path | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def config_from_dict(data: Mapping, path: Path | None = None) -> RunConfig:
    """Validate a parsed ``parties.toml`` (paths are relative to ``path``'s directory)."""
    base = path.parent if path is not None else Path.cwd()
    where = str(path) if path is not None else "config"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: top level must be a table")
    unknown = set(data) - {"run", "protocol", "tls", "parties"}
    if unknown:
        raise ConfigError(f"{where}: unknown sections {sorted(unknown)}")
    run = data.get("run")
    if not isinstance(run, Mapping):
        raise ConfigError(f"{where}: missing [run] table")
    bad = set(run) - _RUN_KEYS
    if bad:
        raise ConfigError(f"{where}: unknown keys in [run]: {sorted(bad)}")
    protocol = _typed(run, "protocol", str, "run", required=True)
    if not protocol.isidentifier():
        raise ConfigError(f"run.protocol must be a module name, got {protocol!r}")
    timeout = float(_typed(run, "timeout", (int, float), "run", DEFAULT_TIMEOUT))
    deadline = float(_typed(run, "deadline", (int, float), "run", 300.0))
    connect_timeout = float(_typed(run, "connect_timeout", (int, float), "run", 30.0))
    if not (timeout > 0 and deadline > 0 and connect_timeout > 0):
        raise ConfigError("run.timeout, run.deadline and run.connect_timeout must be positive")
    key_bits = _typed(run, "key_bits", int, "run", 2048)
    insecure = _typed(run, "insecure", bool, "run", False)
    if key_bits < 2048 and not insecure:
        raise ConfigError(
            f"run.key_bits = {key_bits} is insecure; set run.insecure = true (tests only)"
        )
    factory = _typed(run, "factory", str, "run", "parties:role_from_config")
    max_frame = _typed(run, "max_frame_bytes", int, "run", DEFAULT_MAX_FRAME_BYTES)
    params = data.get("protocol", {})
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where}: [protocol] must be a table")
    tls = data.get("tls", {})
    if not isinstance(tls, Mapping) or set(tls) - {"ca_cert"}:
        raise ConfigError(f"{where}: [tls] takes only ca_cert")
    ca_cert = _path(base, _typed(tls, "ca_cert", str, "tls"))
    tables = data.get("parties")
    if not isinstance(tables, Mapping) or len(tables) < 2:
        raise ConfigError(f"{where}: need at least two [parties.NAME] tables")
    parties: dict[str, PartyConfig] = {}
    seen: set[tuple[str, int]] = set()
    for name, t in tables.items():
        w = f"parties.{name}"
        if not isinstance(t, Mapping):
            raise ConfigError(f"{w} must be a table")
        port = _typed(t, "port", int, w, required=True)
        if not 0 < port < 65536:
            raise ConfigError(f"{w}.port must be in 1..65535, got {port}")
        host = _typed(t, "host", str, w, "127.0.0.1")
        if (host, port) in seen:
            raise ConfigError(f"{w}: address {host}:{port} is used twice")
        seen.add((host, port))
        parties[name] = PartyConfig(
            name=name,
            kind=_typed(t, "kind", str, w, name),
            host=host,
            port=port,
            cert=_path(base, _typed(t, "cert", str, w)),
            key=_path(base, _typed(t, "key", str, w)),
            input=_path(base, _typed(t, "input", str, w)),
            options={k: v for k, v in t.items() if k not in _PARTY_KEYS},
        )
    return RunConfig(
        path=path,
        protocol=protocol,
        parties=parties,
        params=dict(params),
        timeout=timeout,
        key_bits=key_bits,
        insecure=insecure,
        deadline=deadline,
        ca_cert=ca_cert,
        factory=factory,
        max_frame_bytes=max_frame,
        connect_timeout=connect_timeout,
    )


def load_config(path) -> RunConfig:
    """Read and validate a ``parties.toml`` file (typed :class:`ConfigError` on any problem)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e
    return config_from_dict(data, path.resolve())


def resolve(ref: str):
    """Import ``"package.module:attribute"`` (or a module for ``"package.module"``)."""
    module_name, _, attr = ref.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"cannot import {module_name!r}: {e}") from e
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


# -- one party per process ------------------------------------------------------------------


def jsonable(value):
    """Outputs as JSON-ready data (numpy arrays and scalars to lists and numbers)."""
    import numpy as np

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, CipherArray):
        # ciphertexts stay with their holder: the result file says what is held
        return {"ciphertexts": list(value.shape), "scale": value.scale,
                "key": value.public_key.fingerprint.hex()}
    raise InvalidInputError(
        f"a party output of type {type(value).__name__} is not JSON-serialisable"
    )


def _tls_for(config: RunConfig, name: str):
    from smc_hmm.transport.tcp import TlsConfig

    pc = config.party(name)
    missing = [
        what
        for what, v in (
            ("tls.ca_cert", config.ca_cert),
            (f"parties.{name}.cert", pc.cert),
            (f"parties.{name}.key", pc.key),
        )
        if v is None
    ]
    if missing:
        raise ConfigError(
            f"networked parties authenticate with mutual TLS: set "
            f"{', '.join(missing)} (make them with `smc-hmm certs`)"
        )
    for path in (config.ca_cert, pc.cert, pc.key):
        if not path.is_file():
            raise ConfigError(f"TLS file {path} does not exist (make it with `smc-hmm certs`)")
    return TlsConfig(config.ca_cert, pc.cert, pc.key)


def _connect(name: str, addresses: dict, tls, config: RunConfig):
    """The party's TCP transport; stray socket / TLS exceptions become typed errors."""
    import ssl

    from smc_hmm.transport.tcp import TcpTransport

    try:
        return TcpTransport(
            name, addresses, tls, config.connect_timeout, max_frame_bytes=config.max_frame_bytes
        )
    except ssl.SSLError as e:  # e.g. the peer refused our certificate mid-handshake
        raise AuthenticationError(f"{name}: TLS connection failed: {e}") from e
    except OSError as e:
        raise TransportError(f"{name}: connection failed: {e}") from e


def _write_result(path, result: dict) -> None:
    if path is None:
        return
    try:
        Path(path).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e


def run_party(name: str, config: RunConfig | str | Path, *, result_path=None) -> dict:
    """Run party ``name`` of ``config`` in this process over TCP with mutual TLS.

    Builds the party with the configured factory (default
    ``parties:role_from_config``: ``(role(ctx), keypair or None, party)``),
    connects to every other party (retrying until ``run.connect_timeout``),
    runs the role with every receive bounded by ``run.timeout``, and returns
    ``{"party", "protocol", "ok", "output", "cost", "elapsed"}``.  The same
    dict (or, on failure, one with ``ok = false`` and the error's type and
    message) is written as JSON to ``result_path``; failures are re-raised.
    """
    if not isinstance(config, RunConfig):
        config = load_config(config)
    start = time.perf_counter()
    result: dict[str, Any] = {
        "party": name,
        "protocol": config.protocol,
        "ok": False,
        "pid": os.getpid(),
    }
    try:
        config.party(name)
        factory = resolve(config.factory)
        role, keypair, party = factory(name, config)
        tls = _tls_for(config, name)
        addresses = {n: p.address for n, p in config.parties.items()}
        transport = _connect(name, addresses, tls, config)
        ledger = CostLedger(name)
        try:
            channel = Channel(
                transport,
                WireCodec(max_frame_bytes=config.max_frame_bytes),
                timeout=config.timeout,
                observer=ledger,
                strict=True,
            )
            ctx = PartyContext(
                name,
                channel,
                keypair=keypair,
                ledger=ledger,
                compute=getattr(party, "compute", None),
                rng=getattr(party, "rng", None),
                min_key_bits=config.min_key_bits,
            )
            with ledger.running():
                output = role(ctx)
            channel.close()
        except BaseException:
            _close_quietly(transport)
            raise
        result.update(
            ok=True,
            output=jsonable(output),
            cost=ledger.snapshot(),
            elapsed=time.perf_counter() - start,
        )
    except SmcHmmError as exc:
        result.update(
            error={"type": type(exc).__name__, "message": str(exc)},
            elapsed=time.perf_counter() - start,
        )
        with contextlib.suppress(ConfigError):  # keep the party's own error as the one reported
            _write_result(result_path, result)
        raise
    _write_result(result_path, result)
    return result


# -- launcher ---------------------------------------------------------------------------------


@dataclass
class LaunchResult:
    """Outputs, merged cost, exit codes and pids of a multi-process run."""

    outputs: dict[str, Any]
    cost: CostReport
    returncodes: dict[str, int]
    pids: dict[str, int]
    elapsed: float

    def __getitem__(self, party: str):
        return self.outputs[party]

    def to_dict(self) -> dict:
        return {
            "outputs": self.outputs,
            "returncodes": self.returncodes,
            "pids": self.pids,
            "elapsed": self.elapsed,
            "cost": self.cost.to_dict(),
        }


#: errors a party reports when another party failed first (not root causes)
_SECONDARY = {"PeerDisconnectedError", "TransportError", "PeerTimeoutError"}


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(os.environ if env is None else env)
    root = str(_repo_root())
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in parts:
        parts.insert(0, root)
    out["PYTHONPATH"] = os.pathsep.join(parts)
    out.setdefault("PYTHONUNBUFFERED", "1")
    return out


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def launch(
    config: RunConfig | str | Path,
    *,
    timeout: float | None = None,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    grace: float = 3.0,
) -> LaunchResult:
    """Run every party of ``config`` as its own OS process and collect the results.

    Each party runs ``python -m smc_hmm.cli party --role NAME --config PATH
    --json RESULT``.  When one process fails, the others get ``grace``
    seconds to notice (their peers disconnected) and are then killed; after
    ``timeout`` (default ``run.deadline``) everything is killed.  All
    processes are reaped before returning.  Raises :class:`PartyProcessError`
    for the root-cause failure, :class:`PeerTimeoutError` on the deadline;
    returns a :class:`LaunchResult` only if every party succeeded.
    """
    import subprocess
    import tempfile

    if not isinstance(config, RunConfig):
        config = load_config(config)
    if config.path is None:
        raise ConfigError("launch needs a configuration file (every process reads it)")
    limit = float(timeout if timeout is not None else config.deadline)
    if not limit > 0:
        raise InvalidInputError("timeout must be positive")
    say = progress or (lambda msg: None)
    python = python or sys.executable
    child_env = _child_env(env)
    names = list(config.parties)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="smc-hmm-launch-") as tmp:
        tmpdir = Path(tmp)
        procs: dict[str, subprocess.Popen] = {}
        logs = []
        exit_order: list[str] = []
        timed_out = False
        try:
            for name in names:
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
                procs[name] = subprocess.Popen(
                    cmd, stdout=out, stderr=err, env=child_env, stdin=subprocess.DEVNULL
                )
            say(f"started {', '.join(f'{n} (pid {p.pid})' for n, p in procs.items())}")
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
                    break
                now = time.monotonic()
                if first_failure is not None and now - first_failure > grace:
                    break
                if now > deadline:
                    timed_out = True
                    break
                time.sleep(0.02)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
            for name, p in procs.items():
                p.wait()
                if name not in exit_order:
                    exit_order.append(name)
            for fh in logs:
                fh.close()
        elapsed = time.perf_counter() - start
        returncodes = {n: procs[n].returncode for n in names}
        pids = {n: procs[n].pid for n in names}
        results: dict[str, dict] = {}
        for name in names:
            with contextlib.suppress(OSError, json.JSONDecodeError):
                results[name] = json.loads((tmpdir / f"{name}.json").read_text())
        stderr_tail = {n: _last_line(tmpdir / f"{n}.err") for n in names}
    if timed_out:
        raise PeerTimeoutError(
            f"parties did not finish within {limit:g} s and were killed: "
            + ", ".join(n for n in names if n not in results)
        )
    failed = [n for n in exit_order if returncodes[n] != 0 or not results.get(n, {}).get("ok")]
    if failed:

        def rank(n):
            etype = results.get(n, {}).get("error", {}).get("type", "")
            return (etype in _SECONDARY, exit_order.index(n))

        root = min(failed, key=rank)
        error = results.get(root, {}).get("error")
        if error:
            raise PartyProcessError(root, error["type"], error["message"], returncodes[root])
        raise PartyProcessError(
            root,
            "ProcessError",
            stderr_tail[root] or f"exited with code {returncodes[root]} without a result",
            returncodes[root],
        )
    cost = CostReport(
        {n: results[n]["cost"] for n in names},
        meta={"mode": "processes", "protocol": config.protocol},
    )
    return LaunchResult(
        outputs={n: results[n]["output"] for n in names},
        cost=cost,
        returncodes=returncodes,
        pids=pids,
        elapsed=elapsed,
    )
