"""Correlated OT extension for the evaluator's garbled-circuit input labels.

Hand-written: no maintained Python library offers OT extension, so the three layers
below follow their papers directly and every message is plain ``bytes`` (the caller sends
them over any transport and counts them in its ledger; this module counts nothing).

* **Base OT** -- Chou and Orlandi, "The simplest protocol for oblivious transfer"
  (LATINCRYPT 2015), 128 of them with one sender point A = aG.  The receiver of choice c
  sends B = bG (+ A if c = 1) and keys on H(bA); the sender keys on H(aB) and
  H(a(B - A)).  PyNaCl exposes no ristretto255, so the group is the prime-order subgroup
  of Ed25519 through libsodium (``nacl.bindings``): every received point passes
  ``crypto_core_ed25519_is_valid_point``, which rejects non-canonical encodings, points
  off the curve, small-order points and points outside the prime-order subgroup, and a
  failure raises :class:`~smc_hmm.errors.ProtocolError`.  Scalars are 64 random bytes
  reduced mod the group order; H is BLAKE2b-128 over a domain string, A, B_i, the index i
  and the shared point, so that keys differ per index.  Caveat: simplest OT's proofs of
  composable security have known gaps (Canetti, Sarkar and Wang, PKC 2020, call it "not
  known to suffice for OTE"); it is used here, as in most deployed OT extension, for its
  speed, with the random-oracle/CDH argument of its paper.
* **Extension** -- Ishai, Kilian, Nissim and Petrank, "Extending oblivious transfers
  efficiently" (CRYPTO 2003), in correlated form with kappa = 128 columns.  The
  extension *sender* is the garbler: it holds Delta (lsb 1, the point-and-permute bit)
  and plays the base-OT receiver with Delta's 128 bits as its choices.  The extension
  *receiver* is the evaluator with choice bits r.  Output: the sender gets Q_j, the
  receiver T_j = Q_j ^ r_j Delta (the garbler's labels of the evaluator's input j are
  Q_j and Q_j ^ Delta; the evaluator holds the active one).  Each column's PRG is
  AES-128-CTR keyed by its base-OT key, and every extension reads the bytes after the
  previous one's, so one base setup serves any number of :meth:`extend` calls.
* **Consistency check** -- Keller, Orsini and Scholl, "Actively secure OT extension
  with optimal overhead" (CRYPTO 2015).  m OTs run as m' = m + kappa + sigma (sigma = 40)
  rounded up to a multiple of 128; the extra rows take random choices and are discarded.
  After u, the sender sends a random seed expanding to chi_1..chi_m'; the receiver
  answers x = sum of chi_j over r'_j = 1 and t = sum chi_j T_j in GF(2^128), and the
  sender checks sum chi_j Q_j == t ^ x Delta.

Adversary model and what each party learns.  The sender (garbler) learns nothing of the
choice bits, whatever it sends: each u column is masked by the PRG stream of the base-OT
key it did not receive (base-OT sender security, CDH in the random-oracle model), t
follows from Q and x, and x is masked by the kappa + sigma random padding choices (their
chi_j span GF(2^128) except with probability about 2^-sigma).  What a malicious sender
does with its own outputs (base-OT choices other than its Delta, labels that do not
follow Delta: a selective-failure attack) is the garbled-circuit layer's concern
(``docs/garbled.md``).  The receiver (evaluator) learns one label of each pair, T_j, and
nothing of Delta from an honest run; the base OTs hide Delta's bits perfectly (B is
uniform for either choice).  A malicious receiver that uses different choice vectors in
different columns is caught only as far as KOS's bound says: its best strategy is to
guess the bits of Delta in the columns where it cheats, each guessed bit halving its
chance of passing, and a wrong guess makes :meth:`OtExtSender.extend_check` raise
:class:`~smc_hmm.errors.OtConsistencyError` (the session aborts and the sender object
refuses every later call, so a failed guess is never retried).  Learning c bits thus
succeeds with probability 2^-c, and the bits it does not guess still protect the sender:
the bound leaves kappa - c bits of Delta's entropy (127 - c here, since Delta's lsb is
public) up to a statistical error of about 2^-sigma = 2^-40 from the random combination
chi.  A cheat in a column where Delta's bit is 0 passes and changes nothing: the sender
ignores u there (the guess is what the receiver learns).
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from nacl import bindings as _na

from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import InvalidInputError, OtConsistencyError, ProtocolError
from smc_hmm.gc.hashing import BLOCK_BYTES, as_blocks, prg
from smc_hmm.gc.native import gc_kernel

__all__ = [
    "BASE_POINT_BYTES",
    "CHALLENGE_BYTES",
    "KAPPA",
    "PROOF_BYTES",
    "SIGMA",
    "OtExtReceiver",
    "OtExtSender",
    "base_receive",
    "base_sender_keys",
    "base_sender_point",
    "extended_count",
    "gf128_inner",
    "gf128_mul",
    "u_bytes",
]

#: Columns of the extension (base OTs), the computational security parameter.
KAPPA = 128
#: Statistical security parameter of the KOS check (extra random OTs beyond kappa).
SIGMA = 40
#: Bytes of an encoded Ed25519 point.
BASE_POINT_BYTES = 32
#: Bytes of the KOS challenge seed.
CHALLENGE_BYTES = 16
#: Bytes of the KOS proof x || t.
PROOF_BYTES = 32

_DOMAIN = b"smc_hmm/gc/ot base-OT key v1"
_GF_MODULUS_LOW = 0x87  # x^128 = x^7 + x^2 + x + 1
_MASK128 = (1 << 128) - 1
#: rows from which :func:`gf128_inner` scatters by 16-bit windows (8 passes over the rows,
#: into tables of 65,536 entries) rather than bytes (16 passes, tables of 256)
_WIDE_WINDOWS_FROM = 1 << 18
#: uint64 words a pass of the 8x8 bit transposition works on (256 KiB: stays in cache)
_TWIDDLE_WORDS = 1 << 15
#: the three steps of an 8x8 bit-matrix transposition in a 64-bit word (bit 8r + i to
#: bit 8i + r; Warren, "Hacker's Delight", section 7-3): shift and the bits swapped
_TWIDDLE = tuple(
    (np.uint64(s), np.uint64(m))
    for s, m in ((7, 0x00AA00AA00AA00AA), (14, 0x0000CCCC0000CCCC), (28, 0x00000000F0F0F0F0))
)


# -- GF(2^128) ----------------------------------------------------------------------------


def _gf128_reduce(v: int) -> int:
    """``v`` (a polynomial of degree < 256) mod x^128 + x^7 + x^2 + x + 1."""
    while v >> 128:
        hi = v >> 128
        v = (v & _MASK128) ^ hi ^ (hi << 1) ^ (hi << 2) ^ (hi << 7)
    return v


def gf128_mul(a: int, b: int) -> int:
    """The product of two GF(2^128) elements (bit i = the coefficient of x^i)."""
    if not (0 <= a <= _MASK128 and 0 <= b <= _MASK128):
        raise InvalidInputError("GF(2^128) elements are integers in [0, 2^128)")
    acc = 0
    while b:
        low = b & -b
        acc ^= a << (low.bit_length() - 1)
        b ^= low
    return _gf128_reduce(acc)


def _block_int(block: np.ndarray) -> int:
    return int(block[0]) | int(block[1]) << 64


def gf128_inner(chi: np.ndarray, rows: np.ndarray) -> int:
    """sum_j chi_j * rows_j in GF(2^128) over ``(n, 2)`` block arrays.

    With Y_b = XOR of chi_j over the rows whose bit b is set, the sum is
    reduce(XOR_b Y_b << b).  The Y_b come from scatter-XORs of chi into a table by the
    value of a w-bit window p of the rows (w = 8, or 16 for many rows: fewer passes over
    them, larger tables); Y_{wp+i} is then the XOR of the table entries whose index has
    bit i set."""
    chi = np.ascontiguousarray(chi, dtype="<u8")
    rows = np.ascontiguousarray(rows, dtype="<u8")
    if chi.ndim != 2 or chi.shape[1:] != (2,) or rows.shape != chi.shape:
        raise InvalidInputError(
            f"gf128_inner needs two (n, 2) arrays, got {chi.shape}, {rows.shape}"
        )
    if not len(rows):
        return 0
    k = gc_kernel()
    if k is not None:  # carry-less multiplication in C (smc_hmm.gc.native)
        return k.gf128_inner(chi, rows)
    width = 16 if len(rows) >= _WIDE_WINDOWS_FROM else 8  # bits a window
    raw = rows.view(f"<u{width // 8}")
    acc = 0
    for p in range(128 // width):
        table = np.zeros((1 << width, 2), np.uint64)
        np.bitwise_xor.at(table, raw[:, p], chi)
        for i in range(width):  # the entries whose index has bit i set: a strided view
            ones = table.reshape(-1, 2, 1 << i, 2)[:, 1]
            y = np.bitwise_xor.reduce(ones, axis=(0, 1))
            acc ^= _block_int(y) << (width * p + i)
    return _gf128_reduce(acc)


# -- base OT (Chou-Orlandi over Ed25519's prime-order subgroup) ---------------------------


def _scalar(rng: Rng) -> bytes:
    """A uniform nonzero scalar mod the group order (64 random bytes, reduced)."""
    while True:
        s = _na.crypto_core_ed25519_scalar_reduce(rng.randbits(512).to_bytes(64, "little"))
        if any(s):
            return s


def _check_point(point: bytes, what: str) -> None:
    if not _na.crypto_core_ed25519_is_valid_point(point):
        raise ProtocolError(f"{what} is not a valid point of Ed25519's prime-order subgroup")


def _points(raw: bytes, count: int | None, what: str) -> list[bytes]:
    """Split ``raw`` into validated 32-byte points (``count`` of them when given)."""
    raw = bytes(raw)
    if (
        len(raw) % BASE_POINT_BYTES
        or not raw
        or (count is not None and len(raw) != count * BASE_POINT_BYTES)
    ):
        want = "a multiple of 32" if count is None else str(count * BASE_POINT_BYTES)
        raise ProtocolError(f"{what}: expected {want} bytes of points, got {len(raw)}")
    out = [raw[i : i + BASE_POINT_BYTES] for i in range(0, len(raw), BASE_POINT_BYTES)]
    for i, point in enumerate(out):
        _check_point(point, f"{what} {i}")
    return out


def _key(a_point: bytes, b_point: bytes, index: int, shared: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=BLOCK_BYTES)
    for part in (_DOMAIN, a_point, b_point, index.to_bytes(4, "little"), shared):
        h.update(part)
    return h.digest()


def base_sender_point(rng: Rng) -> tuple[bytes, bytes]:
    """The base-OT sender's secret scalar a and its public point A = aG (sent)."""
    a = _scalar(rng)
    return a, _na.crypto_scalarmult_ed25519_base_noclamp(a)


def base_receive(sender_point: bytes, choices, rng: Rng) -> tuple[bytes, list[bytes]]:
    """The base-OT receiver: the points B_i (sent, 32 bytes each) and its keys k_i."""
    (a_point,) = _points(sender_point, 1, "base-OT sender point")
    bits = [int(c) for c in choices]
    if not bits or any(c not in (0, 1) for c in bits):
        raise InvalidInputError("base-OT choices are a non-empty sequence of 0/1")
    points, keys = [], []
    for i, c in enumerate(bits):
        b = _scalar(rng)
        point = _na.crypto_scalarmult_ed25519_base_noclamp(b)
        if c:
            point = _na.crypto_core_ed25519_add(point, a_point)
        points.append(point)
        keys.append(_key(a_point, point, i, _na.crypto_scalarmult_ed25519_noclamp(b, a_point)))
    return b"".join(points), keys


def base_sender_keys(
    a: bytes, a_point: bytes, points: bytes, count: int | None = None
) -> tuple[list[bytes], list[bytes]]:
    """The base-OT sender's two keys per index, k_i^0 = H(aB_i), k_i^1 = H(a(B_i - A))."""
    k0, k1 = [], []
    for i, point in enumerate(_points(points, count, "base-OT receiver point")):
        if point == a_point:  # B_i - A would be the identity (honestly: probability 2^-252)
            raise ProtocolError(f"base-OT receiver point {i} equals the sender's point")
        other = _na.crypto_core_ed25519_sub(point, a_point)
        k0.append(_key(a_point, point, i, _na.crypto_scalarmult_ed25519_noclamp(a, point)))
        k1.append(_key(a_point, point, i, _na.crypto_scalarmult_ed25519_noclamp(a, other)))
    return k0, k1


# -- the extension's matrices --------------------------------------------------------------


def extended_count(m: int) -> int:
    """m' = m + kappa + sigma rounded up to a multiple of 128: the OTs actually run."""
    return -(-(m + KAPPA + SIGMA) // 128) * 128


def _check_count(m) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise InvalidInputError(f"an extension needs a count m >= 1, got {m!r}")
    return int(m)


def u_bytes(m: int) -> int:
    """The public size of the receiver's message u for m OTs (kappa columns of m' bits)."""
    return KAPPA * extended_count(_check_count(m)) // 8


def _stream(seed: bytes, offset: int, nbytes: int) -> np.ndarray:
    """Bytes ``offset .. offset + nbytes`` of ``prg(seed, ...)`` (offset a multiple of 16)."""
    counter = (offset // BLOCK_BYTES).to_bytes(BLOCK_BYTES, "big")
    enc = Cipher(algorithms.AES(seed), modes.CTR(counter)).encryptor()
    return np.frombuffer(enc.update(bytes(nbytes)), np.uint8)


def _transpose(columns: np.ndarray) -> np.ndarray:
    """The ``(128, m'/8)`` column bit matrix as m' rows of 128 bits, ``(m', 2)`` blocks:
    bit k of row j (as a little-endian 128-bit integer) is bit j of column k."""
    k = gc_kernel()
    if k is not None:
        return k.transpose(columns)
    return _transpose_numpy(columns)


def _transpose_numpy(columns: np.ndarray) -> np.ndarray:
    """:func:`_transpose` in numpy: the bytes of 8 columns at one offset as a 64-bit word,
    each word's 8x8 bit matrix transposed, then the bytes moved to their rows."""
    nbytes = columns.shape[1]
    words = np.ascontiguousarray(columns.reshape(KAPPA // 8, 8, nbytes).transpose(0, 2, 1))
    flat = words.view("<u8").reshape(-1)
    spare = np.empty(min(_TWIDDLE_WORDS, flat.size), np.uint64)
    for start in range(0, flat.size, _TWIDDLE_WORDS):
        x = flat[start : start + _TWIDDLE_WORDS]
        t = spare[: x.size]
        for shift, swap in _TWIDDLE:  # t = (x ^ x >> s) & m; x ^= t ^ t << s, in place
            np.right_shift(x, shift, out=t)
            t ^= x
            t &= swap
            x ^= t
            t <<= shift
            x ^= t
    rows = words.reshape(KAPPA // 8, 8 * nbytes).T  # row j: byte g of word (g, j // 8)
    return np.ascontiguousarray(rows).view("<u8")


def _challenge_blocks(seed: bytes, count: int) -> np.ndarray:
    return as_blocks(prg(seed, BLOCK_BYTES * count))


# -- the two parties -------------------------------------------------------------------------


class OtExtSender:
    """The garbler: base-OT receiver on Delta's bits, then Q for each extension.

    Steps: :meth:`base_choose` once, then :meth:`extend_receive` and :meth:`extend_check`
    per extension.  A peer's malformed message or a failed check aborts the object."""

    def __init__(self, delta: np.ndarray, rng: Rng):
        d = np.asarray(delta)
        if d.shape != (2,) or d.dtype.kind not in "ui":
            raise InvalidInputError(f"Delta is one (2,) uint64 block, got {d.dtype} {d.shape}")
        d = d.astype(np.uint64)
        if not int(d[0]) & 1:
            raise InvalidInputError("Delta's lsb (bit 0 of lo) must be 1")
        self._delta = d
        self._delta_int = _block_int(d)
        self._bits = [(self._delta_int >> k) & 1 for k in range(KAPPA)]
        self._rng = rng
        self._state = "new"
        self._keys: list[bytes] = []
        self._offset = 0
        self._m = 0
        self._q: np.ndarray | None = None
        self._chi_seed = b""

    @property
    def delta(self) -> np.ndarray:
        """A copy of Delta."""
        return self._delta.copy()

    def _expect(self, state: str, step: str) -> None:
        if self._state != state:
            raise ProtocolError(f"OT extension sender: {step} out of order ({self._state})")

    def _abort(self) -> None:
        self._state = "aborted"
        self._q = None

    def base_choose(self, sender_point: bytes) -> bytes:
        """Base-OT receiver step on A: returns the 128 points B_i (4096 bytes)."""
        self._expect("new", "base_choose")
        try:
            points, self._keys = base_receive(sender_point, self._bits, self._rng)
        except ProtocolError:
            self._abort()
            raise
        self._state = "ready"
        return points

    def extend_receive(self, m: int, u: bytes) -> bytes:
        """Take the receiver's u for m OTs; returns the 16-byte KOS challenge seed."""
        m = _check_count(m)
        self._expect("ready", "extend_receive")
        if len(u) != u_bytes(m):
            self._abort()
            raise ProtocolError(f"u for {m} OTs is {u_bytes(m)} bytes, got {len(u)}")
        nbytes = extended_count(m) // 8
        cols = np.frombuffer(bytes(u), np.uint8).reshape(KAPPA, nbytes)
        q = np.empty_like(cols)
        for k in range(KAPPA):
            q[k] = _stream(self._keys[k], self._offset, nbytes)
            if self._bits[k]:
                q[k] ^= cols[k]
        self._offset += nbytes
        self._q = _transpose(q)
        self._m = m
        self._chi_seed = self._rng.randbits(8 * CHALLENGE_BYTES).to_bytes(CHALLENGE_BYTES, "little")
        self._state = "challenged"
        return self._chi_seed

    def extend_check(self, proof: bytes) -> np.ndarray:
        """Check the proof x || t; returns Q ``(m, 2)`` or raises OtConsistencyError."""
        self._expect("challenged", "extend_check")
        if len(proof) != PROOF_BYTES:
            self._abort()
            raise ProtocolError(f"a KOS proof is {PROOF_BYTES} bytes, got {len(proof)}")
        q_all = self._q
        chi = _challenge_blocks(self._chi_seed, len(q_all))
        x = int.from_bytes(proof[:16], "little")
        t = int.from_bytes(proof[16:], "little")
        expected = t ^ gf128_mul(x, self._delta_int)
        got = gf128_inner(chi, q_all)
        if not hmac.compare_digest(got.to_bytes(16, "little"), expected.to_bytes(16, "little")):
            self._abort()
            raise OtConsistencyError("the OT extension receiver failed the KOS check")
        self._q = None
        self._state = "ready"
        return q_all[: self._m].copy()


class OtExtReceiver:
    """The evaluator: base-OT sender, then T for each extension's choice bits.

    Steps: :meth:`base_start`, :meth:`base_finish` once, then :meth:`extend` and
    :meth:`extend_prove` per extension; :meth:`labels` after each proof."""

    def __init__(self, rng: Rng):
        self._rng = rng
        self._state = "new"
        self._a = b""
        self._a_point = b""
        self._k0: list[bytes] = []
        self._k1: list[bytes] = []
        self._offset = 0
        self._m = 0
        self._choices: np.ndarray | None = None
        self._t: np.ndarray | None = None

    def _expect(self, state: str, step: str) -> None:
        if self._state != state:
            raise ProtocolError(f"OT extension receiver: {step} out of order ({self._state})")

    def _abort(self) -> None:
        self._state = "aborted"
        self._t = self._choices = None

    def base_start(self) -> bytes:
        """Base-OT sender's point A (32 bytes)."""
        self._expect("new", "base_start")
        self._a, self._a_point = base_sender_point(self._rng)
        self._state = "started"
        return self._a_point

    def base_finish(self, points: bytes) -> None:
        """Take the sender's 128 points B_i: both keys of every column."""
        self._expect("started", "base_finish")
        try:
            self._k0, self._k1 = base_sender_keys(self._a, self._a_point, points, KAPPA)
        except ProtocolError:
            self._abort()
            raise
        self._a = b""
        self._state = "ready"

    def extend(self, choices: np.ndarray) -> bytes:
        """Run an extension on ``choices`` (1-D, 0/1, length m >= 1); returns u."""
        self._expect("ready", "extend")
        r = np.asarray(choices)
        if r.ndim != 1 or not r.size or r.dtype.kind not in "bui":
            raise InvalidInputError("choices are a non-empty 1-D array of 0/1")
        r = r.astype(np.uint8)
        if np.any(r > 1):
            raise InvalidInputError("choices must be 0 or 1")
        m = r.size
        total = extended_count(m)
        pad = self._rng.randbits(total - m).to_bytes((total - m + 7) // 8, "little")
        pad_bits = np.unpackbits(np.frombuffer(pad, np.uint8), bitorder="little")[: total - m]
        full = np.concatenate([r, pad_bits])
        packed = np.packbits(full, bitorder="little")
        nbytes = total // 8
        t = np.empty((KAPPA, nbytes), np.uint8)
        u = np.empty_like(t)
        for k in range(KAPPA):
            t[k] = _stream(self._k0[k], self._offset, nbytes)
            u[k] = t[k] ^ _stream(self._k1[k], self._offset, nbytes) ^ packed
        self._offset += nbytes
        self._t = _transpose(t)
        self._choices = full
        self._m = m
        self._state = "extended"
        return u.tobytes()

    def extend_prove(self, challenge: bytes) -> bytes:
        """Answer the KOS challenge seed: the 32-byte proof x || t."""
        self._expect("extended", "extend_prove")
        if len(challenge) != CHALLENGE_BYTES:
            self._abort()
            raise ProtocolError(f"a KOS challenge is {CHALLENGE_BYTES} bytes, got {len(challenge)}")
        t_all = self._t
        chi = _challenge_blocks(bytes(challenge), len(t_all))
        x = _block_int(np.bitwise_xor.reduce(chi[self._choices.astype(bool)], axis=0))
        t = gf128_inner(chi, t_all)
        self._t = t_all[: self._m].copy()
        self._choices = None
        self._state = "ready"
        return x.to_bytes(16, "little") + t.to_bytes(16, "little")

    def labels(self) -> np.ndarray:
        """T ``(m, 2)`` of the last proved extension."""
        if self._state != "ready" or self._t is None:
            raise ProtocolError("OT extension receiver: labels before a proved extension")
        return self._t.copy()
