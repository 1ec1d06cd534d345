"""The wire codec: msgpack with typed extensions and strict validation.

Every message that crosses a party boundary is encoded by :class:`WireCodec`.
Nothing is pickled: a frame can only ever decode to plain data (``None``,
``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list``, ``dict`` with
``str`` keys) and four extension types:

=====  ===============  ==========================================================
code   type             payload
=====  ===============  ==========================================================
1      big ``int``      sign byte (0 = positive, 1 = negative) + big-endian magnitude
                        (minimal, for ints outside msgpack's 64-bit range)
2      ``ndarray``      msgpack ``[dtype, shape, raw little-endian bytes]``; dtype from
                        :data:`ALLOWED_DTYPES` (numeric and bool only, never object)
3      ``CipherArray``  msgpack ``[fingerprint, shape, blob]``: the key's 16-byte
                        fingerprint and the ciphertexts as fixed-width big-endian
                        integers of ``ceil(2 * bits / 8)`` bytes each.  No scale and no
                        precision bound: both come from the receiver's message
                        declaration (:mod:`smc_hmm.messages`), never from the sender's
                        private values; a decoded array has scale 0 and the key's
                        full plaintext bound until a declaration attaches them
4      ``PublicKey``    big-endian bytes of n; decodes to a new ``PublicKey(n)``
=====  ===============  ==========================================================

Decoding validates everything before anything is used: the frame size
(:class:`~smc_hmm.errors.FrameTooLargeError`), the container nesting depth,
that dict keys are strings, that array shapes agree with byte lengths and
stay under an element limit, and that every ciphertext ``c`` of a
``CipherArray`` satisfies ``0 < c < n^2`` and ``gcd(c, n) = 1`` for the key
*registered with this codec* under the frame's fingerprint (an unknown
fingerprint is refused).  The decoded ``CipherArray`` carries that registered
key object, so the receiving party's meter counts the work done on it.

Any malformed input raises :class:`~smc_hmm.errors.WireError` (or a subclass);
no other exception type escapes :meth:`WireCodec.decode`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgpack
import numpy as np
from gmpy2 import mpz

from smc_hmm.crypto.cipherarray import CipherArray
from smc_hmm.crypto.keys import PublicKey, all_units
from smc_hmm.errors import (
    FrameTooLargeError,
    InvalidCiphertextFrameError,
    WireError,
)

__all__ = [
    "ALLOWED_DTYPES",
    "DEFAULT_MAX_FRAME_BYTES",
    "EXT_BIGINT",
    "EXT_CIPHERARRAY",
    "EXT_NDARRAY",
    "EXT_PUBLICKEY",
    "InvalidCiphertextFrameError",
    "WireCodec",
]

DEFAULT_MAX_FRAME_BYTES = 256 * 2**20

EXT_BIGINT = 1
EXT_NDARRAY = 2
EXT_CIPHERARRAY = 3
EXT_PUBLICKEY = 4

#: numpy dtypes that may cross the wire (little-endian, numeric or bool; never object).
ALLOWED_DTYPES = frozenset(
    {
        "|b1",
        "|i1",
        "|u1",
        "<i2",
        "<u2",
        "<i4",
        "<u4",
        "<i8",
        "<u8",
        "<f2",
        "<f4",
        "<f8",
        "<c8",
        "<c16",
    }
)

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1
_MAX_NDIM = 32
_LEAF_TYPES = frozenset({bool, int, float, str, bytes, np.ndarray, CipherArray, PublicKey})


def _magnitude_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def _positive_from_bytes(data: bytes, what: str, *, allow_zero: bool = False) -> int:
    if not isinstance(data, bytes):
        raise WireError(f"{what}: expected bytes")
    if data[:1] == b"\x00":
        raise WireError(f"{what}: non-minimal big-endian encoding")
    value = int.from_bytes(data, "big")
    if value == 0 and not allow_zero:
        raise WireError(f"{what}: must be positive")
    return value


def _unpack_bounded(data: bytes, ext_hook=None):
    """msgpack ``data`` with str keys, lists and no container or string longer than
    ``data`` itself could hold (a map's entries take two objects each); extensions only
    with an ``ext_hook`` to decode them (an extension's own fields may hold none)."""
    size = len(data)
    limits = {
        "max_str_len": size,
        "max_bin_len": size,
        "max_array_len": size,
        "max_map_len": size // 2,
        "max_ext_len": size if ext_hook is not None else 0,
    }
    if ext_hook is not None:
        limits["ext_hook"] = ext_hook
    return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True, **limits)


def _check_shape(shape, max_elements: int) -> tuple[tuple[int, ...], int]:
    """A validated shape tuple and its element count."""
    if not isinstance(shape, list) or len(shape) > _MAX_NDIM:
        raise WireError(f"shape must be a list of at most {_MAX_NDIM} dimensions")
    count = 1
    for dim in shape:
        if type(dim) is not int or dim < 0 or dim > max_elements:
            raise WireError(f"invalid dimension {dim!r} in shape")
        count *= dim
    if count > max_elements:
        raise WireError(f"array of {count} elements exceeds the limit of {max_elements}")
    return tuple(shape), count


class WireCodec:
    """Encode and decode messages; ``keys`` are the public keys whose ciphertexts
    this party accepts (by fingerprint).

    ``max_frame_bytes`` bounds both encoded and decoded frames; ``max_depth``
    bounds container nesting; ``max_elements`` bounds the element count of any
    one ndarray or CipherArray; ``max_int_bytes`` bounds the magnitude of big
    integers and key moduli.
    """

    def __init__(
        self,
        keys: Mapping[bytes, PublicKey] | Iterable[PublicKey] = (),
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        max_depth: int = 64,
        max_elements: int = 2**28,
        max_int_bytes: int = 8192,
    ):
        if not isinstance(max_frame_bytes, int) or max_frame_bytes < 1:
            raise WireError("max_frame_bytes must be a positive integer")
        self.max_frame_bytes = max_frame_bytes
        self.max_depth = int(max_depth)
        self.max_elements = int(max_elements)
        self.max_int_bytes = int(max_int_bytes)
        self._keys: dict[bytes, PublicKey] = {}
        values = keys.values() if isinstance(keys, Mapping) else keys
        for key in values:
            self.add_key(key)

    # -- keys -----------------------------------------------------------------

    def add_key(self, public_key: PublicKey) -> None:
        """Accept ciphertexts under ``public_key`` (decoded arrays carry this object)."""
        if not isinstance(public_key, PublicKey):
            raise WireError("add_key needs an smc_hmm PublicKey")
        self._keys[public_key.fingerprint] = public_key

    @property
    def keys(self) -> dict[bytes, PublicKey]:
        return dict(self._keys)

    # -- encoding -------------------------------------------------------------

    def encode(self, obj) -> bytes:
        """Encode ``obj``; raises WireError for unsupported types or non-str dict keys
        and FrameTooLargeError if the frame would exceed ``max_frame_bytes``."""
        self._check_encodable(obj)
        try:
            data = msgpack.packb(obj, default=self._default, use_bin_type=True)
        except WireError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            raise WireError(f"cannot encode: {exc}") from exc
        if len(data) > self.max_frame_bytes:
            raise FrameTooLargeError(
                f"encoded frame of {len(data)} bytes exceeds the limit of {self.max_frame_bytes}"
            )
        return data

    def _check_encodable(self, obj) -> None:
        """Walk containers: dict keys must be str, nesting bounded (no recursion)."""
        stack = [(obj, 1)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, dict):
                if depth > self.max_depth:
                    raise WireError(f"nesting deeper than {self.max_depth}")
                for key, value in item.items():
                    if type(key) is not str:
                        raise WireError(f"dict keys must be str, got {type(key).__name__}")
                    if isinstance(value, dict | list | tuple):
                        stack.append((value, depth + 1))
            elif isinstance(item, list | tuple):
                if depth > self.max_depth:
                    raise WireError(f"nesting deeper than {self.max_depth}")
                for value in item:
                    if isinstance(value, dict | list | tuple):
                        stack.append((value, depth + 1))

    def _default(self, obj):
        if isinstance(obj, bool | np.bool_):
            return bool(obj)
        if isinstance(obj, int | np.integer | mpz):
            value = int(obj)
            if _INT64_MIN <= value <= _UINT64_MAX:
                return value
            magnitude = _magnitude_bytes(abs(value))
            if len(magnitude) > self.max_int_bytes:
                raise WireError(f"integer of {len(magnitude)} bytes exceeds max_int_bytes")
            return msgpack.ExtType(EXT_BIGINT, (b"\x01" if value < 0 else b"\x00") + magnitude)
        if isinstance(obj, np.floating) and obj.dtype.itemsize <= 8:
            return float(obj)
        if isinstance(obj, np.ndarray):
            return msgpack.ExtType(EXT_NDARRAY, self._encode_ndarray(obj))
        if isinstance(obj, CipherArray):
            return msgpack.ExtType(EXT_CIPHERARRAY, self._encode_cipherarray(obj))
        if isinstance(obj, PublicKey):
            return msgpack.ExtType(EXT_PUBLICKEY, _magnitude_bytes(obj.n))
        raise WireError(f"cannot encode objects of type {type(obj).__name__}")

    def _encode_ndarray(self, arr: np.ndarray) -> bytes:
        if isinstance(arr, np.ma.MaskedArray):
            raise WireError("masked arrays cannot be sent (the mask would be lost)")
        if arr.dtype.kind not in "biufc" or arr.dtype.fields is not None:
            raise WireError(f"ndarray dtype {arr.dtype} is not allowed on the wire")
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        dtype = np.dtype(dtype.str.replace("=", "<"))
        if dtype.str not in ALLOWED_DTYPES:
            raise WireError(f"ndarray dtype {arr.dtype} is not allowed on the wire")
        if arr.size > self.max_elements:
            raise WireError(f"ndarray of {arr.size} elements exceeds the limit")
        raw = np.ascontiguousarray(arr, dtype=dtype).tobytes()
        return msgpack.packb([dtype.str, list(arr.shape), raw], use_bin_type=True)

    def _encode_cipherarray(self, ca: CipherArray) -> bytes:
        key = ca.public_key
        width = (2 * key.bits + 7) // 8
        flat = ca.data.reshape(-1)
        if flat.size > self.max_elements:
            raise WireError(f"CipherArray of {flat.size} elements exceeds the limit")
        try:
            blob = b"".join(mpz(c).to_bytes(width, "big") for c in flat)
        except (OverflowError, TypeError, ValueError) as exc:
            raise WireError(f"CipherArray holds a value that is not a ciphertext: {exc}") from exc
        return msgpack.packb([key.fingerprint, list(ca.shape), blob], use_bin_type=True)

    # -- decoding -------------------------------------------------------------

    def decode(self, data: bytes):
        """Decode and validate one frame; raises only WireError (or subclasses)."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise WireError(f"expected bytes, got {type(data).__name__}")
        size = len(data)
        if size > self.max_frame_bytes:
            raise FrameTooLargeError(
                f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}"
            )
        if size == 0:
            raise WireError("empty frame")
        try:
            obj = _unpack_bounded(bytes(data), ext_hook=self._ext_hook)
            self._check_decoded(obj)
            return obj
        except WireError:
            raise
        except Exception as exc:  # msgpack, numpy and gmpy2 errors: all malformed input
            raise WireError(f"malformed frame: {type(exc).__name__}: {exc}") from exc

    def _check_decoded(self, obj) -> None:
        stack = [(obj, 1)]
        while stack:
            item, depth = stack.pop()
            kind = type(item)
            if kind is dict:
                if depth > self.max_depth:
                    raise WireError(f"nesting deeper than {self.max_depth}")
                for key, value in item.items():
                    if type(key) is not str:
                        raise WireError("dict keys must be str")
                    stack.append((value, depth + 1))
            elif kind is list:
                if depth > self.max_depth:
                    raise WireError(f"nesting deeper than {self.max_depth}")
                stack.extend((value, depth + 1) for value in item)
            elif item is None or kind in _LEAF_TYPES:
                continue
            else:
                raise WireError(f"type {kind.__name__} is not allowed on the wire")

    def _ext_hook(self, code: int, payload: bytes):
        if len(payload) > self.max_frame_bytes:
            raise FrameTooLargeError("extension payload exceeds the frame limit")
        if code == EXT_BIGINT:
            return self._decode_bigint(payload)
        if code == EXT_NDARRAY:
            return self._decode_ndarray(payload)
        if code == EXT_CIPHERARRAY:
            return self._decode_cipherarray(payload)
        if code == EXT_PUBLICKEY:
            return self._decode_public_key(payload)
        raise WireError(f"unknown extension type {code}")

    def _unpack_fields(self, payload: bytes, count: int, what: str) -> list:
        fields = _unpack_bounded(payload)
        if not isinstance(fields, list) or len(fields) != count:
            raise WireError(f"{what}: expected a list of {count} fields")
        return fields

    def _decode_bigint(self, payload: bytes) -> int:
        if len(payload) < 2 or payload[0] not in (0, 1):
            raise WireError("big int: bad sign byte or empty magnitude")
        if len(payload) - 1 > self.max_int_bytes:
            raise WireError("big int exceeds max_int_bytes")
        magnitude = _positive_from_bytes(payload[1:], "big int")
        value = -magnitude if payload[0] == 1 else magnitude
        if _INT64_MIN <= value <= _UINT64_MAX:
            raise WireError("big int: value fits in a native msgpack int (non-canonical)")
        return value

    def _decode_ndarray(self, payload: bytes) -> np.ndarray:
        dtype_str, shape, raw = self._unpack_fields(payload, 3, "ndarray")
        if type(dtype_str) is not str or dtype_str not in ALLOWED_DTYPES:
            raise WireError(f"ndarray dtype {dtype_str!r} is not allowed")
        if type(raw) is not bytes:
            raise WireError("ndarray: data must be bytes")
        shape, count = _check_shape(shape, self.max_elements)
        dtype = np.dtype(dtype_str)
        if count * dtype.itemsize != len(raw):
            raise WireError(
                f"ndarray: shape {shape} of {dtype_str} needs {count * dtype.itemsize} bytes, "
                f"got {len(raw)}"
            )
        arr = np.frombuffer(raw, dtype=dtype, count=count).reshape(shape).copy()
        if (
            dtype == np.bool_
            and count
            and not np.isin(np.frombuffer(raw, dtype=np.uint8), (0, 1)).all()
        ):
            raise WireError("ndarray: bool data must be 0 or 1 bytes")
        return arr

    def _decode_cipherarray(self, payload: bytes) -> CipherArray:
        fingerprint, shape, blob = self._unpack_fields(payload, 3, "CipherArray")
        if type(fingerprint) is not bytes or len(fingerprint) != 16:
            raise WireError("CipherArray: fingerprint must be 16 bytes")
        key = self._keys.get(fingerprint)
        if key is None:
            raise WireError(
                f"CipherArray under unknown key {fingerprint[:4].hex()}: register it with add_key"
            )
        if type(blob) is not bytes:
            raise WireError("CipherArray: ciphertexts must be bytes")
        shape, count = _check_shape(shape, self.max_elements)
        width = (2 * key.bits + 7) // 8
        if count * width != len(blob):
            raise WireError(
                f"CipherArray: shape {shape} needs {count * width} bytes of ciphertexts, "
                f"got {len(blob)}"
            )
        from_bytes = mpz.from_bytes
        cts = [from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]
        n, n2 = key.n_mpz, key.nsquare_mpz
        for c in cts:
            if not 0 < c < n2:
                raise InvalidCiphertextFrameError("ciphertext outside (0, n^2)")
        if not all_units(cts, n):
            raise InvalidCiphertextFrameError("ciphertext not coprime to n")
        data = np.empty(count, dtype=object)
        for i, c in enumerate(cts):
            data[i] = c
        return CipherArray(key, data.reshape(shape))

    def _decode_public_key(self, payload: bytes) -> PublicKey:
        if len(payload) > self.max_int_bytes:
            raise WireError("public key modulus exceeds max_int_bytes")
        n = _positive_from_bytes(payload, "public key")
        if n < 3 or n % 2 == 0:
            raise WireError("public key modulus must be an odd integer > 2")
        return PublicKey(n)

    def __repr__(self) -> str:
        return f"<WireCodec keys={len(self._keys)} max_frame_bytes={self.max_frame_bytes}>"
