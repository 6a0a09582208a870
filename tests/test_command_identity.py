"""A command arm records what it knows, and only that; each unit writes in a folder of its own.

``python`` in train.cmd is the interpreter running the harness (not the first one on PATH); what the
harness set for the script (threads, environment) is recorded as set, what happened inside it only
when the script reported it (harness.attach()), else as unknown; each unit's working folder is its
own, while relative paths into the launch folder still resolve; an empty train.cmd is refused."""

from __future__ import annotations

import os
import sys

import pytest

import harness
from harness.results import read_json

from .conftest import REPO, TEST_CONF, run_cli

SCRIPTS = REPO / "tests" / "command_scripts"
TOY = SCRIPTS / "toy.py"
BASE = ["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1"]


def _result(folder, seed, arm):
    return read_json(folder / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json")


def test_python_in_train_cmd_is_the_harness_interpreter_whatever_python_is_first_on_path(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("python", "python3"):  # a python without the user's packages, first on PATH
        (fake / name).write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
        (fake / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    out = tmp_path / "out"
    harness.run([*BASE, f"train.cmd=python {TOY}", "ab.seeds=[0]", "repro.certificate=false"],
                out_dir=out, config_dir=TEST_CONF, verbose=False)
    for arm in ("A", "B"):
        r = _result(out, 0, arm)
        assert r["status"] == "completed", r["error"]
        assert r["env"]["interpreter"] == sys.executable  # which interpreter ran
        assert r["code"]["interpreter"]["path"] == sys.executable


def test_an_interpreter_without_torch_for_a_script_that_imports_it_is_refused_before_any_unit(tmp_path):
    from harness import HarnessError

    bare = tmp_path / "venv" / "bin" / "python"  # answers as a Python with no packages would
    bare.parent.mkdir(parents=True)
    bare.write_text("#!/bin/sh\necho '{\"python\": \"3.11.0\", \"packages\": {}}'\n")
    bare.chmod(0o755)
    with pytest.raises(HarnessError) as e:
        harness.run([*BASE, f"train.cmd=[{bare},{SCRIPTS / 'attached_tiny.py'}]", "ab.seeds=[0]"],
                    out_dir=tmp_path / "out", config_dir=TEST_CONF, verbose=False)
    assert f"imports torch, but the interpreter that would run it, {bare}, has no torch installed" in str(e.value)
    assert not list((tmp_path / "out").glob("runs/*/*/result.json"))


@pytest.mark.slow
def test_a_plain_command_records_what_happened_inside_it_as_unknown(tmp_path):
    out = tmp_path / "out"
    harness.run([*BASE, f"train.cmd=[python,{TOY}]", "ab.seeds=[0,1,2]", "repro.certificate=false"],
                out_dir=out, config_dir=TEST_CONF, verbose=False)
    env = _result(out, 0, "A")["env"]
    for unknown in ("mode", "deterministic_algorithms", "deterministic_warn_only", "cudnn_deterministic", "torch",
                    "device"):
        assert env[unknown] is None, (unknown, env[unknown])  # the script never said, and nothing configured it
    assert env["reported_by_script"] is False
    # what the harness set for the script is recorded as set: its threads and their variables
    assert env["threads"] == 1 and env["OMP_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    assert env["interpreter"] == sys.executable and env["python"] == ".".join(map(str, sys.version_info[:3]))
    analysis = read_json(out / "analysis.json")
    assert analysis["setup"]["determinism"] == ["unknown"]
    report = (out / "report.md").read_text()
    assert "determinism strict" not in report and "determinism unknown" in report


def test_a_command_unit_through_the_torch_path_never_records_the_harness_process_state(tmp_path, monkeypatch):
    # a command on a GPU goes through the Run of the harness's process, which configure() switched into
    # strict mode: that process's state decided nothing in the script, and is not what gets recorded
    from harness.integrations import command_run

    monkeypatch.setattr(command_run, "runs_without_torch", lambda cfg: False)
    out = tmp_path / "out"
    harness.run([*BASE, f"train.cmd=[python,{TOY}]", "ab.seeds=[0]", "repro.certificate=false"],
                out_dir=out, config_dir=TEST_CONF, verbose=False)
    env = _result(out, 0, "A")["env"]
    assert env["mode"] is None and env["deterministic_algorithms"] is None and env["torch"] is None
    assert env["reported_by_script"] is False and env["interpreter"] == sys.executable


@pytest.mark.slow
def test_an_attached_command_records_what_the_script_reported(tmp_path):
    import torch

    out = tmp_path / "out"
    harness.run([*BASE, f"train.cmd=[python,{SCRIPTS / 'attached_tiny.py'}]", "+train.args.off_after_attach=false",
                 "ab.factor=train.args.off_after_attach", "ab.arms={A: false, B: true}", "ab.seeds=[0]",
                 "repro.certificate=false", "determinism.mode=warn"],
                out_dir=out, config_dir=TEST_CONF, verbose=False)
    a, b = _result(out, 0, "A"), _result(out, 0, "B")
    assert a["status"] == b["status"] == "completed", (a["error"], b["error"])
    env = a["env"]
    assert env["reported_by_script"] is True
    assert env["mode"] == "warn" and env["deterministic_algorithms"] is True and env["deterministic_warn_only"] is True
    assert env["torch"] == torch.__version__ and env["device"] == "cpu" and env["threads"] == 1
    assert env["interpreter"] == sys.executable
    # B switched deterministic algorithms off after attaching: its record says what held at its end
    assert b["env"]["mode"] == "off" and b["env"]["deterministic_algorithms"] is False


def test_units_side_by_side_each_write_and_read_their_own_files_and_relative_reads_resolve(tmp_path):
    launch = tmp_path / "parent" / "proj"  # the launch folder (train.cwd), with data inside and above it
    (launch / "data").mkdir(parents=True)
    (launch / "data" / "x.txt").write_text("inside\n")
    (launch.parent / "up.txt").write_text("above\n")
    (launch / "model.pt").write_text("left by a run by hand")  # what pytorch/examples' main.py leaves behind
    sync = tmp_path / "sync"
    sync.mkdir()
    out = tmp_path / "out"
    harness.run(["+experiment=command_toy", "logger=none", "progress=false", "workers=2", "determinism.threads=1",
                 f"train.cmd=[python,{SCRIPTS / 'own_folder.py'}]", f"train.cwd={launch}",
                 f"+train.args.sync={sync}", "+train.args.arm=A", "+train.args.others=[A,B]",
                 "train.metrics_from={stdout: {score: 'own ([0-9.]+)'}}", "ab.factor=train.args.arm",
                 "ab.arms={A: A, B: B}", "ab.seeds=[0]", "repro.certificate=false"],
                out_dir=out, config_dir=TEST_CONF, verbose=False)
    seen = {arm: read_json(out / "runs" / "seed=0" / f"arm={arm}" / "seen.json") for arm in ("A", "B")}
    assert all(s["met"] for s in seen.values())  # both units were running: each saw the other's file
    assert {arm: s["loaded"] for arm, s in seen.items()} == {"A": "A", "B": "B"}  # each read back its own model
    for arm in ("A", "B"):
        r = _result(out, 0, arm)
        assert r["status"] == "completed" and r["metrics"]["score"] == 1.0, r["error"]
        assert (seen[arm]["data"], seen[arm]["up"]) == ("inside", "above")  # ./data/x.txt and ../up.txt resolved
        kept = out / "runs" / "seed=0" / f"arm={arm}" / "work" / "proj" / "model.pt"
        assert kept.read_text() == arm and not kept.is_symlink()  # the unit's output stays in its folder
    assert (launch / "model.pt").read_text() == "left by a run by hand"  # the user's file, untouched
    # after the unit, its folder holds what the script wrote, not links into the launch folder
    assert not [p for p in (out / "runs").rglob("*") if p.is_symlink()]


def test_a_file_of_the_launch_folder_is_the_units_own_copy_and_a_large_one_written_through_is_named(
        tmp_path, caplog, monkeypatch):
    # a small file already in the launch folder is copied into each unit's folder: a script that writes
    # it writes its own copy; a large one is reached through a link, and a write to it is said
    from harness.integrations import workdir

    launch = tmp_path / "proj"
    launch.mkdir()
    (launch / "model.txt").write_text("left by a run by hand\n")
    harness.run([*BASE, f"train.cmd=[python,{TOY}]", f"train.cwd={launch}", "+train.args.save=model.txt",
                 "ab.seeds=[0]", "repro.certificate=false"], out_dir=tmp_path / "out", config_dir=TEST_CONF,
                verbose=False)
    assert (launch / "model.txt").read_text() == "left by a run by hand\n"
    for arm in ("A", "B"):
        own = tmp_path / "out" / "runs" / "seed=0" / f"arm={arm}" / "work" / "proj" / "model.txt"
        assert own.read_text() != "left by a run by hand\n" and not own.is_symlink()

    monkeypatch.setattr(workdir, "COPY_BYTES", 4)  # model.txt counts as large now: linked, not copied
    with caplog.at_level("WARNING"):
        harness.run([*BASE, f"train.cmd=[python,{TOY}]", f"train.cwd={launch}", "+train.args.save=model.txt",
                     "ab.seeds=[0]", "repro.certificate=false"], out_dir=tmp_path / "out2", config_dir=TEST_CONF,
                    verbose=False)
    said = [r.getMessage() for r in caplog.records if "units side by side share that file" in r.getMessage()]
    assert len(said) == 2 and all(str(launch / "model.txt") in m for m in said)


@pytest.mark.parametrize("cmd", ["''", "'   '"])
def test_an_empty_train_cmd_is_refused_before_anything_is_written(tmp_path, cmd):
    out = tmp_path / "out"
    proc = run_cli(["--config-dir", str(TEST_CONF), *BASE, f"train.cmd={cmd}", "ab.seeds=[0]",
                    f"hydra.run.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "train.cmd is empty" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no .hydra/, declaration.json nor harness.log


def test_an_empty_train_cmd_through_the_api_names_the_key(tmp_path):
    from harness import HarnessError

    with pytest.raises(HarnessError, match="train.cmd is empty"):
        harness.run([*BASE, "train.cmd=''", "ab.seeds=[0]"], out_dir=tmp_path / "out", config_dir=TEST_CONF,
                    verbose=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
