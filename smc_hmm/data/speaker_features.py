"""Bundled utterance-level speaker features of the Free Spoken Digit Dataset.

``smc_hmm/data/fsdd/speaker_features.npz`` (made by ``scripts/make_speaker_features.py``)
holds, for each of the 2,500 FSDD recordings (5 speakers x 10 digits x indices 0-49), the
mean and the standard deviation over its frames of the 13 static MFCCs c0..c12 of
:class:`smc_hmm.features.FeaturePipeline` (raw, 26 floats), with the recording's speaker,
digit and index, and metadata recording the plaintext frame-level GMM baseline.  It serves
the DP speaker-identification experiment of the large-margin GMM classifiers
(``smc-hmm bench lmgmm-speaker``, ``docs/lmgmm.md``; thesis 003, section 4.1.2).  Derived
from the FSDD (commit 26eb9aa) and licensed CC BY-SA 4.0: ``smc_hmm/data/fsdd/NOTICE``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from smc_hmm.errors import ConfigError

FILE_NAME = "speaker_features.npz"
SPEAKERS = ("george", "jackson", "nicolas", "theo", "yweweler")
"""Speaker names, in label order (label s is ``SPEAKERS[s]``)."""

_MEMBERS = {"features", "speaker", "digit", "index", "speakers", "metadata"}


@dataclass(frozen=True)
class SpeakerFeatures:
    """``features`` (2500, 26) float64, ``speaker``/``digit``/``index`` (2500,) ints,
    ``speakers`` (names in label order) and the file's ``metadata``."""

    features: np.ndarray
    speaker: np.ndarray
    digit: np.ndarray
    index: np.ndarray
    speakers: tuple[str, ...]
    metadata: dict[str, Any]


def load_speaker_features() -> SpeakerFeatures:
    """Read the bundled file (no pickle); ConfigError if it is missing or malformed."""
    ref = resources.files("smc_hmm.data").joinpath("fsdd", FILE_NAME)
    try:
        with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as files:
            if set(files.files) != _MEMBERS:
                raise ConfigError(f"{FILE_NAME}: unexpected members {sorted(files.files)}")
            arrays = {name: files[name] for name in _MEMBERS}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the bundled {FILE_NAME}: {exc}") from None
    features = arrays["features"].astype(np.float64)
    n = features.shape[0]
    labels = {k: arrays[k].astype(np.int64) for k in ("speaker", "digit", "index")}
    if features.ndim != 2 or any(v.shape != (n,) for v in labels.values()):
        raise ConfigError(f"{FILE_NAME}: inconsistent shapes")
    return SpeakerFeatures(
        features,
        labels["speaker"],
        labels["digit"],
        labels["index"],
        tuple(str(s) for s in arrays["speakers"]),
        json.loads(str(arrays["metadata"])),
    )
