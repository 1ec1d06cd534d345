"""A long-running serving party (``smc-hmm serve``); the code is in :mod:`.server` for now
(issue #35 splits it by concern)."""

from smc_hmm.runtime.serve.server import (
    Server,
    ServeSettings,
    bound_allocator,
    serve,
    serving_party,
)

__all__ = ["ServeSettings", "Server", "bound_allocator", "serve", "serving_party"]
