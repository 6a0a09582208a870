"""A training function with no training, for the sequential tests: exact control of the effect.

``paired_metric(cfg, run, shift=..., sd=...)`` reports test_accuracy = 50 + shift + seed noise +
per-(seed, arm) noise of sd ``sd``, drawn from the run's seed and the arm's shift, so the same
(seed, arm) always gives the same number in any process. It goes through the public Run like any
training function (watch one parameter, record one step), so pairing proofs, resume, sweeps and
the analysis treat it as a real run; ``fail_seed`` makes one run fail. With ``HARNESS_TEST_HOLD_FROM_SEED=S`` in the environment it
blocks before reporting any seed >= S (a test kills the process there).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch


def paired_metric(cfg, run, shift: float = 0.0, sd: float = 1.0, fail_seed: int = -1, fail_shift: float = 0.0) -> dict:
    """fail_seed/fail_shift: the run of that seed in the arm with that shift raises (a failed run)."""
    hold = os.environ.get("HARNESS_TEST_HOLD_FROM_SEED")
    if hold is not None and run.seed >= int(hold):
        time.sleep(600)  # killed here by the test
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
