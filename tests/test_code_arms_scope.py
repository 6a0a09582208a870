"""ab.factor=code run in process: what the run prepares (its arms, the environment its worker
processes read them from, the staged snapshots) ends with the run, and the caller's process is left
as it was -- for harness.run and for run_experiment alike, after a refusal too."""

from __future__ import annotations

import os
import tempfile

import pytest

import harness
from harness import HarnessError
from harness.config import compose
from harness.experiment.units import run_experiment

from .test_code_arms import FAST, PLAIN_LOSS, SMOOTHED, _fit, _run, project  # noqa: F401 - project: the fixture

ENV = "HARNESS_CODE_ARMS"


def _environ() -> dict:
    """os.environ, less what torch writes into it itself (its inductor's cache folder, set when first used)."""
    return {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}


def _staged(folder) -> list:
    return [p.name for p in folder.iterdir() if p.name.startswith("harness-code-")]


@pytest.fixture
def staging(tmp_path, monkeypatch):
    """Where the snapshots are staged before the units begin: a folder of the test's own."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.slow  # two in-process experiments of a tiny model, seconds
def test_a_code_arm_run_leaves_the_callers_environment_as_it_was(project, staging, monkeypatch):
    monkeypatch.setenv(ENV, "the caller's own value")
    (project / "proj" / "fit.py").write_text(_fit(SMOOTHED))
    before = _environ()
    done = harness.run(["+experiment=code_ab", *FAST], config_dir=project / "conf", out_dir=project / "outputs/a",
                       verbose=False)
    assert {r["arm"] for r in done.results} == {"A", "B"}
    assert _environ() == before
    assert _staged(staging) == []  # no staged snapshot lingers

    monkeypatch.delenv(ENV)
    before = _environ()
    cfg = compose(["+experiment=code_ab", *FAST], config_dirs=[str(project / "conf")])
    outcome = run_experiment(cfg, project / "outputs/b", log=lambda m: None, certify=False)
    assert len(outcome.results) == 6
    assert ENV not in os.environ and _environ() == before
    assert _staged(staging) == []


@pytest.mark.slow  # an in-process experiment refused after its arms were read
def test_a_refused_code_arm_run_leaves_nothing_behind(project, staging, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    before = _environ()
    (project / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS).replace("def fit(", "def fit_renamed("))
    with pytest.raises(HarnessError, match="ab.arms.B='WORKTREE', the code of that revision"):  # after its arms were read
        _run(project)
    assert _environ() == before
    assert _staged(staging) == []
