"""1-of-M oblivious transfer by Paillier selection (thesis 003, 3.1.2 "Oblivious Transfer").

Roles: Alice (receiver, holds the key pair and a choice x in [0, M)) and Bob
(sender, holds M integer messages m_0..m_{M-1}).  Batched: many transfers
share one message each way.

1. Alice sends E(e_x), the encrypted one-hot vector of her choice.
2. Bob returns E(sum_k e_k m_k) = E(m_x) as one multi-exponentiation,
   re-randomised.
3. Alice decrypts m_x.

Public parameters: M, the number of transfers, and ``message_bits``: every
message satisfies |m_k| < 2^message_bits (Bob checks before computing).  The
declared messages (:func:`messages`) carry only these.

What each party learns (semi-honest model): Bob sees M ciphertexts under
Alice's key and learns nothing about x (IND-CPA of Paillier).  Alice receives
one fresh-looking ciphertext of m_x and learns m_x only, provided she follows
the protocol (a malicious Alice could send a non-one-hot vector and learn a
linear combination of the messages; this protocol is for semi-honest
parties, like the rest of the package).

:func:`bob_select` is the encrypted-output half that the secure forward
algorithm uses: Bob keeps E(m_x) (here the blinded emission log-probabilities)
instead of returning it.

Run: ``python -m pytest tests/protocols/test_protocol_ot.py``.
"""

from __future__ import annotations

import numpy as np

from smc_hmm.crypto import CipherArray
from smc_hmm.errors import InvalidInputError, PrecisionError, ProtocolError
from smc_hmm.messages import Ciphertexts, Message

TAGS = ("ot.choices", "ot.transfer")


def messages(n_options: int, message_bits: int) -> tuple[Message, Message]:
    """The two declared messages: one-hot choices (bound 1) and the transfers."""
    if not isinstance(message_bits, int) or message_bits < 1:
        raise InvalidInputError("message_bits must be an int >= 1")
    return (
        Message("ot.choices", Ciphertexts(0, 1, (None, n_options))),
        Message("ot.transfer", Ciphertexts(0, (1 << message_bits) - 1, (None,), fresh=True)),
    )


def one_hot(choices, n_options: int) -> np.ndarray:
    """(len(choices), n_options) integer one-hot rows; validates every choice."""
    choices = np.asarray(choices)
    if choices.ndim != 1 or choices.dtype.kind not in "iu":
        raise InvalidInputError("choices must be a 1-D integer array")
    if n_options < 1 or ((choices < 0) | (choices >= n_options)).any():
        raise InvalidInputError(f"every choice must be in [0, {n_options})")
    rows = np.zeros((len(choices), n_options), dtype=object)
    rows[np.arange(len(choices)), choices] = 1
    return rows


def bob_select(enc_one_hot: CipherArray, messages, scale: int = 0):
    """E(sum_k e_k m_k) for each encrypted one-hot row and each message vector.

    ``enc_one_hot`` is (transfers, M); ``messages`` is (M,) or (outputs, M)
    integers at ``scale``.  Returns (transfers,) or (transfers, outputs).
    Counts one ``ot`` per transfer on the key's meter (the sender's ledger).
    """
    if enc_one_hot.ndim != 2:
        raise ProtocolError("one-hot choices must be a 2-D ciphertext array")
    msgs = np.asarray(messages, dtype=object)
    single = msgs.ndim == 1
    msgs = msgs.reshape(1, -1) if single else msgs
    if msgs.shape[1] != enc_one_hot.shape[1]:
        raise ProtocolError(f"{enc_one_hot.shape[1]} choices but {msgs.shape[1]} messages")
    enc_one_hot.public_key.meter.count("ot", enc_one_hot.shape[0])
    rows = [enc_one_hot[t].lincomb(msgs, scale) for t in range(enc_one_hot.shape[0])]
    out = CipherArray.concatenate([r.reshape(1, -1) for r in rows])
    return out.reshape(-1) if single else out


def alice(ctx, choices, n_options: int, message_bits: int, peer: str = "bob") -> np.ndarray:
    """Receiver: returns the chosen messages (integers)."""
    pk, sk = ctx.keypair
    choose, transfer = messages(n_options, message_bits)
    # Step 1: E(one-hot(x)) for every transfer
    ctx.send(peer, choose, CipherArray.encrypt_encoded(pk, one_hot(choices, n_options), 0))
    # Step 3: decrypt E(m_x)
    return ctx.recv(peer, transfer).decrypt_ints(sk)


def bob(ctx, messages_, message_bits: int, peer: str = "alice") -> None:
    """Sender: ``messages_`` is a length-M sequence of integers below 2^message_bits."""
    msgs = np.asarray(messages_, dtype=object)
    if msgs.ndim != 1 or msgs.size == 0:
        raise InvalidInputError("messages must be a non-empty 1-D integer sequence")
    top = (1 << message_bits) - 1
    if any(abs(int(m)) > top for m in msgs):
        raise PrecisionError(f"a message exceeds the declared {message_bits} bits")
    choose, transfer = messages(len(msgs), message_bits)
    choices = ctx.recv(peer, choose)
    # Step 2: E(m_x) = prod_k E(e_k)^{m_k} (re-randomised as ``ot.transfer`` is fresh); a
    # one-hot row selects one message, so |m_x| <= max_k |m_k| (the semi-honest receiver
    # sends one-hot rows)
    selected = bob_select(choices, msgs)
    ctx.send(peer, transfer, selected.with_bound(max(abs(int(m)) for m in msgs)))
