"""Multiparty differentially private aggregation (thesis 003, 4.1.3 and appendix A.3).

Data owners P_1..P_K each train an L2-regularised logistic regression on their own
data (:func:`train_local`; nothing leaves the owner).  The protocol publishes

    w^s = (1/K) sum_j w_j + eta,   eta the noise of the owner with the smallest data set,

without anyone learning a data-set size, which owner is the smallest, eta, or any
w_j.  The curator (Trent; the thesis calls him Charlie) helps; a test-time user
(Dave) adds the published shares and classifies.  A second descriptor, ``dp_sum``
(:data:`DP_SUM`), is the same secure aggregation for vectors of HMM expected counts
(federated DP Baum-Welch, :mod:`smc_hmm.dp.federated`).

**The noise (why not the thesis's Laplace).**  The sensitivity bound used by the
thesis (Chaudhuri and Monteleoni 2008, Corollary 2; Theorem A.3.1, for rows with
||x||_2 <= 1 and the objective (1/n) sum log(1 + e^{-y w.x}) + (lambda/2) ||w||^2) is
an *L2* bound: ||w(D) - w(D')||_2 <= 2/(n lambda) for neighbouring D, D' of size n
(one row replaced).  The thesis draws eta with i.i.d. Laplace coordinates of scale
b = 2/(n_(1) eps lambda), density prop. to exp(-||eta||_1 / b).  The privacy loss is
then |(||eta||_1 - ||eta + delta||_1)| / b <= ||delta||_1 / b, and ||delta||_1 can be
sqrt(d) ||delta||_2 = sqrt(d) 2/(n lambda) (delta along (1, ..., 1)/sqrt(d)): the thesis's
noise is only sqrt(d) eps-DP.  We draw eta with density prop. to
exp(-eps n_(1) lambda ||eta||_2 / 2), which is eps-DP for the L2 bound: the K-norm
mechanism with K the L2 ball of radius 2/(n lambda) (:mod:`smc_hmm.dp.knorm`):
||eta||_2 ~ Gamma(d, 2/(n_(1) eps lambda)) times a uniform direction
(:func:`l2_noise`).  We keep the thesis's calibration to one owner's sensitivity; the
average (1/K) sum_j w_j is K times less sensitive, so the noise is conservative by a
factor K.  Sizes are fixed under the neighbouring relation (one row replaced), as in
the thesis.  eta's radius is cut at the public 1 - 2^-64 quantile for n = 1 (so the
encrypted arithmetic has a public bound): this changes the mechanism with probability
below 2^-64 (a delta of 2^-64).

Roles (names are public :class:`Params`):

* **lead owner** P_1 (``owners[0]``): a data owner who also holds the owners' Paillier
  key pair pk_O (and its DGK key, for the comparisons) and the owners' permutation pi_1;
  he relays the other owners' messages (this is how "the owners mutually" permute and
  un-permute in the thesis).
* **owners** P_2..P_K: data owners; private input ``(X, y)`` (rows in the unit L2 ball,
  labels +-1 or 0/1).  Output: their own ``w_j``, ``n_j`` and ``eta_j`` (local values).
* **curator** (Trent/Charlie): holds his own key pair pk_C.  Output: j~ (below).
* **user** (Dave): receives the K + 1 published shares; output: w^s.

Public parameters: the names, ``dim`` d, ``eps``, ``lam`` (lambda), ``max_size`` (a
public bound on every n_j: sizes are private, so every declared bound uses it),
``scale`` (fractional bits of w and eta), ``sigma`` (statistical masking, 40), the DGK
key size.  Bounds: |w_j,i| <= 1/lambda (at the optimum lambda w = (1/n) sum -l' y x), so
B_w = 2^scale/lambda; |eta_i| <= R_eta (above).

Messages (tags ``agg.*``; the comparison's are those of :mod:`protocols.stages.dgk`):

Stage 1 -- the index of the smallest data set, hidden by two permutations.
  0. P_1 -> owners ``agg.pk_o`` pk_O; P_1 -> Trent ``cmp.pk``, ``cmp.dgk``; Trent ->
     owners ``agg.pk_c`` pk_C.
  1. Each owner j splits n_j = a_j + b_j, b_j uniform on [0, 2^(L + sigma)) (L = bits
     of max_size) and sends ``agg.size_shares`` (E_O(a_j), E_C(b_j)) to P_1.
  2. P_1 (who knows pi_1) sends Trent ``agg.permuted``: the shares in pi_1 order,
     re-randomised (Trent cannot link a slot to its sender).
  3. Trent decrypts the b-shares, re-randomises with r_i uniform on +-2^(L + sigma)
     (E_O(a_i + r_i), b_i - r_i), permutes both with his pi_2 and forms
     E_O(n~_i) = E_O(a~_i) b~_i, i.e. n in pi_2 pi_1 order.
  4. Secure argmin: the DGK/Veugen tournament of :func:`protocols.stages.dgk.bob_argmax`
     on -n~ (Trent evaluator, P_1 key holder, random tie-break), revealed to Trent:
     j~, the smallest set's position in pi_2 pi_1 order.
Stage 2 -- the smallest owner's noise, selected obliviously.
  5. Trent -> P_1 ``agg.indicator``: E_C(pi_2^{-1}(u)), u the indicator of j~.
  6. P_1 un-permutes with pi_1^{-1} and sends owner j ``agg.select`` E_C(v_j),
     v_j = [j is the smallest] (re-randomised).
  7. Owner j draws eta_j (L2 K-norm noise for its own n_j) and sends P_1 ``agg.noise``
     psi_j = E_C(v_j)^{eta_j} = E_C(v_j eta_j) (re-randomised).
  8. P_1 sends Trent ``agg.masked_noise`` E_C(sum_j v_j eta_j + s) = E_C(eta + s), s
     uniform on [0, 2^(bits(K B_eta) + sigma)); P_1 keeps w_1 - K s.
Stage 3 -- additive shares of K w^s among the K + 1 participants.
  9. Trent decrypts eta + s and holds K (eta + s); owner j holds w_j (P_1: w_1 - K s),
     all as fixed-point integers.  Each participant splits its vector into K + 1
     uniform shares mod 2^m and sends one to each other participant ``agg.reshare``
     (m: public, from K, B_w, B_eta); each adds what it holds: its published share.
 10. Every participant -> Dave ``agg.publish``; Dave adds them mod 2^m, divides by
     K 2^scale: w^s = (1/K) sum_j w_j + eta.

Who learns what (semi-honest, non-colluding):

* Trent: b-shares (uniform, independent of n within 2^-sigma), the argmin position j~
  in pi_2 pi_1 order (uniform over owners because pi_1 is uniform and unknown to him),
  eta + s (s hides eta within 2^-sigma), uniform reshares, and nothing under pk_O
  (IND-CPA); in the tournament he sees only what :mod:`protocols.stages.dgk` says (the
  label).  He does not learn any n_j, which owner is smallest, eta or any w_j.
* P_1: everything under pk_O he could decrypt is an a-share (n_j - b_j, hiding n_j within
  2^-sigma); the tournament shows him masked values and uniform bits; everything else
  is under pk_C or a uniform reshare.  He knows pi_1 but not pi_2 or j~.
* Owners P_2..P_K: only ciphertexts under pk_O and pk_C and uniform reshares.
* Dave and the public: w^s (eps-DP) and the K + 1 published shares, which are uniform
  given their sum.
* Revealed fields: ``argmax.opened`` (the label masked, see compare), ``agg.reshare`` and
  ``agg.publish`` (uniform shares mod 2^m).

Coalitions: Trent + P_1 recover every n_j (a- and b-shares), the smallest owner (pi_1 and
j~), and eta (eta + s and s), hence w-sum without noise from the published shares:
the protocol is not secure against them together.  Trent + any owner other than P_1
learns nothing more than that owner's own data.  All K owners together know every w_j
but not eta (it is under pk_C and masked by s only towards Trent, but P_1 knows s: the
owners would need Trent's sk_C).  A malicious party could deviate (e.g. Trent send a
non-indicator vector): out of scope (semi-honest model).

Compared with the thesis: with Veugen's comparison of *encrypted* values Trent forms
E_O(n~) himself, so the owners need not decrypt a~ (the thesis's step 1.5); the owners'
"mutual" permutation and un-permutation are P_1's, who relays (a sender identity would
otherwise give pi_1 away to Trent); r and pi_2 are kept as in the thesis (pi_2 hides j~
from P_1 if the indicator vector were ever opened).

**dp_sum** (:data:`DP_SUM`, one E-step of federated DP Baum-Welch,
:mod:`smc_hmm.dp.federated`).  Roles: the curator (key holder, pk_C), the lead owner
P_1 (adds the noise) and the owners.  Public: the names, the vector ``length``, the
Laplace scale of every entry (``noise_scales``: Delta_c / eps_c of its count component,
seed 000's sensitivities), ``max_abs`` (a bound on every owner's entries, from public
maxima of sequences, length and feature norm) and ``scale``.  Messages: 1. curator ->
owners ``fed.pk``; 2. owner j -> P_1 ``fed.counts`` E_C(c_j); 3. P_1 -> curator
``fed.total`` E_C(sum_j c_j + noise), re-randomised, the noise Laplace per entry (cut at
``clip`` = 50 scales, a delta of about d e^-50).  The curator decrypts only the noisy
total (the DP release; the M-step and the next model are post-processing, public).  P_1
sees only ciphertexts under pk_C, the other owners only pk_C.  Coalitions: curator + P_1
recover the noiseless total (P_1 knows the noise) and every owner's counts (P_1 holds
their ciphertexts); curator + any other owner learn only that owner's counts; owners
without the curator learn nothing.  The noise is added once, so the release has the
centralised mechanism's distribution (per-owner noise would cost K times the variance).

Run it: ``smc-hmm bench aggregate`` (costs and accuracy; ``docs/aggregate.md``),
``python examples/dp_aggregate.py`` (the test-error figure).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from protocols.stages.dgk import (
    ARGMAX_TAGS,
    ArgmaxParams,
    alice_argmax,
    alice_reveal,
    alice_send_keys,
    bob_argmax,
    bob_recv_keys,
    bob_reveal,
    reveal_randomizers,
)
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray
from smc_hmm.crypto.fixedpoint import encode
from smc_hmm.dp.classifier import (
    aggregate_plain,
    check_data,
    classify,
    clip_rows,
    l2_noise,
    laplace_noise_thesis,
    max_noise_radius,
    noise_scale,
    train_local,
)
from smc_hmm.dp.federated import laplace_vector
from smc_hmm.dp.params import check_epsilon
from smc_hmm.dp.random import DPRandom
from smc_hmm.errors import (
    AggregateInputError,
    ConfigError,
    PrivacyParameterError,
    ProtocolError,
)
from smc_hmm.messages import Ciphertexts, Key, Message, Revealed
from smc_hmm.protocol import Example, ProtocolDescriptor, Role, assign_by_field, params_from_config
from smc_hmm.runtime.inputs import load_array, load_vector

NAME = "aggregate"
DP_SUM_NAME = "dp_sum"


# -- public parameters --------------------------------------------------------------------


def _names(owners, *others) -> tuple[str, ...]:
    owners = typed.party_names("owners", owners, *others, error=AggregateInputError)
    if len(owners) < 2:
        raise AggregateInputError(
            f"the aggregate needs K >= 2 data owners, got K = {len(owners)} (with one owner "
            "there is nothing to hide the size or the noise among: use the DP layer directly)"
        )
    return owners


@dataclass(frozen=True)
class Params:
    """Public parameters of the DP classifier aggregate."""

    owners: tuple[str, ...] = ("p1", "p2")
    curator: str = "trent"
    user: str = "dave"
    dim: int = typed.whole(2, 1, None)
    eps: float = 1.0
    lam: float = 0.01
    max_size: int = typed.whole(2**20, 1, None)
    scale: int = typed.whole(32, 0, None)
    sigma: int = typed.sigma()
    dgk_bits: int | None = None
    dgk_t: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "owners", _names(self.owners, self.curator, self.user))
        typed.check_fields(self, AggregateInputError)
        check_epsilon(self.eps, "eps", error=PrivacyParameterError)
        check_epsilon(self.lam, "lam", error=AggregateInputError)
        self.argmax_params()  # validates the DGK parameters

    @property
    def k(self) -> int:
        return len(self.owners)

    @property
    def lead(self) -> str:
        return self.owners[0]

    @property
    def size_bits(self) -> int:
        return int(self.max_size).bit_length()

    @property
    def share_bound(self) -> int:
        """b_j uniform on [0, 2^(L + sigma)); |a_j| = |n_j - b_j| below the same bound."""
        return 1 << (self.size_bits + self.sigma)

    @property
    def w_bound(self) -> int:
        return math.ceil(2**self.scale / self.lam) + 1

    @property
    def noise_radius(self) -> float:
        return max_noise_radius(self.dim, self.eps, self.lam)

    @property
    def noise_bound(self) -> int:
        return math.ceil(self.noise_radius * 2**self.scale) + 1

    @property
    def mask_bits(self) -> int:
        return (self.k * self.noise_bound).bit_length() + self.sigma

    @property
    def modulus_bits(self) -> int:
        """m: the stage-3 shares live in Z_{2^m}, wide enough for |K w^s| 2^scale."""
        return (self.k * (self.w_bound + self.noise_bound)).bit_length() + 2

    @property
    def share_width(self) -> int:
        return (self.modulus_bits + 7) // 8

    def argmax_params(self) -> ArgmaxParams:
        return ArgmaxParams(
            bits=self.size_bits + 2,
            count=self.k,
            sigma=self.sigma,
            reveal_to="bob",
            tie_break="random",
            key_holder=self.lead,
            evaluator=self.curator,
            dgk_bits=self.dgk_bits,
            dgk_t=self.dgk_t,
            comparison="dgk",
        )

    def messages(self) -> dict[str, Message]:
        k, d, sb = self.k, self.dim, self.share_bound
        shares = (Ciphertexts(0, sb, (1,)), Ciphertexts(0, sb, (1,)))
        out = {
            "pk_o": Message("agg.pk_o", Key()),
            "pk_c": Message("agg.pk_c", Key()),
            "size_shares": Message("agg.size_shares", shares),
            "permuted": Message(
                "agg.permuted",
                (Ciphertexts(0, sb, (k,), fresh=True), Ciphertexts(0, sb, (k,), fresh=True)),
            ),
            "indicator": Message("agg.indicator", Ciphertexts(0, 1, (k,))),
            "select": Message("agg.select", Ciphertexts(0, 1, (1,), fresh=True)),
            "noise": Message(
                "agg.noise", Ciphertexts(self.scale, self.noise_bound, (d,), fresh=True)
            ),
            "masked_noise": Message(
                "agg.masked_noise",
                Ciphertexts(
                    self.scale, k * self.noise_bound + (1 << self.mask_bits), (d,), fresh=True
                ),
            ),
            "reshare": Message("agg.reshare", Revealed("a uniform share mod 2^m", (bytes,))),
            "publish": Message("agg.publish", Revealed("a published share mod 2^m", (bytes,))),
        }
        for m in self.argmax_params().messages():
            out[m.tag] = m
        return out

    @classmethod
    def from_config(cls, section: Mapping) -> Params:
        return params_from_config(cls, section, "aggregate")


# -- shares mod 2^m -----------------------------------------------------------------------


def _split(ctx, values: list[int], parts: int, bits: int) -> list[list[int]]:
    """``parts`` vectors uniform mod 2^bits that add up to ``values`` mod 2^bits."""
    mod = 1 << bits
    shares = [[ctx.rng.randbits(bits) for _ in values] for _ in range(parts - 1)]
    last = [(v - sum(s[i] for s in shares)) % mod for i, v in enumerate(values)]
    return [*shares, last]


def _pack(values: list[int], width: int) -> bytes:
    return b"".join(int(v).to_bytes(width, "big") for v in values)


def _unpack(blob: bytes, count: int, width: int, tag: str) -> list[int]:
    if not isinstance(blob, bytes) or len(blob) != count * width:
        raise ProtocolError(f"{tag}: expected {count * width} bytes")
    return [int.from_bytes(blob[i * width : (i + 1) * width], "big") for i in range(count)]


def _stage3(ctx, own: list[int], params: Params) -> None:
    """Steps 9-10 for one participant: reshare ``own`` among all K + 1, publish the sum."""
    msg = params.messages()
    peers = [*params.owners, params.curator]
    others = [p for p in peers if p != ctx.name]
    bits, width, mod = params.modulus_bits, params.share_width, 1 << params.modulus_bits
    parts = _split(ctx, own, len(peers), bits)
    for peer, part in zip(others, parts):
        ctx.send(peer, msg["reshare"], _pack(part, width))  # step 9: one share to each
    mine = parts[-1]
    for peer in others:
        got = _unpack(ctx.recv(peer, msg["reshare"]), params.dim, width, "agg.reshare")
        mine = [(a + b) % mod for a, b in zip(mine, got)]
    ctx.send(params.user, msg["publish"], _pack(mine, width))  # step 10: publish


def _encode_vector(values, scale: int, bound: int, what: str) -> list[int]:
    ints, top = encode(np.asarray(values, dtype=float), scale)
    if top > bound:
        raise AggregateInputError(f"{what} exceeds its public bound")
    return [int(v) for v in ints]


def _local(ctx, data, params: Params):
    """An owner's local phase: validate, train, draw its own noise eta_j."""
    x, y = check_data(data, params.dim, params.max_size)
    n = x.shape[0]
    with ctx.phase("train locally"):
        w = train_local(x, y, params.lam)
        eta = l2_noise(params.dim, n, params.eps, params.lam)
    radius = float(np.linalg.norm(eta))
    if radius > params.noise_radius:  # probability < 2^-64: the public cut
        eta = eta * (params.noise_radius / radius)
    w_int = _encode_vector(
        np.clip(w, -1 / params.lam, 1 / params.lam), params.scale, params.w_bound, "w"
    )
    eta_int = _encode_vector(eta, params.scale, params.noise_bound, "eta")
    return w, n, eta, w_int, eta_int


def _send_size_shares(ctx, n: int, pk_o, pk_c, params: Params):
    """Step 1: n = a + b, b uniform on [0, 2^(L + sigma)); (E_O(a), E_C(b))."""
    b = ctx.rng.randbits(params.size_bits + params.sigma)
    enc_a = CipherArray.encrypt_encoded(pk_o, [n - b], 0, params.share_bound)
    enc_b = CipherArray.encrypt_encoded(pk_c, [b], 0, params.share_bound)
    return enc_a, enc_b


# -- roles --------------------------------------------------------------------------------


def lead(ctx, data, params: Params) -> dict:
    """P_1: a data owner who holds pk_O, knows pi_1 and relays for the other owners."""
    w, n, eta, w_int, eta_int = _local(ctx, data, params)
    msg, k = params.messages(), params.k
    others = params.owners[1:]
    aparams = params.argmax_params()
    with ctx.phase("setup"):
        pk_o, _ = ctx.keypair
        for peer in others:
            ctx.send(peer, msg["pk_o"], pk_o)  # step 0: the owners' key
        dgk_sk = alice_send_keys(
            ctx, aparams.spec(), params.curator, dgk_bits=params.dgk_bits, dgk_t=params.dgk_t
        )  # step 0: pk_O and the DGK key to Trent
        pk_c = ctx.recv(params.curator, msg["pk_c"])
    with ctx.phase("stage 1: permuted size shares"):
        pi1 = list(range(k))
        ctx.rng.shuffle(pi1)  # owner j goes to slot pi1[j]
        shares = {params.lead: _send_size_shares(ctx, n, pk_o, pk_c, params)}
        for peer in others:
            enc_a, enc_b = ctx.recv(peer, msg["size_shares"])  # step 1
            enc_a.public_key.same_key(pk_o)
            enc_b.public_key.same_key(pk_c)
            shares[peer] = (enc_a, enc_b)
        slots = [None] * k
        for j, owner in enumerate(params.owners):
            slots[pi1[j]] = shares[owner]
        perm_a = CipherArray.concatenate([s[0] for s in slots])
        perm_b = CipherArray.concatenate([s[1] for s in slots])
        ctx.send(params.curator, msg["permuted"], [perm_a, perm_b])  # step 2
    with ctx.phase("stage 1: secure argmin"):
        alice_argmax(ctx, dgk_sk, aparams, params.curator)  # step 4
        alice_reveal(ctx, (1,), aparams.labels_bound, "bob", params.curator, ARGMAX_TAGS)
    with ctx.phase("stage 2: select the noise"):
        ind = ctx.recv(params.curator, msg["indicator"])  # step 5: E_C(pi2^-1(u))
        ind.public_key.same_key(pk_c)
        for j, owner in enumerate(params.owners[1:], start=1):
            ctx.send(owner, msg["select"], ind[pi1[j] : pi1[j] + 1])  # step 6
        own = ind[pi1[0] : pi1[0] + 1]
        psi = own.mul(np.array(eta_int, dtype=object), params.scale)  # step 7 (own)
        psi = psi.with_bound(params.noise_bound)
        for peer in others:
            got = ctx.recv(peer, msg["noise"])
            got.public_key.same_key(pk_c)
            psi = psi + got
        s = [ctx.rng.randbits(params.mask_bits) for _ in range(params.dim)]
        masked = psi.add_encoded(np.array(s, dtype=object))
        ctx.send(params.curator, msg["masked_noise"], masked)  # step 8: E_C(eta + s)
    with ctx.phase("stage 3: shares"):
        own_vec = [wi - k * si for wi, si in zip(w_int, s)]  # w_1 - K s
        _stage3(ctx, own_vec, params)  # steps 9-10
    return {"w": w, "n": n, "noise": eta}


def owner(ctx, data, params: Params) -> dict:
    """P_j (j >= 2): sends its size shares and its selected noise through P_1."""
    w, n, eta, w_int, eta_int = _local(ctx, data, params)
    msg = params.messages()
    with ctx.phase("setup"):
        pk_o = ctx.recv(params.lead, msg["pk_o"])  # step 0
        pk_c = ctx.recv(params.curator, msg["pk_c"])
    with ctx.phase("stage 1: permuted size shares"):
        enc_a, enc_b = _send_size_shares(ctx, n, pk_o, pk_c, params)
        ctx.send(params.lead, msg["size_shares"], [enc_a, enc_b])  # step 1
    with ctx.phase("stage 2: select the noise"):
        v = ctx.recv(params.lead, msg["select"])  # step 6: E_C(v_j)
        v.public_key.same_key(pk_c)
        psi = v.mul(np.array(eta_int, dtype=object), params.scale)  # E_C(v_j eta_j)
        ctx.send(params.lead, msg["noise"], psi)  # step 7
    with ctx.phase("stage 3: shares"):
        _stage3(ctx, w_int, params)  # steps 9-10
    return {"w": w, "n": n, "noise": eta}


def curator(ctx, private, params: Params) -> dict:
    """Trent (Charlie): finds the smallest set's permuted index, selects its noise."""
    msg, k = params.messages(), params.k
    aparams = params.argmax_params()
    with ctx.phase("setup"):
        pk_c, sk_c = ctx.keypair
        for peer in params.owners:
            ctx.send(peer, msg["pk_c"], pk_c)  # step 0
        pk_o, dgk_pk = bob_recv_keys(ctx, aparams.spec(), params.lead, dgk_bits=params.dgk_bits)
        _ = dgk_pk.table
    with ctx.phase("stage 1: permuted size shares"):
        enc_a, enc_b = ctx.recv(params.lead, msg["permuted"])  # step 2
        enc_a.public_key.same_key(pk_o)
        enc_b.public_key.same_key(pk_c)
        b = [int(v) for v in enc_b.decrypt_ints(sk_c)]
        # step 3: re-randomise with r, permute with pi_2
        bits = params.size_bits + params.sigma
        r = [ctx.rng.randbits(bits) * (1 - 2 * ctx.rng.randbits(1)) for _ in range(k)]
        a_r = enc_a.add_encoded(np.array(r, dtype=object))
        b_r = [bi - ri for bi, ri in zip(b, r)]
        pi2 = list(range(k))
        ctx.rng.shuffle(pi2)  # slot i goes to position pi2[i]
        inv = [0] * k
        for i, p in enumerate(pi2):
            inv[p] = i
        a_t = a_r[np.array(inv)]
        b_t = [b_r[inv[p]] for p in range(k)]
        sizes = a_t.add_encoded(np.array(b_t, dtype=object)).with_bound(params.max_size)
    with ctx.phase("stage 1: secure argmin"):
        label, _ = bob_argmax(
            ctx, (-sizes).with_bound(params.max_size), dgk_pk, aparams, None, params.lead
        )  # step 4: argmax of -n~
        (j_t,) = bob_reveal(ctx, label, aparams.labels_bound, "bob", params.lead, ARGMAX_TAGS)
    with ctx.phase("stage 2: select the noise"):
        u = [int(p == j_t) for p in range(k)]  # the indicator of position j~
        slot_ind = [u[pi2[i]] for i in range(k)]  # pi_2^-1(u): back to pi_1 slots
        ind = CipherArray.encrypt_encoded(pk_c, slot_ind, 0, 1)
        ctx.send(params.lead, msg["indicator"], ind)  # step 5
        masked = ctx.recv(params.lead, msg["masked_noise"])  # step 8
        masked.public_key.same_key(pk_c)
        eta_s = [int(v) for v in masked.decrypt_ints(sk_c)]
    with ctx.phase("stage 3: shares"):
        _stage3(ctx, [k * v for v in eta_s], params)  # steps 9-10: K (eta + s)
    return {"index": int(j_t)}


def user(ctx, private, params: Params) -> np.ndarray:
    """Dave: adds the K + 1 published shares; w^s = sum / (K 2^scale)."""
    msg = params.messages()
    mod = 1 << params.modulus_bits
    total = [0] * params.dim
    for peer in (*params.owners, params.curator):
        got = _unpack(
            ctx.recv(peer, msg["publish"]), params.dim, params.share_width, "agg.publish"
        )  # step 10
        total = [(a + b) % mod for a, b in zip(total, got)]
    centred = [v - mod if v >= mod // 2 else v for v in total]
    return np.array([math.ldexp(v, -params.scale) for v in centred]) / params.k


def load_dataset(value, base) -> tuple[np.ndarray, np.ndarray]:
    """An owner's ``data`` in a parties.toml: an array (inline or a .npy / .json / .csv /
    .txt file) whose last column is the label and the others the features."""
    arr = np.atleast_2d(load_array(value, base))
    if arr.shape[1] < 2:
        raise ConfigError("an owner's data needs at least one feature column and a label column")
    return arr[:, :-1], arr[:, -1]


_role_for = assign_by_field(lead="lead", owner="owners", curator="curator", user="user")


def randomizers_needed(params: Params, key_bits: int, inputs) -> dict[str, dict[str, int]]:
    """Fresh Paillier randomizers per party and key (pk_O: the lead's, pk_C: the
    curator's), from K and d alone (thesis 4.1.3; the module's steps): every owner's two
    size shares (step 1) and its d re-randomised noise terms (step 7); the lead's
    re-randomised permuted shares (2), selections (6) and masked noise (8); the argmin's
    own counts (step 4, :meth:`~protocols.stages.dgk.ArgmaxParams.randomizers`, revealed
    to Trent); Trent's indicator (5).  Dave draws none."""
    k, d, lead, trent = params.k, params.dim, params.lead, params.curator
    argmin, reveal = params.argmax_params().randomizers(), reveal_randomizers("bob")
    owner = {lead: 1, trent: 1 + d}
    return {o: owner for o in params.owners[1:]} | {
        lead: {lead: 1 + k + argmin["alice"] + reveal["alice"], trent: 1 + k + (k - 1) + d},
        trent: {lead: argmin["bob"] + reveal["bob"], trent: k},
        params.user: {},
    }


def example_dataset(rng, n: int, d: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows in the unit ball, labelled by the sign of the first feature (plus noise)."""
    x = clip_rows(rng.normal(size=(n, d)))
    return x, np.where(x[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, -1)


def example(key_bits: int, seed: int) -> Example:
    """Three owners of 2-feature data sets whose sizes are private (5, 30, 1; then all
    12): Dave learns the mean classifier plus the smallest owner's noise, with eps so
    large that the noise stays below its public cut ``noise_radius``, the tolerance."""
    rng = np.random.default_rng(seed)
    section = {"owners": ["p1", "p2", "p3"], "dim": 2, "eps": 1e6, "lam": 0.1,
               "max_size": 100, "dgk_bits": 512, "dgk_t": 32}  # fmt: skip
    params = Params.from_config(section)
    inputs = tuple(
        {o: example_dataset(rng, n) for o, n in zip(params.owners, sizes)}
        for sizes in ((5, 30, 1), (12, 12, 12))
    )

    def expected(i):
        ws = {o: train_local(*i[o], params.lam) for o in params.owners}
        owners = {o: {"w": w, "n": len(i[o][1]), "noise": np.zeros(2)} for o, w in ws.items()}
        index = lambda out: set(out) == {"index"} and 0 <= out["index"] < params.k  # noqa: E731
        return owners | {"trent": index, "dave": np.mean(list(ws.values()), axis=0)}

    x, y = inputs[0]["p2"]
    return Example(
        params=section,
        parties={"p1": "lead", "p2": "owner", "p3": "owner", "trent": "curator", "dave": "user"},
        inputs=inputs,
        expected=expected,
        tolerance=params.noise_radius + 2.0**-30,
        bad_inputs=({"p2": (x[:, :1], y)}, {"p1": (5 * x, y)}, {"p3": (x, y[:-1])}),
        config=lambda directory: (
            {"trent": {}, "dave": {}}
            | {o: {"data": np.column_stack(inputs[0][o]).tolist()} for o in params.owners}
        ),
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "DP aggregate classifier of K owners (thesis 4.1.3): mean w_j + L2 K-norm noise "
    "of the smallest data set, sizes hidden",
    params=Params.from_config,
    roles=(
        Role("lead", lead, kind="data_owner", holds_key=True, input="data", load=load_dataset),
        Role("owner", owner, kind="data_owner", input="data", load=load_dataset, many=True),
        Role("curator", curator, kind="trent", holds_key=True),
        Role("user", user, kind="alice"),
    ),
    role_for=_role_for,
    messages=lambda params, key_bits: params.messages().values(),
)


def run_aggregate(datasets: Sequence, params: Params, keys: Mapping, **kwargs):
    """Run the protocol in-process: ``datasets[j]`` is owner j's ``(X, y)``; ``keys`` maps
    the lead owner and the curator to their key pairs.  Returns the RunResult."""
    from smc_hmm.runtime import run_protocol

    if len(datasets) != params.k:
        raise AggregateInputError(f"{len(datasets)} data sets for K = {params.k} owners")
    parties = {params.lead: ("lead", datasets[0])}
    for name, data in zip(params.owners[1:], datasets[1:]):
        parties[name] = ("owner", data)
    parties[params.curator] = ("curator", None)
    parties[params.user] = ("user", None)
    return run_protocol(PROTOCOL, params, parties, keys=keys, **kwargs)


# -- federated DP Baum-Welch: the noisy secure sum of expected counts --------------------


@dataclass(frozen=True)
class SumParams:
    """Public parameters of one noisy secure sum (one E-step of federated DP Baum-Welch).

    ``noise_scales``: the Laplace scale b_i of every entry (Delta_c / eps_c of its
    component, :func:`smc_hmm.dp.federated.noise_scales`); ``max_abs``: a public bound on
    every entry of every owner's vector.
    """

    owners: tuple[str, ...] = ("p1", "p2")
    curator: str = "trent"
    length: int = typed.whole(1, 1, None)
    noise_scales: tuple[float, ...] = (1.0,)
    max_abs: float = 2.0**20
    scale: int = typed.whole(24, 0, None)
    clip: float = 50.0

    def __post_init__(self):
        object.__setattr__(self, "owners", _names(self.owners, self.curator))
        typed.check_fields(self, AggregateInputError)
        scales = tuple(float(b) for b in self.noise_scales)
        if len(scales) != self.length:
            raise AggregateInputError(
                f"{len(scales)} noise scales for vectors of length {self.length}"
            )
        if not all(math.isfinite(b) and b >= 0 for b in scales):
            raise PrivacyParameterError("noise scales must be finite and >= 0")
        object.__setattr__(self, "noise_scales", scales)
        check_epsilon(self.max_abs, "max_abs", error=AggregateInputError)
        check_epsilon(self.clip, "clip", error=AggregateInputError)

    @property
    def lead(self) -> str:
        return self.owners[0]

    @property
    def bound(self) -> int:
        return math.ceil(self.max_abs * 2**self.scale) + 1

    @property
    def noise_bound(self) -> int:
        return math.ceil(self.clip * max(self.noise_scales) * 2**self.scale) + 1

    def messages(self) -> dict[str, Message]:
        d, k = self.length, len(self.owners)
        return {
            "pk": Message("fed.pk", Key()),
            "counts": Message("fed.counts", Ciphertexts(self.scale, self.bound, (d,))),
            "total": Message(
                "fed.total",
                Ciphertexts(self.scale, k * self.bound + self.noise_bound, (d,), fresh=True),
            ),
        }

    @classmethod
    def from_config(cls, section: Mapping) -> SumParams:
        return params_from_config(cls, section, "dp_sum")


def _check_counts(values, params: SumParams) -> np.ndarray:
    return typed.bounded_vector(
        values, params.length, params.max_abs, "counts", error=AggregateInputError
    )


def count_noise(params: SumParams, rng: DPRandom | None = None) -> np.ndarray:
    """Lap(b_i) per entry, cut at clip b_i (:func:`smc_hmm.dp.federated.laplace_vector`)."""
    return laplace_vector(np.asarray(params.noise_scales), rng, params.clip)


def _owner_start(ctx, counts, params: SumParams):
    """An owner's counts, checked; the messages; the curator's key (step 1)."""
    c = _check_counts(counts, params)
    msg = params.messages()
    return c, msg, ctx.recv(params.curator, msg["pk"])  # step 1


def sum_lead(ctx, counts, params: SumParams) -> None:
    """P_1: E(c_1) + sum_j E(c_j) + E(noise), re-randomised, to the curator."""
    c, msg, pk = _owner_start(ctx, counts, params)
    with ctx.phase("aggregate"):
        total = CipherArray.encrypt(pk, c, params.scale).with_bound(params.bound)
        for peer in params.owners[1:]:
            got = ctx.recv(peer, msg["counts"])  # step 2
            got.public_key.same_key(pk)
            total = total + got
        noise = CipherArray.encrypt(pk, count_noise(params), params.scale)
        total = total + noise.with_bound(params.noise_bound)
    ctx.send(params.curator, msg["total"], total)  # step 3: E(sum_j c_j + noise)
    return None


def sum_owner(ctx, counts, params: SumParams) -> None:
    """P_j: E_C(c_j) to P_1."""
    c, msg, pk = _owner_start(ctx, counts, params)
    with ctx.phase("encrypt"):
        enc = CipherArray.encrypt(pk, c, params.scale).with_bound(params.bound)
    ctx.send(params.lead, msg["counts"], enc)  # step 2
    return None


def sum_curator(ctx, private, params: SumParams) -> np.ndarray:
    """The curator: decrypts the noisy total (the DP release), nothing else."""
    pk, sk = ctx.keypair
    msg = params.messages()
    for peer in params.owners:
        ctx.send(peer, msg["pk"], pk)  # step 1
    total = ctx.recv(params.lead, msg["total"])  # step 3
    total.public_key.same_key(pk)
    return total.decrypt(sk)


def sum_randomizers(params: SumParams, key_bits: int, inputs) -> dict[str, int]:
    """Fresh randomizers per party: every owner encrypts its d counts; the lead also the
    noise and re-randomises the total; the curator draws none."""
    d = params.length
    return {o: d for o in params.owners} | {params.lead: 3 * d, params.curator: 0}


def sum_example(key_bits: int, seed: int) -> Example:
    """Three owners' count vectors of length 3 (random, then zeros and the bound): the
    curator learns their sum plus Laplace noise cut at ``clip`` scales, the tolerance."""
    rng = np.random.default_rng(seed)
    section = {"owners": ["p1", "p2", "p3"], "length": 3, "noise_scales": [1e-3] * 3,
               "max_abs": 100.0}  # fmt: skip
    params = SumParams.from_config(section)
    owners = params.owners
    inputs = (
        {o: rng.uniform(-100, 100, size=3) for o in owners},
        {o: np.array([0.0, 100.0, -100.0]) for o in owners},
    )
    return Example(
        params=section,
        parties={"p1": "lead", "p2": "owner", "p3": "owner", "trent": "curator"},
        inputs=inputs,
        expected=lambda i: {o: None for o in owners} | {"trent": sum(i[o] for o in owners)},
        tolerance=params.clip * 1e-3 + 4 * 2.0**-params.scale,
        bad_inputs=({"p2": [1000.0, 0.0, 0.0]}, {"p1": np.zeros(2)}, {"p3": [np.inf, 0, 0]}),
        config=lambda directory: (
            {"trent": {}} | {o: {"vector": inputs[0][o].tolist()} for o in owners}
        ),
    )


DP_SUM = ProtocolDescriptor(
    name=DP_SUM_NAME,
    summary="noisy secure sum of the owners' vectors (federated DP Baum-Welch counts): "
    "Laplace noise added once under encryption, the curator decrypts only the noisy total",
    params=SumParams.from_config,
    roles=(
        Role("lead", sum_lead, kind="data_owner", input="vector", load=load_vector),
        Role("owner", sum_owner, kind="data_owner", input="vector", load=load_vector, many=True),
        Role("curator", sum_curator, kind="trent", holds_key=True),
    ),
    role_for=_role_for,
    messages=lambda params, key_bits: params.messages().values(),
    randomizers=sum_randomizers,
    example=sum_example,
)


def secure_count_aggregator(
    keypair,
    *,
    owners: Sequence[str] | None = None,
    curator: str = "trent",
    scale: int = 24,
    max_abs: float = 2.0**20,
    **run_kwargs,
):
    """An ``aggregate(vectors, scales)`` for :func:`smc_hmm.dp.federated.federated_dp_baum_welch`
    that runs :data:`DP_SUM` (the curator holds ``keypair``).  Each call appends its
    RunResult to the returned function's ``results`` list (costs per party)."""
    from smc_hmm.runtime import run_protocol

    results: list = []

    def aggregate(vectors, scales):
        names = (
            tuple(owners) if owners is not None else tuple(f"p{i + 1}" for i in range(len(vectors)))
        )
        if len(names) != len(vectors):
            raise AggregateInputError(f"{len(vectors)} vectors for {len(names)} owners")
        params = SumParams(names, curator, len(scales), tuple(scales), max_abs, scale)
        parties = {names[0]: ("lead", vectors[0])}
        parties.update({n: ("owner", v) for n, v in zip(names[1:], vectors[1:])})
        parties[curator] = ("curator", None)
        result = run_protocol(DP_SUM, params, parties, keys={curator: keypair}, **run_kwargs)
        results.append(result)
        return np.asarray(result.outputs[curator])

    aggregate.results = results
    return aggregate


__all__ = [
    "DP_SUM",
    "PROTOCOL",
    "Params",
    "SumParams",
    "aggregate_plain",
    "check_data",
    "classify",
    "clip_rows",
    "count_noise",
    "l2_noise",
    "laplace_noise_thesis",
    "load_dataset",
    "noise_scale",
    "run_aggregate",
    "secure_count_aggregator",
    "train_local",
]
