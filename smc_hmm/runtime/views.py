"""What each party saw: every message it received, written out for a user to check the
privacy claims themselves (``--views DIR``; ``docs/views.md``).

A party's view is the list of (peer, tag, payload) its context recorded
(``simulate(record_views=True)``, ``PartyContext(record=True)``).  For each message this
module writes the peer, the tag, its size on the wire where known, and for every field:

* ``decrypted`` -- a ciphertext array under the party's *own* key: the integers it
  decrypts (with the array's public scale), i.e. exactly the blinded or masked values
  its protocol's docstring declares it learns;
* ``ciphertext`` -- under someone else's key: shape and key fingerprint only (opaque);
* ``clear`` -- a value sent in clear: by the metadata rule it is a *declared* public or
  revealed field of the message (``smc_hmm.messages``), never anything else;
* ``public key`` and ``bytes`` (DGK ciphertexts, or opened masked values: their
  declarations say which).

Nothing here changes a run: the views are what the parties already received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from smc_hmm.crypto import CipherArray, PrivateKey, PublicKey
from smc_hmm.errors import ConfigError


def describe_field(payload, private_key: PrivateKey | None) -> Any:
    """One field of a received message, as :mod:`this module's docstring <smc_hmm.runtime.views>`
    describes."""
    if isinstance(payload, CipherArray):
        own = private_key is not None and payload.public_key.n == private_key.public_key.n
        out = {
            "kind": "decrypted" if own else "ciphertext",
            "shape": list(payload.shape),
            "scale": payload.scale,
            "key": payload.public_key.fingerprint.hex(),
        }
        if own:
            out["values"] = [int(v) for v in np.asarray(payload.decrypt_ints(private_key)).ravel()]
        return out
    if isinstance(payload, PublicKey):
        return {"kind": "public key", "bits": payload.bits, "key": payload.fingerprint.hex()}
    if isinstance(payload, bytes | bytearray):
        return {"kind": "bytes", "length": len(payload)}
    if isinstance(payload, list | tuple) and any(
        isinstance(x, CipherArray | PublicKey | bytes) for x in payload
    ):
        return [describe_field(x, private_key) for x in payload]
    return {"kind": "clear", "value": _jsonable(payload)}


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def describe_view(received, private_key: PrivateKey | None = None) -> list[dict]:
    """Every message of one party's view, in the order it received them."""
    return [
        {"from": peer, "tag": tag, "fields": describe_field(payload, private_key)}
        for peer, tag, payload in received
    ]


def write_views(directory, views: dict, keys: dict | None = None) -> list[Path]:
    """Write ``DIR/<party>.json`` for every party's view; ``keys`` maps a party to the key
    pair it holds (its own ciphertexts are shown decrypted).  Returns the files written."""
    if views is None:
        raise ConfigError("no views were recorded (run with record_views=True)")
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--views {directory}: {e.strerror or e}") from e
    written = []
    for party, received in views.items():
        keypair = (keys or {}).get(party)
        private_key = keypair[1] if keypair else None
        path = directory / f"{party}.json"
        document = {
            "party": party,
            "holds_key": private_key is not None,
            "messages": describe_view(received or [], private_key),
        }
        try:
            path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"--views {directory}: cannot write {path.name}: {e}") from e
        written.append(path)
    return written
