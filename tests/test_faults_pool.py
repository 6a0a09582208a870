"""A lost worker is a failed unit, not a traceback: a local_pool (joblib) sequential sweep whose
worker is SIGKILLed names the lost (seed, arm), exits 1, records the sequential state as stopped,
and the rerun resumes."""

from __future__ import annotations

import os
import signal

from harness.results import load_tree, read_json

from .conftest import run_cli
from .sequential_fns import paired_metric


def dies_once(cfg, run, shift: float = 0.0, sd: float = 1.0, die_seed: int = -1, die_shift: float = 0.0,
              marker: str = "") -> dict:
    """paired_metric, except that the run of (die_seed, die_shift) SIGKILLs its own process while the
    file ``marker`` exists (removed first: the rerun gets through), as the OOM killer would."""
    if run.seed == die_seed and shift == die_shift and marker and os.path.exists(marker):
        os.unlink(marker)
        os.kill(os.getpid(), signal.SIGKILL)
    return paired_metric(cfg, run, shift=shift, sd=sd)


def test_a_killed_pool_worker_is_named_and_the_rerun_resumes(tmp_path):
    marker = tmp_path / "die"
    marker.touch()
    sweep = tmp_path / "sweep"
    args = ["-m", "hydra/sweeper=harness_sequential", "hydra/launcher=local_pool", "+experiment=loss_ab",
            "logger=none", "progress=false", "determinism.threads=1",
            "train.fn=tests.test_faults_pool.dies_once", "+train.kwargs.shift=0.0", "+train.kwargs.sd=1.0",
            "+train.kwargs.die_seed=1", "+train.kwargs.die_shift=1.4", f"+train.kwargs.marker={marker}",
            "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.4", "ab.sequential.max_seeds=8",
            "stats.margin=null", f"hydra.sweep.dir={sweep}"]
    proc = run_cli(args)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert not marker.exists()  # the planned death happened
    assert "Traceback" not in proc.stderr and "TerminatedWorkerError" not in proc.stderr
    err = " ".join(proc.stderr.split())
    assert "(seed=1, arm=B): the job died, killed by signal 9" in err, err[-2000:]
    assert "run the same command again to resume" in err
    state = read_json(sweep / "sequential.json")
    assert state["status"] == "stopped" and "(seed=1, arm=B)" in state["stopped"]
    done = {(r["seed"], r["arm"]) for r in load_tree(sweep).results}
    assert (1, "B") not in done

    again = run_cli(args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_json(sweep / "sequential.json")["status"] == "settled"
    assert (1, "B") in {(r["seed"], r["arm"]) for r in load_tree(sweep).results}
