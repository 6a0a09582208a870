"""A unit whose CUDA error broke its worker's context (a sticky error) is a named failed unit, and its
worker is replaced: the next units run in a fresh worker (the error is raised on CPU as CUDA words it)."""

from __future__ import annotations

from harness.experiment.arms import arm_configs
from harness.experiment.parallel.workers import Task, Workers, broke_its_context

import pytest

from .conftest import FAST, compose_cfg

ONE = [o for o in FAST if not o.startswith("ab.seeds")] + ["ab.seeds=[0,1,2]", "train.fn=tests.math_fns.sticky_cuda_error"]


@pytest.mark.slow
def test_a_sticky_cuda_error_replaces_the_worker_and_names_the_unit():
    arm = arm_configs(compose_cfg(ONE))["A"]
    logs = []
    with Workers(1, say=logs.append) as pool:
        tasks = [Task(seed, "A", ("rerun", arm, seed, "A"), seed) for seed in (0, 1, 2)]
        out = {t.seed: (kind, body) for t, kind, body in pool.run(tasks, on_log=logs.append)}
    assert out[0][0] == "done" and out[0][1][0]["status"] == "failed"
    assert "illegal memory access" in out[0][1][0]["error"]["message"]
    assert any("seed=0 arm=A" in line and "worker was replaced" in line for line in logs), logs
    pids = {out[s][1][0]["metrics"]["pid"] for s in (1, 2)}
    assert all(out[s][1][0]["status"] == "completed" for s in (1, 2)) and len(pids) == 1  # one fresh worker


def test_only_a_failed_unit_with_a_sticky_cuda_error_breaks_its_context():
    failed = lambda message: ("done", {"status": "failed", "error": {"message": message}}, False)  # noqa: E731
    assert broke_its_context(failed("CUDA error: device-side assert triggered"))
    assert not broke_its_context(failed("CUDA out of memory. Tried to allocate 2.00 GiB"))  # not sticky
    assert not broke_its_context(failed("loss became nan"))
    assert not broke_its_context(("done", {"status": "completed"}, False))
