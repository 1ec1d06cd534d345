"""Fixed-key AES: the hash of half-gates garbling and the PRG of OT extension.

Both run AES-128 in bulk through ``cryptography`` (OpenSSL, AES-NI where the CPU has
it): one ``update`` call over every block of a layer of gates, never a Python loop per
block.

* :func:`tccr_hash` -- a tweakable circular correlation-robust hash from a fixed-key
  permutation pi (Bellare, Hoang, Keelveedhi and Rogaway, "Efficient garbling from a
  fixed-key blockcipher", S&P 2013; the construction and its proof for half gates are
  Guo, Katz, Wang and Yu, "Efficient and secure multiparty computation from fixed-key
  block ciphers", S&P 2020): ``H(x, i) = pi(sigma(x) ^ i) ^ sigma(x)`` with the linear
  orthomorphism ``sigma(x_hi || x_lo) = (x_hi ^ x_lo) || x_hi``.
* :func:`prg` -- AES-128 in counter mode keyed by a 16-byte seed (the columns of IKNP's
  matrices).

A block is a row of two ``uint64`` words ``[lo, hi]`` (little-endian bytes): arrays of
blocks are numpy ``(..., 2)`` ``uint64`` arrays, XORed as numpy arrays.  The point-and-
permute bit of a label is bit 0 of ``lo``.  See ``docs/garbled.md``.
"""

from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import InvalidInputError
from smc_hmm.gc.aes import FIXED_KEY, tccr_hash_numpy
from smc_hmm.gc.native import gc_kernel

__all__ = [
    "BLOCK_BYTES",
    "FIXED_KEY",
    "as_blocks",
    "prg",
    "random_blocks",
    "tccr_hash",
    "tccr_hash_numpy",
]

#: Bytes of one block (a wire label, an OT message).
BLOCK_BYTES = 16
#: above this many blocks, :func:`random_blocks` expands one fresh seed with the PRG
_PRG_FROM = 64


def as_blocks(data: bytes | np.ndarray) -> np.ndarray:
    """Bytes (a multiple of 16) or a uint8 array as an ``(n, 2)`` uint64 block array."""
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    if len(raw) % BLOCK_BYTES:
        raise InvalidInputError(f"{len(raw)} bytes are not whole 16-byte blocks")
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).copy()


def random_blocks(rng: Rng, count: int) -> np.ndarray:
    """``count`` uniform blocks from ``rng`` (the OS CSPRNG unless a test seeds it); a
    large count as AES-CTR of one fresh 128-bit seed (pseudorandom, as every label)."""
    if count < 0:
        raise InvalidInputError(f"cannot draw {count} blocks")
    if count == 0:
        return np.zeros((0, 2), dtype=np.uint64)
    if count > _PRG_FROM:  # a fresh 128-bit seed expanded by AES-CTR: far faster
        seed = rng.randbits(128).to_bytes(BLOCK_BYTES, "little")
        return np.frombuffer(prg(seed, BLOCK_BYTES * count), dtype="<u8").reshape(count, 2).copy()
    raw = rng.randbits(128 * count).to_bytes(BLOCK_BYTES * count, "little")
    return np.frombuffer(raw, dtype="<u8").reshape(count, 2).copy()


def tccr_hash(blocks: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    """``H(x, i)`` for every block ``x`` (``(..., 2)``) and tweak ``i`` (broadcast
    against ``blocks[..., 0]``, uint64): on the garbling kernel where it runs
    (:mod:`smc_hmm.gc.native`), else :func:`tccr_hash_numpy` (the same values)."""
    k = gc_kernel()
    if k is None:
        return tccr_hash_numpy(blocks, tweaks)
    shape = np.broadcast_shapes(np.shape(blocks), tuple(np.shape(tweaks)) + (2,))
    x = np.broadcast_to(blocks, shape).reshape(-1, 2)
    t = np.broadcast_to(np.asarray(tweaks, dtype=np.uint64), shape[:-1]).reshape(-1)
    return k.hash(x, t).reshape(shape)


def prg(seed: bytes, nbytes: int) -> bytes:
    """``nbytes`` pseudorandom bytes from a 16-byte seed (AES-128-CTR from counter 0)."""
    if len(seed) != BLOCK_BYTES:
        raise InvalidInputError(f"a PRG seed is {BLOCK_BYTES} bytes, got {len(seed)}")
    enc = Cipher(algorithms.AES(bytes(seed)), modes.CTR(bytes(BLOCK_BYTES))).encryptor()
    return enc.update(bytes(nbytes))
