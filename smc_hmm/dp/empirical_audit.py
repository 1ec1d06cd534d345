"""Moved to :mod:`smc_hmm.dp.evaluation.empirical_audit`; import it from there.

This alias stays only while :mod:`smc_hmm.bench.dp_keyword` still imports the old path; it
goes with that import."""

from smc_hmm.dp.evaluation.empirical_audit import (
    KeywordAudit,
    audit_keyword_release,
    histogram_privacy_loss,
)

__all__ = ["KeywordAudit", "audit_keyword_release", "histogram_privacy_loss"]
