"""Which op in my model blocks deterministic mode, and where is it called?

    python -m harness.audit [OVERRIDE ...]      (the same Hydra overrides as python -m harness)

Runs ONE training step of the composed config's first (seed, arm) -- forward, loss, backward,
optimizer step, on the configured device, dtype and batch -- with deterministic algorithms on
(``warn_only=True``, so the step runs through), and lists every op that has no deterministic
implementation, the module that called it, and the known way out. Exit status: 0 clean, 1 when any
such op was found, 2 on bad input.

How an op is caught and placed:
- Every aten op of the step, the backward ones included, passes through a TorchDispatchMode
  (autograd hands the mode to its backward thread). Each op runs first with deterministic
  algorithms strict, so an op without a deterministic kernel raises right there, with the op in
  hand; the audit records it and runs the op again with the check off, so the step goes on.
  (Warnings would not do: torch holds back the warnings raised during backward until backward()
  returns, when nobody knows which module was running.) An op refuses before it writes anything,
  so running it again is safe.
- Which module is running comes from hooks: forward pre/post hooks in the forward; in the backward,
  gradient hooks on each module's outputs (its backward starts) and inputs (its backward is done),
  the method of torch.utils.module_tracker, which, unlike full backward hooks, does not wrap the
  module's outputs (those break modules that modify their inputs in place, e.g. ReLU(inplace=True)).
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from dataclasses import dataclass

import harness  # noqa: F401 - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from harness.training.determinism import DeterminismError
from harness.tools.args import add_config_dir, parse_args
from harness.tools.golden.golden import BadInput, compose_config, select_run
from harness.integrations.command_spec import black_box_refusal, is_command
from harness.tools.diff.module_stack import ModuleStack

EXIT_CLEAN, EXIT_FOUND, EXIT_BAD_INPUT = 0, 1, 2
ALERT = "does not have a deterministic implementation"
UNKNOWN_WAY_OUT = (
    "no known way out: try determinism.mode=warn (runs it; the results are then not bit-exact), "
    "or replace the module with one built from deterministic ops"
)

# Known ops -> the way out. Matched against the name torch gives in its error (e.g.
# "adaptive_avg_pool2d_backward_cuda"), first match wins. From torch.use_deterministic_algorithms'
# documentation of the ops that raise, and from what the harness's own models do instead.
WAYS_OUT: list[tuple[str, str]] = [
    (r"^put_", "Tensor.put_ with accumulate=False writes repeated indices in an unspecified order: with unique "
               "indices write out.view(-1)[idx] = v (index_put_) or use scatter_, both deterministic; to sum "
               "repeated indices use out.view(-1).index_put_((idx,), v, accumulate=True)"),
    (r"adaptive_avg_pool[23]d_backward", "for global pooling use x.mean((2, 3), keepdim=True) (as "
               "harness.builtin.models.GlobalAvgPool does); when the output size divides the input size use "
               "nn.AvgPool2d(kernel_size=stride=input/output), whose backward is deterministic"),
    (r"adaptive_max_pool2d_backward", "for global pooling use x.amax((2, 3), keepdim=True); otherwise nn.MaxPool2d "
               "with a fixed kernel and stride"),
    (r"avg_pool3d_backward", "reshape to (N, C, D/k, k, H/k, k, W/k, k) and take the mean over the k axes, or use "
               "2-D pooling per slice"),
    (r"max_pool3d_with_indices_backward|fractional_max_pool", "use nn.MaxPool2d (deterministic backward) or a "
               "fixed-kernel pooling instead"),
    (r"max_unpool", "no deterministic kernel: upsample with F.interpolate(mode='nearest') or a ConvTranspose instead"),
    (r"upsample_(linear1d|bilinear2d|bicubic2d|trilinear3d)", "F.interpolate(mode='nearest') has a deterministic "
               "backward; or learn the upsampling with ConvTranspose2d / PixelShuffle"),
    (r"reflection_pad", "use F.pad(mode='replicate') or zero padding, whose backward is deterministic"),
    (r"nll_loss2d_forward", "compute per-pixel losses with reduction='none' and reduce with .mean() yourself"),
    (r"ctc_loss_backward", "compute the CTC loss on the CPU (deterministic there): F.ctc_loss(log_probs.cpu(), ...)"),
    (r"embedding_bag_backward.*max", "use EmbeddingBag(mode='sum' or 'mean'), or nn.Embedding followed by amax"),
    (r"histc", "torch.bucketize(x, edges) then torch.bincount without weights, or compute the histogram on the CPU"),
    (r"bincount", "zeros(n).index_put_((idx,), weights, accumulate=True) sums weights deterministically"),
    (r"index_add|scatter_add|index_copy", "index_put_((idx,), v, accumulate=True) has a deterministic kernel; "
               "newer torch versions also make index_add_/scatter_add_ deterministic on CUDA"),
    (r"kthvalue|median", "take the value from torch.sort (deterministic): x.sort(dim).values.select(dim, k - 1)"),
    (r"grid_sampler", "no deterministic CUDA backward exists: for a plain resize use F.interpolate(mode='nearest'); "
               "otherwise determinism.mode=warn"),
    (r"scatter_reduce", "for reduce='prod' sort by index and use torch.segment_reduce, or reduce='amax'/'amin'"),
]


def way_out(op: str) -> str:
    for pattern, advice in WAYS_OUT:
        if re.search(pattern, op):
            return advice
    return UNKNOWN_WAY_OUT


# -- where are we: phase and module -------------------------------------------------------------


@dataclass
class Finding:
    op: str  # the name in torch's error, e.g. put_
    aten: str  # the aten overload, e.g. aten.put_.default
    phase: str  # forward, loss, backward, optimizer step
    where: str  # module path (class), or the phase when no module was running
    calls: int = 1
    message: str = ""

    @property
    def advice(self) -> str:
        return way_out(self.op)


class Probe(TorchDispatchMode):
    """Runs every aten op strict first; records those without a deterministic kernel."""

    def __init__(self, modules: ModuleStack | None = None):
        super().__init__()
        self.modules = modules
        self.phase = "setup"
        self.findings: dict[tuple, Finding] = {}
        self.ops_seen = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops_seen += 1
        torch.use_deterministic_algorithms(True)  # strict, for this op alone
        try:
            return func(*args, **kwargs)
        except RuntimeError as e:
            if ALERT not in str(e):
                raise
            self.record(func, e)
        finally:
            torch.use_deterministic_algorithms(True, warn_only=True)
        # Recorded; now let it run (without the check, so it does not warn a second time).
        torch.use_deterministic_algorithms(False)
        try:
            return func(*args, **kwargs)
        finally:
            torch.use_deterministic_algorithms(True, warn_only=True)

    def record(self, func, error: BaseException) -> None:
        text = str(error).strip()
        where = (self.modules.where() if self.modules else None) or f"outside any module ({self.phase})"
        phase = self.modules.phase if self.modules and self.modules.stack else self.phase
        self.add(text, str(func), phase, where)

    def add(self, text: str, aten: str, phase: str, where: str) -> None:
        match = re.match(r"\s*(.+?) " + ALERT, text)
        op = match.group(1) if match else aten
        key = (op, aten, phase, where)
        if key in self.findings:
            self.findings[key].calls += 1
        else:
            self.findings[key] = Finding(op, aten, phase, where, 1, text.splitlines()[0])


# -- one training step --------------------------------------------------------------------------


def _value(x):
    return getattr(x, "value", x)


def audit_step(arm_cfg, seed: int) -> tuple[list[Finding], dict]:
    """One forward, loss, backward and optimizer step of the run train_run would start.

    Leaves torch's deterministic-algorithms switch as it found it (the audit runs in tests, too).
    """
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        return _audit_step(arm_cfg, seed)
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


def _audit_step(arm_cfg, seed: int) -> tuple[list[Finding], dict]:
    """Run the configured training function -- ours or a researcher's -- for one step under the probe."""
    from omegaconf import OmegaConf

    from harness.training.components import ComponentError
    from harness.training.steps import StopRun
    from harness.experiment.runner import train_one

    cfg = arm_cfg.copy()
    OmegaConf.update(cfg, "determinism.mode", "warn")  # the probe makes each op strict on its own
    OmegaConf.update(cfg, "determinism.cudnn_benchmark", False)
    probe = Probe()
    seen: dict = {}

    def attach(model: torch.nn.Module) -> None:
        # Called by run.watch, after the model is built: from here on the step's ops are placed.
        probe.modules = ModuleStack(model)
        probe.phase = "training step"
        def first_batch(module, args) -> None:  # a pre-hook that returned a value would replace the input
            seen.setdefault("batch", _shape(args))

        model.register_forward_pre_hook(first_batch)

    try:
        with warnings.catch_warnings(record=True) as caught, probe:
            warnings.simplefilter("always")
            train_one(cfg, seed, init_hook=attach, stop_after=1)
    except StopRun:
        pass
    except (DeterminismError, ComponentError, ValueError) as e:
        raise BadInput(str(e)) from None
    finally:
        if probe.modules is not None:
            probe.modules.remove()
    for w in caught:
        if ALERT in str(w.message):
            # Raised where the probe could not see it (above torch's op dispatch): named, not placed.
            probe.add(str(w.message), "-", "-", "not placed (raised outside torch's op dispatch)")
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    info = {
        "model": (arm_cfg.get("model") or {}).get("_target_", "the training function's model"),
        "train_fn": arm_cfg.train.fn,
        "device": str(_device(arm_cfg)),
        "torch": torch.__version__,
        "ops_seen": probe.ops_seen,
        "batch": seen.get("batch", []),
        "precision": _value(arm_cfg.precision),
    }
    return list(probe.findings.values()), info


def _shape(args) -> list:
    first = next((a for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)), None)
    return list(first.shape) if first is not None else []


def _device(arm_cfg):
    from harness.training.determinism import resolve_device

    return resolve_device(_value(arm_cfg.device))


def _preflight(arm_cfg, arm: str) -> None:
    from harness.config.preflight import PreflightError, preflight

    try:
        preflight(arm_cfg, {arm: arm_cfg})
    except PreflightError as e:
        raise BadInput(str(e)) from None


def format_findings(findings: list[Finding], info: dict, seed: int, arm: str) -> str:
    head = (
        f"harness.audit: one training step of {info['train_fn']} with {info['model']}, "
        f"seed {seed}, arm {arm}, batch {'x'.join(map(str, info['batch']))} {info['precision']} on {info['device']}, "
        f"torch {info['torch']}, with torch.use_deterministic_algorithms(True, warn_only=True); "
        f"{info['ops_seen']} aten ops checked."
    )
    if not findings:
        return head + "\n\nclean: every op has a deterministic implementation; determinism.mode=strict will run this model here."
    n = len(findings)
    lines = [head, "", f"{n} op{'s' if n > 1 else ''} without a deterministic implementation:", ""]
    for i, f in enumerate(findings, 1):
        calls = f"{f.calls} call{'s' if f.calls > 1 else ''}"
        lines += [
            f"  {i}. {f.op}  [{f.phase}, {f.aten}, {calls}]",
            f"     called from: {f.where}",
            f"     way out:     {f.advice}",
        ]
    lines += [
        "",
        "determinism.mode=strict stops at the first of these; determinism.mode=warn runs them, and the "
        "results are then not bit-exact (check with python -m harness.noise_audit how much that matters).",
    ]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.audit",
        description="List the ops of one training step that have no deterministic implementation, and where "
                    "they are called (exit 0 clean, 1 found, 2 bad input).",
    )
    p.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides, as for python -m harness")
    add_config_dir(p)
    return p


def main(argv=None) -> int:
    args = parse_args(parser(), argv)  # --config-dir anywhere (diff.parse_args)
    try:
        arm_cfg, seed, arm = select_run(compose_config(args.overrides, args.config_dir), args.overrides)
        if is_command(arm_cfg):
            raise BadInput(black_box_refusal("harness.audit", "needs every op of a training step"))
        _preflight(arm_cfg, arm)
        findings, info = audit_step(arm_cfg, seed)
    except BadInput as e:
        print(f"harness.audit: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(format_findings(findings, info, seed, arm))
    return EXIT_FOUND if findings else EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
