"""Running protocols: one role code path in every setting (``docs/architecture.md``).

* :mod:`~smc_hmm.runtime.context` -- the party context a role talks through.
* :mod:`~smc_hmm.runtime.simulate` -- every role in a thread of this process
  (:func:`simulate`, :func:`run_protocol`).
* :mod:`~smc_hmm.runtime.config` -- ``parties.toml`` (:func:`load_config`).
* :mod:`~smc_hmm.runtime.party` -- one party in this OS process over TCP with
  mutual TLS (:func:`run_party`, ``smc-hmm party``).
* :mod:`~smc_hmm.runtime.launch` -- every party as its own process (``smc-hmm launch``).
* :mod:`~smc_hmm.runtime.inputs` -- loaders for private inputs named in a config.
* :class:`RunResult` -- the result of a run, however it ran.
"""

from smc_hmm.runtime.config import (
    PartyConfig,
    RunConfig,
    config_from_dict,
    load_config,
    write_config,
)
from smc_hmm.runtime.context import PartyContext
from smc_hmm.runtime.launch import launch
from smc_hmm.runtime.party import jsonable, run_party
from smc_hmm.runtime.result import RunResult
from smc_hmm.runtime.simulate import DEFAULT_TIMEOUT, run_protocol, simulate

__all__ = [
    "DEFAULT_TIMEOUT",
    "PartyConfig",
    "PartyContext",
    "RunConfig",
    "RunResult",
    "config_from_dict",
    "jsonable",
    "launch",
    "load_config",
    "run_party",
    "run_protocol",
    "simulate",
    "write_config",
]
