"""docs/architecture.md names every command, benchmark and script the project has (the
lists had gone stale once): adding one without documenting it fails here."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _row(folder: str) -> str:
    return next(line for line in DOC.splitlines() if line.startswith(f"| `{folder}"))


def test_every_command_module_is_listed():
    row = _row("smc_hmm/cli/")
    for path in (ROOT / "smc_hmm" / "cli").iterdir():
        if path.suffix == ".py" and path.stem not in ("__init__", "__main__", "common"):
            assert f"`{path.stem}`" in row, path.stem
        elif (path / "__init__.py").is_file():  # a command of several modules (release/)
            assert f"`{path.name}/`" in row, path.name
            for module in path.glob("*.py"):
                if module.stem != "__init__":
                    assert f"`{module.stem}`" in row, f"{path.name}/{module.name}"


def test_every_benchmark_is_listed():
    row = _row("smc_hmm/bench/")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for name in project["project"]["entry-points"]["smc_hmm.benchmarks"]:
        assert re.search(rf"[ (,]{re.escape(name)}[,)]", row), name


def test_every_script_is_listed():
    row = _row("scripts/")
    for path in (ROOT / "scripts").glob("*.py"):
        assert path.name in row, path.name
