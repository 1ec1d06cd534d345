"""Speaker identification whose answer goes to a third party (thesis 003, 5.2.2: "the
intended recipient might be a third party"): Trent learns the label, Alice and Bob
nothing; a label Alice forges is refused; the same over TCP with mutual TLS."""

from __future__ import annotations

import pytest
from party_support import forge_output_labels

from protocols import speaker as spk
from smc_hmm.data.speakers import load_speaker_models, load_speaker_test_utterances
from smc_hmm.errors import ConfigError, GarbledCircuitError, InvalidInputError
from smc_hmm.runtime import run_protocol

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")
SETTINGS = {"mode": "identify", "output_party": "trent"}


@pytest.fixture(scope="module")
def utterance():
    u = load_speaker_test_utterances()[3]
    return u.features[:40], u.speaker


def _three(keypair, frames, settings=SETTINGS, **kwargs):
    return run_protocol(
        spk.TRENT_PROTOCOL,
        settings,
        {
            "alice": ("alice", frames),
            "bob": ("bob", load_speaker_models()),
            "trent": ("trent", None),
        },
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=600,
        **kwargs,
    )


@pytest.mark.parametrize("hide", [0, 5])
def test_only_trent_learns_the_label(keypair_512, utterance, hide):
    frames, speaker = utterance
    settings = {**SETTINGS, **({"hide_count": hide} if hide else {})}
    result = _three(keypair_512, frames, settings, record_views=True)
    assert result["alice"] is None and result["bob"] is None
    assert result["trent"]["speaker"] == speaker
    # the answer's decoding reaches Trent only: Bob's hashes of both labels, Alice's
    # labels; Bob gets no label of the final circuit back, Alice no decoding of it
    seen = {party: {(peer, tag) for peer, tag, _ in view} for party, view in result.views.items()}
    assert seen["trent"] >= {("bob", "mix.final.third"), ("alice", "mix.final.outputs")}
    assert not any(
        tag.startswith("mix.final.") and tag != "mix.final.tables" for _, tag in seen["alice"]
    )
    assert not any(tag in ("mix.final.outputs", "mix.final.third") for _, tag in seen["bob"])


def test_a_forged_label_is_refused_by_trent(keypair_512, utterance, monkeypatch):
    forge_output_labels(monkeypatch)
    with pytest.raises(GarbledCircuitError):
        _three(keypair_512, utterance[0])


def test_trent_is_for_identify_with_scoring_max():
    with pytest.raises(InvalidInputError):
        spk.SpeakerParams(mode="verify", output_party="trent")
    with pytest.raises(InvalidInputError):
        spk.SpeakerParams(output_party="carol")
    assert spk.phases(spk.SpeakerParams(output_party="trent"), "trent") == ("decision",)
    with pytest.raises(ConfigError):  # two parties cannot give the answer to a third
        spk.PROTOCOL.params({"output_party": "trent"})
    assert spk.TRENT_PROTOCOL.params({}).output_party == "trent"


@pytest.fixture
def registered(monkeypatch):
    """The ``speaker-trent`` entry point, as the next install registers it."""
    from importlib import metadata

    import smc_hmm.protocol as registry

    real = metadata.entry_points
    extra = metadata.EntryPoint(
        "speaker-trent", "protocols.speaker:TRENT_PROTOCOL", "smc_hmm.protocols"
    )

    def entry_points(**kwargs):
        found = list(real(**kwargs))
        return found + [extra] if kwargs.get("group") == "smc_hmm.protocols" else found

    monkeypatch.setattr(registry, "entry_points", entry_points)


def test_the_command_gives_the_label_to_trent(tmp_path, capsys, registered):
    """smc-hmm speaker identify --to trent: Trent's label beside the plaintext one."""
    import json

    from test_protocol_speaker import _wav

    from smc_hmm.cli import main

    _wav(tmp_path / "voice.wav", seed=9)
    argv = ["speaker", "identify", "--audio", str(tmp_path / "voice.wav"), "--key-bits", "512",
            "--insecure", "--workers", "1", "--to", "trent", "--json", "-"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["secure"]["learned_by"] == "trent" and report["agree"] is True
    assert main(["speaker", "verify", "--audio", "x.wav", "--claim", "theo", "--to", "trent"]) == 2
    assert "--to trent is for identify" in capsys.readouterr().err
