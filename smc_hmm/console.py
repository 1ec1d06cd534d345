"""Consoles for every command's output, and the end of standard output.

A leaf module (it imports only the standard library and, when a console is made, rich),
so the command line (:mod:`smc_hmm.cli`) and the benchmarks (:mod:`smc_hmm.bench`) share
one behaviour: a reader that closes standard output early (``smc-hmm ... | head -1``)
ends the output, not the run -- rich's own console would exit with code 1 and no
message -- and whatever is written afterwards goes to ``os.devnull``
(docs/running.md, "Output").
"""

from __future__ import annotations

import functools
import os
import sys

__all__ = ["console", "end_stdout", "stdout_closed", "table_console", "write_stdout"]


def console(stderr: bool = False):
    """A rich console; tables adapt to the width (terminal, COLUMNS, else 80).  A closed
    stream (``| head -1``) ends that stream's output and nothing else: the console goes
    quiet and the command goes on (rich's own console would exit with code 1)."""
    return _quiet_on_broken_pipe()(stderr=stderr)


@functools.cache
def _quiet_on_broken_pipe():
    from rich.console import Console

    class QuietOnBrokenPipe(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            if not self.stderr:
                end_stdout()

    return QuietOnBrokenPipe


#: standard output has been ended (:func:`end_stdout`)
_ENDED = False


def end_stdout() -> None:
    """Standard output was closed by its reader: everything written to it from now on (by
    any console, ``print``, or the interpreter's last flush) goes to ``os.devnull``."""
    global _ENDED
    _ENDED = True
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test's capture
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (lives until the process ends)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def stdout_closed() -> bool:
    """Whether standard output's reader has gone (a pipe whose reader closed polls as an
    error), or :func:`end_stdout` already ran."""
    import select

    if _ENDED:
        return True
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):
        return False
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def write_stdout(text: str) -> None:
    """``text`` on standard output, flushed; a closed standard output ends the output
    (:func:`end_stdout`), it is no error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        end_stdout()


def table_console(width: int):
    """A console on standard output for wide tables: ``COLUMNS`` wide if that is set, the
    terminal's width on a terminal, else ``width`` (a file or a pipe, read later)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return console()
    out = console()
    if out.is_terminal:
        return out
    return _quiet_on_broken_pipe()(width=width)
