"""Training functions for tests/test_refusal_keeps_results.py: a refusal that comes after units ran."""

from __future__ import annotations

from harness.training.steps import RunUsageError
from tests.sequential_fns import paired_metric


def usage_slip_at_seed(cfg, run, shift: float = 0.0, slip_seed: int = 1) -> dict:
    """paired_metric, except that the run of ``slip_seed`` trains and then misuses the Run: a usage
    error found only after training, which stops the experiment (every unit would repeat it)."""
    out = paired_metric(cfg, run, shift=shift)
    if run.seed == slip_seed:
        raise RunUsageError("a usage slip found after training (tests/refusal_fns.py)")
    return out
