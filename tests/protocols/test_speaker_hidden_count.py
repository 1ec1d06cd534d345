"""Speaker identification that hides how many speakers there are (thesis 003, 5.2.2: "the
number of speakers must also be hidden"): Bob pads to a public N with dummies his private
circuit inputs mark, the transcript depends on N only, a dummy never wins however well it
scores, and Alice learns the winner's name."""

from __future__ import annotations

import numpy as np
import pytest
from party_support import run_alice_and_bob
from transcript_harness import assert_same_transcripts

from protocols import speaker as spk
from smc_hmm.data.speakers import load_speaker_models, load_speaker_test_utterances
from smc_hmm.errors import ConfigError, InvalidInputError

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")
N = 5
FRAMES = 40


@pytest.fixture(scope="module")
def bundled():
    return load_speaker_models()


@pytest.fixture(scope="module")
def utterance():
    u = load_speaker_test_utterances()[0]
    return u.features[:FRAMES], u.speaker


def _subset(bundled, names):
    models, labels = bundled
    keep = [i for i, label in enumerate(labels) if label in names or label == "ubm"]
    return [models[i] for i in keep], [labels[i] for i in keep]


def _identify(keypair, frames, speakers, hide=N, **kwargs):
    settings = {"mode": "identify", **({"hide_count": hide} if hide else {})}
    return run_alice_and_bob(
        spk.PROTOCOL, settings, frames, speakers, keypair, timeout=600, **kwargs
    )


def test_the_transcript_depends_on_n_only(keypair_512, bundled, utterance):
    """Three and five real speakers under the same N: byte-identical frames once the
    ciphertexts are masked, and the same answer from both."""
    frames, speaker = utterance
    names = bundled[1][:-1]
    params = spk.SpeakerParams(hide_count=N)
    labels = tuple(f"speaker-{k}" for k in range(N)) + ("ubm",)
    spec = spk.SpeakerSpec(params, frames.shape[1], (8,) * (N + 1), FRAMES, 512, labels)
    outputs = []

    def run(subset, wrap):
        outputs.append(
            _identify(keypair_512, frames, _subset(bundled, subset), wrap_transport=wrap)
        )

    cases = [[speaker, *[x for x in names if x != speaker][:2]], names]
    assert_same_transcripts(run, cases, spk.declared_messages(spec), keys=[keypair_512])
    plain = _identify(keypair_512, frames, bundled, hide=0)["alice"]["speaker"]
    assert [o["alice"]["speaker"] for o in outputs] == [plain, plain] and plain == speaker


def test_a_dummy_never_wins_even_as_the_speakers_own_model(
    keypair_512, bundled, utterance, monkeypatch
):
    """The dummies are copies of the true speaker's model (they would win in plaintext),
    the true speaker not enrolled: the winner is a real speaker or none, never a dummy."""
    frames, speaker = utterance
    models, labels = bundled
    own = models[labels.index(speaker)]
    monkeypatch.setattr(spk, "_dummy_models", lambda sizes, dims: [own] * len(sizes))
    others = [x for x in labels[:-1] if x != speaker]
    got = _identify(keypair_512, frames, _subset(bundled, others))["alice"]["speaker"]
    assert got in (*others, None)
    padded, generic, (dummy, table) = spk._padded(
        *_subset(bundled, others), spk.SpeakerParams(hide_count=N)
    )
    assert dummy.tolist() == [0] * len(others) + [1] * (N - len(others)) + [0]
    assert generic[-1] == "ubm" and len(padded) == N + 1 and not table[-1].any()


def test_hide_count_is_refused_where_it_means_nothing(bundled):
    with pytest.raises(InvalidInputError):
        spk.SpeakerParams(mode="verify", hide_count=N)
    with pytest.raises(ConfigError):
        spk.PROTOCOL.params({"mode": "identify", "hide_count": spk.MAX_HIDDEN + 1})
    with pytest.raises(InvalidInputError):
        spk._padded(*bundled, spk.SpeakerParams(hide_count=2))  # five speakers, N = 2
    with pytest.raises(InvalidInputError):
        spk._name_bits("a name far longer than sixteen bytes")
    assert np.packbits(spk._name_bits("theo"), bitorder="little").tobytes().rstrip(b"\0") == b"theo"
