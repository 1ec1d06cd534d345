"""WireCodec: round trips (hypothesis), a corpus of nasty frames, and decode fuzzing."""

from __future__ import annotations

import math

import gmpy2
import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis_support import with_fixtures

from smc_hmm.crypto import CipherArray, Meter, PublicKey
from smc_hmm.errors import FrameTooLargeError, InvalidCiphertextError, WireError
from smc_hmm.wire import (
    ALLOWED_DTYPES,
    EXT_BIGINT,
    EXT_CIPHERARRAY,
    EXT_NDARRAY,
    EXT_PUBLICKEY,
    InvalidCiphertextFrameError,
    WireCodec,
)

SETTINGS = with_fixtures(150)


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def ext(code: int, payload) -> bytes:
    return pack(msgpack.ExtType(code, payload if isinstance(payload, bytes) else pack(payload)))


def normalize(obj):
    """What ``obj`` decodes to: tuples become lists."""
    if isinstance(obj, list | tuple):
        return [normalize(x) for x in obj]
    if isinstance(obj, dict):
        return {k: normalize(v) for k, v in obj.items()}
    return obj


def same(a, b) -> bool:
    """Structural equality that treats NaN as equal to NaN and keeps bool != int."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**4096), max_value=2**4096)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.binary(max_size=40)
)
structures = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@pytest.fixture(scope="module")
def key(keypair_512):
    return keypair_512[0]


@pytest.fixture(scope="module")
def codec(key):
    return WireCodec([key])


# -- round trips ---------------------------------------------------------------------


@SETTINGS
@given(obj=structures)
def test_round_trip_nested_structures(codec, obj):
    assert same(codec.decode(codec.encode(obj)), normalize(obj))


@SETTINGS
@given(value=st.integers(min_value=-(2**4096), max_value=2**4096))
def test_round_trip_big_ints(codec, value):
    out = codec.decode(codec.encode(value))
    assert type(out) is int and out == value
    assert codec.decode(codec.encode(gmpy2.mpz(value))) == value


@pytest.mark.parametrize(
    "value", [2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 2**4096, -(2**4096)]
)
def test_int_boundaries(codec, value):
    assert codec.decode(codec.encode(value)) == value


@SETTINGS
@given(
    arr=hnp.arrays(
        dtype=st.sampled_from(sorted(ALLOWED_DTYPES)).map(np.dtype),
        shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
    )
)
def test_round_trip_ndarrays(codec, arr):
    out = codec.decode(codec.encode({"a": arr}))["a"]
    assert isinstance(out, np.ndarray)
    assert out.dtype == arr.dtype and out.shape == arr.shape
    assert out.tobytes() == np.ascontiguousarray(arr).tobytes()
    assert out.flags.writeable


def test_round_trip_non_contiguous_and_big_endian(codec):
    arr = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2].T
    out = codec.decode(codec.encode(arr))
    assert np.array_equal(out, arr)
    big = np.arange(5, dtype=">f8")
    out = codec.decode(codec.encode(big))
    assert out.dtype == np.dtype("<f8") and np.array_equal(out, big)


def test_numpy_scalars_encode_as_python_scalars(codec):
    assert codec.decode(codec.encode([np.int64(-3), np.float32(0.5), np.bool_(True)])) == [
        -3,
        0.5,
        True,
    ]


@SETTINGS
@given(
    values=hnp.arrays(
        np.int64,
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
        elements=st.integers(-(2**40), 2**40),
    ),
    scale=st.integers(0, 64),
)
def test_round_trip_cipherarray(keypair_512, codec, values, scale):
    pk, sk = keypair_512
    ca = CipherArray.encrypt_encoded(pk, values.astype(object), scale)
    out = codec.decode(codec.encode({"x": ca}))["x"]
    assert isinstance(out, CipherArray)
    assert out.public_key is pk
    # scale and bound never travel: they come from the receiver's message declaration
    assert out.shape == ca.shape and out.scale == 0 and out.bound == pk.max_plain
    assert out.ciphertexts() == ca.ciphertexts()
    assert np.array_equal(out.decrypt_ints(sk), values.astype(object))


def test_cipherarray_decodes_to_the_registered_key_view(keypair_512):
    pk, sk = keypair_512
    metered = pk.with_meter(Meter())
    receiver = WireCodec({metered.fingerprint: metered})
    ca = CipherArray.encrypt(pk, [1.5, -2.25], scale=8)
    out = receiver.decode(WireCodec().encode(ca))  # the sender needs no registration
    assert out.public_key is metered
    assert list(out.with_scale(8).decrypt(sk)) == [1.5, -2.25]


def test_round_trip_public_key(codec, key):
    out = codec.decode(codec.encode({"pk": key}))["pk"]
    assert isinstance(out, PublicKey) and out is not key
    assert out.n == key.n and out.fingerprint == key.fingerprint


def test_add_key_accepts_a_new_key(key):
    ca = CipherArray.encrypt(key, [1, 2])
    frame = WireCodec().encode(ca)
    codec = WireCodec()
    with pytest.raises(WireError, match="unknown key"):
        codec.decode(frame)
    codec.add_key(key)
    assert codec.decode(frame).ciphertexts() == ca.ciphertexts()


# -- encoding refuses what cannot be decoded ------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        {1: "int key"},
        {b"k": "bytes key"},
        {"a": {(1, 2): 3}},
        object(),
        {1, 2},
        np.array(["a", "b"]),
        np.array([1, None], dtype=object),
        np.zeros(2, dtype=[("a", "<i4")]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.ma.array([1, 2], mask=[False, True]),
        np.float64(1.0).astype(np.longdouble) if np.dtype(np.longdouble).itemsize > 8 else {2: 2},
    ],
)
def test_encode_rejects_unsupported(codec, obj):
    with pytest.raises(WireError):
        codec.encode(obj)


def test_encode_enforces_frame_limit_and_depth(key):
    small = WireCodec(max_frame_bytes=100)
    with pytest.raises(FrameTooLargeError):
        small.encode(b"x" * 200)
    with pytest.raises(WireError, match="nesting"):
        WireCodec(max_depth=5).encode([[[[[[1]]]]]])


# -- a corpus of nasty frames -----------------------------------------------------------


def ca_payload(key, cts, *, shape=None, fingerprint=None, width=None, extra=()):
    width = width or (2 * key.bits + 7) // 8
    blob = b"".join(int(c).to_bytes(width, "big") for c in cts)
    return ext(
        EXT_CIPHERARRAY,
        [
            key.fingerprint if fingerprint is None else fingerprint,
            *extra,
            [len(cts)] if shape is None else shape,
            blob,
        ],
    )


def valid_frame(key) -> bytes:
    return WireCodec().encode(
        {
            "big": [2**200, -(2**70)],
            "arr": np.arange(6, dtype=np.float32).reshape(2, 3),
            "ca": CipherArray.encrypt(key, [1, 2, 3]),
            "pk": key,
            "s": "text",
            "b": b"\x00\x01",
        }
    )


def test_every_truncation_is_rejected(codec, key):
    frame = valid_frame(key)
    assert isinstance(codec.decode(frame), dict)
    for cut in range(len(frame)):
        with pytest.raises(WireError):
            codec.decode(frame[:cut])


def test_trailing_garbage_is_rejected(codec, key):
    with pytest.raises(WireError):
        codec.decode(valid_frame(key) + b"\x00")


@pytest.mark.parametrize(
    "frame",
    [
        b"\xdd\xff\xff\xff\xff",  # array32 declaring 4 G elements
        b"\xdf\xff\xff\xff\xff",  # map32 declaring 4 G pairs
        b"\xc6\xff\xff\xff\xffabc",  # bin32 declaring 4 GB
        b"\xdb\xff\xff\xff\xffabc",  # str32 declaring 4 GB
        b"\xc9\xff\xff\xff\xff\x02abc",  # ext32 declaring 4 GB
        b"\xc1",  # never-used byte
        b"\xa3\xff\xfe\xfd",  # invalid UTF-8 str
    ],
    ids=["array32", "map32", "bin32", "str32", "ext32", "c1", "utf8"],
)
def test_oversized_declared_lengths_and_bad_bytes(codec, frame):
    with pytest.raises(WireError):
        codec.decode(frame)


def test_frame_size_limit(key):
    codec = WireCodec([key], max_frame_bytes=64)
    with pytest.raises(FrameTooLargeError):
        codec.decode(pack(b"x" * 100))
    assert codec.decode(pack(b"x" * 10)) == b"x" * 10


@pytest.mark.parametrize("bad", [None, "text", 12, [b"x"]])
def test_non_bytes_input(codec, bad):
    with pytest.raises(WireError):
        codec.decode(bad)


def test_empty_frame(codec):
    with pytest.raises(WireError):
        codec.decode(b"")


@pytest.mark.parametrize(
    "frame",
    [
        ext(99, b""),
        ext(0, b"abc"),
        b"\xd6\xff\x00\x00\x00\x00",  # msgpack timestamp (ext -1)
        ext(EXT_NDARRAY, b"\x01\x02"),  # payload is not a field list
        ext(EXT_PUBLICKEY, pack([1, 2])),  # wrong payload kind
        ext(EXT_CIPHERARRAY, pack(["<f8", [1], b"\x00" * 8])),  # ndarray payload, CA type
    ],
    ids=["unknown99", "code0", "timestamp", "nd-garbage", "pk-list", "ca-as-nd"],
)
def test_wrong_extension_types(codec, frame):
    with pytest.raises(WireError):
        codec.decode(frame)


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # empty
        b"\x00",  # no magnitude
        b"\x02" + b"\x01" * 9,  # bad sign byte
        b"\x00\x00" + b"\x01" * 9,  # leading zero (non-canonical)
        b"\x00\x05",  # fits a native int (non-canonical)
        b"\x01\x05",
        b"\x00" + b"\xff" * 9000,  # larger than max_int_bytes
    ],
)
def test_bad_big_ints(codec, payload):
    with pytest.raises(WireError):
        codec.decode(ext(EXT_BIGINT, payload))


@pytest.mark.parametrize(
    "fields",
    [
        ["<f8", [3], b"\x00" * 16],  # shape says 24 bytes
        ["<f8", [2, 2], b"\x00" * 24],
        ["<i4", [], b""],  # 0-d needs 4 bytes
        ["|O", [1], b"\x00" * 8],  # object dtype
        ["<U1", [1], b"\x00" * 4],  # unicode dtype
        ["V8", [1], b"\x00" * 8],  # void
        [">i4", [1], b"\x00" * 4],  # big-endian not in the allow-list
        ["<M8[D]", [1], b"\x00" * 8],  # datetime
        ["<f8", [-1], b""],  # negative dimension
        ["<f8", [1.0], b"\x00" * 8],  # float dimension
        ["<f8", [True], b"\x00" * 8],  # bool dimension
        ["<f8", [0, 2**40], b""],  # absurd dimension
        ["<f8", [1] * 40, b"\x00" * 8],  # too many dimensions
        ["<f8", 3, b"\x00" * 24],  # shape not a list
        [b"<f8", [1], b"\x00" * 8],  # dtype not a str
        ["<f8", [1], "text"],  # data not bytes
        ["|b1", [2], b"\x00\x02"],  # bool byte other than 0/1
        ["<f8", [1]],  # missing field
    ],
)
def test_bad_ndarrays(codec, fields):
    with pytest.raises(WireError):
        codec.decode(ext(EXT_NDARRAY, fields))


def test_ndarray_element_limit(key):
    codec = WireCodec(max_elements=10)
    with pytest.raises(WireError):
        codec.decode(ext(EXT_NDARRAY, ["|u1", [11], b"\x00" * 11]))
    assert codec.decode(ext(EXT_NDARRAY, ["|u1", [10], b"\x00" * 10])).shape == (10,)


def test_cipherarray_payload_helper_is_valid(codec, key):
    c = CipherArray.encrypt(key, [5]).ciphertexts()[0]
    out = codec.decode(ca_payload(key, [c]))
    assert out.ciphertexts() == [c] and out.bound == key.max_plain


@pytest.mark.parametrize(
    "which", ["zero", "n_square", "above_n_square", "multiple_of_p", "multiple_of_n"]
)
def test_invalid_ciphertexts(codec, keypair_512, which):
    pk, sk = keypair_512
    good = CipherArray.encrypt(pk, [1, 2]).ciphertexts()
    n2 = pk.n * pk.n
    bad = {
        "zero": 0,
        "n_square": n2,
        "above_n_square": n2 + 1,
        "multiple_of_p": sk.p * 12345,
        "multiple_of_n": pk.n * 7,
    }[which]
    width = (2 * pk.bits + 7) // 8 + (1 if bad >= 2 ** (8 * ((2 * pk.bits + 7) // 8)) else 0)
    if width != (2 * pk.bits + 7) // 8:
        pytest.skip("value does not fit the fixed width")  # pragma: no cover
    with pytest.raises(InvalidCiphertextFrameError) as info:
        codec.decode(ca_payload(pk, [int(good[0]), bad, int(good[1])]))
    assert isinstance(info.value, WireError) and isinstance(info.value, InvalidCiphertextError)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fingerprint": b"\x00" * 16},  # unknown key
        {"fingerprint": b"\x00" * 15},  # malformed fingerprint
        {"shape": [3]},  # shape/bytes mismatch
        {"shape": [1, 2]},
        {"shape": [-1]},
        {"extra": (0, b"\x01")},  # the old layout with a scale and a bound: refused
        {"width": 129},  # wrong ciphertext width (a 512-bit key needs 128 bytes)
    ],
)
def test_bad_cipherarrays(codec, key, kwargs):
    c = CipherArray.encrypt(key, [5]).ciphertexts()[0]
    with pytest.raises(WireError):
        codec.decode(ca_payload(key, [c], **kwargs))


@pytest.mark.parametrize("payload", [b"", b"\x00\x07", b"\x08", b"\x01", b"\xff" * 9000])
def test_bad_public_keys(codec, payload):
    with pytest.raises(WireError):
        codec.decode(ext(EXT_PUBLICKEY, payload))


def test_deep_nesting(codec):
    depth = codec.max_depth
    ok = b"\x91" * (depth - 1) + b"\xc0"
    codec.decode(ok)
    for frame in (b"\x91" * (depth + 1) + b"\xc0", b"\x91" * 5000 + b"\xc0"):
        with pytest.raises(WireError):
            codec.decode(frame)
    nested_maps = b"\x81\xa1k" * (depth + 1) + b"\xc0"
    with pytest.raises(WireError):
        codec.decode(nested_maps)


@pytest.mark.parametrize(
    "frame",
    [b"\x81\x01\x02", b"\x81\xc4\x01k\x02", b"\x81\xc0\x01", b"\x91\x81\x91\x01\x02"],
    ids=["int-key", "bytes-key", "nil-key", "list-key"],
)
def test_non_str_dict_keys(codec, frame):
    with pytest.raises(WireError):
        codec.decode(frame)


# -- fuzzing ------------------------------------------------------------------------


def decode_or_wire_error(codec, data: bytes) -> str:
    """Decoding either fails with a WireError or yields only wire-legal values.

    Any other exception escapes and fails the calling test.
    """
    try:
        obj = codec.decode(data)
    except WireError:
        return "rejected"
    codec.decode(codec.encode(obj))  # everything decoded is encodable again
    return "round-trip"


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=300))
def test_fuzz_random_bytes(keypair_512, data):
    assert decode_or_wire_error(WireCodec([keypair_512[0]]), data) in ("rejected", "round-trip")


def raw_ext(code: int, payload: bytes) -> bytes:
    """An ext32 frame with any type code, including the reserved negative ones."""
    return (
        b"\xc9" + len(payload).to_bytes(4, "big") + code.to_bytes(1, "big", signed=True) + payload
    )


field_values = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=6)
    | st.binary(max_size=140)
    | st.lists(st.integers(-3, 2**33), max_size=4)
    | st.sampled_from(sorted(ALLOWED_DTYPES) + ["|O", "<U2"])
)


@settings(max_examples=300, deadline=None)
@given(
    code=st.integers(-128, 127) | st.integers(1, 4),
    payload=st.binary(max_size=200) | st.lists(field_values, max_size=6).map(pack),
)
def test_fuzz_random_extension_payloads(keypair_512, code, payload):
    outcome = decode_or_wire_error(WireCodec([keypair_512[0]]), raw_ext(code, payload))
    assert outcome in ("rejected", "round-trip")


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_fuzz_mutated_valid_frames(keypair_512, data):
    pk = keypair_512[0]
    codec = WireCodec([pk])
    frame = bytearray(valid_frame(pk))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = data.draw(st.integers(0, len(frame) - 1)) if frame else 0
        if op == "flip" and frame:
            frame[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set" and frame:
            frame[pos] = data.draw(st.integers(0, 255))
        elif op == "insert":
            frame[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and frame:
            del frame[pos : pos + data.draw(st.integers(1, 8))]
        elif op == "truncate":
            del frame[pos:]
    assert decode_or_wire_error(codec, bytes(frame)) in ("rejected", "round-trip")
