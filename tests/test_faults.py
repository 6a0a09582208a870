"""Faults a user meets: Ctrl-C, a full disk, a bad value in a sweep, a whole-arms override."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

import harness
from harness import HarnessError
from harness.results import load_tree

from .conftest import FAST, REPO, run_cli


@pytest.mark.slow
def test_ctrl_c_says_what_is_safe_and_how_to_resume_and_resume_works(tmp_path):
    out = tmp_path / "out"
    args = [*FAST, "train.max_steps=150", "data.train_limit=256", "repro.certificate=false", f"hydra.run.dir={out}"]
    env = {k: v for k, v in __import__("os").environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = out / "runs" / "seed=0" / "arm=A" / "result.json"
    deadline = time.monotonic() + 240
    while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.exists(), proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert "harness: interrupted." in err and "are intact" in err
    assert "Run the same command again to resume" in err and "python -m harness " in err
    kept = {(r["seed"], r["arm"]) for r in load_tree(out).results if r["status"] == "completed"}
    assert (0, "A") in kept and len(kept) < 6

    again = run_cli(args)
    assert again.returncode == 0, again.stderr[-2000:]
    log = (out / "harness.log").read_text()
    assert log.count("skipped, completed with the same config and code") >= len(kept)
    assert len([r for r in load_tree(out).results if r["status"] == "completed"]) == 6


def test_a_full_disk_names_the_file_and_keeps_what_was_written(tmp_path, monkeypatch):
    import harness.experiment.units as experiment
    from harness import results

    real = experiment.write_result

    def full_after_two(path, result):
        if len(list(tmp_path.rglob("result.json"))) >= 2:  # the disk fills up at the third result
            raise OSError(errno.ENOSPC, "No space left on device", str(path))  # as atomic_write names it
        real(path, result)

    monkeypatch.setattr(experiment, "write_result", full_after_two)
    with pytest.raises(HarnessError) as e:
        harness.run([*FAST, "repro.certificate=false"], out_dir=tmp_path, verbose=False)
    text = str(e.value)
    assert "seed=1" in text and "result.json: the disk is full" in text
    assert "The 2 completed result(s)" in text and "are intact" in text and "to resume" in text
    assert len([r for r in results.load_tree(tmp_path).results if r["status"] == "completed"]) == 2


def test_the_atomic_writer_names_the_file_a_failed_write_was_for(tmp_path, monkeypatch):
    from harness import results

    def fail(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError) as e:
        results.write_json(tmp_path / "x" / "result.json", {"a": 1})
    assert e.value.filename == str(tmp_path / "x" / "result.json")
    assert not list((tmp_path / "x").iterdir())  # no temporary file left behind


@pytest.mark.slow
def test_a_bad_value_in_a_sweep_is_one_paragraph_before_any_job(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *FAST, "seed=0,1", "arm=A,Z", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 2
    assert "the sweep's job" in proc.stderr and "arm='Z' is not an arm of this experiment" in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.rglob("result.json"))


@pytest.mark.parametrize("override, message", [
    ("train.batch_size=0", "train.batch_size=0 must be an integer >= 1"),
    ("train.max_steps=0", "train.max_steps=0 must be an integer >= 1 or null"),
    ("stats.metric=val_acc", "The metric 'val_acc' has no declared direction"),
    ("stats.alpha=0.7", "stats.alpha=0.7 must be a number between 0 and 0.5"),
    ("stats.margin=-1", "stats.margin=-1 must be a number >= 0"),
    ("stats.margin=abc", "stats.margin='abc' must be a number >= 0"),
    ("stats.baseline=Z", "stats.baseline='Z' is not an arm"),
    ("optim.lr=-1", "Invalid learning rate: -1"),
    ("ab.arms.B=1.5", "ab.arms.B: loss.label_smoothing=1.5 must be in [0, 1)"),
    ("loss.focal_gamma=-1", "loss.focal_gamma=-1 must be >= 0"),
    ("model._target_=harness.builtin.models.SmallCnn", "harness.builtin.models has no 'SmallCnn'"),
    ("ab.arms={A: 0.0}", "ab.arms has 1 arm(s) (A)"),
])
def test_every_bad_value_is_caught_before_the_first_run(tmp_path, override, message):
    with pytest.raises(HarnessError, match="(?i)nothing was run|needs at least two") as e:
        harness.run([*FAST, override], out_dir=tmp_path, verbose=False)
    assert message in str(e.value)
    assert not list(tmp_path.rglob("*"))  # nothing written: no result, no declaration, no experiment.json


def test_a_read_only_output_folder_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    # Tests run as root, whom file modes do not stop: the folder is made read-only through os.access.
    from harness.experiment import precheck as precheck

    finished = tmp_path / "done"
    (finished / "runs").mkdir(parents=True)
    monkeypatch.setattr(precheck.os, "access", lambda path, mode: str(path) != str(finished))
    with pytest.raises(SystemExit) as e:
        precheck.check_writable(finished)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"cannot write into {finished} (read-only or not yours), so nothing was run" in err
    assert f"python -m harness.analyze {finished} --no-write" in err  # a finished one is still analysable
    precheck.check_writable(tmp_path / "fresh" / "sub")  # a writable parent is fine
