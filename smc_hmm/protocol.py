"""Protocol descriptors: what a protocol plugin exports (``docs/adding-a-protocol.md``).

A protocol module exports one :class:`ProtocolDescriptor`: its name, how its
public parameters are read from a configuration, its roles (one role function
per party, the party kind that plays it, whether it holds the Paillier key
pair, and which private input it loads), and its message declarations.  The
runtime, the CLI, ``smc-hmm party`` and ``smc-hmm launch`` discover
descriptors through the ``smc_hmm.protocols`` entry-point group (or a
``"module:object"`` reference), so the core package never names a protocol.

A role function has the signature ``run(ctx, private, params)``: the party
context, the role's private input (``None`` if it takes none) and the
protocol's public parameters.  It only sends, receives and computes.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from numbers import Integral
from pathlib import Path
from typing import Any

from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.messages import Message

__all__ = [
    "ENTRY_POINT_GROUP",
    "Example",
    "HOOKS",
    "ProtocolDescriptor",
    "Role",
    "alice_and_bob",
    "assign_by_field",
    "available",
    "find",
    "params_from_config",
    "randomizers_by_key",
    "save_array",
]

#: the entry-point group under which protocol descriptors register
ENTRY_POINT_GROUP = "smc_hmm.protocols"


@dataclass(frozen=True)
class Role:
    """One party's part in a protocol.

    ``run(ctx, private, params)`` is the role function.  ``kind`` names the
    party kind that plays it by default (``alice``, ``bob``, ``trent``,
    ``data_owner``).  ``holds_key``: the party generates the Paillier key
    pair before the run.  ``input``: the name of the private input the role
    takes (a key of its ``[parties.NAME]`` table, e.g. ``observations``), and
    ``load(value, base_dir)`` turns the configured value (a path or inline
    data) into it; ``optional``: the input may be absent (``None``).
    ``many``: several parties may play the role.
    """

    name: str
    run: Callable[[Any, Any, Any], Any]
    kind: str
    holds_key: bool = False
    input: str | None = None
    load: Callable[[Any, Path], Any] | None = None
    optional: bool = False
    many: bool = False

    def __post_init__(self):
        if not self.name or not callable(self.run):
            raise InvalidInputError("a role needs a name and a callable run(ctx, private, params)")
        if self.input is not None and self.load is None:
            raise InvalidInputError(f"role {self.name!r} takes {self.input!r} but has no loader")


def alice_and_bob(alice, bob, load, *, input: str = "input") -> tuple[Role, Role]:
    """The two roles of a client-server protocol whose parties take the same kind of input
    (either may hold the model or the data): Alice holds the key, Bob evaluates."""
    return (
        Role("alice", alice, kind="alice", holds_key=True, input=input, load=load),
        Role("bob", bob, kind="bob", input=input, load=load),
    )


def params_from_config(cls, section: Mapping, what: str, *, convert=None):
    """A parameter dataclass ``cls`` from a ``[protocol]`` table: every key one of its
    fields (``name``, the protocol's, is ignored), TOML lists as tuples (the parameters
    are frozen); ``convert(values)`` may rewrite the values first.  Unknown keys and bad
    values are ConfigErrors that name the protocol (``what``)."""
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in section.items() if k != "name"}
    unknown = set(values) - set(cls.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown {what} parameters: {sorted(unknown)}")
    try:
        return cls(**(convert(values) if convert else values))
    except (InvalidInputError, TypeError, ValueError) as e:
        raise ConfigError(f"bad {what} parameters: {e}") from e


@dataclass(frozen=True)
class Example:
    """Small example runs of a protocol: what ``ProtocolDescriptor.example`` returns and
    what ``tests/protocols/test_conformance.py`` runs every registered protocol on.

    ``params``: a ``[protocol]`` table of small public parameters.  ``parties``: party
    name -> role name.  ``inputs``: two or more private-input sets (party -> private
    input; a party absent takes ``None``) of the *same public sizes*, so that their
    transcripts may differ only in ciphertexts and declared revealed fields.
    ``expected(inputs)``: party -> the output that party must get on one input set,
    computed in the clear (from the descriptor's ``plaintext`` hook where it has one);
    floats within ``tolerance`` (absolute; from ``error_bound`` where declared), all else
    exactly, and a callable is a predicate on the output (one random by design: DP).
    ``declared``: the messages whose revealed fields the transcript harness masks, for a
    protocol whose descriptor has no ``messages`` hook.  ``bad_inputs``:
    malformed private inputs (party -> input, replacing that party's in the first set),
    each of which the run must refuse with a typed error.  ``config(directory)``: each
    party's entries of its ``[parties.NAME]`` table (its private input as a file it
    writes into ``directory``, or inline), which the roles' loaders read back: the run
    from a parties.toml.  ``key_bits``: the smallest test key the example fits.
    """

    params: Mapping[str, Any]
    parties: Mapping[str, str]
    inputs: tuple[Mapping[str, Any], ...]
    expected: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    tolerance: float = 0.0
    declared: tuple[Message, ...] = ()
    bad_inputs: tuple[Mapping[str, Any], ...] = ()
    config: Callable[[Path], Mapping[str, Mapping[str, Any]]] | None = None
    key_bits: int = 512

    def __post_init__(self):
        if len(self.inputs) < 2:
            raise InvalidInputError("an example needs two or more private-input sets")
        unknown = {p for inputs in self.inputs for p in inputs} - set(self.parties)
        if unknown:
            raise InvalidInputError(f"inputs for parties without a role: {sorted(unknown)}")

    def run_inputs(self, index: int, replace: Mapping[str, Any] | None = None) -> dict:
        """``run_protocol``'s ``parties`` for input set ``index`` (``replace``: some
        parties' inputs instead)."""
        inputs = {**self.inputs[index], **(replace or {})}
        return {p: (role, inputs.get(p)) for p, role in self.parties.items()}


def save_array(directory: Path, name: str, array) -> str:
    """An example's private array written to ``directory / name`` (``.npy``, what the
    config loaders read); returns ``name``, the value its config table gives."""
    import numpy as np

    np.save(Path(directory) / name, np.asarray(array))
    return name


def randomizers_by_key(
    need: Mapping[str, int | Mapping[str, int]], holders: Iterable[str]
) -> dict[str, dict[str, int]]:
    """A randomizer plan (``ProtocolDescriptor.randomizers``) as party -> {key party:
    count}: a bare count is under the one key pair of the run, that of the one party in
    ``holders`` (the parties whose role holds a key pair); with several it names no key
    (InvalidInputError).  Counts are integers >= 0."""
    holders = list(holders)
    out: dict[str, dict[str, int]] = {}
    for party, counts in need.items():
        if not isinstance(counts, Mapping):
            if len(holders) != 1:
                raise InvalidInputError(
                    f"the plan gives {party!r} one count but the run has {len(holders)} key "
                    f"pairs ({', '.join(holders) or 'none'}): say under which key"
                )
            counts = {holders[0]: counts}
        for key, count in counts.items():
            if isinstance(count, bool) or not isinstance(count, Integral) or count < 0:
                raise InvalidInputError(f"{party!r} plans {count!r} randomizers under {key!r}")
        out[party] = {key: int(count) for key, count in counts.items()}
    return out


def _default_params(section: Mapping) -> Mapping:
    return dict(section)


#: descriptor field -> the function name :meth:`ProtocolDescriptor.declare` takes it from
HOOKS = {
    "randomizers": "randomizers_needed",
    "error_bound": "error_bound",
    "phases": "phases",
    "example": "example",
}


def assign_by_field(**fields: str) -> Callable[[Any, str, str], str]:
    """A ``role_for``: a party plays the first role (keyword) whose field of the public
    parameters (value) names it, or lists it among a role many parties play."""

    def role_for(params, party: str, kind: str) -> str:
        for role, name in fields.items():
            named = getattr(params, name, None)
            if party == named or (isinstance(named, list | tuple) and party in named):
                return role
        choices = ", ".join(fields.values())
        raise ConfigError(f"party {party!r} is none of {choices} in [protocol]")

    return role_for


@dataclass(frozen=True)
class ProtocolDescriptor:
    """Everything the runtime needs to run a protocol, and nothing private.

    ``params(section)`` builds the public parameters from the ``[protocol]``
    table of a parties.toml (all keys optional where defaults exist);
    ``roles`` lists the roles; ``role_for(params, party_name, kind)`` assigns
    a party its role (default: the role named like the party, else like its
    kind); ``messages(params, key_bits)`` returns the declared messages (for
    the docs and the transcript harness).
    """

    name: str
    summary: str
    roles: tuple[Role, ...]
    params: Callable[[Mapping], Any] = _default_params
    role_for: Callable[[Any, str, str], str] | None = None
    #: ``messages(params, key_bits)``: the declared messages of a run under a key of
    #: ``key_bits`` (for the docs and the transcript harness; None: not declared)
    messages: Callable[[Any, int], Iterable[Message]] | None = None
    module: str = field(default="", compare=False)
    #: ``randomizers(params, key_bits, inputs)``: the fresh randomizers each party draws
    #: in a run on ``inputs`` (party -> private input; in two-party protocols the parties
    #: are named like their roles), from their public sizes only -- what an offline phase
    #: precomputes once the keys are known (None: not planned).  Party -> count, all under
    #: the run's one key pair; or, where several key pairs exist, party -> {key party:
    #: count}, a key named by the party that holds (or makes) it (:func:`randomizers_by_key`)
    randomizers: (
        Callable[[Any, int, Mapping[str, Any]], Mapping[str, int | Mapping[str, int]]] | None
    ) = None
    #: ``error_bound(params, key_bits, inputs)``: nats, how far a score the run reveals
    #: may lie from the plaintext one on ``inputs`` (None: the protocol states none)
    error_bound: Callable[[Any, int, Mapping[str, Any]], float] | None = None
    #: ``plaintext(params, inputs)``: what the run outputs, computed in the clear from
    #: ``inputs`` (role -> private input): the reference a secure run is checked against
    #: (None: not declared)
    plaintext: Callable[[Any, Mapping[str, Any]], Any] | None = None
    #: ``phases(params, role)``: the role's ``ctx.phase`` names in the order a run enters
    #: them (progress lines count them; None: not declared)
    phases: Callable[[Any, str], tuple[str, ...]] | None = None
    #: ``example(key_bits, seed)``: an :class:`Example`, small public parameters and two or
    #: more private-input sets of the same public sizes (the conformance suite runs every
    #: registered protocol on it; None: not declared, which that suite reports)
    example: Callable[[int, int], Example] | None = None

    @classmethod
    def declare(cls, module: str, summary: str, **fields) -> ProtocolDescriptor:
        """The descriptor of protocol module ``module`` (its ``__name__``, called at its end):
        named by its ``NAME``, with every hook it defines under the hook's conventional name
        (:data:`HOOKS`: ``randomizers_needed``, ``error_bound``, ``phases``, ``example``)
        unless ``fields`` give that hook; ``fields`` set the rest (``params``, ``roles``...).
        So a protocol states each hook once, where it defines it."""
        namespace = vars(sys.modules[module])
        hooks = {f: namespace[n] for f, n in HOOKS.items() if callable(namespace.get(n))}
        return cls(name=namespace["NAME"], summary=summary, module=module, **{**hooks, **fields})

    def __post_init__(self):
        names = [r.name for r in self.roles]
        if not self.roles or len(set(names)) != len(names):
            raise InvalidInputError(f"protocol {self.name!r} needs distinct role names")

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.name == name:
                return r
        raise ConfigError(
            f"protocol {self.name!r} has no role {name!r} (roles: {', '.join(self.role_names)})"
        )

    @property
    def role_names(self) -> list[str]:
        return [r.name for r in self.roles]

    def assign(self, params, party: str, kind: str, explicit: str | None = None) -> Role:
        """The role party ``party`` (of ``kind``) plays; ``explicit`` overrides."""
        if explicit is not None:
            return self.role(explicit)
        if self.role_for is not None:
            return self.role(self.role_for(params, party, kind))
        for candidate in (party, kind):
            if candidate in self.role_names:
                return self.role(candidate)
        raise ConfigError(
            f"party {party!r} (kind {kind!r}) has no role in {self.name!r}: set "
            f"role = one of {', '.join(self.role_names)} in its [parties.{party}] table"
        )


def _load_reference(ref: str) -> ProtocolDescriptor:
    module_name, _, attr = ref.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"cannot import protocol module {module_name!r}: {e}") from e
    for part in (attr or "PROTOCOL").split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConfigError(f"{module_name!r} has no protocol descriptor {attr or 'PROTOCOL'!r}")
    return obj


def _check(obj, where: str) -> ProtocolDescriptor:
    if not isinstance(obj, ProtocolDescriptor):
        raise ConfigError(f"{where} is not a ProtocolDescriptor (got {type(obj).__name__})")
    return obj


def available() -> dict[str, str]:
    """Registered protocols: name -> the entry point's ``module:object`` reference."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def find(protocol: str | ProtocolDescriptor) -> ProtocolDescriptor:
    """A descriptor by registered name or by ``"module:object"`` reference."""
    if isinstance(protocol, ProtocolDescriptor):
        return protocol
    if not isinstance(protocol, str) or not protocol:
        raise ConfigError(f"a protocol is a name or a 'module:object' reference, got {protocol!r}")
    if ":" in protocol:
        return _check(_load_reference(protocol), protocol)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == protocol:
            try:
                return _check(ep.load(), f"entry point {ep.name!r}")
            except ImportError as e:
                raise ConfigError(f"protocol {protocol!r} failed to import: {e}") from e
    known = ", ".join(sorted(available())) or "none registered"
    raise ConfigError(f"unknown protocol {protocol!r} (known: {known}; or use 'module:object')")
