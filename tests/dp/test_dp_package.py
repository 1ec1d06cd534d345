"""smc_hmm.dp's docstring names each of its modules (it had gone stale once)."""

from pathlib import Path

import smc_hmm.dp

DP = Path(smc_hmm.dp.__file__).parent


def test_the_package_docstring_names_every_module():
    doc = smc_hmm.dp.__doc__
    for path in DP.iterdir():
        if path.suffix == ".py" and path.stem != "__init__":
            assert f"smc_hmm.dp.{path.stem}" in doc, path.name
        elif (path / "__init__.py").is_file():
            assert f":mod:`smc_hmm.dp.{path.name}`" in doc, path.name
