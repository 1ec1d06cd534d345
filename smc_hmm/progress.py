"""Say what a long step is doing, on a terminal or not.

On a terminal :func:`status` shows rich's spinner, which disappears when the step ends.
Anywhere else (a pipe, a log file, CI) the spinner is invisible, so a slow step -- key
generation, a protocol run -- would look like a hang: there it writes one line per step
(and per update) to standard error instead, leaving standard output to the results.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _Lines:
    """The non-terminal stand-in for rich's ``Status``: each update is one line."""

    def update(self, message: str) -> None:
        print(f"smc-hmm: {message} ...", file=sys.stderr, flush=True)


@contextmanager
def status(console, message: str) -> Iterator[object]:
    """``console.status(message)`` on a terminal, else one line on standard error.

    Yields an object with ``update(message)``, like rich's ``Status``.
    """
    if console.is_terminal:
        with console.status(message) as spinner:
            yield spinner
    else:
        lines = _Lines()
        lines.update(message)
        yield lines
