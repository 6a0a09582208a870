"""Bit-exact, cheap digests of tensors, computed on the tensors' own device.

A float tensor's bits are reinterpreted as integers and summed in int64, each weighted by a fixed
pseudo-random odd int64 per position (so swapped values change the digest too).
Integer addition wraps modulo 2**64 and is associative, so the digest does not depend on the order
in which a parallel reduction adds; any changed bit changes it (with overwhelming probability).
Per-step digests stay on the device in a buffer and are copied to the host once, at the end. It is
the digest of tensors on a GPU and of the init and final fingerprints everywhere. Per-step
digests of parameters in host memory are XXH3 of their bytes (host_digest.py, digest version 2);
without xxhash (version 1) the packed parameters' digest on the CPU is this sum taken by numpy's
einsum on the bits in place (one serial pass, no thread wake-ups), the values CUDA's kernel gives.

Memory: the digest works through ``CHUNK`` elements at a time, so it needs a temporary int64 per
element of a chunk, never per parameter of the model (at 1B parameters that was +16 GB). Position
i weighs ``table[i % CHUNK] + 2 * STRIDE * (i // CHUNK)``: the fixed table for every position a
model below CHUNK elements has (its digest is the one earlier versions gave), an odd weight for all.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Optional

import numpy as np
import torch

from harness.training import host_digest

_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
_WEIGHTS: dict[torch.device, torch.Tensor] = {}
CHUNK = 1 << 22  # elements a digest kernel reads at once: a 32 MiB int64 temporary at most
_STRIDE = 0x1F3D5B79  # odd: blocks of CHUNK positions get distinct weights
SERIAL_MAX = 1 << 20  # packed elements up to which the CPU digest runs on one thread (see _digest)
ALIGN_BYTES = 256  # packed parameters start at multiples of this, as allocations do (see flatten_parameters)


def _weights(n: int, device: torch.device) -> torch.Tensor:
    """The fixed odd int64 weights of positions 0..n-1, n <= CHUNK (cached per device, grown as needed)."""
    w = _WEIGHTS.get(device)
    if w is None or w.numel() < n:
        g = torch.Generator().manual_seed(0x5EED)
        size = min(max(n, 1024), CHUNK)  # randint draws serially on the CPU: a longer table keeps the prefix
        w = (torch.randint(-(2**62), 2**62, (size,), generator=g, dtype=torch.int64) * 2 + 1).to(device)
        _WEIGHTS[device] = w
    return w[:n]


def _wrap(x: int) -> int:
    """x modulo 2**64 as a signed int64 (the wrapping int64 arithmetic the digest is in)."""
    return (x + 2**63) % 2**64 - 2**63


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The flat integer view of a tensor's values (a copy only when it is not contiguous)."""
    t = t.detach().reshape(-1)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        t = t.view(_INT_VIEW[t.element_size()])
    return t


def _segment(bits: torch.Tensor, start: int, acc: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """acc + sum of bits[k] * weight(start + k), one chunk of positions at a time."""
    pos, n = 0, bits.numel()
    while pos < n:
        at = start + pos
        offset, block = at % CHUNK, at // CHUNK
        m = min(n - pos, CHUNK - offset)
        part = bits[pos : pos + m]
        s = (part * _weights(offset + m, part.device)[offset:]).sum()  # promotes to int64, one chunk
        if block:  # the weight's block term, summed once: sum(b * (w + c)) = sum(b * w) + c * sum(b)
            s = s + part.sum(dtype=torch.int64) * _wrap(2 * _STRIDE * block)
        acc = s if acc is None else acc + s
        pos += m
    return acc


def tensors_digest(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """Position-weighted int64 sum of the bits of all tensors, one per element size. On device.

    The tensors of one element size are taken as one sequence (positions run on from one tensor to
    the next); a weight is odd, hence invertible modulo 2**64: any single changed value always
    changes the digest; several can cancel only by a 2**-64 accident.
    """
    sums: dict[int, Optional[torch.Tensor]] = {}
    ends: dict[int, int] = {}
    devices: dict[int, torch.device] = {}
    for t in tensors:
        b = _bits(t)
        size = b.element_size()
        sums[size] = _segment(b, ends.get(size, 0), sums.get(size))
        ends[size] = ends.get(size, 0) + b.numel()
        devices.setdefault(size, b.device)
    return torch.stack([sums[s] if sums[s] is not None else torch.zeros((), dtype=torch.int64, device=devices[s])
                        for s in sorted(sums)])


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


def _aligned(offset: int, element_size: int) -> int:
    step = max(1, ALIGN_BYTES // element_size)
    return -(-offset // step) * step


def flatten_parameters(params: list[torch.Tensor]) -> torch.Tensor | None:
    """Move parameters of one dtype and device into one buffer (each becomes a view of it).

    The values, shapes and strides stay the same, and each parameter starts ALIGN_BYTES-aligned as
    its own allocation did (zeros in between), so cuBLAS/cuDNN pick the same kernels as unpacked;
    the step digest then reads one buffer instead of gathering every tensor. Returns the buffer, or
    None when the parameters do not share a dtype and device or one is not contiguous.
    """
    if not params or len({(p.dtype, p.device) for p in params}) != 1 or not all(p.is_contiguous() for p in params):
        return None
    size = params[0].element_size()
    starts, end = [], 0
    for p in params:
        starts.append(_aligned(end, size))
        end = starts[-1] + p.numel()
    step = _aligned(1, size)
    flat = torch.zeros(end + step, dtype=params[0].dtype, device=params[0].device)
    shift = (-flat.data_ptr() % ALIGN_BYTES) // size  # the CPU allocator aligns to 64 bytes only
    flat = flat[shift : shift + end]
    with torch.no_grad():
        for p, start in zip(params, starts):
            view = flat[start : start + p.numel()]
            view.copy_(p.reshape(-1))
            p.data = view.view_as(p)
    return flat


class StepRecorder:
    """Collects the loss bits and parameter digest of every step in device buffers (on the CPU, with
    digest version 2, the parameters' XXH3 read in place through numpy views kept between steps).

    Nothing is copied to the host until ``finish``: a step costs a few small kernels and no sync.
    A parameter that left the storage it was watched in (``model.to(dtype or device)``, ``.half()``,
    channels_last) is followed: from that step on the digest reads the parameters themselves.
    """

    def __init__(self, params: list[torch.Tensor], max_steps: int, device: torch.device):
        self.params = params
        self.flat: Optional[torch.Tensor] = None
        self._pointers = [p.data_ptr() for p in params]  # where each parameter lived when watched
        self._host_buffers(torch.device(device))
        packed = None if self._host else _packed(params)  # one buffer when possible (the harness packs its model's parameters)
        if packed is not None and packed[0].numel() <= CHUNK:  # larger: read in chunks, no per-position table
            self.flat, starts = packed
            view = _INT_VIEW[self.flat.element_size()] if self.flat.dtype.is_floating_point else self.flat.dtype
            self.flat_bits = self.flat.view(view)
            # the weight of each packed position (0 in the padding): one kernel a step, the same digest
            self.flat_weights = torch.zeros(self.flat.numel(), dtype=torch.int64, device=self.flat.device)
            logical = 0
            for p, start in zip(params, starts):
                self.flat_weights[start : start + p.numel()] = _weights(logical + p.numel(), self.flat.device)[logical:]
                logical += p.numel()
            self._serial = self.flat.device.type == "cpu" and self.flat.numel() <= SERIAL_MAX
            if self._serial:  # numpy views of the same memory: einsum reads the bits where they live
                self._np_bits, self._np_weights = self.flat_bits.numpy(), self.flat_weights.numpy()
        width = self._digest().numel()
        max_steps = max(1, int(max_steps))
        self.losses = torch.empty(max_steps, dtype=torch.float32, device=device)
        self.digests = torch.empty(max_steps, width, dtype=torch.int64, device=device)
        self._done: list[torch.Tensor] = []  # rows of an earlier width (before a conversion changed it)
        self._base = 0  # the steps whose rows are in _done
        self.steps = 0
        self.followed_at: Optional[int] = None  # the first step recorded after the parameters moved
        self._views()

    def _views(self) -> None:
        """Numpy views of the step buffers when they are on the CPU: a step's two values are written
        through them (a numpy item write costs ~0.2 µs; torch's indexing ~3-5 µs a write)."""
        self._capacity = len(self.losses)
        cpu = self.losses.device.type == "cpu"
        self._np_losses = self.losses.numpy() if cpu else None  # also what check_finite reads
        if cpu and self._host:  # XXH3's unsigned 64 bits, stored as the int64 row's bits
            self._np_digests = self.digests.numpy().view(np.uint64)
        else:
            self._np_digests = self.digests.numpy() if cpu and self.flat is not None and self._serial else None

    @property
    def host_losses(self) -> Optional[np.ndarray]:
        """The loss buffer as numpy's view of it when it is in host memory, else None."""
        return self._np_losses

    def _host_buffers(self, device: torch.device) -> None:
        """Digest version 2 when the parameters and the step buffers are in host memory (XXH3 of the
        parameters, host_digest): numpy views of their memory, kept between steps. A parameter that
        is not contiguous (channels_last) is read through a fresh copy in logical order at every
        step: a copy kept would not see the updates."""
        self._host = host_digest.available() and device.type == "cpu" and all(p.is_cpu for p in self.params)
        self._buffers = [host_digest.host_buffer(p) for p in self.params] if self._host else None
        self._fresh = [i for i, p in enumerate(self.params) if not p.is_contiguous()] if self._host else []

    def _host_digest(self) -> int:
        buffers = self._buffers
        if self._fresh:
            buffers = list(buffers)
            for i in self._fresh:
                buffers[i] = host_digest.host_buffer(self.params[i])
        return host_digest.buffers_digest(buffers)

    def _digest(self, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The parameters' digest now (width: one per element size); with ``out`` (a row of
        ``digests``) it is written there, in place: no temporary, no indexing machinery."""
        if self._host:  # record writes it through numpy; this is the row's width and the tests' value
            d = torch.tensor([int(np.uint64(self._host_digest()).view(np.int64))], dtype=torch.int64)
            return d if out is None else out.copy_(d)
        if self.flat is not None and self._serial:
            value = self._serial_digest()
            if out is None:
                return torch.tensor([value], dtype=torch.int64)
            out[0] = int(value)
            return out
        if self.flat is None:
            d = tensors_digest(self.params)
        else:  # int32 bits times int64 weights promotes to int64: tensors_digest's sum (CUDA has no integer dot)
            d = (self.flat_bits * self.flat_weights).sum().reshape(1)
        return d if out is None else out.copy_(d)

    def _serial_digest(self):
        """A small packed model on the CPU: the same number as _digest's kernel below (integer sums
        wrap in any order), all on this thread. The mixed-dtype product there is a promoting kernel, a
        temporary and a parallel sum; each parallel kernel wakes the other threads and leaves half of
        its output in their caches, which costs more than the arithmetic at this size (2-4x with 2
        threads). einsum widens the bits a small buffer at a time and multiplies and adds in one
        unrolled pass: no int64 copy of the model (measured 2-3x cheaper than widening into a kept
        buffer and torch.dot, which had been 2x the promoting kernel)."""
        return np.einsum("i,i->", self._np_bits, self._np_weights)

    def _follow(self) -> None:
        """A watched parameter moved (record's pointer check, no device sync): read them where they live now."""
        self.flat = self.flat_bits = self.flat_weights = self._np_bits = self._np_weights = None
        if self.followed_at is None:
            self.followed_at = self.steps + 1
        self._pointers = [p.data_ptr() for p in self.params]
        self._host_buffers(self.digests.device)
        width = self._digest().numel()
        if width != self.digests.shape[1]:
            self._done.append(self.digests[: self.steps - self._base])
            self._base = self.steps
            self.digests = torch.empty(len(self.losses), width, dtype=torch.int64, device=self.digests.device)
        self._views()

    def replaced(self, model: torch.nn.Module) -> Optional[str]:
        """Why the model's parameters are no longer the watched ones (new Parameter objects), or None."""
        current = list(model.parameters())
        if len(current) == len(self.params) and all(a is b for a, b in zip(current, self.params)):
            return None
        return (f"after run.watch(model) the model's parameters were replaced by new Parameter objects "
                f"({len(current)} now, {len(self.params)} watched), so the per-step digests read tensors that no "
                f"longer train. This happens with load_state_dict(..., assign=True), with "
                f"torch.__future__.set_overwrite_module_params_on_conversion(True) before model.to(...), or when "
                f"a module is swapped. Call run.watch(model) after such a conversion (a plain model.to(dtype or "
                f"device) or .half() after run.watch is followed).")

    def record(self, loss: torch.Tensor) -> None:
        # No torch.no_grad() (a few µs a step): every tensor read here is already detached (the
        # loss, _bits, the packed buffer), so no autograd graph is built either way. Both values go
        # straight into their preallocated slots: no host sync.
        if (self.flat is not None or self._host) and list(map(torch.Tensor.data_ptr, self.params)) != self._pointers:
            self._follow()
        i = self.steps
        if i == self._capacity:  # a loop that did not say how many steps: grow, amortised
            self.losses = torch.cat([self.losses, torch.empty_like(self.losses)])
            self.digests = torch.cat([self.digests, torch.empty_like(self.digests)])
            self._views()
        if self._np_losses is not None and loss.is_cpu and loss.dtype is torch.float32 and not loss.dim():
            # the same 4 bytes, copied by numpy (detached only when needed: a dispatch, ~3 µs in a step)
            self._np_losses[i] = (loss.detach() if loss.requires_grad else loss).numpy()
        else:  # another device or dtype: torch's copy (a cast to float32, as before)
            self.losses[i] = loss.detach()  # measured: a little cheaper than select + copy_
        if self._host:  # parameters in host memory: XXH3, written through numpy (a uint64 view of the row)
            self._np_digests[i - self._base, 0] = self._host_digest()
        elif self._np_digests is not None:  # version 1, a small packed model on the CPU
            self._np_digests[i - self._base, 0] = self._serial_digest()
        else:
            self._digest(out=self.digests.select(0, i - self._base))
        self.steps = i + 1

    def finish(self) -> dict:
        """Host-side lists: loss bits (8 hex digits) and parameter digest (16 hex) per step."""
        losses = self.losses[: self.steps].cpu()
        rows = [r for d in self._done for r in d.cpu().numpy()]
        rows += list(self.digests[: self.steps - self._base].cpu().numpy())
        loss_hex = [format(v & 0xFFFFFFFF, "08x") for v in losses.view(torch.int32).tolist()]
        # hexdigest(row) for each row, without its per-argument type checks (a run has many steps)
        param_hex = [hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest() for row in rows]
        return {"loss": loss_hex, "params": param_hex, "loss_values": losses.tolist()}


def _packed(params: list[torch.Tensor]) -> tuple[torch.Tensor, list[int]] | None:
    """The buffer the parameters are ordered, non-overlapping views of (see flatten_parameters) and
    each one's start in it, else None."""
    if not params:
        return None
    base = params[0]
    storage = base.untyped_storage().data_ptr()
    starts, end = [], base.storage_offset()
    for p in params:
        if p.untyped_storage().data_ptr() != storage or p.storage_offset() < end or not p.is_contiguous() \
                or p.dtype != base.dtype:
            return None
        starts.append(p.storage_offset() - base.storage_offset())
        end = p.storage_offset() + p.numel()
    total = end - base.storage_offset()
    return base.detach().as_strided((total,), (1,), base.storage_offset()), starts
