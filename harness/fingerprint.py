"""Bit-exact, cheap digests of tensors, computed on the tensors' own device.

A float tensor's bits are reinterpreted as integers and summed in int64, each weighted by a fixed
pseudo-random odd int64 per position (so swapped values change the digest too).
Integer addition wraps modulo 2**64 and is associative, so the digest does not depend on the order
in which a parallel reduction adds; any changed bit changes it (with overwhelming probability).
Per-step digests stay on the device in a buffer and are copied to the host once, at the end.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

import torch

_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
_WEIGHTS: dict[tuple[torch.device, int], torch.Tensor] = {}


def _weights(n: int, device: torch.device) -> torch.Tensor:
    """Fixed odd int64 weights for positions 0..n-1 (cached per device, grown as needed)."""
    key = (device, 0)
    w = _WEIGHTS.get(key)
    if w is None or w.numel() < n:
        g = torch.Generator().manual_seed(0x5EED)
        size = max(n, 1024)
        w = (torch.randint(-(2**62), 2**62, (size,), generator=g, dtype=torch.int64) * 2 + 1).to(device)
        _WEIGHTS[key] = w
    return w[:n]


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bits as a flat int64 tensor (no arithmetic on the values)."""
    t = t.detach().reshape(-1)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        t = t.view(_INT_VIEW[t.element_size()])
    return t.to(torch.int64)


def tensors_digest(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """Position-weighted int64 sum of the bits of all tensors, one per element size. On device.

    Tensors of one element size are concatenated first, so a model costs a handful of kernels
    whatever its number of parameters. A weight is odd, hence invertible modulo 2**64: any single
    changed value always changes the digest; several can cancel only by a 2**-64 accident.
    """
    groups: dict[int, list[torch.Tensor]] = {}
    for t in tensors:
        t = t.detach().reshape(-1)
        if t.dtype.is_floating_point or t.dtype.is_complex:
            t = t.view(_INT_VIEW[t.element_size()])
        groups.setdefault(t.element_size(), []).append(t.to(torch.int64) if t.element_size() != 8 else t)
    sums = []
    for size in sorted(groups):
        b = torch.cat(groups[size]) if len(groups[size]) > 1 else groups[size][0]
        sums.append((b * _weights(b.numel(), b.device)).sum())
    return torch.stack(sums)


def tensor_digest(t: torch.Tensor) -> torch.Tensor:
    return tensors_digest([t])


def state_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Parameters and floating buffers (BatchNorm statistics) in a fixed order."""
    return [t for _, t in sorted(model.state_dict(keep_vars=True).items())]


def hexdigest(*arrays) -> str:
    """Hash host-side data (int64 digests, index arrays, bytes) to 16 hex characters."""
    h = hashlib.blake2b(digest_size=8)
    for a in arrays:
        if isinstance(a, torch.Tensor):
            a = a.detach().cpu().contiguous().numpy()
        h.update(a.tobytes() if hasattr(a, "tobytes") else bytes(a))
    return h.hexdigest()


def model_fingerprint(model: torch.nn.Module) -> str:
    return hexdigest(tensors_digest(state_tensors(model)))


def loss_bits_hex(value: torch.Tensor) -> str:
    """A float32 loss as its 8 raw hex digits: exact, and readable next to the value."""
    return format(int(value.float().view(torch.int32).item()) & 0xFFFFFFFF, "08x")


class StepRecorder:
    """Collects the loss bits and parameter digest of every step in device buffers.

    Nothing is copied to the host until ``finish``: a step costs a few small kernels and no sync.
    """

    def __init__(self, params: list[torch.Tensor], max_steps: int, device: torch.device):
        self.params = params
        width = tensors_digest(params).numel()
        self.losses = torch.empty(max_steps, dtype=torch.float32, device=device)
        self.digests = torch.empty(max_steps, width, dtype=torch.int64, device=device)
        self.steps = 0

    @torch.no_grad()
    def record(self, loss: torch.Tensor) -> None:
        self.losses[self.steps] = loss.detach().float()
        self.digests[self.steps] = tensors_digest(self.params)
        self.steps += 1

    def finish(self) -> dict:
        """Host-side lists: loss bits (8 hex digits) and parameter digest (16 hex) per step."""
        losses = self.losses[: self.steps].cpu()
        digests = self.digests[: self.steps].cpu().numpy()
        loss_hex = [format(v & 0xFFFFFFFF, "08x") for v in losses.view(torch.int32).tolist()]
        param_hex = [hexdigest(row) for row in digests]
        return {"loss": loss_hex, "params": param_hex, "loss_values": losses.tolist()}
