"""The layout of the command line: one module per command, demos and benchmarks as plugins."""

import ast
import json
import subprocess
import sys
from pathlib import Path

from smc_hmm import cli
from smc_hmm.cli import main


def test_every_command_is_one_module_with_help_configure_and_run():
    commands = set(cli.COMMANDS)
    assert commands == {
        "demo",
        "party",
        "launch",
        "serve",
        "keyword",
        "speaker",
        "spot",
        "digits",
        "match",
        "bench",
        "cost",
        "certs",
        "release",
    }
    for name, module in cli.COMMANDS.items():
        assert module.__name__ == f"smc_hmm.cli.{name}"
        assert isinstance(module.HELP, str) and module.HELP
        assert callable(module.configure) and callable(module.run)
        # no command imports another: only smc_hmm.cli.common is shared (a command that
        # is a package, release/, in none of its modules)
        source = Path(module.__file__)
        files = sorted(source.parent.glob("*.py")) if source.name == "__init__.py" else [source]
        imported = set()
        for node in (n for f in files for n in ast.walk(ast.parse(f.read_text()))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                imported.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
        others = {f"smc_hmm.cli.{c}" for c in commands if c != name}
        assert not imported & others, (name, imported & others)


def test_python_dash_m_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "smc_hmm.cli", "demo", "--list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert {"forward", "keyword", "secure-sum"} <= set(done.stdout.replace("(default)", "").split())


def test_bench_lanes_runs_with_small_options(tmp_path, capsys):
    out = tmp_path / "lanes.json"
    argv = ["bench", "lanes", "--key-bits", "512", "--insecure", "--terms", "20", "--rounds", "1"]
    assert main([*argv, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["unit"] for r in rows] == ["us", "ms", "ms"]
    assert all(r["ours"] > 0 for r in rows)
    assert rows[1]["baseline"] > 0 and rows[2]["baseline"] > 0
    assert "lanes benchmark, 512-bit keys" in capsys.readouterr().out


def test_bench_tables_follow_columns_and_progress_goes_to_stderr(capsys, monkeypatch):
    """The bench table was 150 columns whatever COLUMNS said, and its progress lines went
    to standard output: now the table takes COLUMNS (or the terminal's width; 150 in a
    file or a pipe) and the progress goes to standard error."""
    from smc_hmm.bench.common import start
    from smc_hmm.console import table_console

    monkeypatch.setenv("COLUMNS", "90")
    argv = ["bench", "forward", "--key-bits", "512", "--insecure", "--states", "2"]
    assert main([*argv, "--symbols", "2", "--length", "3"]) == 0
    captured = capsys.readouterr()
    assert "forward benchmark" in captured.out and "... generating" in captured.err
    assert max(len(line) for line in captured.out.splitlines()) <= 90
    assert "..." not in captured.out
    monkeypatch.delenv("COLUMNS")
    assert table_console(150).width == 150  # not a terminal: the bench's own width
    import argparse

    args = argparse.Namespace(key_bits=512, insecure=True, allow_large_keys=False)
    assert start(args, width=120)[0].width == 120


def test_help_imports_no_heavy_module():
    """``smc-hmm --help`` took 2.3 s importing every command's libraries (scipy, the
    crypto layer, the DP classifiers, cryptography); the commands now import them when
    they run, so the help needs none of them."""
    code = (
        "import contextlib, io, sys\n"
        "from smc_hmm.cli import main\n"
        "for argv in (['--help'], ['keyword', '--help'], ['release', 'lmgmm', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main(argv) == 0\n"
        "heavy = ('scipy', 'smc_hmm.crypto', 'cryptography', 'gmpy2', 'smc_hmm.dp.lmgmm',\n"
        "         'smc_hmm.data', 'smc_hmm.hmm', 'smc_hmm.runtime', 'rich', 'sklearn')\n"
        "print(sorted({m for m in sys.modules if m.startswith(heavy)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
