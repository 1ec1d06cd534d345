"""The fixed-key permutation and the reference hash of garbling, through OpenSSL's AES and
numpy: the leaf under :mod:`smc_hmm.gc.hashing` (which dispatches to the native kernel)
and :mod:`smc_hmm.gc.native` (which checks the kernel against it).  The construction is
:func:`smc_hmm.gc.hashing.tccr_hash`'s; ``docs/garbled.md``.
"""

from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = ["FIXED_KEY", "permute", "tccr_hash_numpy"]

#: The public fixed AES key of the permutation pi (the first 16 bytes of pi's hex digits:
#: nothing up the sleeve; its security needs no secrecy).
FIXED_KEY = bytes.fromhex("243f6a8885a308d313198a2e03707344")


def permute(blocks: np.ndarray) -> np.ndarray:
    """pi(x): AES-128 under :data:`FIXED_KEY` over every block (one OpenSSL call).  A
    fresh encryptor per call: an ECB context is not shared between threads."""
    enc = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).encryptor()
    out = enc.update(np.ascontiguousarray(blocks, dtype="<u8").tobytes())
    return np.frombuffer(out, dtype="<u8").reshape(blocks.shape)


def tccr_hash_numpy(blocks: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    """:func:`smc_hmm.gc.hashing.tccr_hash` through OpenSSL's AES and numpy (the
    kernel's reference)."""
    hi, lo = blocks[..., 1], blocks[..., 0]
    sig = np.empty(np.broadcast_shapes(blocks.shape, tuple(np.shape(tweaks)) + (2,)), np.uint64)
    sig[..., 1] = hi ^ lo
    sig[..., 0] = hi
    keyed = sig.copy()
    keyed[..., 0] ^= np.asarray(tweaks, dtype=np.uint64)
    return permute(keyed) ^ sig
