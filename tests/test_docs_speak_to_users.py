"""Docs, docstrings, comments, labels and examples speak to a user: they name goals and
files a user has, never the project's work items, work sessions or the paths of the
machine it was developed on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("smc_hmm", "protocols", "parties", "demos", "docs", "examples", "scripts", "tests")
TOP_FILES = ("README.md", "pyproject.toml")
#: a work item ("the metadata issue", "issue 26"), a work session ("session 3,"), a path of
#: the development machine or of its data folder beside the checkout
FORBIDDEN = {
    "an issue": re.compile(
        r"\bissues?\s*#?[0-9]+|\b(?:the|an?|this|that|its|our)\s+(?:[\w-]+\s+){0,2}issue\b",
        re.IGNORECASE,
    ),
    "a work session": re.compile(r"\bsession [0-9]+[,;)]", re.IGNORECASE),
    "a machine path": re.compile(r"/work/|shared/data|\.\./shared"),
}
#: files whose wording is being rewritten elsewhere; remove an entry once its file is clean
PENDING: set[str] = set()


def _texts():
    files = [ROOT / name for name in TOP_FILES]
    for folder in FOLDERS:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".toml")]
    for path in sorted(files):
        rel = path.relative_to(ROOT).as_posix()
        if path.is_file() and rel not in PENDING and path != Path(__file__).resolve():
            yield rel, path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_no_doc_or_comment_names_work_items_sessions_or_machine_paths(what):
    found = [
        f"{rel}:{number}: {line.strip()}"
        for rel, text in _texts()
        for number, line in enumerate(text.splitlines(), 1)
        if FORBIDDEN[what].search(line)
    ]
    assert not found, f"{what} named in:\n" + "\n".join(found)
