"""Score and decode with a fitted ``hmmlearn`` model, securely: the hmmlearn user's path.

:class:`SecureHMM` wraps a fitted ``hmmlearn.hmm.GaussianHMM`` or ``CategoricalHMM`` (or
a model of :mod:`smc_hmm.hmm`) and mirrors hmmlearn's methods:

* ``score(X, lengths=None)`` -- the log-likelihood log P(X), summed over the sequences,
  by the secure forward algorithm (the registered ``forward`` protocol,
  ``protocols/forward.py``): Alice holds the observations and the key pair, Bob the
  model, and Alice learns log P and nothing else of the model;
* ``decode(X, lengths=None)`` -- (log-probability of the best path, the states), by
  secure Viterbi decoding (the ``viterbi`` protocol, ``protocols/viterbi.py``).

It accepts hmmlearn's conventions: ``X`` of shape (n_samples, n_features) with
``lengths`` for several sequences (one secure run each), and a categorical model's
``X`` of shape (n_samples, 1) (or (n_samples,)).  By default both parties run in this
process (:func:`smc_hmm.runtime.simulate.run_protocol`, one thread each, every message
through the wire codec); given ``server="HOST:PORT"`` and ``certs=DIR`` only Alice runs
here, against a serving Bob (``smc-hmm serve``) who holds the model (``model=None``).

**The weight floor.**  The protocols need every nonzero start and transition probability
to be at least the public floor 2^-42 (:data:`WEIGHT_FLOOR`; about 2.3e-13), and
hmmlearn's fits leave transitions such as 9.2e-14 or 4e-157 behind.  The rule
(:func:`apply_floor`): every nonzero start or transition probability below the floor is
raised to twice the floor, 2^-41, and its row is renormalised (so every entry stays at or
above the floor); zeros stay zeros.  Its effect on log P, for a sequence of T frames:

* **at most** ``T * log(1 + delta)`` **nats down**, where delta is the largest mass added
  to one row (at most N * 2^-41 for N states; 2.3e-9 nats for N = 5, T = 1,000): every
  path keeps every factor it had, divided by at most 1 + delta per step;
* **up** only through paths that take a raised weight, which the model itself gives
  probability below 2^-42 per such step: :func:`floor_effect` computes the exact change
  for a model and data in plaintext (for the data a model was fitted on it is tiny:
  2.6e-11 nats in ``examples/hmmlearn_secure.py``).

GMMHMM (mixtures per state) is refused in words: the secure forward algorithm scores one
Gaussian per state.  ``docs/api.md`` has the guide; ``examples/hmmlearn_secure.py`` the
fifteen lines.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smc_hmm.errors import ConfigError, InsecureKeyWarning, InvalidInputError
from smc_hmm.hmm import HMM, DiscreteHMM, GaussianHMM

__all__ = [
    "WEIGHT_FLOOR",
    "FloorAdjustment",
    "SecureHMM",
    "apply_floor",
    "floor_effect",
    "save_model",
    "split_sequences",
    "to_model",
]

#: the protocols' public floor on nonzero start and transition probabilities (2^-42)
WEIGHT_FLOOR = 2.0**-42
#: what a weight below the floor is raised to before its row is renormalised
RAISED_TO = 2.0 * WEIGHT_FLOOR


@dataclass(frozen=True)
class FloorAdjustment:
    """What :func:`apply_floor` changed: how many weights it raised, the smallest nonzero
    weight before, and delta, the largest probability mass it added to one row."""

    raised: int
    smallest: float
    delta: float

    def max_decrease(self, frames: int) -> float:
        """The most log P of a ``frames``-frame sequence can go down, nats."""
        return frames * math.log1p(self.delta)


def apply_floor(model: HMM) -> tuple[HMM, FloorAdjustment]:
    """``model`` with every nonzero start or transition probability below
    :data:`WEIGHT_FLOOR` raised to :data:`RAISED_TO` and its row renormalised (module
    docstring); the model itself if nothing is below the floor."""
    rows = np.vstack([model.startprob[None, :], model.transmat])
    low = (rows > 0) & (rows < WEIGHT_FLOOR)
    nonzero = rows[rows > 0]
    smallest = float(nonzero.min()) if nonzero.size else 0.0
    if not low.any():
        return model, FloorAdjustment(0, smallest, 0.0)
    raised = np.where(low, RAISED_TO, rows)
    added = (raised - rows).sum(axis=1)
    raised = raised / raised.sum(axis=1, keepdims=True)
    start, trans = raised[0], raised[1:]
    if isinstance(model, GaussianHMM):
        out: HMM = GaussianHMM(start, trans, model.means, model.covars, model.covariance_type)
    else:
        out = DiscreteHMM(start, trans, model.emissionprob)
    return out, FloorAdjustment(int(low.sum()), smallest, float(added.max()))


def floor_effect(model, X, lengths=None) -> float:
    """The exact change :func:`apply_floor` makes to log P of ``X`` (plaintext, for data
    and a model you hold): log P(adjusted) - log P(model), summed over the sequences."""
    from smc_hmm.hmm import log_likelihood

    ours = to_model(model)
    adjusted, _ = apply_floor(ours)
    sequences = split_sequences(ours, X, lengths)
    return math.fsum(log_likelihood(adjusted, x) - log_likelihood(ours, x) for x in sequences)


def save_model(model, path) -> FloorAdjustment:
    """Write a fitted model, the weight floor applied, as the model file a serving Bob
    loads (``models = "PATH"`` in his ``parties.toml``, ``smc-hmm serve``); returns what
    the floor changed."""
    from smc_hmm.hmm.io import save_models

    adjusted, adjustment = apply_floor(to_model(model))
    save_models(path, [adjusted])
    return adjustment


def to_model(model) -> HMM:
    """A model of :mod:`smc_hmm.hmm` from a fitted hmmlearn ``GaussianHMM`` or
    ``CategoricalHMM`` (or one of ours, as is); anything else is refused in words."""
    if isinstance(model, GaussianHMM | DiscreteHMM):
        return model
    kind = type(model).__name__
    if kind == "GaussianHMM":
        return GaussianHMM.from_hmmlearn(model)
    if kind == "CategoricalHMM":
        return DiscreteHMM.from_hmmlearn(model)
    if kind == "GMMHMM":
        raise InvalidInputError(
            "GMMHMM is not supported: the secure forward algorithm and Viterbi decoding score "
            "one Gaussian per state (fit a GaussianHMM with more states instead; docs/api.md)"
        )
    raise InvalidInputError(
        f"expected a fitted hmmlearn GaussianHMM or CategoricalHMM, got {kind} (docs/api.md)"
    )


def split_sequences(model: HMM | None, X, lengths=None) -> list[np.ndarray]:
    """hmmlearn's ``(X, lengths)`` as a list of sequences: ``X`` of shape (n, d), or for a
    discrete model (n, 1) or (n,) of symbols, cut at the ``lengths`` (which sum to n).
    Without a model (a serving Bob holds it), integer symbols of shape (n, 1) or (n,)
    mean a discrete one."""
    x = np.asarray(X)
    symbols = np.issubdtype(x.dtype, np.integer) and x.ndim in (1, 2) and x.shape[-1:] != (0,)
    discrete = isinstance(model, DiscreteHMM) or (
        model is None and symbols and (x.ndim == 1 or x.shape[1] == 1)
    )
    if discrete and x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != (1 if discrete else 2) or len(x) == 0:
        shape = "(n_samples, 1) symbols" if discrete else "(n_samples, n_features)"
        raise InvalidInputError(f"X must have shape {shape}, got {np.shape(X)}")
    if discrete and not np.issubdtype(x.dtype, np.integer):
        raise InvalidInputError("a categorical model's X holds integer symbols")
    lengths = [len(x)] if lengths is None else [int(n) for n in lengths]
    if any(n < 1 for n in lengths) or sum(lengths) != len(x):
        raise InvalidInputError(
            f"lengths must be positive and sum to the {len(x)} samples of X, got {lengths}"
        )
    return np.split(x, np.cumsum(lengths)[:-1])


@dataclass
class SecureHMM:
    """A fitted model scored and decoded securely (module docstring).

    ``key_bits``: Alice's Paillier key (2048 by default; smaller only with ``insecure``,
    for tests and quick tries).  ``server``, ``certs``, ``name``: a serving Bob
    (``smc-hmm serve``) and the client certificate to reach him with, instead of a Bob in
    this process.  ``feature_bound``: the public bound on |every feature| (default: the
    protocol's).  After each call, ``cost`` holds one cost report per secure run and
    ``adjustment`` what the weight floor changed (:class:`FloorAdjustment`)."""

    model: Any = None
    key_bits: int = 2048
    insecure: bool = False
    server: str | None = None
    certs: str | None = None
    name: str | None = None
    timeout: float = 300.0
    feature_bound: float | None = None
    cost: list = field(default_factory=list, init=False, repr=False)
    adjustment: FloorAdjustment | None = field(default=None, init=False)
    _bob: Any = field(default=None, init=False, repr=False)
    _keypair: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if (self.model is None) == (self.server is None):
            raise ConfigError(
                "give a fitted model (both parties in this process) or a server (Bob there "
                "holds the model), not both"
            )
        if self.model is not None:
            self._bob, self.adjustment = apply_floor(to_model(self.model))

    def score(self, X, lengths=None) -> float:
        """log P(X), summed over the sequences (hmmlearn's ``score``), computed securely."""
        outputs = self._run("forward", X, lengths, {"reveal": True})
        if any(out is None for out in outputs):
            raise ConfigError("the server does not reveal log P ([protocol] reveal = false)")
        return math.fsum(out[0] for out in outputs)

    def decode(self, X, lengths=None) -> tuple[float, np.ndarray]:
        """(log-probability of the best path, its states), summed and concatenated over the
        sequences (hmmlearn's ``decode`` with the Viterbi algorithm), computed securely."""
        params = {"output": "path", "reveal_score": True}
        outputs = self._run("viterbi", X, lengths, params)
        states = np.concatenate([np.asarray(out[0]["path"], dtype=int) for out in outputs])
        return math.fsum(out[0]["score"] for out in outputs), states

    def decode_error_bound(self, X, lengths=None) -> float:
        """Nats: how far :meth:`decode`'s log-probability may lie from the exact Viterbi
        score of the same path (the default secure Viterbi rounds Alice's frames and Bob's
        weights before its circuit: the protocol's ``error_bound``, summed over the
        sequences).  Needs the model: in-process only."""
        if self._bob is None:
            raise ConfigError("the error bound needs the model: Bob's, on the server")
        from smc_hmm.protocol import find

        descriptor = find("viterbi")
        params = {"output": "path", "reveal_score": True}
        if self.feature_bound is not None:
            params["feature_bound"] = float(self.feature_bound)
        params = descriptor.params(params)
        return math.fsum(
            descriptor.error_bound(params, self.key_bits, {"alice": x, "bob": [self._bob]})
            for x in split_sequences(self._bob, X, lengths)
        )

    def _run(self, protocol: str, X, lengths, params: dict) -> list:
        model = None if self.server is not None else self._bob
        sequences = split_sequences(model, X, lengths)
        if self.feature_bound is not None:
            params = {**params, "feature_bound": float(self.feature_bound)}
        self._check_bound(protocol, params, sequences)
        self.cost = []
        if self.server is not None:
            return [self._remote(protocol, x, params) for x in sequences]
        return [self._local(protocol, x, params) for x in sequences]

    def _check_bound(self, protocol: str, params: dict, sequences) -> None:
        """Features beyond the public bound are refused here, before any work (the
        protocol would refuse them only after its last message)."""
        if sequences[0].ndim == 1:  # discrete symbols: no feature bound
            return
        from smc_hmm.protocol import find

        bound = find(protocol).params(params).feature_bound
        largest = max(float(np.max(np.abs(x))) for x in sequences)
        if not largest <= bound:
            raise InvalidInputError(
                f"a feature of X reaches {largest:g}, beyond the public feature bound "
                f"{bound:g}: give SecureHMM(feature_bound=...) at least that"
            )

    def _keys(self):
        if self._keypair is None:
            from smc_hmm.crypto import generate_keypair

            with warnings.catch_warnings():
                if self.insecure:
                    warnings.simplefilter("ignore", InsecureKeyWarning)
                self._keypair = generate_keypair(self.key_bits, insecure=self.insecure)
        return self._keypair

    def _local(self, protocol: str, x, params: dict):
        from smc_hmm.protocol import find
        from smc_hmm.runtime.simulate import run_protocol

        result = run_protocol(
            find(protocol),
            params,
            {"alice": ("alice", x), "bob": ("bob", [self._bob])},
            keys={"alice": self._keys()},
            min_key_bits=min(self.key_bits, 2048) if self.insecure else 2048,
            timeout=self.timeout,
        )
        self.cost.append(result.cost)
        return result["alice"]

    def _remote(self, protocol: str, x, params: dict):
        from smc_hmm.runtime.client import parse_server, run_alice_session

        if not self.certs:
            raise ConfigError("a server needs certs: the folder of ca.pem and your certificate")
        result = run_alice_session(
            protocol,
            x,
            self.certs,
            self.name,
            server=parse_server(self.server),
            key_bits=self.key_bits,
            insecure=self.insecure,
            timeout=self.timeout,
            expect=params,
        )
        self.cost.append(result["cost"])
        return result["output"]
