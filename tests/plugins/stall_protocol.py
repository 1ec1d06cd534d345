"""A two-party plugin whose Bob prints a warning and then stalls (launcher blame tests)."""

from __future__ import annotations

import sys
import time

from smc_hmm.protocol import ProtocolDescriptor, Role


def alice(ctx, private, params):
    return ctx.recv("bob", "never")  # times out after run.timeout


def bob(ctx, private, params):
    print("smc-hmm: warning: a harmless warning, not the cause", file=sys.stderr, flush=True)
    time.sleep(600)  # stalls until the launcher kills it


PROTOCOL = ProtocolDescriptor(
    name="stall",
    summary="Bob stalls",
    roles=(Role("alice", alice, kind="alice"), Role("bob", bob, kind="bob")),
)
