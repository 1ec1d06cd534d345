"""Keyword spotting and speech mining on secure Viterbi decoding (thesis 003, 2.2.3).

Both directions decode filler-keyword-filler composites (thesis Figure 2.4,
:mod:`smc_hmm.hmm.spotting`) with :mod:`protocols.stages.decoding` under the ``segment`` output
rule: the output party learns, per keyword, the first and last frame the best path spends
in the keyword's states, or that it never enters them.

* ``direction = "spotting"`` (2.2.3 (a)): Alice holds a recording (feature frames) and the
  Paillier key; Bob holds keyword HMMs and a filler per keyword.  The public ``keywords``
  name what is searched (the vocabulary is public; Bob's models are not).  Bob composes
  each keyword with its filler and the secure Viterbi runs the composites in lockstep:
  Alice learns which keywords occur and where; Bob learns nothing.
* ``direction = "mining"`` (2.2.3 (b)): Bob holds the recording, Alice her private keyword
  model(s) and filler(s); no keyword is named in public.  Alice keeps the key: she is the
  party who learns the positions, and Bob, who holds the data, must learn neither the
  keyword nor the positions -- so every value he touches is encrypted under her key.  Bob
  sees the public structure (states and topology of the composites, the same for every
  digit keyword) and ciphertexts; Alice sees masked values and the positions.

Who learns what: :mod:`protocols.stages.decoding`'s statement with ``output = "segment"`` and no
score.  For the composite's public layout (F1, K, F2: the path passes through K at most
once) the per-frame "inside K" bits Alice decrypts are exactly the keyword's first and
last frame, nothing more of the path.  In the F-K loop (the bundled models' form, public
in the layout) she sees every pass through K, l_t = [q_t in K] for t < T, and reports
the longest.  In spotting, emission rows equal across the searched composites are
computed once a frame (``ViterbiParams.share_rows``): the structure Bob sends shows which
rows of different composites are equal.  For the bundled models that is the public
construction (every composite is the same 81 rows, the ten keyword models and the
pause, in another order), and ten keywords cost one keyword's emissions and input OTs.
``docs/security.md`` ("viterbi and spot") and ``docs/spotting.md`` (walk-through, cost,
the bundled evaluation).

Public parameters (:class:`SpotParams`): the direction, the searched keywords
(spotting), and the fixed-point choices: score scale s = 24 bits (a path's rounding
error stays below T 2^-23 nats), emission bound 2^15 nats with features within +-12
(standardised MFCCs: the bundled recordings stay within 7.3; the bundled models and
fillers reach 29,000 nats there), transition floor 2^-128 (so the model holder may
penalise entering a keyword by up to 88 nats).  These make the comparisons 50 bits long
at T = 256.  The composites' glue probabilities are the model holder's
(:func:`smc_hmm.hmm.spotting.compose`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from protocols.stages import decoding
from smc_hmm import params as typed
from smc_hmm.errors import ConfigError, InvalidInputError, SmcHmmError
from smc_hmm.features import FRAME_SECONDS
from smc_hmm.hmm import DiscreteHMM, GaussianHMM
from smc_hmm.hmm.spotting import ENTER, LEAVE, START_KEYWORD, compose
from smc_hmm.protocol import Example, ProtocolDescriptor, alice_and_bob, params_from_config
from smc_hmm.runtime.inputs import load_frames, resolve_path

NAME = "spot"
DIRECTIONS = ("spotting", "mining")
#: the prefix of a filler's label in a model file: "filler-seven" is seven's filler
FILLER_PREFIX = "filler-"


@dataclass(frozen=True)
class SpotParams:
    """Public parameters of keyword spotting (module docstring)."""

    direction: str = typed.one_of("spotting", DIRECTIONS)
    keywords: tuple[str, ...] = ()
    score_scale: int = 24
    emission_bound_bits: int = 15
    feature_bound: float = 12.0
    weight_floor_bits: int = 128
    blind_nats: float = 20.0
    sigma: int = 40
    #: the recursion's comparisons (:data:`protocols.stages.decoding.COMPARISONS`): ``auto`` is the
    #: garbled chain for spotting and DGK for mining
    comparison: str = "auto"

    def __post_init__(self):
        typed.check_fields(self)
        keywords = tuple(self.keywords)
        if not all(isinstance(k, str) and k for k in keywords) or len(set(keywords)) != len(
            keywords
        ):
            raise InvalidInputError("keywords must be distinct non-empty labels")
        if self.direction == "spotting" and not keywords:
            raise InvalidInputError("spotting needs the keywords searched (public labels)")
        if self.direction == "mining" and keywords:
            raise InvalidInputError(
                "mining keeps Alice's keyword private: no keyword is named in public"
            )
        object.__setattr__(self, "keywords", keywords)
        _ = self.viterbi  # validates the rest

    @property
    def viterbi(self) -> decoding.ViterbiParams:
        return decoding.ViterbiParams(
            model_holder="bob" if self.direction == "spotting" else "alice",
            output="segment",
            reveal_score=False,
            score_scale=self.score_scale,
            emission_bound_bits=self.emission_bound_bits,
            feature_bound=float(self.feature_bound),
            blind_nats=self.blind_nats,
            weight_floor_bits=self.weight_floor_bits,
            sigma=self.sigma,
            comparison=self.comparison,
            share_rows=self.direction == "spotting",
        )

    @classmethod
    def from_config(cls, section: Mapping) -> SpotParams:
        def keywords_as_tuple(values):
            words = values.get("keywords")
            if words is not None:
                values["keywords"] = (words,) if isinstance(words, str) else words
            return values

        return params_from_config(cls, section, "spot", convert=keywords_as_tuple)


@dataclass(frozen=True)
class KeywordModel:
    """One keyword's HMM and its filler, with the model holder's glue probabilities."""

    keyword: GaussianHMM | DiscreteHMM
    filler: GaussianHMM | DiscreteHMM
    enter: float = ENTER
    leave: float = LEAVE
    start_keyword: float = START_KEYWORD
    #: the F-K loop instead of F1-K-F2 (:func:`smc_hmm.hmm.spotting.compose`; public)
    loop: bool = False

    def composite(self):
        """The composite model and its public layout."""
        return compose(
            self.keyword,
            self.filler,
            enter=self.enter,
            leave=self.leave,
            start_keyword=self.start_keyword,
            loop=self.loop,
        )

    def decoder(self) -> decoding.Decoder:
        """The composite and its public layout as a Viterbi decoder (segment = K)."""
        model, layout = self.composite()
        k = layout.keyword_states
        return decoding.Decoder(model, rows=layout.rows, segment=(k.start, k.stop))


def keyword_models(models) -> dict[str, KeywordModel]:
    """``{label: KeywordModel, (keyword, filler) or KeywordModel's fields as a mapping}``
    as KeywordModels."""
    if not isinstance(models, Mapping) or not models:
        raise InvalidInputError("keyword models: a mapping {label: (keyword, filler)}")
    fields = {"keyword", "filler", "enter", "leave", "start_keyword", "loop"}
    out = {}
    for label, m in models.items():
        if isinstance(m, Mapping) and {"keyword", "filler"} <= set(m) <= fields:
            m = KeywordModel(**m)
        elif isinstance(m, tuple | list) and len(m) == 2:
            m = KeywordModel(*m)
        elif not isinstance(m, KeywordModel):
            raise InvalidInputError(f"{label!r}: expected (keyword HMM, filler HMM)")
        out[str(label)] = m
    return out


def _segments(params: SpotParams, labels, results, hop: float) -> dict:
    out = {}
    for label, result in zip(labels, results):
        seg = result["segment"]
        out[label] = {
            "found": seg is not None,
            "frames": None if seg is None else list(seg),
            "seconds": None if seg is None else [seg[0] * hop, (seg[1] + 1) * hop],
        }
    return out


def alice(ctx, private, params: SpotParams, peer: str = "bob") -> dict:
    """Alice: her frames (spotting) or her keyword models (mining); returns per keyword
    ``{"found", "frames": [first, last] or None, "seconds": [start, stop] or None}``."""
    if params.direction == "spotting":
        results = decoding.alice(ctx, private, params.viterbi, peer)
        return _segments(params, params.keywords, results, FRAME_SECONDS)
    models = keyword_models(private)
    decoders = [m.decoder() for m in models.values()]
    results = decoding.alice(ctx, decoders, params.viterbi, peer)
    return _segments(params, list(models), results, FRAME_SECONDS)


def bob(ctx, private, params: SpotParams, peer: str = "alice") -> None:
    """Bob: his keyword models (spotting; ``{label: (keyword, filler)}`` holding every
    searched keyword) or his recording's frames (mining)."""
    if params.direction == "spotting":
        models = keyword_models(private)
        missing = [k for k in params.keywords if k not in models]
        if missing:
            raise InvalidInputError(f"no model for the keyword(s) {missing}")
        decoders = [models[k].decoder() for k in params.keywords]
        return decoding.bob(ctx, decoders, params.viterbi, peer)
    return decoding.bob(ctx, private, params.viterbi, peer)


def plaintext(models, frames, labels=None, hop: float = FRAME_SECONDS) -> dict:
    """The plaintext decisions the secure run must reproduce (same composites)."""
    from smc_hmm.hmm.spotting import spot

    models = keyword_models(models)
    labels = list(models) if labels is None else list(labels)
    out = {}
    for label in labels:
        s = spot(*models[label].composite(), frames)
        out[label] = {
            "found": s.found,
            "frames": None if not s.found else [s.start, s.end],
            "seconds": None if not s.found else [s.start * hop, (s.end + 1) * hop],
        }
    return out


def load_keyword_models(value, base) -> dict[str, KeywordModel]:
    """A model holder's input: ``"bundled"`` (the bundled spotting keyword HMMs and their
    fillers) or a model file of keyword models labelled L with fillers labelled "filler-L"."""
    if _is_bundled(value):
        from smc_hmm.data.continuous import load_spotting_models

        return keyword_models(load_spotting_models()[1])
    from smc_hmm.hmm.io import load_models

    try:
        models, labels = load_models(resolve_path(value, base))
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
    if not labels:
        raise ConfigError(f"{value}: keyword spotting needs labelled models")
    by_label = dict(zip(labels, models))
    out = {}
    for label, m in by_label.items():
        if label.startswith(FILLER_PREFIX):
            continue
        filler = by_label.get(FILLER_PREFIX + label)
        if filler is None:
            raise ConfigError(f"{value}: keyword {label!r} has no filler {FILLER_PREFIX + label!r}")
        out[label] = KeywordModel(m, filler)
    if not out:
        raise ConfigError(f"{value}: no keyword model (labels other than filler-*)")
    return out


def _load_frames(value, base):
    """Alice's frames: an array file, or a WAV through the spotting pipeline."""
    if isinstance(value, str) and value.lower().endswith(".wav"):
        return load_frames(value, base, _spotting_features)
    return decoding.load_observations(value, base)


def _spotting_features(path):
    from smc_hmm.data.continuous import load_spotting_pipeline

    return load_spotting_pipeline().features_from_wav(path)


def _is_bundled(value) -> bool:
    """``"bundled"``, also as the path a configuration's ``input`` key resolves it to (when
    no such file exists)."""
    if value == "bundled":
        return True
    path = Path(str(value))
    return path.name == "bundled" and not path.exists()


def load_input(value, base):
    """A party's input: keyword models ("bundled" or a .npz file) or frames / a WAV."""
    if _is_bundled(value):
        return load_keyword_models("bundled", base)
    if str(value).lower().endswith(".npz"):
        return load_keyword_models(value, base)
    return _load_frames(value, base)


def randomizers_needed(params: SpotParams, key_bits: int, inputs) -> dict[str, int]:
    """The fresh randomizers of a run, from its public sizes (the offline phase)."""
    holder = "bob" if params.direction == "spotting" else "alice"
    models = keyword_models(inputs[holder])
    labels = params.keywords if params.direction == "spotting" else list(models)
    decoders = [models[k].decoder() for k in labels]
    data = inputs["alice" if holder == "bob" else "bob"]
    structure = decoding.Structure.of(decoders)
    return decoding.Plan(params.viterbi, structure, len(data), key_bits).randomizers()


def declared_messages(params: SpotParams, structure, length: int, key_bits: int):
    """Every message of a run (the transcript harness's declarations)."""
    return decoding.Plan(params.viterbi, structure, length, key_bits).declared()


def example_wav(path, seconds: float = 0.3, seed: int = 5) -> None:
    """A voiced tone of ``seconds`` at 8 kHz, written to ``path`` (a recording to spot in)."""
    import numpy as np
    from scipy.io import wavfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(8000 * seconds)) / 8000
    voice = np.sin(2 * np.pi * 220 * t) * np.hanning(t.size) + 0.05 * rng.normal(size=t.size)
    wavfile.write(path, 8000, (voice * 12000).astype(np.int16))


def _example_config(directory) -> dict:
    example_wav(directory / "alice.wav")
    return {"alice": {"input": "alice.wav"}, "bob": {"input": "bundled"}}


def example(key_bits: int, seed: int, length: int = 40) -> Example:
    """Bob's bundled models spot "seven" in the first ``length`` frames of two bundled
    recordings, one holding the whole word there and one without it: Alice learns where
    it is, or that it is not there; Bob's view is the same (public length)."""
    from smc_hmm.data import DIGIT_WORDS
    from smc_hmm.data.continuous import load_continuous_test

    seven = DIGIT_WORDS.index("seven")
    recordings = load_continuous_test()
    holding = next(
        r for r in recordings if r.span_of(seven) is not None and r.span_of(seven)[1] < length
    )
    without = next(r for r in recordings if seven not in r.digits and len(r.features) >= length)
    models = load_keyword_models("bundled", None)
    params = SpotParams(keywords=("seven",))
    structure = decoding.Structure.of([models["seven"].decoder()])
    bad = holding.features[:length].copy()
    bad[3, 0] = 99.0  # beyond the public feature_bound
    return Example(
        params={"keywords": ["seven"]},
        parties={"alice": "alice", "bob": "bob"},
        inputs=tuple({"alice": r.features[:length], "bob": models} for r in (holding, without)),
        expected=lambda i: {"alice": plaintext(i["bob"], i["alice"], ["seven"]), "bob": None},
        declared=tuple(declared_messages(params, structure, length, key_bits)),
        bad_inputs=({"alice": bad}, {"bob": {"one": models["one"]}}),
        config=_example_config,
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "keyword spotting and speech mining: where a keyword occurs in continuous speech",
    params=SpotParams.from_config,
    roles=alice_and_bob(alice, bob, load_input),
)

__all__ = [
    "PROTOCOL",
    "KeywordModel",
    "SpotParams",
    "alice",
    "bob",
    "keyword_models",
    "load_keyword_models",
    "plaintext",
]
