"""Connected-digit recognition (a spoken PIN, phone or account number) on secure Viterbi
decoding (thesis 003, 2.2.4 reduced to its most practical case; 5.2.1).

Roles: **Alice** holds the Paillier key pair and a recording (feature frames); **Bob**
holds the ten digit HMMs and a one-state silence model, joined by the public grammar into
a loop (:mod:`smc_hmm.hmm.digits`: silence, then any digit, then silence again, ...).
:mod:`protocols.viterbi` decodes the loop in circuits Bob garbles on bound emissions
(``docs/garbled.md``); the best path never leaves the circuit: its last circuit compacts
it into the string (:mod:`protocols.stages.maxplus`, ``string`` and ``match``).

Modes (public ``mode``):

* ``string`` -- Alice learns the recognised string when it has 1 to L digits, else only
  its count class (none, or more than L); Bob learns nothing.
* ``pin`` -- Bob learns the bit [the recognised string == the enrolled PIN] and no one
  learns the string.  Bob holds the PIN *encrypted*: at enrolment Alice draws a 256-bit
  key k and Bob stores c = P xor pad(k), P the PIN's W bits as the circuit encodes a
  string (L slots of 4 bits and the one-hot count), pad(k) = SHAKE-256 of k
  (:func:`enrol`).  In the session Bob enters c as garbler bits and Alice pad(k) through
  the OT pool; the circuit compares the string with c xor pad(k) and ANDs ok into the
  bit, which Bob decodes from an output label Alice cannot forge.  Bob never holds P in
  clear, so the bit does not tell him the string even when it is 1; a one-time pad
  under Alice's key is what keeps a low-entropy PIN from a dictionary search, which a
  hash of it would not.

Public parameters (:class:`DigitsParams`): the mode, the grammar (the longest string L
<= :data:`~smc_hmm.hmm.digits.MAX_DIGITS`, the insertion penalty, the probability of
leaving silence, the last state's stay), the number of states of each digit model, and
the fixed-point choices of spotting (score scale 24 bits, emission bound 2^15 nats,
features within +-12, transition floor 2^-128); and T.  The loop's states, edges and
entry labels follow from them: 51 states for 5-state digits, every state its own
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

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from protocols import viterbi
from smc_hmm.errors import ConfigError, InvalidInputError, SmcHmmError
from smc_hmm.hmm import GaussianHMM
from smc_hmm.hmm.digits import (
    DigitGrammar,
    DigitLoopLayout,
    DigitString,
    compose_loop,
    decode_digits,
)
from smc_hmm.protocol import ProtocolDescriptor, alice_and_bob, params_from_config
from smc_hmm.runtime.inputs import resolve_path

NAME = "digits"
MODES = ("string", "pin")
#: the label of the silence model in a model file (the digits are "zero" .. "nine")
SILENCE_LABEL = "silence"
#: bytes of Alice's PIN key
KEY_BYTES = 32


@dataclass(frozen=True)
class DigitsParams:
    """Public parameters of connected-digit recognition (module docstring)."""

    mode: str = "string"
    max_digits: int = 8
    insertion_penalty: float = 80.0
    enter: float = 0.02
    stay_last: float = 0.9
    digit_states: tuple[int, ...] = (5,) * 10
    score_scale: int = 16
    emission_bound_bits: int = 15
    feature_bound: float = 12.0
    weight_floor_bits: int = 128
    sigma: int = 40

    def __post_init__(self):
        if self.mode not in MODES:
            raise InvalidInputError(f"mode must be one of {MODES}, got {self.mode!r}")
        object.__setattr__(self, "digit_states", tuple(self.digit_states))
        _ = self.grammar, self.layout, self.viterbi  # validates the rest

    @property
    def grammar(self) -> DigitGrammar:
        return DigitGrammar(self.max_digits, self.insertion_penalty, self.enter, self.stay_last)

    @property
    def layout(self) -> DigitLoopLayout:
        return DigitLoopLayout(self.digit_states)

    @property
    def viterbi(self) -> viterbi.ViterbiParams:
        return viterbi.ViterbiParams(
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
        return self.max_digits * 4 + self.max_digits + 2

    @classmethod
    def from_config(cls, section: Mapping) -> DigitsParams:
        def states_as_tuple(values):
            if "digit_states" in values:
                values["digit_states"] = tuple(values["digit_states"])
            return values

        return params_from_config(cls, section, NAME, convert=states_as_tuple)


# -- Bob's loop ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DigitModels:
    """Bob's models: ten digit HMMs (``digits[d]`` recognises d) and a one-state silence."""

    digits: tuple[GaussianHMM, ...]
    silence: GaussianHMM

    def loop(self, params: DigitsParams):
        """(the loop model, its layout) under the public grammar; the layout must be the
        public one (the digits' numbers of states)."""
        model, layout = compose_loop(self.digits, self.silence, params.grammar)
        if layout != params.layout:
            raise ConfigError(
                f"the digit models have {layout.digit_states} states, the public parameters "
                f"say {params.digit_states} (set digit_states)"
            )
        return model, layout

    def decoder(self, params: DigitsParams) -> viterbi.Decoder:
        return viterbi.Decoder(self.loop(params)[0])


def bundled_models() -> DigitModels:
    """The bundled digit HMMs and the bundled fillers' pause state as silence."""
    from smc_hmm.data import load_bundled_models
    from smc_hmm.data.digits import silence_model

    models, _ = load_bundled_models("diag")
    return DigitModels(tuple(models), silence_model())


def as_models(private) -> DigitModels:
    if isinstance(private, DigitModels):
        return private
    if isinstance(private, Mapping) and "models" in private:
        return as_models(private["models"])
    raise InvalidInputError("Bob's input is DigitModels (ten digit HMMs and a silence model)")


# -- the enrolled PIN ----------------------------------------------------------------------


def string_code(digits, params: DigitsParams) -> np.ndarray:
    """The W bits the circuit gives a string: L slots of 4 bits (least significant
    first, zero past the string), then the count one-hot over 0 .. L + 1."""
    L = params.max_digits
    digits = [int(d) for d in digits]
    if not 1 <= len(digits) <= L or any(not 0 <= d <= 9 for d in digits):
        raise InvalidInputError(f"a PIN is 1 to {L} digits 0-9")
    slots = np.zeros((L, 4), dtype=np.uint8)
    for k, d in enumerate(digits):
        slots[k] = [(d >> b) & 1 for b in range(4)]
    count = np.zeros(L + 2, dtype=np.uint8)
    count[len(digits)] = 1
    return np.concatenate([slots.reshape(-1), count])


def pin_pad(key: bytes, params: DigitsParams) -> np.ndarray:
    """pad(k): the first W bits of SHAKE-256(domain || k)."""
    if not isinstance(key, bytes | bytearray) or len(key) != KEY_BYTES:
        raise InvalidInputError(f"a PIN key is {KEY_BYTES} bytes")
    w = params.string_bits
    raw = hashlib.shake_256(b"smc-hmm digits pin pad\0" + bytes(key)).digest((w + 7) // 8)
    return np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")[:w]


def enrol(pin: str, params: DigitsParams, key: bytes | None = None) -> tuple[bytes, np.ndarray]:
    """Enrolment, on Alice's side: (her key k, Bob's record c = P xor pad(k))."""
    if not isinstance(pin, str) or not pin.isdigit():
        raise InvalidInputError(f"a PIN is a string of digits, got {pin!r}")
    key = secrets.token_bytes(KEY_BYTES) if key is None else key
    return key, string_code(pin, params) ^ pin_pad(key, params)


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
        out = viterbi.alice(ctx, _frames(private), params.viterbi, peer)
        return result_of(out["count"], out["labels"], params)
    if not isinstance(private, Mapping) or "key" not in private:
        raise InvalidInputError("mode pin: Alice's input is {frames, key}")
    pad = pin_pad(private["key"], params)
    viterbi.alice(ctx, _frames(private), params.viterbi, peer, reference=pad)
    return None


def _frames(private):
    return private["frames"] if isinstance(private, Mapping) else private


def bob(ctx, private, params: DigitsParams, peer: str = "alice"):
    """Bob: his DigitModels (``string``), or ``{"models", "enrolled"}`` (``pin``).
    Returns None (``string``) or ``{"equal": bit}`` (``pin``)."""
    decoder = as_models(private).decoder(params)
    if params.mode == "string":
        return viterbi.bob(ctx, [decoder], params.viterbi, peer)
    c = _record(private, params)
    return {"equal": viterbi.bob(ctx, [decoder], params.viterbi, peer, reference=c)["match"]}


def plaintext(frames, params: DigitsParams, models: DigitModels | None = None) -> DigitString:
    """The plaintext recognition the secure run must reproduce (the same loop)."""
    model, layout = (models or bundled_models()).loop(params)
    return decode_digits(model, layout, frames, params.grammar)


# -- configuration -----------------------------------------------------------------------------


def load_models(value, base) -> DigitModels:
    """``"bundled"``, or a model file with models labelled zero .. nine and silence."""
    from smc_hmm.data import DIGIT_WORDS
    from smc_hmm.hmm.io import load_models as read

    if value == "bundled" or (Path(str(value)).name == "bundled" and not Path(value).exists()):
        return bundled_models()
    try:
        models, labels = read(resolve_path(value, base))
    except SmcHmmError as e:
        raise ConfigError(str(e)) from e
    by_label = dict(zip(labels or (), models))
    missing = [w for w in (*DIGIT_WORDS, SILENCE_LABEL) if w not in by_label]
    if missing:
        raise ConfigError(f"{value}: no model labelled {missing}")
    return DigitModels(tuple(by_label[w] for w in DIGIT_WORDS), by_label[SILENCE_LABEL])


def load_input(value, base):
    """A party's input: digit models ("bundled" or a .npz file) or frames / a WAV."""
    if value == "bundled" or str(value).lower().endswith(".npz"):
        return load_models(value, base)
    return viterbi.load_observations(value, base)


def randomizers_needed(params: DigitsParams, key_bits: int, inputs) -> dict[str, int]:
    """The fresh randomizers of a run, from its public sizes (the offline phase)."""
    structure = viterbi.Structure.of([as_models(inputs["bob"]).decoder(params)])
    frames = _frames(inputs["alice"])
    return viterbi.Plan(params.viterbi, structure, len(frames), key_bits).randomizers()


def declared_messages(params: DigitsParams, length: int, key_bits: int, models=None):
    """Every message of a run (the transcript harness's declarations)."""
    structure = viterbi.Structure.of([(models or bundled_models()).decoder(params)])
    return viterbi.Plan(params.viterbi, structure, length, key_bits).declared()


def phases(params: DigitsParams, role: str) -> tuple[str, ...]:
    return ("setup", "emissions", "recursion", "output")


PROTOCOL = ProtocolDescriptor(
    name=NAME,
    summary="connected digits: Alice learns the spoken string, or Bob whether it is the PIN",
    params=DigitsParams.from_config,
    randomizers=randomizers_needed,
    phases=phases,
    roles=alice_and_bob(alice, bob, load_input),
)

__all__ = [
    "PROTOCOL",
    "DigitModels",
    "DigitsParams",
    "alice",
    "bob",
    "bundled_models",
    "enrol",
    "pin_pad",
    "plaintext",
    "string_code",
]
