"""The suite's tiers (tests/tiers.py): ``python -m pytest -q`` runs the fast tier, the one documented
command the rest, together every test once; a test named alone runs without xdist workers."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from .conftest import REPO
from .tiers import FAST_TIER, REST, TIER_MARKS

README_COMMAND = 'pip install -e ".[test]" && python -m pytest -q'
REST_COMMAND = f'python -m pytest -q -m "{REST}"'


def test_every_test_is_in_exactly_one_tier_whatever_its_marks():
    for n in range(len(TIER_MARKS) + 1):
        for marks in itertools.combinations(TIER_MARKS, n):
            names = {mark: mark in marks for mark in TIER_MARKS}  # -m's words, as Python's booleans
            assert eval(FAST_TIER, {}, names) != eval(REST, {}, names), marks


def test_the_tier_marks_are_registered_and_the_rest_command_is_documented_and_run_by_ci():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert all(f'    "{mark}: ' in pyproject for mark in TIER_MARKS)  # in [tool.pytest.ini_options] markers
    ci = (REPO / ".ci" / "run").read_text()
    assert ci.index(README_COMMAND) < ci.index(REST_COMMAND)  # the README's command, then the rest
    assert README_COMMAND in (REPO / "README.md").read_text().splitlines()
    for doc in ("README.md", "docs/layout.md"):
        assert REST_COMMAND.removeprefix("python -m pytest -q ") in (REPO / doc).read_text(), doc


@pytest.mark.slow
def test_a_slow_test_is_left_out_by_default_and_run_by_the_rest():
    """The default selection, as ``python -m pytest -q`` makes it (no test named: the testpaths), on
    this file alone: the fast tier and the rest together collect each of its tests once."""

    def collected(*args: str) -> set[str]:
        proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "-o", "testpaths=tests/test_tiers.py", *args], cwd=REPO, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return {line.split("::")[1] for line in proc.stdout.splitlines() if line.startswith("tests/test_tiers.py::")}

    everything = {name for name in globals() if name.startswith("test_")}
    fast, rest = collected(), collected("-m", REST)
    assert not fast & rest and fast | rest == everything
    assert "test_a_slow_test_is_left_out_by_default_and_run_by_the_rest" in rest
    assert "test_every_test_is_in_exactly_one_tier_whatever_its_marks" in fast


@pytest.mark.slow
def test_a_test_named_alone_starts_no_workers_and_n_on_the_command_line_still_does():
    def run(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                               "tests/test_tiers.py::test_every_test_is_in_exactly_one_tier_whatever_its_marks"],
                              cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                              timeout=600)
        assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr
        return proc.stdout

    assert "workers" not in run()
    assert "2 workers" in run("-n", "2")  # the words xdist prints when it starts them
