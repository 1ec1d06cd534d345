"""Principal eigenvector of the digits data split over four owners, as six OS processes.

Thesis 4.1.1 (:mod:`protocols.eigenvector`): scikit-learn's bundled digits
(1,797 samples x 64 pixel features, values 0..16; no download) in the
thesis's orientation: M is k = 64 features (rows) x n = 1,797 samples
(columns), and owner i holds its own quarter of the samples, A_i (64 x ~450).
Four owners, the arbitrator Trent and the key authority run as separate
processes over mutual TLS (``smc-hmm launch``).

``--mode private`` (the default, :mod:`protocols.eigenvector.private`): the key
authority deals two shares of the decryption key (to Trent and the first owner)
and leaves; the power iteration runs on ciphertexts and nobody sees an
iterate; each owner ends with its share of the eigenvector only.  ``--mode
thesis``: the thesis's protocol with every hardening (the owners hold the key;
Trent's scaling, padding, decoys with p = ``--decoy-p``), its 64-entry vectors
packed as many per ciphertext as the key holds.  ``--centred`` subtracts the
mean of every feature first (PCA proper: a small eigengap, many more rounds).
Each owner prints its share of the eigenvector of M^T M; this script gathers
them and compares with numpy's.

All in one go (writes DIR, launches, checks)::

    PYTHONPATH=. python examples/eigenvector_digits.py --dir /tmp/eig
    PYTHONPATH=. python examples/eigenvector_digits.py --dir /tmp/eig --key-bits 1024 --insecure
    PYTHONPATH=. python examples/eigenvector_digits.py --dir /tmp/eig --mode thesis

Or step by step::

    PYTHONPATH=. python examples/eigenvector_digits.py --dir /tmp/eig --setup
    # writes /tmp/eig: certs/ (CA and one certificate per party), p1.npy .. p4.npy (each
    # owner's private columns), parties.toml and expected.npy (numpy's eigenvector)
    smc-hmm launch --config /tmp/eig/parties.toml
    # or one process per terminal (or machine: edit host/port in parties.toml), e.g.
    smc-hmm party --role trent --config /tmp/eig/parties.toml

(``smc-hmm`` is ``python -m smc_hmm.cli`` when the package is installed.)
``[protocol] reveal_to_trent = true`` in parties.toml makes Trent print the
gathered vector too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from protocols import eigenvector
from smc_hmm.runtime import launch, write_config

OWNERS = 4


def digits_blocks(owners: int, centred: bool = False) -> tuple[np.ndarray, list[np.ndarray]]:
    from sklearn.datasets import load_digits

    m = load_digits().data.T  # 64 features x 1,797 samples
    if centred:
        m = m - m.mean(axis=1, keepdims=True)  # still within [-16, 16]
    return m, [m[:, s] for s in np.array_split(np.arange(m.shape[1]), owners)]


def setup(
    directory: Path,
    key_bits: int,
    insecure: bool,
    owners: int,
    decoy_p: float,
    mode: str = "private",
    centred: bool = False,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    m, blocks = digits_blocks(owners, centred)
    names = [f"p{i + 1}" for i in range(owners)]
    parties: dict[str, dict] = {
        "authority": {"kind": "key_authority"},
        "trent": {"kind": "trent"},
    }
    for name, block in zip(names, blocks):
        np.save(directory / f"{name}.npy", block)
        parties[name] = {"kind": "data_owner", "data": f"{name}.npy"}
    _, _, vt = np.linalg.svd(m, full_matrices=False)
    np.save(directory / "expected.npy", vt[0])
    params = {
        "owners": names,
        "cols": [b.shape[1] for b in blocks],
        "rows": m.shape[0],
        "max_abs": 16.0,
        "mode": mode,
        "max_rounds": 400,
    }
    if mode == "thesis":
        params["decoy_p"] = decoy_p
        # pack the 64-entry vectors into as few ciphertexts as the key holds (public: key size)
        params["slots"] = eigenvector.ThesisParams.from_config(params).max_slots(key_bits)
    return write_config(
        directory / "parties.toml",
        "eigenvector",
        parties,
        params=params,
        key_bits=key_bits,
        insecure=insecure,
        timeout=300,
        deadline=1800,
    )


def check(directory: Path, result, owners: int) -> float:
    x = np.concatenate([np.asarray(result[f"p{i + 1}"]) for i in range(owners)])
    v = np.load(directory / "expected.npy")
    return abs(float(x @ v)) / (np.linalg.norm(x) * np.linalg.norm(v))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="where to write the run")
    parser.add_argument("--setup", action="store_true", help="only write the run, do not launch")
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--insecure", action="store_true", help="allow keys below 2048 bits")
    parser.add_argument("--owners", type=int, default=OWNERS)
    parser.add_argument("--mode", choices=eigenvector.MODES, default="private")
    parser.add_argument("--centred", action="store_true", help="subtract each feature's mean")
    parser.add_argument("--decoy-p", type=float, default=0.8, help="thesis mode only")
    args = parser.parse_args(argv)
    config = setup(
        args.dir, args.key_bits, args.insecure, args.owners, args.decoy_p, args.mode, args.centred
    )
    print(f"wrote {config}")
    if args.setup:
        return 0
    t0 = time.perf_counter()
    result = launch(config, progress=print)
    elapsed = time.perf_counter() - t0
    cosine = check(args.dir, result, args.owners)
    trent = result["trent"]
    decoys = f" ({trent['decoys']} decoys)" if args.mode == "thesis" else ""
    print(
        f"{args.mode} mode, {args.owners} owners, Trent and the key authority as "
        f"{args.owners + 2} processes over mutual TLS, {args.key_bits}-bit keys: "
        f"{trent['rounds']} rounds{decoys} in {elapsed:.1f} s (key generation and start-up "
        f"included); 1 - cosine to numpy's eigenvector: {max(0.0, 1 - cosine):.1e}"
    )
    result.cost.render()
    return 0 if cosine >= 1 - 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
