"""The zCDP <-> (eps, delta) conversion (smc_hmm.dp.zcdp) over the whole range a release
may ask for, against OpenDP.

The module documents Canonne, Kamath and Steinke's (2020) conversion, the one OpenDP's
``make_zCDP_to_approxDP`` applies; the reference here is OpenDP itself (the composition
built by :func:`~smc_hmm.dp.zcdp.opendp_epsilon`: ``make_gaussian``, then
``make_zCDP_to_approxDP`` and ``make_fix_delta``), not a copy of the formula.
"""

import math

import numpy as np
import pytest

from smc_hmm.dp.zcdp import epsilon_from_rho, opendp_epsilon, rho_from_epsilon
from smc_hmm.errors import PrivacyParameterError

EPSILONS = [float(e) for e in np.logspace(-2, 4, 100)]  # 0.01 .. 10,000
DELTAS = [1e-9, 1e-6, 1e-3]


def _opendp_at(rho: float, delta: float) -> float:
    """OpenDP's eps at ``delta`` for one Gaussian measurement of zCDP cost ``rho``."""
    return opendp_epsilon([(1.0 / math.sqrt(2.0 * rho), 1.0)], delta)


@pytest.mark.parametrize("delta", DELTAS)
def test_both_directions_over_eps_from_0_01_to_10_000_agree_with_opendp(delta):
    """Every eps converts to a rho and back without error (from eps = 40 on, the search
    used to reach a = 1 + e^-40 == 1.0 and raise "math domain error"), on the safe side
    of the root, and OpenDP gives the same eps for that rho to 1e-9."""
    for eps in EPSILONS:
        rho = rho_from_epsilon(eps, delta)
        assert rho > 0
        back = epsilon_from_rho(rho, delta)
        assert back <= eps
        assert back == pytest.approx(eps, rel=1e-9)
        assert _opendp_at(rho, delta) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("delta", DELTAS)
def test_epsilon_from_rho_beyond_38_7_agrees_with_opendp(delta):
    """epsilon_from_rho failed from rho ~ 38.7 on (delta = 1e-6); OpenDP's own map is the
    reference up to rho = 10,000 (it overflows itself beyond about 1e5)."""
    for rho in [float(r) for r in np.logspace(-6, 4, 41)] + [38.7, 40.0, 41.0]:
        ours = epsilon_from_rho(rho, delta)
        theirs = _opendp_at(rho, delta)
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_extreme_values_convert_without_error():
    assert epsilon_from_rho(0.0, 1e-6) == 0.0
    assert epsilon_from_rho(5e-324, 1e-6) == 0.0  # even eps = 0 meets delta
    assert epsilon_from_rho(1e300, 1e-6) == pytest.approx(1e300)
    assert math.isfinite(epsilon_from_rho(1e6, 1e-12))
    assert epsilon_from_rho(rho_from_epsilon(1e-9, 1e-6), 1e-6) <= 1e-9
    assert rho_from_epsilon(1e300, 1e-6) == pytest.approx(1e300)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(PrivacyParameterError):
            rho_from_epsilon(bad, 1e-6)
    for bad in (0.0, 1.0, math.nan):
        with pytest.raises(PrivacyParameterError):
            epsilon_from_rho(1.0, bad)


def test_keyword_model_release_at_eps_40(tmp_path, capsys):
    """`smc-hmm release hmm --keyword-models --eps 40` used to stop on "math domain
    error" in the conversion; it releases, and its guarantee stays within the request."""
    import json

    from smc_hmm.cli import main

    rng = np.random.default_rng(0)
    lengths = np.full(20, 12)
    data = tmp_path / "features.npz"
    np.savez(
        data,
        features=rng.normal(size=(int(lengths.sum()), 39)),
        lengths=lengths,
        digits=np.arange(20) % 10,
    )
    out = tmp_path / "kw.npz"
    argv = ["release", "hmm", "--keyword-models", "--data", str(data), "--eps", "40"]
    assert main([*argv, "--seed", "1", "--out", str(out)]) == 0
    guarantee = json.loads((tmp_path / "kw.privacy.json").read_text())
    assert guarantee["epsilon"] == pytest.approx(40.0, rel=1e-8) and guarantee["epsilon"] <= 40.0
    capsys.readouterr()
