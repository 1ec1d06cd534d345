"""The eigenvector protocol's private mode: each owner learns only its share of the result.

Paper: 003 (Pathak), section 4.1.1 (the principal eigenvector of M^T M for data owners
P_1..P_N holding M = [A_1 ... A_N] column-wise, through an arbitrator Trent), hardened so
that no party ever sees an intermediate vector: the thesis's own protocol
(``mode = "thesis"``, :mod:`protocols.eigenvector.thesis`) lets every owner decrypt the scaled
iterates, recover the scale by a gcd and then the other owners' Gram matrix
(``docs/eigenvector.md``).  Here the power iteration runs on ciphertexts, on the k x k
Gram matrix G = M M^T = sum_i A_i A_i^T, and the owners end with
alpha_i = A_i^T v / ||M^T v|| (v the principal eigenvector of G), i.e. owner i's
columns of the principal eigenvector of M^T M.

Adversary model: semi-honest parties; Trent colludes with no owner (as in the thesis);
any coalition of owners is covered; the key authority deals the keys and leaves.

Keys.  The key authority generates the Paillier key pair and gives everyone the public
key.  Nobody holds the whole decryption key: the authority deals a 2-of-2 additive
sharing of the decryption exponent (:mod:`smc_hmm.crypto.threshold`) to Trent and the
*leader* (the first owner), so every decryption needs both.  A decryption is only ever
applied to a value that Trent has masked statistically (sigma >= 40 bits) or to a
declared output.  Each owner also makes a key pair of its own, under which only its own
(exact) Gram matrix and its own output part travel.

Fixed point (all public, :class:`Plan`).  Owner i encodes its Gram matrix as integers
Ghat_i = round(A_i A_i^T 2^(g - e)), where 2^e >= k n max_abs^2 bounds the largest
eigenvalue of G, so ||Ghat||_2 <= 2^g + k N =: Gn.  The iterate u_t is an integer
vector with ||u_t|| <= 2^P (``precision``, default 64 bits), held as a split
u_t = X'_t - R'_t: every owner knows X'_t, Trent knows R'_t.

Round t (one send or receive per step; t = 0, 1, ...):

1. owner i -> Trent ``contribution``: E[Ghat_i X'_t], packed (``S`` slots of ``W`` bits
   per ciphertext, ceil(k / S) ciphertexts).  From t = 1 the leader first sends
   ``round_open``: s_(t-1) (below) and E[||X_(t-1)||^2 - 2 X_(t-1).rho_(t-1)].
2. Trent: R'_t = floor(rho_(t-1) / 2^s_(t-1)) (R'_0 = -u_0, his random start, X'_0 = 0),
   E[w_t] = sum_i E[Ghat_i X'_t] - E[Ghat] R'_t = E[Ghat u_t]; he adds fresh masks
   rho_t = 2^B + r_t, r_t uniform on [0, 2^(B + sigma)) per entry, where |w| < 2^B:
   Trent -> leader ``masked``: E[X_t] = E[w_t + rho_t] and the blurred magnitude
   E[Y_t], Y_t = rho' a + e' with a = ||w_(t-1)||^2 (w_(-1) = 2^g u_0), rho' uniform
   on [2^A, 2^(A+1)) and e' uniform on [0, 2^E), E = 2 B + sigma.
3. Trent -> every owner and the leader -> every other owner ``partial``: their partial
   decryptions of the batch (computed at the same time).  Every owner combines them:
   X_t (each entry statistically hidden by rho_t) and Y_t.  Trent -> leader
   ``mask_vector``: E[rho_t], for the leader's share of the next magnitude.
4. Every owner computes from Y_t an upper bound U_t >= ||u_t|| and the shift
   s_t = the least s >= s_min with Gn U_t <= (2^P - sqrt(k) - 1) 2^s, then
   X'_(t+1) = floor(X_t / 2^s_t).  With Trent's R'_(t+1) = floor(rho_t / 2^s_t),
   u_(t+1) = X'_(t+1) - R'_(t+1) = floor(w_t / 2^s_t) + (0 or 1): the power iteration,
   rescaled so that ||u_(t+1)|| <= 2^P again.  Y_t's lower bound tells the owners when
   ||u_t|| fell below 2^P_min (P_min = log2(1 / tol) + 16): the run then ends with
   :class:`~smc_hmm.errors.PrecisionError` after its last message.

Convergence: a secure comparison every ``check_every`` rounds (and at ``max_rounds``),
of the change between u_(t-1) and u_t against the public tolerance tol:

    converged  <=>  (u_(t-1).u_t)^2 >= (1 - tol^2) ||u_(t-1)||^2 ||u_t||^2

(sin of the angle <= tol).  The leader sends E[X'_(t-1)], E[X'_t] and E of their
products (``check_vectors``, ``check_scalars``) and the scale h of the test
(``check_scale``); Trent forms E[b1], E[b2], E[c] (the two squared norms and the inner
product, from the splits), masks them, and the two compute the degree-4 test value
V = 2^q c^2 - (2^q - round(tol^2 2^q)) b1 b2 by a masked multiplication
(``check_masked``, ``check_products``).  Trent masks V (``check_value``: V + 2^(h + l)
+ r, r uniform on [0, 2^(h + l + sigma))), the leader truncates by 2^h, and the DGK
comparison of :mod:`protocols.stages.dgk` (Veugen's bitwise step with the leader's DGK key,
``check_bits``, ``check_blinded``, ``check_delta``) yields E[[V >= 0]], which Trent
and the leader decrypt for everyone (``check_result``, ``check_partial``).  That bit is
all anyone learns: the number of rounds.  At ``max_rounds`` without it every party
raises :class:`~smc_hmm.errors.ConvergenceError`.

Output (after the round T the test passes): owner i encodes Ahat_i = round(A_i 2^a)
(|entries| <= 2^``data_bits``) and its Gram matrix exactly, Q_i = Ahat_i Ahat_i^T, and
sent Trent, before the first round, E_i[Q_i] under its own key (``own_gram``, columns
packed).  Trent -> owner i ``output_part``: E_i[Q_i R'_T]; owner i decrypts it alone and
forms z_i = Q_i X'_T - Q_i R'_T = Q_i u_T, then y_i = Ahat_i^T y' for any solution y' of
Q_i y' = z_i, which is Ahat_i^T u_T: Q_i u_T = Ahat_i (Ahat_i^T u_T) says exactly what
Ahat_i^T u_T says, no more (a k-vector instead of n_i values: a k x k upload per owner
instead of k x n_i).  Owner i -> Trent ``final_term``: E[||y_i||^2]; Trent sums to
E[N], N = ||Mhat^T u_T||^2, and he and the leader decrypt it for the owners
(``final_norm``, ``final_partial``): alpha_i = y_i / sqrt(N).  With ``reveal_to_trent``:
owner i -> Trent ``share``.

Before the first round (setup): ``pk`` and ``key_share`` from the authority; each
owner's ``owner_key`` and ``own_gram`` to Trent; the encrypted Gram matrices travel along a
chain owner 1 -> owner 2 -> ... -> Trent (``gram``: each adds its own E[Ghat_i],
columns packed), so Trent holds only E[Ghat]; the leader's DGK public key (``dgk``).

Who learns what (each leak with its hiding parameter):

* Trent: ciphertexts; the shifts s_t (integers in [s_min, s_max]: log2 ||u_t|| to
  within about two bits, i.e. the power-of-two magnitude of the iterate; with his own
  start vector u_0 the early shifts give a rough profile of how the combined Gram
  matrix stretches u_0, and over T rounds lambda_1 of G within a factor of about
  4^(1/T) from one span, sharper when he intersects every span as the owners can) and
  the scales h of the tests (derived from the same magnitudes); the test bits, hence
  the number of rounds; the eigenvector only with ``reveal_to_trent``.
* Every owner: X_t (statistically hidden: the distributions of an entry for any two
  data sets are within distance 2^(1 - sigma)); Y_t, which bounds ||w_(t-1)||^2
  within a factor of 3 above the precision floor (rho' blurs it over one octave, e'
  hides its low bits: the posterior of a is smooth, no divisibility survives); hence
  the per-round growth ||Ghat u||/||u|| within a factor of about 3, and, intersecting
  the bounds of every pair of converged rounds (each round's blur is fresh), the
  largest eigenvalue lambda_1 of G to about 1% relative after 33 rounds (measured by
  ``test_intersecting_the_rounds_magnitudes_sharpens_the_eigenvalue``; 1e-4 to 5e-3 on
  longer runs), the error falling roughly like 1/T -- not the factor 3^(2/T) of one
  span;
  the test bits; its own y_i = sqrt(N) alpha_i and N (lambda_1 ||u_T||^2 again).  An
  owner whose A_i has rank k learns v and lambda_1 from alpha_i alone anyway.
* The leader additionally: the masked test values (statistically hidden, sigma
  bits) and the DGK zero test delta_A (a uniform bit).
* The key authority: nothing (it only sends).

So no owner sees an intermediate iterate (an owner whose data spans all features gets
the final one from its share, as above): the gcd of X_t's entries is that of uniform integers, and
a Krylov sequence cannot be formed (``tests/protocols/test_eigenvector_attacks.py``
runs both attacks against both modes).  Cost per round at 2048 bits, k = 64: 6
ciphertexts for Trent's and the leader's partial decryptions each (full-size
exponentiations modulo n^2), one 64-term multi-exponentiation per packed output at
Trent; ``docs/eigenvector.md`` has the tables.

Run it::

    smc-hmm bench eigenvector --key-bits 2048 --owners 4
    python examples/eigenvector_digits.py --dir DIR   # six processes over mutual TLS
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from protocols.eigenvector.shared import SharedParams, check_input, gather_shares
from protocols.stages.dgk import CompareSpec, blind_bitwise, check_dgk_key, dgk_ciphertexts
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray, PrivateKey, generate_keypair
from smc_hmm.crypto.dgk import DGKPublicKey, dgk_keypair_for
from smc_hmm.crypto.packing import PackingPlan
from smc_hmm.crypto.threshold import (
    KeyShare,
    combine,
    deal_shares,
    pack_partials,
    unpack_partials,
)
from smc_hmm.errors import (
    ConvergenceError,
    CryptoError,
    InvalidInputError,
    PrecisionError,
    ProtocolError,
)
from smc_hmm.messages import Ciphertexts, Key, Message, OpaqueCiphertexts, Public, Revealed

#: the largest key the plan is computed for (headroom: plaintexts below n / 2^4)
_MARGIN_BITS = 4
#: extra bits of the convergence comparison beyond log2(1 / tol^2)
_COMPARE_SLACK = 24
#: extra bits of tol^2's fixed-point encoding q beyond log2(1 / tol^2)
_TOL_BITS = 30
#: P_min = log2(1 / tol) + this: the truncation noise stays 2^-16 below tol
_FLOOR_BITS = 16


def _slots_for(slot_bound: int, width: int, limit: int, most: int) -> int:
    """The most slots (<= ``most``) of ``width`` bits whose packed integer stays <= ``limit``."""
    s = 0
    while s < most and PackingPlan(width, s + 1).packed_bound(slot_bound) <= limit:
        s += 1
    return s


def _pack(values, width: int) -> int:
    """sum_j v_j 2^(j width): exact for any integers (slots may carry)."""
    return sum(int(v) << (j * width) for j, v in enumerate(values))


def _groups(count: int, slots: int) -> list[range]:
    return [range(q, min(count, q + slots)) for q in range(0, count, slots)]


def _isqrt_up(x: int) -> int:
    return math.isqrt(max(0, x)) + 1


@dataclass(frozen=True)
class PrivateParams(SharedParams):
    """Public parameters of the private mode (the default), agreed on before the run."""

    mode: ClassVar[str] = "private"

    precision: int = typed.whole(64, 16, 1024)  # P: ||u|| <= 2^precision
    gram_bits: int = typed.whole(40, 8, 256)  # g: fixed-point bits of the Gram matrix
    data_bits: int = typed.whole(24, 8, 256)  # fixed-point bits of the data (|Ahat| <= 2^it)
    hiding_bits: int = typed.sigma()  # sigma: statistical hiding of every mask
    check_every: int = typed.whole(8, 1, 1_000_000)  # the convergence test every so many rounds

    def __post_init__(self) -> None:
        super().__post_init__()  # the ranges of the fields above too
        if self.tol >= 1:
            raise InvalidInputError(f"tol must be below 1, got {self.tol:g}")

    def messages(self, key_bits: int) -> dict[str, Message]:
        """The declared messages: scales and bounds from the public parameters and the
        key size."""
        return Plan(self, key_bits).messages()

    def randomizers(self, key_bits: int, rounds: int | None = None) -> dict[str, dict[str, int]]:
        """The run's fresh randomizers per party and key (:meth:`Plan.randomizers`)."""
        return Plan(self, key_bits).randomizers(rounds)


@dataclass(frozen=True)
class Plan:
    """The private mode's public quantities for one key size (module docstring)."""

    params: PrivateParams
    key_bits: int

    def __post_init__(self):
        p = self.params
        if self.top_bits < self.floor_bits + 4:
            raise InvalidInputError(
                f"precision = {self.top_bits} bits leaves no room above the "
                f"{self.floor_bits}-bit floor that tol = {p.tol:g} needs: raise precision or tol"
            )
        for what, bound in self.bounds.items():
            if bound > self.limit:
                raise PrecisionError(
                    f"the private eigenvector protocol's {what} needs {bound.bit_length()} "
                    f"bits but a {self.key_bits}-bit key holds {self.limit.bit_length()}: "
                    "use a larger key or lower precision / gram_bits / data_bits"
                )
        if self.slots < 1 or self.output_slots < 1:
            raise PrecisionError(
                f"a {self.key_bits}-bit key holds no slot of the private eigenvector's plan"
            )

    # -- sizes -------------------------------------------------------------------------

    @property
    def k(self) -> int:
        """k: the rows every owner's A_i has (the length of every vector)."""
        return self.params.rows

    @property
    def owner_count(self) -> int:
        """N: the number of data owners."""
        return len(self.params.owners)

    @property
    def limit(self) -> int:
        """Largest plaintext magnitude any packed value may reach (below n / 2^4)."""
        return 1 << (self.key_bits - _MARGIN_BITS)

    @property
    def sigma(self) -> int:
        """sigma: the statistical hiding of every mask, in bits."""
        return self.params.hiding_bits

    @property
    def top_bits(self) -> int:
        """P: the invariant ||u_t|| <= 2^P."""
        return self.params.precision

    @property
    def floor_bits(self) -> int:
        """P_min: below 2^P_min the iterate's truncation noise would reach tol."""
        return math.ceil(math.log2(1 / self.params.tol)) + _FLOOR_BITS

    @property
    def gram_bits(self) -> int:
        """g: ||Ghat||_2 <= 2^g (plus rounding), the Gram matrix's fixed-point bits."""
        return self.params.gram_bits

    @cached_property
    def eigenvalue_bits(self) -> int:
        """e: 2^e >= k n max_abs^2 >= trace(G) >= lambda_1(G)."""
        bound = self.k * sum(self.params.cols) * self.params.max_abs**2
        e = math.frexp(bound)[1]  # bound < 2^e
        return e

    @property
    def gram_shift(self) -> int:
        """g - e: Ghat_i = round(A_i A_i^T 2^(g - e))."""
        return self.gram_bits - self.eigenvalue_bits

    @cached_property
    def gram_entry(self) -> int:
        """Bound on |Ghat_i| entries: n_i max_abs^2 2^(g - e) + 1/2 <= 2^g / k + 1."""
        n_max = max(self.params.cols)
        return math.floor(math.ldexp(n_max * self.params.max_abs**2, self.gram_shift)) + 1

    @property
    def gram_norm(self) -> int:
        """Gn, the bound on ||Ghat||_2: 2^g (||G|| 2^-e <= 1) plus the rounding (k N / 2)."""
        return (1 << self.gram_bits) + self.k * self.owner_count

    @property
    def product_bits(self) -> int:
        """B, the bits of the product w = Ghat u: |w_j| <= ||w|| <= Gn 2^P < 2^B."""
        return (self.gram_norm << self.top_bits).bit_length()

    @property
    def slot_bits(self) -> int:
        """W, the slot width of a masked entry w + rho in [0, 2^(B + sigma + 1))."""
        return self.product_bits + self.sigma + 2

    @property
    def s_min(self) -> int:
        """Largest boost (2^(g - s)) a round may apply: u may shrink to 2^P_min."""
        return max(0, self.gram_bits - (self.top_bits - self.floor_bits))

    @property
    def s_max(self) -> int:
        """The largest shift a round may apply."""
        return self.product_bits

    @property
    def split_bound(self) -> int:
        """R_max, the bound on the entries of the split X'_t and R'_t (and on |u_0|)."""
        return 1 << (self.product_bits + self.sigma + 1 - self.s_min)

    @property
    def mask_bound(self) -> int:
        """Trent's masks rho_t and the masked X_t lie in [0, 2^(B + sigma + 1))."""
        return 1 << (self.product_bits + self.sigma + 1)

    @property
    def contribution_slot(self) -> int:
        """|(Ghat_i X')_j| <= k gram_entry R_max."""
        return self.k * self.gram_entry * self.split_bound

    @property
    def trent_slot(self) -> int:
        """Trent's intermediate slot values: the owners' sum minus Ghat R', plus rho."""
        return 2 * self.owner_count * self.contribution_slot + self.mask_bound

    @cached_property
    def slots(self) -> int:
        """S, the slots per ciphertext of a packed k-vector."""
        return _slots_for(self.trent_slot, self.slot_bits, self.limit, self.k)

    @property
    def groups(self) -> list[range]:
        """The vector's entries by ciphertext."""
        return _groups(self.k, self.slots)

    @property
    def vector_cts(self) -> int:
        """Ciphertexts per packed k-vector: ceil(k / S)."""
        return len(self.groups)

    def whole(self, slot_bound: int) -> int:
        """Bound on a packed k-vector whose slots are bounded by ``slot_bound``."""
        return self.masked_plan.packed_bound(slot_bound)

    @property
    def masked_plan(self) -> PackingPlan:
        """S slots of W bits: the layout of the masked vector."""
        return PackingPlan(self.slot_bits, self.slots)

    # -- the blurred magnitude Y ---------------------------------------------------------

    @property
    def blur_noise_bits(self) -> int:
        """E: the noise e' of the blurred magnitude is uniform on [0, 2^E), E = 2 B + sigma."""
        return 2 * self.product_bits + self.sigma

    @property
    def blur_bits(self) -> int:
        """A: the blur rho' of the magnitude is uniform on [2^A, 2^(A+1)); Y / 2^A resolves
        a = ||w||^2 down to (2^(P_min + s_min - 2))^2."""
        return self.blur_noise_bits - 2 * (self.floor_bits + self.s_min - 2)

    @property
    def y_bound(self) -> int:
        """Bound on the blurred magnitude Y = rho' a + e'."""
        return (1 << (self.blur_bits + 1 + 2 * self.product_bits)) + (1 << self.blur_noise_bits)

    @property
    def norm_part_bound(self) -> int:
        """Bound on the leader's share ||X||^2 - 2 X.rho of the next magnitude."""
        return 3 * self.k * self.mask_bound**2

    # -- the convergence test ------------------------------------------------------------

    @property
    def tol_bits(self) -> int:
        """log2(1 / tol^2), rounded up."""
        return math.ceil(-2 * math.log2(self.params.tol))

    @property
    def tol_scale_bits(self) -> int:
        """q: tol^2 is encoded with q fractional bits."""
        return self.tol_bits + _TOL_BITS

    @property
    def tol_squared(self) -> int:
        """tol^2 encoded: round(tol^2 2^q)."""
        return round(math.ldexp(self.params.tol**2, self.tol_scale_bits))

    @property
    def compare_bits(self) -> int:
        """l: the bits of the truncated test value that the DGK comparison compares."""
        return self.tol_bits + _COMPARE_SLACK

    @property
    def b_max(self) -> int:
        """|b| = ||u||^2 and |c| = |u.u'| are below this."""
        return 1 << (2 * self.top_bits + 2)

    @property
    def check_width(self) -> int:
        """Slot width of the masked (b1, b2, c): values in [0, 2^(bits(b_max) + sigma + 1))."""
        return self.b_max.bit_length() + self.sigma + 2

    @property
    def h_max(self) -> int:
        """The largest truncation h of a test value."""
        return self.h_for(self.b_max * self.b_max)

    def h_for(self, bb_bound: int) -> int:
        """Truncation of V: |V| <= 2^q bb < 2^(h + l - 2)."""
        return max(0, ((bb_bound << self.tol_scale_bits).bit_length()) - (self.compare_bits - 2))

    @property
    def value_bound(self) -> int:
        """Bound on the masked test value V + 2^(h + l) + r."""
        return 1 << (self.h_max + self.compare_bits + self.sigma + 1)

    @property
    def compare_spec(self) -> CompareSpec:
        """The DGK comparison of l bits with sigma bits of hiding."""
        return CompareSpec(self.compare_bits, 1, self.sigma)

    # -- the output ------------------------------------------------------------------------

    @property
    def data_shift(self) -> int:
        """Ahat = round(A 2^data_shift) has |entries| <= 2^data_bits."""
        return self.params.data_bits - math.frexp(self.params.max_abs)[1]

    @property
    def own_gram_entry(self) -> int:
        """|entries of Q_i = Ahat_i Ahat_i^T| <= n_i 2^(2 data_bits)."""
        return max(self.params.cols) << (2 * self.params.data_bits)

    @property
    def output_slot(self) -> int:
        """|(Q_i R')_j| <= k max|Q_i| R_max."""
        return self.k * self.own_gram_entry * self.split_bound

    @property
    def output_slot_bits(self) -> int:
        """W_z: the slot width of Q_i's packed columns and of Q_i R'."""
        return self.output_slot.bit_length() + 2

    @cached_property
    def output_slots(self) -> int:
        """S_z: the slots per ciphertext of Q_i's packed columns and of Q_i R'."""
        return _slots_for(self.output_slot, self.output_slot_bits, self.limit, self.k)

    @property
    def output_groups(self) -> list[range]:
        """The entries of Q_i's columns (and of Q_i R') by ciphertext."""
        return _groups(self.k, self.output_slots)

    def whole_z(self, slot_bound: int) -> int:
        """Bound on a packed output column whose slots are bounded by ``slot_bound``."""
        return PackingPlan(self.output_slot_bits, self.output_slots).packed_bound(slot_bound)

    @property
    def final_term_bound(self) -> int:
        """||y_i||^2 <= n_i (sqrt(k) 2^data_bits (2^P + sqrt(k)))^2."""
        y = (math.isqrt(self.k) + 1) << (self.params.data_bits + self.top_bits + 1)
        return max(self.params.cols) * y * y

    # -- everything that must fit the key ------------------------------------------------------

    @property
    def bounds(self) -> dict[str, int]:
        check = 1 << (3 * self.check_width)
        return {
            "masked vector": self.whole(self.trent_slot) if self.slots else self.trent_slot,
            "blurred magnitude": self.y_bound,
            "magnitude share": self.norm_part_bound,
            "masked test values": check,
            "test products": 1 << (2 * self.check_width),
            "masked test value": self.value_bound,
            "normalisation": self.owner_count * self.final_term_bound,
            "start": self.k * self.split_bound * self.split_bound * 4,
        }

    # -- the offline plan ---------------------------------------------------------------------

    def tests(self, rounds: int | None = None) -> tuple[int, int]:
        """(T, the convergence tests of rounds 1..T) for a run whose test passes at round
        ``rounds`` = T (public once the run ends; default: the first scheduled test, the
        fewest rounds a run takes).  InvalidInputError unless a test is scheduled at T."""
        p = self.params
        first = min(p.check_every, p.max_rounds)
        t = first if rounds is None else rounds
        typed.integer("rounds", t, 1, p.max_rounds)
        if not check_round(p, t):
            raise InvalidInputError(f"no convergence test is scheduled at round {t}")
        return t, sum(check_round(p, u) for u in range(1, t + 1))

    def randomizers(self, rounds: int | None = None) -> dict[str, dict[str, int]]:
        """Fresh Paillier randomizers per party and key (the shared key: the key
        authority's; an owner's own key: that owner's) in a run of T = ``rounds`` rounds
        (:meth:`tests`; 003 4.1.1, the module's steps).  Owners: E[Ghat_i] encrypted and
        re-randomised along the chain, E_i[Q_i], E[Ghat_i X'_t] in rounds 0..T, the final
        term; the leader also s_t's magnitude share (t >= 1) and per test its vectors,
        scalars, products and the DGK comparison's own (:class:`CompareSpec`); Trent per
        round the masked batch and E[rho_t] (round 0: the start's magnitude), per test the
        packed masked values, the comparison's own and the bit, E_i[Q_i R'_T] per owner
        and the total norm.  The key authority draws none."""
        p, k, nv, nz = self.params, self.k, self.vector_cts, len(self.output_groups)
        t, tests = self.tests(rounds)
        cmp = self.compare_spec.randomizers()
        shared = 2 * k * nv + (t + 1) * nv + 1
        out = {o: {p.key_authority: shared, o: k * nz} for o in p.owners}
        leader = tests * (2 * k + 3 + 2 + cmp["alice"]) + t  # vectors, scalars, products
        out[p.owners[0]] = {p.key_authority: shared + leader, p.owners[0]: k * nz}
        trent = (t + 1) * (nv + 1 + k) + 1 + tests * (1 + cmp["bob"] + 1) + 1
        out[p.arbitrator] = {p.key_authority: trent} | dict.fromkeys(p.owners, nz)
        return out | {p.key_authority: {}}

    # -- declared messages ------------------------------------------------------------------

    def messages(self) -> dict[str, Message]:
        """Every message of the private mode; scales 0 (integers), bounds public."""
        k, nv, nz = self.k, self.vector_cts, len(self.output_groups)
        width = partial_width_bits(self.key_bits)

        def partial(count: int | None) -> OpaqueCiphertexts:
            return OpaqueCiphertexts("Paillier partial decryption", count, width)

        def cts(bound: int, shape) -> Ciphertexts:
            return Ciphertexts(0, bound, shape)

        bit_bound = 1 << (self.sigma + 3)
        return {
            m.tag: m
            for m in (
                Message("pk", Key()),
                Message("key_share", Revealed("a share of the decryption exponent", (list,))),
                Message("owner_key", Key()),
                Message("gram", cts(self.whole(self.owner_count * self.gram_entry), (k, nv))),
                Message("own_gram", cts(self.whole_z(self.own_gram_entry), (k, nz))),
                Message("dgk", Public((list,))),
                Message(
                    "round_open",
                    (
                        Revealed("the normalising shift s_t", (int,)),
                        cts(self.norm_part_bound, (1,)),
                    ),
                ),
                Message("contribution", cts(self.whole(self.contribution_slot), (nv,))),
                Message(
                    "masked",
                    (cts(self.whole(1 << (self.slot_bits - 1)), (nv,)), cts(self.y_bound, (1,))),
                ),
                Message("mask_vector", cts(self.mask_bound, (k,))),
                Message("partial", partial(nv + 1)),
                Message("check_vectors", cts(self.split_bound, (2, k))),
                Message("check_scalars", cts(self.k * self.split_bound * self.split_bound, (3,))),
                Message("check_scale", Revealed("the test's power-of-two scale h", (int,))),
                Message("check_masked", (cts(1 << (3 * self.check_width), (1,)), partial(1))),
                Message("check_products", cts(1 << (2 * self.check_width), (2,))),
                Message("check_value", (cts(self.value_bound, (1,)), partial(1))),
                Message(
                    "check_bits",
                    (cts(1 << (self.sigma + 2), (1,)), dgk_ciphertexts(count=self.compare_bits)),
                ),
                Message("check_blinded", dgk_ciphertexts(count=self.compare_bits + 1)),
                Message("check_delta", cts(1, (1,))),
                Message("check_result", (cts(bit_bound, (1,)), partial(1))),
                Message("check_partial", partial(1)),
                Message("output_part", cts(self.whole_z(self.output_slot), (nz,))),
                Message("final_term", cts(self.final_term_bound, (1,))),
                Message("final_norm", cts(self.owner_count * self.final_term_bound, (1,))),
                Message("final_partial", partial(1)),
                Message("share", Revealed("the owner's eigenvector share", (np.ndarray,))),
            )
        }


def partial_width_bits(key_bits: int) -> int:
    """Bytes of one partial decryption for a key of ``key_bits`` bits."""
    return (2 * key_bits + 7) // 8


def check_round(params: PrivateParams, t: int) -> bool:
    """Whether round t opens with the convergence test (public schedule)."""
    return t >= 1 and (t % params.check_every == 0 or t == params.max_rounds)


# -- encodings ---------------------------------------------------------------------------


def encode_gram(a: np.ndarray, plan: Plan) -> np.ndarray:
    """Ghat_i = round(A_i A_i^T 2^(g - e)) as exact integers."""
    gram = np.ldexp(a @ a.T, plan.gram_shift)
    return np.rint(gram).astype(np.int64).astype(object)


def encode_data(a: np.ndarray, plan: Plan) -> np.ndarray:
    """Ahat_i = round(A_i 2^data_shift) as exact integers (|entries| <= 2^data_bits)."""
    return np.rint(np.ldexp(a, plan.data_shift)).astype(np.int64).astype(object)


def own_gram(a: np.ndarray, plan: Plan) -> np.ndarray:
    """Q_i = Ahat_i Ahat_i^T, exactly: its range is that of Ahat_i, so Q_i u says no
    more than Ahat_i^T u (Q_i u = Ahat_i (Ahat_i^T u), and Ahat_i^T u = Ahat_i^T Q_i^+ Q_i u)."""
    ahat = encode_data(a, plan)
    return ahat.dot(ahat.T)


def _packed_vector(values, plan: Plan) -> list[int]:
    return [_pack([values[j] for j in grp], plan.slot_bits) for grp in plan.groups]


def _unpack_vector(packed, plan: Plan) -> list[int]:
    out: list[int] = []
    for p, grp in zip(packed, plan.groups):
        out.extend(plan.masked_plan.unpack(p, len(grp)))
    return out


def _encrypt(pk, ints, bound: int) -> CipherArray:
    return CipherArray.encrypt_encoded(pk, np.array(ints, dtype=object), 0, bound)


def _dot(x, y) -> int:
    return sum(int(a) * int(b) for a, b in zip(x, y))


# -- shared decryption plumbing -------------------------------------------------------------


def _partials(share: KeyShare, ciphertexts: list) -> bytes:
    return pack_partials(share.public_key, share.partial(ciphertexts))


def _combined(pk, *blobs_or_lists, count: int) -> list[int]:
    """Plaintexts from the two holders' partials (bytes as received, or own lists)."""
    lists = [
        unpack_partials(pk, b, count) if isinstance(b, bytes) else list(b) for b in blobs_or_lists
    ]
    try:
        return combine(pk, lists)
    except CryptoError as e:
        raise ProtocolError(f"joint decryption failed: {e}") from e


def _open_as_holder(pk, share: KeyShare, cts: CipherArray, theirs: bytes) -> list[int]:
    return _combined(pk, share.partial(cts.ciphertexts()), theirs, count=cts.size)


def read_batch(plain: list[int], plan: Plan) -> tuple[list[int], int]:
    """(X_t, Y_t) from a round's jointly decrypted batch: what every owner sees."""
    *packed, y = plain
    x = _unpack_vector(packed, plan)
    _in_range(x, 0, plan.mask_bound, "masked vector entry")
    _in_range([y], 0, plan.y_bound, "blurred magnitude")
    return x, y


def _in_range(values, lo: int, hi: int, what: str) -> None:
    if any(not lo <= v < hi for v in values):
        raise ProtocolError(f"a decrypted {what} lies outside its declared range")


# -- roles -------------------------------------------------------------------------------


def key_authority(ctx, _private, params: PrivateParams) -> None:
    """Generates (runtime) the key pair, gives out the public key and the two shares of d."""
    pk, sk = ctx.keypair
    msg = Plan(params, pk.bits).messages()
    with ctx.phase("distribute key"):
        for peer in (params.arbitrator, *params.owners):
            ctx.send(peer, msg["pk"], pk)
        trent_share, leader_share = deal_shares(sk, 2, sigma=params.hiding_bits, rng=ctx.rng)
        ctx.send(params.arbitrator, msg["key_share"], trent_share.to_wire())
        ctx.send(params.owners[0], msg["key_share"], leader_share.to_wire())
    return None


def _receive_share(ctx, pk, params: PrivateParams, msg, index: int) -> KeyShare:
    try:
        share = KeyShare.from_wire(pk, ctx.recv(params.key_authority, msg["key_share"]))
    except CryptoError as e:
        raise ProtocolError(f"the key authority's share is malformed: {e}") from e
    if share.index != index or share.holders != 2 or share.sigma != params.hiding_bits:
        raise ProtocolError("the key authority dealt a share for another holder or sharing")
    return share


def _own_keypair(ctx, bits: int):
    """The owner's own key pair (its Gram matrix and output part only), metered."""
    pk, sk = generate_keypair(bits, insecure=bits < 2048 or ctx.rng.insecure, rng=ctx.rng)
    view = ctx.adopt_key(pk)
    return view, PrivateKey(view, sk.p, sk.q)


class _OwnerState:
    """What one owner keeps between rounds (t is the current round)."""

    def __init__(self, plan: Plan):
        self.xp_previous = None  # X'_(t-1)
        self.xp = [0] * plan.k  # X'_t
        self.xp_next = None  # X'_(t+1), once round t's masked vector is open
        self.x = None  # X_t: the masked vector (the leader's share of the next magnitude)
        self.rho_enc = None  # E[rho_t] (leader)
        self.shift = plan.gram_bits  # s_t (round 0 reads u_0 as w_(-1) = 2^g u_0, s_(-1) = g)
        self.upper_previous = None  # U_(t-1) >= ||u_(t-1)||
        self.upper = None  # U_t >= ||u_t||
        self.lost = False

    def advance(self) -> None:
        self.xp_previous, self.xp, self.xp_next = self.xp, self.xp_next, None


def owner(ctx, a, params: PrivateParams) -> np.ndarray:
    """Data owner P_i (the first owner also leads: it holds the second key share)."""
    i = params.owners.index(ctx.name)
    a = check_input(a, params, i)
    leader = i == 0
    trent = params.arbitrator
    pk = ctx.recv(params.key_authority, Message("pk", Key()))  # setup: the public key
    plan = Plan(params, pk.bits)
    msg = plan.messages()
    gram = encode_gram(a, plan)
    with ctx.phase("setup"):
        share = _receive_share(ctx, pk, params, msg, 1) if leader else None
        own_pk, own_sk = _own_keypair(ctx, pk.bits)
        ctx.send(trent, msg["owner_key"], own_pk)
        _send_gram(ctx, gram, plan, msg, i, pk)
        _send_own_gram(ctx, a, plan, msg, own_pk)
        dgk_sk = None
        if leader:
            dgk_pk, dgk_sk = dgk_keypair_for(pk, plan.compare_bits)
            ctx.send(trent, msg["dgk"], dgk_pk.to_wire())
    state = _OwnerState(plan)
    rounds = None
    for t in range(params.max_rounds + 1):
        with ctx.phase("iterate"):
            if t >= 1:
                state.advance()
                if leader:
                    _open_round(ctx, plan, msg, state)  # step 1 (the leader's part)
            contribution = [_dot(row, state.xp) for row in gram]
            packed = _packed_vector(contribution, plan)
            bound = plan.whole(plan.contribution_slot)
            ctx.send(trent, msg["contribution"], _encrypt(pk, packed, bound))  # step 1
            _owner_batch(ctx, plan, msg, state, share, pk, t)  # steps 2-4
        if check_round(params, t):
            with ctx.phase("check"):
                if _owner_check(ctx, plan, msg, state, share, dgk_sk, pk):
                    rounds = t
                    break
    if rounds is None:
        raise ConvergenceError(
            f"the power iteration did not converge within max_rounds={params.max_rounds} "
            f"(tol={params.tol:g}, tested every {params.check_every} rounds)"
        )
    with ctx.phase("output"):
        alpha, refusal = _owner_output(ctx, a, plan, msg, state, share, own_sk, i, pk)
    if params.reveal_to_trent:
        ctx.send(trent, msg["share"], alpha)
    if refusal is not None:
        raise refusal
    if state.lost:
        raise PrecisionError(
            f"the iterate fell below 2^{plan.floor_bits} in some round (the data are far below "
            f"max_abs = {params.max_abs:g}, or precision = {plan.top_bits} is too low): the "
            "result would not meet tol"
        )
    return alpha


def _send_gram(ctx, gram, plan: Plan, msg, i: int, pk) -> None:
    """E[Ghat_i], columns packed, added to the chain's running sum and passed on."""
    columns = [_packed_vector(gram[:, col], plan) for col in range(plan.k)]
    mine = _encrypt(pk, columns, plan.whole(plan.gram_entry))
    owners = plan.params.owners
    if i > 0:
        mine = ctx.recv(owners[i - 1], msg["gram"]) + mine
    target = owners[i + 1] if i + 1 < len(owners) else plan.params.arbitrator
    mine = mine.with_bound(plan.whole((i + 1) * plan.gram_entry)).rerandomize()
    ctx.send(target, msg["gram"], mine)


def _send_own_gram(ctx, a, plan: Plan, msg, own_pk) -> None:
    """E_i[Q_i] under the owner's own key, columns packed: Trent will return E_i[Q_i R']."""
    q = own_gram(a, plan)
    columns = [
        [_pack([q[j, col] for j in grp], plan.output_slot_bits) for grp in plan.output_groups]
        for col in range(plan.k)
    ]
    bound = plan.whole_z(plan.own_gram_entry)
    ctx.send(plan.params.arbitrator, msg["own_gram"], _encrypt(own_pk, columns, bound))


def _open_round(ctx, plan: Plan, msg, state: _OwnerState) -> None:
    """Leader, round t >= 1: s_(t-1) and its share of a = ||w_(t-1)||^2 to Trent:
    ||X||^2 - 2 X.rho (Trent adds ||rho||^2)."""
    x = state.x
    cross = state.rho_enc.lincomb(np.array([[-2 * v for v in x]], dtype=object))
    part = cross.add_encoded(np.array([_dot(x, x)], dtype=object))
    part = part.with_bound(plan.norm_part_bound).rerandomize()
    ctx.send(plan.params.arbitrator, msg["round_open"], [state.shift, part])


def _owner_batch(ctx, plan: Plan, msg, state: _OwnerState, share, pk, t: int) -> None:
    """Steps 2-4: the masked vector and magnitude, jointly decrypted; s_t and X'_(t+1)."""
    params = plan.params
    trent, leader = params.arbitrator, params.owners[0]
    count = plan.vector_cts + 1
    if share is not None:
        vector, y_enc = ctx.recv(trent, msg["masked"])  # step 2
        mine = share.partial(vector.ciphertexts() + y_enc.ciphertexts())
        blob = pack_partials(pk, mine)
        for o in params.owners[1:]:
            ctx.send(o, msg["partial"], blob)  # step 3
        plain = _combined(pk, mine, ctx.recv(trent, msg["partial"]), count=count)
        state.rho_enc = ctx.recv(trent, msg["mask_vector"])
    else:
        from_trent = ctx.recv(trent, msg["partial"])
        plain = _combined(pk, from_trent, ctx.recv(leader, msg["partial"]), count=count)
    x, y = read_batch(plain, plan)
    upper, lower = magnitude_bounds(plan, y, state.shift)  # step 4: ||u_t|| in [L, U]
    if t >= 1 and lower < 1 << plan.floor_bits:
        state.lost = True
    s = next_shift(plan, upper)
    state.upper_previous, state.upper = state.upper, upper
    state.xp_next = [v >> s for v in x]
    state.x, state.shift = x, s


def magnitude_bounds(plan: Plan, y: int, s_prev: int) -> tuple[int, int]:
    """Step 4: (U, L), integer bounds U >= ||u_t|| >= L from Y_t and s_(t-1)."""
    k_root = math.isqrt(plan.k) + 1
    a_hi = y >> plan.blur_bits
    upper = (_isqrt_up(a_hi) >> s_prev) + 1 + k_root
    a_lo = max(0, y - (1 << plan.blur_noise_bits)) >> (plan.blur_bits + 1)
    lower = max(0, (math.isqrt(a_lo) >> s_prev) - k_root - 1)
    return upper, lower


def next_shift(plan: Plan, upper: int) -> int:
    """Step 4: s_t, the least s in [s_min, s_max] that keeps ||u_(t+1)|| <= 2^P."""
    target = (1 << plan.top_bits) - math.isqrt(plan.k) - 2
    s = plan.s_min
    while s < plan.s_max and plan.gram_norm * upper > target << s:
        s += 1
    return s


def _owner_check(ctx, plan: Plan, msg, state: _OwnerState, share, dgk_sk, pk) -> bool:
    """The convergence test on (u_(t-1), u_t): True when their angle is <= tol."""
    params = plan.params
    trent, owners = params.arbitrator, params.owners
    if share is None:  # not the leader: only the result's two partial decryptions
        from_trent = ctx.recv(trent, msg["check_partial"])
        bit = _combined(pk, from_trent, ctx.recv(owners[0], msg["check_partial"]), count=1)
        return _test_bit(bit[0])
    x0, x1 = state.xp_previous, state.xp
    ctx.send(trent, msg["check_vectors"], _encrypt(pk, [x0, x1], plan.split_bound))
    scalars = [_dot(x0, x0), _dot(x1, x1), _dot(x0, x1)]
    ctx.send(trent, msg["check_scalars"], _encrypt(pk, scalars, plan.k * plan.split_bound**2))
    h = plan.h_for((state.upper_previous * state.upper) ** 2)
    ctx.send(trent, msg["check_scale"], h)
    # the masked multiplication: (b1 + m1)(b2 + m2) and (c + o)^2
    enc, theirs = ctx.recv(trent, msg["check_masked"])
    (packed,) = _open_as_holder(pk, share, enc, theirs)
    width = plan.check_width
    b1, b2, c = PackingPlan(width, 3).unpack(packed, 3)
    _in_range([b1, b2, c], 0, 1 << (width - 1), "masked test value")
    ctx.send(trent, msg["check_products"], _encrypt(pk, [b1 * b2, c * c], 1 << (2 * width)))
    # the masked test value, truncated by 2^h; the DGK comparison of its low l bits
    enc, theirs = ctx.recv(trent, msg["check_value"])
    (value,) = _open_as_holder(pk, share, enc, theirs)
    _in_range([value], 0, plan.value_bound, "masked test value")
    d = value >> h
    beta, d_high = d & ((1 << plan.compare_bits) - 1), d >> plan.compare_bits
    dgk_pk = dgk_sk.public_key
    bits = dgk_pk.pack(
        dgk_sk.encrypt([(beta >> j) & 1 for j in range(plan.compare_bits)], ctx.rng, pk.meter)
    )
    ctx.send(trent, msg["check_bits"], [_encrypt(pk, [d_high], 1 << (plan.sigma + 2)), bits])
    try:
        blinded = dgk_pk.unpack(ctx.recv(trent, msg["check_blinded"]), plan.compare_bits + 1)
    except CryptoError as e:
        raise ProtocolError(f"check_blinded: {e}") from e
    delta_a = int(any(dgk_sk.is_zero(blinded, pk.meter)))
    ctx.send(trent, msg["check_delta"], _encrypt(pk, [delta_a], 1))
    enc, theirs = ctx.recv(trent, msg["check_result"])
    mine = share.partial(enc.ciphertexts())
    blob = pack_partials(pk, mine)
    for peer in (trent, *owners[1:]):
        ctx.send(peer, msg["check_partial"], blob)
    return _test_bit(_combined(pk, mine, theirs, count=1)[0])


def _test_bit(bit: int) -> bool:
    if bit not in (0, 1):
        raise ProtocolError(f"the convergence test decrypted to {bit}, not a bit")
    return bool(bit)


def _output_from(q, z, ahat) -> tuple[np.ndarray, bool]:
    """y_i = Ahat_i^T u_T from z = Q_i u_T: any solution y' of Q_i y' = z gives
    Ahat_i^T y' = Ahat_i^T u_T.  Least squares in floats loses about eps sqrt(cond(Q_i))
    relative; (y, whether the solution reproduces z to 2^-40)."""
    qf = np.array(q, dtype=np.float64)
    zf = np.array(z, dtype=np.float64)
    solution, *_ = np.linalg.lstsq(qf, zf, rcond=None)
    scale = np.linalg.norm(zf)
    exact = scale == 0 or np.linalg.norm(qf @ solution - zf) <= scale * 2.0**-40
    return np.array(ahat, dtype=np.float64).T @ solution, bool(exact)


def _owner_output(ctx, a, plan: Plan, msg, state: _OwnerState, share, own_sk, i: int, pk):
    """y_i = Ahat_i^T u_T from the owner's own decryption of Q_i R'_T, then the jointly
    decrypted N: (alpha_i, None) or (zeros, the error to raise after the last message)."""
    params = plan.params
    trent = params.arbitrator
    groups = plan.output_groups
    part = ctx.recv(trent, msg["output_part"])  # E_i[Q_i R'_T]
    unpacker = PackingPlan(plan.output_slot_bits, plan.output_slots)
    q_r: list[int] = []
    for p, grp in zip(part.decrypt_ints(own_sk), groups):
        q_r.extend(unpacker.unpack(int(p), len(grp)))
    q = own_gram(a, plan)
    z = [_dot(q[j, :], state.xp) - q_r[j] for j in range(plan.k)]  # Q_i u_T, exactly
    ahat = encode_data(a, plan)
    y, exact = _output_from(q, z, ahat)
    y_norm = round(float(y @ y))
    ctx.send(trent, msg["final_term"], _encrypt(pk, [y_norm], plan.final_term_bound))
    if share is not None:
        mine = share.partial(ctx.recv(trent, msg["final_norm"]).ciphertexts())
        for o in params.owners[1:]:
            ctx.send(o, msg["final_partial"], pack_partials(pk, mine))
        (norm,) = _combined(pk, mine, ctx.recv(trent, msg["final_partial"]), count=1)
    else:
        from_trent = ctx.recv(trent, msg["final_partial"])
        from_leader = ctx.recv(params.owners[0], msg["final_partial"])
        (norm,) = _combined(pk, from_trent, from_leader, count=1)
    # a refusal comes after the last message: well-formed zeros until then
    if norm <= 0:
        return np.zeros(params.cols[i]), ConvergenceError("the normalisation is zero: M is zero")
    if not exact:
        return np.zeros(params.cols[i]), PrecisionError(
            f"{ctx.name}'s Gram matrix is too ill-conditioned to recover its share from Q u"
        )
    return y / math.sqrt(norm), None


# -- Trent ---------------------------------------------------------------------------------


class _TrentState:
    """Trent's side of the split u_t = X'_t - R'_t, and his last masks."""

    def __init__(self, u0: list[int], g: int):
        self.r_previous = None  # R'_(t-1)
        self.r_prime = [-v for v in u0]  # R'_t (R'_0 = -u_0 while X'_0 = 0)
        self.rho = None  # rho_t
        self.a_first = _dot(u0, u0) << (2 * g)  # round 0's magnitude: w_(-1) = 2^g u_0


def _start(ctx, plan: Plan) -> list[int]:
    """u_0: a uniformly random direction scaled to norm 2^(P - 1) (Trent's own draw)."""
    rng = np.random.default_rng(ctx.rng.randbits(128))
    z = rng.standard_normal(plan.k)
    z *= math.ldexp(1.0, plan.top_bits - 1) / np.linalg.norm(z)
    return [round(float(v)) for v in z]


def _receive_setup(ctx, plan: Plan, msg, pk):
    """Trent's setup: his key share, the owners' own keys and E_i[Q_i], E[Ghat], DGK key."""
    params = plan.params
    owners, leader = params.owners, params.owners[0]
    share = _receive_share(ctx, pk, params, msg, 0)
    own_keys = [ctx.recv(o, msg["owner_key"]) for o in owners]
    for o, key in zip(owners, own_keys):
        if key.bits != pk.bits:
            raise ProtocolError(f"{o}'s own key has {key.bits} bits, the shared key {pk.bits}")
    gram = ctx.recv(owners[-1], msg["gram"])  # E[Ghat], columns packed: the chain's sum
    gram.public_key.same_key(pk)
    own_grams = []  # E_i[Q_i] under each owner's own key
    for o, key in zip(owners, own_keys):
        enc = ctx.recv(o, msg["own_gram"])
        enc.public_key.same_key(key)
        own_grams.append(enc)
    try:
        dgk_pk = DGKPublicKey.from_wire(ctx.recv(leader, msg["dgk"]))
    except CryptoError as e:
        raise ProtocolError(f"{leader} sent a malformed DGK key: {e}") from e
    check_dgk_key(ctx, dgk_pk, plan.compare_spec)
    return share, gram, own_grams, dgk_pk


def arbitrator(ctx, _private, params: PrivateParams) -> dict:
    """Trent: sums, masks, holds the first key share; never sees a plaintext vector."""
    owners = params.owners
    pk = ctx.recv(params.key_authority, Message("pk", Key()))
    plan = Plan(params, pk.bits)
    msg = plan.messages()
    with ctx.phase("setup"):
        share, gram, own_grams, dgk_pk = _receive_setup(ctx, plan, msg, pk)
    state = _TrentState(_start(ctx, plan), plan.gram_bits)
    rounds = None
    shifts: list[int] = []
    for t in range(params.max_rounds + 1):
        with ctx.phase("iterate"):
            a_enc = None
            if t >= 1:  # step 1, the leader's part: s_(t-1), its share of ||w_(t-1)||^2
                s, part = ctx.recv(owners[0], msg["round_open"])
                if isinstance(s, bool) or not plan.s_min <= s <= plan.s_max:
                    raise ProtocolError(
                        f"the leader sent shift {s!r}, outside [{plan.s_min}, {plan.s_max}]"
                    )
                shifts.append(s)
                state.r_previous, state.r_prime = state.r_prime, [v >> s for v in state.rho]
                a_enc = part.add_encoded(np.array([_dot(state.rho, state.rho)], dtype=object))
            _trent_batch(ctx, plan, msg, state, share, gram, a_enc, pk)  # steps 1-3
        if check_round(params, t):
            with ctx.phase("check"):
                if _trent_check(ctx, plan, msg, state, share, dgk_pk):
                    rounds = t
                    break
    if rounds is None:
        raise ConvergenceError(f"the owners did not converge within max_rounds={params.max_rounds}")
    with ctx.phase("output"):
        _trent_output(ctx, plan, msg, state, share, own_grams)
    vector = gather_shares(ctx, params, msg["share"]) if params.reveal_to_trent else None
    return {"mode": "private", "rounds": rounds, "shifts": shifts, "eigenvector": vector}


def _trent_batch(ctx, plan: Plan, msg, state: _TrentState, share, gram, a_enc, pk) -> None:
    """Steps 1-3 at Trent: E[w_t] = sum_i E[Ghat_i X'_t] - E[Ghat] R'_t, masked, and the
    blurred magnitude; the leader gets the ciphertexts first, everyone Trent's partials."""
    owners = plan.params.owners
    parts = [ctx.recv(o, msg["contribution"]) for o in owners]  # step 1
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    weights = np.array([[-v for v in state.r_prime]], dtype=object)
    blocks = [(gram[:, q], weights) for q in range(plan.vector_cts)]
    w = total + CipherArray.lincomb_blocks(blocks)
    rng = ctx.rng
    rho = [
        (1 << plan.product_bits) + rng.randbits(plan.product_bits + plan.sigma)
        for _ in range(plan.k)
    ]
    masked = w.add_encoded(np.array(_packed_vector(rho, plan), dtype=object))
    # every slot now holds w_j + rho_j in [0, 2^(W - 1)): carries cancelled out
    masked = masked.with_bound(plan.whole(1 << (plan.slot_bits - 1))).rerandomize()
    if a_enc is None:  # round 0: the start's magnitude
        a_enc = _encrypt(pk, [state.a_first], 1 << (2 * plan.product_bits))
    blur = (1 << plan.blur_bits) + rng.randbits(plan.blur_bits)  # rho' in [2^A, 2^(A+1))
    noise = np.array([rng.randbits(plan.blur_noise_bits)], dtype=object)  # e' in [0, 2^E)
    y_enc = a_enc.with_bound(1 << (2 * plan.product_bits)).mul(blur).add_encoded(noise)
    y_enc = y_enc.with_bound(plan.y_bound).rerandomize()
    leader = owners[0]
    ctx.send(leader, msg["masked"], [masked, y_enc])  # step 2: the leader's partials start
    blob = _partials(share, masked.ciphertexts() + y_enc.ciphertexts())
    for o in owners:
        ctx.send(o, msg["partial"], blob)  # step 3
    # E[rho_t] serves the leader's share of the next magnitude: after the partials
    ctx.send(leader, msg["mask_vector"], _encrypt(pk, rho, plan.mask_bound))
    state.rho = rho


def _trent_check(ctx, plan: Plan, msg, state: _TrentState, share, dgk_pk) -> bool:
    """Trent's half of the convergence test (module docstring): the inner products of
    the unmasked vectors, the test value V from one masked multiplication, [V >= 0] by
    a DGK comparison, and the bit decrypted jointly."""
    leader, others = plan.params.owners[0], plan.params.owners[1:]
    b1b2c, h = _trent_inner_products(ctx, plan, msg, state, leader)
    value = _trent_test_value(ctx, plan, msg, share, b1b2c, leader)
    bit = _trent_compare(ctx, plan, msg, share, value, h, dgk_pk, leader)
    mine = share.partial(bit.ciphertexts())
    blob = pack_partials(share.public_key, mine)
    ctx.send(leader, msg["check_result"], [bit, blob])
    for o in others:
        ctx.send(o, msg["check_partial"], blob)
    theirs = ctx.recv(leader, msg["check_partial"])
    return _test_bit(_combined(share.public_key, mine, theirs, count=1)[0])


def _trent_inner_products(ctx, plan: Plan, msg, state: _TrentState, leader: str):
    """E(b1), E(b2), E(c) from the leader's masked vectors and their squared norms and
    product, Trent's masks R0, R1 removed; and the leader's test scale h (checked)."""
    vectors = ctx.recv(leader, msg["check_vectors"])  # E[X'_(t-1)], E[X'_t]
    scalars = ctx.recv(leader, msg["check_scalars"])  # E of |X'_(t-1)|^2, |X'_t|^2, X'.X'
    h = ctx.recv(leader, msg["check_scale"])
    if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= plan.h_max:
        raise ProtocolError(f"the leader sent test scale {h!r}, outside [0, {plan.h_max}]")
    r0, r1 = state.r_previous, state.r_prime
    # b1 = |X0|^2 - 2 X0.R0 + |R0|^2, b2 = |X1|^2 - 2 X1.R1 + |R1|^2,
    # c = X0.X1 - X0.R1 - X1.R0 + R0.R1
    cross = CipherArray.lincomb_blocks(
        [
            (vectors[0], np.array([[-2 * v for v in r0], [-v for v in r1]], dtype=object)),
            (vectors[1], np.array([[-2 * v for v in r1], [-v for v in r0]], dtype=object)),
        ]
    )
    cross = CipherArray.concatenate([cross[0:1], cross[2:3], cross[1:2] + cross[3:4]])
    own = np.array([_dot(r0, r0), _dot(r1, r1), _dot(r0, r1)], dtype=object)
    return (scalars + cross).add_encoded(own).with_bound(plan.b_max), h


def _trent_test_value(ctx, plan: Plan, msg, share, b1b2c, leader: str):
    """E(V), V = c^2 2^k + b1 b2 (tol^2 - 2^k): b1 b2 and c^2 by one masked
    multiplication the leader answers (the three masked values packed in one
    ciphertext, decrypted jointly)."""
    rng, width = ctx.rng, plan.check_width
    m = [rng.randbits(plan.b_max.bit_length() + plan.sigma) for _ in range(3)]
    offset = plan.b_max + m[2]
    shifted = b1b2c.add_encoded(np.array([m[0], m[1], offset], dtype=object))
    shifted = shifted.with_bound(1 << (width - 1))
    packed = shifted[0:1] + shifted[1:2].mul(1 << width) + shifted[2:3].mul(1 << (2 * width))
    packed = packed.rerandomize()
    ctx.send(leader, msg["check_masked"], [packed, _partials(share, packed.ciphertexts())])
    products = ctx.recv(leader, msg["check_products"])
    b1, b2, c = b1b2c[0:1], b1b2c[1:2], b1b2c[2:3]
    # b1 b2 = (b1 + m0)(b2 + m1) - m1 b1 - m0 b2 - m0 m1;  c^2 = (c + o)^2 - 2 o c - o^2
    bb = (products[0:1] + b1.mul(-m[1]) + b2.mul(-m[0])).add_encoded(
        np.array([-m[0] * m[1]], dtype=object)
    )
    cc = (products[1:2] + c.mul(-2 * offset)).add_encoded(
        np.array([-offset * offset], dtype=object)
    )
    bb, cc = bb.with_bound(plan.b_max**2), cc.with_bound(plan.b_max**2)
    return cc.mul(1 << plan.tol_scale_bits) + bb.mul(plan.tol_squared - (1 << plan.tol_scale_bits))


def _trent_compare(ctx, plan: Plan, msg, share, value, h: int, dgk_pk, leader: str):
    """E([V >= 0]) by the DGK comparison with the leader: V masked and decrypted jointly,
    the low bits compared bitwise under DGK, Veugen's correction; re-randomised."""
    rng = ctx.rng
    r_full = rng.randbits(h + plan.compare_bits + plan.sigma)
    masked = value.add_encoded(np.array([(1 << (h + plan.compare_bits)) + r_full], dtype=object))
    masked = masked.with_bound(plan.value_bound).rerandomize()
    ctx.send(leader, msg["check_value"], [masked, _partials(share, masked.ciphertexts())])
    r = r_full >> h
    alpha, r_high = r & ((1 << plan.compare_bits) - 1), r >> plan.compare_bits
    d_high, blob = ctx.recv(leader, msg["check_bits"])
    try:
        beta_bits = dgk_pk.unpack(blob, plan.compare_bits)
    except CryptoError as e:
        raise ProtocolError(f"check_bits: {e}") from e
    delta_b = rng.randbits(1)
    meter = d_high.public_key.meter
    ctx.send(
        leader,
        msg["check_blinded"],
        dgk_pk.pack(blind_bitwise(dgk_pk, beta_bits, alpha, delta_b, rng, meter)),
    )
    delta_a = ctx.recv(leader, msg["check_delta"])
    xor = delta_a.mul(1 - 2 * delta_b).add_encoded(np.array([delta_b], dtype=object))
    # [V >= 0] = floor(d / 2^l) - floor(r / 2^l) - [beta < alpha]
    bit = (d_high - xor).add_encoded(np.array([-r_high], dtype=object))
    return bit.with_bound(1 << (plan.sigma + 3)).rerandomize()


def _trent_output(ctx, plan: Plan, msg, state: _TrentState, share, own_grams) -> None:
    """E_i[Q_i R'_T] to each owner; the norm N jointly decrypted for the owners."""
    owners = plan.params.owners
    weights = np.array([state.r_prime], dtype=object)
    for o, enc in zip(owners, own_grams):
        groups = len(plan.output_groups)
        part = CipherArray.lincomb_blocks([(enc[:, q], weights) for q in range(groups)])
        part = part.with_bound(plan.whole_z(plan.output_slot)).rerandomize()
        ctx.send(o, msg["output_part"], part)
    total = ctx.recv(owners[0], msg["final_term"])
    for o in owners[1:]:
        total = total + ctx.recv(o, msg["final_term"])
    total = total.rerandomize()
    ctx.send(owners[0], msg["final_norm"], total)
    blob = _partials(share, total.ciphertexts())
    for o in owners:
        ctx.send(o, msg["final_partial"], blob)
