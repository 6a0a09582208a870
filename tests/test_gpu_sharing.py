"""Units side by side on one GPU, as many as its memory holds (issue 18, item 2): memory measured, not
guessed. With ``workers=auto`` on a GPU the first unit runs alone in one worker and records what it
used (training/gpu_memory.py: the device's memory in use when it began, its peak in the caching
allocator, what was free after it); from that measurement the pool widens to the units that fit,
never past what the free cores allow. Without a measurement (a CPU run, a failed first unit) it does
not widen. The bits are the same side by side as one at a time (deterministic kernels, each process its
own device context): scripts/gpu_check.sh measures that on a GPU; this machine has none, so these
tests check the decision and the widening on measured numbers, and that a CPU run never widens."""

from __future__ import annotations

import os

import pytest

from harness.experiment.parallel.workers import Workers
from harness.training.threads import Load, choose_threads, gpu_workers
from tests.conftest import compose_cfg
from tests.sequential_fns import paired_metric

GiB = 2**30


def _memory(*, total=140, used_before=0.5, peak=2.0, free_after=139.0) -> dict:
    """A CUDA run's timing.gpu_memory as train_one records it (bytes)."""
    return {"total": int(total * GiB), "used_before": int(used_before * GiB),
            "peak_reserved": int(peak * GiB), "free_after": int(free_after * GiB)}


def test_the_units_that_fit_come_from_the_measured_memory_capped_by_the_cores():
    # 139 GiB free after the first unit; each further worker is charged what the device held when
    # that unit began (its context, and anything others held: an upper bound) plus the unit's peak
    n, why = gpu_workers(_memory(), cap=16)
    assert n == 16 and "16" in why and "capped" in why  # ~50 would fit; 16 free cores allow 16
    n, why = gpu_workers(_memory(peak=20.0, free_after=100.0), cap=16)
    # 90% of 100 GiB, less the first worker's own next peak (20), over 20.5 GiB a worker: 3 more
    assert n == 1 + int((0.9 * 100 - 20) // 20.5) == 4 and "20.0 GiB" in why
    assert gpu_workers(_memory(peak=60.0, free_after=70.0), cap=16)[0] == 1  # a second one would not fit
    # another process held 100 GiB when the unit began: charged to every worker, so few start
    assert gpu_workers(_memory(used_before=100.0, peak=1.0, free_after=39.0), cap=16)[0] == 1


@pytest.mark.parametrize("memory", [None, {}, {"total": 1}, {"total": 10, "used_before": -1, "peak_reserved": 1,
                                                              "free_after": 5}])
def test_without_a_whole_measurement_the_pool_stays_at_one(memory):
    n, why = gpu_workers(memory, cap=16)
    assert n == 1 and "not measured" in why


def test_auto_on_a_gpu_starts_one_worker_that_may_widen_and_an_asked_count_is_kept():
    sixteen = Load(16, 0, 0.0, 0)
    auto = choose_threads("auto", sixteen, units=20, gpu=True)
    assert (auto.threads, auto.workers, auto.gpu_cap) == (1, 1, 16)  # 1-thread units: widening keeps the bits
    assert "measured" in auto.why
    assert choose_threads("auto", sixteen, units=1, gpu=True).gpu_cap == 0  # one unit: nothing to share
    assert choose_threads("auto", sixteen, units=20, gpu=True, in_sweep=True).gpu_cap == 0  # a sweep's job
    asked = choose_threads(1, sixteen, units=20, workers=4, gpu=True)
    assert (asked.workers, asked.gpu_cap) == (4, 0)  # workers=N: N units on the device, as asked
    assert choose_threads("auto", sixteen, units=20).gpu_cap == 0  # CPU: the cores decide at once


def test_the_pool_is_sized_per_arm_from_measured_units_and_never_from_a_cpu_or_failed_one():
    lines = []
    pool = Workers(1, grow_to=6, say=lines.append)
    pool.widen_from({"status": "failed", "timing": {}})
    pool.widen_from({"status": "completed", "timing": {"train_seconds": 1.0}})  # a CPU run: nothing measured
    assert (pool.n, lines) == (1, [])
    pool.widen_from({"status": "completed", "seed": 0, "arm": "A", "timing": {"gpu_memory": _memory(peak=10.0)}})
    assert pool.n == 6 and len(lines) == 1 and "seed=0 arm=A" in lines[0]
    pool.widen_from({"status": "completed", "seed": 1, "arm": "A", "timing": {"gpu_memory": _memory(peak=100.0)}})
    assert pool.n == 6 and len(lines) == 1  # an arm is decided once, on its first measured unit
    # arm B trains a bigger model: measured too, and the most demanding arm decides
    pool.widen_from({"status": "completed", "seed": 0, "arm": "B", "timing": {"gpu_memory": _memory(peak=40.0)}})
    assert pool.n == 1 + int((0.9 * 139 - 40) // 40.5) == 3 and "most demanding arm" in lines[-1]
    # out of memory all the same: one fewer side by side from now on, the unit named
    pool.widen_from({"status": "failed", "seed": 2, "arm": "B",
                     "error": {"message": "CUDA out of memory. Tried to allocate 2.00 GiB"}})
    assert pool.n == 2 and "seed=2 arm=B ran out of GPU memory" in lines[-1]


def with_pid(cfg, run, shift: float = 0.0) -> dict:
    """tests.sequential_fns.paired_metric (no training), and which process ran the unit."""
    return {**paired_metric(cfg, run, shift=shift), "pid": os.getpid()}


class _MeasuredOnGpu(Workers):
    """This machine has no GPU, so no unit measures its memory: the pool is handed the numbers a CUDA
    unit records (timing.gpu_memory), as if the units had run on one."""

    def widen_from(self, result):
        super().widen_from({**result, "timing": {**result.get("timing", {}), "gpu_memory": _memory(peak=10.0)}})


@pytest.mark.slow
def test_a_pool_that_widens_after_the_first_unit_runs_the_rest_side_by_side_with_the_serial_results(tmp_path):
    from harness.experiment.plan import Plan
    from harness.experiment.parallel.side_by_side import run_side_by_side
    from harness.experiment.units import run_plan

    cfg = compose_cfg(["+experiment=loss_ab", "logger=none", "progress=false", "determinism.threads=1",
                       "data.train_limit=64", "ab.seeds=[0,1,2,3]", "train.fn=tests.test_gpu_sharing.with_pid",
                       "+train.kwargs.shift=0.0", "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.6",
                       "repro.certificate=false", "workers=1"])  # the pool below is the side by side
    lines = []
    with _MeasuredOnGpu(1, grow_to=3, say=lines.append) as pool:
        wide = run_side_by_side(Plan.from_config(cfg, tmp_path / "wide"), pool, log=lines.append)
    serial = run_plan(Plan.from_config(cfg, tmp_path / "serial"), log=lambda line: None)

    widened = [line for line in lines if "ran alone: workers=auto on a GPU -> 3" in line]
    assert widened and widened[0].startswith("seed=0 arm=A")  # decided on the first unit, once
    pids = [r["metrics"]["pid"] for r in wide.results]
    assert len(set(pids)) == 3 and pids.count(pids[0]) < len(pids)  # the rest ran in three workers
    assert os.getpid() not in pids  # in workers, not in this process

    def what(outcome):
        return {(r["seed"], r["arm"]): (r["status"], r["fingerprints"]["final"], r["metrics"]["test_accuracy"])
                for r in outcome.results}
    assert what(wide) == what(serial) and len(what(wide)) == 8
