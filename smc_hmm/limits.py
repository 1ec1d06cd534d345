"""Documented bounds on every parameter a peer may choose, checked before any work is done.

A party computes with some values its peer picks: the size of the peer's Paillier key
(every ciphertext, every r^n and every multiplication grows with it), the modulus, t and
u of the peer's DGK key (the fixed-base table of h holds ceil(2.5 t / 8) * 256 numbers of
the modulus' size: t = 2^20 would be about 23 GiB), and the sizes, counts and shapes the
peer declares (a sequence length, models and states, elements of an array).  Each such
value is checked against the bound below as soon as it arrives, before any work is done
or any memory is allocated for it; a violation raises
:class:`~smc_hmm.errors.ParameterBoundError`, whose message and ``bound`` attribute name
the bound (``docs/serving.md``, section "Limits", lists every limit of a serving party).

=========================  ==========  ==========================================================
bound                      default     what it bounds (where it is checked)
=========================  ==========  ==========================================================
``min_key_bits``           2048        a peer's Paillier or DGK modulus, from below (the party's
                                       configuration: lower only with ``insecure``);
                                       :class:`~smc_hmm.errors.InsecurePeerKeyError`
``max_key_bits``           8192        a peer's Paillier modulus (``PartyContext.recv``) and DGK
                                       modulus (``DGKPublicKey.from_wire``), from above; a party
                                       raises it explicitly (``PartyContext(max_key_bits=...)``,
                                       ``[serve] max_key_bits``)
``max_dgk_t``              256         DGK's t, the bits of the subgroup primes v_p, v_q (160 is
                                       the secure choice)
``max_dgk_u_bits``         32          DGK's plaintext modulus u, a prime (u >= 3 l is checked
                                       against the comparison's public l)
``max_sequence_length``    1,000,000   frames T a forward-algorithm client declares
``max_states``             100,000     states of all models together in a forward-algorithm spec
``max_width``              100,000     a forward spec's feature dimension or alphabet
=========================  ==========  ==========================================================

The same module bounds what a user of ``smc-hmm release hmm`` may ask for, checked while
the command line is parsed (:class:`~smc_hmm.errors.ConfigError`, exit code 2):

=========================  ==========  ==========================================================
bound                      value       what it bounds
=========================  ==========  ==========================================================
``MAX_RELEASE_STATES``     1,000       ``--states`` (DP Baum-Welch holds N x N transition counts
                                       per sequence: 100,000 states asked for 74.5 GiB; keyword
                                       models cut every utterance into K segments)
``MAX_SEQUENCE_LENGTH``    1,000,000   ``--max-length`` L (the Laplace noise on every count grows
                                       with L: an L far above the real lengths drowns the counts,
                                       and 1e12 released pure noise)
``MAX_WIDTH``              100,000     ``--symbols`` (an N x M emission matrix)
=========================  ==========  ==========================================================

The wire codec bounds what any frame may hold (``smc_hmm.wire.WireCodec``: frame size,
nesting depth 64, 2^28 elements per array, 8192-byte integers) and the transports bound
what a connection may queue (``smc_hmm.transport.tcp``, ``smc_hmm.transport.base.Channel``).
"""

from __future__ import annotations

from smc_hmm.errors import ParameterBoundError

__all__ = [
    "MAX_DGK_T",
    "MAX_DGK_U_BITS",
    "MAX_KEY_BITS",
    "MIN_KEY_BITS",
    "MAX_RELEASE_STATES",
    "DEFAULT_MAX_FRAMES",
    "MAX_SEQUENCE_LENGTH",
    "MAX_STATES",
    "MAX_WIDTH",
    "check_at_most",
    "check_key_bits",
]

#: the largest Paillier or DGK modulus a party accepts from a peer unless told otherwise
MAX_KEY_BITS = 8192
#: the smallest Paillier modulus that works at all (:data:`smc_hmm.crypto.keys.MIN_KEY_BITS`)
MIN_KEY_BITS = 256
#: the largest DGK t (bits of v_p and v_q) a party accepts from a peer
MAX_DGK_T = 256
#: the largest DGK u (bits) a party accepts from a peer
MAX_DGK_U_BITS = 32
#: the longest sequence (frames) a forward-algorithm client may declare
MAX_SEQUENCE_LENGTH = 1_000_000
#: the most states, over all models, a forward-algorithm spec may declare
MAX_STATES = 100_000
#: the largest feature dimension or alphabet a forward-algorithm spec may declare
MAX_WIDTH = 100_000
#: the most hidden states ``smc-hmm release hmm`` (DP Baum-Welch or keyword models) takes
MAX_RELEASE_STATES = 1_000
#: frames of one recording the commands and a serving Bob accept by default (30 s of
#: audio at the 10 ms hop; about 8 minutes of keyword recognition at 2048 bits):
#: ``smc-hmm keyword --max-frames`` and ``[serve] max_frames`` raise it, up to
#: MAX_SEQUENCE_LENGTH
DEFAULT_MAX_FRAMES = 3_000


def check_at_most(bound: str, value: int, limit: int, what: str) -> int:
    """``value`` if ``0 <= value <= limit``, else :class:`ParameterBoundError` naming ``bound``.

    ``what`` says whose value it is ("the peer's DGK t"); ``value`` must already be an int
    (type checks belong to the caller's parser, which knows the message).
    """
    if value < 0 or value > limit:
        raise ParameterBoundError(
            f"{what} is {value}: outside the bound {bound} = {limit}",
            bound=bound,
            value=value,
            limit=limit,
        )
    return value


def check_key_bits(bits: int, max_bits: int, what: str) -> int:
    """The upper bound ``max_key_bits`` on a peer's modulus (the lower bound is the party's
    configured minimum, checked where the key is used: it raises InsecurePeerKeyError)."""
    return check_at_most("max_key_bits", bits, max_bits, f"{what} (bits)")
