"""The Party base: a name, keys, an endpoint, a ledger and an executor, plus private state.

A party object owns its private inputs and (for the key holder) its private
key; it never hands them to anything but its own protocol roles.  A role is
obtained with :meth:`Party.role` and run by :func:`smc_hmm.runtime.simulate`
(in-process) or :func:`smc_hmm.runtime.run_party` (its own OS process).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger
from smc_hmm.crypto import PrivateKey, PublicKey, Rng
from smc_hmm.errors import ConfigError, InvalidInputError

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})")


class Party:
    """Base class: identity, keys, endpoint, ledger, executor.  Subclasses hold private state."""

    kind: ClassVar[str] = "party"

    def __init__(
        self,
        name: str,
        *,
        endpoint: tuple[str, int] | None = None,
        keypair: tuple[PublicKey, PrivateKey] | None = None,
        compute: Compute | None = None,
        rng: Rng | None = None,
    ):
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidInputError(f"party names are non-empty identifiers, got {name!r}")
        if keypair is not None and not (
            isinstance(keypair, tuple)
            and len(keypair) == 2
            and isinstance(keypair[0], PublicKey)
            and isinstance(keypair[1], PrivateKey)
        ):
            raise InvalidInputError("keypair must be (PublicKey, PrivateKey)")
        self.name = name
        self.endpoint = endpoint
        self.keypair = keypair
        self.compute = compute if compute is not None else Compute.inline()
        self.rng = rng
        #: the cost ledger of this party's latest run (set when a role starts)
        self.ledger: CostLedger | None = None

    @property
    def public_key(self) -> PublicKey | None:
        return self.keypair[0] if self.keypair else None

    def protocols(self) -> dict[str, Callable[..., Any]]:
        """Protocol name -> method ``(ctx, params)`` running this party's role."""
        return {}

    def role(self, protocol: str, params) -> Callable[[Any], Any]:
        """This party's role in ``protocol`` as a function of the party context only."""
        methods = self.protocols()
        if protocol not in methods:
            raise ConfigError(
                f"{type(self).__name__} {self.name!r} has no role in protocol {protocol!r} "
                f"(knows: {', '.join(sorted(methods)) or 'none'})"
            )
        method = methods[protocol]

        def run(ctx):
            self.ledger = ctx.ledger
            return method(ctx, params)

        run.__name__ = f"{self.name}_{protocol}"
        return run

    def __repr__(self) -> str:  # never shows private state
        where = f" at {self.endpoint[0]}:{self.endpoint[1]}" if self.endpoint else ""
        return f"<{type(self).__name__} {self.name!r}{where}>"


def load_vector(path: str | Path) -> np.ndarray:
    """A private input vector from .json (a list), .npy, or text (.csv/.txt, one row)."""
    path = Path(path)
    try:
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            arr = np.asarray(data, dtype=np.float64)
        elif path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False).astype(np.float64)
        else:
            arr = np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None, ndmin=1)
    except OSError as e:
        raise ConfigError(f"cannot read input {path}: {e.strerror or e}") from e
    except (ValueError, TypeError) as e:
        raise ConfigError(f"input {path} is not a numeric vector: {e}") from e
    if arr.ndim != 1:
        raise ConfigError(f"input {path} must be a vector, got shape {arr.shape}")
    return arr
