"""The K-norm mechanism (Hardt and Talwar) for any convex body K in R^d.

DPHMM paper (Xiao et al., seeds 001/004), section 3.1, Definition 3.3 and equation (1):
given a convex body K (for DPHMM the sensitivity hull, section 5.1) the mechanism releases

    z = f + r U,    r ~ Gamma(k + 1, scale 1/eps),    U uniform in K,

where k = dim span(K).  The output density on the k-dimensional affine subspace f + span(K)
is exp(-eps ||z - f||_K) / (Gamma(k + 1) Vol_k(K) / eps^k), and ||Z - f||_K follows
Gamma(k, 1/eps) (shape k, not k + 1).  See ``docs/dphmm.md``.

What is here:

- :class:`ConvexBody`: K given by points (its convex hull) or as an L1 / L2 / Linf ball.
  Flat (lower-dimensional) point sets are projected onto their span with an SVD, where Qhull
  is run in k dimensions (in R^d Qhull fails with QH6154 / QH6214, and ``QJ`` would invent a
  sliver); the orthogonal residual is a membership test.  The body provides the gauge
  ||x||_K (Minkowski functional: min t >= 0 with x in tK, +inf outside span K), a
  point-in-hull test with a tolerance, its k-volume and exact uniform sampling.
- :class:`KNormMechanism`: the mechanism (validated epsilon, injectable randomness), its
  log-density, and a report of the privacy spent, the sampler that ran and where its
  bits came from.

Exact uniform samplers: a polytope is triangulated (``scipy.spatial.Delaunay`` of its hull
vertices in span coordinates), a simplex is drawn with probability proportional to its
volume, then a Dirichlet(1, ..., 1) point in it; balls use the classical exact samplers
(L2: Gaussian direction times U^(1/k); L1: exponential spacings with random signs;
Linf: uniform cube).  No random walk (hit-and-run is only approximately uniform, hence not
exactly DP).

**Randomness** (``docs/dp-layer.md``, "Randomness"; ``docs/dphmm.md``).  By default every
draw comes from :meth:`smc_hmm.dp.random.DPRandom.system`, the operating system's CSPRNG,
through exact transforms of its uniforms: Exp(1) = -ln U, Gamma(k + 1) as a sum of k + 1
exponentials, Dirichlet(1, ..., 1) as normalised exponentials, Gaussian directions by
Box-Muller, the simplex by inverting the volume CDF.  No numpy pseudo-random generator is
involved.  For tests and reproducible experiments ``rng`` may be
``DPRandom.insecure_seeded(seed)`` or a ``numpy.random.Generator``; releases then say
INSECURE in ``randomness``.

**The stated exception: no floating-point hardening.**  The K-norm output is a
floating-point vector f + r U.  OpenDP has no K-norm sampler and Mironov's snapping
analysis covers the one-dimensional Laplace mechanism only, so unlike the Laplace and
geometric mechanisms (:mod:`smc_hmm.dp.mechanisms`) this mechanism is *not* hardened
against attacks on the low-order bits of floating-point noise (Mironov 2012);
``KNormRelease.hardened`` is always False and the tests pin it.  Its randomness is
hardened (the CSPRNG above); its arithmetic is not.  The aggregate protocol's L2 noise
(:func:`smc_hmm.dp.classifier.l2_noise`) and the DPHMM release share this exception; the
aggregate protocol further rounds the noise to its fixed-point grid before encryption.
"""

from __future__ import annotations

import math
import numbers
import secrets
from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull, Delaunay
from scipy.special import gammaln

from smc_hmm.dp.params import check_epsilon as _check_positive
from smc_hmm.dp.params import check_points
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import DPHMMParameterError, InvalidConvexBodyError

__all__ = [
    "DEFAULT_TOL",
    "ConvexBody",
    "KNormMechanism",
    "KNormRelease",
    "check_epsilon",
    "default_rng",
    "noise_source",
    "span_basis",
]

#: Relative tolerance of membership tests (span residual and gauge <= 1 + tol).
DEFAULT_TOL = 1e-9

_BALL_NORMS = {"l1": 1, "l2": 2, "linf": np.inf}

SAMPLER_SIMPLEX = "exact simplex decomposition (Delaunay, volume-weighted, Dirichlet(1,...,1))"
SAMPLER_SEGMENT = "exact simplex decomposition (segment, uniform)"
SAMPLER_BALL = {
    "l1": "L1 ball (exponential spacings, random signs)",
    "l2": "L2 ball (Gaussian direction x U^(1/k))",
    "linf": "Linf ball (uniform cube)",
}


def default_rng(rng: np.random.Generator | None = None) -> np.random.Generator:
    """Return ``rng`` after checking its type, or a fresh generator seeded from ``secrets``.

    For simulations and evaluations (walks of :mod:`smc_hmm.dp.evaluation.gridworld`), never
    for DP noise: the mechanism's randomness comes from :func:`noise_source`."""
    if rng is None:
        return np.random.default_rng(secrets.randbits(128))
    if not isinstance(rng, np.random.Generator):
        raise DPHMMParameterError(
            f"rng must be a numpy.random.Generator or None, got {type(rng).__name__}"
        )
    return rng


class _GeneratorDraws:
    """The draws of :class:`~smc_hmm.dp.random.DPRandom` from a caller's numpy Generator
    (tests and reproducible experiments only: releases say INSECURE)."""

    insecure = True
    description = "numpy Generator supplied by the caller (INSECURE: tests and experiments only)"

    def __init__(self, generator: np.random.Generator) -> None:
        self._generator = generator

    def spawn(self) -> _GeneratorDraws:
        return self  # the caller's stream, as given

    def uniform(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        return self._generator.random(shape)

    def exponential(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        return self._generator.standard_exponential(shape)

    def standard_normal(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        return self._generator.standard_normal(shape)

    def signs(self, shape: int | tuple[int, ...] = ()) -> np.ndarray:
        return self._generator.choice(np.array([-1.0, 1.0]), size=shape)

    def categorical(self, p: np.ndarray, size: int) -> np.ndarray:
        return self._generator.choice(len(p), size=size, p=p)


NoiseSource = DPRandom | _GeneratorDraws


def noise_source(rng: DPRandom | np.random.Generator | None = None) -> NoiseSource:
    """The randomness of a K-norm draw: the OS CSPRNG for ``None`` (the default), a child
    stream of a :class:`~smc_hmm.dp.random.DPRandom`, or a caller's numpy Generator
    (INSECURE, reproducible experiments)."""
    if rng is None:
        return DPRandom.system()
    if isinstance(rng, DPRandom):
        return rng.spawn()
    if isinstance(rng, np.random.Generator):
        return _GeneratorDraws(rng)
    if isinstance(rng, _GeneratorDraws):
        return rng
    raise DPHMMParameterError(
        "rng must be a smc_hmm.dp.random.DPRandom, a numpy.random.Generator (INSECURE, "
        f"experiments) or None, got {type(rng).__name__}"
    )


def check_epsilon(eps: object, name: str = "eps") -> float:
    """Validate a privacy parameter (a real number, finite and > 0) with this module's
    error class, :class:`~smc_hmm.errors.DPHMMParameterError`."""
    return _check_positive(eps, name, error=DPHMMParameterError)


def span_basis(x: np.ndarray, tol: float = DEFAULT_TOL) -> np.ndarray:
    """Orthonormal basis (d, k) of the smallest SVD subspace (through the origin) that holds
    every row of ``x`` within ``10 * tol`` (relative to the largest row norm): the rank
    decision and the membership tolerance agree, however many points there are."""
    scale = float(np.max(np.linalg.norm(x, axis=1))) if x.size else 0.0
    if scale == 0.0:
        return np.zeros((x.shape[1], 0))
    xs = x / scale
    _, _, vt = np.linalg.svd(xs, full_matrices=False)
    for k in range(1, vt.shape[0] + 1):
        b = vt[:k].T
        if np.max(np.linalg.norm(xs - (xs @ b) @ b.T, axis=1)) <= 10.0 * tol:
            return b.copy()
    return vt.T.copy()


class ConvexBody:
    """A convex body K in R^d containing the origin in its relative interior.

    Build it with :meth:`from_points` (the convex hull of points; sensitivity hulls are
    symmetric, so they contain the origin) or :meth:`ball`.  Attributes: ``dim`` (d),
    ``rank`` (k = dim span K), ``basis`` (d x k orthonormal basis of span K), ``volume``
    (k-dimensional volume; 1 for the point body {0}), ``kind`` ("polytope", "l1", "l2",
    "linf") and ``sampler`` (the name of the exact uniform sampler).
    """

    def __init__(self) -> None:  # use the constructors
        self.kind = "polytope"
        self.dim = 0
        self.rank = 0
        self.scale = 1.0
        self.radius = 1.0
        self.tol = DEFAULT_TOL
        self.basis = np.zeros((0, 0))
        self.vertices = np.zeros((0, 0))  # span coordinates (polytopes)
        self._normals = np.zeros((0, 0))  # (F, k) facet normals in span coordinates
        self._offsets = np.zeros(0)  # (F,) > 0: facet j is {y : normals[j] . y = offsets[j]}
        self._facet_points = np.zeros((0, 0, 0))  # (F, k, k) facet simplices (span coords)
        self.sampler = ""
        self._simplices = np.zeros((0, 0, 0))  # Delaunay simplices, span coordinates
        self._simplex_p = np.zeros(0)
        self.volume = 1.0

    # -- constructors ---------------------------------------------------------------------

    @classmethod
    def from_points(cls, points: object, *, tol: float = DEFAULT_TOL) -> ConvexBody:
        """K = Conv(points) for points of shape (m, d); the origin must lie in K's relative
        interior (true of every symmetric set such as a sensitivity hull)."""
        pts = check_points(points, "points", error=InvalidConvexBodyError)
        tol = _check_tol(tol)
        body = cls()
        body.kind = "polytope"
        body.tol = tol
        body.dim = pts.shape[1]
        body.scale = float(np.max(np.linalg.norm(pts, axis=1)))
        if body.scale == 0.0:
            body._set_point(pts.shape[1])
            return body
        body.basis = span_basis(pts, tol)
        k = body.rank = body.basis.shape[1]
        y = (pts / body.scale) @ body.basis  # work at unit scale, rescale at the end
        if k == 1:
            lo, hi = float(y.min()), float(y.max())
            if not (lo < -tol and hi > tol):
                raise InvalidConvexBodyError(
                    "the origin is not in the relative interior of K (no K-norm)"
                )
            body.vertices = np.array([[lo], [hi]]) * body.scale
            body._normals = np.array([[1.0], [-1.0]])
            body._offsets = np.array([hi, -lo]) * body.scale
            body.volume = (hi - lo) * body.scale
            body.sampler = SAMPLER_SEGMENT
            return body
        try:
            hull = ConvexHull(y)
        except Exception as exc:  # QhullError: affine span lower than the linear span
            raise InvalidConvexBodyError(
                f"the origin is not in the relative interior of K (Qhull: {exc!s:.80})"
            ) from None
        normals = hull.equations[:, :-1]
        offsets = -hull.equations[:, -1]
        if np.any(offsets <= tol):
            raise InvalidConvexBodyError(
                "the origin is not in the relative interior of K (no K-norm)"
            )
        verts = y[hull.vertices]
        body._normals = normals
        body._offsets = offsets * body.scale
        body.vertices = verts * body.scale
        body._facet_points = y[hull.simplices] * body.scale
        body.volume = float(hull.volume) * body.scale**k
        tri = Delaunay(verts)
        simplices = verts[tri.simplices] * body.scale  # (S, k+1, k)
        edges = simplices[:, 1:, :] - simplices[:, :1, :]
        vols = np.abs(np.linalg.det(edges)) / math.factorial(k)
        total = float(vols.sum())
        if not math.isclose(total, body.volume, rel_tol=1e-6):
            raise InvalidConvexBodyError(
                f"triangulation volume {total:g} != hull volume {body.volume:g}"
            )
        keep = vols > 0
        body._simplices = simplices[keep]
        body._simplex_p = vols[keep] / vols[keep].sum()
        body.sampler = SAMPLER_SIMPLEX
        return body

    @classmethod
    def ball(cls, norm: str, dim: int, radius: float = 1.0) -> ConvexBody:
        """The norm ball {x in R^dim : ||x||_p <= radius} for norm "l1", "l2" or "linf"."""
        if norm not in _BALL_NORMS:
            raise InvalidConvexBodyError(f"norm must be one of {sorted(_BALL_NORMS)}, got {norm!r}")
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 1:
            raise InvalidConvexBodyError(f"dim must be an integer >= 1, got {dim!r}")
        radius = check_epsilon(radius, "radius")
        body = cls()
        body.kind = norm
        body.dim = body.rank = int(dim)
        body.radius = body.scale = radius
        body.basis = np.eye(body.dim)
        k = body.dim
        if norm == "l2":
            body.volume = math.exp((k / 2) * math.log(math.pi) - gammaln(k / 2 + 1)) * radius**k
        elif norm == "l1":
            body.volume = math.exp(k * math.log(2 * radius) - gammaln(k + 1))
        else:
            body.volume = (2 * radius) ** k
        body.sampler = SAMPLER_BALL[norm]
        return body

    def _set_point(self, dim: int) -> None:
        self.rank = 0
        self.scale = 1.0
        self.basis = np.zeros((dim, 0))
        self.vertices = np.zeros((1, 0))
        self.volume = 1.0
        self.sampler = "none (K = {0}: zero-dimensional body)"

    # -- geometry -------------------------------------------------------------------------

    def _coords(self, x: object) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        arr = np.asarray(x, dtype=float)
        if arr.ndim == 0 or arr.shape[-1] != self.dim:
            raise DPHMMParameterError(
                f"points must have last dimension {self.dim}, got shape {arr.shape}"
            )
        lead = arr.shape[:-1]
        flat = arr.reshape(-1, self.dim)
        y = flat @ self.basis
        resid = np.linalg.norm(flat - y @ self.basis.T, axis=1)
        limit = self.tol * (self.scale + np.linalg.norm(flat, axis=1))
        in_span = resid <= limit
        return y, in_span, lead

    def gauge(self, x: object) -> np.ndarray:
        """||x||_K = min{t >= 0 : x in tK} for points x of shape (..., d); +inf outside span K."""
        y, in_span, lead = self._coords(x)
        if self.kind in _BALL_NORMS:
            g = np.linalg.norm(y, ord=_BALL_NORMS[self.kind], axis=1) / self.radius
        elif self.rank == 0:
            g = np.zeros(len(y))
        else:
            g = np.max((y @ self._normals.T) / self._offsets, axis=1)
            g = np.maximum(g, 0.0)
        g = np.where(in_span, g, np.inf)
        return g.reshape(lead)

    def contains(self, x: object, tol: float | None = None) -> np.ndarray:
        """Robust point-in-K test for points (..., d): in span K and ||x||_K <= 1 + tol."""
        tol = self.tol if tol is None else _check_tol(tol)
        return self.gauge(x) <= 1.0 + tol

    def facet_of(self, x: object) -> np.ndarray:
        """Index of the facet cone (origin + facet simplex) holding each point (polytopes)."""
        if self.kind != "polytope" or self.rank == 0:
            raise InvalidConvexBodyError("facet cones are defined for polytopes of rank >= 1")
        y, _, lead = self._coords(x)
        return np.argmax((y @ self._normals.T) / self._offsets, axis=1).reshape(lead)

    def facet_cone_volumes(self) -> np.ndarray:
        """k-volumes of the facet cones (they partition K; the sum is ``volume``)."""
        if self.kind != "polytope" or self.rank == 0:
            raise InvalidConvexBodyError("facet cones are defined for polytopes of rank >= 1")
        if self.rank == 1:
            return np.array([self.vertices[1, 0], -self.vertices[0, 0]])
        # facet j and the origin span a simplex (the apex is the origin)
        return np.abs(np.linalg.det(self._facet_points)) / math.factorial(self.rank)

    def to_ambient(self, y: np.ndarray) -> np.ndarray:
        """Map span coordinates (..., k) back to R^d."""
        return np.asarray(y) @ self.basis.T

    # -- sampling -------------------------------------------------------------------------

    def sample_uniform(self, rng: DPRandom | np.random.Generator | None, size: int) -> np.ndarray:
        """``size`` exact uniform draws from K, shape (size, d), from :func:`noise_source`."""
        source = noise_source(rng)
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
            raise DPHMMParameterError(f"size must be an integer >= 0, got {size!r}")
        size = int(size)
        k = self.rank
        if k == 0:
            return np.zeros((size, self.dim))
        if self.kind == "l2":
            g = source.standard_normal((size, k))
            g /= np.linalg.norm(g, axis=1, keepdims=True)
            u = source.uniform(size) ** (1.0 / k)
            y = g * u[:, None]
        elif self.kind == "l1":
            e = source.exponential((size, k + 1))
            y = e[:, :k] / e.sum(axis=1, keepdims=True)
            y *= source.signs((size, k))
        elif self.kind == "linf":
            y = 2.0 * source.uniform((size, k)) - 1.0
        elif k == 1:
            lo, hi = self.vertices[0, 0], self.vertices[1, 0]
            return self.to_ambient(lo + (hi - lo) * source.uniform((size, 1)))
        else:
            idx = source.categorical(self._simplex_p, size)
            e = source.exponential((size, k + 1))  # Dirichlet(1, ..., 1) weights
            w = e / e.sum(axis=1, keepdims=True)
            return self.to_ambient(np.einsum("nj,njk->nk", w, self._simplices[idx]))
        return self.to_ambient(y * self.radius)

    def __repr__(self) -> str:
        return (
            f"ConvexBody(kind={self.kind!r}, dim={self.dim}, rank={self.rank}, "
            f"volume={self.volume:.6g})"
        )


def _check_tol(tol: object) -> float:
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise DPHMMParameterError(f"tol must be a real number, got {type(tol).__name__}")
    value = float(tol)
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise DPHMMParameterError(f"tol must be finite and in [0, 1), got {value!r}")
    return value


@dataclass(frozen=True)
class KNormRelease:
    """One release: ``value`` = f + noise, with the noise's K-norm ``radius`` (its gauge),
    the privacy ``epsilon`` spent, the ``sampler`` that ran, the body's ``rank`` and the
    ``randomness`` behind it (``"os.urandom CSPRNG"`` by default)."""

    value: np.ndarray
    noise: np.ndarray
    radius: float
    epsilon: float
    sampler: str
    rank: int
    randomness: str = DPRandom.system().description

    @property
    def insecure(self) -> bool:
        """True if the noise came from a seeded stream or a caller's numpy Generator."""
        return "INSECURE" in self.randomness

    @property
    def hardened(self) -> bool:
        """Always False: the K-norm output is floating point (the module's stated
        exception; its randomness is the CSPRNG unless ``insecure``)."""
        return False


class KNormMechanism:
    """The K-norm mechanism for a :class:`ConvexBody` of rank k >= 1 and privacy ``eps``.

    ``release(f)`` returns f + r U with r ~ Gamma(k + 1, 1/eps) and U uniform in K
    (Definition 3.3 of the DPHMM paper).  ``spent`` is the sum of epsilons of the releases
    made so far through this instance (sequential composition of its own releases).
    ``rng``: ``None`` (the OS CSPRNG), a :class:`~smc_hmm.dp.random.DPRandom` (this
    mechanism spawns its own stream) or a numpy Generator (INSECURE, experiments); see
    :func:`noise_source`.
    """

    def __init__(
        self, body: ConvexBody, eps: float, rng: DPRandom | np.random.Generator | None = None
    ) -> None:
        if not isinstance(body, ConvexBody):
            raise InvalidConvexBodyError(f"body must be a ConvexBody, got {type(body).__name__}")
        if body.rank == 0:
            raise InvalidConvexBodyError(
                "K is zero-dimensional ({0}): the K-norm mechanism needs rank >= 1"
            )
        self.body = body
        self.epsilon = check_epsilon(eps)
        self.rng = noise_source(rng)
        self.spent = 0.0
        self.releases = 0

    @classmethod
    def from_points(
        cls, points: object, eps: float, rng: DPRandom | np.random.Generator | None = None
    ) -> KNormMechanism:
        """Mechanism for K = Conv(points)."""
        return cls(ConvexBody.from_points(points), eps, rng)

    @property
    def sampler(self) -> str:
        return self.body.sampler

    @property
    def rank(self) -> int:
        return self.body.rank

    def sample_noise(self, size: int) -> np.ndarray:
        """``size`` i.i.d. noise vectors r U (shape (size, d)); spends no budget by itself:
        use :meth:`release` for a release."""
        u = self.body.sample_uniform(self.rng, size)
        k = self.body.rank  # Gamma(k + 1, 1/eps): a sum of k + 1 exponentials
        r = self.rng.exponential((int(size), k + 1)).sum(axis=1) / self.epsilon
        return u * r[:, None]

    def release(self, value: object) -> KNormRelease:
        """Release f + r U for the true answer f (shape (d,))."""
        f = np.asarray(value, dtype=float)
        if f.shape != (self.body.dim,) or not np.all(np.isfinite(f)):
            raise DPHMMParameterError(
                f"the true answer must be a finite vector of shape ({self.body.dim},), "
                f"got shape {f.shape}"
            )
        noise = self.sample_noise(1)[0]
        self.spent += self.epsilon
        self.releases += 1
        return KNormRelease(
            value=f + noise,
            noise=noise,
            radius=float(self.body.gauge(noise)),
            epsilon=self.epsilon,
            sampler=self.sampler,
            rank=self.body.rank,
            randomness=self.rng.description,
        )

    def log_normaliser(self) -> float:
        """log(Gamma(k + 1) Vol_k(K) / eps^k): depends on K and eps only."""
        k = self.body.rank
        return float(gammaln(k + 1) + math.log(self.body.volume) - k * math.log(self.epsilon))

    def log_density(self, z: object, values: object, *, normalised: bool = True) -> np.ndarray:
        """log p(z | f) for observed z (d,) and candidate true answers ``values`` (..., d).

        The density lives on f + span(K) (w.r.t. k-dimensional Lebesgue measure there);
        it is -inf where z - f is outside span K.  With ``normalised=False`` the constant
        :meth:`log_normaliser` (which cancels in a posterior) is omitted.
        """
        z = np.asarray(z, dtype=float)
        diff = z - np.asarray(values, dtype=float)
        out = -self.epsilon * self.body.gauge(diff)
        if normalised:
            out = out - self.log_normaliser()
        return out
