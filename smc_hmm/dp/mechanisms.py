"""Additive-noise DP mechanisms: Laplace, geometric and truncated geometric.

- :class:`LaplaceMechanism`: f(D) + Lap(Delta/eps) per coordinate, for a real scalar or
  vector query with L1 sensitivity Delta (paper 000, section 2.3, Theorem 1).
- :class:`GeometricMechanism`: the two-sided geometric (discrete Laplace) mechanism,
  P(k) = (1 - a)/(1 + a) a^|k| with a = exp(-eps/Delta), for integer queries
  (Ghosh, Roughgarden and Sundararajan 2009).
- :class:`TruncatedGeometricMechanism`: the same noise with the output clamped to a
  range [lower, upper], so the mass beyond each end collapses onto it; with a = 1/2 on
  {0, 1, 2} this is the "truncated 1/2-geometric mechanism" of paper 002 (Example 4.1,
  ln 2-DP). :meth:`TruncatedGeometricMechanism.matrix` gives its exact transition matrix
  P[input, output] for :mod:`smc_hmm.dp.audit`.

Samplers (``sampler=``), each reported in the :class:`Release`:

- ``"opendp"`` (the default with the CSPRNG): OpenDP's samplers (``make_laplace`` /
  ``make_geometric``, which sample the discrete Laplace exactly from a CSPRNG; floats are
  handled on a 2^k grid), a dependency of the package. The epsilon reported is OpenDP's
  own privacy map at the declared sensitivity. OpenDP draws its own randomness, so it
  cannot be seeded: asking for it together with a seeded ``rng`` is refused.
- ``"snapping"`` (Laplace only): Mironov's snapping mechanism (2012, section 5.2),
  implemented here; see :class:`LaplaceMechanism` for its parameters and the epsilon it
  guarantees. Hardened and seedable, but it needs a public clamp bound B.
- ``"float"``: inverse-CDF sampling from the uniforms of :mod:`smc_hmm.dp.random`
  (Laplace = random sign x Exp(scale); geometric = floor(Exp(1)/r) with r = eps/Delta,
  two-sided as the difference of two). Fast and reproducible with a seeded stream, but
  the real-valued Laplace output is a floating-point number whose low-order bits leak the
  input (Mironov 2012, "On significance of the least significant bits for differential
  privacy", CCS): not hardened. Chosen explicitly with the CSPRNG it raises a
  :class:`FloatSamplerWarning`.

``sampler=None`` (the default of every mechanism and helper) resolves through
:func:`default_sampler`: ``"opendp"``, unless ``rng`` is an INSECURE seeded stream
(:meth:`DPRandom.insecure_seeded`, tests and reproducible experiments), which OpenDP cannot
honour; such a release already carries ``insecure=True`` and then uses ``"float"`` on
that stream. :attr:`Release.hardened` says whether a release came from a hardened sampler
and the CSPRNG.

Parameters are validated with :class:`~smc_hmm.errors.PrivacyParameterError` (epsilon
finite and > 0, sensitivity finite and >= 0, ranges non-empty, inputs finite and of the
right kind). A release with an ``accountant`` is charged before any noise is drawn; a
refused release raises :class:`~smc_hmm.errors.PrivacyBudgetError` and spends nothing.

See ``docs/dp-layer.md`` ("Mechanisms", "Samplers").
"""

from __future__ import annotations

import math
import warnings
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from smc_hmm.dp.params import check_epsilon, check_sensitivity
from smc_hmm.dp.random import DPRandom, resolve_rng
from smc_hmm.errors import PrivacyParameterError, SamplerUnavailableError

if TYPE_CHECKING:
    from smc_hmm.dp.accountant import Charger

LaplaceSampler = Literal["float", "snapping", "opendp"]
GeometricSampler = Literal["float", "opendp"]

HARDENED_SAMPLERS = frozenset({"opendp", "snapping"})
"""Samplers that resist Mironov's (2012) floating-point attack."""


class FloatSamplerWarning(UserWarning):
    """A release with the CSPRNG asked for the float sampler, which is not hardened."""


MAX_SCALE = 1e15
"""Largest noise scale Delta/eps accepted (geometric noise must fit in int64)."""

_SNAP_ROUNDING = 2.0**-49  # Mironov 2012, Theorem 1: the extra loss is 2^-49 B / lambda


@dataclass(frozen=True, eq=False)
class Release:
    """One DP release: the noisy value and how it was produced.

    Attributes:
        value: the noisy output (float, int or a read-only ndarray shaped like the input).
        epsilon: the privacy spent by this release (pure eps-DP under the mechanism's
            neighbouring relation at the declared sensitivity).
        mechanism: ``"laplace"``, ``"geometric"`` or ``"truncated-geometric"``.
        sampler: ``"float"``, ``"snapping"`` or ``"opendp"``.
        sensitivity: the declared L1 sensitivity Delta.
        scale: the noise scale (Laplace b, or Delta/eps for the geometric noise).
        randomness: where the bits came from (``DPRandom.description`` or OpenDP).
        details: sampler parameters (snapping bound and grid, OpenDP version).
    """

    value: Any
    epsilon: float
    mechanism: str
    sampler: str
    sensitivity: float
    scale: float
    randomness: str
    details: str = ""

    @property
    def insecure(self) -> bool:
        """True if the noise came from a seeded (non-cryptographic) stream."""
        return "INSECURE" in self.randomness

    @property
    def hardened(self) -> bool:
        """True if a hardened sampler (OpenDP or snapping) drew the noise from a CSPRNG."""
        return self.sampler in HARDENED_SAMPLERS and not self.insecure


# --- validation -------------------------------------------------------------------


def _check_scale(sensitivity: float, epsilon: float) -> float:
    scale = sensitivity / epsilon
    if scale > MAX_SCALE:
        raise PrivacyParameterError(
            f"noise scale sensitivity/epsilon = {scale:.3g} exceeds {MAX_SCALE:.0e}"
        )
    return scale


def _real_values(value: ArrayLike) -> np.ndarray:
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PrivacyParameterError(f"the query value must be numeric: {exc}") from exc
    if not np.all(np.isfinite(array)):
        raise PrivacyParameterError("the query value must be finite (no NaN or inf)")
    return array


def _integer_values(value: ArrayLike) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == np.bool_ or array.dtype.kind not in "iuf":
        raise PrivacyParameterError(f"the query value must hold integers, got {array.dtype}")
    if array.dtype.kind == "f" and not (
        np.all(np.isfinite(array)) and np.all(array == np.round(array))
    ):
        raise PrivacyParameterError("the query value must hold integers")
    if np.any(np.abs(array.astype(np.float64)) > 2.0**62):
        raise PrivacyParameterError("the query value must fit in int64 with margin")
    return array.astype(np.int64)


def default_sampler(rng: DPRandom | None) -> str:
    """The sampler of ``sampler=None``: ``"opendp"``, or ``"float"`` on an INSECURE seeded
    stream (OpenDP cannot be seeded; the release is marked insecure either way)."""
    return "float" if isinstance(rng, DPRandom) and rng.insecure else "opendp"


def _check_sampler(sampler: object, allowed: tuple[str, ...], rng: DPRandom | None) -> str:
    """Resolve ``sampler=None``, refuse unknown samplers and contradictory requests, and
    warn when the float sampler is asked for explicitly with the CSPRNG."""
    if rng is not None and not isinstance(rng, DPRandom):
        resolve_rng(rng)  # raises the typed error that names the accepted types
    if sampler is None:
        return default_sampler(rng)
    if sampler not in allowed:
        raise PrivacyParameterError(f"sampler must be one of {allowed}, got {sampler!r}")
    seeded = rng is not None and rng.insecure
    if sampler == "opendp" and seeded:
        raise PrivacyParameterError(
            "sampler='opendp' draws its own randomness and cannot use a seeded rng: "
            "pass rng=None, or sampler='float' for a reproducible (INSECURE) experiment"
        )
    if sampler == "float" and not seeded:
        warnings.warn(
            "sampler='float' is not hardened against floating-point attacks (Mironov 2012): "
            "use the default (OpenDP) for real releases",
            FloatSamplerWarning,
            stacklevel=3,
        )
    return str(sampler)


def _charge(accountant: Charger | None, epsilon: float, label: str) -> AbstractContextManager:
    if accountant is None:
        return nullcontext()
    return accountant.charge(epsilon, label)


def _output(array: np.ndarray, scalar: bool) -> Any:
    if scalar:
        return array.item()
    array.flags.writeable = False
    return array


# --- OpenDP -----------------------------------------------------------------------


def _opendp() -> Any:
    """Import ``opendp.prelude`` with the contrib features on, or raise a typed error."""
    try:
        import opendp.prelude as dp
    except ImportError as exc:
        raise SamplerUnavailableError(
            "the OpenDP sampler needs OpenDP, a dependency of smc-hmm: reinstall the "
            "package (`pip install -e .`) or `pip install opendp`"
        ) from exc
    dp.enable_features("contrib")
    return dp


def _opendp_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opendp")
    except PackageNotFoundError:  # pragma: no cover - opendp imported but not installed
        return "unknown"


# --- Laplace ----------------------------------------------------------------------


class _Calibrated:
    """What the Laplace and geometric mechanisms share: noise of scale Delta/eps, and the
    epsilon a release spends, known before sampling."""

    epsilon: float
    sensitivity: float
    scale: float
    sampler: str

    def _calibrate(self, epsilon: float, sensitivity: float) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        self.scale = _check_scale(self.sensitivity, self.epsilon)

    def _opendp_measurement(self, vector: bool) -> tuple[Any, float]:
        raise NotImplementedError

    def epsilon_for(self, value: ArrayLike) -> float:
        """Privacy a release of ``value`` spends (OpenDP's map for the OpenDP sampler)."""
        if self.sampler == "opendp" and self.sensitivity > 0:
            return self._opendp_measurement(np.ndim(value) > 0)[1]
        return self.epsilon


class LaplaceMechanism(_Calibrated):
    """f(D) + Lap(Delta/eps) on every coordinate of a real scalar or vector query.

    Args:
        epsilon: privacy parameter, finite and > 0.
        sensitivity: L1 sensitivity Delta of the query over the whole vector, finite
            and >= 0 (0 means the query does not depend on the data: no noise).
        sampler: ``None`` (default: :func:`default_sampler`, OpenDP with the CSPRNG),
            ``"opendp"``, ``"snapping"`` or ``"float"`` (not hardened; warned).
        bound: snapping only: the clamp bound B; inputs and outputs are clamped to
            [-B, B]. Required for ``"snapping"``, rejected otherwise.
        rng: a :class:`~smc_hmm.dp.random.DPRandom` to spawn this mechanism's stream from;
            ``None`` for a fresh CSPRNG stream. OpenDP uses its own CSPRNG.

    Snapping (Mironov 2012, section 5.2, Theorem 1): the query is normalised to
    sensitivity 1 (g = f/Delta, bound B' = B/Delta), then each coordinate is released as
    ``clamp_B'(round_Lam(clamp_B'(g) + S * lam * ln U*)) * Delta`` with S a fair sign, U*
    the full-precision uniform of :meth:`DPRandom.uniform_full`, Lam the smallest power
    of two >= lam and round_Lam rounding to the nearest multiple of Lam. Theorem 1 gives
    (1/lam + 2^-49 B'/lam)-DP for one coordinate of sensitivity 1 when lam < B' < 2^46 lam.
    We apply it per coordinate, allow 2^-52 B' for the rounding of f/Delta, and choose

        lam = (1 + 2^-52 B' + d * 2^-49 B') / eps      (d = number of coordinates)

    so that the release is eps-DP for the requested eps (the reported epsilon). The
    output lies on the grid Lam * Delta, in [-B, B].
    """

    mechanism = "laplace"

    def __init__(
        self,
        epsilon: float,
        sensitivity: float,
        *,
        sampler: LaplaceSampler | None = None,
        bound: float | None = None,
        rng: DPRandom | None = None,
    ) -> None:
        self._calibrate(epsilon, sensitivity)
        self.sampler = _check_sampler(sampler, ("float", "snapping", "opendp"), rng)
        if self.sampler == "snapping":
            if bound is None:
                raise PrivacyParameterError("sampler='snapping' needs a clamp bound B")
            self.bound: float | None = check_epsilon(bound, "bound")
        elif bound is not None:
            raise PrivacyParameterError("bound applies to sampler='snapping' only")
        else:
            self.bound = None
        self._rng = resolve_rng(rng) if self.sampler != "opendp" else None
        self._opendp_cache: dict[bool, tuple[Any, float]] = {}
        if self.sampler == "opendp":
            _opendp()  # fail early, with a typed error, if OpenDP is missing

    def release(
        self, value: ArrayLike, *, accountant: Charger | None = None, label: str = ""
    ) -> Release:
        """Release ``value`` (a real scalar or array) with Laplace noise."""
        array = _real_values(value)
        scalar = array.ndim == 0
        epsilon = self.epsilon_for(array)
        with _charge(accountant, epsilon, label or "laplace"):
            noisy, details = self._sample(array)
        return Release(
            value=_output(noisy, scalar),
            epsilon=epsilon,
            mechanism=self.mechanism,
            sampler=self.sampler,
            sensitivity=self.sensitivity,
            scale=self.scale,
            randomness=self._randomness(),
            details=details,
        )

    def _randomness(self) -> str:
        if self._rng is None:
            return "OpenDP internal CSPRNG"
        return self._rng.description

    def _sample(self, array: np.ndarray) -> tuple[np.ndarray, str]:
        if self.sensitivity == 0:
            if self.sampler == "snapping":
                assert self.bound is not None
                return np.clip(array, -self.bound, self.bound), "zero sensitivity: no noise"
            return array.copy(), "zero sensitivity: no noise"
        if self.sampler == "float":
            assert self._rng is not None
            noise = self._rng.signs(array.shape) * (-np.log(self._rng.uniform(array.shape)))
            return array + self.scale * noise, "inverse CDF on 53-bit uniforms"
        if self.sampler == "snapping":
            return self._snap(array)
        measurement, _ = self._opendp_measurement(array.ndim > 0)
        if array.ndim == 0:
            out = np.array(measurement(float(array)), dtype=np.float64)
        else:
            out = np.array(measurement(array.ravel().tolist()), dtype=np.float64)
            out = out.reshape(array.shape)
        return out, f"opendp {_opendp_version()} make_laplace (discrete Laplace on a 2^k grid)"

    def snapping_parameters(self, n_coordinates: int = 1) -> tuple[float, float]:
        """(lam, Lam) of the snapping sampler on the normalised scale (see class docs)."""
        if self.bound is None:
            raise PrivacyParameterError("snapping parameters need sampler='snapping'")
        bound = self.bound / self.sensitivity
        lam = (1.0 + 2.0**-52 * bound + n_coordinates * _SNAP_ROUNDING * bound) / self.epsilon
        if not (lam < bound < 2.0**46 * lam):
            raise PrivacyParameterError(
                f"snapping needs lambda < B/Delta < 2^46 lambda; got lambda = {lam:.4g}, "
                f"B/Delta = {bound:.4g}: raise the bound B or epsilon"
            )
        grid = 2.0 ** math.ceil(math.log2(lam))
        return lam, grid

    def _snap(self, array: np.ndarray) -> tuple[np.ndarray, str]:
        assert self._rng is not None and self.bound is not None
        size = max(1, int(array.size))
        lam, grid = self.snapping_parameters(size)
        bound = self.bound / self.sensitivity
        normalised = np.clip(array / self.sensitivity, -bound, bound)
        noisy = normalised + self._rng.signs(array.shape) * lam * np.log(
            self._rng.uniform_full(array.shape)
        )
        snapped = np.clip(grid * np.round(noisy / grid), -bound, bound)
        details = (
            f"snapping (Mironov 2012): B = {self.bound:.6g}, "
            f"lambda = {lam * self.sensitivity:.6g}, grid = {grid * self.sensitivity:.6g}"
        )
        return snapped * self.sensitivity, details

    def _opendp_measurement(self, vector: bool) -> tuple[Any, float]:
        cached = self._opendp_cache.get(vector)
        if cached is not None:
            return cached
        dp = _opendp()
        atom = dp.atom_domain(T=float, nan=False)
        if vector:
            space = dp.vector_domain(atom), dp.l1_distance(T=float)
        else:
            space = atom, dp.absolute_distance(T=float)
        measurement, epsilon = _opendp_within(self, dp.m.make_laplace, space, self.sensitivity)
        self._opendp_cache[vector] = (measurement, epsilon)
        return measurement, epsilon


def _opendp_within(mechanism, make, space, sensitivity) -> tuple[Any, float]:
    """OpenDP's measurement at the mechanism's scale, raised by a float or a few if
    needed so that OpenDP's privacy map -- which rounds outward -- stays within the
    requested epsilon: a release then spends what was asked, not one unit in the last
    place more (eps 1 over 7 iterations used to report 1.0000000000000002).  The scale
    actually used is the mechanism's ``scale`` from then on."""
    scale = mechanism.scale
    for _ in range(64):
        measurement = make(*space, scale=scale)
        epsilon = float(measurement.map(sensitivity))
        if epsilon <= mechanism.epsilon:
            break
        scale = math.nextafter(scale, math.inf)
    mechanism.scale = scale
    return measurement, epsilon


# --- geometric --------------------------------------------------------------------


def _two_sided_geometric(rng: DPRandom, rate: float, shape: tuple[int, ...]) -> np.ndarray:
    """Discrete Laplace noise P(k) ~ exp(-rate |k|): the difference of two geometrics."""
    first = np.floor(-np.log(rng.uniform(shape)) / rate)
    second = np.floor(-np.log(rng.uniform(shape)) / rate)
    return (first - second).astype(np.int64)


class GeometricMechanism(_Calibrated):
    """f(D) + two-sided geometric noise for an integer scalar or vector query.

    The noise has P(k) = (1 - a)/(1 + a) a^|k| with a = exp(-eps/Delta), independently on
    every coordinate; it is eps-DP for a query with L1 sensitivity Delta. Variance per
    coordinate: 2a/(1 - a)^2.

    Args:
        epsilon: finite and > 0.
        sensitivity: L1 sensitivity Delta, finite and >= 0 (integer queries: usually 1).
        sampler: ``None`` (default: :func:`default_sampler`), ``"opendp"`` (OpenDP's
            exact discrete Laplace ``make_geometric``; needs an integer sensitivity) or
            ``"float"`` (floor of exponentials from 53-bit uniforms; not hardened, warned).
        rng: stream to spawn from (``None``: a fresh CSPRNG stream).
    """

    mechanism = "geometric"

    def __init__(
        self,
        epsilon: float,
        sensitivity: float = 1,
        *,
        sampler: GeometricSampler | None = None,
        rng: DPRandom | None = None,
    ) -> None:
        self._calibrate(epsilon, sensitivity)
        self.sampler = _check_sampler(sampler, ("float", "opendp"), rng)
        self._rng = resolve_rng(rng) if self.sampler == "float" else None
        self._opendp_cache: dict[bool, tuple[Any, float]] = {}
        if self.sampler == "opendp":
            _opendp()
            if self.sensitivity != int(self.sensitivity):
                raise SamplerUnavailableError(
                    "OpenDP's geometric sampler needs an integer sensitivity, got "
                    f"{self.sensitivity} (an integer query's L1 sensitivity is an integer)"
                )

    @property
    def alpha(self) -> float:
        """a = exp(-eps/Delta): the ratio between the probabilities of k and k + 1."""
        return math.exp(-self.epsilon / self.sensitivity) if self.sensitivity > 0 else 0.0

    def noise(self, shape: tuple[int, ...]) -> tuple[np.ndarray, str]:
        """Draw integer noise of ``shape`` and describe the sampler that ran."""
        if self.sensitivity == 0:
            return np.zeros(shape, dtype=np.int64), "zero sensitivity: no noise"
        if self.sampler == "float":
            assert self._rng is not None
            rate = self.epsilon / self.sensitivity
            return _two_sided_geometric(self._rng, rate, shape), "floor of exponentials"
        measurement, _ = self._opendp_measurement(len(shape) > 0)
        count = int(np.prod(shape, dtype=np.int64))
        if shape:
            out = np.array(measurement([0] * count), dtype=np.int64).reshape(shape)
        else:
            out = np.array(measurement(0), dtype=np.int64)
        return out, f"opendp {_opendp_version()} make_geometric (exact discrete Laplace)"

    def release(
        self, value: ArrayLike, *, accountant: Charger | None = None, label: str = ""
    ) -> Release:
        """Release ``value`` (an integer scalar or array) with two-sided geometric noise."""
        array = _integer_values(value)
        epsilon = self.epsilon_for(array)
        with _charge(accountant, epsilon, label or self.mechanism):
            noise, details = self.noise(array.shape)
        noisy, details = self._post_process(array + noise, details)
        return Release(
            value=_output(noisy, array.ndim == 0),
            epsilon=epsilon,
            mechanism=self.mechanism,
            sampler=self.sampler,
            sensitivity=self.sensitivity,
            scale=self.scale,
            randomness=self._rng.description if self._rng else "OpenDP internal CSPRNG",
            details=details,
        )

    def _post_process(self, noisy: np.ndarray, details: str) -> tuple[np.ndarray, str]:
        """The released values from the noisy ones (as they are here), and their details."""
        return noisy, details

    def _opendp_measurement(self, vector: bool) -> tuple[Any, float]:
        # OpenDP adds the noise to the input itself; we feed it zeros and add the noise
        # to the true value here, which is the same distribution and keeps int64 inputs.
        cached = self._opendp_cache.get(vector)
        if cached is not None:
            return cached
        dp = _opendp()
        atom = dp.atom_domain(T="i64")
        if vector:
            space = dp.vector_domain(atom), dp.l1_distance(T="i64")
        else:
            space = atom, dp.absolute_distance(T="i64")
        measurement, epsilon = _opendp_within(
            self, dp.m.make_geometric, space, int(self.sensitivity)
        )
        self._opendp_cache[vector] = (measurement, epsilon)
        return measurement, epsilon


class TruncatedGeometricMechanism(GeometricMechanism):
    """The geometric mechanism with its output clamped to the range [lower, upper].

    Inputs must lie in the range. Clamping is post-processing, so the mechanism is
    eps-DP like :class:`GeometricMechanism`; it is the truncated a-geometric mechanism of
    Ghosh et al. (2009), whose exact matrix is :meth:`matrix`. With eps = ln 2,
    Delta = 1 and range {0, 1, 2} this is paper 002's truncated 1/2-geometric mechanism
    (Example 4.1, Figure "Truncated 1/2-Geometric Mechanism").
    """

    mechanism = "truncated-geometric"

    def __init__(
        self,
        epsilon: float,
        lower: int,
        upper: int,
        sensitivity: float = 1,
        *,
        sampler: GeometricSampler | None = None,
        rng: DPRandom | None = None,
    ) -> None:
        for name, end in (("lower", lower), ("upper", upper)):
            if isinstance(end, bool) or not isinstance(end, (int, np.integer)):
                raise PrivacyParameterError(f"{name} must be an integer, got {end!r}")
        if lower > upper:
            raise PrivacyParameterError(f"empty range: lower = {lower} > upper = {upper}")
        if upper - lower > 10**6:
            raise PrivacyParameterError("the range may hold at most 10^6 + 1 values")
        super().__init__(epsilon, sensitivity, sampler=sampler, rng=rng)
        self.lower = int(lower)
        self.upper = int(upper)

    def matrix(self) -> np.ndarray:
        """Exact P[x - lower, y - lower] = P(output y | input x) over the range.

        Interior outputs: (1 - a)/(1 + a) a^|y - x|; each end collects the tail:
        P(lower | x) = a^(x - lower)/(1 + a) and P(upper | x) = a^(upper - x)/(1 + a).
        """
        size = self.upper - self.lower + 1
        if size == 1:
            return np.ones((1, 1))
        a = self.alpha
        values = np.arange(size)
        distance = np.abs(values[:, None] - values[None, :])
        matrix = (1 - a) / (1 + a) * a ** distance.astype(np.float64)
        matrix[:, 0] = a ** values.astype(np.float64) / (1 + a)
        matrix[:, -1] = a ** (size - 1 - values).astype(np.float64) / (1 + a)
        return matrix

    def release(
        self, value: ArrayLike, *, accountant: Charger | None = None, label: str = ""
    ) -> Release:
        """Release ``value`` (integers in [lower, upper]) clamped to the range."""
        array = _integer_values(value)
        if np.any(array < self.lower) or np.any(array > self.upper):
            raise PrivacyParameterError(f"the query value must lie in [{self.lower}, {self.upper}]")
        return super().release(array, accountant=accountant, label=label)

    def _post_process(self, noisy: np.ndarray, details: str) -> tuple[np.ndarray, str]:
        """Clamped to [lower, upper] (post-processing: no privacy spent)."""
        clamped = np.clip(noisy, self.lower, self.upper)
        return clamped, f"{details}; clamped to [{self.lower}, {self.upper}]"


# --- one-shot helpers ---------------------------------------------------------------


def laplace(
    value: ArrayLike,
    epsilon: float,
    sensitivity: float,
    *,
    sampler: LaplaceSampler | None = None,
    bound: float | None = None,
    rng: DPRandom | None = None,
    accountant: Charger | None = None,
    label: str = "",
) -> Release:
    """One Laplace release through a fresh :class:`LaplaceMechanism`."""
    mechanism = LaplaceMechanism(epsilon, sensitivity, sampler=sampler, bound=bound, rng=rng)
    return mechanism.release(value, accountant=accountant, label=label)


def geometric(
    value: ArrayLike,
    epsilon: float,
    sensitivity: float = 1,
    *,
    sampler: GeometricSampler | None = None,
    rng: DPRandom | None = None,
    accountant: Charger | None = None,
    label: str = "",
) -> Release:
    """One two-sided geometric release through a fresh :class:`GeometricMechanism`."""
    mechanism = GeometricMechanism(epsilon, sensitivity, sampler=sampler, rng=rng)
    return mechanism.release(value, accountant=accountant, label=label)
