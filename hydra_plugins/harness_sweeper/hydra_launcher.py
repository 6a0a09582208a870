"""Hydra's launcher for the adaptive loop (harness/experiment/adaptive/loop.py), and what both adaptive
sweepers share: their setup, the task config, numbered job folders, units whose job died.

BasicSweeper's pattern: every batch goes through ``self.launcher.launch`` (any launcher: basic,
``hydra/launcher=local_pool``, submitit), ``initial_job_idx`` growing so job folders never collide.
A job's status is read, never its return value (which re-raises); a run that fails inside a job is
recorded in its result file. A job that dies (SIGKILL, scancel) is a failed unit too
(_lost_units.py): it counts against the failure budget, the sweep goes on, the process exits 1
naming it, and the next run of the command runs it again. A job that failed before writing a result
is named in ``unrecorded``, which the loop counts against the same budget.

Imported by Hydra's plugin discovery in every app: the harness is imported only inside methods.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import List, Optional

from hydra.core.utils import JobStatus
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

log = logging.getLogger("harness")


def fail(message: str, code: int) -> None:
    print(f"\nharness: error: {message}\n", file=sys.stderr)
    raise SystemExit(code)


class HydraLauncher:
    """Launches the loop's (seed, arm) units as jobs ``<overrides> seed=S arm=A``
    (``max_batch_size`` at a time), skipping those that already have a result."""

    stall_hint = "check the jobs' logs (a job folder per job)."

    def __init__(self, launcher, root: Path, name: str, overrides: list, max_batch_size: Optional[int]):
        self.launcher, self.root, self.name = launcher, root, name
        self.overrides, self.max_batch_size = overrides, max_batch_size
        self.idx = next_job_idx(root)
        self.returns: list = []
        self.unrecorded: list = []  # jobs that failed before writing a result
        self.lost: list = []  # messages naming the units whose job died

    def launch(self, units: list, words: str, say, loaded: list) -> None:
        from ._lost_units import launch_surviving

        have = {(r.get("seed"), str(r.get("arm"))) for r in loaded}
        jobs = [list(self.overrides) + [f"seed={s}", f"arm={a}"] for s, a in units if (s, a) not in have]
        say(f"{self.name}: batch of {len(jobs)} job(s), {words}")
        step = self.max_batch_size or len(jobs) or 1
        for i in range(0, len(jobs), step):
            launched = launch_surviving(self.launcher, jobs[i: i + step], self.idx, self.root, say=log.warning)
            self.idx = launched.next_idx
            if launched.lost:
                self.lost.append(launched.message())
                if launched.unrecorded:  # died before its run: no result file counts it
                    self.unrecorded.append(launched.lost[-1])
            for ran, results in launched.launched:
                self.returns.append(results)
                self.unrecorded += [f"{' '.join(j[-2:])}: {_why(r)}" for j, r in zip(ran, results)
                                    if r.status != JobStatus.COMPLETED]

    def died(self) -> str:
        """The units whose job died, and what to do; '' when none did."""
        if not self.lost:
            return ""
        return (f"some units failed because their job died: {'; '.join(self.lost)}. They count as failed runs here; "
                "run the same command again to resume (they run again, and so does every (seed, arm) without a "
                "result).")


def _why(r) -> str:
    try:
        r.return_value  # re-raises the job's exception (status is FAILED)
    except BaseException as e:  # noqa: BLE001 - named in the message
        return f"{type(e).__name__}: {e}"
    return f"status {r.status}"


def next_job_idx(root: Path) -> int:
    """Numbered job folders (hydra.sweep.subdir=${hydra.job.num}): continue after the highest one."""
    nums = [int(p.name) for p in root.iterdir() if p.is_dir() and re.fullmatch(r"\d+", p.name)] if root.exists() else []
    return max(nums) + 1 if nums else 0


def rerun_lost(root: Path) -> None:
    """Units whose job died in an earlier sweep (_lost_units.py) run again: set aside, like resume
    reruns them in a plain sweep. A run that failed by itself stays a failure."""
    from harness.experiment.resume import supersede
    from harness.results import MAX_RESULT_BYTES, find_result_files, read_json

    from ._lost_units import LOST_TYPE

    for path in find_result_files(root) if root.exists() else []:
        try:
            r = read_json(path, MAX_RESULT_BYTES)  # a huge file is not read here (the analysis names it)
        except (OSError, ValueError):
            continue
        if r.get("status") == "failed" and (r.get("error") or {}).get("type") == LOST_TYPE:
            dest = supersede(path)
            log.info(f"seed={r.get('seed')} arm={r.get('arm')}: its job died in an earlier sweep; it runs again "
                     f"when its seed is reached (that record moved to {dest})")


class AdaptiveSweeperImpl:
    """Setup shared by the sequential and race sweepers; ``run`` starts the loop on Hydra's launcher."""

    def __init__(self, max_batch_size: Optional[int]) -> None:
        if max_batch_size is not None and (not isinstance(max_batch_size, int) or max_batch_size < 1):
            fail(f"hydra.sweeper.max_batch_size={max_batch_size!r} must be an integer >= 1 or null "
                 "(null: launch a whole batch of seeds at once).", 2)
        self.max_batch_size = max_batch_size
        self.config: Optional[DictConfig] = None
        self.launcher = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    def run(self, policy, arm_cfgs: dict, root: Path, name: str, overrides: List[str]):
        """The loop on this sweeper's launcher, after the start's identity rules; (Ended, HydraLauncher).
        A state file that cannot be written ends the sweep with the storage message (exit 1)."""
        from omegaconf import OmegaConf

        from harness.experiment.adaptive.identity_watch import IdentityWatch, refresh
        from harness.experiment.adaptive.loop import run_loop
        from harness.experiment.execute import storage_message

        OmegaConf.save(self.config, root / "multirun.yaml")
        refresh(arm_cfgs, root, say=log.info)
        rerun_lost(root)  # units whose job died in an earlier sweep run again (_lost_units.py)
        watch = IdentityWatch(arm_cfgs, what=policy.what)  # from here on, a changed config or code stops the sweep
        launcher = HydraLauncher(self.launcher, root, name, overrides, self.max_batch_size)
        try:
            return run_loop(policy, launcher, root, watch, log.info, storage=lambda e: storage_message(e, root)), \
                launcher
        except OSError as e:
            fail(storage_message(e, root), 1)
