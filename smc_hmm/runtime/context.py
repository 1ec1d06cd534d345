"""The party context: everything a protocol role may touch (``docs/architecture.md``).

A role talks only through its :class:`PartyContext`: declared messages
(``send`` / ``recv``), its keys (metered views, each carrying the party's
executor so homomorphic batches run on its lanes), ``phase(name)`` for
timing, and its random generator.  Where the messages go is the runner's
business (:mod:`smc_hmm.runtime.simulate`, :mod:`smc_hmm.runtime.party`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from smc_hmm.compute import Compute
from smc_hmm.cost import CostLedger
from smc_hmm.crypto import CipherArray, PrivateKey, PublicKey, Randomizer, Rng
from smc_hmm.crypto.keys import MIN_SECURE_BITS
from smc_hmm.errors import InsecurePeerKeyError, InvalidInputError, SmcHmmError
from smc_hmm.limits import MAX_KEY_BITS, check_key_bits
from smc_hmm.messages import Message
from smc_hmm.transport.base import Channel, Transport
from smc_hmm.wire import WireCodec

__all__ = ["PartyContext"]


def party_channel(
    transport: Transport,
    ledger: CostLedger,
    *,
    timeout: float,
    max_frame_bytes: int,
    **buffering: int,
) -> Channel:
    """A running party's channel over ``transport``: strict (every message checked
    against its declaration), metered by ``ledger``, frames of at most
    ``max_frame_bytes``; ``buffering``: the channel's bounds on what a peer may send
    ahead (``max_buffered_messages``, ``max_buffered_bytes``)."""
    return Channel(
        transport,
        WireCodec(max_frame_bytes=max_frame_bytes),
        timeout=timeout,
        observer=ledger,
        strict=True,
        **buffering,
    )


def _metered_private_key(private_key: PrivateKey, view: PublicKey) -> PrivateKey:
    """A shallow copy of ``private_key`` whose decryptions count into ``view``'s meter."""
    metered = copy.copy(private_key)
    metered.public_key = view
    return metered


class PartyContext:
    """Everything a protocol role may touch: its channel, keys, ledger, executor and rng.

    ``send`` / ``recv`` move declared messages (:class:`~smc_hmm.messages.Message`:
    the sender checks its payload against the declaration, the receiver
    validates it and attaches the declared scales and bounds); a plain ``str``
    tag is allowed for payloads without ciphertexts.  ``phase(name)`` times a
    phase.  ``keypair`` is this party's own key pair (metered views) if it
    holds one.  Every key view counts into the party's ledger (composite
    operations such as an OT are counted by the layer that implements them,
    through the key's meter) and runs heavy batches on the party's executor.
    A public key received from a peer below ``min_key_bits`` (2048 unless the
    party's configuration says insecure) is refused with
    :class:`~smc_hmm.errors.InsecurePeerKeyError`; one above ``max_key_bits``
    (:data:`smc_hmm.limits.MAX_KEY_BITS` unless raised explicitly) with
    :class:`~smc_hmm.errors.ParameterBoundError`, before anything is computed with it.
    """

    def __init__(
        self,
        name: str,
        channel: Channel,
        *,
        keypair: tuple[PublicKey, PrivateKey] | None = None,
        ledger: CostLedger | None = None,
        compute: Compute | None = None,
        rng: Rng | None = None,
        record: bool = False,
        min_key_bits: int = MIN_SECURE_BITS,
        max_key_bits: int = MAX_KEY_BITS,
        randomizers: Mapping[bytes, Randomizer] | None = None,
        budget=None,
        progress=None,
        label: str | None = None,
    ):
        self.name = name
        #: how errors name this party (a served client: its role and its certificate's name)
        self.label = label or name
        #: precomputed randomizers (offline phase) for keys this party will meet, by fingerprint
        self._randomizers = dict(randomizers or {})
        self.min_key_bits = int(min_key_bits)
        self.max_key_bits = int(max_key_bits)
        if self.max_key_bits < self.min_key_bits:
            raise InvalidInputError("max_key_bits must be at least min_key_bits")
        self.channel = channel
        self.ledger = ledger if ledger is not None else CostLedger(name)
        self.compute = compute if compute is not None else Compute.inline()
        self.rng = rng if rng is not None else Rng.system()
        self._keys: dict[bytes, PublicKey] = {}
        self.public_key: PublicKey | None = None
        self.private_key: PrivateKey | None = None
        #: (peer, tag, payload) of every message received, if recording was asked for
        self.received: list[tuple[str, str, Any]] | None = [] if record else None
        #: refusals whose cause is private, raised once the role has sent its last message
        self._deferred: list[SmcHmmError] = []
        #: charge(frames) of the serving party's per-client budget, or None (no bound)
        self._budget = budget
        #: the runner's progress(stage, done, total) callback, or None
        self._progress = progress
        if keypair is not None:
            pk, sk = keypair
            if not isinstance(pk, PublicKey) or not isinstance(sk, PrivateKey):
                raise InvalidInputError("keypair must be (PublicKey, PrivateKey)")
            if sk.public_key.n != pk.n:
                raise InvalidInputError("the private key does not match the public key")
            self.public_key = self.adopt_key(pk)
            self.private_key = _metered_private_key(sk, self.public_key)

    # -- keys ------------------------------------------------------------------------

    @property
    def keypair(self) -> tuple[PublicKey, PrivateKey]:
        if self.private_key is None:
            raise InvalidInputError(f"party {self.label} holds no key pair")
        return self.public_key, self.private_key

    def adopt_key(self, public_key: PublicKey) -> PublicKey:
        """This party's metered view of ``public_key``, registered with its codec."""
        view = self._keys.get(public_key.fingerprint)
        if view is None:
            if public_key.fingerprint in self._randomizers:  # the offline phase's work
                public_key.use_randomizer(self._randomizers[public_key.fingerprint])
            view = public_key.with_meter(self.ledger, self.compute)
            self.channel.codec.add_key(view)
            self._keys[public_key.fingerprint] = view
            if self.ledger.key_bits is None:
                self.ledger.key_bits = view.bits
        return view

    @property
    def keys(self) -> dict[bytes, PublicKey]:
        """The public keys this party knows, by fingerprint (metered views)."""
        return dict(self._keys)

    # -- messages ----------------------------------------------------------------------

    @property
    def peers(self) -> list[str]:
        return self.channel.peers

    def send(self, peer: str, message: Message | str, payload) -> int:
        """Send ``payload`` to ``peer`` as ``message``; returns the encoded size in bytes.

        Ciphertexts may only travel in declared messages: their scale and bound
        are the declaration's (public), never the sender's.
        """
        if isinstance(message, Message):
            return self.channel.send(peer, message.tag, message.outgoing(payload))
        if _holds_ciphertexts(payload):
            raise InvalidInputError(
                f"{message!r}: ciphertexts travel only in declared messages (smc_hmm.messages)"
            )
        return self.channel.send(peer, message, payload)

    def recv(self, peer: str, message: Message | str, timeout: float | None = None):
        """The next ``message`` from ``peer`` (typed errors on timeout / disconnect)."""
        tag = message.tag if isinstance(message, Message) else message
        payload = self.channel.recv(peer, tag, timeout)
        if isinstance(message, Message):
            payload = message.incoming(payload)
        if isinstance(payload, PublicKey):
            if payload.bits < self.min_key_bits:
                raise InsecurePeerKeyError(
                    f"{self.label}: {peer} sent a {payload.bits}-bit key; this party accepts "
                    f"{self.min_key_bits} bits or more (bound min_key_bits)"
                )
            check_key_bits(payload.bits, self.max_key_bits, f"{self.label}: {peer}'s key")
            payload = self.adopt_key(payload)
        if self.received is not None:
            self.received.append((peer, tag, payload))
        return payload

    # -- what a peer may learn ---------------------------------------------------------

    def charge_frames(self, frames: int) -> None:
        """Charge a run's public length against the peer's frame budget before any work on
        its data (:mod:`smc_hmm.runtime.budget`); raises BudgetError beyond it.  A no-op
        where the runner set no budget (in-process runs, party processes)."""
        if self._budget is not None:
            self._budget(int(frames))

    def progress(self, stage: str, done: int, total: int) -> None:
        """Report how far a long stage has come (``done`` of ``total`` public steps) to the
        runner's callback, if any: the command line turns it into progress lines with an
        estimate of the time left.  Public counts only."""
        if self._progress is not None:
            self._progress(stage, int(done), int(total))

    # -- refusals after the last message -------------------------------------------------

    def defer(self, error: SmcHmmError) -> None:
        """Refuse because of a check on private data, but only after the role's last message.

        A check whose outcome depends on a party's private input (a feature beyond the
        public bound, a model outside the public range, a precision limit reached) must not
        change what the other party sees: the role records the error here, carries on with
        well-formed dummy values, and the runner raises the first deferred error when the
        role returns (:meth:`run`).  ``docs/security.md``, "Refusals"."""
        if not isinstance(error, SmcHmmError):
            raise InvalidInputError("only typed errors (smc_hmm.errors) can be deferred")
        self._deferred.append(error)

    def checked(self, compute, dummy):
        """``compute()``; should it raise a typed error -- a check on a peer's reply whose
        outcome depends on this party's private values too -- ``dummy()`` instead, and
        the error after the role's last message (:meth:`defer`): a deviating peer then
        learns whether the check failed, not at which step."""
        try:
            return compute()
        except SmcHmmError as error:
            self.defer(error)
            return dummy()

    @property
    def deferred(self) -> tuple[SmcHmmError, ...]:
        return tuple(self._deferred)

    def run(self, role, *args):
        """Run a role function and raise its first deferred refusal once it has returned
        (every runner -- simulate, party processes, serve, the client -- calls this)."""
        output = role(self, *args)
        if self._deferred:
            raise self._deferred[0]
        return output

    # -- accounting -------------------------------------------------------------------

    def phase(self, name: str):
        """``with ctx.phase("name"):`` -- time a phase (wall, CPU, compute vs waiting); a
        runner's progress callback with a ``phase(name)`` method hears of it (the progress
        of protocols whose steps are their phases, :class:`smc_hmm.progress.PhaseProgress`)."""
        hook = getattr(self._progress, "phase", None)
        if hook is not None:
            hook(name)
        return self.ledger.phase(name)

    def count(self, op: str, k: int = 1) -> None:
        """Count ``k`` composite operations (``ot``, ``and_gates``, ...) on this party's
        ledger: a stage reports what it did without touching the ledger itself."""
        self.ledger.count(op, k)

    def __repr__(self) -> str:
        return f"<PartyContext {self.name} peers={self.peers}>"


def _holds_ciphertexts(payload) -> bool:
    stack = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, CipherArray):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False
