"""Which module is running, in the forward and in the backward: the place an aten op is named by.

Used by harness.diff --ops (tools/diff/ops.py). The same class as harness.audit's ModuleStack, here in a
module of its own so that the op recorder does not import the audit (which imports diff and golden:
an import circle); audit.py can import it from here and drop its copy.

How: forward pre/post hooks in the forward; in the backward, gradient hooks on each module's
outputs (its backward starts) and inputs (its backward is done), the method of
torch.utils.module_tracker, which, unlike full backward hooks, does not wrap the module's outputs.
"""

from __future__ import annotations

from functools import partial

import torch
from torch.autograd.graph import register_multi_grad_hook
from torch.utils._pytree import tree_flatten


def _qualname(obj) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


class ModuleStack:
    """Which module of ``model`` is running, in its forward and in its backward (innermost last)."""

    def __init__(self, model: torch.nn.Module):
        self.stack: list[str] = []
        self.phase = "forward"
        self.classes: dict[str, str] = {}
        self._handles = []
        for name, module in model.named_modules():
            label = name or "model"
            self.classes[label] = _qualname(module)
            self._handles.append(module.register_forward_pre_hook(partial(self._forward_enter, label)))
            self._handles.append(module.register_forward_hook(partial(self._forward_exit, label)))

    def _forward_enter(self, label, module, args):
        self.phase = "forward"
        self.stack.append(label)
        # Its backward is over once the gradients of its inputs are computed.
        self._on_grads(args, partial(self._leave, label))

    def _forward_exit(self, label, module, args, output):
        self._leave(label)
        # Its backward starts once the gradients of its outputs are in.
        self._on_grads(output, partial(self._enter, label))

    def _on_grads(self, tree, fn) -> None:
        tensors = [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        if tensors and torch.is_grad_enabled():
            self._handles.append(register_multi_grad_hook(tensors, lambda grads: fn()))

    def _enter(self, label):
        self.phase = "backward"
        self.stack.append(label)

    def _leave(self, label):
        # The last entry with this name: robust if backward finishes modules out of nesting order.
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i] == label:
                del self.stack[i]
                return

    def where(self) -> str | None:
        if not self.stack:
            return None
        label = self.stack[-1]
        return f"{label} ({self.classes[label]})"

    def reset(self) -> None:
        self.stack.clear()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
