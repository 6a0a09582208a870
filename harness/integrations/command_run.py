"""The Run of a command unit on the CPU, torch-free: the script trains in a process of its own (with
its own torch), so the harness's process that runs the unit needs none, and does not pay torch's
seconds of import in each worker or sweep job.

``runs_without_torch(cfg)`` says when a unit takes this path: a command arm (train.cmd) whose device
is the CPU, known without torch (device=cpu, or device=auto where CUDA sees no GPU: gpus.py). A
command on a GPU records its device through torch as before. ``CommandRun`` is the part of the Run a
command arm uses (seed, device, precision, run_dir, log, black_box, adopt, finish), with the same
records (training/record.py); the unit's environment is command_env.command_environment.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Optional

from harness.training.record import adopted_record, adoption_problem, black_box_record


def runs_without_torch(cfg) -> bool:
    """Whether a unit of ``cfg`` is a command arm on the CPU, known to be so without importing torch."""
    from harness.integrations.command_spec import is_command
    from harness.training.determinism import installed_torch
    from harness.training.threads import uses_gpu

    if not is_command(cfg):
        return False
    device = str(getattr(cfg.get("device"), "value", cfg.get("device")) or "auto").lower()
    # a ROCm build sees its GPUs as CUDA devices where NVML (uses_gpu) sees none: torch decides there
    return device in ("cpu", "auto") and not uses_gpu(cfg) and installed_torch().get("hip") is None


def _usage_error(message: str) -> Exception:
    from harness.training.steps import RunUsageError  # torch: only on this error's path

    return RunUsageError(message)


class CommandRun:
    """What a command arm's unit records: a black box's final digest, or an attached script's record;
    the curve points read from its output. See the module doc."""

    device = "cpu"

    def __init__(self, seed: int, precision: str = "fp32", *,
                 progress: Optional[Callable[[int, Optional[int], float], None]] = None, run_dir=None):
        self.seed = int(seed)
        self.precision = precision
        self.run_dir = run_dir
        self.steps = 0  # nothing is stepped in this process
        self._progress = progress
        self._curve: dict[int, dict[str, float]] = {}
        self._black_box: Optional[tuple[str, str]] = None  # (final, what it covers)
        self._adopted: Optional[dict] = None
        self._t0 = time.perf_counter()

    def log(self, step: Optional[int] = None, **scalars) -> None:
        """Curve points at ``step`` (Run.log's contract)."""
        step = self.steps if step is None else int(step)
        row = self._curve.setdefault(step, {})
        for name, value in scalars.items():
            row[name] = float(value)
        if self._progress is not None and "train_loss" in row:
            self._progress(step, None, row["train_loss"])

    def black_box(self, final: str, covers: str = "metrics") -> None:
        """Run.black_box: the training ran in the command's process; ``final`` digests what it produced."""
        self._black_box = (str(final), str(covers))

    def adopt(self, record: Mapping) -> None:
        """Run.adopt: the script recorded through harness.attach(); its record becomes this run's."""
        if self._black_box is not None:  # as Run.adopt: one or the other
            raise _usage_error("run.adopt after run.black_box: a run is run elsewhere or adopted, not both.")
        problem = adoption_problem(record)
        if problem is not None:
            raise _usage_error(f"run.adopt: the record is not what an attached Run writes: {problem}.")
        self._adopted = dict(record)

    def finish(self, metrics) -> dict:
        seconds = time.perf_counter() - self._t0
        if self._black_box is not None:
            return black_box_record(metrics, *self._black_box, self._curve, seconds)
        if self._adopted is not None:
            return adopted_record(self._adopted, metrics, self._curve, seconds)
        raise _usage_error("a command unit ended with neither run.black_box nor run.adopt: nothing was recorded.")
