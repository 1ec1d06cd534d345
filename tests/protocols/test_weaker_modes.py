"""Every opt-in mode that reveals more than its protocol's default warns where it is
chosen (``smc_hmm.errors.WeakerModeWarning``); the defaults do not."""

from __future__ import annotations

import warnings

import pytest

from protocols import eigenvector, forward, keyword
from smc_hmm.errors import WeakerModeWarning


@pytest.mark.parametrize(
    ("choose", "says"),
    [
        (lambda: forward.ForwardParams(recursion="v1"), "transition ratios"),
        (lambda: keyword.KeywordParams(mode="fast"), "order of all scores"),
        (lambda: eigenvector.ThesisParams(), "decryption key"),
    ],
)
def test_a_weaker_mode_warns_and_says_what_it_reveals(choose, says):
    with pytest.warns(WeakerModeWarning, match=says) as record:
        choose()
    weaker = [w for w in record if issubclass(w.category, WeakerModeWarning)]
    assert len(weaker) == 1 and "docs/security.md" in str(weaker[0].message)


def test_the_defaults_do_not_warn():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        made = [
            forward.ForwardParams(),
            keyword.KeywordParams(),
            eigenvector.PrivateParams(),
            keyword.KeywordParams.from_config({"mode": "private"}),
        ]
    assert [p.recursion for p in (made[0], made[1].forward)] == ["v2", "v2"]
    assert (made[1].mode, made[2].mode, made[3].mode) == ("private", "private", "private")
    assert not [w for w in record if issubclass(w.category, WeakerModeWarning)]
