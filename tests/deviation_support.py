"""Deviating parties for the tests: transports that forge what a party
sends (a huge entry of the key holder's, a wrong ciphertext of her peer's) and one that
logs what she sends.  Each works on the wire frames (msgpack envelopes ``{"t": tag,
"b": body}``, ciphertext arrays as extension ``EXT_CIPHERARRAY``), so a role's own code
runs unchanged."""

from __future__ import annotations

import secrets

import msgpack

from smc_hmm.errors import SmcHmmError
from smc_hmm.transport.base import Transport
from smc_hmm.wire import EXT_CIPHERARRAY


class Forwarding(Transport):
    """Passes every frame through to ``inner``; a deviating party overrides what it
    changes."""

    def __init__(self, inner):
        self.inner, self.name, self.peers = inner, inner.name, inner.peers

    def send_bytes(self, peer, frame):
        self.inner.send_bytes(peer, frame)

    def recv_bytes(self, peer, timeout):
        return self.inner.recv_bytes(peer, timeout)

    def close(self):
        self.inner.close()


class HugeEntry(Forwarding):
    """The key holder's software, deviating: in her first message with a bounded field
    under her key, the first ciphertext becomes E(2^L), L = bits(n) - 64, whatever its
    declared bound (the "huge feature" that read Bob's weights above the slots)."""

    def __init__(self, inner, pk, declared: dict, bounded):
        super().__init__(inner)
        self.pk, self.declared, self.bounded, self.done = pk, declared, bounded, False

    def send_bytes(self, peer, frame):
        if not self.done and self._carries_bounded(frame) and blob_count(frame, self.pk):
            frame = with_first_ciphertext(frame, self.pk, 1 << (self.pk.bits - 64))
            self.done = True
        self.inner.send_bytes(peer, frame)

    def _carries_bounded(self, frame: bytes) -> bool:
        tag = msgpack.unpackb(frame, raw=False, ext_hook=lambda code, data: None)["t"]
        message = self.declared.get(tag)
        return message is not None and any(self.bounded(f) for f in message.fields)


class WrongCiphertext(Forwarding):
    """A deviating peer: the first ciphertext under ``pk`` of its ``at``-th frame to
    ``victim`` that carries one becomes an encryption of a random value."""

    def __init__(self, inner, victim: str, pk, at: int):
        super().__init__(inner)
        self.victim, self.pk, self.at, self.seen, self.done = victim, pk, at, 0, False

    def send_bytes(self, peer, frame):
        if peer == self.victim and not self.done and blob_count(frame, self.pk):
            if self.seen == self.at:
                frame = with_first_ciphertext(frame, self.pk, secrets.randbelow(int(self.pk.n)))
                self.done = True
            self.seen += 1
        self.inner.send_bytes(peer, frame)


class SentLog(Forwarding):
    """The frames a party sends, per receiver, and whether a peer cut her off (a send or
    receive of hers failed: someone else stopped first)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.frames: dict[str, list[bytes]] = {}
        self.cut = False

    def send_bytes(self, peer, frame):
        try:
            self.inner.send_bytes(peer, frame)
        except SmcHmmError:
            self.cut = True
            raise
        self.frames.setdefault(peer, []).append(frame)

    def links(self) -> dict:
        """Her frames as :func:`transcript_harness.compare_transcripts` reads them."""
        return {(peer, self.name): frames for peer, frames in self.frames.items()}

    def recv_bytes(self, peer, timeout):
        try:
            return self.inner.recv_bytes(peer, timeout)
        except SmcHmmError:
            self.cut = True
            raise


def blob_count(frame: bytes, pk) -> int:
    """How many ciphertext arrays under ``pk`` a frame carries."""
    found = []

    def hook(code, data):
        if code == EXT_CIPHERARRAY and msgpack.unpackb(data, raw=False)[0] == pk.fingerprint:
            found.append(1)

    msgpack.unpackb(frame, raw=False, ext_hook=hook)
    return len(found)


def with_first_ciphertext(frame: bytes, pk, value: int) -> bytes:
    """``frame`` with its first ciphertext under ``pk`` replaced by a fresh E(value)."""
    width, done = (2 * pk.bits + 7) // 8, []

    def forge(item):
        if isinstance(item, list):
            return [forge(v) for v in item]
        if done or not isinstance(item, msgpack.ExtType) or item.code != EXT_CIPHERARRAY:
            return item
        key, shape, blob = msgpack.unpackb(item.data, raw=False)
        if key != pk.fingerprint or not blob:
            return item
        done.append(True)
        forged = int(pk.encrypt_ints([value])[0]).to_bytes(width, "big") + blob[width:]
        return msgpack.ExtType(EXT_CIPHERARRAY, msgpack.packb([key, shape, forged]))

    envelope = msgpack.unpackb(frame, raw=False, ext_hook=msgpack.ExtType)
    envelope["b"] = forge(envelope["b"])
    return msgpack.packb(envelope, use_bin_type=True)
