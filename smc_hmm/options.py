"""Checks of command-line options that every command shares, before any work starts.

A leaf module (it imports only :mod:`smc_hmm.errors`), so the command line
(:mod:`smc_hmm.cli`), the benchmarks and the release functions of :mod:`smc_hmm.dp`, which
define options of their own, can all use it.

- :func:`check_output_path`: an output file can really be written (its folder exists and
  accepts a new file; an existing file opens for writing).  It tries, rather than asking
  ``os.access``, which says yes to root everywhere (a folder under ``/proc``, a read-only
  mount).  Nothing is left behind.
- :func:`option_type`: an argparse ``type=`` built from a library validator, so a bad
  number is refused while the command line is parsed, before any key is generated, any
  offline phase run or any recording read.  A refused value raises
  :class:`OptionValueError`, which carries the validator's typed error; a parser of class
  :class:`ArgumentParser` (the ``smc-hmm`` parser) raises that typed error itself, which
  the command line prints as it prints every typed error (one line, exit code 2);
  :func:`add_checked` adds an option of that type, naming its flag once.
- :func:`check_workers` (``--workers`` of every command and benchmark, and
  :meth:`smc_hmm.compute.Compute.processes`): an integer from 1 to
  :data:`MAX_WORKERS_PER_CORE` x the machine's cores; :data:`WORKERS` is its option type.
- :func:`check_timeout` (``--timeout``): seconds, finite, > 0 and at most
  :data:`MAX_TIMEOUT` (a week; beyond about 9.2e9 s Python's waits overflow);
  :data:`TIMEOUT` is its option type.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from smc_hmm.errors import ConfigError, InvalidInputError, SmcHmmError

__all__ = [
    "ArgumentParser",
    "MAX_TIMEOUT",
    "MAX_WORKERS_PER_CORE",
    "TIMEOUT",
    "WORKERS",
    "OptionValueError",
    "add_checked",
    "check_output_path",
    "check_timeout",
    "check_workers",
    "max_workers",
    "option_type",
]

T = TypeVar("T")

#: the most lanes ``--workers`` may ask for, per core of the machine
MAX_WORKERS_PER_CORE = 4
#: the longest ``--timeout``, seconds (a week)
MAX_TIMEOUT = 7 * 24 * 3600.0


def check_output_dir(path: str | os.PathLike | None, flag: str) -> None:
    """Refuse an output folder that cannot be created or written (:class:`ConfigError`),
    before any work starts: an existing folder must take a file, a new one's parent must."""
    if not path:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {path} is a file; give a folder")
    folder = p if p.exists() else p.parent
    if not folder.is_dir():
        raise ConfigError(f"{flag} {path}: folder {folder} does not exist")
    check_output_path(folder / "views.probe", flag)


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


# -- option types ------------------------------------------------------------------------------


class OptionValueError(argparse.ArgumentTypeError):
    """An option's value refused by its type function (:func:`option_type`); ``error`` is
    the validator's typed error, which the ``smc-hmm`` parser raises in place of argparse's
    usage message."""

    def __init__(self, error: SmcHmmError) -> None:
        super().__init__(str(error))
        self.error = error


class ArgumentParser(argparse.ArgumentParser):
    """argparse, except that a value refused by a validating ``type=`` (:func:`option_type`)
    raises the validator's typed error instead of printing the usage and exiting; every
    other usage error is argparse's (exit code 2).  Sub-parsers inherit the class."""

    def error(self, message: str):  # type: ignore[override]
        handled = sys.exc_info()[1]  # argparse calls error() while handling ArgumentError
        refused = getattr(handled, "__context__", None)
        if isinstance(handled, argparse.ArgumentError) and isinstance(refused, OptionValueError):
            raise refused.error from None
        super().error(message)


def option_type(
    check: Callable[[Any, str], T], name: str, convert: Callable[[str], Any] = float
) -> Callable[[str], T]:
    """An argparse ``type=``: ``check(convert(text), name)``; text that ``convert`` cannot
    read raises a :class:`ConfigError`, a value ``check`` refuses its own typed error, both
    inside :class:`OptionValueError`."""

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except (TypeError, ValueError):
            kind = "an integer" if convert is int else "a number"
            raise OptionValueError(ConfigError(f"{name} must be {kind}, got {text!r}")) from None
        if isinstance(value, float) and math.isinf(value) and "inf" not in text.lower():
            raise OptionValueError(
                ConfigError(f"{name} {text} is beyond the range of a floating-point number")
            )
        try:
            return check(value, name)
        except SmcHmmError as error:
            raise OptionValueError(error) from None

    parse.__name__ = name.lstrip("-").replace("-", "_")
    return parse


def add_checked(
    add: Callable[..., Any],
    flag: str,
    check: Callable[[Any, str], Any],
    *,
    convert: Callable[[str], Any] = float,
    **kwargs: Any,
) -> Any:
    """``add(flag, type=option_type(check, flag, convert), **kwargs)`` (``add``: a parser's
    or group's ``add_argument``): an option checked while the command line is parsed, its
    flag named once, so that the refusal names the option it came from."""
    return add(flag, type=option_type(check, flag, convert), **kwargs)


def max_workers() -> int:
    """The most lanes a party may ask for: :data:`MAX_WORKERS_PER_CORE` x the cores."""
    return MAX_WORKERS_PER_CORE * (os.cpu_count() or 1)


def check_workers(value: object, name: str = "workers") -> int:
    """``value`` if it is an integer from 1 to :func:`max_workers`, else
    :class:`~smc_hmm.errors.InvalidInputError` (0 no longer means "all cores": leave the
    option out for that)."""
    limit = max_workers()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(f"{name} must be an integer, got {value!r}")
    if not 1 <= value <= limit:
        raise InvalidInputError(
            f"{name} must be from 1 to {limit} ({MAX_WORKERS_PER_CORE} per core of this "
            f"machine's {os.cpu_count() or 1}), got {value}"
        )
    return int(value)


def check_timeout(value: object, name: str = "timeout") -> float:
    """``value`` (seconds) if it is finite, > 0 and at most :data:`MAX_TIMEOUT`, else
    :class:`~smc_hmm.errors.InvalidInputError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidInputError(f"{name} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise InvalidInputError(
            f"{name} must be a number of seconds in (0, {MAX_TIMEOUT:.0f}], got {value!r}"
        )
    return seconds


#: ``type=`` of every ``--workers``
WORKERS = option_type(check_workers, "--workers", int)
#: ``type=`` of every ``--timeout``
TIMEOUT = option_type(check_timeout, "--timeout")
