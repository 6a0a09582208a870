"""A command is an arm: an unchanged script run once per (seed, arm), its metrics read from its
output; failures named with their unit; bad keys refused before any unit runs; no child left behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness
from harness import HarnessError
from harness.experiment import identity
from harness.results import read_json

from .conftest import REPO, TEST_CONF, compose_cfg, run_cli

EXAMPLE = REPO / "examples" / "command_arm"
TOY = REPO / "tests" / "command_scripts" / "toy.py"
BASE = ["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
        f"train.cmd=[{sys.executable},{TOY}]"]


def _toy(tmp_path, *overrides):
    return harness.run([*BASE, *overrides], out_dir=tmp_path, config_dir=TEST_CONF, verbose=False)


def _result(folder, seed, arm):
    return read_json(folder / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json")


@pytest.mark.slow
def test_the_example_runs_from_its_yaml_alone_and_each_unit_is_the_script_run_by_hand(tmp_path):
    out = tmp_path / "run"
    proc = run_cli(["--config-dir", str(EXAMPLE / "conf"), "+experiment=command_ab", "ab.seeds=[0,1,2]",
                    "workers=1", "determinism.threads=1", "logger=none", "progress=false", f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = proc.stdout + proc.stderr
    assert "pairing: by seed only (a command is a black box)" in printed and "pairing verified" not in printed
    assert "reproducible at the level of the metrics: yes" in printed and "bitwise" not in printed
    for seed in range(3):
        for arm, flag in (("raw", []), ("standardized", ["--standardize"])):
            by_hand = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--epochs", "5", *flag,
                                      "--seed", str(seed)], capture_output=True, text=True, check=True).stdout
            loss, accuracy = re.search(r"final test_loss (\S+) test_accuracy (\S+)", by_hand).groups()
            r = _result(out, seed, arm)
            assert r["status"] == "completed" and r["metrics"] == {"test_loss": float(loss), "test_accuracy": float(accuracy)}
            assert (out / "runs" / f"seed={seed}" / f"arm={arm}" / "stdout.txt").read_text() == by_hand
    r = _result(out, 0, "raw")
    assert "examples/command_arm/train.py:train.py" in r["code"]["files"]  # the script is the run's code
    assert len(r["curve"]["test_loss"]) == 6  # every match of the pattern is a curve point
    a = read_json(out / "analysis.json")
    assert a["pairing"]["basis"] == "by seed only (a command is a black box)" and a["pairing_verified"] == []
    assert a["certificate"]["level"] == "metrics" and a["certificate"]["reproducible"] is True


def test_a_unit_gets_its_flags_seed_placeholders_and_environment(tmp_path):
    _toy(tmp_path, "ab.seeds=[4]", "+train.args.flag=true", "+train.args.shift=0.25", "+train.args.none=null",
         "repro.certificate=false")
    folder = tmp_path / "runs" / "seed=4" / "arm=B"
    seen = read_json(folder / "seen.json")
    assert seen["argv"] == ["--out", str(folder / "seen.json"), "--mode", "ok", "--flag", "--shift", "0.25", "--seed", "4"]
    assert seen["env"] == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HARNESS_SEED": "4", "HARNESS_ARM": "B",
                           "HARNESS_RUN_DIR": str(folder), "CUBLAS_WORKSPACE_CONFIG": seen["env"]["CUBLAS_WORKSPACE_CONFIG"]}
    # the unit's working folder: its own, mirroring the launch folder (integrations/workdir.py)
    assert seen["env"]["CUBLAS_WORKSPACE_CONFIG"] and seen["cwd"] == str(folder.resolve() / "work" / Path.cwd().name)
    assert _result(tmp_path, 4, "B")["metrics"] == {"score": float(f"{50.0 + 0.25 * 1.1 + 4 * 7919 % 13 / 10 + 0.5:.4f}")}


@pytest.mark.slow
def test_failures_name_their_unit_and_nothing_is_marked_complete(tmp_path):
    _toy(tmp_path, "ab.seeds=[0]", "ab.arms.B=crash", "+ab.arms.C=silent", "+ab.arms.D=hang", "train.timeout_s=5",
         "repro.certificate=false")
    crash = _result(tmp_path, 0, "B")
    assert crash["status"] == "failed" and crash["error"]["type"] == "CommandFailed"
    msg = crash["error"]["message"]
    assert msg.startswith("seed 0 arm B: the command exited with code 3") and "failed on purpose" in msg
    silent = _result(tmp_path, 0, "C")
    assert silent["status"] == "failed" and "'score ([0-9.]+)' never matched" in silent["error"]["message"]
    assert "trained, but printed no score" in silent["error"]["message"]  # the last lines of stdout
    hang = _result(tmp_path, 0, "D")
    assert hang["status"] == "failed" and hang["error"]["message"].startswith("seed 0 arm D: it ran past train.timeout_s=5 s")
    pid = read_json(tmp_path / "runs" / "seed=0" / "arm=D" / "seen.json")["pid"]
    assert not _alive(pid)  # killed, not left running
    assert _result(tmp_path, 0, "A")["status"] == "completed"


@pytest.mark.slow
def test_the_certificate_compares_metrics_bit_for_bit_and_the_listed_files_byte_for_byte(tmp_path):
    save = ["+train.args.save='{run_dir}/model.txt'", "ab.seeds=[0]"]
    _toy(tmp_path / "same", *save, "train.compare_files=['{run_dir}/model.txt']")
    cert = read_json(tmp_path / "same" / "certificate.json")
    assert cert["reproducible"] is True and cert["level"] == "metrics"
    assert cert["line"].startswith("reproducible at the level of the metrics: yes (1 metric(s) bit for bit, "
                                   "1 file(s) byte for byte")
    # seen.json holds the process id and the unit's folder: a rerun writes other bytes
    _toy(tmp_path / "other", *save, "train.compare_files=['{run_dir}/seen.json']")
    cert = read_json(tmp_path / "other" / "certificate.json")
    assert cert["reproducible"] is False and cert["metrics_differ"] == []
    assert cert["line"].startswith("reproducible at the level of the metrics: NO") and "bitwise" not in cert["line"]


@pytest.mark.parametrize("overrides, words", [
    (["train.cmd=no-such-command-xyz --go"], "train.cmd: the command 'no-such-command-xyz' was not found on PATH"),
    ([f"train.cmd=[{sys.executable},missing_script.py]"], "train.cmd: the script"),
    (["train.fn=tests.sequential_fns.paired_metric"], "train.cmd and train.fn=tests.sequential_fns.paired_metric are both set"),
    (["train.metrics_from={stdout: {score: 'score [0-9.]+'}}"], "train.metrics_from.stdout.score='score [0-9.]+' has no capture group"),
    (["train.metrics_from={stdout: {score: 'score ([0-9.]+'}}"], "does not compile as a regular expression"),
    (["stats.metric=loss"], "stats.metric='loss' cannot be produced: train.metrics_from.stdout reads only score"),
    ([{"--flag": True}], "train.args.--flag: '--flag' is not a flag name"),
    ([{"two words": 1}], "train.args.two words: 'two words' is not a flag name"),
])
def test_bad_command_keys_are_refused_before_any_unit_runs(tmp_path, overrides, words):
    from omegaconf import open_dict

    cfg = compose_cfg([*BASE, "ab.seeds=[0]", *[o for o in overrides if isinstance(o, str)]], config_dirs=[TEST_CONF])
    with open_dict(cfg):  # keys the override grammar cannot spell, as a yaml file can
        for extra in [o for o in overrides if isinstance(o, dict)]:
            cfg.train.args.update(extra)
    with pytest.raises(HarnessError) as e:
        harness.run(cfg=cfg, out_dir=tmp_path, verbose=False)
    assert words in str(e.value) and "Nothing was run" in str(e.value)
    assert not list(tmp_path.glob("runs/*/*/result.json"))


def test_a_typo_in_a_command_key_fails_when_the_config_is_composed(tmp_path):
    with pytest.raises(Exception, match="metric_from"):
        _toy(tmp_path, "train.metric_from={stdout: {score: 'score ([0-9.]+)'}}")


@pytest.mark.slow
def test_an_edit_to_the_script_is_a_code_change(tmp_path):
    script = tmp_path / "proj" / "toy.py"
    script.parent.mkdir()
    shutil.copy(TOY, script)
    (script.parent / "helper.py").write_text("X = 1\n")
    overrides = ["ab.seeds=[0]", "repro.certificate=false", f"train.cmd=[{sys.executable},{script}]"]
    out = tmp_path / "out"
    _toy(out, *overrides)
    files = _result(out, 0, "A")["code"]["files"]
    assert {name.rsplit(":", 1)[1] for name in files} == {"toy.py", "helper.py"}  # the script and the .py beside it
    before = (out / "runs" / "seed=0" / "arm=A" / "result.json").stat().st_mtime_ns
    _toy(out, *overrides)  # unchanged: resumed
    assert (out / "runs" / "seed=0" / "arm=A" / "result.json").stat().st_mtime_ns == before
    (script.parent / "helper.py").write_text("X = 2\n")
    identity._CACHE.clear()  # read once per invocation: the next one reads the files again
    _toy(out, *overrides)
    assert (out / "runs" / "seed=0" / "arm=A" / "result.json").stat().st_mtime_ns != before  # run again


@pytest.mark.slow
def test_a_script_edited_between_two_looks_of_a_sequential_run_stops_it(tmp_path):
    script = tmp_path / "proj" / "toy.py"
    script.parent.mkdir()
    shutil.copy(TOY, script)
    (script.parent / "helper.py").write_text("X = 1\n")
    out = tmp_path / "run"
    proc = run_cli(["--config-dir", str(TEST_CONF), *BASE, f"train.cmd=[{sys.executable},{script}]",
                    "+train.args.shift=0.0", "ab.factor=train.args.shift", "ab.arms={A: 0.0, B: 2.0}",
                    "+train.args.edit_from_seed=1", "repro.certificate=false", "ab.sequential.enabled=true",
                    "stats.margin=0.01", "ab.sequential.alpha=0.2", "ab.sequential.min_seeds=3",
                    "ab.sequential.max_seeds=5", "ab.sequential.equivalence=false", "ab.sequential.futility=0",
                    f"hydra.run.dir={out}"])
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "sequential run stopped: the config or code changed" in proc.stderr
    assert "helper.py" in proc.stderr.split("the code changed: edited:")[1][:300]


@pytest.mark.slow  # spawns python -m harness and trains
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_sigkill_or_ctrl_c_of_the_harness_leaves_no_child(tmp_path, sig):
    out = tmp_path / "run"
    args = ["--config-dir", str(TEST_CONF), *BASE, "ab.arms.A=hang", "ab.seeds=[0]", f"hydra.run.dir={out}"]
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    seen = out / "runs" / "seed=0" / "arm=A" / "seen.json"
    try:
        deadline = time.monotonic() + 60
        while not (seen.exists() and seen.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = json.loads(seen.read_text())["pid"]
        assert _alive(pid)
    finally:
        proc.send_signal(sig)  # Ctrl-C: SIGINT to the harness (the child is in a process group of its own)
        proc.wait(timeout=60)
    deadline = time.monotonic() + 60  # a bound, not a measurement: ends as soon as the child is gone
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has died, waiting for its parent to reap it
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.parametrize("tool", ["noise_audit", "audit", "noise_sources"])
def test_tools_that_look_inside_a_run_refuse_a_command_arm(tool, capsys):
    import importlib

    main = importlib.import_module(f"harness.{tool}").main  # the command's entry point
    assert main(["--config-dir", str(TEST_CONF), *BASE]) == 2
    err = capsys.readouterr().err
    said = err.split("error: ", 1)[1]
    assert f"harness.{tool}" in said.split(" need")[0] and "a command arm (train.cmd) is a black box" in said


def test_a_problem_in_one_arm_names_the_arm(tmp_path):
    with pytest.raises(HarnessError) as e:
        _toy(tmp_path, "ab.seeds=[0]", "ab.factor=train.metrics_from.stdout.score",
             "ab.arms={A: 'score ([0-9.]+)', B: 'score [0-9.]+'}")
    assert "ab.arms.B: train.metrics_from.stdout.score='score [0-9.]+' has no capture group" in str(e.value)
    assert "ab.arms.A" not in str(e.value) and not list(tmp_path.glob("runs/*/*/result.json"))


@pytest.mark.slow
def test_command_units_never_import_torch_serial_or_side_by_side_and_both_give_the_same_results(tmp_path):
    """A command unit needs no torch in the harness's processes (seconds of CPU in each one): the
    process that runs the units (serial: the harness itself; side by side: each worker, which the
    script sees as its parent) never loads it, and what both ways write and report is the same."""
    def probe(folder, workers):
        overrides = [o for o in BASE if o != "workers=1"] + [f"workers={workers}", "ab.seeds=[0,1,2]"]
        code = ("import json, sys, harness; "
                f"done = harness.run({overrides!r}, out_dir={str(folder)!r}, config_dir={str(TEST_CONF)!r}, "
                "verbose=False); print(json.dumps({'torch': 'torch' in sys.modules, 'metrics': "
                "{f\"{r['seed']} {r['arm']}\": r['metrics'] for r in done.results}}))")
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    serial, sbs = probe(tmp_path / "serial", 1), probe(tmp_path / "sbs", 2)
    assert serial["torch"] is False and sbs["torch"] is False
    assert sbs["metrics"] == serial["metrics"] and len(serial["metrics"]) == 6
    for seed in range(3):
        for arm in ("A", "B"):
            a, b = _result(tmp_path / "serial", seed, arm), _result(tmp_path / "sbs", seed, arm)
            assert b["status"] == "completed" and (b["metrics"], b["curve"]) == (a["metrics"], a["curve"])
            # the interpreter's torch, read without importing it (torch's own text); which torch the
            # script imported only the script can say: unknown
            assert a["code"]["interpreter"]["packages"]["torch"] == b["code"]["interpreter"]["packages"]["torch"] \
                == identity.torch_version() and a["env"]["torch"] is b["env"]["torch"] is None
            for folder in ("serial", "sbs"):  # the unit's runner, as the script saw its parent
                seen = read_json(tmp_path / folder / "runs" / f"seed={seed}" / f"arm={arm}" / "seen.json")
                assert seen["parent_torch"] is False, (folder, seed, arm)
    for folder in ("serial", "sbs"):
        assert read_json(tmp_path / folder / "certificate.json")["reproducible"] is True


@pytest.mark.slow
@pytest.mark.parametrize("forced", [None, "avx2"])
def test_a_command_units_cpu_capability_is_the_one_torch_reads_on_this_machine(forced):
    """A CPU command unit records env.cpu_capability without importing torch (the script's kernels,
    hence its bits, follow it): the same text torch.backends.cpu gives, ATEN_CPU_CAPABILITY included."""
    code = ("import json, sys, torch; from harness.training.determinism import cpu_capability_of_this_machine as c; "
            "print(json.dumps([torch.backends.cpu.get_cpu_capability(), c()]))")
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if forced:
        env["ATEN_CPU_CAPABILITY"] = forced
    out = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(REPO)}, capture_output=True,
                         text=True, check=True).stdout
    torch_says, ours = json.loads(out)
    assert ours == torch_says and (forced is None or ours == forced.upper())


def test_a_command_units_run_takes_black_box_or_adopt_not_both():
    """The torch-free Run of a CPU command unit refuses what Run refuses: a record adopted after the
    run said it ran as a black box (finish would otherwise keep one and drop the other silently)."""
    from harness.integrations.command_run import CommandRun
    from harness.training.steps import RunUsageError

    run = CommandRun(0)
    run.black_box("digest")
    with pytest.raises(RunUsageError, match="run.adopt after run.black_box"):
        run.adopt({})


@pytest.mark.slow
def test_two_seeds_printing_the_same_metrics_are_not_called_a_relabelled_copy(tmp_path):
    # toy.py prints the same score for seeds 0 and 13 (the same arm): a black box's final digest
    # covers only its metrics then, and equal metrics under two seeds are a coincidence of rounding,
    # not proof of a copy; the analysis runs
    _toy(tmp_path / "metrics", "ab.seeds=[0,1,13]")
    assert _result(tmp_path / "metrics", 0, "A")["metrics"] == _result(tmp_path / "metrics", 13, "A")["metrics"]
    a = read_json(tmp_path / "metrics" / "analysis.json")
    assert a["comparisons"]["B"]["seeds"] == [0, 1, 13]
    # with train.compare_files the digest covers the saved bytes too: identical files under two seeds
    # mean the seed did not reach what was saved, and that is refused, both seeds named
    files = _toy(tmp_path / "files", "ab.seeds=[0,1,13]", "+train.args.save='{run_dir}/model.txt'",
                 "train.compare_files=['{run_dir}/model.txt']")
    assert files.analysis is None and not (tmp_path / "files" / "analysis.json").exists()
    with pytest.raises(HarnessError, match=r"relabelled as a new seed.*seed 0 arm A.*seed 13 arm A"):
        harness.analyze_folder(tmp_path / "files", write=False)
