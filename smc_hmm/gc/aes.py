"""The fixed-key permutation and the reference hash of garbling, through OpenSSL's AES and
numpy: the leaf under :mod:`smc_hmm.gc.hashing` (which dispatches to the native kernel)
and :mod:`smc_hmm.gc.native` (which checks the kernel against it).  The construction is
:func:`smc_hmm.gc.hashing.tccr_hash`'s; ``docs/garbled.md``.
"""

from __future__ import annotations

import threading

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = ["FIXED_KEY", "permute", "tccr_hash_numpy"]

#: The public fixed AES key of the permutation pi (the first 16 bytes of pi's hex digits:
#: nothing up the sleeve; its security needs no secrecy).
FIXED_KEY = bytes.fromhex("243f6a8885a308d313198a2e03707344")


#: one ECB encryptor per thread (a context is not shared between threads; ECB over whole
#: blocks keeps no state between calls, so a thread reuses its own)
_ENCRYPTORS = threading.local()


def permute(blocks: np.ndarray) -> np.ndarray:
    """pi(x): AES-128 under :data:`FIXED_KEY` over every block (one OpenSSL call, reading
    the array's buffer and writing a fresh one)."""
    enc = getattr(_ENCRYPTORS, "ecb", None)
    if enc is None:
        enc = _ENCRYPTORS.ecb = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).encryptor()
    data = np.ascontiguousarray(blocks, dtype="<u8")
    out = np.empty(data.nbytes + 15, np.uint8)  # update_into wants a block to spare
    enc.update_into(data.reshape(-1).view(np.uint8), out)
    return out[: data.nbytes].view("<u8").reshape(blocks.shape)


def tccr_hash_numpy(blocks: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    """:func:`smc_hmm.gc.hashing.tccr_hash` through OpenSSL's AES and numpy (the
    kernel's reference)."""
    hi, lo = blocks[..., 1], blocks[..., 0]
    shape = np.broadcast_shapes(blocks.shape, tuple(np.shape(tweaks)) + (2,))
    sig = np.empty(shape, np.uint64)
    np.bitwise_xor(hi, lo, out=sig[..., 1])
    sig[..., 0] = hi
    keyed = sig.copy()
    keyed[..., 0] ^= np.asarray(tweaks, dtype=np.uint64)
    out = permute(keyed)
    out ^= sig
    return out
