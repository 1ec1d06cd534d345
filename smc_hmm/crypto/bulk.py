"""Shipping many big integers to worker processes in one piece.

Pickling a list of gmpy2 ``mpz`` values costs one object per value; 820
ciphertexts under a 2048-bit key take ~2.7 ms to pickle and as long again to
unpickle.  :class:`PackedInts` holds the same list but pickles as a single
byte string of fixed-width fields (``gmpy2.pack``): ~1 ms each way.  In the
process that created it, it is just the list -- nothing is packed unless it
actually crosses to another process.

This is local inter-process plumbing for :class:`~smc_hmm.compute.Compute`
(the executor's own pickling); nothing here travels over the protocol network.
"""

from __future__ import annotations

from collections.abc import Iterable

import gmpy2
from gmpy2 import mpz


class PackedInts:
    """Non-negative integers below 2^width that pickle as one packed blob."""

    __slots__ = ("values", "width", "_blob")

    def __init__(self, values: Iterable[mpz], width: int):
        self.values = list(values)
        self.width = int(width)
        self._blob: bytes | None = None

    @classmethod
    def for_modulus(cls, values: Iterable[mpz], modulus: mpz) -> PackedInts:
        """Values reduced modulo ``modulus`` (e.g. ciphertexts mod n^2)."""
        return cls(values, int(modulus).bit_length())

    def __len__(self) -> int:
        return len(self.values)

    def packed(self) -> bytes:
        """The fixed-width blob (computed once, however many workers receive it).

        Call it before handing the object to an executor to pack in this thread
        rather than in the executor's feeder thread.
        """
        if self._blob is None:
            packed = gmpy2.pack(self.values, self.width) if self.values else mpz(0)
            self._blob = packed.to_bytes((packed.bit_length() + 7) // 8, "little")
        return self._blob

    def __reduce__(self):
        return (_unpack, (self.packed(), len(self.values), self.width))


def _unpack(blob: bytes, count: int, width: int) -> PackedInts:
    values = gmpy2.unpack(mpz.from_bytes(blob, "little"), width)[:count] if count else []
    values += [mpz(0)] * (count - len(values))  # unpack drops trailing zero fields
    return PackedInts(values, width)
