"""A WAV file's duration is checked against the command's bound from its header, before
any sample is read or resampled (new-user defect H2): every command that reads one --
keyword, speaker, spot, match (the snippet and Bob's --collection folder) and release hmm
--keyword-models -- refuses or leaves out a file that is too long without decoding it."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from smc_hmm.cli import main
from smc_hmm.errors import InvalidInputError
from smc_hmm.features import HEADER_BYTES, read_wav

SMALL = ["--key-bits", "512", "--insecure"]


def _wav(path, seconds: float, rate: int = 8000, seed: int = 1):
    from scipy.io import wavfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * seconds)) / rate
    y = np.sin(2 * np.pi * 220 * t) + 0.05 * rng.normal(size=t.size)
    wavfile.write(path, rate, (y * 8000).astype(np.int16))
    return str(path)


@pytest.fixture
def no_decoding(monkeypatch):
    """Fail the test if any WAV file's samples are decoded."""
    import scipy.io.wavfile

    def refuse(*_, **__):
        raise AssertionError("the samples were read before the duration was checked")

    monkeypatch.setattr(scipy.io.wavfile, "read", refuse)


def _one_line(capsys, argv, *needles) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err  # progress lines aside
    for needle in needles:
        assert needle in err, err
    return err


def test_read_wav_checks_the_duration_from_the_header(tmp_path, no_decoding):
    path = _wav(tmp_path / "long.wav", 40.0)
    with pytest.raises(InvalidInputError, match=r"holds 40\.0 s of audio by its header, above X"):
        read_wav(path, 8000, max_samples=8000 * 30, limit="X")
    # resampling counts: 40 s at 8 kHz is 80,000 samples at 2 kHz... within 100,000
    with pytest.raises(AssertionError, match="samples were read"):  # passes the check
        read_wav(path, 2000, max_samples=100_000)


def test_an_open_size_and_a_late_data_chunk_are_checked_too(tmp_path, no_decoding):
    """A streaming writer's open data size (0xFFFFFFFF) counts what the file holds; a data
    chunk that starts beyond the first bytes read is checked once the file is read, still
    before decoding."""
    raw = bytearray(Path(_wav(tmp_path / "a.wav", 40.0)).read_bytes())
    data = raw.index(b"data")
    streaming = bytes(raw[: data + 4]) + struct.pack("<I", 0xFFFFFFFF) + bytes(raw[data + 8 :])
    (tmp_path / "streaming.wav").write_bytes(streaming)
    with pytest.raises(InvalidInputError, match="holds 40.0 s"):
        read_wav(tmp_path / "streaming.wav", 8000, max_samples=8000)
    pad = 2 * HEADER_BYTES
    late = bytes(raw[:data]) + b"LIST" + struct.pack("<I", pad) + b"\0" * pad + bytes(raw[data:])
    late = late[:4] + struct.pack("<I", len(late) - 8) + late[8:]
    (tmp_path / "late.wav").write_bytes(late)
    with pytest.raises(InvalidInputError, match="holds 40.0 s"):
        read_wav(tmp_path / "late.wav", 8000, max_samples=8000)


@pytest.mark.parametrize(
    "command",
    [
        ["keyword"],
        ["speaker", "identify"],
        ["spot", "--keyword", "seven"],
    ],
)
def test_recognition_commands_refuse_a_long_file_from_its_header(
    tmp_path, capsys, no_decoding, command
):
    path = _wav(tmp_path / "long.wav", 31.0)  # above the default 3,000 frames (30 s)
    argv = [*command, "--audio", path, *SMALL]
    err = _one_line(capsys, argv, "holds 31.0 s of audio by its header", "--max-frames 3,000")
    assert "--max-frames 3,000" in err  # the bound named is the default one
    err = _one_line(capsys, [*argv, "--max-frames", "500"], "--max-frames 500")
    assert "--max-frames 3,000" not in err  # and here the one given


def test_match_refuses_a_long_snippet_file_and_a_long_collection_recording(
    tmp_path, capsys, monkeypatch
):
    long = _wav(tmp_path / "long.wav", 12.0)
    argv = ["match", "--audio", long, "--max-seconds", "10", *SMALL]
    import scipy.io.wavfile

    real = scipy.io.wavfile.read
    decoded = []
    monkeypatch.setattr(scipy.io.wavfile, "read", lambda f: decoded.append(f) or real(f))
    _one_line(capsys, argv, "holds 12.0 s of audio by its header", "--max-seconds 10")
    assert not decoded
    folder = tmp_path / "collection"
    folder.mkdir()
    _wav(folder / "a.wav", 1.0)
    _wav(folder / "b.wav", 12.0)
    snippet = _wav(tmp_path / "snippet.wav", 0.5)
    argv = ["match", "--audio", snippet, "--collection", str(folder), "--max-seconds", "10"]
    err = _one_line(capsys, [*argv, *SMALL], "b.wav holds 12.0 s of audio by its header")
    assert "--max-seconds 10" in err
    assert len(decoded) == 2  # the snippet and a.wav: b.wav was refused from its header
    _one_line(capsys, ["match", "--audio", snippet, "--max-seconds", "1e9", *SMALL], "3600")


def test_keyword_model_releases_leave_out_long_recordings_unread(tmp_path, monkeypatch):
    """release hmm --keyword-models reads FSDD-named recordings; one longer than
    --max-frames is left out (the public record rule) without decoding it."""
    import scipy.io.wavfile

    from smc_hmm.dp.keyword_release import read_training_data

    folder = tmp_path / "recordings"
    folder.mkdir()
    _wav(folder / "3_alice_7.wav", 0.5)
    _wav(folder / "3_alice_8.wav", 40.0)
    real = scipy.io.wavfile.read
    decoded = []
    monkeypatch.setattr(scipy.io.wavfile, "read", lambda f: decoded.append(f) or real(f))
    data = read_training_data(folder, None, range(5), max_frames=3000)
    assert len(data["three"]) == 1 and len(decoded) == 1
    assert len(read_training_data(folder, None, range(5))["three"]) == 2
    # the command's option: bounded while parsing, one line
    code = main(["release", "hmm", "--keyword-models", "--data", str(folder), "--eps", "1",
                 "--out", str(tmp_path / "m.npz"), "--max-frames", "0"])  # fmt: skip
    assert code == 2
