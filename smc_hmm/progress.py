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


class Progress:
    """A ``ctx.progress(stage, done, total)`` callback that updates a :func:`status` line
    with the steps done and an estimate of the time left, at most every ``every``
    seconds: the cost model's ``estimate`` of the whole run (seconds) until a tenth of the
    steps is done, then the rate measured so far times the steps left."""

    def __init__(self, spinner, label: str, every: float = 2.0, clock=None, estimate=None):
        import time

        self.spinner, self.label, self.every = spinner, label, every
        self.estimate = estimate
        self.clock = clock or time.monotonic
        self.start: dict[str, tuple[float, int]] = {}
        self.last = -1e9

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        start, first = self.start.setdefault(stage, (now, done))
        if done < total and now - self.last < self.every:
            return
        self.last = now
        eta = ""
        if 10 * done >= total and first < done < total:
            eta = f", about {(now - start) / (done - first) * (total - done):.0f} s left"
        elif self.estimate is not None and done < total:
            eta = f", about {self.estimate * (1 - done / total):.0f} s left (cost model)"
        self.spinner.update(f"{self.label}: {stage} {done}/{total}{eta}")


class PhaseProgress(Progress):
    """The progress of a run whose steps are its phases (``ctx.phase``; speaker
    recognition, audio matching): a status line per phase with the phases begun of
    ``phases`` (the key holder's, in order) and, from the second on, the time left at the
    rate so far; ``ctx.progress`` reports inside a phase update it as :class:`Progress`
    does.  A phase not in ``phases`` (a protocol that grew one) is shown by name only."""

    def __init__(self, spinner, label: str, phases, clock=None):
        super().__init__(spinner, label, every=2.0, clock=clock)
        self.phases = tuple(phases)
        self.begun: float | None = None

    def phase(self, name: str) -> None:
        now = self.clock()
        self.begun = now if self.begun is None else self.begun
        if name not in self.phases:
            self.spinner.update(f"{self.label}: {name}")
            return
        k, n = self.phases.index(name), len(self.phases)
        eta = f", about {(now - self.begun) / k * (n - k):.0f} s left" if k else ""
        self.spinner.update(f"{self.label}: {name} (phase {k + 1} of {n}){eta}")
        self.last = now
