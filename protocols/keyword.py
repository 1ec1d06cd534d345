"""Secure keyword recognition: which of Bob's keyword HMMs best explains Alice's speech.

Thesis 003, section 4.2.1 ("Secure Keyword Recognition"): Alice holds the
feature frames of an utterance (39 MFCCs per frame, :mod:`smc_hmm.features`)
and her Paillier key pair; Bob holds one HMM per keyword (the bundled digit
models by default, :mod:`smc_hmm.data`).  Alice learns the recognised keyword;
Bob learns nothing about her speech or the result.

Protocol (semi-honest Alice and Bob, not colluding):

1. The secure forward algorithm (:mod:`protocols.stages.forward_scoring`, ``reveal = False``):
   Bob obtains E(log P(x | lambda_k)) for every keyword k; Alice learns what
   that protocol's docstring lists (blinded per-step values), not the scores.
2. The argmax, in one of two public modes:

   * ``private`` (the default): Bob rescales E(log P) to ``score_scale``
     fractional bits (24: :func:`protocols.stages.primitives.bob_rescale`, additive
     masks of 40 statistical bits; the rounding moves a score by less than
     2^-23 nats) and runs the decision stage's argmax (:mod:`protocols.stages.decision`):
     by default one circuit Bob garbles on shares of the scores (``comparison =
     "garbled"``; Alice decrypts only masked values, uniform within 2^-40), or
     the thesis's DGK tournament over Bob's random permutation (``comparison =
     "dgk"``).  Alice learns only the winner's label (its index among Bob's
     keywords).  Whenever the top two scores differ by more than 2^-22 nats
     (about 2.4e-7, so surely by 1e-6) the decision is the plaintext one; closer
     ties go to the lower index (garbled) or Bob's random permutation (dgk).
   * ``fast`` (the thesis's, opt-in): Bob draws one random increasing affine
     map s -> a s + b (a log-uniform on [2^32, 2^96); b uniform on
     [0, 2^(96 + bound + 40)), bound the bits of the scores' public bound),
     fresh noise e_k uniform on [0, a) per label, and a random permutation pi,
     and sends E(a s_pi(k) + b + e_k) with the permuted labels.  Alice decrypts
     and names the label of the largest.  She learns **the order of all
     scores** (exact for scores that differ by at least one unit 2^-f of the
     scores' scale; closer ones may swap) **and the ratios of their
     differences** (d_ij = a (s_i - s_j) + e_i - e_j with |e_i - e_j| < a, so
     d_ij / d_kl gives (s_i - s_j) / (s_k - s_l) up to one unit in each
     difference).  The differences themselves she knows only up to the unknown
     slope a: within a factor of 2^64.  The scores are hidden by b (statistical
     distance 2^-40), and the noise removes the common factor a that made the
     gcd of the decrypted differences reveal every exact difference (a test
     runs that attack).
     The permuted labels are revealed too: their order is Bob's uniformly random
     permutation, independent of every private input.

``scoring = "viterbi"`` (opt-in): each keyword is scored by its best path instead of
log P, and the whole of it runs on :mod:`protocols.stages.decoding`'s garbled chain with the
``model`` output: Alice decrypts only emissions under uniform masks, the recursion, the
garbage model's margin and the argmax over the models are circuits Bob garbles, and she
decodes only the winner's index.  On the bundled test split the Viterbi and forward
decisions agree on 250 of 250 utterances.  Costs and what it does not yet cover (her
circuit inputs are not bound to her shares): ``docs/security.md``, "keyword".

Refusals: the v1 recursion may refuse a run after the forward phase (its
precision check); that check's outcome depends on Alice's speech, so she
finishes the argmax with the same messages first and raises only after the
last message: Bob's view of a refused and an accepted run is the same (a
transcript test compares them).  The v2 recursion (the default) never refuses.

Keyword spotting (``garbage = LABEL``, ``margin = M`` nats): one of Bob's models
is a garbage (background) model, the reference of the argmax stage
(:mod:`protocols.stages.decision`); Bob adds the public margin to its encrypted score
before the argmax, and Alice learns "no keyword" when it wins, i.e. unless the best
keyword beats the garbage model by more than M nats.  Alice learns the same as
without spotting (the garbage model is one more label).

Public parameters: the mode, the spotting label and margin, the forward
parameters (feature bound, scales), the number of keywords and their states,
the number of frames, and the labels (the keyword vocabulary is public; which
models Bob holds for them is not).
Run: ``smc-hmm demo keyword``, ``smc-hmm keyword --audio FILE.wav``, or
``protocol = "keyword"`` in a parties.toml (Alice's ``features``: frames or a WAV
file; Bob's ``models``: a model file); tests in
``tests/protocols/test_protocol_keyword.py``; the bundled speech:
``docs/speech-models.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from protocols.stages import decoding, forward_scoring
from protocols.stages.decision import DecisionSpec, alice_decide, bob_decide
from protocols.stages.dgk import COMPARISONS
from protocols.stages.primitives import (
    MaskSpec,
    alice_rescale,
    bob_rescale,
    log_uniform_integer,
    rescale_randomizers,
)
from smc_hmm import params as typed
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import (
    ConfigError,
    InvalidInputError,
    ProtocolError,
    SmcHmmError,
    warn_weaker_mode,
)
from smc_hmm.messages import Ciphertexts, Message, Public, Revealed
from smc_hmm.protocol import Example, ProtocolDescriptor, Role
from smc_hmm.runtime import inputs
from smc_hmm.runtime.inputs import resolve_path

NAME = "keyword"
MODES = ("private", "fast")
#: how a keyword's score is computed: ``forward`` (log P, the thesis's) or ``viterbi``
#: (the best path's log-probability, the whole recursion and the argmax in circuits Bob
#: garbles: Alice decrypts only uniformly masked emissions, :mod:`protocols.stages.decoding`)
SCORINGS = ("forward", "viterbi")
#: the fast mode's slope a is log-uniform on [2^A_LOW, 2^(A_LOW + A_OCTAVES))
A_LOW, A_OCTAVES = 32, 64
A_BITS = A_LOW + A_OCTAVES
#: the largest spotting margin, nats
MAX_MARGIN = 1000.0
#: forward parameters that name the thesis's scoring when ``scoring`` is not given
FORWARD_ONLY = frozenset({"recursion", "streams", "precision_bits", "blind_nats"})
#: ``scoring = "viterbi"``: the recursion's scale (a path's rounding stays below T 2^-16
#: nats; the bundled test split's closest decision is 4 nats apart)
VITERBI_SCALE = 16
#: ``scoring = "viterbi"``: the public bound on |x| (standardised features stay within 7 on
#: the bundled speech; a tighter bound than the forward's 100 leaves the bound program more
#: fractional bits inside the MAC field, protocols.stages.decoding.Plan.scale)
VITERBI_FEATURE_BOUND = 32.0


@dataclass(frozen=True)
class KeywordParams:
    """Public parameters: the argmax ``mode``, the forward algorithm's parameters and,
    for the private mode, the scores' fixed-point scale after rescaling."""

    mode: str = typed.one_of("private", MODES)
    forward: forward_scoring.ForwardParams = field(
        default_factory=lambda: forward_scoring.ForwardParams(feature_bound=100.0)
    )
    score_scale: int = typed.whole(24, 0, 32)
    #: keyword spotting: the label of Bob's garbage (background) model, or None
    garbage: str | None = None
    #: spotting: a keyword is named only if it beats the garbage model by this many nats
    margin: float = typed.number(0.0, 0, MAX_MARGIN)
    #: the private mode's argmax: ``garbled`` (one circuit Bob garbles) or ``dgk``
    #: (:mod:`protocols.stages.decision`)
    comparison: str = typed.one_of("garbled", COMPARISONS)
    #: ``viterbi`` (the default: the recursion and the decision in circuits Bob garbles,
    #: on bound inputs) or ``forward`` (the thesis's forward algorithm, then the argmax
    #: ``mode``); None: ``forward`` where ``mode = "fast"`` or ``comparison = "dgk"`` ask
    #: for the thesis's, else ``viterbi``
    scoring: str | None = None

    def __post_init__(self):
        typed.check_fields(self)
        if self.scoring is None:
            thesis = self.mode == "fast" or self.comparison == "dgk"
            object.__setattr__(self, "scoring", "forward" if thesis else "viterbi")
        if self.scoring not in SCORINGS:
            raise InvalidInputError(f"scoring must be one of {SCORINGS}, got {self.scoring!r}")
        if self.scoring == "viterbi" and (self.mode != "private" or self.comparison != "garbled"):
            raise InvalidInputError("viterbi scoring runs in the private mode, garbled")
        if self.mode == "fast":
            warn_weaker_mode("keyword mode 'fast' reveals to Alice the order of all scores")
        if self.garbage is not None and not isinstance(self.garbage, str):
            raise InvalidInputError("garbage must be the garbage model's label (a string)")
        if self.margin and self.garbage is None:
            raise InvalidInputError("a margin needs a garbage model (garbage = its label)")

    def margin_units(self) -> int:
        """The margin at the scores' fixed-point scale (public)."""
        return round(self.margin * 2**self.forward.precision.f)

    @classmethod
    def from_config(cls, section: Mapping) -> KeywordParams:
        """``[protocol]``: mode, score_scale, garbage, margin and any forward parameter."""
        section = dict(section)
        section.pop("name", None)
        mode = section.pop("mode", "private")
        score_scale = section.pop("score_scale", 24)
        garbage = section.pop("garbage", None)
        margin = section.pop("margin", 0.0)
        comparison = section.pop("comparison", "garbled")
        scoring = section.pop("scoring", None)
        if scoring is None and FORWARD_ONLY & set(section):  # the thesis's parameters
            scoring = "forward"
        section.setdefault("feature_bound", 100.0)
        try:
            fwd = forward_scoring.ForwardParams.from_config(section)
            return cls(mode, fwd, int(score_scale), garbage, float(margin), comparison, scoring)
        except (TypeError, ValueError, InvalidInputError) as e:
            raise ConfigError(f"bad keyword parameters: {e}") from e


def score_bound(params: KeywordParams, length: int) -> int:
    """Public bound on |E(log P)| at the forward's scale after ``length`` frames."""
    prec = params.forward.precision
    return (4 * (length + 1) << (prec.log_bound_bits + prec.f)) + params.margin_units()


def offset_bits(params: KeywordParams, length: int) -> int:
    """Bits of the fast mode's offset b: it hides a s (|a s| < 2^(A_BITS + bound bits))
    within statistical distance 2^-sigma (the forward parameters' sigma)."""
    sigma = params.forward.precision.sigma
    return A_BITS + score_bound(params, length).bit_length() + sigma


def _messages(params: KeywordParams, count: int, length: int) -> dict[str, Message]:
    affine = ((score_bound(params, length) + 1) << A_BITS) + (1 << offset_bits(params, length))
    return {
        "labels": Message("kw.labels", Public((list,))),
        "fast": Message(
            "kw.fast",
            (
                Ciphertexts(0, affine, (count,), fresh=True),
                Revealed("Bob's random order of the labels", (list,)),
            ),
        ),
    }


def declared_messages(params: KeywordParams, count: int, length: int) -> list[Message]:
    """Every message this protocol sends beyond the forward algorithm's, with its
    declarations (for the transcript harness and for readers)."""
    out = list(_messages(params, count, length).values())
    if params.mode == "private":
        out += _decision(params, count, length, None)[0].messages()
    return out


def _rescale_spec(params: KeywordParams, count: int, length: int) -> MaskSpec:
    prec = params.forward.precision
    return MaskSpec((prec.f,), (score_bound(params, length),), (count,), prec.sigma)


def _decision(params: KeywordParams, count: int, length: int, labels):
    """The argmax stage's public parameters (the garbage model, if any, is the reference
    with the margin already in its score) and the bits the rescaling drops."""
    drop = params.forward.precision.f - params.score_scale
    top = (score_bound(params, length) >> drop) + 1
    reference = None
    if params.garbage is not None and labels is not None:
        reference = labels.index(params.garbage)
    spec = DecisionSpec(
        count,
        top,
        rule="argmax",
        reference=reference,
        offset=round(params.margin * 2**params.score_scale),
        sigma=params.forward.precision.sigma,
        comparison=params.comparison,
        bind=False,  # the thesis's semi-honest mode: its scores exceed the MAC field
    )
    return spec, drop


def _models_and_labels(keywords):
    if isinstance(keywords, tuple) and len(keywords) == 2:
        models, labels = keywords
    else:
        models, labels = keywords, None
    models = list(models)
    labels = [str(i) for i in range(len(models))] if labels is None else [str(x) for x in labels]
    if len(labels) != len(models) or len(models) < 2:
        raise InvalidInputError("keyword recognition needs at least two models, one label each")
    return models, labels


def alice(ctx, frames, params: KeywordParams, peer: str = "bob") -> dict:
    """Alice: returns ``{"keyword": label, "index": k, "mode": mode}`` (with spotting,
    ``keyword`` and ``index`` are None when the garbage model wins)."""
    frames = np.asarray(frames, dtype=float)
    if frames.ndim != 2 or frames.shape[0] == 0:
        raise InvalidInputError("keyword recognition needs a (T, d) array of feature frames")
    length = frames.shape[0]
    if params.scoring == "viterbi":
        labels = _alice_labels(ctx, params, peer)
        out = decoding.alice(ctx, frames, viterbi_params(params, labels), peer)
        return _outcome(params, labels, out["model"])
    # Step 1: the secure forward algorithm; Bob keeps E(log P) for every keyword.  A
    # refusal of its precision check is deferred (ctx.defer): the runner raises it after
    # the argmax's last message, so Bob's view does not depend on Alice's speech
    forward_scoring.alice(ctx, frames, params.forward, reveal=False, peer=peer)
    return _alice_argmax(ctx, params, length, peer)


def _alice_argmax(ctx, params: KeywordParams, length: int, peer: str) -> dict:
    """Alice's step 2: the labels, then the argmax in the public mode."""
    _, sk = ctx.keypair
    labels = _alice_labels(ctx, params, peer)
    msg = _messages(params, len(labels), length)
    with ctx.phase("argmax"):
        if params.mode == "fast":
            # Step 2 (fast): decrypt E(a s_pi(k) + b) and name the largest
            scores, permuted = ctx.recv(peer, msg["fast"])
            if sorted(permuted) != sorted(labels):
                raise ProtocolError("kw.fast: the permuted labels are not the keywords")
            best = permuted[int(np.argmax([int(v) for v in scores.decrypt_ints(sk)]))]
            return _outcome(params, labels, labels.index(best))
        # Step 2 (private): rescale, then the argmax stage; Alice learns the label only
        decision, drop = _decision(params, len(labels), length, labels)
        alice_rescale(ctx, drop, _rescale_spec(params, len(labels), length), peer)
        return _outcome(params, labels, alice_decide(ctx, decision, peer))


def _alice_labels(ctx, params: KeywordParams, peer: str) -> list[str]:
    labels = ctx.recv(peer, Message("kw.labels", Public((list,))))
    if not labels or not all(isinstance(x, str) for x in labels):
        raise ProtocolError("kw.labels: expected a list of keyword labels")
    if params.garbage is not None and params.garbage not in labels:
        raise ProtocolError(f"kw.labels: no garbage model labelled {params.garbage!r}")
    return labels


def viterbi_params(params: KeywordParams, labels: list[str]) -> decoding.ViterbiParams:
    """``scoring = "viterbi"``: the secure Viterbi's public parameters, its output the best
    model's index; a garbage model carries the public margin as its offset."""
    offsets = [params.margin if label == params.garbage else 0.0 for label in labels]
    fwd = params.forward
    return decoding.ViterbiParams(
        output="model",
        reveal_score=False,
        score_scale=VITERBI_SCALE,
        feature_bound=min(float(fwd.feature_bound), VITERBI_FEATURE_BOUND),
        sigma=fwd.precision.sigma,
        offsets=tuple(offsets) if params.garbage is not None else (),
    )


def _outcome(params: KeywordParams, labels: list[str], index: int) -> dict:
    """Alice's output; with spotting, the garbage model's win is "no keyword" (None)."""
    if params.garbage is not None and labels[index] == params.garbage:
        return {"keyword": None, "index": None, "mode": params.mode}
    return {"keyword": labels[index], "index": index, "mode": params.mode}


def bob(ctx, keywords, params: KeywordParams, peer: str = "alice") -> None:
    """Bob: ``keywords`` is (models, labels) or a list of models (labels "0".."K-1")."""
    models, labels = _models_and_labels(keywords)
    if params.scoring == "viterbi":
        if params.garbage is not None and params.garbage not in labels:
            raise InvalidInputError(f"no model is labelled {params.garbage!r} (the garbage model)")
        ctx.send(peer, Message("kw.labels", Public((list,))), labels)
        return decoding.bob(ctx, models, viterbi_params(params, labels), peer)
    run = forward_scoring.bob_scores(ctx, models, params.forward, reveal=False, peer=peer)
    enc_logp, length, count = run.log_p, run.length, len(labels)
    msg = _messages(params, count, length)
    ctx.send(peer, msg["labels"], labels)
    if params.garbage is not None and params.garbage not in labels:
        raise InvalidInputError(f"no model is labelled {params.garbage!r} (the garbage model)")
    scores = enc_logp.with_bound(score_bound(params, length))  # the public bound
    with ctx.phase("argmax"):
        if params.mode == "fast":
            if params.garbage is not None:  # spotting: the garbage model carries the margin
                margin = np.zeros(count, dtype=object)
                margin[labels.index(params.garbage)] = params.margin_units()
                scores = scores.add_encoded(margin).with_bound(score_bound(params, length))
            # Step 2 (fast): one random increasing affine map, fresh noise below the
            # slope per label (no common factor), and a permutation
            a = log_uniform_integer(ctx.rng, A_LOW, A_OCTAVES)
            b = ctx.rng.randbits(offset_bits(params, length))
            noise = [b + ctx.rng.randbelow(a) for _ in range(count)]
            order = list(range(count))
            ctx.rng.shuffle(order)
            mapped = scores.mul(a).add_encoded(np.array(noise, dtype=object))
            permuted = CipherArray.concatenate([mapped[i : i + 1] for i in order])
            ctx.send(
                peer,
                msg["fast"],
                [permuted.with_scale(0), [labels[i] for i in order]],
            )
            return None
        # Step 2 (private): rescale to score_scale bits, then the argmax stage; with
        # spotting the garbage model is its reference and carries the public margin
        decision, drop = _decision(params, count, length, labels)
        small = bob_rescale(ctx, scores, drop, _rescale_spec(params, count, length), peer)
        bob_decide(ctx, small, decision, peer)
        return None


def load_frames(value, base):
    """Alice's input: feature frames (.npy/.json/.csv/.txt) or a WAV recording, which she
    featurises locally with the bundled pipeline (the bundled models expect it)."""
    return inputs.load_frames(value, base, decoding.bundled_features)


def load_keywords(value, base):
    """Bob's keyword models: ``"diag"`` or ``"full"`` for the bundled digit HMMs (as the
    command line's ``--models``), or a model file (with its labels, if it has them)."""
    from smc_hmm.hmm.io import load_models

    if value in ("diag", "full"):
        from smc_hmm.data import load_bundled_models

        return load_bundled_models(value)

    try:
        models, labels = load_models(resolve_path(value, base))
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
    return (models, labels) if labels else models


def randomizers_needed(params: KeywordParams, key_bits: int, inputs) -> dict[str, int]:
    """The forward algorithm's randomizers (without its reveal step) and the argmax's,
    from public sizes: the offline phase of ``smc-hmm bench keyword``."""
    models, labels = _models_and_labels(inputs["bob"])
    if params.scoring == "viterbi":  # the bound stage's encryptions and re-randomisations
        vp = viterbi_params(params, labels)
        structure = decoding.Structure.of(decoding.as_decoders(models))
        return decoding.Plan(vp, structure, len(inputs["alice"]), key_bits).randomizers()
    spec = forward_scoring.ForwardSpec.for_models(models, key_bits, params.forward)
    need = spec.randomizers_needed(len(inputs["alice"]), reveal=False)
    count = len(labels)
    if params.mode == "fast":  # the mapped scores
        need["bob"] += count
    else:  # the rescaling, then the decision stage (the comparisons' own counts)
        decision, _ = _decision(params, count, len(inputs["alice"]), labels)
        for part in (rescale_randomizers(count), decision.randomizers(key_bits)):
            need = {k: need[k] + part[k] for k in need}
    return need


def plaintext(params: KeywordParams, inputs: Mapping) -> dict:
    """The decision in the clear: each keyword's score by the public ``scoring`` (its
    best path's log-probability, or log P), the garbage model's plus the margin, and the
    argmax (ties to the lowest index, the circuit's rule); Alice's output, with the
    ``scores`` beside it."""
    from smc_hmm.hmm import log_likelihood
    from smc_hmm.hmm import viterbi as best_path

    frames = np.asarray(inputs["alice"], dtype=float)
    models, labels = _models_and_labels(inputs["bob"])
    if params.scoring == "viterbi":
        scores = [float(best_path(m, frames)[1]) for m in models]
    else:
        scores = [float(log_likelihood(m, frames)) for m in models]
    ranked = [s + (params.margin if label == params.garbage else 0.0)
              for s, label in zip(scores, labels)]  # fmt: skip
    return _outcome(params, labels, int(np.argmax(ranked))) | {
        "scoring": params.scoring,
        "scores": dict(zip(labels, scores)),
    }


def example_models(rng, count: int = 3, dims: int = 3) -> list:
    """``count`` two-state diagonal Gaussian HMMs whose means lie 3 apart per keyword."""
    from smc_hmm.hmm import GaussianHMM

    return [
        GaussianHMM(
            [0.7, 0.3], [[0.8, 0.2], [0.3, 0.7]], rng.normal(3.0 * k, 1.0, size=(2, dims)),
            rng.uniform(0.5, 1.5, size=(2, dims)),
        )
        for k in range(count)
    ]  # fmt: skip


def example(key_bits: int, seed: int) -> Example:
    """Three keyword models and four frames near the first, then other models and frames
    near the last: the default (viterbi scoring, private decision)."""
    rng = np.random.default_rng(seed)
    labels = ["a", "b", "c"]
    inputs = tuple(
        {"alice": rng.normal(centre, 1.0, size=(4, 3)), "bob": (example_models(rng), labels)}
        for centre in (0.0, 6.0)
    )
    params = KeywordParams()
    structure = decoding.Structure.of(decoding.as_decoders(inputs[0]["bob"][0]))
    plan = decoding.Plan(viterbi_params(params, labels), structure, 4, key_bits)

    def expected(i):
        plain = plaintext(params, i)
        return {"alice": {k: plain[k] for k in ("keyword", "index", "mode")}, "bob": None}

    def config(directory):
        """A voiced 0.1 s WAV that Alice featurises, three bundled models in Bob's file."""
        from scipy.io import wavfile

        from smc_hmm.data import load_bundled_models
        from smc_hmm.hmm.io import save_models

        t = np.arange(800) / 8000
        voice = np.sin(2 * np.pi * 300 * t) * np.hanning(t.size) + 0.05 * rng.normal(size=t.size)
        wavfile.write(directory / "alice.wav", 8000, (voice * 12000).astype(np.int16))
        models, names = load_bundled_models("diag")
        save_models(directory / "keywords.npz", models[:3], labels=names[:3])
        return {"alice": {"features": "alice.wav"}, "bob": {"models": "keywords.npz"}}

    return Example(
        params={},
        parties={"alice": "alice", "bob": "bob"},
        inputs=inputs,
        expected=expected,
        declared=tuple(plan.declared()),
        bad_inputs=(
            {"alice": np.full((4, 3), np.nan)},
            {"alice": np.zeros((4, 2))},
            {"bob": ([], [])},
        ),  # fmt: skip
        config=config,
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "secure keyword recognition: Alice learns which of Bob's HMMs fits her speech",
    params=KeywordParams.from_config,
    plaintext=plaintext,
    roles=(
        Role("alice", alice, kind="alice", holds_key=True, input="features", load=load_frames),
        Role("bob", bob, kind="bob", input="models", load=load_keywords),
    ),
)
