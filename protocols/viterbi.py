"""The ``viterbi`` protocol: secure Viterbi decoding, Alice learns the best path (or a
segment), Bob nothing (thesis 003, 2.2.3 and 5.2.1).  The protocol, its adversary model
and who learns what are the decoding stage's (:mod:`protocols.stages.decoding`); this
module is its plugin: the randomizer budget, the error bound, the example and the
descriptor."""

from __future__ import annotations

import numpy as np

from protocols.stages.decoding import (
    Plan,
    Structure,
    ViterbiParams,
    alice,
    as_decoders,
    bob,
    load_input,
    score_error_bound,
)
from smc_hmm.hmm import DiscreteHMM
from smc_hmm.protocol import ProtocolDescriptor, alice_and_bob, save_array

NAME = "viterbi"


def randomizers_needed(params: ViterbiParams, key_bits: int, inputs) -> dict[str, int]:
    """The fresh randomizers each role draws, from the public sizes of ``inputs``."""
    holder = "bob" if params.model_holder == "bob" else "alice"
    data = inputs["alice" if holder == "bob" else "bob"]
    structure = Structure.of(as_decoders(inputs[holder]))
    return Plan(params, structure, len(data), key_bits).randomizers()


def error_bound(params: ViterbiParams, key_bits: int, inputs) -> float:
    """Nats: how far a revealed best-path score may lie from the plaintext one on
    ``inputs`` (:func:`score_error_bound`, with the frames' own largest |x|)."""
    holder = "bob" if params.model_holder == "bob" else "alice"
    data = np.asarray(inputs["alice" if holder == "bob" else "bob"])
    decoders = as_decoders(inputs[holder])
    plan = Plan(params, Structure.of(decoders), len(data), key_bits)
    feature_max = None if data.ndim == 1 else float(np.max(np.abs(data)))
    return score_error_bound(decoders, plan, feature_max)


def example(key_bits: int, seed: int):
    """Bob's two discrete models (3 states, 4 symbols, every edge: one public structure)
    decode Alice's 6 symbols, twice; she learns each best path and its score, the score
    within :func:`error_bound`."""
    from smc_hmm.hmm import viterbi as best_path
    from smc_hmm.protocol import Example

    rng = np.random.default_rng(seed)

    def model():
        return DiscreteHMM(rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3), size=3),
                           rng.dirichlet(np.ones(4), size=3))  # fmt: skip

    inputs = tuple({"alice": rng.integers(0, 4, size=6), "bob": [model(), model()]} for _ in "ab")
    params = ViterbiParams()
    plan = Plan(params, Structure.of(as_decoders(inputs[0]["bob"])), 6, key_bits)

    def config(directory):
        from smc_hmm.hmm.io import save_models

        save_models(directory / "models.npz", inputs[0]["bob"])
        symbols = save_array(directory, "symbols.npy", inputs[0]["alice"])
        return {"alice": {"input": symbols}, "bob": {"input": "models.npz"}}

    def expected(i):
        paths = [best_path(m, i["alice"]) for m in i["bob"]]
        return {"alice": [{"path": p.tolist(), "score": float(s)} for p, s in paths], "bob": None}

    return Example(
        params={},
        parties={"alice": "alice", "bob": "bob"},
        inputs=inputs,
        expected=expected,
        tolerance=max(error_bound(params, key_bits, i) for i in inputs) + 1e-9,
        declared=tuple(plan.declared()),
        bad_inputs=(
            {"alice": np.array([0, 1, 7, 2, 3, 1])},
            {"alice": np.zeros((6, 2))},
            {"bob": []},
        ),  # fmt: skip
        config=config,
    )


PROTOCOL = ProtocolDescriptor.declare(
    __name__,
    "secure Viterbi decoding: Alice learns the best path (or a segment), Bob nothing",
    params=ViterbiParams.from_config,
    roles=alice_and_bob(alice, bob, load_input),
)

__all__ = ["NAME", "PROTOCOL", "error_bound", "example", "randomizers_needed"]
