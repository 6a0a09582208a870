"""A training function with no training, for the sequential tests: exact control of the effect.

``paired_metric(cfg, run, shift=..., sd=...)`` reports test_accuracy = 50 + shift + seed noise +
per-(seed, arm) noise of sd ``sd``, drawn from the run's seed and the arm's shift, so the same
(seed, arm) always gives the same number in any process. It goes through the public Run like any
training function (watch one parameter, record one step), so pairing proofs, resume, sweeps and
the analysis treat it as a real run; ``fail_seed`` makes one run fail. With ``HARNESS_TEST_HOLD_FROM_SEED=S`` in the environment it
blocks before reporting any seed >= S (a test kills the process there). With
``HARNESS_TEST_HOLD_ONCE=FOLDER``, the run of (seed S, shift X) blocks if the file ``FOLDER/S_X``
exists, and only the first time (it removes that file; its rerun goes through), after writing
``FOLDER/S_X.held`` with its PID and SLURM job id (for the test to kill, cancel or requeue it).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import torch


def paired_metric(cfg, run, shift: float = 0.0, sd: float = 1.0, fail_seed: int = -1, fail_shift: float = 0.0) -> dict:
    """fail_seed/fail_shift: the run of that seed in the arm with that shift raises (a failed run)."""
    hold = os.environ.get("HARNESS_TEST_HOLD_FROM_SEED")
    if hold is not None and run.seed >= int(hold):
        time.sleep(600)  # killed here by the test
    _hold_once(run.seed, shift)
    with run.init():
        weight = torch.randn(1)  # from the init stream: the same in every arm of a seed
    run.watch([weight], total_steps=1)
    weight += shift  # the "training": final weights differ between seeds and between arms
    run.step(torch.tensor(1.0))
    if run.seed == fail_seed and shift == fail_shift:
        raise RuntimeError(f"planned failure of seed {run.seed} at shift {shift}")
    common = np.random.default_rng([run.seed, 7]).normal(0.0, 3.0)  # shared by the arms of a seed
    own = np.random.default_rng([run.seed, 11, int(round(shift * 1000)) + 10**6]).normal(0.0, sd)
    return {"test_accuracy": 50.0 + shift + common + own, "n_test": 100}


def _hold_once(seed: int, shift: float) -> None:
    folder = os.environ.get("HARNESS_TEST_HOLD_ONCE")
    if not folder:
        return
    marker = os.path.join(folder, f"{seed}_{shift:g}")
    try:
        os.unlink(marker)  # atomic: one run claims it
    except FileNotFoundError:
        return
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    with open(marker + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "slurm": f"{job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job
                   else os.environ.get("SLURM_JOB_ID")}, f)
    os.replace(marker + ".tmp", marker + ".held")
    time.sleep(600)  # killed, cancelled or requeued here by the test


EDIT_MARK = "\n# edited by a run (tests/sequential_fns.py: edits_a_file)\n"


def edits_a_file(cfg, run, shift: float = 0.0, sd: float = 1.0, edit_from_seed: int = -1, edit_path: str = "") -> dict:
    """paired_metric, and once a run's seed reaches ``edit_from_seed`` it appends a comment (once) to
    ``edit_path`` -- by default this function's own source file, as loaded (a test copies this module
    to a temporary folder first). Its numbers never change: only the code identity of later runs does,
    for a launcher that starts a process per job (the source is read again) or a file in
    repro.code_paths (read again by the identity check)."""
    out = paired_metric(cfg, run, shift=shift, sd=sd)
    if 0 <= edit_from_seed <= run.seed:
        path = edit_path or __file__
        with open(path) as f:
            text = f.read()
        if EDIT_MARK not in text:
            with open(path, "a") as f:
                f.write(EDIT_MARK)
    return out


def sets_env(cfg, run, shift: float = 0.0, sd: float = 1.0, env_from_seed: int = -1, env_var: str = "",
             tag: str = "") -> dict:
    """paired_metric, and once a run's seed reaches ``env_from_seed`` it sets ``env_var`` in its own
    process: a config value interpolated from it (``tag: ${oc.env:VAR,start}``) resolves differently
    in the runs that follow in that process -- a config-side identity change in the middle of a run."""
    out = paired_metric(cfg, run, shift=shift, sd=sd)
    if 0 <= env_from_seed <= run.seed:
        os.environ[env_var] = "changed"
    return out


def diverges(cfg, run, shift: float = 0.0, sd: float = 1.0, nan_shift: float = 99.0, nan_seed: int = -1) -> dict:
    """paired_metric, except that the run of seed ``nan_seed`` in the arm with shift ``nan_shift``
    reports a NaN loss at its one step: a diverged run (NonFiniteLoss), as a too-large step size makes."""
    if run.seed == nan_seed and shift == nan_shift:
        with run.init():
            weight = torch.randn(1)
        run.watch([weight], total_steps=1)
        run.step(torch.tensor(float("nan")))
    return paired_metric(cfg, run, shift=shift, sd=sd)


def paired_value(seed: int, shift: float, sd: float = 1.0) -> float:
    """paired_metric's test_accuracy without a run: what the race tests expect (the same draws)."""
    common = np.random.default_rng([seed, 7]).normal(0.0, 3.0)
    own = np.random.default_rng([seed, 11, int(round(shift * 1000)) + 10**6]).normal(0.0, sd)
    return 50.0 + shift + common + own
