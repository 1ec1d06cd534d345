"""What the scripts that regenerate the bundled speech data share.

Import it before numpy (``import _common`` heads the scripts' third-party imports): it
keeps BLAS to one thread per process, since their work is parallel over models and
multi-threaded BLAS on the small (39 x 39) triangular solves of full covariances is ~10x
slower.  Then the FSDD folder of a command line, the left-to-right flat start of the
word models, and the summary of a Baum-Welch run; and where the bundled data lives.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from smc_hmm.data import fsdd_dir  # noqa: E402
from smc_hmm.errors import ConfigError  # noqa: E402

#: the folder of the bundled speech data the scripts regenerate (their default --out)
BUNDLED = Path(__file__).resolve().parents[1] / "smc_hmm" / "data" / "fsdd"


def fsdd_folder(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """The FSDD folder the command line names (``args.fsdd``, else FSDD_DIR), resolved;
    a usage error if there is none."""
    try:
        return fsdd_dir(args.fsdd).resolve()
    except ConfigError as e:
        parser.error(str(e))


def left_to_right_start(
    sequences: list[np.ndarray], states: int, self_loop: float = 0.5
) -> tuple[list[np.ndarray], np.ndarray]:
    """A left-to-right flat start: every sequence cut into ``states`` equal segments,
    state j's frames are the j-th segments (returned per state, for its moments); and
    the transitions a_jj = ``self_loop``, a_j,j+1 = 1 - ``self_loop``, the last state
    absorbing.  Baum-Welch keeps the zeros of A, so a trained model stays left-to-right."""
    segments: list[list[np.ndarray]] = [[] for _ in range(states)]
    for x in sequences:
        bounds = np.linspace(0, len(x), states + 1).astype(int)
        for j in range(states):
            segments[j].append(x[bounds[j] : bounds[j + 1]])
    transmat = np.zeros((states, states))
    for j in range(states - 1):
        transmat[j, j], transmat[j, j + 1] = self_loop, 1.0 - self_loop
    transmat[-1, -1] = 1.0
    return [np.concatenate(s) for s in segments], transmat


def fit_summary(result, sequences: list[np.ndarray]) -> tuple[int, float, int]:
    """A Baum-Welch result on ``sequences``: (iterations, final log-likelihood per frame,
    frames)."""
    frames = sum(len(x) for x in sequences)
    return len(result.history) - 1, float(result.history[-1] / frames), frames
