"""The Gaussian mechanism with zero-concentrated DP accounting, converted to (eps, delta).

- :class:`GaussianMechanism`: f(D) + N(0, sigma^2 I) on a real vector whose L2
  sensitivity is Delta. It is rho-zCDP with rho = Delta^2 / (2 sigma^2) (Bun and
  Steinke 2016, "Concentrated differential privacy: simplifications, extensions, and
  lower bounds", Proposition 1.6).
- :class:`ZCDPAccountant`: a total rho spent by sequential composition (the rho of
  adaptively chosen zCDP mechanisms add up, Bun and Steinke 2016, Lemma 2.3). Parallel
  composition needs no entry of its own: a release whose coordinates are grouped in
  disjoint blocks, one per partition of the data, is a single mechanism whose
  sensitivity is that of one record's block (see :mod:`smc_hmm.dp.keyword_models`).
- :func:`epsilon_from_rho` / :func:`rho_from_epsilon`: the conversion of rho-zCDP to
  (eps, delta)-DP of Canonne, Kamath and Steinke 2020 ("The discrete Gaussian for
  differential privacy", Proposition 12 / Corollary 13):

      delta(eps) = inf_{a > 1}  exp((a - 1)(a rho - eps)) / (a - 1) * (1 - 1/a)^a,

  tighter than Bun and Steinke's eps = rho + 2 sqrt(rho ln(1/delta)). It is the
  conversion OpenDP's ``make_zCDP_to_approxDP`` applies; :func:`opendp_epsilon` builds
  the same mechanism sequence in OpenDP (composition of Gaussian measurements, then
  ``make_zCDP_to_approxDP`` and ``make_fix_delta``) so that tests and every release can
  check the accountant against it.

Samplers (``sampler=``), each reported in the :class:`GaussianRelease`:

- ``"opendp"`` (the default): OpenDP's ``make_gaussian`` on a vector domain with the L2
  distance, which samples a discrete Gaussian exactly on a 2^k grid from a CSPRNG (no
  floating-point attack in the style of Mironov 2012). The rho reported is OpenDP's own
  privacy map at the declared sensitivity. OpenDP draws its own randomness: it cannot
  honour a seeded stream, so ``rng`` must be ``None``.
- ``"float"``: Box-Muller normals from the uniforms of :mod:`smc_hmm.dp.random`. Its
  low-order bits are not hardened; it exists for reproducible experiments on an
  INSECURE seeded stream and warns when used with the CSPRNG.

Parameters are validated with :class:`~smc_hmm.errors.PrivacyParameterError`; an
accountant refuses, before any noise is drawn, a release that would exceed its budget
(:class:`~smc_hmm.errors.PrivacyBudgetError`). See ``docs/dp-keyword-models.md``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq

from smc_hmm.dp.params import check_delta, check_epsilon, check_sensitivity
from smc_hmm.dp.random import DPRandom, resolve_rng
from smc_hmm.errors import PrivacyBudgetError, PrivacyParameterError, SamplerUnavailableError

__all__ = [
    "GaussianMechanism",
    "GaussianRelease",
    "ZCDPAccountant",
    "epsilon_from_rho",
    "opendp_epsilon",
    "rho_from_epsilon",
]

GaussianSampler = Literal["opendp", "float"]

RELATIVE_SLACK = 1e-10
"""Relative tolerance of the budget check (floating-point rounding of even splits)."""


# --- conversion zCDP -> (eps, delta) ---------------------------------------------------
#
# The bound's exponent, f(a) = (a - 1)(a rho - eps) - ln(a - 1) + a ln(1 - 1/a), is convex
# in a: f'(a) = (2a - 1) rho - eps + ln(1 - 1/a) increases from -inf (a -> 1) to +inf, so
# its one root a* is the infimum.  With b = a - 1 > 0 the two conditions f'(a*) = 0 and
# f(a*) = ln delta become
#
#     eps = (1 + 2b) rho + ln(b / (1 + b))          ln(1/delta) = b^2 rho + ln(1 + b),
#
# both monotone in b.  Every quantity is computed from t = ln b without forming a = 1 + b
# (1 + e^-40 == 1.0 in floating point: the cause of the old "math domain error" from eps
# = 40 on), with ln(1 + b) = softplus(t) and ln(b / (1 + b)) = t - softplus(t).


def _softplus(t: float) -> float:
    """ln(1 + e^t), without overflow or cancellation."""
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


def _increasing_root(fn, target: float) -> float:
    """The t with fn(t) = target, fn increasing on the real line (bracketed by doubling)."""
    lo, hi = -1.0, 1.0
    while fn(lo) > target:
        lo *= 2.0
    while fn(hi) < target:
        hi *= 2.0
    return brentq(lambda t: fn(t) - target, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500)


def epsilon_from_rho(rho: float, delta: float) -> float:
    """The smallest eps such that rho-zCDP implies (eps, delta)-DP (module docstring)."""
    return _epsilon_from_rho(check_sensitivity(rho, "rho"), check_delta(delta))


@lru_cache(maxsize=1024)
def _epsilon_from_rho(rho: float, delta: float) -> float:
    if rho == 0:
        return 0.0
    log_rho, log_inv = math.log(rho), -math.log(delta)
    # ln(1/delta) = b^2 rho + ln(1 + b): solve for t = ln b, then eps from b
    t = _increasing_root(lambda t: _exp(2.0 * t + log_rho) + _softplus(t), log_inv)
    eps = rho + 2.0 * _exp(t + log_rho) + t - _softplus(t)
    return max(eps, 0.0)  # eps < 0: even eps = 0 meets delta


def rho_from_epsilon(epsilon: float, delta: float) -> float:
    """The largest rho whose conversion gives at most (epsilon, delta)."""
    return _rho_from_epsilon(check_epsilon(epsilon), check_delta(delta))


def _rho_of(t: float, log_inv: float) -> float:
    """rho = (ln(1/delta) - ln(1 + b)) / b^2 at b = e^t (the second condition)."""
    return (log_inv - _softplus(t)) * _exp(-2.0 * t)


@lru_cache(maxsize=256)
def _rho_from_epsilon(epsilon: float, delta: float) -> float:
    log_inv = -math.log(delta)
    # eps(t) = (1 + 2b) rho(t) + t - softplus(t) decreases from +inf (t -> -inf) to
    # ln(1 - delta) < 0 at t_max = ln(1/delta - 1), where rho(t_max) = 0
    t_max = math.log(math.expm1(log_inv))

    def minus_eps(t: float) -> float:
        if t >= t_max:
            return -math.log1p(-delta)
        return -((1.0 + 2.0 * _exp(t)) * _rho_of(t, log_inv) + t - _softplus(t))

    lo = min(-1.0, t_max - 1.0)
    while minus_eps(lo) > -epsilon:
        lo *= 2.0
    t = brentq(lambda t: minus_eps(t) + epsilon, lo, t_max, xtol=1e-300, rtol=1e-15)
    rho = _rho_of(t, log_inv)
    while epsilon_from_rho(rho, delta) > epsilon:  # land on the safe side of the root
        rho *= 1.0 - 1e-13
    return rho


# --- OpenDP ------------------------------------------------------------------------------


def _opendp() -> Any:
    try:
        import opendp.prelude as dp
    except ImportError as exc:
        raise SamplerUnavailableError(
            "the OpenDP Gaussian sampler needs OpenDP: install the dp extra "
            "(`pip install 'smc-hmm[dp]'`) or `pip install opendp`"
        ) from exc
    dp.enable_features("contrib")
    return dp


def _opendp_gaussian(scale: float) -> Any:
    dp = _opendp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    return dp.m.make_gaussian(*space, scale=scale)


def opendp_epsilon(mechanisms: Sequence[tuple[float, float]], delta: float) -> float:
    """OpenDP's epsilon at ``delta`` for the composition of Gaussian mechanisms, each
    given as ``(sigma, L2 sensitivity)``: OpenDP's ``make_composition`` of
    ``make_gaussian`` measurements (each normalised to sensitivity 1), then
    ``make_zCDP_to_approxDP`` and ``make_fix_delta``."""
    delta = check_delta(delta)
    if not mechanisms:
        raise PrivacyParameterError("opendp_epsilon needs at least one mechanism")
    scales = tuple(
        check_epsilon(sigma, "sigma") / check_epsilon(sensitivity, "sensitivity")
        for sigma, sensitivity in mechanisms
    )
    return _opendp_epsilon(scales, delta)


@lru_cache(maxsize=256)
def _opendp_epsilon(scales: tuple[float, ...], delta: float) -> float:
    dp = _opendp()
    parts = [_opendp_gaussian(scale) for scale in scales]
    composed = parts[0] if len(parts) == 1 else dp.c.make_composition(parts)
    approx = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(composed), delta)
    return float(approx.map(1.0)[0])


def _opendp_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opendp")
    except PackageNotFoundError:  # pragma: no cover - imported but not installed
        return "unknown"


# --- the Gaussian mechanism ---------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GaussianRelease:
    """One Gaussian release: the noisy vector and how it was produced.

    Attributes:
        value: the noisy vector (read-only float array shaped like the input).
        rho: the zCDP cost at the declared sensitivity.
        sigma: the noise standard deviation.
        sensitivity: the declared L2 sensitivity Delta.
        sampler: ``"opendp"`` or ``"float"``.
        randomness: where the bits came from.
        details: sampler parameters (OpenDP version).
        label: the caller's label.
    """

    value: np.ndarray
    rho: float
    sigma: float
    sensitivity: float
    sampler: str
    randomness: str
    details: str = ""
    label: str = ""

    @property
    def insecure(self) -> bool:
        """True if the noise came from a seeded (non-cryptographic) stream."""
        return "INSECURE" in self.randomness


class GaussianMechanism:
    """f(D) + N(0, sigma^2) on every coordinate of a real vector of L2 sensitivity Delta.

    Args:
        sigma: the noise standard deviation, finite and > 0.
        sensitivity: L2 sensitivity Delta, finite and > 0.
        sampler: ``"opendp"`` (default, hardened, CSPRNG) or ``"float"``.
        rng: ``"float"`` only: the stream to spawn from (``None``: the CSPRNG, with a
            warning that the float sampler is not hardened). Refused with ``"opendp"``.
    """

    def __init__(
        self,
        sigma: float,
        sensitivity: float,
        *,
        sampler: GaussianSampler = "opendp",
        rng: DPRandom | None = None,
    ) -> None:
        self.sigma = check_epsilon(sigma, "sigma")
        self.sensitivity = check_epsilon(sensitivity, "sensitivity")
        if sampler not in ("opendp", "float"):
            raise PrivacyParameterError(f"sampler must be 'opendp' or 'float', got {sampler!r}")
        self.sampler = sampler
        self._measurement = None
        self._rng: DPRandom | None = None
        if sampler == "opendp":
            if rng is not None:
                raise PrivacyParameterError(
                    "the OpenDP sampler draws from its own CSPRNG and cannot honour rng; "
                    "use sampler='float' with DPRandom.insecure_seeded(...) for "
                    "reproducible experiments"
                )
            self._measurement = _opendp_gaussian(self.sigma)
        else:
            if rng is None:
                warnings.warn(
                    "the float Gaussian sampler is not hardened against floating-point "
                    "attacks: use sampler='opendp' for a real release",
                    stacklevel=2,
                )
            self._rng = resolve_rng(rng)

    @property
    def rho(self) -> float:
        """The zCDP cost of one release (OpenDP's privacy map for its sampler)."""
        if self._measurement is not None:
            return float(self._measurement.map(self.sensitivity))
        return self.sensitivity**2 / (2.0 * self.sigma**2)

    def release(
        self, value: ArrayLike, *, accountant: ZCDPAccountant | None = None, label: str = ""
    ) -> GaussianRelease:
        """Release ``value`` (a real vector or array) with Gaussian noise."""
        try:
            array = np.array(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise PrivacyParameterError(f"the query value must be numeric: {exc}") from exc
        if array.ndim == 0 or array.size == 0 or not np.all(np.isfinite(array)):
            raise PrivacyParameterError("the query value must be a finite, non-empty array")
        rho = self.rho
        with accountant.charge(rho, label) if accountant is not None else _nothing():
            noisy, randomness, details = self._sample(array)
        noisy.flags.writeable = False
        return GaussianRelease(
            value=noisy,
            rho=rho,
            sigma=self.sigma,
            sensitivity=self.sensitivity,
            sampler=self.sampler,
            randomness=randomness,
            details=details,
            label=label,
        )

    def _sample(self, array: np.ndarray) -> tuple[np.ndarray, str, str]:
        if self._measurement is not None:
            out = np.array(self._measurement(array.ravel().tolist()), dtype=np.float64)
            details = f"opendp {_opendp_version()} make_gaussian (discrete Gaussian, 2^k grid)"
            return out.reshape(array.shape), "OpenDP internal CSPRNG", details
        assert self._rng is not None
        shape = array.shape
        radius = np.sqrt(-2.0 * np.log(self._rng.uniform(shape)))
        normal = radius * np.cos(2.0 * np.pi * self._rng.uniform(shape))
        return array + self.sigma * normal, self._rng.description, "Box-Muller on 53-bit uniforms"


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --- the accountant ------------------------------------------------------------------------


@dataclass(frozen=True)
class ZCDPSpend:
    """One entry of a :class:`ZCDPAccountant`'s history."""

    label: str
    rho: float


class ZCDPAccountant:
    """A total zCDP budget ``rho`` spent by sequential composition.

    Build it from a rho (``ZCDPAccountant(rho)``) or from a target (eps, delta)
    (:meth:`for_epsilon`); :meth:`epsilon` converts what was spent back to (eps, delta).
    """

    def __init__(self, total_rho: float) -> None:
        self.total = check_epsilon(total_rho, "total_rho")
        self._spends: list[ZCDPSpend] = []

    @classmethod
    def for_epsilon(cls, epsilon: float, delta: float) -> ZCDPAccountant:
        """The accountant whose whole budget converts to at most (epsilon, delta)."""
        return cls(rho_from_epsilon(epsilon, delta))

    @property
    def spent(self) -> float:
        """rho consumed so far."""
        return math.fsum(s.rho for s in self._spends)

    @property
    def remaining(self) -> float:
        """rho left, never negative."""
        return max(0.0, self.total - self.spent)

    @property
    def history(self) -> tuple[ZCDPSpend, ...]:
        """Every spend, in order."""
        return tuple(self._spends)

    def epsilon(self, delta: float) -> float:
        """The (eps, delta) guarantee of everything spent so far, at ``delta``."""
        return epsilon_from_rho(self.spent, delta)

    @contextmanager
    def charge(self, rho: float, label: str = "") -> Iterator[ZCDPSpend]:
        """Reserve ``rho`` for a release made inside the block, or refuse before it runs;
        the reservation is returned if the block raises (nothing was released)."""
        value = check_sensitivity(rho, "rho")
        if self.spent + value > self.total * (1.0 + RELATIVE_SLACK):
            raise PrivacyBudgetError(
                f"release {label!r} needs rho = {value:.6g} but only {self.remaining:.6g} "
                f"of the zCDP budget {self.total:.6g} remains"
            )
        entry = ZCDPSpend(label, value)
        self._spends.append(entry)
        try:
            yield entry
        except BaseException:
            self._spends.remove(entry)
            raise
