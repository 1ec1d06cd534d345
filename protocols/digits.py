"""Connected-digit recognition (a spoken PIN, phone or account number) on secure Viterbi
decoding (thesis 003, 2.2.4 reduced to its most practical case; 5.2.1).

Roles: **Alice** holds the Paillier key pair and a recording (feature frames); **Bob**
holds the ten digit HMMs and a one-state silence model, joined by the public grammar into
a loop (:mod:`smc_hmm.hmm.digits`: silence, then any digit, then silence again, ...).
:mod:`protocols.stages.decoding` decodes the loop in circuits Bob garbles on bound emissions
(``docs/garbled.md``); the best path never leaves the circuit: its last circuit compacts
it into the string (:mod:`protocols.stages.maxplus`, ``string`` and ``match``).

Modes (public ``mode``):

* ``string`` -- Alice learns the recognised string when it has 1 to L digits, else only
  its count class (none, or more than L); Bob learns nothing.
* ``pin`` -- Bob learns the bit [the recognised string == the enrolled PIN] and no one
  learns the string.  Bob holds the PIN *encrypted*: at enrolment Alice draws a 256-bit
  key k and Bob stores c = P xor pad(k), P the PIN's W bits as the circuit encodes a
  string (L slots of 4 bits and the one-hot count), pad(k) = SHAKE-256 of k
  (:func:`smc_hmm.hmm.digits.enrol`).  In the session Bob enters c as garbler bits and
  Alice pad(k) through the OT pool; the circuit compares the string with c xor pad(k)
  and ANDs ok into the bit, which Bob decodes from an output label Alice cannot forge.
  Bob never holds P in clear, so the bit does not tell him the string even when it is 1;
  a one-time pad under Alice's key is what keeps a low-entropy PIN from a dictionary
  search, which a hash of it would not.

Public parameters (:class:`DigitsParams`): the mode, the grammar (the longest string L
<= :data:`~smc_hmm.hmm.digits.MAX_DIGITS`, the insertion penalty, the probability of
leaving silence, the last state's stay), the number of states of each digit model, and
the fixed-point choices of spotting (score scale 24 bits, emission bound 2^15 nats,
features within +-12, transition floor 2^-128); and T.  The loop's states, edges and
entry labels follow from them: 81 states for 8-state digits, every state its own
emission row (no row is shared between digits, so the structure says nothing of a PIN).

Who learns what (either party may deviate, DESIGN.md section 11):

* Alice decrypts only uniformly masked emissions (statistical distance 2^-40 each) and
  holds labels; her inputs are bound by a MAC (soundness 3/p, p = 2^61 - 1).  ``string``:
  she learns s(x) -- the digits, or count in {0, L + 1} -- for the recording x she
  enters: log2(sum_{n=1..L} 10^n + 2) < 3.33 L + 1 bits a session.  ``pin``: nothing;
  her pad only selects the reference she compares against, so shifting it by delta makes
  the circuit test s(x) == P xor delta: without P she is accepted with the probability of
  guessing it, as by speaking a guess.
* Bob learns nothing in ``string``; in ``pin`` the bit [s(x) == P] (0 also when ok is 0:
  a refused input looks like a wrong PIN) -- 1 bit a session.  A Bob who garbles another
  function learns at most one bit of her input per session instead (its abort in
  ``string``, his output bit in ``pin``).
* Metadata: every message follows from the public parameters and T.

Runnable: ``smc-hmm digits --audio FILE.wav`` (``docs/digits.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from protocols.stages import decoding
from smc_hmm import params as typed
from smc_hmm.data.digits import bundled_digit_models, load_digit_models
from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm.digits import (
    DigitGrammar,
    DigitLoopLayout,
    DigitModels,
    DigitString,
    decode_digits,
    pin_pad,
    string_bits,
)
from smc_hmm.protocol import (
    Example,
    ProtocolDescriptor,
    alice_and_bob,
    params_from_config,
    save_array,
)

NAME = "digits"
MODES = ("string", "pin")


@dataclass(frozen=True)
class DigitsParams:
    """Public parameters of connected-digit recognition (module docstring)."""

    mode: str = typed.one_of("string", MODES)
    max_digits: int = 8
    insertion_penalty: float = 80.0
    enter: float = 0.02
    stay_last: float = 0.9
    digit_states: tuple[int, ...] = (8,) * 10
    score_scale: int = 16
    emission_bound_bits: int = 15
    feature_bound: float = 12.0
    weight_floor_bits: int = 128
    sigma: int = 40

    def __post_init__(self):
        typed.check_fields(self)
        object.__setattr__(self, "digit_states", tuple(self.digit_states))
        _ = self.grammar, self.layout, self.viterbi  # validates the rest

    @property
    def grammar(self) -> DigitGrammar:
        return DigitGrammar(self.max_digits, self.insertion_penalty, self.enter, self.stay_last)

    @property
    def layout(self) -> DigitLoopLayout:
        return DigitLoopLayout(self.digit_states)

    @property
    def viterbi(self) -> decoding.ViterbiParams:
        return decoding.ViterbiParams(
            model_holder="bob",
            output="string" if self.mode == "string" else "match",
            reveal_score=False,
            score_scale=self.score_scale,
            emission_bound_bits=self.emission_bound_bits,
            feature_bound=float(self.feature_bound),
            weight_floor_bits=self.weight_floor_bits,
            sigma=self.sigma,
            comparison="garbled",
            entries=self.layout.entries,
            slots=self.max_digits,
            carry_save=False,
        )

    @property
    def string_bits(self) -> int:
        """W: the bits of a string as the circuit encodes it."""
        return string_bits(self.max_digits)

    @classmethod
    def from_config(cls, section: Mapping) -> DigitsParams:
        return params_from_config(cls, section, NAME)


# -- Bob's loop and the enrolled record ----------------------------------------------------


def as_models(private) -> DigitModels:
    """Bob's DigitModels, from themselves or ``{"models": ...}`` (mode pin)."""
    if isinstance(private, Mapping) and "models" in private:
        private = private["models"]
    if not isinstance(private, DigitModels):
        raise InvalidInputError("Bob's input is DigitModels (ten digit HMMs and a silence)")
    return private


def decoder(private, params: DigitsParams) -> decoding.Decoder:
    """The loop under the public grammar, its layout checked against the public one."""
    model, _ = as_models(private).loop(params.grammar, params.layout)
    return decoding.Decoder(model)


def _record(private, params: DigitsParams) -> np.ndarray:
    if not isinstance(private, Mapping) or "enrolled" not in private:
        raise InvalidInputError("mode pin: Bob's input holds the enrolled record")
    c = np.asarray(private["enrolled"], dtype=np.uint8).reshape(-1)
    if c.size != params.string_bits or (c > 1).any():
        raise InvalidInputError(f"an enrolled record is {params.string_bits} bits")
    return c


# -- the roles -----------------------------------------------------------------------------


def result_of(count: int, labels, params: DigitsParams) -> dict:
    """Alice's result: the string (or None), its count class, and why there is none."""
    s = DigitString(tuple(labels) if labels is not None else None, count, params.max_digits)
    return {"digits": s.text, "count": count, "reason": s.reason}


def alice(ctx, private, params: DigitsParams, peer: str = "bob"):
    """Alice: her frames (``string``), or ``{"frames", "key"}`` (``pin``: her PIN key).
    Returns ``{"digits", "count", "reason"}`` (``string``) or None (``pin``)."""
    if params.mode == "string":
        out = decoding.alice(ctx, _frames(private), params.viterbi, peer)
        return result_of(out["count"], out["labels"], params)
    if not isinstance(private, Mapping) or "key" not in private:
        raise InvalidInputError("mode pin: Alice's input is {frames, key}")
    pad = pin_pad(private["key"], params.max_digits)
    decoding.alice(ctx, _frames(private), params.viterbi, peer, reference=pad)
    return None


def _frames(private):
    return private["frames"] if isinstance(private, Mapping) else private


def bob(ctx, private, params: DigitsParams, peer: str = "alice"):
    """Bob: his DigitModels (``string``), or ``{"models", "enrolled"}`` (``pin``).
    Returns None (``string``) or ``{"equal": bit}`` (``pin``)."""
    loop = decoder(private, params)
    if params.mode == "string":
        return decoding.bob(ctx, [loop], params.viterbi, peer)
    c = _record(private, params)
    return {"equal": decoding.bob(ctx, [loop], params.viterbi, peer, reference=c)["match"]}


def plaintext(frames, params: DigitsParams, models: DigitModels | None = None) -> DigitString:
    """The plaintext recognition the secure run must reproduce (the same loop)."""
    model, layout = (models or bundled_digit_models()).loop(params.grammar, params.layout)
    return decode_digits(model, layout, frames, params.grammar)


# -- configuration -----------------------------------------------------------------------------


def load_input(value, base):
    """A party's input: digit models ("bundled" or a .npz file) or frames / a WAV."""
    name = str(value).replace("\\", "/").rsplit("/", 1)[-1]  # "bundled", also once resolved
    if name == "bundled" or name.lower().endswith(".npz"):
        return load_digit_models(value, base)
    return decoding.load_observations(value, base)


def randomizers_needed(params: DigitsParams, key_bits: int, inputs) -> dict[str, int]:
    """The fresh randomizers of a run, from its public sizes (the offline phase)."""
    structure = decoding.Structure.of([decoder(inputs["bob"], params)])
    frames = _frames(inputs["alice"])
    return decoding.Plan(params.viterbi, structure, len(frames), key_bits).randomizers()


def declared_messages(params: DigitsParams, length: int, key_bits: int, models=None):
    """Every message of a run (the transcript harness's declarations)."""
    structure = decoding.Structure.of([decoder(models or bundled_digit_models(), params)])
    return decoding.Plan(params.viterbi, structure, length, key_bits).declared()


def phases(params: DigitsParams, role: str) -> tuple[str, ...]:
    return ("setup", "emissions", "recursion", "output")


def example(key_bits: int, seed: int, length: int = 40) -> Example:
    """The bundled digit models decode the first ``length`` frames of two bundled strings
    whose first digits differ: Alice learns each string (or why there is none)."""
    from smc_hmm.data.digits import load_digit_strings

    strings = load_digit_strings()
    a = strings[0]
    b = next(r for r in strings if r.digits[:2] != a.digits[:2])
    models = bundled_digit_models()
    params = DigitsParams()

    def expected(i):
        plain = plaintext(i["alice"], params, i["bob"])
        return {"alice": {"digits": plain.text, "count": plain.count, "reason": plain.reason},
                "bob": None}  # fmt: skip

    bad = a.features[:length].copy()
    bad[5, 2] = np.inf
    return Example(
        params={},
        parties={"alice": "alice", "bob": "bob"},
        inputs=tuple({"alice": r.features[:length], "bob": models} for r in (a, b)),
        expected=expected,
        declared=tuple(declared_messages(params, length, key_bits, models)),
        bad_inputs=({"alice": bad}, {"alice": bad[:, :3]}, {"bob": "not digit models"}),
        config=lambda directory: {
            "alice": {"input": save_array(directory, "frames.npy", a.features[:length])},
            "bob": {"input": "bundled"},
        },
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "connected digits: Alice learns the spoken string, or Bob whether it is the PIN",
    params=DigitsParams.from_config,
    roles=alice_and_bob(alice, bob, load_input),
)

__all__ = ["PROTOCOL", "DigitsParams", "alice", "bob", "decoder", "plaintext", "result_of"]
