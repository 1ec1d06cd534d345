"""The client of a serving party (:mod:`smc_hmm.runtime.serve`).

:func:`run_client_session` dials the server, authenticates with mutual TLS (a
certificate with the client role; the server's certificate must name the server
party), sends the hello and receives the session: its number, the protocol by
registered name (a client only runs the protocol it asked for, never a
``module:object`` reference from the network) and its public parameters, which
the protocol's own descriptor validates.  The client compares the protocol and the
public parameters the server declares (a mode, a threshold) with the ones its user asked
for (``expect``) and refuses a mismatch with
:class:`~smc_hmm.errors.ServedProtocolError` before anything that depends on its input
is sent: only the hello (its own name) has left by then.  Then the client's role runs
over the one connection like any other party, with every receive bounded.  The server is a
peer like any other: its key sizes and the parameters it picks are checked against
:mod:`smc_hmm.limits` (``max_key_bits``), and the messages it sends ahead of what the
protocol asks for against a channel budget (64 messages of at most ``max_frame_bytes``
bytes in all).

Used by ``smc-hmm keyword --audio FILE.wav --server HOST:PORT --certs DIR`` and by
``smc-hmm party --role alice --config parties.toml`` when the configuration has a
``[serve]`` table (:func:`run_party_client`).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from smc_hmm.cost import CostLedger
from smc_hmm.crypto import generate_keypair
from smc_hmm.errors import (
    AuthenticationError,
    ConfigError,
    InsecureKeyWarning,
    InsecurePeerKeyError,
    PeerDisconnectedError,
    PeerTimeoutError,
    ProtocolError,
    ServedProtocolError,
    ServerBusyError,
    ServerShutdownError,
    TransportError,
)
from smc_hmm.limits import MAX_KEY_BITS
from smc_hmm.protocol import find
from smc_hmm.runtime.context import PartyContext, party_channel
from smc_hmm.transport.base import closed_on_failure
from smc_hmm.transport.tcp import (
    HELLO_VERSION,
    TcpTransport,
    TlsConfig,
    hello_errors,
    peer_identity,
    recv_hello,
    send_hello,
)
from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES

__all__ = [
    "check_served",
    "client_tls",
    "connect",
    "parse_server",
    "run_alice_session",
    "run_client_session",
    "run_party_client",
]

#: messages a server may send ahead of what the client's protocol has asked for
CLIENT_BUFFERED_MESSAGES = 64

#: refusal reasons a server sends, by error class name
_REFUSALS = {
    "ServerBusyError": ServerBusyError,
    "ServerShutdownError": ServerShutdownError,
    "AuthenticationError": AuthenticationError,
}


#: a server that accepts TCP must complete the TLS handshake within this many seconds
#: (the serving side's own default handshake bound)
HANDSHAKE_TIMEOUT = 10.0


def parse_server(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as an address."""
    host, sep, port = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--server must be HOST:PORT, got {text!r}")
    return host, int(port)


def client_tls(certs_dir, name: str | None = None) -> tuple[TlsConfig, str]:
    """The TLS files of client ``name`` in ``certs_dir`` (``ca.pem``, ``NAME.pem``, ``NAME.key``).

    Without a name, the directory must hold exactly one client certificate.
    """
    from cryptography import x509

    from smc_hmm.certs import CLIENT_ROLE_URI

    directory = Path(certs_dir)
    ca = directory / "ca.pem"
    if not ca.is_file():
        raise ConfigError(f"{directory} has no ca.pem (make certificates with smc-hmm certs)")
    if name is None:
        found = []
        for pem in sorted(directory.glob("*.pem")):
            if pem.name == "ca.pem" or not pem.with_suffix(".key").is_file():
                continue
            try:
                cert = x509.load_pem_x509_certificate(pem.read_bytes())
                san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
                uris = san.value.get_values_for_type(x509.UniformResourceIdentifier)
            except (ValueError, x509.ExtensionNotFound):
                continue
            if CLIENT_ROLE_URI in uris:
                found.append(pem.stem)
        if not found:
            raise ConfigError(
                f"{directory} holds no client certificate: make one with smc-hmm certs "
                "--clients NAME, or point --certs at the folder that has it"
            )
        if len(found) > 1:
            raise ConfigError(
                f"{directory} holds {len(found)} client certificates ({', '.join(found)}): "
                "choose one with --name"
            )
        name = found[0]
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    for path in (cert, key):
        if not path.is_file():
            raise ConfigError(f"TLS file {path} does not exist (smc-hmm certs --clients {name})")
    return TlsConfig(ca, cert, key), name


def connect(
    address: tuple[str, int],
    tls: TlsConfig,
    name: str,
    *,
    server_name: str = "bob",
    timeout: float = 60.0,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> tuple[TcpTransport, dict]:
    """Dial the server, authenticate, hello: (one-peer transport, the server's reply).

    ``timeout`` bounds the whole set-up, including waiting for a session slot.
    Refusals raise :class:`~smc_hmm.errors.ServerBusyError`,
    :class:`~smc_hmm.errors.ServerShutdownError` or
    :class:`~smc_hmm.errors.AuthenticationError`.
    """
    host, port = address
    deadline = time.monotonic() + timeout
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise TransportError(f"{name}: cannot connect to {host}:{port}: {exc}") from exc
    sock = raw
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(min(timeout, HANDSHAKE_TIMEOUT))
        sock = _tls_handshake(raw, tls, name, address, min(timeout, HANDSHAKE_TIMEOUT))
        names, _ = peer_identity(sock)
        if server_name not in names:
            raise AuthenticationError(
                f"{name}: the server's certificate names {sorted(names)}, not {server_name!r}"
            )
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        reply = _session_reply(sock, name, server_name)
        transport = TcpTransport.over_socket(
            reply["you"], server_name, sock, max_frame_bytes=max_frame_bytes, close_timeout=2.0
        )
        return transport, reply
    except BaseException:
        with contextlib.suppress(OSError):
            sock.close()
        raise


def _tls_handshake(
    raw: socket.socket, tls: TlsConfig, name: str, address: tuple[str, int], bound: float
) -> ssl.SSLSocket:
    """``raw`` wrapped in TLS as the client (the handshake bounded by ``bound`` seconds);
    each way it fails is a typed error saying what the server likely is or did."""
    host, port = address
    try:
        return tls.client_context().wrap_socket(raw)
    except ssl.SSLEOFError as exc:
        raise AuthenticationError(
            f"{name}: {host}:{port} closed the TLS handshake: the server refused this "
            "client's certificate (is it issued by the CA the server trusts?)"
        ) from exc
    except ssl.SSLError as exc:
        raise AuthenticationError(
            f"{name}: TLS handshake with {host}:{port} failed: {exc.reason or exc}"
        ) from exc
    except TimeoutError as exc:
        raise PeerTimeoutError(
            f"{name}: {host}:{port} accepted the connection but completed no TLS handshake "
            f"within {bound:g} s: is it an smc-hmm server (smc-hmm serve)?"
        ) from exc
    except OSError as exc:
        raise PeerDisconnectedError(
            f"{name}: {host}:{port} closed the connection during the TLS handshake: {exc}"
        ) from exc


def _session_reply(sock: ssl.SSLSocket, name: str, server_name: str) -> dict:
    """Hello to ``server_name`` and its reply, once it grants a well-formed session
    (a refusal raises the error class the server names)."""
    try:
        with hello_errors(name, server_name):
            send_hello(sock, {"v": HELLO_VERSION, "from": name, "to": server_name})
            reply = recv_hello(sock)
    except TimeoutError as exc:
        raise PeerTimeoutError(f"{name}: no session from {server_name} in time") from exc
    if reply.get("ok") is not True:
        kind = _REFUSALS.get(reply.get("error"), AuthenticationError)
        raise kind(f"{server_name} refused the session: {reply.get('reason')!r}")
    for key, kinds in (("protocol", str), ("you", str), ("params", dict), ("session", int)):
        if not isinstance(reply.get(key), kinds):
            raise ProtocolError(f"{server_name}: malformed session reply ({key})")
    return reply


def _param(params, key: str):
    if isinstance(params, Mapping):
        return params.get(key)
    return getattr(params, key, None)


def check_served(descriptor, reply: Mapping, expect: Mapping | None = None, server_name="bob"):
    """The server's declared parameters, parsed by the protocol's descriptor, once they
    are what the client asked for: the same protocol and, for every key of ``expect``
    (public parameters such as ``mode`` or ``threshold``, parsed by the same descriptor, so
    defaults and number types compare alike), the same value.  Raises
    :class:`~smc_hmm.errors.ServedProtocolError` (one line) otherwise."""
    if reply["protocol"] != descriptor.name:
        raise ServedProtocolError(
            f"{server_name} serves {reply['protocol']!r}, not {descriptor.name!r}: refused "
            "before sending anything"
        )
    params = descriptor.params(reply["params"])
    expect = {k: v for k, v in (expect or {}).items() if k != "name"}
    if not expect:
        return params
    wanted = descriptor.params(expect)
    differ = [
        f"{key} = {_param(params, key)!r} (asked for {_param(wanted, key)!r})"
        for key in expect
        if _param(params, key) != _param(wanted, key)
    ]
    if differ:
        raise ServedProtocolError(
            f"{server_name} serves {descriptor.name!r} with {', '.join(differ)}: refused "
            "before sending anything"
        )
    return params


def run_client_session(
    protocol: str,
    role: str,
    private,
    *,
    server: tuple[str, int],
    tls: TlsConfig,
    name: str,
    server_name: str = "bob",
    key_bits: int = 2048,
    insecure: bool = False,
    timeout: float = 300.0,
    connect_timeout: float = 60.0,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    keypair=None,
    wrap_transport=None,
    max_key_bits: int = MAX_KEY_BITS,
    expect: Mapping | None = None,
    progress=None,
) -> dict[str, Any]:
    """One session against a serving party: ``{"output", "cost", "elapsed", "session",
    "params", "records"}`` (``records``: whether the server said it keeps a record of
    each session's result, ``smc-hmm serve --results``).

    ``protocol`` is the registered protocol the client expects; the server's
    parameters for it are validated by its descriptor, and the ones named in ``expect``
    must equal the client's (:func:`check_served`: a mismatch is refused before the
    client's role sends anything).  ``role``: the client's
    role; if it holds the key pair, one of ``key_bits`` is generated (or
    ``keypair`` is used).  Every receive waits at most ``timeout`` seconds.
    ``wrap_transport(transport)`` may wrap the connection (fault injection in tests);
    ``progress`` receives the client role's ``ctx.progress`` reports (progress lines).
    """
    descriptor, client_role, keypair = _client_role(protocol, role, keypair, key_bits, insecure)
    start = time.perf_counter()
    transport, reply = connect(
        server, tls, name, server_name=server_name, timeout=connect_timeout,
        max_frame_bytes=max_frame_bytes,
    )  # fmt: skip
    ledger = CostLedger(reply["you"])
    with closed_on_failure(transport):
        params = check_served(descriptor, reply, expect, server_name)
        _check_key_size(reply, keypair, server_name)
        channel = _client_channel(transport, wrap_transport, ledger, timeout, max_frame_bytes)
        ctx = PartyContext(
            reply["you"],
            channel,
            label=name if name == reply["you"] else f"{name} (as {reply['you']})",
            keypair=keypair,
            ledger=ledger,
            min_key_bits=min(key_bits, 2048) if insecure else 2048,
            max_key_bits=max_key_bits,
            progress=progress,
        )
        with ledger.running():
            output = ctx.run(client_role.run, private, params)
        channel.close()
    return _session_result(output, ledger, time.perf_counter() - start, reply)


def run_alice_session(protocol: str, private, certs_dir, name: str | None = None, **options):
    """:func:`run_client_session` as Alice (the client of every served protocol) with the
    certificate of client ``name`` in ``certs_dir`` (:func:`client_tls`); ``options``
    (``server`` and the rest) go to :func:`run_client_session`, whose result this is."""
    tls, name = client_tls(certs_dir, name)
    return run_client_session(protocol, "alice", private, tls=tls, name=name, **options)


def _client_role(protocol: str, role: str, keypair, key_bits: int, insecure: bool):
    """The protocol's descriptor, the client's role in it and the key pair that role
    holds: ``keypair``, or a fresh one of ``key_bits`` if none was given (None when the
    role holds no key)."""
    descriptor = find(protocol)
    client_role = descriptor.role(role)
    if not client_role.holds_key:
        return descriptor, client_role, None
    if keypair is None:
        keypair = _fresh_keypair(key_bits, insecure)
    return descriptor, client_role, keypair


def _client_channel(transport, wrap_transport, ledger: CostLedger, timeout, max_frame_bytes):
    """The client's channel over its one connection (wrapped by ``wrap_transport``, if
    given): every receive bounded, and what the server may send ahead of the protocol
    limited to a channel budget."""
    return party_channel(
        transport if wrap_transport is None else wrap_transport(transport),
        ledger,
        timeout=timeout,
        max_frame_bytes=max_frame_bytes,
        max_buffered_messages=CLIENT_BUFFERED_MESSAGES,
        max_buffered_bytes=max_frame_bytes,
    )


def _session_result(output, ledger, elapsed: float, reply: Mapping) -> dict[str, Any]:
    """What :func:`run_client_session` returns of one finished session."""
    return {
        "output": output,
        "cost": ledger.snapshot(),
        "elapsed": elapsed,
        "session": reply["session"],
        "params": reply["params"],
        "records": reply.get("results") is True,
    }


def _fresh_keypair(key_bits: int, insecure: bool):
    """The client's key pair for one session (an insecure size only when asked for)."""
    with warnings.catch_warnings():
        if insecure:
            warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(key_bits, insecure=insecure)


def _check_key_size(reply: Mapping, keypair, server_name: str) -> None:
    """Refuse, before anything is sent, a key below the server's declared minimum (the
    server would refuse it anyway; this way the client hears why)."""
    wanted = reply.get("min_key_bits")
    if keypair is not None and isinstance(wanted, int) and keypair[0].bits < wanted:
        raise InsecurePeerKeyError(
            f"{server_name} accepts client keys of {wanted} bits or more; this client's "
            f"key has {keypair[0].bits} bits (use --key-bits {wanted})"
        )


def run_party_client(name: str, config, *, result_path=None) -> dict:
    """``smc-hmm party --role NAME`` when the configuration's server serves (``[serve]``).

    ``name``'s table gives the client's certificate and private input; the
    serving party's table its address.  Returns (and writes) the same result
    dict as :func:`smc_hmm.runtime.party.run_party`.
    """
    from smc_hmm.runtime.party import jsonable, recorded_run
    from smc_hmm.runtime.serve import serving_party

    server = serving_party(config)

    def run() -> dict:
        out = _configured_session(name, config, server)
        return {"output": jsonable(out["output"]), "cost": out["cost"], "session": out["session"]}

    return recorded_run(name, config.protocol, result_path, run)


def _configured_session(name: str, config, server: str) -> dict[str, Any]:
    """:func:`run_client_session` for party ``name`` of ``config`` against ``server``."""
    pc = config.party(name)
    descriptor = find(config.protocol)
    params = descriptor.params(config.params)
    role = descriptor.assign(params, name, pc.kind, pc.role)
    private = config.private_input(role, pc)
    tls = config.tls_for(name)
    return run_client_session(
        descriptor.name,
        role.name,
        private,
        server=config.party(server).address,
        tls=tls,
        name=name,
        server_name=server,
        key_bits=config.key_bits,
        insecure=config.insecure,
        timeout=config.timeout,
        connect_timeout=config.connect_timeout,
        max_frame_bytes=config.max_frame_bytes,
        expect=config.params,  # this configuration's [protocol] table, if it has one
    )
