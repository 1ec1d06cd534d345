"""Connected-digit recognition by Viterbi decoding of a digit loop, in plaintext (thesis
003, 2.2.4, reduced to its most practical case: a spoken PIN, phone or account number).
The reference the secure protocol (``protocols/digits.py``) is checked against.

The loop joins one silence state and the ten digit HMMs::

    S (silence) --enter--> first state of digit d --(d's own left-to-right states)-->
    d's last state --exit--> S --> ...

The best path alternates silence and digits; every entry into a digit's first state (from
S, or at the first frame) is one digit of the string.  A digit is always followed by at
least one frame of silence before the next (digits leave only to S): one junction state
keeps each frame's circuit small (S's tournament over the ten digit ends is the only wide
one), where direct digit-to-digit edges would give every first state twelve predecessors.

The grammar is public (:class:`DigitGrammar`): the longest string L (1 .. :data:`MAX_DIGITS`),
the probability of leaving silence, the insertion penalty (nats charged at each digit
entry, which trades insertions for deletions) and how long a digit's last state stays.
The string has 1 to L digits: a best path with no digit, or with more than L, decodes to
no string (:attr:`DigitString.valid` is false; ``count`` says which).  Everything about
the loop's shape -- its states, edges, which states share an emission row (none do
between digits) and which state starts which digit -- follows from the grammar and the
public number of states of each model, never from a model's parameters
(:class:`DigitLoopLayout`).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass

import numpy as np

from smc_hmm.errors import InvalidInputError
from smc_hmm.hmm.inference import viterbi_from_logs
from smc_hmm.hmm.models import GaussianHMM

__all__ = [
    "KEY_BYTES",
    "MAX_DIGITS",
    "DigitGrammar",
    "DigitLoopLayout",
    "DigitModels",
    "DigitString",
    "compose_loop",
    "decode_digits",
    "edit_distance",
    "enrol",
    "pin_pad",
    "string_bits",
    "string_code",
    "string_of_path",
    "word_errors",
]

#: the public cap on the grammar's longest string (the circuit's output has L slots)
MAX_DIGITS = 16


@dataclass(frozen=True)
class DigitGrammar:
    """The public grammar of the loop: strings of 1 to ``max_digits`` digits; leaving
    silence for some digit has probability ``enter`` a frame, times e^-penalty
    (``insertion_penalty`` nats, >= 0); a digit's last state stays with probability
    ``stay_last`` and otherwise returns to silence."""

    max_digits: int = 8
    insertion_penalty: float = 80.0
    enter: float = 0.02
    stay_last: float = 0.9

    def __post_init__(self):
        L = self.max_digits
        if isinstance(L, bool) or not isinstance(L, int) or not 1 <= L <= MAX_DIGITS:
            raise InvalidInputError(
                f"the grammar's longest string is 1 to {MAX_DIGITS} digits, got {L!r}"
            )
        p = self.insertion_penalty
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 80:
            raise InvalidInputError(f"the insertion penalty is 0 to 80 nats, got {p!r}")
        for name in ("enter", "stay_last"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1:
                raise InvalidInputError(f"{name} must be a probability in (0, 1), got {v!r}")

    @property
    def entry_probability(self) -> float:
        """S -> the first state of one digit."""
        return self.enter * math.exp(-self.insertion_penalty) / 10


@dataclass(frozen=True)
class DigitLoopLayout:
    """The public shape of the loop: state 0 is silence, then each digit's states in
    digit order (``digit_states[d]`` of them)."""

    digit_states: tuple[int, ...]

    def __post_init__(self):
        if len(self.digit_states) != 10 or not all(
            isinstance(n, int) and n >= 1 for n in self.digit_states
        ):
            raise InvalidInputError("the loop needs ten digit models with at least one state")

    @property
    def states(self) -> int:
        return 1 + sum(self.digit_states)

    @property
    def firsts(self) -> tuple[int, ...]:
        """The first state of every digit (the states whose entry is a digit)."""
        return tuple(int(v) for v in 1 + np.cumsum([0, *self.digit_states[:-1]]))

    @property
    def lasts(self) -> tuple[int, ...]:
        return tuple(f + n - 1 for f, n in zip(self.firsts, self.digit_states))

    @property
    def entries(self) -> tuple[int, ...]:
        """Per state, the digit its entry starts, or -1."""
        out = [-1] * self.states
        for d, f in enumerate(self.firsts):
            out[f] = d
        return tuple(out)

    def digit_of(self, state: int) -> int:
        """The digit a state belongs to (-1: silence)."""
        for d, (f, last) in enumerate(zip(self.firsts, self.lasts)):
            if f <= state <= last:
                return d
        return -1


def _digit_block(model: GaussianHMM, stay_last: float) -> np.ndarray:
    """A digit model's transitions inside the loop: its own, its last state's self-loop
    set to ``stay_last`` (the rest of that row leaves to silence, outside the block)."""
    a = np.array(model.transmat, dtype=float)
    n = a.shape[0]
    a[n - 1] = 0.0
    a[n - 1, n - 1] = stay_last
    return a


def compose_loop(
    digits, silence: GaussianHMM, grammar: DigitGrammar
) -> tuple[GaussianHMM, DigitLoopLayout]:
    """The loop model of ten left-to-right digit HMMs (``digits[d]`` recognises d) and a
    one-state ``silence`` model, under ``grammar``: the path starts in silence (half the
    mass) or in a digit's first state, and ends anywhere."""
    if len(digits) != 10:
        raise InvalidInputError(f"the loop needs ten digit models, got {len(digits)}")
    if not isinstance(silence, GaussianHMM) or silence.n_states != 1:
        raise InvalidInputError("the silence model is a one-state GaussianHMM")
    models = [*digits]
    if not all(isinstance(m, GaussianHMM) for m in models):
        raise InvalidInputError("the digit models are GaussianHMMs")
    kinds = {(m.n_features, m.covariance_type) for m in (*models, silence)}
    if len(kinds) != 1:
        raise InvalidInputError("the digit and silence models need the same features")
    layout = DigitLoopLayout(tuple(m.n_states for m in models))
    n, q = layout.states, grammar.entry_probability
    a = np.zeros((n, n))
    a[0, 0] = 1 - 10 * q
    for m, f, last in zip(models, layout.firsts, layout.lasts):
        a[0, f] = q
        a[f : last + 1, f : last + 1] = _digit_block(m, grammar.stay_last)
        a[last, 0] = 1 - grammar.stay_last
    pi = np.zeros(n)
    pi[0] = 0.5
    pi[list(layout.firsts)] = 0.05
    means = np.concatenate([silence.means, *(m.means for m in models)])
    covars = np.concatenate([silence.covars, *(m.covars for m in models)])
    return GaussianHMM(pi, a, means, covars, silence.covariance_type), layout


@dataclass(frozen=True)
class DigitModels:
    """A model holder's models: ten digit HMMs (``digits[d]`` recognises d) and a
    one-state silence model."""

    digits: tuple[GaussianHMM, ...]
    silence: GaussianHMM

    def loop(self, grammar: DigitGrammar, layout: DigitLoopLayout | None = None):
        """(the loop model, its layout) under ``grammar``; with ``layout``, it must be that
        public one (the digits' numbers of states)."""
        model, own = compose_loop(self.digits, self.silence, grammar)
        if layout is not None and own != layout:
            raise InvalidInputError(
                f"the digit models have {own.digit_states} states, the public layout says "
                f"{layout.digit_states}"
            )
        return model, own


@dataclass(frozen=True)
class DigitString:
    """A decoded string: its digits when valid (1 to L of them), else none; ``count`` the
    digits the best path holds (0, or above L when it is too long)."""

    digits: tuple[int, ...] | None
    count: int
    max_digits: int

    @property
    def valid(self) -> bool:
        return self.digits is not None

    @property
    def text(self) -> str | None:
        return None if self.digits is None else "".join(str(d) for d in self.digits)

    @property
    def reason(self) -> str | None:
        """Why there is no string, in words (None when valid)."""
        if self.valid:
            return None
        if self.count == 0:
            return "no digit was recognised"
        return f"more digits than the grammar's {self.max_digits} were recognised"

    @classmethod
    def of(cls, digits, max_digits: int) -> DigitString:
        digits = tuple(int(d) for d in digits)
        ok = 1 <= len(digits) <= max_digits
        return cls(digits if ok else None, len(digits), max_digits)


def string_of_path(path, layout: DigitLoopLayout) -> list[int]:
    """The digits of a state path: one per entry into a digit's first state."""
    entries = layout.entries
    path = [int(s) for s in path]
    return [
        entries[s] for t, s in enumerate(path) if entries[s] >= 0 and (t == 0 or path[t - 1] != s)
    ]


def decode_digits(model, layout: DigitLoopLayout, frames, grammar: DigitGrammar) -> DigitString:
    """Plaintext recognition: Viterbi on the loop, then the string of the best path."""
    log_b = model.log_emission(frames)
    path, _ = viterbi_from_logs(model.log_startprob, model.log_transmat, log_b)
    return DigitString.of(string_of_path(path, layout), grammar.max_digits)


def edit_distance(reference, hypothesis) -> int:
    """Levenshtein distance between two sequences (substitutions, deletions, insertions)."""
    ref, hyp = list(reference), list(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[-1]


def word_errors(pairs) -> dict:
    """Word error rate and string accuracy of (reference digits, decoded DigitString)
    pairs; an invalid string counts as no digit at all."""
    errors = words = exact = 0
    for ref, got in pairs:
        hyp = got.digits or ()
        errors += edit_distance(ref, hyp)
        words += len(ref)
        exact += tuple(ref) == tuple(hyp)
    n = max(1, len(pairs))
    return {
        "strings": len(pairs),
        "words": words,
        "word_errors": errors,
        "wer": errors / max(1, words),
        "string_accuracy": exact / n,
    }


# -- a string as the circuit encodes it, and the enrolled PIN ---------------------------

#: bytes of the key that pads an enrolled PIN
KEY_BYTES = 32


def string_bits(max_digits: int) -> int:
    """W: L slots of 4 bits, then the count one-hot over 0 .. L + 1 (L + 1: more)."""
    return max_digits * 4 + max_digits + 2


def string_code(digits, max_digits: int) -> np.ndarray:
    """The W bits of a string of 1 .. L digits: each slot's bits least significant first,
    zero past the string, then the one-hot count."""
    digits = [int(d) for d in digits]
    if not 1 <= len(digits) <= max_digits or any(not 0 <= d <= 9 for d in digits):
        raise InvalidInputError(f"a PIN is 1 to {max_digits} digits 0-9")
    slots = np.zeros((max_digits, 4), dtype=np.uint8)
    for k, d in enumerate(digits):
        slots[k] = [(d >> b) & 1 for b in range(4)]
    count = np.zeros(max_digits + 2, dtype=np.uint8)
    count[len(digits)] = 1
    return np.concatenate([slots.reshape(-1), count])


def pin_pad(key: bytes, max_digits: int) -> np.ndarray:
    """pad(k): the first W bits of SHAKE-256(domain || k)."""
    if not isinstance(key, bytes | bytearray) or len(key) != KEY_BYTES:
        raise InvalidInputError(f"a PIN key is {KEY_BYTES} bytes")
    w = string_bits(max_digits)
    raw = hashlib.shake_256(b"smc-hmm digits pin pad\0" + bytes(key)).digest((w + 7) // 8)
    return np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")[:w]


def enrol(pin: str, max_digits: int, key: bytes | None = None) -> tuple[bytes, np.ndarray]:
    """Enrolment on the speaker's side: (her key k, the record c = code(PIN) xor pad(k)
    the model holder keeps: without k it is uniform bits)."""
    if not isinstance(pin, str) or not pin.isdigit():
        raise InvalidInputError(f"a PIN is a string of digits, got {pin!r}")
    key = secrets.token_bytes(KEY_BYTES) if key is None else key
    return key, string_code(pin, max_digits) ^ pin_pad(key, max_digits)
