"""Typed exceptions raised by every layer of smc-hmm.

Every error a user can provoke with bad input, a misbehaving peer or an
exhausted budget is a subclass of :class:`SmcHmmError`, so callers can catch
the whole family.  Input-validation errors also subclass :class:`ValueError`
and timeouts subclass :class:`TimeoutError`, so generic handlers still work.
"""

from __future__ import annotations

import json
import warnings


class SmcHmmError(Exception):
    """Base class of every error raised by smc-hmm."""


# --- input and configuration -------------------------------------------------


class InvalidInputError(SmcHmmError, ValueError):
    """An argument is malformed: wrong type, NaN/inf, out of range."""


class ShapeMismatchError(InvalidInputError):
    """Arrays that must agree in shape do not."""


class ConfigError(InvalidInputError):
    """A configuration file or option is invalid."""


class ModelError(InvalidInputError):
    """An HMM's parameters are invalid (non-stochastic rows, bad covariance, ...)."""


def parse_json(text: str, what: str) -> object:
    """The JSON value of ``text``; text that is not JSON is a :class:`ConfigError` that
    names ``what`` (``"cost report"``, ``"the pipeline"``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} is not valid JSON: {e}") from e


# --- cryptography ------------------------------------------------------------


class CryptoError(SmcHmmError):
    """Base class of errors from the Paillier layer."""


class KeyMismatchError(CryptoError, ValueError):
    """Ciphertexts or keys from different key pairs were combined."""


class ScaleMismatchError(CryptoError, ValueError):
    """Fixed-point values with different binary scales were combined."""


class PrecisionError(CryptoError, ArithmeticError):
    """A result could leave the plaintext space (|x| >= n/2 with margin).

    Raised *before* computing: the library never wraps silently.
    """


class InvalidCiphertextError(CryptoError, ValueError):
    """A ciphertext is not in Z*_{n^2} (0 < c < n^2, gcd(c, n) = 1)."""


class InsecurePeerKeyError(CryptoError, ValueError):
    """A peer sent a public key below this party's configured minimum size."""


class InsecureKeyWarning(UserWarning):
    """A key shorter than 2048 bits was requested with ``insecure=True``."""


class WeakerModeWarning(UserWarning):
    """An opt-in protocol mode that reveals more than the default was chosen (keyword
    ``fast``, forward ``recursion = "v1"``, eigenvector ``thesis``): ``docs/security.md``
    states what it reveals."""


def warn_weaker_mode(what: str) -> None:
    """Emit :class:`WeakerModeWarning` for ``what`` (said where the choice is made)."""
    warnings.warn(f"{what} (docs/security.md)", WeakerModeWarning, stacklevel=4)


# --- wire and transport ------------------------------------------------------


class WireError(SmcHmmError, ValueError):
    """A frame could not be decoded or failed validation."""


class InvalidCiphertextFrameError(WireError, InvalidCiphertextError):
    """A frame carried a ciphertext outside Z*_{n^2} (both a WireError and an
    InvalidCiphertextError, so either handler catches it)."""


class FrameTooLargeError(WireError):
    """A frame exceeds the configured maximum size."""


class TransportError(SmcHmmError):
    """Base class of errors from the transport layer."""


class InjectedFaultError(TransportError):
    """Raised in the party whose fault-injecting transport (tests) injected a fault."""


class PeerDisconnectedError(TransportError, ConnectionError):
    """A peer closed its connection before the protocol finished."""


class PeerTimeoutError(TransportError, TimeoutError):
    """A peer did not send an expected message within the timeout."""


class EndpointError(TransportError):
    """This party's own endpoint could not be set up (address in use, unknown host)."""


class AuthenticationError(TransportError):
    """A peer's certificate or identity was rejected (mutual TLS)."""


class ComputeError(SmcHmmError):
    """A local worker process of a parallel Compute died or could not start."""


class PartyProcessError(SmcHmmError):
    """A party running in another OS process failed (its error type and message attached)."""

    def __init__(self, party: str, error_type: str, message: str, returncode: int | None = None):
        super().__init__(f"party {party} failed: {error_type}: {message}")
        self.party = party
        self.error_type = error_type
        self.message = message
        self.returncode = returncode


class ProtocolError(SmcHmmError):
    """A peer sent a message that violates the protocol (wrong tag, shape, phase)."""


class OtConsistencyError(ProtocolError):
    """An OT extension receiver failed the KOS consistency check: it did not use one
    choice vector in every column (a cheating receiver).  The session ends; nothing is
    output."""


class GarbledCircuitError(ProtocolError):
    """A garbled circuit cannot be evaluated or its output is not authentic: a table or
    a label of the wrong size, or an output label that is neither of its wire's two
    labels.  The session ends and nothing is output (it fails closed)."""


# --- differential privacy ----------------------------------------------------


class PrivacyError(SmcHmmError):
    """Base class of errors from the differential-privacy layer."""


class PrivacyBudgetError(PrivacyError):
    """A release would exceed the privacy budget held by the accountant."""


class PrivacyParameterError(PrivacyError, InvalidInputError):
    """A privacy parameter is invalid: epsilon not finite or <= 0, sensitivity negative,
    NaN or inf, an empty or inverted output range, a bad budget split.

    Also an :class:`InvalidInputError` (hence a ``ValueError``), so generic input handlers
    still catch it.
    """


class SensitivityBoundError(PrivacyParameterError):
    """A record violates a declared sensitivity bound (e.g. a sequence longer than the
    declared maximum length L of DP Baum-Welch); the release is refused, not clipped."""


class SamplerUnavailableError(PrivacyError):
    """The requested noise sampler cannot run: its optional dependency (OpenDP, from the
    ``dp`` extra) is missing, or it does not support the requested release."""


# --- DPHMM ---


class DPHMMParameterError(PrivacyError, InvalidInputError):
    """A parameter of the K-norm mechanism or of the DPHMM release is invalid: epsilon not
    finite or <= 0, a non-finite value, a malformed transition matrix or query, a bad
    random generator (see ``docs/dphmm.md``)."""


class InvalidConvexBodyError(DPHMMParameterError):
    """A convex body K is unusable: empty, non-finite points, a zero-dimensional body where
    noise is required, or the origin outside K's relative interior (no K-norm)."""


class UnknownStateError(DPHMMParameterError):
    """A policy graph, constraint set or true state names a state outside 0..n-1."""


class EmptyConstraintError(PrivacyError):
    """The constraint set C_t = {s : p_t^-(s) > 0} (or a delta-location set) is empty."""


class StateOutsideConstraintError(PrivacyError):
    """The true state has prior probability 0 (it is not in C_t): the Markov model and the
    released trace disagree, so no DPHMM guarantee covers it."""


class ExposedStateError(PrivacyError):
    """A constrained policy graph is not protectable (a state has DoP = 1) and repair was
    disabled: releasing would expose that state (DPHMM paper, Theorem 5.2)."""


# --- multiparty DP aggregation ---


class AggregateInputError(InvalidInputError):
    """Bad input to the DP aggregate (protocols/aggregate.py) or federated DP Baum-Welch:
    fewer than two data owners, an empty or malformed data set, mismatched dimensions, a
    value beyond its public bound."""


# --- iterative protocols ---


class ConvergenceError(SmcHmmError):
    """An iterative protocol (e.g. the eigenvector power iteration) did not converge within
    its iteration cap, or stopped on a value it must not stop on."""


# -- serving many clients (smc-hmm serve) ----------------------------------------------------


class ServerBusyError(TransportError):
    """A serving party refused a client: every session slot was taken (and the waiting room
    was full or the client waited longer than the configured bound)."""


class SessionTimeoutError(PeerTimeoutError):
    """A served session ran longer than its configured bound and was ended."""


class ServerShutdownError(TransportError):
    """A serving party is shutting down: a new client is refused, a running session that did
    not finish within the shutdown bound is ended."""


class ServedProtocolError(ProtocolError):
    """A serving party declared another protocol or other public parameters (a mode, a
    threshold) than the client asked for: the client refuses before sending anything that
    depends on its input (:func:`smc_hmm.runtime.client.run_client_session`)."""


class BudgetError(ProtocolError):
    """A serving party refused a run: the client identity's budget of frames for the period
    would be exceeded (``[serve] max_frames_per_client`` / ``hiding_nats``,
    :mod:`smc_hmm.runtime.budget`).  Decided on public sizes only."""


# -- bounds on what a peer may choose, and on what it may make a party hold ---------------------


class ParameterBoundError(ProtocolError, ValueError):
    """A peer chose a parameter outside its documented bound (a key size, DGK's t or u, a
    size, count or shape; :mod:`smc_hmm.limits`).  Raised before any work or allocation for
    the value; ``bound`` names the bound, ``value`` and ``limit`` give the numbers."""

    def __init__(self, message: str, *, bound: str = "", value=None, limit=None):
        super().__init__(message)
        self.bound = bound
        self.value = value
        self.limit = limit


class BackpressureError(TransportError):
    """A peer sent more than this party's budget of frames or bytes that the protocol has not
    read yet (after being slowed down by the transport): the connection was dropped."""
