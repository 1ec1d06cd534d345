"""The transcript harness: frames must not depend on private inputs (the metadata rule).

Run a protocol twice with different private inputs of the same public sizes,
record every frame each party receives (the exact bytes off its transport),
and compare the two runs frame by frame after masking what may legitimately
differ: the ciphertext blobs of every CipherArray (their key fingerprint and
shape stay) and every field a message declares as
:class:`~smc_hmm.messages.Revealed`.  Everything else -- tags, order, causal
depths, frame sizes, shapes, scales, bounds, every public field -- must be
byte-identical.  Used by every protocol's tests (``docs/adding-a-protocol.md``).

Given the key pairs of the run (``keys``), the harness also opens every ciphertext sent
under them and checks its plaintext against the bound its message declares
(:func:`assert_within_declared_bounds`); from two runs that differ only in the other
parties' Paillier randomizers, :func:`stale_ciphertexts` finds a ciphertext sent back to
its key holder without fresh randomness.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import contextmanager

import msgpack

from smc_hmm.messages import Ciphertexts, MaskedCiphertexts, Message, OpaqueCiphertexts, Revealed
from smc_hmm.transport.base import Transport
from smc_hmm.wire import EXT_CIPHERARRAY

CIPHERTEXTS = "<ciphertexts>"
#: what :func:`assert_within_declared_bounds` reads for ciphertexts under a key it lacks
CLOSED = "<closed>"
#: The threshold of the statistical tests of what a party sees (masks uniform, two views
#: alike): a mask that fails to hide (a constant, a value showing through) gives p far
#: below it on the tests' samples, and an honest run, whose masks come from the system
#: CSPRNG, misses it once in 10^6 a test, not once in 10^3.
VIEW_P_MIN = 1e-6


class RecordingTransport(Transport):
    """Wraps a transport and keeps every frame received, per sending peer."""

    def __init__(self, inner: Transport, log: dict):
        self.inner = inner
        self.name = inner.name
        self.peers = inner.peers
        self.log = log

    def send_bytes(self, peer: str, frame: bytes) -> None:
        self.inner.send_bytes(peer, frame)

    def recv_bytes(self, peer: str, timeout: float) -> bytes:
        frame = self.inner.recv_bytes(peer, timeout)
        self.log[(self.name, peer)].append(bytes(frame))
        return frame

    def close(self) -> None:
        self.inner.close()


def recorder():
    """(frames, wrap_transport) for :func:`smc_hmm.runtime.simulate`."""
    frames: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    return frames, lambda name, transport: RecordingTransport(transport, frames)


def _mask_ciphertexts(code: int, data: bytes):
    if code == EXT_CIPHERARRAY:
        fingerprint, shape, blob = msgpack.unpackb(data, raw=False)
        return [CIPHERTEXTS, fingerprint, shape, len(blob)]
    return msgpack.ExtType(code, data)


def _mask_revealed(body, message: Message):
    fields = message.fields
    values = body if isinstance(message.body, tuple) else [body]
    masked = []
    for f, v in zip(fields, values):
        if isinstance(f, Revealed):
            v = f"<revealed {f.what}>"
        elif isinstance(f, OpaqueCiphertexts):  # another scheme's ciphertexts: keep the size
            v = [CIPHERTEXTS, f.scheme, len(v) if isinstance(v, bytes) else None]
        masked.append(v)
    return masked if isinstance(message.body, tuple) else masked[0]


def masked_frame(frame: bytes, declarations: dict[str, Message]):
    """The frame with ciphertext blobs and declared revealed fields replaced by placeholders."""
    envelope = msgpack.unpackb(frame, raw=False, ext_hook=_mask_ciphertexts)
    tag = envelope["t"]
    if tag in declarations:  # an undeclared tag carries no revealed field by definition
        envelope["b"] = _mask_revealed(envelope["b"], declarations[tag])
    return envelope


def _has_revealed(declarations: dict[str, Message]) -> bool:
    return any(isinstance(f, Revealed) for m in declarations.values() for f in m.fields)


def assert_same_transcripts(
    run: Callable[[Callable], object],
    inputs: Iterable,
    declarations: Iterable[Message] = (),
    keys: Iterable = (),
) -> dict:
    """Run ``run(inputs_i, wrap_transport)`` for each private input set and compare frames.

    ``run`` must call :func:`smc_hmm.runtime.simulate` with the given
    ``wrap_transport``.  Returns the first run's recorded frames.  Fails with
    the first differing frame (receiver, sender, index and both masked forms), or
    with a ciphertext under one of ``keys`` (key pairs) beyond its declared bound.
    """
    transcripts = []
    for private in inputs:
        frames, wrap = recorder()
        run(private, wrap)
        transcripts.append(dict(frames))
    return compare_transcripts(transcripts, declarations, keys)


def compare_transcripts(
    transcripts: list[dict], declarations: Iterable[Message] = (), keys: Iterable = ()
) -> dict:
    """Compare recorded runs (each :func:`recorder`'s frames) frame by frame, as
    :func:`assert_same_transcripts` does; returns the first run's frames."""
    decl = {m.tag: m for m in declarations}
    keys = list(keys)
    if keys:
        assert_within_declared_bounds(transcripts, decl.values(), keys)
    first = transcripts[0]
    assert first, "nothing was received: the harness saw no frames"
    revealed = _has_revealed(decl)
    for other in transcripts[1:]:
        assert set(other) == set(first), f"links differ: {sorted(first)} vs {sorted(other)}"
        for link, frames in first.items():
            assert len(other[link]) == len(frames), (
                f"{link}: {len(frames)} frames vs {len(other[link])}"
            )
            for i, (a, b) in enumerate(zip(frames, other[link])):
                ma, mb = masked_frame(a, decl), masked_frame(b, decl)
                assert ma == mb, f"{link} frame {i} differs:\n{ma!r}\nvs\n{mb!r}"
                if not revealed:  # a revealed field may change the frame's length
                    assert len(a) == len(b), f"{link} frame {i}: {len(a)} vs {len(b)} bytes"
    return first


def _plaintexts(frame: bytes, declared: dict[str, Message], secret: dict, kind=None):
    """(tag, field, n, signed plaintexts) of every field of ``frame`` that ``kind``
    selects (default :func:`bounded`); the plaintexts are ``CLOSED`` (and n 0) under a
    key not in ``secret``."""

    def under_known_key(code: int, data: bytes):
        if code != EXT_CIPHERARRAY:
            return msgpack.ExtType(code, data)
        fingerprint, _, blob = msgpack.unpackb(data, raw=False)
        if fingerprint not in secret:
            return 0, CLOSED
        pk, sk = secret[fingerprint]
        width = (2 * pk.bits + 7) // 8
        cts = [int.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]
        return int(pk.n), sk.decrypt_ints(cts)

    envelope = msgpack.unpackb(frame, raw=False, ext_hook=under_known_key)
    message = declared.get(envelope["t"])
    if message is None:
        return
    values = envelope["b"] if isinstance(message.body, tuple) else [envelope["b"]]
    for field, value in zip(message.fields, values):
        if (kind or bounded)(field) and isinstance(value, tuple):
            yield (message.tag, field, *value)


def bounded(field) -> bool:
    """A ciphertext field with a bound to check (masked ones are uniform on Z_n)."""
    return isinstance(field, Ciphertexts) and not isinstance(field, MaskedCiphertexts)


def masked(field) -> bool:
    """A ciphertext field masked over the whole plaintext space."""
    return isinstance(field, MaskedCiphertexts)


def assert_within_declared_bounds(
    transcripts: list[dict], declarations: Iterable[Message], keys: Iterable
) -> int:
    """Every ciphertext of the recorded runs under one of ``keys`` (key pairs) decrypts
    to a plaintext within the bound its message declares; returns how many it opened.

    The bounds a role asserts by hand (``CipherArray.with_bound``: a packing's slots, a
    value's range) decide whether a slot or a homomorphic sum can wrap; one asserted
    tighter than the values would silently disable that check.  Keys a party makes
    during the run are not the caller's: their ciphertexts stay closed, but keys that
    open none of the bounded fields sent are a mistake of the caller's and fail."""
    secret = {pk.fingerprint: (pk, sk) for pk, sk in keys}
    declared = {m.tag: m for m in declarations}
    return _within(
        (link, tag, field.bound, plains)
        for link, tag, field, _, plains in _opened(transcripts, declared, secret, bounded)
    )


def masked_residues(transcripts: list[dict], declarations: Iterable[Message], keys: Iterable):
    """r / n for every residue r its key holder decrypts of a :class:`MaskedCiphertexts`
    field (what the defaults claim uniform on Z_n, whatever she encrypted)."""
    secret = {pk.fingerprint: (pk, sk) for pk, sk in keys}
    declared = {m.tag: m for m in declarations}
    return [
        (int(v) % n) / n
        for _, _, _, n, plains in _opened(transcripts, declared, secret, masked)
        if plains is not CLOSED
        for v in plains
    ]


def _opened(transcripts, declared, secret, kind):
    for transcript in transcripts:
        for link, frames in transcript.items():
            for frame in frames:
                for item in _plaintexts(frame, declared, secret, kind):
                    yield (link, *item)


@dataclasses.dataclass
class Sends:
    """What :func:`recording_sends` saw: every message sent (tag -> declaration), and
    (tag, declared bound, ciphertexts) of every bounded field."""

    messages: dict = dataclasses.field(default_factory=dict)
    ciphertexts: list = dataclasses.field(default_factory=list)


@contextmanager
def recording_sends():
    """Records the declarations the runs inside used, whatever their mode (for the
    transcript comparison), and every bounded field they sent (for
    :func:`assert_sends_within_bounds`)."""
    sends, message_out, field_out = Sends(), Message.outgoing, Ciphertexts.outgoing

    def message(self, payload):
        sends.messages[self.tag] = self
        return message_out(self, payload)

    def bounded_field(self, value, tag):
        out = field_out(self, value, tag)
        sends.ciphertexts.append((tag, self.bound, out))
        return out

    Message.outgoing, Ciphertexts.outgoing = message, bounded_field
    try:
        yield sends
    finally:
        Message.outgoing, Ciphertexts.outgoing = message_out, field_out


def assert_sends_within_bounds(sends: Sends, keys: Iterable) -> int:
    """:func:`assert_within_declared_bounds` on the sends :func:`recording_sends` saw."""
    secret = {pk.fingerprint: sk for pk, sk in keys}
    return _within(
        ("sent", tag, bound, _decrypted(ciphertexts, secret))
        for tag, bound, ciphertexts in sends.ciphertexts
    )


def _decrypted(ciphertexts, secret: dict):
    sk = secret.get(ciphertexts.public_key.fingerprint)
    return CLOSED if sk is None else ciphertexts.decrypt_ints(sk).reshape(-1).tolist()


def _within(items) -> int:
    """Each (where, tag, bound, plaintexts or CLOSED) within its bound; how many opened."""
    opened, closed = 0, set()
    for where, tag, bound, plains in items:
        if plains is CLOSED:
            closed.add(tag)
            continue
        worst = max((abs(int(v)) for v in plains), default=0)
        assert worst <= bound, (
            f"{where} {tag}: a plaintext of {worst.bit_length()} bits beyond the declared "
            f"bound of {bound.bit_length()} bits"
        )
        opened += len(plains)
    assert opened or not closed, f"the keys given open none of {sorted(closed)}"
    return opened


def _blobs(frame: bytes, fingerprint: bytes) -> tuple[str, list[bytes]]:
    """(tag, the ciphertext blobs under the key of ``fingerprint`` in order) of a frame."""
    found = []

    def hook(code: int, data: bytes):
        if code == EXT_CIPHERARRAY:
            key, _, blob = msgpack.unpackb(data, raw=False)
            if key == fingerprint:
                found.append(blob)

    return msgpack.unpackb(frame, raw=False, ext_hook=hook)["t"], found


def stale_ciphertexts(first: dict, second: dict, keys: dict) -> tuple[list, int]:
    """Ciphertexts a key holder received twice: ``first`` and ``second`` are the frames of
    two runs in which her randomizers and every other random choice are the same and
    only the other parties' Paillier randomizers differ; ``keys`` maps each key holder to
    her key pair.  A ciphertext she receives under her own key in both runs alike, other
    than a trivial encryption 1 + m n, carries no fresh randomness: its randomizer is
    prod rho_i^(w_i) over her own ciphertexts, a function of the sender's secret weights
    that she reads with her key.  Returns ((receiver, sender, frame, tag) of each such
    ciphertext, how many ciphertexts were compared)."""
    stale, compared = [], 0
    for (receiver, sender), frames in first.items():
        if receiver not in keys:
            continue
        pk, sk = keys[receiver]
        n, width = int(pk.n), (2 * pk.bits + 7) // 8
        for index, (a, b) in enumerate(zip(frames, second[(receiver, sender)])):
            tag, blobs_a = _blobs(a, pk.fingerprint)
            for blob_a, blob_b in zip(blobs_a, _blobs(b, pk.fingerprint)[1]):
                for i in range(0, len(blob_a), width):
                    compared += 1
                    if blob_a[i : i + width] != blob_b[i : i + width]:
                        continue
                    c = int.from_bytes(blob_a[i : i + width], "big")
                    m = int(sk.decrypt_ints([c])[0]) % n
                    if c != (1 + m * n) % (n * n):
                        stale.append((receiver, sender, index, tag))
    return stale, compared
