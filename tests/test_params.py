"""smc_hmm.params: typed public fields check their ranges with one message format."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from smc_hmm import params as typed
from smc_hmm.errors import InvalidInputError


@dataclass(frozen=True)
class Example:
    stride: int = typed.whole(2, 2, 64)
    count: int | None = typed.whole(None, 1, None, optional=True)
    width: float = typed.number(20.0, 0, 200, low_open=True)
    mode: str = typed.one_of("exact", ("exact", "approx"))
    reveal: bool = typed.flag(False)
    sigma: int = typed.sigma()

    def __post_init__(self):
        typed.check_fields(self)


def test_defaults_and_values_in_range_pass():
    assert Example() == Example(2, None, 20.0, "exact", False, 40)
    Example(stride=64, count=10**30, width=200, mode="approx", reveal=True, sigma=256)
    Example(stride=np.int64(3))  # numpy integers are integers


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stride": 1}, r"stride must be an int in \[2, 64\], got 1"),
        ({"stride": 65}, r"stride must be an int in \[2, 64\]"),
        ({"stride": True}, "stride must be an int"),  # a bool is not a count
        ({"stride": 2.0}, "stride must be an int"),
        ({"count": 0}, r"count must be an int in \[1, inf\]"),
        ({"width": 0}, r"width must be a number in \(0, 200\]"),  # the open end
        ({"width": math.nan}, "width must be a number"),
        ({"width": math.inf}, "width must be a number"),
        ({"width": "20"}, "width must be a number"),
        ({"mode": "fast"}, r"mode must be one of \('exact', 'approx'\), got 'fast'"),
        ({"reveal": 1}, "reveal must be true or false"),
        ({"sigma": 39}, r"sigma must be an int in \[40, 256\]"),
    ],
)
def test_values_out_of_range_are_typed_errors_naming_the_field(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        Example(**kwargs)


def test_the_shared_ranges_agree_across_protocols():
    """sigma and blind_nats: every protocol that takes them accepts the same values."""
    from protocols.match import MatchParams
    from protocols.speaker import SpeakerParams
    from protocols.stages.logsum import LogsumParams
    from protocols.stages.primitives import PrecisionParams

    for cls in (MatchParams, PrecisionParams, SpeakerParams, LogsumParams):
        assert cls(sigma=256).sigma == 256
        with pytest.raises(InvalidInputError, match="sigma must be an int in"):
            cls(sigma=39)
    for cls in (PrecisionParams, SpeakerParams, LogsumParams):
        assert cls(blind_nats=0.5).blind_nats == 0.5
        with pytest.raises(InvalidInputError, match="blind_nats must be a number in"):
            cls(blind_nats=201)
