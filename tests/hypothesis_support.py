"""Shared by the property tests that also take pytest fixtures."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def with_fixtures(max_examples: int) -> settings:
    """Hypothesis settings for a test that takes function-scoped fixtures (the same
    fixture value serves every example, which these tests allow), with no deadline."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
