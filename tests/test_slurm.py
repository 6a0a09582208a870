"""The SLURM path through a real cluster: sbatch, squeue, sacct, scancel (tests run only when one is up).

Start a one-node cluster on this machine (Debian's packages, as root) with
``sudo scripts/slurm_local.sh start``; the tests find it through $SLURM_CONF or the file that
script writes (/tmp/harness-slurm/slurm.conf). Elsewhere they are skipped with that sentence.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness.results import load_tree, read_json

from .conftest import FAST, run_cli

CONF = os.environ.get("SLURM_CONF") or "/tmp/harness-slurm/slurm.conf"


def _up() -> bool:
    if not shutil.which("sinfo") or not Path(CONF).is_file():
        return False
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], env={**os.environ, "SLURM_CONF": CONF},
                                capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states)


pytestmark = pytest.mark.skipif(not _up(), reason=(
    "no SLURM cluster is up: start a one-node cluster with `sudo scripts/slurm_local.sh start` (Debian's "
    "slurmctld, slurmd, munge, and slurmdbd on MariaDB for sacct; it prints the SLURM_CONF to export), then run tests/test_slurm.py"))

ENV = {"SLURM_CONF": CONF}
# The node of slurm_local.sh has this machine's CPUs, no GPU and no memory limit configured.
ON_THE_NODE = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1",
               "hydra.launcher.mem_gb=null", "hydra.launcher.timeout_min=10"]
ONE_THREAD = ["determinism.threads=1"]  # 1 thread in process and on the node: the same bits


def _finals(root: Path) -> dict:
    return {(r["seed"], r["arm"]): r["fingerprints"]["final"] for r in load_tree(root).results}


def _squeue(fields: str = "%i %T") -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", fields], env={**os.environ, **ENV}, capture_output=True, text=True)
    return [line for line in out.stdout.split("\n") if line.strip()]


def _held_locks(root: Path) -> list[Path]:
    """Run locks of units at seed >= 2 (held by the test's training function) with no result yet."""
    return [lock for lock in root.glob("**/runs/seed=*/arm=*/.lock")
            if int(lock.parent.parent.name.split("=", 1)[1]) >= 2 and not (lock.parent / "result.json").exists()]


def test_the_default_experiment_as_a_slurm_sweep_gives_the_in_process_bits(tmp_path):
    in_process = tmp_path / "in_process"
    done = run_cli([*FAST, *ONE_THREAD, f"hydra.run.dir={in_process}"])
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *FAST, *ONE_THREAD, "seed=0,1,2", *ON_THE_NODE, f"hydra.sweep.dir={sweep}"],
                   env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(sweep.glob(".submitit/*/*_log.out")), "no job went through sbatch"
    finals = _finals(sweep)
    assert len(finals) == 6 and finals == _finals(in_process)
    swept, here = read_json(sweep / "analysis.json"), read_json(in_process / "analysis.json")
    assert swept["comparisons"] == here["comparisons"]


def test_a_job_cancelled_with_scancel_is_a_named_lost_unit_and_the_rerun_resumes(tmp_path):
    """The sequential sweeper on SLURM: jobs of seeds >= 2 hang until scancel ends them."""
    sweep = tmp_path / "sweep"
    args = ["-m", "hydra/sweeper=harness_sequential", *ON_THE_NODE, "+experiment=loss_ab", "logger=none",
            "progress=false", *ONE_THREAD, "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0",
            "+train.kwargs.sd=1.0", "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.4",
            "ab.sequential.max_seeds=8", "stats.margin=null", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, **ENV, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HYDRA_FULL_ERROR": "0",
           "HARNESS_TEST_HOLD_FROM_SEED": "2"}
    log = tmp_path / "sweep.txt"
    with open(log, "w") as sink:
        proc = subprocess.Popen([os.sys.executable, "-m", "harness", *args], cwd=Path(__file__).resolve().parents[1],
                                env=env, stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 400
        running = []
        while time.monotonic() < deadline and proc.poll() is None:
            running = [line.split()[0] for line in _squeue() if line.endswith("RUNNING")]
            if len(list(sweep.rglob("result.json"))) >= 4 and running:
                break
            time.sleep(0.5)
        assert running and proc.poll() is None, log.read_text()[-3000:]
        while time.monotonic() < deadline and not _held_locks(sweep):  # a held job has taken its run lock
            time.sleep(0.2)
        assert _held_locks(sweep), log.read_text()[-3000:]
        arrays = sorted({line.split()[0] for line in _squeue("%F %T")})  # the sweep's job array(s)
        subprocess.run(["scancel", *arrays], env={**os.environ, **ENV}, check=True)
        assert proc.wait(timeout=300) == 1, log.read_text()[-3000:]
    out = log.read_text()
    said = " ".join(out.split())
    assert "Traceback" not in out
    assert "sequential sweep stopped: a job died: (seed=2, arm=" in said and "the job died, SLURM state CANCELLED" in said
    assert "run the same command again to resume" in said
    state = read_json(sweep / "sequential.json")
    assert state["status"] == "stopped" and "(seed=2, arm=" in state["stopped"]
    assert {r["seed"] for r in load_tree(sweep).results} == {0, 1}

    env.pop("HARNESS_TEST_HOLD_FROM_SEED")
    again = subprocess.run([os.sys.executable, "-m", "harness", *args], cwd=Path(__file__).resolve().parents[1],
                           env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_json(sweep / "sequential.json")["status"] in ("settled", "stopped")
    assert {2, 3} <= {r["seed"] for r in load_tree(sweep).results}
