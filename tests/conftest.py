"""Shared test helpers: compose configs through Hydra's compose API, run the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness.config import compose

REPO = Path(__file__).resolve().parents[1]
TEST_CONF = REPO / "tests" / "conf"  # the tests' own config folder, added like a researcher's --config-dir

# Small and fast: 3 seeds, 30 steps on 512 digits, no wandb, no worker processes.
FAST = [
    "+experiment=loss_ab",
    "ab.seeds=[0,1,2]",
    "train.max_steps=30",
    "data.train_limit=512",
    "logger=none",
    "progress=false",
    "workers=1",  # the cheapest path: units one after another in the test's process (test_workers.py starts pools)
    # auto resolves per invocation from the load at that moment, so two invocations could differ in
    # their bits; 1 thread also never waits at a barrier on a busy machine (tests of auto: test_threads.py)
    "determinism.threads=1",
]


def compose_cfg(overrides: list[str], config_dirs=()):
    return compose(overrides, config_dirs=config_dirs)


def run_cli(args: list[str], cwd: Path | None = None, env: dict | None = None, timeout: int = 300, module: str = "harness"):
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0", **(env or {})}
    full_env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture
def compose_fn():
    return compose_cfg
