"""A refusal after units ran deletes nothing they computed: in an output folder this invocation
created, only what it wrote before the first unit (.hydra/, the log, the declaration) may go with a
refusal; from the first unit on, every result file and output stays, and the message names the folder.
One test per refusal that can come after units ran: pairing, a unit's fatal error, identity, analysis,
the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

SYN = ["+experiment=loss_ab", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
       "data.train_limit=64", "ab.seeds=[0,1,2]", "train.fn=tests.sequential_fns.paired_metric",
       "+train.kwargs.shift=0.0", "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.6",
       "repro.certificate=false"]


def _in_a_new_folder(tmp_path: Path, *overrides: str):
    """The run refused into a folder whose parent is new too: the topmost folder it created is tmp/new."""
    folder = tmp_path / "new" / "run"
    return folder, run_cli([*SYN, *overrides, f"hydra.run.dir={folder}"], cwd=tmp_path)


def _results(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.glob("runs/**/result.json"))


def _error(proc) -> str:
    return proc.stderr.rsplit("harness: error:", 1)[-1]


def test_a_pairing_refusal_keeps_every_result_and_names_their_folder(tmp_path):
    folder, proc = _in_a_new_folder(tmp_path, "train.fn=tests.workers_fns.unpaired")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "arms A and B have different init fingerprints" in proc.stderr
    assert _results(folder) == ["runs/seed=0/arm=A/result.json", "runs/seed=0/arm=B/result.json"]
    assert (folder / "harness.log").is_file() and (folder / "declaration.json").is_file()
    assert str(folder) in _error(proc)


def test_a_units_fatal_error_keeps_every_result_and_names_their_folder(tmp_path):
    folder, proc = _in_a_new_folder(tmp_path, "train.fn=tests.refusal_fns.usage_slip_at_seed")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "a usage slip found after training" in proc.stderr
    # seed 0 completed in both arms; seed 1's first arm failed (recorded) and stopped the experiment
    assert _results(folder) == ["runs/seed=0/arm=A/result.json", "runs/seed=0/arm=B/result.json",
                                "runs/seed=1/arm=A/result.json"]
    assert str(folder) in _error(proc)


def test_an_identity_refusal_keeps_every_result_and_names_their_folder(tmp_path, monkeypatch):
    # a sequential run stops when its config changes between batches: the first batch's last unit sets
    # the variable a config value is read from (tests/sequential_fns.py: sets_env)
    monkeypatch.delenv("HARNESS_TEST_TAG", raising=False)
    folder, proc = _in_a_new_folder(
        tmp_path, "train.fn=tests.sequential_fns.sets_env", "+train.kwargs.env_from_seed=2",
        "+train.kwargs.env_var=HARNESS_TEST_TAG", "+train.kwargs.tag=${oc.env:HARNESS_TEST_TAG,start}",
        "ab.sequential.enabled=true", "ab.sequential.min_seeds=3", "ab.sequential.max_seeds=5",
        "ab.seeds=[0,1,2,3,4]", "stats.margin=0.01", "ab.sequential.alpha=0.2",
        "ab.sequential.equivalence=false", "ab.sequential.futility=0")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "sequential run stopped: " in proc.stderr and "train.kwargs.tag: start -> changed" in proc.stderr
    assert len(_results(folder)) >= 6
    assert str(folder) in _error(proc)


def test_an_analysis_refusal_keeps_every_result_and_names_their_folder(tmp_path):
    folder, proc = _in_a_new_folder(tmp_path, "stats.metric=nosuch", "+stats.metrics.nosuch=max")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "The metric 'nosuch' is in none of the 6 results" in proc.stderr
    assert len(_results(folder)) == 6
    assert str(folder) in _error(proc)


def test_a_ledger_that_cannot_be_written_after_the_units_keeps_every_result_and_names_their_folder(tmp_path):
    not_a_file = tmp_path / "ledger-is-a-folder"
    not_a_file.mkdir()
    folder, proc = _in_a_new_folder(tmp_path, f"ledger.path={not_a_file}")
    said = proc.stdout + proc.stderr  # the warning is a log line
    assert "the claims were not written to the ledger" in said, said[-3000:]
    assert len(_results(folder)) == 6 and (folder / "analysis.json").is_file()
    assert f"the analysis in {folder} is complete" in said
