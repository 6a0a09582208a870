"""The built-in augmentation: the same draws from the augment stream as before, sent to the device in
one copy instead of three (counted on the meta device, which dispatches every copy as a GPU would)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from harness.builtin.data import augment


def _three_copies(x, generator):
    """The implementation before: dy, dx and flip each copied to the device on its own."""
    b, _, h, w = x.shape
    pad = max(1, h // 8)
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(x.device)
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(x.device)
    flip = (torch.rand(b, generator=generator) < 0.5).to(x.device)
    padded = F.pad(x, (pad, pad, pad, pad))
    rows = dy[:, None] + torch.arange(h, device=x.device)[None, :]
    cols = dx[:, None] + torch.arange(w, device=x.device)[None, :]
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    batch = torch.arange(b, device=x.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


class _Copies(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.to_meta = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten._to_copy.default:
            src, dst = args[0], out
        elif func is torch.ops.aten.copy_.default:
            dst, src = args[0], args[1]
        else:
            return out
        if src.device.type == "cpu" and dst.device.type == "meta":  # a host-to-device copy
            self.to_meta += 1
        return out


def test_the_same_augmented_batches_as_before():
    x = torch.randn(16, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    new = augment(x, torch.Generator().manual_seed(7))
    old = _three_copies(x, torch.Generator().manual_seed(7))
    assert torch.equal(new, old)


def test_the_draws_reach_the_device_in_one_copy():
    x = torch.empty(16, 3, 16, 16, device="meta")
    with _Copies() as copies:
        augment(x, torch.Generator().manual_seed(7))
    assert copies.to_meta == 1


class _Asked(Exception):
    pass


def test_the_builtin_loop_reads_pinned_batches_on_cuda_only():
    from harness.builtin import loop
    from harness.experiment.arms import arm_configs
    from harness.training.run import Run

    from .conftest import FAST, compose_cfg

    cfg = arm_configs(compose_cfg(FAST))["A"]
    asked = {}

    class Probe(Run):  # stops the loop where it asks for its batches
        def loader(self, dataset, batch_size, **kwargs):
            asked[self.device.type] = kwargs.get("pin_memory", False)
            raise _Asked

    for device in ("cuda", "cpu"):  # no GPU needed: the loop asks before anything touches the device
        try:
            loop.train(cfg, Probe(0, device))
        except _Asked:
            pass
    assert asked == {"cuda": True, "cpu": False}
