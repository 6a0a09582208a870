"""Tests never write into a user's real files: the claims of the tests' experiments go to a ledger of
the session's own, never to the checkout's outputs/ledger.sqlite (the default ledger of a project run
from there) nor to the ledger a user's $HARNESS_LEDGER names (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness.ledger.store import Ledger

from .conftest import REPO, checkout_state, run_cli
from .test_ledger_run import SYN


def test_the_sessions_ledger_is_its_own_whatever_the_environment_names(tmp_path):
    mine = tmp_path / "my-project-ledger.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_LEDGER": str(mine)}
    proc = subprocess.run([sys.executable, "-c", "import os, tests.conftest; print(os.environ['HARNESS_LEDGER'])"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    used = Path(proc.stdout.strip())
    assert used != mine and REPO not in used.parents, used


@pytest.mark.slow
def test_a_run_started_as_the_tests_start_one_claims_in_the_sessions_ledger(tmp_path):
    """A run from a project folder with no ledger.path (docs/statistics.md's default there: its outputs/ledger.sqlite)."""
    project, out = tmp_path / "project", tmp_path / "run"
    project.mkdir()
    proc = run_cli([*SYN, f"hydra.run.dir={out}"], cwd=project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (project / "outputs").exists()
    claims = Ledger(os.environ["HARNESS_LEDGER"]).claims()
    assert any(c["folder"] == str(out.resolve()) for c in claims)


def test_the_session_end_check_sees_a_ledger_made_or_changed_in_the_checkout(tmp_path):
    (tmp_path / "outputs").mkdir()
    before = checkout_state(tmp_path)
    (tmp_path / "outputs" / "ledger.sqlite").write_bytes(b"x")
    made = checkout_state(tmp_path)
    assert made != before
    (tmp_path / "outputs" / "ledger.sqlite").write_bytes(b"xy")
    assert checkout_state(tmp_path) != made
