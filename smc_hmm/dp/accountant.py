"""A pure epsilon-DP privacy accountant with sequential and parallel composition.

Paper 000, section 2.1: releases on the same data compose *sequentially* (their epsilons
add up); releases on *disjoint* parts of the data compose in *parallel* (the cost is the
largest epsilon among the parts; McSherry 2009). :class:`PrivacyAccountant` holds a total
budget and refuses, with :class:`~smc_hmm.errors.PrivacyBudgetError`, any spend that
would exceed it. The check happens before the release: mechanisms call
:meth:`PrivacyAccountant.charge` around their sampling, so a refused release draws no
noise and spends nothing, and a release whose sampler fails is rolled back.

Parallel composition::

    with accountant.parallel("per-user histograms") as group:
        for user, counts in partitions.items():
            mechanism.release(counts, accountant=group, label=user)

costs max over partitions of (the sum of the epsilons spent on that partition); a
partition is named by ``partition=`` (default: the label), and two releases on the same
partition compose sequentially within it. ``spend_parallel([e1, e2, ...])`` charges
max(e_i) for disjoint partitions at once. While a group is open, sequential spends on the
accountant itself are refused (close the group first).

Sums use :func:`math.fsum`; a spend is allowed when the new total is at most
``total * (1 + 1e-10)``, so a budget split evenly into n shares (eps/n, n times) is not
refused by floating-point rounding.

See ``docs/dp-layer.md`` ("Accountant").
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from smc_hmm.dp.params import check_epsilon
from smc_hmm.errors import PrivacyBudgetError, PrivacyError, PrivacyParameterError

RELATIVE_SLACK = 1e-10
"""Relative tolerance of the budget check (floating-point rounding of even splits)."""


class Charger(Protocol):
    """Anything a mechanism can charge a release to (an accountant or a parallel group)."""

    def charge(self, epsilon: float, label: str = "") -> AbstractContextManager[Any]: ...


@dataclass(frozen=True)
class Spend:
    """One entry of the accountant's history.

    Attributes:
        label: the caller's label for the release (or for the parallel group).
        epsilon: the budget it consumed (for a parallel group: the max over partitions).
        composition: ``"sequential"`` or ``"parallel"``.
        parts: for a parallel group, (partition, label, epsilon) of each release in it.
    """

    label: str
    epsilon: float
    composition: Literal["sequential", "parallel"]
    parts: tuple[tuple[str, str, float], ...] = ()


def _check_spend(epsilon: object) -> float:
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and epsilon == 0:
        return 0.0
    return check_epsilon(epsilon)


class PrivacyAccountant:
    """A total budget ``total_epsilon`` spent by sequential and parallel composition."""

    def __init__(self, total_epsilon: float) -> None:
        self.total = check_epsilon(total_epsilon, "total_epsilon")
        self._spends: list[Spend] = []
        self._lock = threading.RLock()
        self._group: ParallelGroup | None = None

    # --- reporting -----------------------------------------------------------------

    @property
    def spent(self) -> float:
        """Budget consumed so far (an open parallel group counts its current max)."""
        with self._lock:
            open_group = self._group.cost if self._group is not None else 0.0
            return math.fsum([s.epsilon for s in self._spends] + [open_group])

    @property
    def remaining(self) -> float:
        """Budget left, never negative."""
        return max(0.0, self.total - self.spent)

    @property
    def history(self) -> tuple[Spend, ...]:
        """Every completed spend, in order."""
        with self._lock:
            return tuple(self._spends)

    def can_spend(self, epsilon: float) -> bool:
        """True if a sequential spend of ``epsilon`` would be accepted now."""
        value = _check_spend(epsilon)
        with self._lock:
            return self._group is None and self._fits(self.spent + value)

    def _fits(self, new_total: float) -> bool:
        return new_total <= self.total * (1.0 + RELATIVE_SLACK)

    def _refuse(self, epsilon: float, label: str, base: float) -> None:
        raise PrivacyBudgetError(
            f"release {label!r} needs epsilon = {epsilon:.6g} but only "
            f"{max(0.0, self.total - base):.6g} of the budget {self.total:.6g} remains"
        )

    # --- sequential composition ------------------------------------------------------

    def spend(self, epsilon: float, label: str = "") -> Spend:
        """Record a sequential spend, or raise PrivacyBudgetError (nothing is spent)."""
        with self.charge(epsilon, label) as entry:
            pass
        return entry

    @contextmanager
    def charge(self, epsilon: float, label: str = "") -> Iterator[Spend]:
        """Reserve ``epsilon`` for a release made inside the block.

        Refuses before the block runs if the budget would be exceeded. If the block
        raises, the reservation is returned (no noisy value left the mechanism).
        """
        value = _check_spend(epsilon)
        entry = Spend(label=label, epsilon=value, composition="sequential")
        with self._lock:
            if self._group is not None:
                raise PrivacyError(
                    "a parallel group is open: charge releases to the group or close it first"
                )
            if not self._fits(self.spent + value):
                self._refuse(value, label, self.spent)
            self._spends.append(entry)
        try:
            yield entry
        except BaseException:
            with self._lock:
                self._spends.remove(entry)
            raise

    # --- parallel composition --------------------------------------------------------

    def spend_parallel(self, epsilons: Sequence[float], label: str = "") -> Spend:
        """Charge releases on disjoint partitions: costs max(epsilons)."""
        values = [_check_spend(e) for e in epsilons]
        if not values:
            raise PrivacyParameterError("spend_parallel needs at least one epsilon")
        cost = max(values)
        with self._lock:
            if self._group is not None:
                raise PrivacyError("a parallel group is already open")
            if not self._fits(self.spent + cost):
                self._refuse(cost, label, self.spent)
            entry = Spend(
                label=label,
                epsilon=cost,
                composition="parallel",
                parts=tuple((str(i), label, e) for i, e in enumerate(values)),
            )
            self._spends.append(entry)
        return entry

    @contextmanager
    def parallel(self, label: str = "") -> Iterator[ParallelGroup]:
        """Open a parallel-composition group (see the module docstring)."""
        with self._lock:
            if self._group is not None:
                raise PrivacyError("parallel groups do not nest")
            group = ParallelGroup(self, label, math.fsum(s.epsilon for s in self._spends))
            self._group = group
        try:
            yield group
        finally:
            with self._lock:
                self._group = None
                if group.parts:  # releases that happened are spent, even on error
                    self._spends.append(
                        Spend(
                            label=label,
                            epsilon=group.cost,
                            composition="parallel",
                            parts=tuple(group.parts),
                        )
                    )


class ParallelGroup:
    """Releases on disjoint partitions; costs the max over partitions of their sums."""

    def __init__(self, accountant: PrivacyAccountant, label: str, base: float) -> None:
        self._accountant = accountant
        self.label = label
        self._base = base
        self._per_partition: dict[str, list[float]] = {}
        self.parts: list[tuple[str, str, float]] = []

    @property
    def cost(self) -> float:
        """max over partitions of the epsilons spent on that partition."""
        return max((math.fsum(v) for v in self._per_partition.values()), default=0.0)

    def _cost_with(self, partition: str, epsilon: float) -> float:
        sums = {p: math.fsum(v) for p, v in self._per_partition.items()}
        sums[partition] = sums.get(partition, 0.0) + epsilon
        return max(sums.values())

    def spend(self, epsilon: float, label: str = "", *, partition: str | None = None) -> None:
        """Record a release on ``partition`` (default: ``label``) or refuse it."""
        with self.charge(epsilon, label, partition=partition):
            pass

    @contextmanager
    def charge(
        self, epsilon: float, label: str = "", *, partition: str | None = None
    ) -> Iterator[None]:
        """Reserve ``epsilon`` on ``partition`` for a release made inside the block."""
        value = _check_spend(epsilon)
        key = label if partition is None else partition
        accountant = self._accountant
        with accountant._lock:
            if accountant._group is not self:
                raise PrivacyError("this parallel group is closed")
            new_cost = self._cost_with(key, value)
            if not accountant._fits(self._base + new_cost):
                accountant._refuse(value, label, self._base + self.cost)
            self._per_partition.setdefault(key, []).append(value)
            self.parts.append((key, label, value))
        try:
            yield
        except BaseException:
            with accountant._lock:
                self._per_partition[key].pop()
                if not self._per_partition[key]:
                    del self._per_partition[key]
                self.parts.remove((key, label, value))
            raise
