"""The watched model's side of a Run: ``run.watch`` and ``run.step``.

``Watched`` holds one model (or list of parameters) from ``run.watch`` on: its init fingerprint, the
packed parameters and the ``StepRecorder`` that digests them every step, the kept per-step weights
(harness.diff's butterfly curve), the non-finite and replaced-parameter checks, and, at the end,
the fingerprint and weight blocks of the run's record. The exceptions a Run raises live here too
(harness.training.run re-exports them).
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import numpy as np
import torch

from harness import HarnessError
from harness.training.fingerprint import StepRecorder, hexdigest, model_fingerprint, tensors_digest


class NonFiniteLoss(HarnessError):
    def __init__(self, step: int, value: float):
        super().__init__(f"loss became {value} at step {step}")
        self.step, self.value = step, value

    def __reduce__(self):  # pickled by a worker: rebuilt from its own arguments, not its message
        return type(self), (self.step, self.value)


# Not a HarnessError (so not a RuntimeError): a request to stop, not an error, which a training
# loop's `except RuntimeError` (say, an out-of-memory retry) must not swallow.
class StopRun(Exception):
    """Raised by run.step when the harness asked for only the first N steps (harness.audit)."""


class RunUsageError(HarnessError):
    """The training function used the Run in a way that would make its fingerprints wrong."""


class Watched:
    """One model watched from its initial weights to its last step. See the module doc."""

    def __init__(self, model: torch.nn.Module | Iterable[torch.Tensor], total_steps: Optional[int],
                 device: torch.device, *, flatten: Callable, init_hook: Optional[Callable] = None,
                 keep_step_weights: int = 0, check_every: int = 10, stop_after: Optional[int] = None):
        """``flatten(params)`` packs the parameters into one buffer (fingerprint.flatten_parameters,
        looked up by the Run so a test can turn packing off)."""
        self.model: Optional[torch.nn.Module] = None
        if isinstance(model, torch.nn.Module):
            self.model = model
            if init_hook is not None:
                with torch.no_grad():
                    init_hook(model)
            self.init_fp = model_fingerprint(model)
            params = list(model.parameters())
        else:
            params = list(model)
            self.init_fp = hexdigest(tensors_digest(params))
        flatten(params)
        self.params = params
        self.total = int(total_steps) if total_steps else None
        self.recorder = StepRecorder(params, self.total or 1024, device)
        self.steps = 0
        self._keep = int(keep_step_weights)
        self._step_weights: list[torch.Tensor] = []
        self._check_every = max(1, int(check_every))
        self._stop_after = stop_after
        self._finite_upto = 0  # steps whose loss check_finite has seen

    def step(self, loss: torch.Tensor) -> None:
        """One optimizer step: the loss's bits and the parameter digest, on the device (no host sync
        except every ``check_every`` steps, where a non-finite loss stops the run)."""
        self.recorder.record(loss)
        self.steps += 1
        if self.steps <= self._keep:
            self._step_weights.append(torch.cat([p.detach().reshape(-1).float().cpu() for p in self.params]))
        if self.steps % self._check_every == 0 or self.steps == self.total:
            self.check_finite()
        if self._stop_after is not None and self.steps >= self._stop_after:
            raise StopRun(self.steps)

    def check_finite(self) -> None:
        """A non-finite loss stops the run; so do parameters replaced since run.watch (a module walk)."""
        why = self.recorder.replaced(self.model) if self.model is not None else None
        if why is not None:
            raise RunUsageError(why)
        start = self._finite_upto  # the losses before it were checked already: each is read once
        host = self.recorder.host_losses  # in host memory: numpy reads them (4 torch calls cost ~0.1 ms a check)
        if host is not None and np.isfinite(host[start : self.steps]).all():
            self._finite_upto = self.steps
            return
        losses = self.recorder.losses[start : self.steps]
        finite = torch.isfinite(losses)
        if not bool(finite.all()):  # the one host sync; the first bad step is looked for only then
            first = int((~finite).nonzero()[0, 0])
            raise NonFiniteLoss(start + first + 1, float(losses[first]))
        self._finite_upto = self.steps

    def fingerprints(self) -> dict:
        """init, final and per-step fingerprints (the last check first: a stale record is refused)."""
        self.check_finite()
        steps = self.recorder.finish()
        final = model_fingerprint(self.model) if self.model is not None else hexdigest(tensors_digest(self.params))
        return {"init": self.init_fp, "final": final, "steps": {"loss": steps["loss"], "params": steps["params"]}}

    def weights(self) -> dict:
        """The final weights and the kept per-step ones (repro.save_weights, repro.keep_step_weights)."""
        state = self.model.state_dict() if self.model is not None else {str(i): p for i, p in enumerate(self.params)}
        return {
            "final": {k: v.detach().cpu().clone() for k, v in state.items()},
            "steps": torch.stack(self._step_weights) if self._step_weights else None,
        }

    @property
    def last_loss(self) -> Optional[float]:
        """The last recorded loss (a host sync), None before the first step."""
        return float(self.recorder.losses[self.steps - 1]) if self.steps else None
