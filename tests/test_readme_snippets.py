"""The README's Python snippets run as pasted: no hidden set-up, no
undocumented parameter; the tour's arithmetic prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.slow  # two 2048-bit key generations
@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_snippets_run_as_pasted(index):
    code = _python_blocks()[index]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md snippet {index}", "exec"), {"__name__": "__readme__"})
    printed = out.getvalue()
    if "forward.alice" in code:
        first = printed.splitlines()[0]
        values = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", first)]
        assert len(values) == 2 and all(v < 0 for v in values)  # two log-likelihoods
        assert all(len(line) <= 88 for line in printed.splitlines()[1:])
    if "mul_fixed" in code:
        assert "0.75" in printed and "15." in printed


def test_the_readme_names_every_command_and_states_its_durations():
    """The README's command list stays true (every `smc-hmm` command module is named),
    it states how long the demo and the tests take and how to run the quick subset, and
    it promises no measurement it has not made."""
    text = README.read_text(encoding="utf-8")
    commands = Path(__file__).resolve().parents[1] / "smc_hmm" / "cli"
    for path in commands.glob("*.py"):
        if path.stem not in ("__init__", "__main__", "common"):
            assert f"smc-hmm {path.stem}" in text, path.stem
    assert '-m "not slow"' in text and "smc-hmm demo` takes about" in text
    assert "DURATION_" not in text  # placeholders filled with measured figures
    assert "still to be run" not in text and "to be measured" not in text
