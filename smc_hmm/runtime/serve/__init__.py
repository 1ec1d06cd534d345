"""A long-running serving party: ``smc-hmm serve --role bob --config parties.toml``.

One Bob (the model owner) serves many clients.  The server listens on its
``[parties.NAME]`` address with mutual TLS and runs one protocol session per
authenticated client connection, with the same role code as every other run
mode (the protocol is found through the plugin registry, :func:`smc_hmm.protocol.find`).
The client side is :mod:`smc_hmm.runtime.client` (``smc-hmm keyword --server``,
``smc-hmm party --role alice`` against a configuration with a ``[serve]`` table).

Who may connect
---------------
A client is any holder of a certificate issued by the configured CA
(``[tls] ca_cert``) that carries the *client role*
(:data:`smc_hmm.certs.CLIENT_ROLE_URI`, made by ``smc-hmm certs --clients``) and
names itself in the hello as its certificate says (CN / SAN).  A certificate from
another CA fails the TLS handshake; a party certificate without the client role,
a hello naming somebody else or another server is refused with a reason.  In the
session the client plays the protocol's other role under the name that role's
party has in the configuration (``alice``), so the role functions run unchanged.

Limits
------
Unauthenticated and authenticated connections have separate budgets, so that load
of the first kind never starves the second (``docs/serving.md``, "Limits"):

* **The front door** (one thread) accepts, runs every TLS handshake and hello
  without blocking (non-blocking sockets on one selector), and never waits for a
  client.  At most ``max_pending`` connections may be pending (accepted, not yet
  authenticated) at once, at most ``max_pending_per_address`` from one source
  address; a connection beyond either cap closes the *oldest* pending connection
  of its own address, or of the address with the most pending connections, at
  once.  A connection that has not finished its TLS handshake and hello within
  ``handshake_timeout`` seconds is closed.  None of them holds a thread.  One source
  address may open ``connect_rate_per_address`` new connections a second (bursts of
  ``connect_burst_per_address``); a further one is closed on arrival, before any TLS
  work.
* **Sessions**: ``max_sessions`` run at once, at most ``max_sessions_per_client``
  of them for one client certificate name; a further client waits for a slot, in
  arrival order (``when_busy = "wait"``, at most ``max_waiting`` clients and
  ``max_sessions_per_client`` of one name, each at most ``wait_timeout`` seconds)
  or is refused at once (``"refuse"``) with :class:`~smc_hmm.errors.ServerBusyError`
  in its hello reply.  One client name may start ``session_rate_per_client`` sessions
  a second (bursts of ``session_burst_per_client``); beyond, it is refused the same
  way (a session costs Bob work before its client sends anything useful).
* **What one client learns**: every frame gives a client one blinded copy of each of
  Bob's log-densities at that frame, and repeated frames narrow the blinds
  (:mod:`smc_hmm.leakage`).  ``max_frames_per_client`` frames per ``budget_period``
  seconds, or the budget derived from ``hiding_nats`` (a client's best estimate of any
  blinded value stays that many nats from exact), bound it per certificate name
  (:mod:`smc_hmm.runtime.budget`); the protocol charges each run's public length
  before any work on its data, and a run beyond the budget ends with BudgetError.
* **Each session's connection** has a frame limit (``max_frame_bytes``, refused
  at the length prefix), a bounded inbox (``inbox_frames``, ``inbox_bytes``: the
  transport stops reading, so a fast sender is slowed down), a bounded outbox and
  a budget of messages the protocol has not asked for yet
  (``max_buffered_messages``, ``max_buffered_bytes``: beyond it the client is
  dropped with :class:`~smc_hmm.errors.BackpressureError`); a client's key above
  ``max_key_bits`` or any peer-chosen parameter beyond its bound
  (:mod:`smc_hmm.limits`) ends the session with
  :class:`~smc_hmm.errors.ParameterBoundError`.
* Every receive of a session is bounded by ``[run] timeout``, every session by
  ``session_timeout`` (:class:`~smc_hmm.errors.SessionTimeoutError`).  SIGTERM /
  SIGINT: no new client is accepted, running sessions get ``shutdown_grace``
  seconds to finish, the rest are ended
  (:class:`~smc_hmm.errors.ServerShutdownError`), every thread is joined and the
  process exits 0.

Isolation
---------
Each session has its own socket, I/O thread, channel, cost ledger, random
generator and (with Dask) cache of scattered inputs; Bob's private models are
loaded once and only read.  A client that disconnects, stalls, sends a malformed
or oversized frame, a key below the configured minimum or anything the protocol's
declarations reject ends *its own* session with a typed error (transport, wire,
protocol or crypto error); other sessions and the listener are untouched, and an
unexpected exception in a session is contained the same way.  After a session its
socket, thread and buffers are released: threads and open files return to their
baseline (``tests/runtime/test_serve_load.py`` measures threads, descriptors and
resident memory over 58 sessions).

What Bob logs
-------------
Logger ``smc_hmm.serve``, one line per event: a session's number, the client's
certificate name and address, its start, its outcome (``ok`` or the typed
error's class and message) and its cost summary (messages, bytes, rounds,
homomorphic operation counts, wall / compute / wait seconds); refusals with their
reason.  Never a private input, a plaintext, a ciphertext or an output: the
messages of typed errors describe transport and protocol conditions only.

What the service gets: the results record
------------------------------------------
A session's result belongs to the party the protocol gives it to.  When it is the
serving party (speaker ``verify`` and ``anonymous``: the decision bit), Bob's role
returns it, and the server hands it to the operator: ``[serve] results = "FILE"`` or
``smc-hmm serve --results FILE`` appends one JSON line per session (its number, the
client's certificate name and address, the protocol and mode, the outcome, the result
and who learned it, the start and end times in UTC and the seconds), and an application
that embeds the server passes ``on_result`` (a callable, called with the same record
once the session has ended; its exceptions are logged and contained).  When the result
goes to the client only (speaker ``identify``, keyword recognition), the record says so
(``"learned_by": "client"``, ``"decision": null``): the server never has it.  A session
that failed is recorded with its typed error and no result.  The session reply tells the
client whether the server keeps such a record (``"results": true``).  The log lines
above never carry a result; the record does, by the operator's choice.

Adversary model
---------------
As the protocol's (``docs/security.md``): semi-honest clients for privacy (a
malicious client learns at most what the protocol reveals to its role per
session, and may run many sessions -- rate limits are the deployment's), and any
client -- malicious or broken -- for availability of the *other* sessions, which
the isolation above protects within the limits above.  Bob's compute cluster
(``[compute] scheduler``) is Bob's own and trusted: Dask's worker traffic carries
Bob's ciphertexts and weights with its own pickle-based protocol and must run on
Bob's network with Dask's TLS settings (:mod:`smc_hmm.compute_dask`).  Nothing is
pickled across the protocol network.
"""

from smc_hmm.runtime.serve.allocator import bound_allocator
from smc_hmm.runtime.serve.server import Server, serve
from smc_hmm.runtime.serve.settings import ServeSettings, serving_party

__all__ = ["ServeSettings", "Server", "bound_allocator", "serve", "serving_party"]
