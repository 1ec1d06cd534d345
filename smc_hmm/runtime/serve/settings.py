"""A serving party's settings: ``[serve]`` and ``[compute]`` of a parties.toml, checked.

Every limit is described in the package docstring (:mod:`smc_hmm.runtime.serve`) and,
with its default and how to change it, in ``docs/serving.md`` ("Limits").
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from smc_hmm.errors import ConfigError
from smc_hmm.leakage import samples_for_error
from smc_hmm.limits import DEFAULT_MAX_FRAMES, MAX_KEY_BITS
from smc_hmm.runtime.config import RunConfig
from smc_hmm.transport.tcp import MAX_LENGTH, ConnectionBudget

__all__ = [
    "DEFAULT_BLIND_NATS",
    "DEFAULT_BUDGET_FILE",
    "DEFAULT_FRAMES_PER_PERIOD",
    "DEFAULT_SESSIONS_PER_PERIOD",
    "WHEN_BUSY",
    "ServeSettings",
    "serving_party",
]

WHEN_BUSY = ("wait", "refuse")
#: the default budget of one client certificate per day (docs/serving.md section 8): a
#: heavy user of a voice service -- an utterance every 15 s for 8 hours -- stays inside
#: it, and the outputs alone then tell a client at most 2,000 log2(K + 1) bits a day
#: (6.9 kbit for ten keywords), frames at most 200,000 (33 minutes of speech)
DEFAULT_SESSIONS_PER_PERIOD = 2_000
DEFAULT_FRAMES_PER_PERIOD = 200_000
DEFAULT_BUDGET_FILE = "budget.json"
#: the protocols' default blind width (``blind_nats``) when the config names none
DEFAULT_BLIND_NATS = 20.0


@dataclass(frozen=True)
class ServeSettings:
    """``[serve]`` and ``[compute]`` of a parties.toml (command-line options override).

    Every limit is described in the package docstring and, with its default and how to
    change it, in ``docs/serving.md`` ("Limits").
    """

    max_sessions: int = 4
    when_busy: str = "wait"
    max_waiting: int = 16
    wait_timeout: float = 30.0
    session_timeout: float = 600.0
    handshake_timeout: float = 10.0
    shutdown_grace: float = 10.0
    #: connections accepted but not yet authenticated (TLS handshake and hello), in total
    max_pending: int = 256
    #: of them from one source address
    max_pending_per_address: int = 64
    #: new connections one source address may open per second (a token bucket) ...
    connect_rate_per_address: float = 10.0
    #: ... and at once, after a quiet spell
    connect_burst_per_address: int = 20
    #: sessions one client certificate name runs at once (and clients of it waiting)
    max_sessions_per_client: int = 2
    #: sessions one client certificate name may start per second (a token bucket) ...
    session_rate_per_client: float = 2.0
    #: ... and at once, after a quiet spell
    session_burst_per_client: int = 10
    #: the largest Paillier (and DGK) modulus a client may bring, bits
    max_key_bits: int = MAX_KEY_BITS
    #: the largest frame of a session (and at most ``[run] max_frame_bytes``)
    max_frame_bytes: int = 16 * 2**20
    #: frames read from a client and not yet taken by the protocol: reading stops beyond
    inbox_frames: int = 16
    inbox_bytes: int = 2**20
    #: frames queued for a client that does not read: a send waits beyond, then fails
    outbox_bytes: int = 16 * 2**20
    #: messages a client sent that the protocol has not asked for yet: dropped beyond
    max_buffered_messages: int = 16
    max_buffered_bytes: int = 4 * 2**20
    #: a Dask scheduler address (tcp://host:8786); None: the local process lanes
    scheduler: str | None = None
    #: local lanes (caller + worker processes); default: every core
    workers: int | None = None
    #: the per-client budget (smc_hmm.runtime.budget, docs/serving.md section 8), on by
    #: default; false turns it off (a weaker setting: nothing bounds repeated queries)
    client_budget: bool = True
    #: frames one client certificate may send per budget_period ...
    max_frames_per_client: int | None = DEFAULT_FRAMES_PER_PERIOD
    #: ... or the budget that keeps every blinded value at least this many nats from its
    #: client's best estimate (smc_hmm.leakage.samples_for_error with the protocol's
    #: blind_nats; the thesis's modes); the smaller applies
    hiding_nats: float | None = None
    #: sessions one client certificate may start per budget_period
    max_sessions_per_period: int | None = DEFAULT_SESSIONS_PER_PERIOD
    budget_period: float = 86400.0
    #: where the budget is kept across restarts (written atomically after every charge);
    #: a parties.toml's [serve] defaults it to budget.json beside the file ("" there: in
    #: memory only); None: in memory only
    budget_file: str | None = None
    #: the longest run (frames) one session may have: DEFAULT_MAX_FRAMES, 30 s of audio,
    #: as smc-hmm keyword's --max-frames
    max_frames: int = DEFAULT_MAX_FRAMES
    #: append one JSON line per session here (the results record); None: no record
    results: str | None = None

    _COUNTS = (
        "max_sessions",
        "max_waiting",
        "max_pending",
        "max_pending_per_address",
        "connect_burst_per_address",
        "max_sessions_per_client",
        "session_burst_per_client",
        "max_key_bits",
        "max_frame_bytes",
        "inbox_frames",
        "inbox_bytes",
        "outbox_bytes",
        "max_buffered_messages",
        "max_buffered_bytes",
        "max_frames",
    )
    _SECONDS = (
        "wait_timeout",
        "session_timeout",
        "handshake_timeout",
        "shutdown_grace",
        "budget_period",
    )
    _RATES = ("connect_rate_per_address", "session_rate_per_client")

    def __post_init__(self):
        for name in self._COUNTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"serve.{name} must be a non-negative integer")
            if name != "max_waiting" and value < 1:
                raise ConfigError(
                    f"serve.{name} must be at least 1, got {value}: it is a bound, and 0 "
                    "does not mean unlimited (every limit of a serving party is finite, "
                    "docs/serving.md, 'Limits')"
                )
        if self.max_frame_bytes > MAX_LENGTH:
            raise ConfigError(f"serve.max_frame_bytes must be at most {MAX_LENGTH}")
        if self.when_busy not in WHEN_BUSY:
            raise ConfigError(f"serve.when_busy must be one of {WHEN_BUSY}")
        if not isinstance(self.client_budget, bool):
            raise ConfigError("serve.client_budget must be true or false")
        if self.budget_file is not None:
            folder = Path(str(self.budget_file)).expanduser().parent
            if not isinstance(self.budget_file, str) or not folder.is_dir():
                raise ConfigError(
                    f"serve.budget_file must be a file in an existing folder, got "
                    f"{self.budget_file!r}"
                )
        for name in self._SECONDS + self._RATES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                unit = "of seconds" if name in self._SECONDS else "per second"
                raise ConfigError(f"serve.{name} must be a positive number {unit}")
        for name in ("max_frames_per_client", "max_sessions_per_period"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"serve.{name} must be a positive integer")
        if self.hiding_nats is not None and (
            isinstance(self.hiding_nats, bool)
            or not isinstance(self.hiding_nats, int | float)
            or not 0 < self.hiding_nats < 1e6
        ):
            raise ConfigError("serve.hiding_nats must be a positive number of nats")
        if self.results is not None and (not isinstance(self.results, str) or not self.results):
            raise ConfigError("serve.results must be the path of a file (JSON lines)")
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise ConfigError("compute.scheduler must be an address like tcp://host:8786")
        if self.workers is not None and (
            isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1
        ):
            raise ConfigError("compute.workers must be a positive integer")

    def frame_limit(self, blind_nats: float) -> int | None:
        """Frames per client and period: the explicit limit, or the one derived from
        ``hiding_nats`` for blinds of ``blind_nats`` (the smaller if both are set); None
        where the budget is off."""
        if not self.client_budget:
            return None
        limits = []
        if self.max_frames_per_client is not None:
            limits.append(self.max_frames_per_client)
        if self.hiding_nats is not None:
            limits.append(samples_for_error(blind_nats, self.hiding_nats))
        return min(limits) if limits else None

    def budget(self) -> ConnectionBudget:
        """The transport budget of one session's connection."""
        return ConnectionBudget(
            inbox_frames=self.inbox_frames,
            inbox_bytes=self.inbox_bytes,
            outbox_bytes=self.outbox_bytes,
        )

    @classmethod
    def from_config(cls, config: RunConfig, **overrides) -> ServeSettings:
        serve = dict(config.serve)
        serve.pop("party", None)
        compute = dict(config.compute)
        known = {f.name for f in fields(cls)}
        bad = (set(serve) - known - {"scheduler", "workers"}) | (
            set(compute) - {"scheduler", "workers"}
        )
        if bad or {"scheduler", "workers"} & set(serve):
            raise ConfigError(
                f"unknown keys in [serve]/[compute]: {sorted(bad or {'scheduler', 'workers'})} "
                "([compute] takes scheduler and workers)"
            )
        if isinstance(serve.get("results"), str) and config.path is not None:
            serve["results"] = str(config.path.parent / serve["results"])  # the file's folder
        budget_file = serve.get("budget_file", DEFAULT_BUDGET_FILE)
        if budget_file == "" or config.path is None and "budget_file" not in serve:
            serve["budget_file"] = None  # in memory only
        elif isinstance(budget_file, str):  # beside the configuration file
            folder = config.path.parent if config.path is not None else Path.cwd()
            serve["budget_file"] = str(folder / Path(budget_file).expanduser())
        values = {**serve, **compute}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def serving_party(config: RunConfig) -> str | None:
    """The name of the configuration's serving party (``[serve] party``), if it has one."""
    if not config.serve:  # [compute] alone does not make a configuration a served one
        return None
    party = config.serve.get("party", "bob")
    if not isinstance(party, str) or party not in config.parties:
        raise ConfigError(f"serve.party = {party!r} is not a party of the configuration")
    return party
