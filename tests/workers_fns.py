"""A training function whose process dies in one (seed, arm), for tests/test_workers.py."""

from __future__ import annotations

import os
import signal

from tests.sequential_fns import paired_metric


def killed_at_seed(cfg, run, shift: float = 0.0, kill_seed: int = -1, kill_shift: float = 0.0) -> dict:
    """paired_metric, except that the process running (kill_seed, kill_shift) is killed with SIGKILL
    (as the kernel's out-of-memory killer would)."""
    if run.seed == kill_seed and shift == kill_shift:
        os.kill(os.getpid(), signal.SIGKILL)
    return paired_metric(cfg, run, shift=shift)


def unpaired(cfg, run, shift: float = 0.0) -> dict:
    """An arm-dependent initial weight: the arms of a seed are not paired (the harness must say so)."""
    import torch

    with run.init():
        weight = torch.randn(1) + shift
    run.watch([weight], total_steps=1)
    run.step(torch.tensor(1.0))
    return {"test_accuracy": 50.0 + float(weight), "n_test": 100}
