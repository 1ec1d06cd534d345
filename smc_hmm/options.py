"""Checks of command-line options that every command shares, before any work starts.

A leaf module (it imports only :mod:`smc_hmm.errors`), so the command line
(:mod:`smc_hmm.cli`), the benchmarks and the release functions of :mod:`smc_hmm.dp`, which
define options of their own, can all use it.

- :func:`check_output_path`: an output file can really be written (its folder exists and
  accepts a new file; an existing file opens for writing).  It tries, rather than asking
  ``os.access``, which says yes to root everywhere (a folder under ``/proc``, a read-only
  mount).  Nothing is left behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from smc_hmm.errors import ConfigError

__all__ = ["check_output_path"]


def check_output_path(path: str | os.PathLike | None, flag: str = "--json") -> None:
    """Refuse an output path that cannot be written (:class:`ConfigError`), before any
    work starts; nothing is created or changed (a probe file is removed at once)."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{flag} {path} is a folder; give a file name")
    folder = p.parent
    if not folder.exists():
        raise ConfigError(f"{flag} {path}: folder {folder} does not exist")
    if not folder.is_dir():
        raise ConfigError(f"{flag} {path}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".smc-hmm-write-check-")
    except OSError as e:
        raise ConfigError(
            f"{flag} {path}: cannot write in folder {folder} ({e.strerror or e})"
        ) from None
    os.close(fd)
    os.unlink(probe)
    if p.exists():
        try:
            with open(p, "ab"):  # append mode: opens for writing, changes nothing
                pass
        except OSError as e:
            raise ConfigError(f"{flag} {path}: not writable ({e.strerror or e})") from None
