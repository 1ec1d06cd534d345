"""Privacy-preserving principal eigenvector through an arbitrator (Trent).

Paper: 003 (Pathak), section 4.1.1 and appendix A.1 (Pathak and Raj 2010,
"Privacy-preserving protocols for eigenvector computation"), N-party form: data owners
P_1..P_N hold M = [A_1 ... A_N] column-wise (every A_i has the same k rows) and end with
their shares of the principal eigenvector of M^T M.

Two modes (the ``mode`` key of the ``[protocol]`` table), one module and one parameter
class each:

* ``"private"`` (the default, :mod:`protocols.eigenvector.private`,
  :class:`PrivateParams`): nobody holds the whole decryption key and no party ever sees
  an intermediate vector; the owners learn their shares, the number of rounds and the
  declared magnitudes.  The module says exactly who learns what.
* ``"thesis"`` (:mod:`protocols.eigenvector.thesis`, :class:`ThesisParams`): the
  thesis's protocol as published, the comparison baseline, not for use where the owners
  must be protected from each other (every owner holds the decryption key).

What both share (the parties, the sizes, the convergence test's public parameters and
their checks, the owner's input check) is in :mod:`protocols.eigenvector.shared`.  This
module is the descriptor: it reads the parameters of the mode a configuration names and
runs that mode's roles.

Run it::

    smc-hmm bench eigenvector --key-bits 2048 --owners 4
    python examples/eigenvector_digits.py --dir DIR   # six processes over mutual TLS

(``docs/eigenvector.md``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from protocols.eigenvector import private, thesis
from protocols.eigenvector.private import PrivateParams
from protocols.eigenvector.shared import SharedParams
from protocols.eigenvector.thesis import ThesisParams
from smc_hmm.errors import ConfigError
from smc_hmm.protocol import Example, ProtocolDescriptor, Role, assign_by_field, save_array
from smc_hmm.runtime.inputs import load_array

__all__ = ["MODES", "NAME", "PROTOCOL", "PrivateParams", "ThesisParams", "params_from_config"]

NAME = "eigenvector"

#: each mode's parameter class and the module of its roles: the default first
_MODES = {"private": (PrivateParams, private), "thesis": (ThesisParams, thesis)}
#: the protocol's modes: the default first
MODES = tuple(_MODES)


def params_from_config(section: Mapping) -> SharedParams:
    """The parameters of the mode the ``[protocol]`` table names (default: private)."""
    mode = section.get("mode", MODES[0])
    if not isinstance(mode, str) or mode not in _MODES:
        raise ConfigError(f"bad eigenvector parameters: mode must be one of {MODES}, got {mode!r}")
    params_class, _ = _MODES[mode]
    return params_class.from_config(section)


def _roles(params: SharedParams):
    """The module whose role functions run ``params``' mode."""
    for params_class, module in _MODES.values():
        if type(params) is params_class:
            return module
    raise ConfigError(f"not the parameters of an eigenvector mode: {type(params).__name__}")


def key_authority(ctx, private_input, params: SharedParams) -> None:
    """The key authority of either mode: generates (runtime) and deals the keys, leaves."""
    return _roles(params).key_authority(ctx, private_input, params)


def owner(ctx, a, params: SharedParams):
    """Data owner P_i of either mode; returns its normalised share alpha_i."""
    return _roles(params).owner(ctx, a, params)


def arbitrator(ctx, private_input, params: SharedParams) -> dict:
    """Trent of either mode; returns the number of rounds (and the vector if revealed)."""
    return _roles(params).arbitrator(ctx, private_input, params)


def randomizers_needed(
    params: SharedParams, key_bits: int, inputs, rounds: int | None = None
) -> dict[str, dict[str, int]]:
    """The mode's fresh randomizers per party and key (party -> {key party: count}: the
    key authority's shared key, the private mode's owners' own keys), for a run of
    ``rounds`` rounds: its number is data-dependent and public only once the run ends, so
    the default plans the fewest rounds the mode takes (a run that converges later draws
    each further round's online).  Sizes are public parameters: ``inputs`` adds none."""
    return params.randomizers(key_bits, rounds)


def rank_one(rng, k: int = 4, cols=(3, 5, 4)) -> list[np.ndarray]:
    """M = a b^T split by columns: G = ||b||^2 a a^T, so u_1 is already the eigenvector
    and every such M converges at the first test (the same public number of rounds)."""
    a = rng.uniform(0.5, 1, k) * rng.choice([-1, 1], k)
    return [np.outer(a, rng.uniform(0.5, 1, n)) for n in cols]


def example(key_bits: int, seed: int) -> Example:
    """Three owners' rank-one blocks (4 rows; 3, 5 and 4 columns), twice, the private
    mode with a precision plan that fits 512-bit keys; Trent is shown the eigenvector."""
    from smc_hmm.eigen import principal_eigenvector

    rng = np.random.default_rng(seed)
    owners = ["p1", "p2", "p3"]
    section = {"owners": owners, "cols": [3, 5, 4], "rows": 4, "max_abs": 1.0,
               "reveal_to_trent": True, "precision": 48, "gram_bits": 32, "data_bits": 24,
               "tol": 1e-6, "check_every": 4}  # fmt: skip
    inputs = tuple(dict(zip(owners, rank_one(rng))) for _ in range(2))

    def expected(i):
        v = principal_eigenvector(np.hstack([i[o] for o in owners]))
        cuts = np.cumsum([0, *section["cols"]])
        blocks = {o: v[a:b] for o, a, b in zip(owners, cuts, cuts[1:])}

        def along(want):  # an eigenvector's sign is arbitrary
            return lambda x: abs(float(np.dot(x, want))) >= (1 - 1e-9) * np.linalg.norm(
                x
            ) * np.linalg.norm(want)  # fmt: skip

        def trent(out):
            return out["mode"] == "private" and out["rounds"] == 4 and along(v)(out["eigenvector"])

        return {o: along(w) for o, w in blocks.items()} | {"authority": None, "trent": trent}

    bad = inputs[0]["p2"]
    return Example(
        params=section,
        parties={"authority": "key_authority", "trent": "arbitrator"}
        | dict.fromkeys(owners, "owner"),
        inputs=inputs,
        expected=expected,
        bad_inputs=({"p2": bad[:, :4]}, {"p3": np.full((4, 4), np.nan)}, {"p1": 2 * bad[:, :3]}),
        config=lambda directory: (
            {"authority": {}, "trent": {}}
            | {o: {"data": save_array(directory, f"{o}.npy", inputs[0][o])} for o in owners}
        ),
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "principal eigenvector of horizontally split data through an arbitrator (Trent)",
    params=params_from_config,
    roles=(
        Role("key_authority", key_authority, kind="key_authority", holds_key=True),
        Role("owner", owner, kind="data_owner", input="data", load=load_array, many=True),
        Role("arbitrator", arbitrator, kind="trent"),
    ),
    role_for=assign_by_field(
        key_authority="key_authority",
        arbitrator="arbitrator",
        owner="owners",
    ),
    messages=lambda params, key_bits: params.messages(key_bits).values(),
)
