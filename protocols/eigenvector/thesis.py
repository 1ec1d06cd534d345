"""The eigenvector protocol's thesis mode: the thesis's protocol as published.

Paper: 003 (Pathak), section 4.1.1 and appendix A.1 (Pathak and Raj 2010,
"Privacy-preserving protocols for eigenvector computation"), N-party form.

The comparison baseline (``mode = "thesis"``), not for use where the owners must be
protected from each other: every owner holds the decryption key, and the scaling,
padding and decoys hide the iterates from Trent only.  An owner recovers r_t by the gcd
of the integers it decrypts, then u_t exactly, and from about k rounds the other owners'
(padded) Gram matrix (``tests/protocols/test_eigenvector_attacks.py`` runs both attacks;
``docs/eigenvector.md`` has the numbers).  The default mode is
:mod:`protocols.eigenvector.private`.

Data owners P_1..P_N hold horizontally split data: owner i holds A_i (k x n_i,
the same k rows, e.g. k features of n_i samples each).  Together they compute
the principal eigenvector of M^T M, M = [A_1 ... A_N] (k x n), by power
iteration.  The eigenvector x (length n) stays split in shares alpha_i
(length n_i, owner i's columns); one iteration (equations 4.1-4.5) is

    u      = sum_i A_i alpha_i                      (length k: through Trent)
    alpha_i <- A_i^T u / sqrt(sum_j ||A_j^T u||^2)  (each owner locally, eq. 4.5)

so everything that crosses the network has length k, not n: per round each
owner sends k + 1 ciphertexts and receives k + 1, whatever the number of samples.

Roles (party names are public parameters, :class:`ThesisParams`):

* **key authority** (``key_authority``, default ``"authority"``): generates the
  Paillier key pair (``ctx.keypair``), gives the public key to everyone and
  the private key (the primes p, q) to the owners only, then leaves (in the
  thesis mode: every owner can decrypt everything encrypted under it).  It is
  not Trent and learns nothing.  Output: ``None``.
* **owners** (``owners``): owner i holds A_i as a (k, n_i) float array with
  |entries| <= ``max_abs``.  Output: its normalised share alpha_i (length n_i)
  of the principal eigenvector of M^T M (unit norm over all shares, sign
  arbitrary but common to all owners).
* **arbitrator** Trent (``arbitrator``): holds the public key only.  Output:
  ``{"rounds", "decoys", "eigenvector"}`` -- the number of rounds, how many of
  them he sent decoys in, and the gathered eigenvector (``None`` unless
  ``reveal_to_trent``).

Messages (one send or receive per step; round t = 1, 2, ... repeats 3-7):

1. authority -> Trent and every owner, ``"pk"``: the public key.
2. authority -> every owner, ``"sk"``: (p, q), the shared decryption key.
3. owner i -> Trent, ``"contribution"``: E[A_i' alpha_i] (k ciphertexts, or
   ceil(k / slots) with packing).
4. Trent -> every owner, ``"vector"``: E[w_t] (as many), where w_t is
   r_t u_t (a real vector) with probability p and a decoy otherwise.
5. owner i -> Trent, ``"norm_term"``: E[||A_i'^T w_t||^2] (one ciphertext).
6. Trent -> every owner, ``"norm"``: E[sum_i ||A_i'^T w_t||^2]; each owner
   sets alpha_i = A_i'^T w_t / sqrt(norm) (eq. 4.4: r_t cancels).
7. owner i -> Trent, ``"status"``: whether the owners' convergence test passed
   (every owner computes the same bit from the same w_t).  All stop after the
   first round whose status is true; at round ``max_rounds`` without it every
   party raises :class:`~smc_hmm.errors.ConvergenceError`.
8. owner i -> Trent, ``"final_term"``: E[||alpha_i^data||^2] (the share without
   its padding columns); Trent -> every owner, ``"final_norm"``: their sum.
   Each owner divides its data share by its square root.
9. only if ``reveal_to_trent``: owner i -> Trent, ``"share"``: alpha_i.

Every ciphertext Trent computes is re-randomised before it leaves him.

Packing (``slots`` > 1, a public parameter; ``ThesisParams.max_slots(key_bits)`` is
the most a key holds): the k-vectors of steps 3 and 4 travel as
ceil(k / slots) ciphertexts of ``slots`` signed fixed-point slots each
(:mod:`smc_hmm.crypto.packing`); Trent's sums, scalings and decoy noise act
on every slot at once, and the slot width is planned from the public bound on
w, so no slot can spill into the next.  It changes the cost, not what anyone
learns: at 2048 bits and k = 64, 4 ciphertexts instead of 64 per vector.
Frames (tags, sizes, shapes, scales, bounds) follow from the public
parameters alone, for decoy and real rounds alike
(``tests/protocols/test_protocol_eigenvector.py`` proves it with the
transcript harness).

Hardening (each an option, all on by default; thesis 4.1.1):

* ``encrypt``: homomorphic encryption of all that Trent sees (Paillier; Trent
  adds E[A_i alpha_i] and the norm terms without the key).  Off: the same
  messages carry plaintexts (the thesis's basic protocol, for comparison).
* ``scaling``: Trent multiplies u_t by a fresh integer r_t, uniform in
  ``scale_range`` = [r_min, r_max] (default [2^20, 2^40]), before sending:
  E[u]^r = E[r u].  The owners compute their norm terms from r_t u_t, so the
  normalisation term they get back is r_t^2 sum_j ||A_j'^T u_t||^2, i.e. the
  norm scaled by r_t^2, and r_t cancels in alpha (eq. 4.4).  Trent never
  exponentiates the norm a second time (that would give r_t^4).
* ``padding``: owner i appends r_a,i I_k to A_i (A_i' = [A_i, r_a,i I]), with
  r_a,i uniform in ``pad_range`` (default [max_abs/2, max_abs]) and private.
  M'M'^T = MM^T + (sum_i r_a,i^2) I: the eigenvectors of MM^T are unchanged,
  every eigenvalue is shifted by sum_i r_a,i^2 (Theorem 4.1.1, A.1); the
  principal eigenvector of M'^T M', restricted to the data columns and
  renormalised (step 8), is that of M^T M.
* ``decoys``: in every round, with probability 1 - ``decoy_p``, Trent sends a
  decoy instead of the real vector: q (u_bar + e), where u_bar is one earlier
  real vector or the mean of up to ``decoy_mean`` of them (all unscaled, kept
  encrypted by Trent), e ~ N(0, sigma^2 I_k) clipped at 8 sigma, sigma =
  ``decoy_noise`` * (the public bound on |u| entries), and q a fresh scaling
  factor from the same range as r_t (a multiple of the number of vectors
  averaged, so q u_bar is an integer combination).  He ignores what the owners
  send in the next round and replays the real vector he withheld
  (thesis: "oblivious transfer").  Every round is real with probability p;
  the expected number of rounds is (real iterations) / p.

Convergence (owners' side, decoy-proof): the owners stop after round t when
the unit vectors of the last two vectors they received agree,
|| w_t/||w_t|| - w_(t-1)/||w_(t-1)|| || <= ``tol``.  Two consecutive real
vectors are consecutive power iterates, so this is the usual test.  A decoy
passes it only if its noise lands within tol ||u_bar + e|| of the other
vector's direction: since e is Gaussian, independent of everything else, that
happens with probability at most chi2_(k-1).cdf((tol (U + 8 sigma sqrt k) /
sigma)^2) (Anderson's inequality; U is the public bound on ||u||), and
:class:`ThesisParams` refuses parameters for which ``max_rounds`` times that bound
exceeds 2^-30.  Trent checks anyway: should the owners ever stop on a decoy he
raises :class:`~smc_hmm.errors.ConvergenceError` instead of finishing.

Who learns what (semi-honest parties; Trent colludes with no owner; the key
authority leaves after step 2 and colludes with no one):

* Trent sees the public key and ciphertexts only (semantic security of
  Paillier, DCR assumption), plus the owners' status bit per round, i.e. the
  number of rounds (visible from the transcript's length anyway; it says how
  fast the padded spectrum converges, a coarse function of the spectral gap
  (lambda_2 + s) / (lambda_1 + s)).  At the end he learns the eigenvector (the
  concatenated shares) only if ``reveal_to_trent``.  Nothing else.
* Each owner sees, per round, the vector w_t -- a scaled real vector r_t u_t
  or a decoy, it cannot tell which from any frame -- and the normalisation
  term sum_j ||A_j'^T w_t||^2; at the end its own normalised share and
  sum_j ||alpha_j^data||^2.  What hides what:

  - r_t (uniform in [r_min, r_max], fresh per round, unknown to the owners)
    hides the other owners' part of u_t: owner i knows its own A_i' alpha_i
    but sees only r_t (A_i' alpha_i + others), so the others' sum is known
    only up to the unknown factor r_t (a segment of candidates, its length
    set by r_max / r_min), and the norm term only as r_t^2 times the others'
    terms.  Not information-theoretic: near convergence ||u_t|| tends to
    sqrt(lambda_1 + s), so ratios r_t / r_s become estimable from ||w_t||.
  - padding hides the null space of each owner's data from the others (a
    vector x with A_i x = 0 no longer projects r_t u_t onto the others'
    columns) and shifts every eigenvalue by s = sum_i r_a,i^2, unknown to each
    owner (it knows only its own r_a,i^2).  The Rayleigh quotients the owners
    see (norm / ||w||^2) estimate lambda_1 + s, not lambda_1.  Caveat: the
    final normalisation (step 8) reveals ||x^data||^2 = 1 - s ||w||^2 / norm,
    hence s and lambda_1 (the largest eigenvalue of MM^T) to every owner;
    the other eigenvalues stay shifted.
  - decoys hide which received vectors are real: the sequence of real w_t
    spans the Krylov space of M'M'^T, from which all its eigenvectors could be
    estimated (thesis, "Securing Krylov spaces").  Frames are identical, the
    scaling factor has the same distribution, and a decoy's direction differs
    from a real earlier vector's by about sigma sqrt(k) / ||u||: early in the
    run, where successive real iterates differ by more than that, decoys are
    hard to tell apart; near convergence a decoy stands out as an outlier
    (real iterates agree far better than the noise), which the convergence
    test above relies on.  sigma sets this trade-off.
  - Each owner also learns sum_(j != i) ||A_j'^T w_t||^2 for every w_t it
    receives, one quadratic form of the others' (padded) Gram matrix per
    round: inherent to the thesis's protocol, blurred by decoys and padding.

* The key authority sees nothing (it only sends).

A malicious Trent could send arbitrary vectors and learn nothing (he cannot
decrypt), but could bias the result; a malicious owner could bias it too
(semi-honest model, not covered).  If Trent colluded with an owner he would
learn u_t and the norm terms in the clear, i.e. the protocol without
encryption.

Run it::

    smc-hmm bench eigenvector --key-bits 2048 --owners 4 --modes thesis --decoy-p 0.8
    python examples/eigenvector_digits.py --dir DIR --mode thesis   # via smc-hmm launch

(``docs/eigenvector.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from protocols.eigenvector.shared import (
    SharedParams,
    check_input,
    finite,
    gather_shares,
    pair,
)
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray, PrivateKey
from smc_hmm.crypto.packing import PackedCipherArray, PackingPlan
from smc_hmm.errors import (
    ConvergenceError,
    InvalidInputError,
    ProtocolError,
    warn_weaker_mode,
)
from smc_hmm.messages import Ciphertexts, Key, Message, Revealed

#: decoy noise is clipped at this many standard deviations (public bound)
NOISE_CLIP = 8.0
#: ThesisParams refuses parameters under which a decoy could pass the convergence test
#: with probability above 2^-FOOL_BITS over the whole run
FOOL_BITS = 30
#: slack on |alpha| <= 1 for float rounding in the declared bounds
_SLACK = 1.0 + 1e-9


@dataclass(frozen=True)
class ThesisParams(SharedParams):
    """Public parameters of the thesis mode, agreed on before the run."""

    mode: ClassVar[str] = "thesis"

    scale: int = typed.whole(40, 8, 256)  # fixed-point fractional bits of every encrypted value
    # hardening (thesis 4.1.1), all on by default
    encrypt: bool = typed.flag(True)
    scaling: bool = typed.flag(True)
    scale_range: tuple[int, int] = (2**20, 2**40)
    padding: bool = typed.flag(True)
    pad_range: tuple[float, float] | None = None  # default (max_abs / 2, max_abs)
    decoys: bool = typed.flag(True)
    decoy_p: float = typed.number(0.8, 0, 1, low_open=True)  # probability a round is real
    decoy_noise: float = typed.number(0.01, 0, math.inf, low_open=True)  # sigma / bound on |u|
    decoy_mean: int = typed.whole(3, 1, None)  # a decoy averages 1..decoy_mean real vectors
    # performance: values per ciphertext of the k-vectors (1: no packing); see max_slots()
    slots: int = typed.whole(1, 1, None)

    def __post_init__(self) -> None:
        super().__post_init__()  # the ranges of the fields above too
        lo, hi = pair("scale_range", self.scale_range)
        if not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in (lo, hi)):
            raise InvalidInputError("scale_range must be two integers")
        if not 1 <= lo <= hi:
            raise InvalidInputError(f"scale_range must satisfy 1 <= r_min <= r_max, got {lo, hi}")
        object.__setattr__(self, "scale_range", (int(lo), int(hi)))
        pad = self.pad_range if self.pad_range is not None else (self.max_abs / 2, self.max_abs)
        plo, phi = pair("pad_range", pad)
        plo, phi = finite("pad_range[0]", plo), finite("pad_range[1]", phi)
        if plo > phi:
            raise InvalidInputError(f"pad_range must be increasing, got {pad}")
        object.__setattr__(self, "pad_range", (plo, phi))
        warn_weaker_mode(
            "eigenvector mode 'thesis' gives every owner the decryption key, so owners can "
            "read every iterate and each other's Gram products"
        )
        if self.decoys_on and self.fool_probability() > 2.0**-FOOL_BITS:
            raise InvalidInputError(
                f"decoy_noise = {self.decoy_noise:g} is too small for tol = {self.tol:g}: a "
                f"decoy could pass the convergence test with probability up to "
                f"{self.fool_probability():.2g} (limit 2^-{FOOL_BITS}); raise decoy_noise "
                "or lower tol"
            )

    # -- derived public quantities ------------------------------------------------------

    @property
    def decoys_on(self) -> bool:
        return self.decoys and self.decoy_p < 1.0

    @property
    def r_range(self) -> tuple[int, int]:
        return self.scale_range if self.scaling else (1, 1)

    @property
    def pad_max(self) -> float:
        return self.pad_range[1] if self.padding else 0.0

    def owner_u_bound(self, i: int) -> float:
        """Public bound on |entries of A_i' alpha_i| (||alpha_i|| <= 1, Cauchy-Schwarz)."""
        return math.sqrt(self.cols[i] * self.max_abs**2 + self.pad_max**2) * _SLACK

    @property
    def u_entry_bound(self) -> float:
        """Public bound on |entries of u| = |sum_i A_i' alpha_i|."""
        return sum(self.owner_u_bound(i) for i in range(len(self.owners)))

    @property
    def sigma(self) -> float:
        """Standard deviation of the decoy noise, in units of u."""
        return self.decoy_noise * self.u_entry_bound

    def fool_probability(self) -> float:
        """Upper bound on the probability that a decoy passes the convergence test in
        any of ``max_rounds`` rounds (module docstring)."""
        from scipy.stats import chi2

        k = self.rows
        reach = self.tol * (math.sqrt(k) * (self.u_entry_bound + NOISE_CLIP * self.sigma))
        truncation = (1.0 - 2.0 * _normal_tail(NOISE_CLIP)) ** -k
        one = chi2.cdf((reach / self.sigma) ** 2, k - 1) * truncation
        return min(1.0, self.max_rounds * one)

    def _ints(self, real: float) -> int:
        return math.ceil(real * 2**self.scale) + 1

    @property
    def contribution_bound(self) -> int:
        return max(self._ints(self.owner_u_bound(i)) for i in range(len(self.owners)))

    @property
    def noise_bound(self) -> int:
        return self._ints(NOISE_CLIP * self.sigma) if self.decoys_on else 0

    @property
    def vector_bound(self) -> int:
        """Bound on |w| as encoded integers: r_max (N C + noise), real or decoy."""
        return self.r_range[1] * (len(self.owners) * self.contribution_bound + self.noise_bound)

    @property
    def norm_term_bound(self) -> int:
        """Bound on ||A_i'^T w||^2 <= ||A_i'||_F^2 ||w||^2 (encoded)."""
        w = self.vector_bound / 2**self.scale
        frob = max(
            self.rows * (n * self.max_abs**2 + self.pad_max**2) for n in self.cols
        )  # ||A_i'||_F^2
        return self._ints(frob * self.rows * w * w * _SLACK)

    @property
    def unit_bound(self) -> int:
        return self._ints(_SLACK)

    # -- packing: the k-vectors as ceil(k / slots) ciphertexts of `slots` slots each --------

    @property
    def packed(self) -> bool:
        return self.encrypt and self.slots > 1

    @property
    def plan(self) -> PackingPlan:
        """Slots wide enough for the largest value a vector slot ever holds (w's bound)."""
        return PackingPlan(self.vector_bound.bit_length() + 2, self.slots)

    @property
    def packed_rows(self) -> int:
        return -(-self.rows // self.slots)

    def max_slots(self, key_bits: int) -> int:
        """The most slots a key of ``key_bits`` bits holds (plaintexts below n / 2^3)."""
        # the packed bound has bits(W) + (s - 1) slot_bits + 1 bits; max_plain >= 2^(bits - 4)
        spare = key_bits - 5 - self.vector_bound.bit_length()
        return max(1, min(self.rows, 1 + spare // self.plan.slot_bits))

    def randomizers(self, key_bits: int, rounds: int | None = None) -> dict[str, dict[str, int]]:
        """Fresh Paillier randomizers per party under the key authority's key in a run of
        ``rounds`` rounds (public once it ends, decoys included; default 2, the fewest: the
        owners' test compares two vectors): per round an owner's E[A_i' alpha_i] (step 3)
        and norm term (5), Trent's re-randomised vector (4) and norm (6); then the final
        terms (8).  None with ``encrypt`` off; the authority draws none."""
        t = 2 if rounds is None else rounds
        typed.integer("rounds", t, 2, self.max_rounds)
        vector = self.packed_rows if self.packed else self.rows
        each = t * (vector + 1) + 1 if self.encrypt else 0
        key = self.key_authority
        return {p: {key: each} for p in (*self.owners, self.arbitrator)} | {key: {}}

    def _vector_field(self, slot_bound: int):
        if self.packed:
            return Ciphertexts(self.scale, self.plan.packed_bound(slot_bound), (self.packed_rows,))
        return Ciphertexts(self.scale, slot_bound, (self.rows,))

    def messages(self, key_bits: int | None = None) -> dict[str, Message]:
        """The declared messages: scales and bounds from the public parameters only (the
        thesis mode's do not depend on ``key_bits``, which the private mode's do)."""
        n, k, f = len(self.owners), self.rows, self.scale

        def field(bound: int, shape: tuple, what: str):
            if self.encrypt:
                return self._vector_field(bound) if shape == (k,) else Ciphertexts(f, bound, shape)
            return Revealed(f"{what} in the clear (encrypt = false)", (np.ndarray,))

        return {
            "pk": Message("pk", Key()),
            "sk": Message("sk", Revealed("the shared decryption key (p, q), to owners", (list,))),
            "contribution": Message(
                "contribution", field(self.contribution_bound, (k,), "A_i' alpha_i")
            ),
            "vector": Message("vector", field(self.vector_bound, (k,), "w_t")),
            "norm_term": Message("norm_term", field(self.norm_term_bound, (1,), "||A_i'^T w||^2")),
            "norm": Message("norm", field(n * self.norm_term_bound, (1,), "the norm")),
            "status": Message("status", Revealed("the owners' convergence test", (bool,))),
            "final_term": Message("final_term", field(self.unit_bound, (1,), "||alpha_i||^2")),
            "final_norm": Message("final_norm", field(n * self.unit_bound, (1,), "||x||^2")),
            "share": Message("share", Revealed("the owner's eigenvector share", (np.ndarray,))),
        }


def _normal_tail(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def pad(a: np.ndarray, r_a: float) -> np.ndarray:
    """[A, r_a I_k]: the thesis's data padding (eigenvectors of AA^T unchanged)."""
    return np.hstack([a, r_a * np.eye(a.shape[0])])


def _numpy_rng(ctx) -> np.random.Generator:
    """A numpy generator seeded from the party's generator (CSPRNG unless a test seeds it)."""
    return np.random.default_rng(ctx.rng.randbits(128))


def _uniform(ctx, lo: float, hi: float) -> float:
    return lo + (hi - lo) * ctx.rng.random()


def _randint(ctx, lo: int, hi: int) -> int:
    return lo + ctx.rng.randbelow(hi - lo + 1)


# -- the two sides of every value Trent handles: ciphertexts or (encrypt = false) floats --


def _seal(pk, values, params: ThesisParams):
    values = np.asarray(values, dtype=np.float64)
    if params.packed and values.shape == (params.rows,):  # a k-vector: packed slots
        slots = np.zeros(params.packed_rows * params.slots)
        slots[: params.rows] = values
        shape = (params.packed_rows, params.slots)
        return PackedCipherArray.encrypt(pk, slots.reshape(shape), params.scale, params.plan)
    return CipherArray.encrypt(pk, values, params.scale) if params.encrypt else values


def _packed(value: CipherArray, slot_bound: int, params: ThesisParams):
    """A received k-vector as packed slots (declared slot bound), when packing is on."""
    if not params.packed:
        return value
    return PackedCipherArray(value, params.plan, params.slots, slot_bound)


def _wire(value):
    return value.cipher if isinstance(value, PackedCipherArray) else value


def _open(value, sk, params: ThesisParams) -> np.ndarray:
    if isinstance(value, PackedCipherArray):
        return value.decrypt(sk).reshape(-1)[: params.rows]
    if params.encrypt:
        return value.decrypt(sk)
    return np.asarray(value, dtype=np.float64)


def _refresh(value):
    return value.rerandomize() if isinstance(value, CipherArray | PackedCipherArray) else value


def _times(value, factor: int):
    """E[x]^factor = E[factor x] (or factor x in the clear)."""
    if isinstance(value, CipherArray | PackedCipherArray):
        return value.mul(int(factor))
    return value * float(factor)


def _noise_like(e: np.ndarray, params: ThesisParams) -> np.ndarray:
    """Plaintext noise laid out like the (packed) vector."""
    if not params.packed:
        return e
    slots = np.zeros(params.packed_rows * params.slots)
    slots[: params.rows] = e
    return slots.reshape(params.packed_rows, params.slots)


def _total(values):
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


# -- roles -------------------------------------------------------------------------------


def key_authority(ctx, _private, params: ThesisParams) -> None:
    """Generates (runtime) and distributes the key pair, then leaves."""
    pk, sk = ctx.keypair
    msg = params.messages()
    with ctx.phase("distribute key"):
        for peer in (params.arbitrator, *params.owners):
            ctx.send(peer, msg["pk"], pk)  # step 1: the public key to everyone
        for peer in params.owners:
            ctx.send(peer, msg["sk"], [int(sk.p), int(sk.q)])  # step 2: p, q to owners only
    return None


def owner(ctx, a, params: ThesisParams) -> np.ndarray:
    """Data owner P_i: power iteration on its share alpha_i; returns the normalised share."""
    i = params.owners.index(ctx.name)
    a = check_input(a, params, i)
    msg = params.messages()
    k, n_i = a.shape
    pk = ctx.recv(params.key_authority, msg["pk"])  # step 1
    key = ctx.recv(params.key_authority, msg["sk"])  # step 2
    p, q = key if len(key) == 2 else (0, 0)
    if not (isinstance(p, int) and isinstance(q, int) and 1 < p < pk.n and p * q == pk.n):
        raise ProtocolError("the key authority's private key does not match its public key")
    sk = PrivateKey(pk, p, q)
    rng = _numpy_rng(ctx)
    r_a = _uniform(ctx, *params.pad_range) if params.padding else 0.0
    a_pad = pad(a, r_a) if params.padding else a  # A_i' = [A_i, r_a I]
    alpha = rng.standard_normal(a_pad.shape[1])  # alpha_0: random, ||x_0|| = 1
    alpha /= np.linalg.norm(alpha) * math.sqrt(len(params.owners))
    previous = None
    for _round in range(params.max_rounds):
        with ctx.phase("iterate"):
            contribution = _wire(_seal(pk, a_pad @ alpha, params))
            ctx.send(params.arbitrator, msg["contribution"], contribution)  # step 3
            w = ctx.recv(params.arbitrator, msg["vector"])  # step 4: E[w_t]
            w = _open(_packed(w, params.vector_bound, params), sk, params)
            y = a_pad.T @ w  # A_i'^T w: r_t A_i'^T u_t, or a decoy's
            ctx.send(params.arbitrator, msg["norm_term"], _seal(pk, [y @ y], params))  # step 5
            norm = _open(ctx.recv(params.arbitrator, msg["norm"]), sk, params)[0]  # step 6
            if not norm > 0:
                raise ConvergenceError("the normalisation term is zero: M is zero")
            alpha = y / math.sqrt(norm)  # eq. 4.4/4.5: r_t cancels
            direction = w / np.linalg.norm(w)
            done = previous is not None and bool(np.linalg.norm(direction - previous) <= params.tol)
            previous = direction
            ctx.send(params.arbitrator, msg["status"], done)  # step 7
        if done:
            break
    else:
        raise ConvergenceError(
            f"the power iteration did not converge within max_rounds={params.max_rounds} "
            f"(tol={params.tol:g})"
        )
    with ctx.phase("normalise"):
        share = alpha[:n_i]  # drop the padding columns
        ctx.send(params.arbitrator, msg["final_term"], _seal(pk, [share @ share], params))  # 8
        total = _open(ctx.recv(params.arbitrator, msg["final_norm"]), sk, params)[0]
        share = share / math.sqrt(total)
    if params.reveal_to_trent:
        ctx.send(params.arbitrator, msg["share"], share)  # step 9
    return share


def _decoy(ctx, rng, reals: list, params: ThesisParams):
    """q (u_bar + e): a noisy earlier real vector or a noisy mean of several (unscaled
    vectors Trent keeps), scaled like a real one."""
    lo, hi = params.r_range
    sizes = [m for m in range(1, min(params.decoy_mean, len(reals)) + 1) if hi // m >= -(-lo // m)]
    m = sizes[ctx.rng.randbelow(len(sizes))]  # average m earlier vectors (1: a single one)
    chosen = [reals[j] for j in sorted(rng.choice(len(reals), size=m, replace=False))]
    q = m * _randint(ctx, -(-lo // m), hi // m)  # a multiple of m in [r_min, r_max]
    clip = NOISE_CLIP * params.sigma
    e = np.clip(rng.normal(0.0, params.sigma, params.rows), -clip, clip)
    noisy = _total(chosen) + _noise_like(m * e, params)
    return _times(noisy, q // m)  # (sum_j u_j + m e) q / m = q (u_bar + e)


def arbitrator(ctx, _private, params: ThesisParams) -> dict:
    """Trent: aggregates, scales, sends real vectors or decoys, relays the norms."""
    msg = params.messages()
    owners = params.owners
    pk = ctx.recv(params.key_authority, msg["pk"])  # step 1
    rng = _numpy_rng(ctx)
    reals: list = []  # every real (unscaled) E[u_j] computed so far, kept encrypted
    pending = None  # the real E[u] withheld when a decoy went out instead
    last_real = True
    decoys = 0
    for t in range(1, params.max_rounds + 1):
        with ctx.phase("iterate"):
            parts = [ctx.recv(o, msg["contribution"]) for o in owners]  # step 3
            if params.encrypt:
                for part in parts:
                    part.public_key.same_key(pk)
            parts = [_packed(part, params.contribution_bound, params) for part in parts]
            if last_real:  # valid contributions: u_t = sum_i A_i' alpha_i
                pending = _total(parts)
                reals.append(pending)
            # else: the owners computed on a decoy: ignore them, replay `pending`
            if not params.decoys_on or ctx.rng.random() < params.decoy_p:
                w, last_real = _times(pending, _randint(ctx, *params.r_range)), True  # E[r_t u_t]
                pending = None
            else:
                w, last_real = _decoy(ctx, rng, reals, params), False
                decoys += 1
            w = _wire(_refresh(w))
            for o in owners:
                ctx.send(o, msg["vector"], w)  # step 4
            terms = [ctx.recv(o, msg["norm_term"]) for o in owners]  # step 5
            norm = _refresh(_total(terms))
            for o in owners:
                ctx.send(o, msg["norm"], norm)  # step 6: r_t^2 sum_j ||A_j'^T u_t||^2
            status = [ctx.recv(o, msg["status"]) for o in owners]  # step 7
        if len(set(status)) != 1:
            raise ProtocolError(f"the owners disagree on convergence in round {t}: {status}")
        if status[0]:
            if not last_real:
                raise ConvergenceError("the owners stopped on a decoy (tol / decoy_noise)")
            break
    else:
        raise ConvergenceError(f"the owners did not converge within max_rounds={params.max_rounds}")
    with ctx.phase("normalise"):
        total = _refresh(_total([ctx.recv(o, msg["final_term"]) for o in owners]))  # step 8
        for o in owners:
            ctx.send(o, msg["final_norm"], total)
    vector = gather_shares(ctx, params, msg["share"]) if params.reveal_to_trent else None
    return {"rounds": t, "decoys": decoys, "eigenvector": vector}  # step 9: gathered
