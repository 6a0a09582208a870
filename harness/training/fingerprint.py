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
_WEIGHTS: dict[torch.device, torch.Tensor] = {}


def _weights(n: int, device: torch.device) -> torch.Tensor:
    """Fixed odd int64 weights for positions 0..n-1 (cached per device, grown as needed)."""
    w = _WEIGHTS.get(device)
    if w is None or w.numel() < n:
        g = torch.Generator().manual_seed(0x5EED)
        size = max(n, 1024)
        w = (torch.randint(-(2**62), 2**62, (size,), generator=g, dtype=torch.int64) * 2 + 1).to(device)
        _WEIGHTS[device] = w
    return w[:n]


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


def flatten_parameters(params: list[torch.Tensor]) -> torch.Tensor | None:
    """Move parameters of one dtype and device into one contiguous buffer (each becomes a view).

    The values, shapes and strides stay the same, so the numerics do not change; the step digest
    then reads one buffer instead of gathering every tensor (a few kernels a step, not dozens).
    Returns the buffer, or None when the parameters do not share a dtype and device.
    """
    if not params or len({(p.dtype, p.device) for p in params}) != 1 or not all(p.is_contiguous() for p in params):
        return None
    flat = torch.empty(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            flat[offset : offset + n].copy_(p.reshape(-1))
            p.data = flat[offset : offset + n].view_as(p)
            offset += n
    return flat


class StepRecorder:
    """Collects the loss bits and parameter digest of every step in device buffers.

    Nothing is copied to the host until ``finish``: a step costs a few small kernels and no sync.
    """

    def __init__(self, params: list[torch.Tensor], max_steps: int, device: torch.device):
        self.params = params
        # One contiguous buffer when possible (the harness flattens its model's parameters).
        self.flat = _shared_buffer(params)
        if self.flat is not None:
            view = _INT_VIEW[self.flat.element_size()] if self.flat.dtype.is_floating_point else self.flat.dtype
            self.flat_bits = self.flat.view(view)
            self.flat_weights = _weights(self.flat.numel(), self.flat.device)
        width = self._digest().numel()
        max_steps = max(1, int(max_steps))
        self.losses = torch.empty(max_steps, dtype=torch.float32, device=device)
        self.digests = torch.empty(max_steps, width, dtype=torch.int64, device=device)
        self.steps = 0

    def _digest(self) -> torch.Tensor:
        if self.flat is None:
            return tensors_digest(self.params)
        # int32 bits times int64 weights promotes to int64: the same digest as tensors_digest
        return (self.flat_bits * self.flat_weights).sum().reshape(1)

    @torch.no_grad()
    def record(self, loss: torch.Tensor) -> None:
        if self.steps == len(self.losses):  # a loop that did not say how many steps: grow, amortised
            self.losses = torch.cat([self.losses, torch.empty_like(self.losses)])
            self.digests = torch.cat([self.digests, torch.empty_like(self.digests)])
        self.losses[self.steps] = loss.detach()
        self.digests[self.steps] = self._digest()
        self.steps += 1

    def finish(self) -> dict:
        """Host-side lists: loss bits (8 hex digits) and parameter digest (16 hex) per step."""
        losses = self.losses[: self.steps].cpu()
        digests = self.digests[: self.steps].cpu().numpy()
        loss_hex = [format(v & 0xFFFFFFFF, "08x") for v in losses.view(torch.int32).tolist()]
        param_hex = [hexdigest(row) for row in digests]
        return {"loss": loss_hex, "params": param_hex, "loss_values": losses.tolist()}


def _shared_buffer(params: list[torch.Tensor]) -> torch.Tensor | None:
    """The buffer the parameters are consecutive views of (see flatten_parameters), else None."""
    if not params:
        return None
    base = params[0]
    storage = base.untyped_storage().data_ptr()
    offset = base.storage_offset()
    for p in params:
        if p.untyped_storage().data_ptr() != storage or p.storage_offset() != offset or not p.is_contiguous() \
                or p.dtype != base.dtype:
            return None
        offset += p.numel()
    total = offset - base.storage_offset()
    return base.detach().as_strided((total,), (1,), base.storage_offset())
