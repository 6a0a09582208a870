"""What the README's install gives (issue 17, item 8.2): `pip install -e .` brings every import a
documented call needs, so ExperimentResult.to_pandas() works without a further install."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _dependencies() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}


def test_pandas_is_a_dependency_since_to_pandas_is_documented():
    assert "to_pandas()" in (REPO / "README.md").read_text()
    assert "pandas" in _dependencies()


def test_the_hf_extra_brings_accelerate_which_the_trainer_needs():
    """`pip install -e ".[hf]"` is what docs name for harness.hf; transformers' Trainer refuses to
    start without accelerate, so the extra brings both."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    hf = {re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0].lower() for dep in extras["hf"]}
    assert {"transformers", "accelerate"} <= hf
