"""Run configurations (``parties.toml``): validated into :class:`RunConfig`.

``[run]`` names the protocol (a registered name or ``"module:object"``), key
size, timeouts and frame limit; ``[protocol]`` holds the protocol's public
parameters (read by its descriptor); ``[tls] ca_cert`` the project CA; and
one ``[parties.NAME]`` table per party: ``kind``, optional ``role``, address,
TLS files and its private input (``input = "file"`` or the role's own key,
e.g. ``observations = "obs.npy"``).  ``[serve]`` and ``[compute]`` configure a
serving party (``smc-hmm serve``; validated by :mod:`smc_hmm.runtime.serve`).
See ``docs/running.md`` and ``docs/serving.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from smc_hmm.crypto.keys import MIN_SECURE_BITS, check_key_bits
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.runtime.simulate import DEFAULT_TIMEOUT
from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES

__all__ = ["PartyConfig", "RunConfig", "config_from_dict", "load_config", "write_config"]

_PROTOCOL_REF = re.compile(r"[A-Za-z_][\w.-]*(:[A-Za-z_][\w.]*)?")  # speaker-trent: a hyphen


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
    #: the role it plays (default: assigned by the protocol from its name and kind)
    role: str | None = None
    #: any further keys of the table (its private input, e.g. ``observations = "x.npy"``)
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
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    connect_timeout: float = 30.0
    #: ``[serve]``: a serving party's limits (smc_hmm.runtime.serve.ServeSettings)
    serve: dict = field(default_factory=dict)
    #: ``[compute]``: where a serving party computes (local lanes or a Dask scheduler)
    compute: dict = field(default_factory=dict)

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

    def tls_for(self, name: str):
        """Party ``name``'s mutual-TLS files (the CA, its certificate and key) as a
        :class:`~smc_hmm.transport.tcp.TlsConfig`, each checked to exist."""
        from smc_hmm.transport.tcp import TlsConfig

        pc = self.party(name)
        missing = [
            what
            for what, v in (
                ("tls.ca_cert", self.ca_cert),
                (f"[parties.{name}] cert", pc.cert),
                (f"[parties.{name}] key", pc.key),
            )
            if v is None
        ]
        if missing:
            raise ConfigError(
                f"networked parties authenticate with mutual TLS: set "
                f"{', '.join(missing)} (make them with `smc-hmm certs`)"
            )
        for path in (self.ca_cert, pc.cert, pc.key):
            if not path.is_file():
                raise ConfigError(f"TLS file {path} does not exist (make it with `smc-hmm certs`)")
        return TlsConfig(self.ca_cert, pc.cert, pc.key)

    def private_input(self, role, pc: PartyConfig):
        """The private input of ``role`` (a :class:`~smc_hmm.protocol.Role`) from the
        party's table ``pc``: its own key (e.g. ``observations``) or ``input``, loaded by
        the role's loader relative to this file's directory."""
        options = dict(pc.options)
        value = options.pop(role.input, None) if role.input else None
        if pc.input is not None:
            if value is not None:
                raise ConfigError(
                    f"[parties.{pc.name}]: give either input or {role.input}, not both"
                )
            value = str(pc.input)
        if options:
            raise ConfigError(
                f"unknown keys in [parties.{pc.name}]: {sorted(options)} (the role "
                f"{role.name!r} takes {role.input or 'no private input'})"
            )
        if role.input is None:
            if value is not None:
                raise ConfigError(f"[parties.{pc.name}]: role {role.name!r} takes no private input")
            return None
        if value is None:
            if role.optional:
                return None
            raise ConfigError(f"[parties.{pc.name}]: role {role.name!r} needs {role.input} = ...")
        base = self.path.parent if self.path is not None else Path.cwd()
        return role.load(value, base)


_RUN_KEYS = {
    "protocol",
    "timeout",
    "key_bits",
    "insecure",
    "allow_large_keys",
    "deadline",
    "max_frame_bytes",
    "connect_timeout",
}
_PARTY_KEYS = {"kind", "role", "host", "port", "cert", "key", "input"}


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
    unknown = set(data) - {"run", "protocol", "tls", "parties", "serve", "compute"}
    if unknown:
        raise ConfigError(f"{where}: unknown sections {sorted(unknown)}")
    run = _run_table(data.get("run"), where)
    params = data.get("protocol", {})
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where}: [protocol] must be a table")
    tls = data.get("tls", {})
    if not isinstance(tls, Mapping) or set(tls) - {"ca_cert"}:
        raise ConfigError(f"{where}: [tls] takes only ca_cert")
    ca_cert = _path(base, _typed(tls, "ca_cert", str, "tls"))
    serve, compute = data.get("serve", {}), data.get("compute", {})
    if not isinstance(serve, Mapping) or not isinstance(compute, Mapping):
        raise ConfigError(f"{where}: [serve] and [compute] must be tables")
    return RunConfig(
        path=path,
        parties=_party_tables(data.get("parties"), base, where),
        params=dict(params),
        ca_cert=ca_cert,
        serve=dict(serve),
        compute=dict(compute),
        **run,
    )


def _run_table(run, where: str) -> dict:
    """The ``[run]`` table, checked: RunConfig's protocol, key size, timeouts, frame limit."""
    if not isinstance(run, Mapping):
        raise ConfigError(f"{where}: missing [run] table")
    bad = set(run) - _RUN_KEYS
    if bad:
        raise ConfigError(f"{where}: unknown keys in [run]: {sorted(bad)}")
    protocol = _typed(run, "protocol", str, "run", required=True)
    if not _PROTOCOL_REF.fullmatch(protocol):
        raise ConfigError(
            f"run.protocol must be a registered name or 'module:object', got {protocol!r}"
        )
    timeout = float(_typed(run, "timeout", (int, float), "run", DEFAULT_TIMEOUT))
    deadline = float(_typed(run, "deadline", (int, float), "run", 300.0))
    connect_timeout = float(_typed(run, "connect_timeout", (int, float), "run", 30.0))
    if not (timeout > 0 and deadline > 0 and connect_timeout > 0):
        raise ConfigError("run.timeout, run.deadline and run.connect_timeout must be positive")
    key_bits = _typed(run, "key_bits", int, "run", 2048)
    insecure = _typed(run, "insecure", bool, "run", False)
    try:
        check_key_bits(
            key_bits,
            insecure=insecure,
            allow_large=_typed(run, "allow_large_keys", bool, "run", False),
            hints=("run.insecure = true", "run.allow_large_keys = true"),
        )
    except InvalidInputError as e:
        raise ConfigError(f"run.key_bits = {key_bits}: {e}") from None
    return {
        "protocol": protocol,
        "timeout": timeout,
        "key_bits": key_bits,
        "insecure": insecure,
        "deadline": deadline,
        "max_frame_bytes": _typed(run, "max_frame_bytes", int, "run", DEFAULT_MAX_FRAME_BYTES),
        "connect_timeout": connect_timeout,
    }


def _party_tables(tables, base: Path, where: str) -> dict[str, PartyConfig]:
    """The ``[parties.NAME]`` tables, checked: at least two, each address used once."""
    if not isinstance(tables, Mapping) or len(tables) < 2:
        raise ConfigError(f"{where}: need at least two [parties.NAME] tables")
    parties: dict[str, PartyConfig] = {}
    seen: set[tuple[str, int]] = set()
    for name, t in tables.items():
        w = f"[parties.{name}]"
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
            role=_typed(t, "role", str, w),
            host=host,
            port=port,
            cert=_path(base, _typed(t, "cert", str, w)),
            key=_path(base, _typed(t, "key", str, w)),
            input=_path(base, _typed(t, "input", str, w)),
            options={k: v for k, v in t.items() if k not in _PARTY_KEYS},
        )
    return parties


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


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, str | Path):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ConfigError(f"cannot write {value!r} to parties.toml")


def write_config(
    path,
    protocol: str,
    parties: Mapping[str, Mapping],
    *,
    params: Mapping | None = None,
    key_bits: int = MIN_SECURE_BITS,
    insecure: bool = False,
    host: str = "127.0.0.1",
    serve: Mapping | None = None,
    compute: Mapping | None = None,
    clients=(),
    **run_options,
) -> Path:
    """Write the configuration file ``path`` for a run on ``host``, and its certificates.

    ``parties`` maps each party name to its table (``kind``, ``role``, its
    private input such as ``observations = "obs.npy"``); addresses (free
    ports on ``host``), certificates (``certs/`` beside ``path``, made with
    :func:`smc_hmm.certs.make_certificates`) and the ``[run]`` and
    ``[protocol]`` tables are filled in.  ``run_options`` go to ``[run]``
    (``timeout``, ``deadline``, ``connect_timeout``, ``max_frame_bytes``).
    ``serve`` / ``compute`` become the ``[serve]`` / ``[compute]`` tables of a
    serving party; ``clients`` are names whose certificates get the client role
    (parties in it are clients of the serving party; other names get a
    certificate only).  Returns the path; :func:`load_config` reads it back.
    """
    from smc_hmm.certs import make_certificates
    from smc_hmm.transport import free_loopback_ports

    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    names = list(parties)
    clients = list(clients)
    make_certificates(
        directory / "certs", [n for n in names if n not in clients], force=True, clients=clients
    )
    ports = free_loopback_ports(len(names))
    run = {"protocol": protocol, "key_bits": key_bits, "insecure": insecure, **run_options}
    lines = ["[run]", *(f"{k} = {_toml_value(v)}" for k, v in run.items()), "", "[protocol]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in (params or {}).items()]
    lines += ["", "[tls]", 'ca_cert = "certs/ca.pem"', ""]
    for section, table in (("serve", serve), ("compute", compute)):
        if table:
            lines += [f"[{section}]", *(f"{k} = {_toml_value(v)}" for k, v in table.items()), ""]
    for name, port in zip(names, ports):
        table = {
            "host": host,
            "port": port,
            "cert": f"certs/{name}.pem",
            "key": f"certs/{name}.key",
            **parties[name],
        }
        lines += [f"[parties.{name}]", *(f"{k} = {_toml_value(v)}" for k, v in table.items()), ""]
    path.write_text("\n".join(lines))
    config_from_dict(_parse(path), path.resolve())  # what was written must load
    return path


def _parse(path: Path) -> Mapping:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    with path.open("rb") as fh:
        return tomllib.load(fh)
