"""The Party base: a name, a kind, keys, an executor and private inputs.

A party object owns its private inputs (by name: ``vector``, ``observations``,
``models``, ...; ``inputs=`` takes any protocol role's input by the name its descriptor
gives it, so every protocol runs with party objects) and, when a role needs it, its
Paillier key pair; it hands them only to its own protocol roles.  Which role a party
plays, whether that role holds the key pair and which input it takes come from the
protocol's descriptor (:mod:`smc_hmm.protocol`), not from the party class.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from smc_hmm.compute import Compute
from smc_hmm.crypto import DEFAULT_KEY_BITS, PrivateKey, PublicKey, Rng, generate_keypair
from smc_hmm.errors import ConfigError, InsecureKeyWarning, InvalidInputError
from smc_hmm.protocol import ProtocolDescriptor

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})")


class Party:
    """Base class: identity, keys, executor and private inputs (never shown in repr)."""

    kind: ClassVar[str] = "party"

    def __init__(
        self,
        name: str,
        *,
        inputs: dict[str, Any] | None = None,
        endpoint: tuple[str, int] | None = None,
        keypair: tuple[PublicKey, PrivateKey] | None = None,
        compute: Compute | None = None,
        rng: Rng | None = None,
        key_bits: int = DEFAULT_KEY_BITS,
        insecure: bool = False,
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
        self.key_bits = key_bits
        self.insecure = insecure
        self._inputs = {k: v for k, v in (inputs or {}).items() if v is not None}

    @property
    def public_key(self) -> PublicKey | None:
        return self.keypair[0] if self.keypair else None

    def ensure_keypair(self) -> tuple[PublicKey, PrivateKey]:
        """Generate the key pair on first use (``insecure`` allows < 2048 bits, with a warning)."""
        if self.keypair is None:
            with warnings.catch_warnings():
                if self.insecure:
                    warnings.simplefilter("ignore", InsecureKeyWarning)
                self.keypair = generate_keypair(self.key_bits, insecure=self.insecure, rng=self.rng)
        return self.keypair

    def play(
        self, descriptor: ProtocolDescriptor, params, role: str | None = None
    ) -> Callable[[Any], Any]:
        """This party's role in ``descriptor`` as a function of the party context only.

        Generates the key pair first if the role holds it.
        """
        chosen = descriptor.assign(params, self.name, self.kind, role)
        private = None
        if chosen.input is not None:
            private = self._inputs.get(chosen.input)
            if private is None and not chosen.optional:
                raise ConfigError(
                    f"{type(self).__name__} {self.name!r} plays {chosen.name!r} in "
                    f"{descriptor.name!r}, which needs its {chosen.input!r}"
                )
        if chosen.holds_key:
            self.ensure_keypair()

        def run(ctx):
            return chosen.run(ctx, private, params)

        run.__name__ = f"{self.name}_{descriptor.name}"
        return run

    def __repr__(self) -> str:  # never shows private state
        where = f" at {self.endpoint[0]}:{self.endpoint[1]}" if self.endpoint else ""
        return f"<{type(self).__name__} {self.name!r}{where}>"


def as_vector(values) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=np.float64)


def merge_inputs(named: dict[str, Any], inputs: dict[str, Any] | None) -> dict[str, Any]:
    """A party's private inputs: its class's named shortcuts (``vector``, ``observations``,
    ``models``) and ``inputs``, any protocol role's input by the name its descriptor gives
    it (``features`` for keyword, ``utterance`` for speaker, ...).  A name given twice is
    an error."""
    inputs = dict(inputs or {})
    twice = sorted(k for k, v in named.items() if v is not None and k in inputs)
    if twice:
        raise InvalidInputError(f"input {twice[0]!r} given both by name and in inputs=")
    return {**{k: v for k, v in named.items() if v is not None}, **inputs}
