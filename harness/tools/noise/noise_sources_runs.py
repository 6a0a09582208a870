"""The noise sources' runs (harness/tools/noise/noise_sources.py): what each source trains, and the runs
trained one after another in this process or side by side in the experiment's worker processes
(harness/experiment/parallel/workers.py, a "call" task each), with the same bits either way: a run's bits
depend on its config and its thread count, never on the process it ran in.

How many side by side follows the experiment's rule (harness/training/threads.py, choose_threads):
``workers=auto`` gives min(runs, free cores // threads), ``workers=N`` at most N, ``workers=1`` runs
them here, one after another. Runs at another thread count (the threads source) go in a group of
their own, at most the workers and free cores // count at once: a run at 2 threads on 2 free cores runs alone
(pinned threads beside another busy process wait at every barrier, NOTES.md).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Optional

from harness.tools.golden.golden import BadInput
from harness.tools.noise.noise_runs import train_one, ulp_hook, with_changes

MODE_OFF = {"determinism.mode": "off", "determinism.cudnn_benchmark": False}


@dataclass(frozen=True)
class Job:
    """One training run of one arm: run ``index`` of ``source`` (0: the reference run)."""

    source: str
    index: int
    arm: str
    cfg: object  # the arm's resolved config, shared by its jobs (train_job sets the rest per run)
    seed: int
    ulp: Optional[int] = None  # noise_runs.ulp_hook's index: one initial weight +1 ULP
    apart: dict = field(default_factory=dict)  # streams set apart from the seed: seeds.<stream>
    changes: dict = field(default_factory=dict)  # dotted keys changed: the thread count, mode off

    @property
    def threads(self) -> int:
        return int(self.changes.get("determinism.threads", self.cfg.determinism.threads))

    @property
    def args(self) -> tuple:
        return self.cfg, self.seed, self.ulp, self.apart, self.changes


def train_job(cfg, seed: int, ulp: Optional[int] = None, apart: Optional[dict] = None,
              changes: Optional[dict] = None) -> dict:
    """One run (here, or in a worker): the training's result, with the weight a ULP nudge changed."""
    hook, changed = ulp_hook(ulp) if ulp is not None else (None, {})
    cfg = with_changes(cfg, changes) if changes else cfg  # a copy: the few runs of a numerical source
    with streams_apart(cfg, apart or {}):
        return {**train_one(cfg, seed, init_hook=hook), "ulp_change": changed or None}


def plan(source: str, seed: int, k: int, numerical: dict) -> list[tuple]:
    """The runs of one source after the reference: (streams apart, seed, config changes, ULP index).
    A stream: its seed moved, K - 1 runs; all: K - 1 other seeds; ulp: K runs, run i nudging the
    element ulp_hook(i) picks; threads: one run per other count; mode_off: K runs."""
    if source == "all":
        return [({}, seed + i, None, None) for i in range(1, k)]
    if source == "ulp":
        return [({}, seed, None, i) for i in range(k)]
    if source == "threads":
        return [({}, seed, {"determinism.threads": t}, None) for t in numerical["threads"]["counts"]]
    if source == "mode_off":
        return [({}, seed, MODE_OFF, None) for _ in range(k)]
    return [({source: seed + i}, seed, None, None) for i in range(1, k)]


def jobs_of(arms: dict, source: str, runs: list[tuple], first: int = 1) -> list[Job]:
    """Both arms of every run of ``source`` (run i's A then B, counted from ``first``): the same
    streams, thread count and nudge in both, so B - A stays paired."""
    return [Job(source, i, arm, cfg, seed, ulp, dict(apart), dict(changes or {}))
            for i, (apart, seed, changes, ulp) in enumerate(runs, first) for arm, cfg in arms.items()]


@contextmanager
def streams_apart(cfg, apart: dict):
    """``cfg`` with these streams' seeds set apart (seeds.<stream>) for one run, put back after: a
    deep copy of the config per run took longer than a small run itself (11 ms against ~25)."""
    from omegaconf import OmegaConf, open_dict

    readonly = OmegaConf.is_readonly(cfg)
    OmegaConf.set_readonly(cfg, False)
    before = cfg.get("seeds")
    try:
        with open_dict(cfg):
            cfg.seeds = dict(apart)
        yield cfg
    finally:
        with open_dict(cfg):
            cfg.seeds = before
        OmegaConf.set_readonly(cfg, readonly)


class Runner:
    """Trains lists of jobs, ``workers`` at most side by side (1: here), each thread count's jobs
    at most ``free`` // threads at once; one worker pool for every list. Counts what it ran."""

    def __init__(self, workers: int, free: int, threads: int, *, log: Callable[[str], None], gpus=(), warm=()):
        self.workers, self.free, self.log, self.warm = max(1, int(workers)), max(1, int(free)), log, tuple(warm)
        self.threads = int(threads)  # the reference's: ``workers`` was resolved for it (choose_threads)
        self.pool = None
        if self.workers > 1:
            from harness.experiment.parallel.workers import Workers

            self.pool = Workers(self.workers, say=log, gpus=gpus)
        self.started = time.perf_counter()
        self.ran, self.widths = 0, {}  # thread count -> the most of its runs at once

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> bool:
        if self.pool is not None:
            self.pool.close()
        return False

    def width(self, threads: int, runs: int) -> int:
        """How many runs at ``threads`` threads go at once: the resolved workers at the reference's
        count (workers=N is N, as in an experiment); at another count never more threads than the
        free cores."""
        fits = self.workers if threads == self.threads else self.free // threads
        return max(1, min(self.workers, fits, runs))

    def run(self, jobs: list[Job], on_done: Callable[[int, dict], None] = lambda i, r: None) -> list[dict]:
        """Every job's result, in the jobs' order; ``on_done(index, result)`` as each ends."""
        results: list = [None] * len(jobs)
        groups: dict[int, list[int]] = {}
        for i, job in enumerate(jobs):
            groups.setdefault(job.threads, []).append(i)
        for threads, indices in groups.items():
            n = self.width(threads, len(indices))
            self.widths[threads] = max(n, self.widths.get(threads, 0))
            if n == 1:
                for i in indices:
                    results[i] = train_job(*jobs[i].args)
                    on_done(i, results[i])
            else:
                self._side_by_side(jobs, indices, n, results, on_done)
            self.ran += len(indices)
        return results

    def _side_by_side(self, jobs, indices, n, results, on_done) -> None:
        from harness.experiment.parallel.workers import Task

        self.pool.n = n  # the pool's width for this group (the extra workers wait idle)
        self.pool.start(n, warm=self.warm)
        tasks = [Task(jobs[i].seed, jobs[i].arm, ("call", __name__, "train_job", jobs[i].args), i)
                 for i in indices]
        for task, kind, body in self.pool.run(tasks, on_log=self.log):
            if kind == "raise":
                raise body[0]
            if kind == "lost":
                job = jobs[task.index]
                raise BadInput(f"the worker training run {job.index} of {job.source} (arm {job.arm}) {body[0]} "
                               f"(killed, or out of memory?); run the same command again, or with workers=1.")
            results[task.index] = body[0]
            on_done(task.index, body[0])

    def summary(self) -> dict:
        """How many runs, the wall time, how many ran side by side at each thread count, and a line."""
        wall = time.perf_counter() - self.started
        at = ", ".join(f"{n} at {t} thread{'s' * (t > 1)}" for t, n in self.widths.items())
        how = "one after another" if max(self.widths.values(), default=1) == 1 else f"at most {at} side by side"
        return {"runs": self.ran, "wall_s": round(wall, 1), "side_by_side": {str(t): n for t, n in self.widths.items()},
                "free_cores": self.free,
                "line": f"trained {self.ran} runs in {wall:.0f} s wall, {how} ({self.free} free core(s) at the start)"}
