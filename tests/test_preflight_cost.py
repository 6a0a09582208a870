"""The preflight builds the optimizer (and a scheduler's dummy one) so that their own checks run before
any run, without importing torch._dynamo: torch's Optimizer.add_param_group imports it on its first
call (1-2 s), paid for nothing by a sweep's launching process and by a job whose training function
steps no torch optimizer. The refusals stay the optimizer's own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

PREFLIGHT = """
import sys
from tests.conftest import FAST, compose_cfg
from harness.experiment.arms import arm_configs
from harness.config.preflight import PreflightError, preflight

cfg = compose_cfg([*FAST, *sys.argv[1:]])
try:
    preflight(cfg, arm_configs(cfg))
    print("passed")
except PreflightError as e:
    print("refused:", e)
print("dynamo imported:", "torch._dynamo" in sys.modules)
"""


def _preflight(*overrides):
    proc = subprocess.run([sys.executable, "-c", PREFLIGHT, *overrides], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("overrides", [[], ["scheduler=step"],
                                       ["optim._target_=torch.optim.Adam", "~optim.momentum", "~optim.nesterov",
                                        "+optim.betas=[0.9,0.99]"]])
def test_the_preflight_builds_the_optimizer_without_importing_torch_dynamo(overrides):
    said = _preflight(*overrides)
    assert "passed" in said and "dynamo imported: False" in said, said


@pytest.mark.parametrize("overrides, refusal", [
    (["optim.lr=-1"], "optim: torch.optim.SGD refused its arguments lr=-1, momentum=0.9, nesterov=True, "
                      "weight_decay=0.0005: Invalid learning rate: -1 Nothing was run."),
    (["optim._target_=torch.optim.Adam", "~optim.momentum", "~optim.nesterov", "+optim.betas=[0.9,1.5]"],
     "Invalid beta parameter at index 1: 1.5"),
])
def test_the_optimizers_own_checks_still_refuse(overrides, refusal):
    said = _preflight(*overrides)
    assert "refused:" in said and refusal in said, said
