"""What both modes of the eigenvector protocol share.

The public parameters every mode has (the parties, the sizes of the owners' matrices, the
convergence test, ``reveal_to_trent``) and their checks, the checks of a single value
that each mode's own parameters reuse, the owner's check of its private matrix, and
Trent's gathering of the shares when they are revealed to him.  Each mode adds its own
parameters in a subclass of :class:`SharedParams`: :class:`~protocols.eigenvector.private.
PrivateParams` and :class:`~protocols.eigenvector.thesis.ThesisParams`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from smc_hmm import params as typed
from smc_hmm.errors import ConfigError, InvalidInputError, ProtocolError
from smc_hmm.messages import Message
from smc_hmm.protocol import params_from_config


def finite(name: str, v, *, positive: bool = True) -> float:
    """``v`` as a float, refused unless finite (and > 0 when ``positive``)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise InvalidInputError(f"{name} must be a finite number, got {v!r}")
    if positive and not v > 0:
        raise InvalidInputError(f"{name} must be > 0, got {v!r}")
    return float(v)


def pair(name: str, v) -> tuple:
    """(low, high) from a sequence of exactly two values."""
    if isinstance(v, str) or not isinstance(v, Sequence) or len(v) != 2:
        raise InvalidInputError(f"{name} must be a pair [low, high], got {v!r}")
    return v[0], v[1]


@dataclass(frozen=True)
class SharedParams:
    """Public parameters of every mode, agreed on before the run."""

    #: the mode a subclass implements (the ``mode`` key of a ``[protocol]`` table)
    mode: ClassVar[str]

    owners: tuple[str, ...] = ("p1", "p2")
    cols: tuple[int, ...] = (1, 1)  # n_i: columns of each owner's A_i
    rows: int = typed.whole(4, 2, None)  # k: rows shared by every A_i
    max_abs: float = typed.number(1.0, 0, math.inf, low_open=True)  # bound on |A_i entries|
    arbitrator: str = "trent"
    key_authority: str = "authority"
    # convergence
    tol: float = typed.number(1e-7, 0, math.inf, low_open=True)
    max_rounds: int = typed.whole(200, 2, None)
    reveal_to_trent: bool = typed.flag(False)

    def __post_init__(self) -> None:
        typed.check_fields(self)  # every declared range, the subclass's too
        others = (self.key_authority, self.arbitrator)
        object.__setattr__(self, "owners", typed.party_names("owners", self.owners, *others))
        if isinstance(self.cols, int | np.integer) and not isinstance(self.cols, bool):
            object.__setattr__(self, "cols", (int(self.cols),) * len(self.owners))
        if isinstance(self.cols, str) or not isinstance(self.cols, Sequence):
            raise InvalidInputError("cols must be a sequence of column counts, one per owner")
        object.__setattr__(
            self, "cols", tuple(typed.integer("every cols entry", c, 1) for c in self.cols)
        )
        if len(self.owners) < 2:
            raise InvalidInputError("the eigenvector protocol needs at least two owners")
        if len(self.cols) != len(self.owners):
            raise InvalidInputError(
                f"cols has {len(self.cols)} entries for {len(self.owners)} owners"
            )

    @property
    def parties(self) -> tuple[str, ...]:
        return (self.key_authority, self.arbitrator, *self.owners)

    @classmethod
    def from_config(cls, section: Mapping):
        """From the ``[protocol]`` table of a parties.toml file (its ``mode``, if given,
        must be this class's)."""
        mode = section.get("mode", cls.mode)
        if mode != cls.mode:
            raise ConfigError(f"{cls.__name__} is the {cls.mode!r} mode's, not {mode!r}'s")
        values = {k: v for k, v in section.items() if k != "mode"}
        return params_from_config(cls, values, f"eigenvector (mode {cls.mode!r})")


def check_input(a, params: SharedParams, index: int) -> np.ndarray:
    """Owner ``index``'s private matrix as float64 of the agreed shape and bound."""
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"the owner's data is not a numeric matrix: {e}") from e
    shape = (params.rows, params.cols[index])
    if arr.ndim != 2 or arr.size == 0:
        raise InvalidInputError(f"the owner's data must be a non-empty {shape} matrix")
    if arr.shape != shape:
        raise InvalidInputError(
            f"{params.owners[index]}'s data has shape {arr.shape}, the public sizes say {shape} "
            "(every owner must hold the same number of rows)"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{params.owners[index]}'s data contains NaN or infinity")
    if np.any(np.abs(arr) > params.max_abs):
        raise InvalidInputError(f"data exceeds the agreed bound max_abs={params.max_abs}")
    return arr


def gather_shares(ctx, params: SharedParams, message: Message) -> np.ndarray:
    """Trent, with ``reveal_to_trent``: every owner's share, checked, concatenated."""
    shares = [np.asarray(ctx.recv(o, message), dtype=np.float64) for o in params.owners]
    for o, s, n_i in zip(params.owners, shares, params.cols):
        if s.shape != (n_i,) or not np.all(np.isfinite(s)):
            raise ProtocolError(f"{o} sent a share of shape {s.shape}, expected ({n_i},)")
    return np.concatenate(shares)
