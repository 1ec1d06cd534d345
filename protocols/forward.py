"""The ``forward`` protocol: Alice's sequence scored by Bob's HMMs (thesis 003, 4.2.1).  The
messages, the adversary model and who learns what are the stage's
(:mod:`protocols.stages.forward_scoring`); this module is its plugin: the loader, the
randomizer budget, the example and the descriptor."""

from __future__ import annotations

import numpy as np

from protocols.stages.forward_scoring import MAX_LENGTH, ForwardParams, ForwardSpec, alice, bob
from smc_hmm.hmm import DiscreteHMM
from smc_hmm.protocol import Example, ProtocolDescriptor, Role
from smc_hmm.runtime.inputs import load_array, load_models

NAME = "forward"

__all__ = ["MAX_LENGTH", "NAME", "PROTOCOL", "ForwardParams", "ForwardSpec", "alice", "bob"]


# -- the plugin ------------------------------------------------------------------------------


def load_observations(value, base):
    """Alice's sequence from a config: symbols (T,) or frames (T, d); .npy, .json or inline."""
    obs = load_array(value, base)
    if obs.ndim == 1 and obs.dtype.kind == "f" and np.all(obs == np.round(obs)):
        obs = obs.astype(np.int64)  # JSON symbols arrive as floats
    return obs


def randomizers_needed(params: ForwardParams, key_bits: int, inputs) -> dict[str, int]:
    """The offline plan of a run on ``inputs``, from their public sizes
    (:meth:`ForwardSpec.randomizers_needed`)."""
    spec = ForwardSpec.for_models(inputs["bob"], key_bits, params)
    return spec.randomizers_needed(len(inputs["alice"]))


def example(key_bits: int, seed: int) -> Example:
    """Two discrete models (2 and 3 states, 4 symbols, dense transitions: one public
    topology) score 5 symbols, twice with other models and symbols; Alice learns log P."""
    from smc_hmm.hmm import log_likelihood

    rng = np.random.default_rng(seed)

    def case():
        models = [
            DiscreteHMM(
                rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n), size=n),
                rng.dirichlet(np.ones(4), size=n),
            )
            for n in (2, 3)
        ]  # fmt: skip
        return {"alice": rng.integers(0, 4, size=5), "bob": models}

    inputs = (case(), case())
    spec = ForwardSpec.for_models(inputs[0]["bob"], key_bits, ForwardParams())

    def config(directory):
        from smc_hmm.hmm.io import save_models

        save_models(directory / "models.npz", inputs[0]["bob"])
        return {"alice": {"observations": inputs[0]["alice"].tolist()},
                "bob": {"models": "models.npz"}}  # fmt: skip

    return Example(
        params={},
        parties={"alice": "alice", "bob": "bob"},
        inputs=inputs,
        expected=lambda i: {"alice": [float(log_likelihood(m, i["alice"])) for m in i["bob"]]},
        tolerance=1e-7,  # log P to 1e-9 relative (docs/benchmarks.md)
        declared=tuple(spec.messages(5).values()),
        bad_inputs=(
            {"alice": np.array([0, 1, 9, 2, 3])},
            {"alice": np.zeros((5, 2))},
            {"bob": []},
        ),  # fmt: skip
        config=config,
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "secure forward algorithm: Alice's sequence scored by Bob's HMMs (thesis 4.2.1)",
    params=ForwardParams.from_config,
    roles=(
        Role(
            "alice",
            alice,
            kind="alice",
            holds_key=True,
            input="observations",
            load=load_observations,
        ),
        Role("bob", bob, kind="bob", input="models", load=load_models),
    ),
)
