"""Declared protocol messages: the public-metadata rule made structural.

Every message a protocol sends is declared once, as a :class:`Message`: its
tag and the *kind* of each field.  Only two kinds of field may depend on a
party's private input:

* :class:`Ciphertexts` -- a CipherArray.  On the wire it carries only the key
  fingerprint, its shape and the ciphertexts.  Its fixed-point ``scale`` and
  its precision ``bound`` come from the declaration, which is a function of
  public parameters only: the sender checks, before sending, that its true
  local bound is within the declared one (:class:`~smc_hmm.errors.PrecisionError`
  otherwise, never a silent wrap), and the receiver attaches the declared
  scale and bound.  A bound computed from private values never leaves a party.
* :class:`OpaqueCiphertexts` -- ciphertexts of another scheme (DGK) carried
  as fixed-width bytes, of a declared public count and width.
* :class:`Revealed` -- a plaintext value that the protocol's module docstring
  declares as revealed to the receiver (e.g. a winning index).

Every other field is :class:`Public`: its value must follow from public
parameters alone (sizes, scales, a kind of model).  The transcript test
(``tests/transcript_harness.py``) checks exactly this: two runs with different
private inputs give identical frames once ciphertexts and revealed fields are
masked.  See ``docs/architecture.md`` ("The metadata rule").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from smc_hmm.crypto import CipherArray, PublicKey
from smc_hmm.crypto.fixedpoint import check_scale
from smc_hmm.errors import (
    InvalidInputError,
    PrecisionError,
    ProtocolError,
    ScaleMismatchError,
    ShapeMismatchError,
)

__all__ = [
    "Ciphertexts",
    "Key",
    "MaskedCiphertexts",
    "Message",
    "OpaqueCiphertexts",
    "Public",
    "Revealed",
]


def _shape_matches(shape: tuple, pattern: tuple | None) -> bool:
    if pattern is None:
        return True
    return len(shape) == len(pattern) and all(p is None or p == s for s, p in zip(shape, pattern))


@dataclass(frozen=True)
class Ciphertexts:
    """A CipherArray field: its fixed-point ``scale``, a public ``bound`` on
    |plaintext integer| and an optional ``shape`` (``None`` entries match any size).

    ``fresh``: the values are computed from the receiver's own ciphertexts, so the sender
    re-randomises them on the way out (thesis 003, 3.1: else the receiver could match
    what it gets against what it sent); the declaration, not each send, says so.  A
    sender that binds something else to the exact ciphertexts it sends (the threshold
    partial decryptions of ``protocols.eigenvector``) re-randomises them itself, first."""

    scale: int
    bound: int
    shape: tuple[int | None, ...] | None = None
    fresh: bool = False

    def __post_init__(self):
        check_scale(self.scale)
        if not isinstance(self.bound, int) or self.bound < 0:
            raise InvalidInputError(f"a declared bound must be an int >= 0, got {self.bound!r}")
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(self.shape))

    def outgoing(self, value, tag: str) -> CipherArray:
        self._sent_array(value, tag)
        value.public_key.check_plain(self.bound, f"{tag}'s declared bound")
        if value.bound > self.bound:
            raise PrecisionError(
                f"{tag}: values may need {value.bound.bit_length()} bits but the message "
                f"declares {self.bound.bit_length()}: the public bound is too small"
            )
        return value.rerandomize() if self.fresh else value

    def incoming(self, value, tag: str) -> CipherArray:
        self._received_array(value, tag)
        if self.bound > value.public_key.max_plain:
            raise ProtocolError(f"{tag}: the declared bound exceeds the key's plaintext space")
        return CipherArray(value.public_key, value.data, self.scale, self.bound)

    def _sent_array(self, value, tag: str) -> None:
        """A CipherArray at the declared scale and of the declared shape (a sender's bug)."""
        if not isinstance(value, CipherArray):
            raise InvalidInputError(f"{tag}: expected a CipherArray, got {type(value).__name__}")
        if value.scale != self.scale:
            raise ScaleMismatchError(
                f"{tag}: ciphertexts at scale {value.scale}, declared {self.scale}"
            )
        if not _shape_matches(value.shape, self.shape):
            raise ShapeMismatchError(f"{tag}: shape {value.shape}, declared {self.shape}")

    def _received_array(self, value, tag: str) -> None:
        """Ciphertexts of the declared shape (else the peer broke the protocol)."""
        if not isinstance(value, CipherArray):
            raise ProtocolError(f"{tag}: expected ciphertexts, got {type(value).__name__}")
        if not _shape_matches(value.shape, self.shape):
            raise ProtocolError(f"{tag}: ciphertexts of shape {value.shape}, declared {self.shape}")


@dataclass(frozen=True)
class MaskedCiphertexts(Ciphertexts):
    """Ciphertexts (scale 0) whose plaintexts the sender masked uniformly over the whole
    plaintext space, so that they have no bound to declare: whatever a deviating peer
    encrypted before, what its receiver decrypts is uniform on Z_n to within a
    statistical distance the sender states (``protocols.stages.bound``).  The receiver
    reads residues (``decrypt_ints`` mod n)."""

    scale: int = 0
    bound: int = 0
    shape: tuple[int | None, ...] | None = None
    fresh: bool = True  # masked from the receiver's own ciphertexts: always re-randomised

    def outgoing(self, value, tag: str) -> CipherArray:
        self._sent_array(value, tag)
        return value.rerandomize() if self.fresh else value

    def incoming(self, value, tag: str) -> CipherArray:
        self._received_array(value, tag)
        return CipherArray(value.public_key, value.data, 0, value.public_key.max_plain)


@dataclass(frozen=True)
class Key:
    """A Paillier public key."""

    def outgoing(self, value, tag: str):
        if not isinstance(value, PublicKey):
            raise InvalidInputError(f"{tag}: expected a PublicKey, got {type(value).__name__}")
        return value

    def incoming(self, value, tag: str):
        if not isinstance(value, PublicKey):
            raise ProtocolError(f"{tag}: expected a public key, got {type(value).__name__}")
        return value


def _check_plain(value, types: tuple, tag: str, error) -> Any:
    if isinstance(value, CipherArray) or (types and not isinstance(value, types)):
        names = ", ".join(t.__name__ for t in types) or "plain data"
        raise error(f"{tag}: expected {names}, got {type(value).__name__}")
    return value


class _Plain:
    """The checks of a plaintext field: no ciphertext, and one of ``self.types`` if any."""

    types: tuple[type, ...]

    def outgoing(self, value, tag: str):
        return _check_plain(value, self.types, tag, InvalidInputError)

    def incoming(self, value, tag: str):
        return _check_plain(value, self.types, tag, ProtocolError)


@dataclass(frozen=True)
class Public(_Plain):
    """A plaintext field whose value follows from public parameters alone."""

    types: tuple[type, ...] = ()


@dataclass(frozen=True)
class Revealed(_Plain):
    """A plaintext field that depends on private input and is declared revealed
    to its receiver (``what`` says what it is; the module docstring says why)."""

    what: str
    types: tuple[type, ...] = ()


@dataclass(frozen=True)
class OpaqueCiphertexts:
    """``count`` ciphertexts of another scheme (e.g. DGK) as one bytes string of
    ``count * width`` bytes: private-dependent but semantically secure, like
    :class:`Ciphertexts`, and of a public size (``None``: not known yet)."""

    scheme: str
    count: int | None = None
    width: int | None = None

    def _check(self, value, tag: str, error):
        if not isinstance(value, bytes):
            raise error(
                f"{tag}: expected {self.scheme} ciphertexts as bytes, got {type(value).__name__}"
            )
        if (
            self.count is not None
            and self.width is not None
            and len(value) != self.count * self.width
        ):
            raise error(
                f"{tag}: {len(value)} bytes, declared {self.count} {self.scheme} "
                f"ciphertexts of {self.width} bytes"
            )
        return value

    def outgoing(self, value, tag: str):
        return self._check(value, tag, InvalidInputError)

    def incoming(self, value, tag: str):
        return self._check(value, tag, ProtocolError)


Field = Ciphertexts | OpaqueCiphertexts | Key | Public | Revealed


@dataclass(frozen=True)
class Message:
    """A declared message: a ``tag`` and one field or a tuple of fields (sent as a list)."""

    tag: str
    body: Field | tuple[Field, ...]
    doc: str = field(default="", compare=False)

    def __post_init__(self):
        if not isinstance(self.tag, str) or not self.tag:
            raise InvalidInputError("a message tag must be a non-empty str")

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.body if isinstance(self.body, tuple) else (self.body,)

    def _split(self, payload, error) -> list:
        if not isinstance(self.body, tuple):
            return [payload]
        if (
            not isinstance(payload, Sequence)
            or isinstance(payload, str | bytes)
            or len(payload) != len(self.body)
        ):
            raise error(f"{self.tag}: expected a list of {len(self.body)} fields")
        return list(payload)

    def outgoing(self, payload):
        """Check a payload against the declaration before it is sent."""
        values = self._split(payload, InvalidInputError)
        out = [f.outgoing(v, self.tag) for f, v in zip(self.fields, values)]
        return out if isinstance(self.body, tuple) else out[0]

    def incoming(self, payload):
        """Validate a received payload and attach declared scales and bounds."""
        values = self._split(payload, ProtocolError)
        out = [f.incoming(v, self.tag) for f, v in zip(self.fields, values)]
        return out if isinstance(self.body, tuple) else out[0]

    def __repr__(self) -> str:
        return f"Message({self.tag!r})"
