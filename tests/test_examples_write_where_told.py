"""Every example writes only where it is told (a new-user defect: ``dp_lmgmm.py --quick``
overwrote two committed figures in ``docs/``): no output option defaults into the
repository, and the one that draws from saved JSON writes its figure into ``--out``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _output_defaults(path: Path) -> list[tuple[str, str]]:
    """(option, default source) of every ``--out``/``--png``/``--json`` option."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if not any(n in ("--out", "--png", "--json") for n in names):
            continue
        for kw in node.keywords:
            if kw.arg == "default":
                out.append((names[0], ast.unparse(kw.value)))
    return out


def test_no_output_option_defaults_into_the_repository():
    seen = 0
    for path in sorted(EXAMPLES.glob("*.py")):
        for option, default in _output_defaults(path):
            seen += 1
            assert "docs" not in default and "REPO" not in default and "parents" not in default, (
                f"{path.name} {option} defaults to {default}"
            )
    assert seen >= 6  # the examples that draw figures


def test_dp_lmgmm_draws_its_figures_into_out(tmp_path):
    points = [{"eps": e, "eps_total": 2 * e, "error_mean": 0.2, "error_sem": 0.01}
              for e in (0.1, 1.0)]  # fmt: skip
    saved = {
        "params": {"runs": 2},
        "results": {
            "curves": {"objective": points},
            "non_private_error": 0.05,
            "generative_error": 0.1,
        },
    }
    inputs = []
    for name in ("synthetic", "speaker"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(saved))
        inputs.append(str(path))
    out = tmp_path / "figures"
    out.mkdir()
    before = {p: p.stat().st_mtime_ns for p in (EXAMPLES.parent / "docs").glob("lmgmm-*.png")}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "dp_lmgmm.py"), "--from-json", *inputs, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"lmgmm-figure-4-4.png", "lmgmm-speaker.png"}
    after = {p: p.stat().st_mtime_ns for p in (EXAMPLES.parent / "docs").glob("lmgmm-*.png")}
    assert after == before  # the committed figures are untouched


def test_dp_baum_welch_quick_figure_shows_its_whole_title(tmp_path):
    """``dp_baum_welch.py --quick`` draws one column, 4.2 inches wide: its one-line title
    was clipped at both sides; now it wraps to the figure's width."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dp_baum_welch", EXAMPLES / "dp_baum_welch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    curve = {"last": [0.5, 0.7, 0.9], "every": [0.4, 0.6, 0.8]}
    results = {("dice2", 10, 100): {"epsilons": [0.1, 1.0, 10.0], "mean": curve, "skeleton": 0.3}}
    fig = module.plot(results, tmp_path / "figure.png")
    title = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert title.x0 >= 0 and title.x1 <= fig.bbox.x1 and title.y1 <= fig.bbox.y1
    assert (tmp_path / "figure.png").is_file()


def test_no_example_prints_a_raw_load_average_tuple():
    """dp_aggregate.py and federated_dp_baum_welch.py printed "load average (1.52, 0.9,
    0.71)", Python's tuple; they now print smc_hmm.bench.common.load_average()'s words."""
    import re

    from smc_hmm.bench.common import load_average

    for path in sorted(EXAMPLES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                text = ast.unparse(node)
                assert "getloadavg()}" not in text, f"{path.name}: {text}"
    assert re.fullmatch(
        r"load average \d+\.\d / \d+\.\d / \d+\.\d \(1 / 5 / 15 min\) on \d+ cores", load_average()
    )
