"""A plain sweep composes each job's config twice, not three times: once in the precheck (which
refuses a bad job before any is launched) and once in the launcher that runs it. Hydra's sweeper
would compose each again only to find that it composes (validate_batch_is_legal), about a third of
a second per job; the harness's plain sweeper skips that for the jobs the precheck composed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

COUNT = """
import runpy, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl

composed = []
real = ConfigLoaderImpl.load_sweep_config

def counting(self, master_config, sweep_overrides):
    composed.append(tuple(sorted(sweep_overrides)))
    return real(self, master_config, sweep_overrides)

ConfigLoaderImpl.load_sweep_config = counting
sys.argv = ["harness", "-m", "+experiment=loss_ab", "logger=none", "progress=false", "determinism.threads=1",
            "workers=1", "train.fn=tests.sequential_fns.paired_metric", "seed=0", "arm=A,B",
            "hydra.sweep.dir=" + sys.argv[1]]
try:
    runpy.run_module("harness", run_name="__main__")
except SystemExit:
    pass
print("composed", len(composed), "times,", len(set(composed)), "jobs")
"""


def test_each_job_of_a_plain_sweep_is_composed_by_the_precheck_and_the_launcher_only(tmp_path):
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-c", COUNT, str(sweep)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"})
    assert len(list(sweep.rglob("result.json"))) == 2, proc.stderr[-3000:]  # both jobs ran
    assert "composed 4 times, 2 jobs" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
