"""Party objects play every protocol: a role's input goes in ``inputs=`` under the name its
descriptor gives it, and the run equals the runtime's own (``run_protocol``)."""

import numpy as np
import pytest

from parties import Alice, Bob, DataOwner, Trent, simulate
from protocols import keyword as kw
from smc_hmm.errors import ConfigError, InvalidInputError
from smc_hmm.hmm import log_likelihood
from smc_hmm.runtime import run_protocol


def _speech():
    from smc_hmm.data import load_bundled_models, load_test_utterances

    models, labels = load_bundled_models("diag")
    frames = np.asarray(load_test_utterances()[0].features)[:24]
    return frames, (models[:3], labels[:3])


def test_alice_and_bob_objects_play_keyword_as_run_protocol_does(keypair_1024):
    frames, keywords = _speech()
    parties = [
        Alice(inputs={"features": frames}, keypair=keypair_1024),
        Bob(inputs={"models": keywords}),
    ]
    by_objects = simulate(parties, kw.NAME, {"mode": "fast"}, min_key_bits=512, timeout=60)
    by_runtime = run_protocol(
        kw.PROTOCOL,
        {"mode": "fast"},
        {"alice": ("alice", frames), "bob": ("bob", keywords)},
        keys={"alice": keypair_1024},
        min_key_bits=512,
        timeout=60,
    )
    plain = keywords[1][int(np.argmax([log_likelihood(m, frames) for m in keywords[0]]))]
    assert by_objects["alice"]["keyword"] == by_runtime["alice"]["keyword"] == plain
    assert by_objects["bob"] is None


def test_a_role_without_its_input_is_refused_by_name(keypair_1024):
    frames, _ = _speech()
    parties = [Alice(inputs={"features": frames}, keypair=keypair_1024), Bob()]
    with pytest.raises(ConfigError, match="'models'"):
        simulate(parties, kw.NAME, {"mode": "fast"}, min_key_bits=512, timeout=60)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Alice(observations=[1, 2], inputs={"observations": [3]}),
        lambda: Bob(models=[], inputs={"models": []}),
        lambda: DataOwner("o1", [1.0], inputs={"vector": [2.0]}),
        lambda: Trent(vector=[1.0], inputs={"vector": [2.0]}),
    ],
)
def test_an_input_given_twice_is_an_error(make):
    with pytest.raises(InvalidInputError, match="given both"):
        make()
