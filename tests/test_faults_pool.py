"""A lost worker is a failed unit, not a traceback: a local_pool sweep (plain or sequential) whose
worker is SIGKILLed names the lost (seed, arm), records it as a failed unit, completes the rest of the
sweep, exits 1 saying so, and the rerun resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness.results import load_tree, read_json

from .conftest import REPO, run_cli
from .sequential_fns import paired_metric

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

PAIRED = ["+experiment=loss_ab", "logger=none", "progress=false", "determinism.threads=1",
          "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0", "+train.kwargs.sd=1.0",
          "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.4", "stats.margin=null"]


def dies_once(cfg, run, shift: float = 0.0, sd: float = 1.0, die_seed: int = -1, die_shift: float = 0.0,
              marker: str = "") -> dict:
    """paired_metric, except that the run of (die_seed, die_shift) SIGKILLs its own process while the
    file ``marker`` exists (removed first: the rerun gets through), as the OOM killer would."""
    if run.seed == die_seed and shift == die_shift and marker and os.path.exists(marker):
        os.unlink(marker)
        os.kill(os.getpid(), signal.SIGKILL)
    return paired_metric(cfg, run, shift=shift, sd=sd)


def _status(root: Path) -> dict:
    return {(r["seed"], r["arm"]): r["status"] for r in load_tree(root).results}


def test_a_killed_worker_of_a_plain_sweep_is_a_named_failed_unit_and_the_rest_completes(tmp_path):
    """Hydra's basic sweeper ended here in a 12-frame TerminatedWorkerError and no analysis."""
    sweep, hold = tmp_path / "sweep", tmp_path / "hold"
    hold.mkdir()
    (hold / "1_1.4").touch()  # tests/sequential_fns.py: (seed 1, arm B) holds once
    args = ["-m", "hydra/launcher=local_pool", "hydra.sweeper.max_batch_size=4", *PAIRED, "seed=0,1,2,3", "arm=A,B",
            f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0",
           "HARNESS_TEST_HOLD_ONCE": str(hold)}
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    held = hold / "1_1.4.held"
    deadline = time.monotonic() + 240
    # (1, B) holds in one worker; kill it once the other three units of its batch are done (a pool
    # stops every worker when one dies: none other is running then)
    while proc.poll() is None and time.monotonic() < deadline and not (
            held.exists() and len(list(sweep.rglob("result.json"))) >= 3):
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.kill(json.loads(held.read_text())["pid"], signal.SIGKILL)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err and "TerminatedWorkerError" not in err
    said = " ".join(err.split())
    assert "some units of this sweep failed because their job died: (seed=1, arm=B): the job died, killed by signal 9" \
        in said, said[-2000:]
    assert "the analysis counts the lost ones as failed" in said and "Run the same command again to resume" in said
    status = _status(sweep)  # the second batch ran after the loss
    assert status == {(s, a): "failed" if (s, a) == (1, "B") else "completed" for s in range(4) for a in "AB"}
    lost = read_json(next(sweep.glob("**/runs/seed=1/arm=B/result.json")))
    assert lost["error"]["type"] == "LostJob" and lost["config_hash"] == read_json(
        next(sweep.glob("**/runs/seed=0/arm=B/result.json")))["config_hash"]
    analysis = read_json(sweep / "analysis.json")
    excluded = {(e["seed"], e["arm"]): e["reason"] for e in analysis["excluded"]}
    assert set(excluded) == {(1, "A"), (1, "B")}  # seed 1 has no pair
    assert "LostJob" in excluded[(1, "B")] and "the job died" in excluded[(1, "B")], excluded
    assert analysis["comparisons"]["B"]["n_pairs"] == 3

    again = run_cli(args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert set(_status(sweep).values()) == {"completed"} and len(_status(sweep)) == 8
    assert read_json(sweep / "analysis.json")["comparisons"]["B"]["n_pairs"] == 4


def test_a_killed_pool_worker_of_a_sequential_sweep_is_a_failed_unit_and_the_sweep_goes_on(tmp_path):
    marker = tmp_path / "die"
    marker.touch()
    sweep = tmp_path / "sweep"
    args = ["-m", "hydra/sweeper=harness_sequential", "hydra/launcher=local_pool", *PAIRED,
            "train.fn=tests.test_faults_pool.dies_once", "+train.kwargs.die_seed=1", "+train.kwargs.die_shift=1.4",
            f"+train.kwargs.marker={marker}", "ab.sequential.max_seeds=8", "ab.sequential.max_failures=2",
            f"hydra.sweep.dir={sweep}"]
    proc = run_cli(args)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert not marker.exists()  # the planned death happened
    assert "Traceback" not in proc.stderr and "TerminatedWorkerError" not in proc.stderr
    err = " ".join(proc.stderr.split())
    assert "some units failed because their job died: (seed=1, arm=B): the job died, killed by signal 9" in err, err[-2000:]
    assert "run the same command again to resume" in err
    state = read_json(sweep / "sequential.json")
    assert state["status"] == "settled", state  # the sweep went on past the loss
    assert any(f["seed"] == 1 and f["arm"] == "B" and "LostJob" in f["reason"] for f in state["failed"])
    status = _status(sweep)
    assert status[(1, "B")] == "failed" and max(s for s, _ in status) >= 2

    again = run_cli(args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_json(sweep / "sequential.json")["status"] == "settled"
    assert _status(sweep)[(1, "B")] == "completed"
