"""GPUs found the way CUDA sees them (CUDA_VISIBLE_DEVICES, the driver's count from NVML, no context),
and side-by-side workers spread over them one device each: tested with fake device lists and fake
memory readings, since this machine has no GPU."""

from __future__ import annotations

import os

import pytest

from harness.experiment.parallel import workers as W
from harness.training import gpus, threads
from harness.training.threads import gpu_workers

GiB = 2**30


@pytest.mark.parametrize("value, count, seen", [
    ("0,2", 4, ["0", "2"]),
    ("3,1", 4, ["3", "1"]),  # CUDA's order, not sorted
    ("1,5,2", 4, ["1"]),  # an ordinal past the driver's devices ends the list
    ("0,foo,1", 4, ["0"]),  # an entry that is not a device ends it
    ("0,0", 4, []),  # a repeated entry empties it
    ("-1", 4, []),
    ("", 4, []),
    ("GPU-aa,GPU-bb", 8, ["GPU-aa", "GPU-bb"]),
    ("MIG-x,0", 8, ["MIG-x"]),
    (" 1 , 2", 4, ["1", "2"]),
])
def test_cuda_visible_devices_is_read_as_cuda_reads_it(value, count, seen):
    assert gpus.visible({"CUDA_VISIBLE_DEVICES": value}, count=lambda: count) == seen


def test_unset_means_every_device_the_driver_has_and_no_driver_means_none():
    assert gpus.visible({}, count=lambda: 3) == ["0", "1", "2"]
    assert gpus.visible({}, count=lambda: 0) == []
    assert gpus.nvml_count() >= 0  # this machine: no libnvidia-ml, so 0 and no error


def test_device_auto_uses_a_gpu_only_where_cuda_would_see_one(monkeypatch):
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"device": "auto"})
    monkeypatch.setattr(gpus, "nvml_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert threads.uses_gpu(cfg)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hidden: no GPU, whatever /dev holds
    assert not threads.uses_gpu(cfg)
    monkeypatch.setattr(gpus, "nvml_count", lambda: 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert not threads.uses_gpu(cfg) and threads.uses_gpu(OmegaConf.create({"device": "cuda"}))


class _FakeProc:
    def __init__(self, args, env, **kw):
        self.env = env
        self.fds = [os.dup(fd) for fd in kw.get("pass_fds", ())]  # the pipes' other ends, as a child holds them

    def kill(self):
        pass

    def wait(self, timeout=None):
        return 0


def test_side_by_side_workers_get_one_gpu_each_round_robin(monkeypatch):
    import subprocess

    monkeypatch.setattr(subprocess, "Popen", _FakeProc)
    pool = W.Workers(5, gpus=["2", "5", "7"], say=lambda s: None)
    try:
        pool.start(5)
        assert [w.proc.env["CUDA_VISIBLE_DEVICES"] for w in pool._all] == ["2", "5", "7", "2", "5"]
        assert all(w.proc.env.get("PYTHONPATH") for w in pool._all)
    finally:
        for w in pool._all:
            w.tasks.close()
            w.replies.close()
            for fd in w.proc.fds:
                os.close(fd)
    cpu = W.Workers(2, say=lambda s: None)
    assert gpus.worker_env(0, cpu.gpus, {"A": "1"}) == {"A": "1"}  # no GPUs: the environment as it is


def _memory(*, used_before=0.5, peak=20.0, free_after=100.0) -> dict:
    return {"total": 140 * GiB, "used_before": int(used_before * GiB), "peak_reserved": int(peak * GiB),
            "free_after": int(free_after * GiB)}


def test_auto_on_eight_gpus_measures_one_unit_on_each_then_fills_every_device():
    said = []
    pool = W.Workers(1, grow_to=64, gpus=[str(i) for i in range(8)], say=said.append)
    assert pool.n == 8  # a first unit alone on each GPU
    pool.widen_from({"status": "completed", "seed": 0, "arm": "A", "timing": {"gpu_memory": _memory()}})
    per_gpu = 1 + int((0.9 * 100 - 20) // 20.5)  # as on one GPU (test_gpu_sharing.py): 4
    assert pool.n == 8 * per_gpu == 32 and "4 on each of 8 GPUs" in said[0]
    n, why = gpu_workers(_memory(), cap=20, devices=8)
    assert n == 20 and "capped at 20" in why
