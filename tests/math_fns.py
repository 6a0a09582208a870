"""A training function that switches float32 matmul to bf16/TF32 (a process-wide setting), for
tests/test_math_modes.py."""

from __future__ import annotations

import torch


def switches_matmul_precision(cfg, run, precision: str = "medium") -> dict:
    torch.set_float32_matmul_precision(precision)
    with run.init():
        weight = torch.randn(4, 4)
    run.watch([weight], total_steps=1)
    run.step((weight @ weight).sum())
    return {"test_accuracy": 50.0}


def puts_values(cfg, run) -> dict:
    """Tensor.put_ has no deterministic implementation on CPU: strict refuses it, warn only warns."""
    with run.init():
        weight = torch.zeros(8)
    run.watch([weight], total_steps=2)
    for _ in range(2):
        weight.put_(torch.tensor([1, 3]), torch.tensor([1.0, 2.0]))
        run.step(weight.sum())
    return {"test_accuracy": 50.0}


def reports_pid(cfg, run) -> dict:
    """A tiny run whose metric says which process trained it."""
    import os

    with run.init():
        weight = torch.randn(4)
    run.watch([weight], total_steps=2)
    for _ in range(2):
        weight.mul_(0.5)
        run.step(weight.sum())
    return {"test_accuracy": 50.0, "pid": os.getpid()}


def sticky_cuda_error(cfg, run, bad_seed: int = 0) -> dict:
    """reports_pid, except that ``bad_seed`` fails as a kernel that broke the CUDA context would."""
    if run.seed == bad_seed:
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
                           "asynchronously reported at some other API call")
    return reports_pid(cfg, run)
