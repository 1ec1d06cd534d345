"""Typed public parameters: dataclass fields that state their own range
(``docs/adding-a-protocol.md``, "Public parameters"), and the one check of a private
vector against the public sizes they agree (:func:`bounded_vector`).  :func:`integer` is
the same range check for an int that is not a field (a loop's count, a derived size).

A protocol's parameter class declares each public number once, with its range::

    @dataclass(frozen=True)
    class Params:
        stride: int = whole(2, 2, 64)
        blind_nats: float = number(20.0, 0, 200, low_open=True)
        mode: str = one_of("exact", MODES)
        reveal: bool = flag(False)

        def __post_init__(self):
            check_fields(self)  # every declared range, one message format
            ...                 # then the rules that tie fields together

The ranges shared by several protocols (the statistical parameter :func:`sigma`, the
blinds' width :func:`blind_nats`) are declared here once, so every protocol accepts the
same values for the same name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import field, fields
from numbers import Integral

import numpy as np

from smc_hmm.errors import InvalidInputError

__all__ = [
    "blind_nats",
    "bounded_vector",
    "check_fields",
    "flag",
    "integer",
    "number",
    "one_of",
    "party_names",
    "sigma",
    "whole",
]

_CHECK = "smc_hmm.check"


def _declared(default, check):
    return field(default=default, metadata={_CHECK: check})


def integer(name: str, v, lo: int, hi: int | None = None, error=InvalidInputError) -> int:
    """``v`` as an int, refused (``error``, a subclass of InvalidInputError) unless it is
    an int in [lo, hi] (a bool is not one; ``hi`` None: no upper bound)."""
    if (
        isinstance(v, bool)
        or not isinstance(v, Integral)
        or not lo <= v <= (v if hi is None else hi)
    ):
        top = "inf" if hi is None else hi
        raise error(f"{name} must be an int in [{lo}, {top}], got {v!r}")
    return int(v)


def whole(default, lo: int, hi: int | None, *, optional: bool = False):
    """An int in [lo, hi] (:func:`integer`); ``optional``: None is allowed too."""

    def check(name, v):
        if not (v is None and optional):
            integer(name, v, lo, hi)

    return _declared(default, check)


def number(default, lo: float, hi: float, *, low_open: bool = False, optional: bool = False):
    """A finite real number in [lo, hi], or (lo, hi] with ``low_open``; ``optional``: None
    is allowed too."""
    left = "(" if low_open else "["

    def check(name, v):
        if v is None and optional:
            return
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or not (lo < v if low_open else lo <= v) or v > hi:
            raise InvalidInputError(f"{name} must be a number in {left}{lo:g}, {hi:g}], got {v!r}")

    return _declared(default, check)


def one_of(default, choices: Sequence[str]):
    """One of the public ``choices`` (a default of None is resolved by the class before
    :func:`check_fields` runs, or kept if None is itself a choice)."""

    def check(name, v):
        if v not in choices:
            raise InvalidInputError(f"{name} must be one of {tuple(choices)}, got {v!r}")

    return _declared(default, check)


def flag(default: bool):
    """True or false (not 0 or 1)."""

    def check(name, v):
        if not isinstance(v, bool):
            raise InvalidInputError(f"{name} must be true or false, got {v!r}")

    return _declared(default, check)


def check_fields(obj, error=InvalidInputError) -> None:
    """Check every field of the dataclass instance ``obj`` declared with a range here
    (a refusal raises ``error``, a subclass of InvalidInputError)."""
    for f in fields(obj):
        check = f.metadata.get(_CHECK)
        if check is None:
            continue
        try:
            check(f.name, getattr(obj, f.name))
        except InvalidInputError as e:
            if type(e) is error:
                raise
            raise error(str(e)) from None


def sigma(default: int = 40):
    """sigma, the statistical parameter of every mask and noise (2^-sigma hiding)."""
    return whole(default, 40, 256)


def blind_nats(default: float = 20.0):
    """The width of the smooth blinds, nats."""
    return number(default, 0, 200, low_open=True)


def party_names(name: str, group, *others, error=InvalidInputError) -> tuple[str, ...]:
    """The parameter ``name``, a sequence of party names, as a tuple; its names and
    ``others`` must be non-empty strings, all distinct (else ``error``)."""
    if isinstance(group, str) or not isinstance(group, Sequence):
        raise error(f"{name} must be a sequence of party names")
    names = [*group, *others]
    if not all(isinstance(n, str) and n for n in names):
        raise error(f"party names must be non-empty strings, got {names}")
    if len(set(names)) != len(names):
        raise error(f"party names must be distinct, got {names}")
    return tuple(group)


def bounded_vector(values, length: int, bound: float, what: str, error=InvalidInputError):
    """A party's private vector as float64, checked against the agreed public sizes: shape
    (``length``,), finite, every |v| <= ``bound``; else ``error`` naming ``what``."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise error(f"{what} must be a vector of numbers: {e}") from e
    if arr.shape != (length,):
        raise error(f"{what} must have shape ({length},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise error(f"{what} contains NaN or infinity")
    if np.any(np.abs(arr) > bound):
        raise error(f"{what} exceeds the agreed bound max_abs = {bound}")
    return arr
