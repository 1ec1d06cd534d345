"""Hostile clients of a serving keyword Bob, for ``smc-hmm bench serve --hostile`` and its test.

:class:`HostileLoad` keeps ``count`` connections open against a server (loopback only),
each one attack of a kind from :data:`MIX` after another, until it is stopped.  All run
on one asyncio loop in one thread (a process of its own in the benchmark), so the load
costs the attacker little and the server everything it is worth.  The kinds:

==============  =====================================================================
kind            what the connection does
==============  =====================================================================
``silent``      TCP connect, then never a byte: waits for the server to close it
``slow_tls``    a real TLS ClientHello, one byte every ``dribble`` seconds
``junk``        512 random bytes instead of a ClientHello
``wrong_cert``  a TLS handshake with a client certificate of another CA
``junk_frames`` authenticated (a client certificate of the server's CA), then a frame
                that is not msgpack
``oversized``   authenticated, then a length prefix of 2^31 - 1 bytes and nothing else
``flood``       authenticated, then 1 MiB messages of a tag the protocol never asks for,
                as fast as the socket takes them (backpressure)
``disconnect``  authenticated, sends the keyword protocol's first message (a real
                public key), reads Bob's answer and vanishes in mid-protocol
==============  =====================================================================

Authenticated kinds play a client that holds a valid certificate (``mallory``): a
deployment's worst case short of a stolen server key.  Every attack is bounded by
``hold`` seconds; after it ends (usually because the server closed the connection) the
connection waits ``pause`` seconds (with jitter) and attacks again.  :meth:`stop`
returns what happened, per kind: attempts and their outcomes (``closed`` by the
server, ``refused`` in the hello reply, ``held`` until ``hold``, or an error name).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import ssl
import threading
from collections import Counter
from dataclasses import dataclass

from smc_hmm.transport.tcp import HELLO_VERSION, TlsConfig
from smc_hmm.wire import WireCodec

__all__ = ["MIX", "HostileLoad", "HostileTarget"]

#: the kinds and their weights in a mixed load
MIX = (
    ("silent", 3),
    ("slow_tls", 2),
    ("junk", 1),
    ("wrong_cert", 1),
    ("junk_frames", 1),
    ("oversized", 1),
    ("flood", 1),
    ("disconnect", 1),
)
FLOOD_FRAME = 2**20
#: at most this many flood frames per connection (256 MiB)
FLOOD_FRAMES = 256


@dataclass(frozen=True)
class HostileTarget:
    """Where and as whom to attack: the server's address and name, a client certificate
    of its CA (``client``, named ``client_name``), one of another CA (``rogue``), and a
    Paillier public key for the protocol's first message (its modulus ``key_n``)."""

    address: tuple[str, int]
    client: TlsConfig
    client_name: str
    rogue: TlsConfig
    key_n: int
    server_name: str = "bob"


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


class HostileLoad:
    """``count`` hostile connections of the kinds in ``mix`` against ``target``."""

    def __init__(
        self,
        target: HostileTarget,
        count: int,
        *,
        mix=MIX,
        sources=("127.0.0.1",),
        pause: float = 0.5,
        hold: float = 60.0,
        dribble: float = 0.5,
        seed: int | None = None,
    ):
        if count < 1 or not sources:
            raise ValueError("a hostile load needs count >= 1 and a source address")
        kinds = [kind for kind, weight in mix for _ in range(weight)]
        self.target = target
        self.plan = [(kinds[i % len(kinds)], sources[i % len(sources)]) for i in range(count)]
        self.pause, self.hold, self.dribble = pause, hold, dribble
        self.random = random.Random(seed)
        self.attempts: Counter[str] = Counter()
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.open = 0
        self._client_ctx = target.client.client_context()
        self._rogue_ctx = target.rogue.client_context()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> HostileLoad:
        self._thread = threading.Thread(target=self._run, name="smc-hostile", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self, timeout: float = 15.0) -> dict:
        """Close every hostile connection; returns attempts and outcomes per kind."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
        return self.report()

    def report(self) -> dict:
        kinds = sorted(self.attempts)
        return {
            kind: {
                "attempts": self.attempts[kind],
                "outcomes": {o: n for (k, o), n in sorted(self.outcomes.items()) if k == kind},
            }
            for kind in kinds
        }

    def _run(self) -> None:
        # writes into connections the server has just dropped are expected, not news
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        tasks = [asyncio.create_task(self._connection(k, s)) for k, s in self.plan]
        self._ready.set()
        await self._stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=5.0)

    async def _connection(self, kind: str, source: str) -> None:
        attack = getattr(self, f"_{kind}")
        await asyncio.sleep(self.random.uniform(0, self.pause))  # spread the first wave
        # the stop is checked, not only delivered by cancellation: a connection error raised
        # while an attack is being cancelled would otherwise swallow the cancellation
        while not self._stop.is_set():
            self.attempts[kind] += 1
            streams: list = []
            self.open += 1
            try:
                outcome = await asyncio.wait_for(attack(source, streams), self.hold)
            except asyncio.CancelledError:
                raise
            except asyncio.TimeoutError:
                outcome = "held"
            except (ConnectionError, ssl.SSLError, OSError, asyncio.IncompleteReadError) as exc:
                outcome = type(exc).__name__
            finally:
                self.open -= 1
                for writer in streams:
                    with contextlib.suppress(Exception):
                        writer.transport.abort()
            self.outcomes[(kind, outcome)] += 1
            await asyncio.sleep(self.pause * self.random.uniform(0.5, 1.5))

    # -- connecting -------------------------------------------------------------------------

    async def _open(self, source: str, streams: list, ctx: ssl.SSLContext | None = None):
        host, port = self.target.address
        reader, writer = await asyncio.open_connection(
            host,
            port,
            local_addr=(source, 0),
            ssl=ctx,
            server_hostname=self.target.server_name if ctx is not None else None,
        )
        streams.append(writer)
        return reader, writer

    @staticmethod
    async def _until_closed(reader) -> str:
        while await reader.read(65536):
            pass
        return "closed"

    async def _authenticate(self, source: str, streams: list):
        """TLS with the client certificate and the hello: (reader, writer) or None if the
        server refused the session."""
        reader, writer = await self._open(source, streams, self._client_ctx)
        hello = {"v": HELLO_VERSION, "from": self.target.client_name, "to": self.target.server_name}
        writer.write(_frame(WireCodec().encode(hello)))
        length = int.from_bytes(await reader.readexactly(4), "big")
        reply = WireCodec().decode(await reader.readexactly(length))
        return (reader, writer) if reply.get("ok") is True else None

    # -- the kinds ------------------------------------------------------------------------------

    async def _silent(self, source, streams) -> str:
        reader, _ = await self._open(source, streams)
        return await self._until_closed(reader)

    async def _slow_tls(self, source, streams) -> str:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = self._client_ctx.wrap_bio(incoming, outgoing, server_hostname="bob")
        with contextlib.suppress(ssl.SSLWantReadError):
            tls.do_handshake()
        client_hello = outgoing.read()
        reader, writer = await self._open(source, streams)
        for byte in client_hello:
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                if not await asyncio.wait_for(reader.read(4096), self.dribble):
                    return "closed"
            except asyncio.TimeoutError:
                continue
        return await self._until_closed(reader)

    async def _junk(self, source, streams) -> str:
        reader, writer = await self._open(source, streams)
        writer.write(os.urandom(512))
        return await self._until_closed(reader)

    async def _wrong_cert(self, source, streams) -> str:
        reader, writer = await self._open(source, streams, self._rogue_ctx)
        hello = {"v": HELLO_VERSION, "from": "x", "to": self.target.server_name}
        writer.write(_frame(WireCodec().encode(hello)))
        return await self._until_closed(reader)

    async def _junk_frames(self, source, streams) -> str:
        session = await self._authenticate(source, streams)
        if session is None:
            return "refused"
        reader, writer = session
        writer.write(_frame(b"\xc1junk, not msgpack"))
        return await self._until_closed(reader)

    async def _oversized(self, source, streams) -> str:
        session = await self._authenticate(source, streams)
        if session is None:
            return "refused"
        reader, writer = session
        writer.write((2**31 - 1).to_bytes(4, "big"))
        return await self._until_closed(reader)

    async def _flood(self, source, streams) -> str:
        session = await self._authenticate(source, streams)
        if session is None:
            return "refused"
        reader, writer = session
        frame = _frame(WireCodec().encode({"t": "flood", "d": 1, "b": bytes(FLOOD_FRAME)}))
        for _ in range(FLOOD_FRAMES):
            if writer.is_closing() or reader.at_eof() or reader.exception() is not None:
                break  # the server dropped us
            writer.write(frame)
            await writer.drain()
            await asyncio.sleep(0)  # drain() returns at once while the socket takes it all
        return await self._until_closed(reader)

    async def _disconnect(self, source, streams) -> str:
        from smc_hmm.crypto import PublicKey

        session = await self._authenticate(source, streams)
        if session is None:
            return "refused"
        reader, writer = session
        key = PublicKey(self.target.key_n)
        writer.write(_frame(WireCodec().encode({"t": "fw.key", "d": 1, "b": key})))
        length = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(length)  # Bob's public sizes: he is at work now
        writer.transport.abort()
        return "vanished"
