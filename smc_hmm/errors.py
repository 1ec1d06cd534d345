"""Typed exceptions raised by every layer of smc-hmm.

Every error a user can provoke with bad input, a misbehaving peer or an
exhausted budget is a subclass of :class:`SmcHmmError`, so callers can catch
the whole family.  Input-validation errors also subclass :class:`ValueError`
and timeouts subclass :class:`TimeoutError`, so generic handlers still work.
"""

from __future__ import annotations


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


# --- wire and transport ------------------------------------------------------


class WireError(SmcHmmError, ValueError):
    """A frame could not be decoded or failed validation."""


class FrameTooLargeError(WireError):
    """A frame exceeds the configured maximum size."""


class TransportError(SmcHmmError):
    """Base class of errors from the transport layer."""


class PeerDisconnectedError(TransportError, ConnectionError):
    """A peer closed its connection before the protocol finished."""


class PeerTimeoutError(TransportError, TimeoutError):
    """A peer did not send an expected message within the timeout."""


class AuthenticationError(TransportError):
    """A peer's certificate or identity was rejected (mutual TLS)."""


class ComputeError(SmcHmmError):
    """A local worker process of a parallel Compute died or could not start."""


class ProtocolError(SmcHmmError):
    """A peer sent a message that violates the protocol (wrong tag, shape, phase)."""


# --- differential privacy ----------------------------------------------------


class PrivacyError(SmcHmmError):
    """Base class of errors from the differential-privacy layer."""


class PrivacyBudgetError(PrivacyError):
    """A release would exceed the privacy budget held by the accountant."""
