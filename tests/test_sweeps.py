"""Multirun sweeps: the same bits and verdict on every launcher, resume after a kill, failed jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results import load_tree, read_json

from .conftest import FAST, REPO, run_cli

# The same bits on every launcher at the same thread count: pinned here, since threads=auto resolves
# per invocation (the free cores in process, 1 in a sweep). 1 thread: the launchers run jobs at once
# (submitit_local all six), and 2 pinned threads each on 2 cores wait at every barrier.
PINNED = ["determinism.threads=1"]
SWEEP = FAST + PINNED + ["seed=0,1,2"]


def _finals(root: Path) -> dict:
    return {(r["seed"], r["arm"]): r["fingerprints"]["final"] for r in load_tree(root).results}


def _comparable(analysis: dict) -> dict:
    """The analysis without what legitimately differs between folders (none expected today)."""
    return {k: v for k, v in analysis.items() if k not in ("unreadable",)}


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The plain run, every unit in one process: here the test's own, through the Python API (the
    same execute as the CLI's; the sweeps below run in processes of their own)."""
    import harness

    out = tmp_path_factory.mktemp("inproc")
    done = harness.run(FAST + PINNED, out_dir=out, verbose=False)
    assert done.analysis is not None and {r["status"] for r in done.results} == {"completed"}
    return out


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "joblib", "submitit_local"])
def test_sweep_gives_the_in_process_bits_and_verdict(tmp_path, in_process, launcher):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *SWEEP, f"hydra/launcher={launcher}", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    finals = _finals(sweep)
    assert len(finals) == 6
    assert finals == _finals(in_process)
    # every job pinned its threads, whatever the launcher's workers were given
    assert {r["env"]["threads"] for r in load_tree(sweep).results} == {1}
    swept = read_json(sweep / "analysis.json")  # written by the sweep's callback
    assert _comparable(swept) == _comparable(read_json(in_process / "analysis.json"))


@pytest.mark.slow
def test_killed_sweep_resumes_only_the_missing_runs(tmp_path):
    # No training is needed to resume: tests/sequential_fns.py's paired_metric (one recorded step) holds
    # before seed 2 (HARNESS_TEST_HOLD_FROM_SEED), so the kill lands after exactly seeds 0-1, every time
    args = ["-m", *FAST, "seed=0,1,2,3", "ab.seeds=[0,1,2,3]", "train.fn=tests.sequential_fns.paired_metric",
            "+train.kwargs.shift=0.0", "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.4"]
    sweep = tmp_path / "killed"
    cmd = [sys.executable, "-m", "harness", *args, f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_TEST_HOLD_FROM_SEED": "2"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while len(list(sweep.rglob("result.json"))) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep should be held at seed 2"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sweep.rglob("result.json")}
    assert len(before) == 4, "the kill should land part-way through the sweep (seeds 0-1 done)"

    rerun = run_cli(args + [f"hydra.sweep.dir={sweep}"])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = list(sweep.rglob("result.json"))
    assert len(after) == 8
    for path, (mtime, content) in before.items():  # finished runs were not run again
        assert path.stat().st_mtime_ns == mtime and path.read_bytes() == content
    assert (rerun.stdout + rerun.stderr).count(": skipped, completed with the same config and code") == len(before)

    # what the sweep would have given unbroken: the same units in one run, in this process (the
    # launchers give the in-process bits and analysis: test_sweep_gives_the_in_process_bits_and_verdict)
    import harness

    clean = tmp_path / "clean"
    harness.run([a for a in args if a not in ("-m", "seed=0,1,2,3")], out_dir=clean, verbose=False)
    assert _finals(sweep) == _finals(clean)
    assert read_json(sweep / "analysis.json") == read_json(clean / "analysis.json")


@pytest.mark.slow
def test_a_failing_job_keeps_the_others_and_is_named(tmp_path):
    sweep = tmp_path / "sweep"
    # arm C's learning rate makes its loss overflow during training (a valid config that fails at
    # run time; an invalid value would be refused before any job); A and B are fine.
    proc = run_cli(["-m", *FAST, "ab.factor=optim.lr", "ab.arms.A=0.05", "ab.arms.B=0.02", "+ab.arms.C=1e30", "seed=0,1,2",
                    "arm=A,B,C", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = {(r["seed"], r["arm"]): r["status"] for r in load_tree(sweep).results}
    assert status == {(s, a): ("failed" if a == "C" else "completed") for s in (0, 1, 2) for a in "ABC"}
    failed = read_json(next(sweep.glob("**/runs/seed=1/arm=C/result.json")))
    assert failed["error"]["type"] == "NonFiniteLoss" and "loss became" in failed["error"]["message"]

    again = run_cli([str(sweep), "--no-write"], module="harness.analyze")
    assert again.returncode == 0, again.stderr
    screen = " ".join(again.stdout.split())  # the console wraps long lines
    # C's divergences are outcomes (stats.diverged=worst): counted, said first, not left out as failures
    assert "diverged: A 0 of 3 seeds, B 0 of 3 seeds, C 3 of 3 seeds" in screen
    assert "C vs A not compared: 0 complete pair(s)" in screen and "decided on all 3 pairs" in screen
    assert "seed 1 arm C: failed" not in screen
    analysis = read_json(sweep / "analysis.json")
    assert analysis["excluded"] == [] and analysis["diverged"]["counts"]["C"] == 3
    assert all("loss became" in r["reason"] for r in analysis["diverged"]["runs"])
    assert analysis["comparisons"]["B"]["n_pairs"] == 3


@pytest.mark.slow
def test_analyze_refuses_below_three_pairs_and_names_what_is_missing(tmp_path):
    """All jobs complete, but two seeds are too few pairs for the analysis: the sweep's callback
    says why and the process exits 1 (an exception in a Hydra callback is only a warning; SystemExit
    is not an Exception, so Hydra's run_and_report lets it through). harness.analyze refuses too.
    (Merged with test_sequential_identity.py's test_a_sweep_whose_analysis_fails_exits_1, which
    checked the same sweep's exit and message with a training function that does not train.)"""
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *FAST, "seed=0,1", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 1, proc.stderr[-3000:]  # every job ran; the sweep's analysis was refused
    assert f"harness: error: sweep analysis of {sweep} failed:" in proc.stderr
    assert "seeds 0, 1" in proc.stderr and "Traceback" not in proc.stderr
    assert len(load_tree(sweep).results) == 4 and not (sweep / "analysis.json").exists()
    refused = run_cli([str(sweep)], module="harness.analyze")
    assert refused.returncode == 2
    assert "seeds 0, 1" in refused.stderr and "Traceback" not in refused.stderr


def test_slurm_launcher_config_composes():
    cfg = compose_cfg_with_hydra(["+experiment=loss_ab", "hydra/launcher=slurm"])
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert launcher.gpus_per_node == 1 and launcher.timeout_min > 0 and launcher.array_parallelism > 0
    assert "export WANDB_MODE=offline" in launcher.setup
    pool = compose_cfg_with_hydra(["+experiment=loss_ab", "hydra/launcher=local_pool"]).hydra.launcher
    assert pool._target_.endswith("JoblibLauncher") and pool.n_jobs >= 1


def compose_cfg_with_hydra(overrides):
    from harness.config import compose

    return compose(overrides, return_hydra_config=True)


def test_concurrent_writers_never_leave_a_half_written_result(tmp_path):
    """Many processes write the same result path at once; a reader only ever sees whole files."""
    script = (
        "import sys, json; from harness.results import write_json\n"
        "n = int(sys.argv[2])\n"
        "for i in range(40): write_json(sys.argv[1], {'schema': 'harness.result/1', 'writer': n, 'i': i, 'pad': 'x' * 200000})\n"
    )
    target = tmp_path / "runs" / "seed=0" / "arm=A" / "result.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", script, str(target), str(n)], env=env) for n in range(3)]
    seen = 0
    while any(w.poll() is None for w in writers):
        if target.exists():
            obj = read_json(target)  # raises if a reader ever saw a partial file
            assert len(obj["pad"]) == 200000
            seen += 1
    assert all(w.returncode == 0 for w in writers)
    assert seen > 0
    assert [p.name for p in target.parent.iterdir()] == ["result.json"]  # no temporary files left
