"""Build a party and its role from a ``parties.toml`` (used by ``smc-hmm party``).

``[parties.NAME]`` tables name the party's ``kind`` (alice, bob, trent,
data_owner; default: the name), its address, its TLS files and its private
input: ``input = "a.json"`` (a .json list, .npy or text vector) or an inline
``vector = [...]`` for demonstrations.  ``[protocol]`` holds the protocol's
public parameters, validated by the protocol's ``Params.from_config``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from parties.alice import Alice
from parties.base import Party, load_vector
from parties.bob import Bob
from parties.data_owner import DataOwner
from parties.trent import Trent
from protocols import forward, secure_sum
from smc_hmm.errors import ConfigError, SmcHmmError
from smc_hmm.hmm.io import load_models as _load_models
from smc_hmm.runtime import RunConfig

#: ``kind`` in parties.toml -> party class
KINDS: dict[str, type[Party]] = {
    "alice": Alice,
    "bob": Bob,
    "trent": Trent,
    "data_owner": DataOwner,
}
#: protocol name -> its public-parameter class (with ``from_config``)
PARAMS = {secure_sum.NAME: secure_sum.Params, forward.NAME: forward.ForwardParams}


def protocol_params(config: RunConfig):
    """The protocol's public parameters from ``[protocol]``."""
    try:
        params_cls = PARAMS[config.protocol]
    except KeyError:
        raise ConfigError(
            f"unknown protocol {config.protocol!r} (known: {', '.join(sorted(PARAMS))})"
        ) from None
    return params_cls.from_config(config.params)


def party_from_config(name: str, config: RunConfig) -> Party:
    """The party object ``name`` of ``config`` with its private input loaded."""
    pc = config.party(name)
    try:
        cls = KINDS[pc.kind]
    except KeyError:
        raise ConfigError(
            f"parties.{name}.kind = {pc.kind!r} is not one of {', '.join(sorted(KINDS))}"
        ) from None
    options = dict(pc.options)
    inline = options.pop("vector", None)
    extra = {}
    if "observations" in options and cls is Alice:
        extra["observations"] = load_observations(_relative(config, options.pop("observations")))
    if "models" in options and cls is Bob:
        extra["models"] = load_models(_relative(config, options.pop("models")))[0]
    if options:
        raise ConfigError(f"unknown keys in [parties.{name}]: {sorted(options)}")
    if pc.input is not None and inline is not None:
        raise ConfigError(f"parties.{name}: give either input or vector, not both")
    vector = load_vector(pc.input) if pc.input is not None else inline
    if vector is not None and (not isinstance(vector, list | tuple) and pc.input is None):
        raise ConfigError(f"parties.{name}.vector must be a list of numbers")
    kwargs = {"endpoint": pc.address, **extra}
    if cls is Alice:
        kwargs.update(key_bits=config.key_bits, insecure=config.insecure)
    return cls(name, vector, **kwargs)


def role_from_config(name: str, config: RunConfig):
    """``(role(ctx), keypair or None, party)`` for ``smc_hmm.runtime.run_party``."""
    params = protocol_params(config)
    party = party_from_config(name, config)
    if isinstance(party, Alice):
        party.ensure_keypair()
    return party.role(config.protocol, params), party.keypair, party


def _relative(config: RunConfig, value) -> Path:
    if not isinstance(value, str):
        raise ConfigError(f"file paths must be strings, got {value!r}")
    base = config.path.parent if config.path is not None else Path.cwd()
    return base / value


def load_observations(path: Path) -> np.ndarray:
    """An observation sequence: .npy (symbols (T,) or frames (T, d)) or a .json list."""
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if path.suffix == ".json":
            return np.asarray(json.loads(path.read_text()))
    except OSError as e:
        raise ConfigError(f"cannot read observations {path}: {e.strerror or e}") from e
    except ValueError as e:
        raise ConfigError(f"observations {path} are not a numeric array: {e}") from e
    raise ConfigError(f"observations must be a .npy or .json file, got {path.name}")


def load_models(path: Path):
    """Bob's HMMs from a model file (:mod:`smc_hmm.hmm.io`), errors as ConfigError."""
    try:
        return _load_models(path)
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
