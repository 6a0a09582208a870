"""A run refused before training leaves no folder behind (docs/failures.md: exit status 2 and
nothing is written), and a folder that existed before the refused run is left as it was: a finished
folder and its ledger byte for byte (no declaration replaced, no test reserved in the FDR stream)."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pytest

import harness
from harness import HarnessError
from tests.conftest import FAST, REPO, TEST_CONF, run_cli


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.slow
def test_a_refused_run_leaves_no_output_folder(tmp_path):
    # a _target_ refusal comes after the declaration was written: the worst case
    proc = run_cli([*FAST, "model._target_=nope.Nope"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "model._target_='nope.Nope'" in proc.stderr and "Nothing was run" in proc.stderr
    assert _files(tmp_path) == []


@pytest.mark.slow
def test_a_refusal_keeps_a_folder_that_existed_before(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("kept")
    proc = run_cli([*FAST, "train.epochs=0", f"hydra.run.dir={folder}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "train.epochs=0 must be an integer >= 1" in proc.stderr
    assert (folder / "notes.txt").read_text() == "kept"


# -- a refusal on a finished folder changes no byte of it, nor of its ledger -------------------------

SYN = ["+experiment=loss_ab", "workers=1", "logger=none", "progress=false", "data.train_limit=64",
       "determinism.threads=1", "repro.certificate=false", "train.fn=tests.sequential_fns.paired_metric",
       "+train.kwargs.shift=0.0", "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=4.0",
       "ab.seeds=[0,1,2]", "stats.margin=null", "stats.bootstrap_resamples=999"]
TOY = REPO / "tests" / "command_scripts" / "toy.py"
COMMAND = ["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
           f"train.cmd=[{sys.executable},{TOY}]", "ab.seeds=[0,1,2]", "repro.certificate=false"]


def _bytes_under(*roots: Path) -> dict:
    """Every file under ``roots`` -> the sha256 of its bytes."""
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished experiment whose level came from an online FDR stream (LOND) in a ledger of its own,
    and a finished command-arm experiment: (folder, ledger folder, overrides, config_dir) each."""
    tmp = tmp_path_factory.mktemp("finished")
    ledger = tmp / "ledger"
    ledger.mkdir()
    fdr = [*SYN, "stats.fdr.method=lond", f"ledger.path={ledger / 'ledger.sqlite'}"]
    harness.run(fdr, out_dir=tmp / "fdr", verbose=False)
    command = [*COMMAND, f"ledger.path={ledger / 'command.sqlite'}"]
    harness.run(command, out_dir=tmp / "command", config_dir=TEST_CONF, verbose=False)
    return {"fdr": (tmp / "fdr", ledger, fdr, None), "command": (tmp / "command", ledger, command, str(TEST_CONF))}


@pytest.mark.slow
@pytest.mark.parametrize("which, refused, said", [
    # a declaration that changes (the margin) with a keyword the training function does not take
    ("fdr", ["+train.kwargs.nosuch=1", "stats.margin=0.5"], "train.kwargs.nosuch"),
    ("command", ["train.timeout_s=-1", "stats.margin=0.5"], "train.timeout_s=-1"),
    # the ledger refuses to give a level
    ("fdr", ["ledger.enabled=false", "stats.margin=0.5"], "ledger.enabled=false"),
])
def test_a_refusal_on_a_finished_folder_changes_no_byte_of_it_nor_of_its_ledger(finished, which, refused, said):
    folder, ledger, overrides, config_dir = finished[which]
    before = _bytes_under(folder, ledger)
    assert (folder / "declaration.json").is_file() and (folder / "analysis.json").is_file()
    with pytest.raises(HarnessError, match=re.escape(said)):
        harness.run([*overrides, *refused], out_dir=folder, config_dir=config_dir, verbose=False)
    assert _bytes_under(folder, ledger) == before
    assert not (folder / "superseded").exists()


def test_a_condition_refused_by_the_preflight_is_refused_before_any_condition_runs_or_is_declared(tmp_path):
    # the second condition passes a keyword the training function does not take: found by the full preflight
    with pytest.raises(HarnessError, match=r"train.kwargs.nosuch") as e:
        harness.run([*SYN, "+train.kwargs.sd=1.0", "ab.conditions={a: ['+train.kwargs.sd=0.3'], b: ['+train.kwargs.nosuch=1']}"],
                    out_dir=tmp_path / "exp", verbose=False)
    assert "Nothing was run" in str(e.value)
    assert _bytes_under(tmp_path) == {}


@pytest.mark.slow
def test_a_command_line_refusal_on_a_finished_folder_puts_hydras_files_and_the_log_back(tmp_path):
    folder = tmp_path / "exp"
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    run = [*SYN, "stats.fdr.method=lond", f"ledger.path={ledger / 'ledger.sqlite'}", f"hydra.run.dir={folder}"]
    done = run_cli(run, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    before = _bytes_under(folder, ledger)
    assert (folder / ".hydra" / "config.yaml").is_file() and (folder / "harness.log").is_file()
    proc = run_cli([*run, "+train.kwargs.nosuch=1", "stats.margin=0.5"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "train.kwargs.nosuch" in proc.stderr and "Nothing was run" in proc.stderr
    assert _bytes_under(folder, ledger) == before
