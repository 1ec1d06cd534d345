"""The privacy accountant: sequential and parallel composition, refusals, history."""

import math

import pytest

from smc_hmm.dp.accountant import PrivacyAccountant
from smc_hmm.dp.mechanisms import LaplaceMechanism
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import PrivacyBudgetError, PrivacyError, PrivacyParameterError


def test_sequential_composition_adds_epsilons():
    accountant = PrivacyAccountant(1.0)
    accountant.spend(0.25, "a")
    accountant.spend(0.5, "b")
    assert accountant.spent == pytest.approx(0.75)
    assert accountant.remaining == pytest.approx(0.25)
    assert [(s.label, s.epsilon, s.composition) for s in accountant.history] == [
        ("a", 0.25, "sequential"),
        ("b", 0.5, "sequential"),
    ]
    assert accountant.can_spend(0.25) and not accountant.can_spend(0.26)


def test_refusal_leaves_the_budget_unchanged():
    accountant = PrivacyAccountant(1.0)
    accountant.spend(0.7, "a")
    with pytest.raises(PrivacyBudgetError, match="remains"):
        accountant.spend(0.4, "too much")
    assert accountant.spent == pytest.approx(0.7)
    assert len(accountant.history) == 1
    accountant.spend(0.3, "exactly the rest")
    assert accountant.remaining == pytest.approx(0.0)
    with pytest.raises(PrivacyBudgetError):
        accountant.spend(1e-6)


def test_an_even_split_uses_the_whole_budget_despite_rounding():
    accountant = PrivacyAccountant(1.0)
    for i in range(30):
        accountant.spend(1.0 / 30, f"iteration {i}")
    assert accountant.spent == pytest.approx(1.0)
    with pytest.raises(PrivacyBudgetError):
        accountant.spend(1e-6)


def test_parallel_group_costs_the_max_over_partitions():
    accountant = PrivacyAccountant(1.0)
    accountant.spend(0.2, "before")
    with accountant.parallel("histogram") as group:
        group.spend(0.5, "user 1")
        group.spend(0.3, "user 2")
        group.spend(0.1, "user 2 again", partition="user 2")  # same partition: adds up
        assert accountant.spent == pytest.approx(0.7)
        with pytest.raises(PrivacyBudgetError):
            group.spend(0.81, "user 3")  # 0.2 + 0.81 > 1
        with pytest.raises(PrivacyError):
            accountant.spend(0.01, "sequential while the group is open")
    assert accountant.spent == pytest.approx(0.7)
    entry = accountant.history[-1]
    assert entry.composition == "parallel" and entry.epsilon == pytest.approx(0.5)
    assert [part[0] for part in entry.parts] == ["user 1", "user 2", "user 2"]


def test_spend_parallel_charges_the_max_and_refuses_atomically():
    accountant = PrivacyAccountant(1.0)
    entry = accountant.spend_parallel([0.3, 0.6, 0.1], "disjoint")
    assert entry.epsilon == 0.6 and accountant.spent == pytest.approx(0.6)
    with pytest.raises(PrivacyBudgetError):
        accountant.spend_parallel([0.1, 0.5], "refused")
    assert accountant.spent == pytest.approx(0.6) and len(accountant.history) == 1
    with pytest.raises(PrivacyParameterError):
        accountant.spend_parallel([], "empty")


def test_mechanisms_charge_parallel_groups():
    accountant = PrivacyAccountant(1.0)
    mechanism = LaplaceMechanism(1.0, 1.0, rng=DPRandom.insecure_seeded(1))
    with accountant.parallel("two users") as group:
        mechanism.release(1.0, accountant=group, label="alice")
        mechanism.release(2.0, accountant=group, label="bob")
    assert accountant.spent == pytest.approx(1.0)
    with pytest.raises(PrivacyBudgetError):
        mechanism.release(1.0, accountant=accountant)


def test_a_failed_release_is_rolled_back():
    accountant = PrivacyAccountant(1.0)
    with pytest.raises(RuntimeError), accountant.charge(0.5, "sampler crashed"):
        raise RuntimeError("boom")
    assert accountant.spent == 0.0 and accountant.history == ()
    with pytest.raises(RuntimeError), accountant.parallel("group") as group:
        group.spend(0.4, "released")
        with group.charge(0.9, "crashed"):
            raise RuntimeError("boom")
    assert accountant.spent == pytest.approx(0.4)  # the release that happened is spent


def test_groups_do_not_nest_and_close():
    accountant = PrivacyAccountant(1.0)
    with accountant.parallel("outer") as group:
        with pytest.raises(PrivacyError), accountant.parallel("inner"):
            pass
        with pytest.raises(PrivacyError):
            accountant.spend_parallel([0.1])
    with pytest.raises(PrivacyError):
        group.spend(0.1, "closed")
    assert accountant.history == ()  # an empty group records nothing


@pytest.mark.parametrize("total", [0.0, -1.0, math.nan, math.inf, "1"])
def test_bad_totals_are_refused(total):
    with pytest.raises(PrivacyParameterError):
        PrivacyAccountant(total)


@pytest.mark.parametrize("epsilon", [-0.1, math.nan, math.inf, "0.1", None])
def test_bad_spends_are_refused(epsilon):
    accountant = PrivacyAccountant(1.0)
    with pytest.raises(PrivacyParameterError):
        accountant.spend(epsilon)
    with pytest.raises(PrivacyParameterError):
        accountant.spend_parallel([0.1, epsilon])
    assert accountant.spent == 0.0
