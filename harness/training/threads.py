"""How many CPU threads a run pins: the rule behind ``determinism.threads`` (torch-free, cheap).

Pinned OpenMP threads wait for each other at every barrier. When another runnable process holds one
of the cores, each barrier waits for a time slice: on 2 cores with ONE busy neighbour, 2 pinned
threads were 15-135x slower than 1 (docs/determinism-cost.md). So the default, ``auto``, never
pins more threads than there are free cores:

    auto = max(1, cores - busy), where
    cores = the CPUs this process may use (affinity, and a cgroup CPU quota when there is one)
    busy  = other runnable processes on those cores at start: the larger of the runnable count now
            (median of a few samples of /proc/loadavg, this process excluded) and the 1-minute
            load average rounded down, scaled to our share of the machine's CPUs.

Units side by side (``workers``, harness/experiment/parallel/workers.py): one invocation runs its (seed, arm)
units in long-lived worker processes, ``workers x threads <= free cores``. On 2 free cores, 2 units
x 1 thread beat 1 unit x 2 threads (the pinned threads' barriers cost more than a second process),
so with ``workers=auto`` the auto thread count is shared out among the units:

    threads = max(1, free // units)        (1 on 2 cores for any experiment of 2 units or more)
    workers = min(units, free // threads)  (1: today's serial path, in this process)

and a single unit (``seed=``/``arm=`` narrowed, a one-unit experiment) gets every free core as
threads. ``workers=N`` asks for N (never more than the units); ``auto`` threads then share the free
cores among those N. On a GPU, ``workers=auto`` measures before it shares the device: the threads
are shared out as above (1 per unit when the units outnumber the free cores), the first unit runs
alone in one worker and records its memory (gpu_memory.py), and the pool then widens to the units
that fit (``gpu_workers``), at most the free cores // threads; ``workers=N`` puts N units on the one
device as asked. The worker count is not part of any identity: the bits depend on the threads
per unit only, so the same thread count gives the same bits serially and side by side.

A sweep's jobs (``-m``) resolve on their own, possibly at the same moment, so there ``auto`` is 1:
two arms of one seed must never get other thread counts from two measurements. An output folder
that already holds this experiment keeps the count its results were made with (the bits of a
resumed experiment do not change with the load). An explicit integer is pinned as given; when it is
more than the free cores, a warning names the load, the slowdown to expect and the setting.

The RESOLVED integer is written into the config before anything is hashed: it is part of every
run's identity (config_hash) and bits, so ``auto`` resolved to 1 and to 2 are two configurations,
and resume compares the resolved counts.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

AUTO = "auto"
# The thread trap's cost on a 2-core host with one busy process, 2 pinned threads vs 1 (NOTES.md).
TRAP_SLOWDOWN = "15-135x"


@dataclass(frozen=True)
class Load:
    """What the machine looked like at start."""

    cores: int  # CPUs this process may use
    busy: int  # other runnable processes competing for them
    load_average: Optional[float] = None  # 1-minute, for the message
    runnable: Optional[int] = None  # runnable others seen now (median of the samples)

    @property
    def free(self) -> int:
        return max(1, self.cores - self.busy)

    @property
    def free_now(self) -> int:
        """The cores free at this moment (the load average, which lags a minute behind a job that just
        ended, left out): enough for single-thread workers, which have no barrier to wait at."""
        return max(1, self.cores - self.runnable) if self.runnable is not None else self.free

    def describe(self) -> str:
        la = f", load average {self.load_average:.2f}" if self.load_average is not None else ""
        return f"{self.busy} other busy process(es) on {self.cores} core(s){la}"


@dataclass(frozen=True)
class ThreadChoice:
    requested: object  # "auto" or the integer asked for
    threads: int  # what every run pins
    why: str  # one line for the log
    warning: Optional[str] = None  # set when the pinned threads will wait for busy cores
    workers: int = 1  # units side by side (1: serial, in this process)
    gpu_cap: int = 0  # workers=auto on a GPU: the most the pool may widen to once a unit measured its memory


def is_auto(value) -> bool:
    return isinstance(value, str) and value.strip().lower() == AUTO


def usable_cores() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:  # cgroup v2: "max 100000" or "200000 100000"
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def _runnable_now() -> Optional[int]:
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def measure_load(samples: int = 5, interval: float = 0.02) -> Load:
    """The free cores at start: about 0.1 s of sampling, no torch."""
    cores = usable_cores()
    host = os.cpu_count() or cores
    seen = []
    for i in range(samples):
        r = _runnable_now()
        if r is not None:
            seen.append(max(0, r - 1))  # this process is one of the runnable
        if i + 1 < samples:
            time.sleep(interval)
    runnable = sorted(seen)[len(seen) // 2] if seen else None
    try:
        load_average = os.getloadavg()[0]
    except (AttributeError, OSError):
        load_average = None
    busy = max(runnable or 0, int(load_average or 0))
    if host > cores:  # the counts are the whole machine's; we compete on our share of it
        busy = int(busy * cores / host)
    return Load(cores=cores, busy=busy, load_average=load_average, runnable=runnable)


def choose_threads(requested, load: Load, *, in_sweep: bool = False, recorded: Optional[int] = None,
                   units: int = 1, workers=AUTO, gpu: bool = False, nproc: int = 1) -> ThreadChoice:
    """The rule (module docstring), given a measured load. ``recorded``: the count this output folder's
    results were made with, if any; ``units``: the (seed, arm) units this invocation may run;
    ``workers``: "auto" or the integer asked for; ``gpu``: the runs use a GPU (auto workers: 1 to
    start, widened up to ``gpu_cap`` by the first unit's measured memory: gpu_workers); ``nproc``:
    the processes each unit runs as (train.nproc): a unit takes that many worker slots, and its ranks
    wait for each other at every collective as pinned threads do at a barrier, so processes x threads
    count against the free cores."""
    units, nproc = max(1, int(units)), max(1, int(nproc))
    if nproc > 1:
        return _ranked(choose_threads(requested, _shared(load, nproc), in_sweep=in_sweep, recorded=recorded,
                                      units=units, workers=workers if is_auto(workers) else max(1, int(workers) // nproc),
                                      gpu=gpu), requested, load, nproc, workers)
    alone = in_sweep or units == 1  # nothing to put side by side
    share = 1 if alone or workers == 1 else (units if is_auto(workers) else min(int(workers), units))
    if is_auto(requested):
        if recorded is not None:
            threads, why = recorded, f"determinism.threads=auto -> {recorded} (the count this folder's results were made with)"
        elif in_sweep:
            threads, why = 1, "determinism.threads=auto -> 1 (in a sweep, jobs run side by side and resolve on their own)"
        else:
            threads = max(1, load.free // share)
            why = f"determinism.threads=auto -> {threads} ({load.free} free core(s): {load.describe()})"
    else:
        threads, why = int(requested), f"determinism.threads={int(requested)}"
    cap = 0
    if alone:
        n = 1
    elif is_auto(workers):  # 1-thread units only time-share a busy core; pinned threads would wait at barriers
        n = max(1, min(units, (load.free_now if threads == 1 else load.free) // threads))
        if gpu:  # the device's memory decides too, once measured: one unit first
            n, cap = 1, n
            why += (f"; workers=auto on a GPU -> 1 unit first, then as many as its measured memory holds, "
                    f"at most {cap} ({units} units, {threads} thread(s) each)")
    else:
        n = max(1, min(int(workers), units))
    if n > 1 or not alone and not is_auto(workers):
        why += f"; workers={workers} -> {n} ({units} units, {n} side by side x {threads} thread(s))"
    warning = None
    if threads > 1 and threads * n > load.free:
        warning = (
            f"the machine is busy ({load.describe()}): {threads} pinned threads will wait for a time "
            f"slice at every barrier, and runs can be many times slower (measured {TRAP_SLOWDOWN} slower "
            f"than 1 thread on 2 cores with one busy process). Set determinism.threads=auto (here "
            f"{load.free}) or determinism.threads={load.free}; the thread count is part of the bits, so "
            "results made with another count are rerun, not mixed."
        )
    return ThreadChoice(requested, threads, why, warning, n, cap if cap > 1 else 0)


def _shared(load: Load, nproc: int) -> Load:
    """The load as one rank of an ``nproc``-process unit sees it: the free cores divided among the ranks."""
    cores = max(1, load.cores // nproc)
    return Load(cores=cores, busy=min(cores - 1, load.busy // nproc) if cores > 1 else 0,
                load_average=load.load_average,
                runnable=None if load.runnable is None else min(cores, load.runnable // nproc))


def _ranked(choice: ThreadChoice, requested, load: Load, nproc: int, workers) -> ThreadChoice:
    """A choice made per rank, said for units of ``nproc`` processes."""
    why = choice.why + f"; train.nproc={nproc}: each unit is {nproc} processes x {choice.threads} thread(s)"
    if not is_auto(workers):
        why += f", so workers={workers} slots hold {choice.workers} unit(s) side by side"
    warning = choice.warning
    if warning is None and nproc * choice.threads * choice.workers > load.free:
        warning = (f"the machine is busy ({load.describe()}): {choice.workers} unit(s) of {nproc} processes x "
                   f"{choice.threads} thread(s) need more cores than are free, and ranks wait for each other at "
                   f"every collective as pinned threads wait at a barrier (measured {TRAP_SLOWDOWN} slower for "
                   f"threads on 2 cores with one busy process). Lower {'workers' if choice.workers > 1 else 'train.nproc'} "
                   f"or determinism.threads.")
    return ThreadChoice(requested, choice.threads, why, warning, choice.workers, choice.gpu_cap)


GPU_MEMORY_SHARE = 0.9  # of the free memory: the rest for what a measurement cannot see coming
_GPU_MEMORY_KEYS = ("total", "used_before", "peak_reserved", "free_after")


def gpu_workers(memory, *, cap: int, devices: int = 1) -> tuple[int, str]:
    """(workers, why): how many units fit on the GPUs side by side, from one unit's measured memory
    (gpu_memory.py): as many on each of ``devices`` (workers spread over them), at most ``cap``. The worker that ran it needs its peak again for its next unit;
    each new worker is charged ``used_before`` (its context: an upper bound, since it includes what
    others held) plus the peak; together within GPU_MEMORY_SHARE of what was free after the unit."""
    if not isinstance(memory, dict) or any(type(memory.get(k)) is not int or memory[k] < 0 for k in _GPU_MEMORY_KEYS):
        return 1, "workers=auto on a GPU -> 1 (the unit's memory was not measured)"
    gib = lambda b: f"{b / 2**30:.1f} GiB"  # noqa: E731
    used, peak, free = memory["used_before"], memory["peak_reserved"], memory["free_after"]
    per_worker = used + peak
    room = GPU_MEMORY_SHARE * free - peak
    fit = (1 + max(0, int(room // per_worker)) if per_worker > 0 else cap) * max(1, devices)
    n = max(1, min(cap, fit))
    where = f" ({fit // max(1, devices)} on each of {devices} GPUs)" if devices > 1 else ""
    return n, (f"workers=auto on a GPU -> {n}{where}: the unit peaked at {gib(peak)} with {gib(used)} in use on the device "
               f"as it began (charged to each new worker: a context and what others held), {gib(free)} of "
               f"{gib(memory['total'])} free after it: {fit} fit in {GPU_MEMORY_SHARE:.0%} of that"
               + (f", capped at {cap} by the free cores" if fit > cap else ""))


def resolve_threads(cfg, *, say: Callable[[str], None] = print, warn: Optional[Callable[[str], None]] = None,
                    in_sweep: bool = False, recorded: Optional[int] = None,
                    measure: Callable[[], Load] = measure_load) -> ThreadChoice:
    """Write the resolved count into ``cfg.determinism.threads`` (so it is hashed), say the decision,
    and warn when the pinned threads will wait for busy cores. Measures only when needed."""
    from omegaconf import OmegaConf, open_dict

    requested = cfg.determinism.threads
    if isinstance(requested, bool) or not (is_auto(requested) or isinstance(requested, int)):
        return ThreadChoice(requested, 0, "")  # preflight names the bad value
    workers = cfg.get("workers", AUTO)
    problem = workers_problem(workers)
    if problem:
        raise ValueError(problem)
    load, nproc = measure(), processes_of(cfg)
    choice = choose_threads(requested, load, in_sweep=in_sweep, recorded=recorded, units=units_of(cfg),
                            workers=AUTO if is_auto(workers) else int(workers), gpu=uses_gpu(cfg),
                            nproc=nproc)
    readonly = OmegaConf.is_readonly(cfg)
    OmegaConf.set_readonly(cfg, False)
    with open_dict(cfg):
        cfg.determinism.threads = choice.threads
        cfg.workers = choice.workers  # not hashed (results.NOT_IN_IDENTITY): it changes no bit
    OmegaConf.set_readonly(cfg, readonly)
    if is_auto(requested) or choice.workers > 1 or (nproc > 1 and not is_auto(workers)):
        say(choice.why)  # an auto count, units side by side, or the units the slots asked for hold
    if choice.warning:
        (warn or say)(f"warning: {choice.warning}")
    return choice


def workers_problem(value) -> Optional[str]:
    """The one-paragraph refusal of a bad ``workers`` value, or None."""
    if is_auto(value) or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return (f"workers={value!r} is not allowed: give 'auto' (the free cores divided by the threads per unit, "
            "never more than the units) or an integer >= 1 (1 runs the units one after another in this "
            "process). The worker count changes no result: the bits depend on determinism.threads only.")


def units_of(cfg) -> int:
    """The (seed, arm) units one invocation of ``cfg`` runs (narrowed by seed= and arm=)."""
    try:
        seeds = 1 if cfg.get("seed") is not None else len(cfg.ab.seeds)
        arms = 1 if cfg.get("arm") is not None else len(cfg.ab.arms)
    except (AttributeError, TypeError):
        return 1
    return max(1, seeds * arms)


def processes_of(cfg) -> int:
    """The most processes one unit of ``cfg`` runs as: train.nproc, or the largest arm's where the arms
    differ in it (ab.factor=train.nproc); 1 where unset or not (yet) a valid count."""
    from omegaconf import OmegaConf

    def count(value) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1

    try:
        most = count(OmegaConf.select(cfg, "train.nproc", default=1))
        if str(OmegaConf.select(cfg, "ab.factor", default="") or "") == "train.nproc":
            arms = OmegaConf.to_container(cfg.ab.arms, resolve=True)
            most = max([most, *(count(v) for v in arms.values())])
    except Exception:  # noqa: BLE001 - a config that does not resolve is named by the preflight
        return 1
    return most


def uses_gpu(cfg) -> bool:
    """Whether the runs will use a GPU, decided without importing torch: device=cuda, or device=auto
    where CUDA will see a GPU (CUDA_VISIBLE_DEVICES and the driver's count, no context: gpus.py)."""
    from harness.training.gpus import visible

    device = str(getattr(cfg.get("device"), "value", cfg.get("device")) or "auto").lower()
    return device.startswith("cuda") or (device == "auto" and bool(visible()))
