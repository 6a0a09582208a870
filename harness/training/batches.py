"""Batches for a training function: the seeded shuffled order, tensors read a batch at a time, the
loader that fingerprints each batch as it is consumed, ordered batches fingerprinted by content,
the data_order digest (which counts what it covered), and data nodes built once per process."""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Mapping  # not typing's alias: its isinstance takes ~4x as long, once a batch
from typing import Any, Optional

import torch
from torch.utils.data import DataLoader, Sampler

from harness.training import host_digest
from harness.training.fingerprint import tensors_digest


class ShuffledBatches(Sampler):
    """Each epoch, one permutation from the generator, handed out as index tensors of a batch.

    The same permutation torch's RandomSampler draws, without a Python loop per example. Every
    batch handed out is also put on ``drawn`` so the Run can fingerprint it when it is consumed.
    """

    def __init__(self, n: int, batch_size: int, generator: torch.Generator, drop_last: bool = False):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        self.n, self.batch_size, self.generator, self.drop_last = n, batch_size, generator, drop_last
        self.drawn: deque = deque()

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def __iter__(self):
        # A generator, so the permutation is drawn at the first batch (after the DataLoader has
        # drawn its workers' base seed from the same generator), as RandomSampler does.
        self.drawn.clear()
        for batch in torch.randperm(self.n, generator=self.generator).split(self.batch_size):
            if self.drop_last and len(batch) < self.batch_size:
                return
            self.drawn.append(batch)
            yield batch


class TensorBatches(torch.utils.data.Dataset):
    """Tensors in memory, indexed by a whole batch of indices at once (no per-example collate)."""

    def __init__(self, *tensors: torch.Tensor):
        if not tensors or any(len(t) != len(tensors[0]) for t in tensors):
            raise ValueError("TensorBatches needs tensors of the same length.")
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, idx):
        idx = torch.as_tensor(idx, dtype=torch.int64)
        return tuple(t[idx] for t in self.tensors)


class _FingerprintedLoader:
    """Iterates a DataLoader; hashes each batch's indices when the batch is consumed (not prefetched).

    ``direct``: the DataLoader would only index a TensorBatches in this process (no workers, no
    pinning, no collate of one's own), so its batches are read here, without the DataLoader's
    per-batch machinery (tens of µs a step, more than a small model's recording). The bits are the
    DataLoader's: each epoch draws the base seed it draws from the data_order stream, then the
    permutation, and hands out the list its default_convert makes of the tuple.
    """

    def __init__(self, loader: DataLoader, sampler: ShuffledBatches, order, direct: bool = False):
        self.loader, self.sampler, self.order, self.direct = loader, sampler, order, direct

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        if self.direct:
            yield from self._direct()
            return
        for batch in self.loader:
            # DataLoader keeps the sampler's order, so the oldest drawn batch is this one
            self.order.update(self.sampler.drawn.popleft().numpy())  # its bytes, hashed in place
            yield batch

    def _direct(self):
        # the DataLoader's iterator draws its workers' base seed before the first batch: so do we
        torch.empty((), dtype=torch.int64).random_(generator=self.loader.generator)
        dataset, drawn, order = self.loader.dataset, self.sampler.drawn, self.order
        for idx in self.sampler:
            drawn.popleft()
            order.update(idx.numpy())
            yield list(dataset[idx])


class OrderDigest:
    """data_order: blake2b over what was consumed, and how many batches that was (0: proves nothing).

    A batch holding tensors on a GPU is not copied to the host each step (a copy there waits for
    the device: a sync per step): its tensors are digested on their device (fingerprint's
    position-weighted sum) and the digests are folded in, in order, every ``FLUSH`` batches and at
    the end, one copy each time."""

    FLUSH = 256  # batches whose device digests wait for one copy to the host

    def __init__(self):
        self._h = hashlib.blake2b(digest_size=8)
        self.batches = 0
        self._pending: list[tuple[Any, torch.Tensor]] = []  # (the batch's host-side hash, its device digests)

    def update(self, data) -> None:
        """``data``: bytes, or a contiguous array whose bytes are hashed in place (no copy)."""
        if self._pending:
            self._fold()  # the batches before this one come first
        self._h.update(data)
        self.batches += 1

    def update_content(self, batch) -> None:
        """One batch, by content (see content_digest); a batch with device tensors without a sync."""
        h = hashlib.blake2b(digest_size=16)
        on_device: list[torch.Tensor] = []
        _hash_content(batch, h, on_device)
        if not on_device:
            self.update(h.digest())
            return
        digests = torch.cat(on_device) if len({d.device for d in on_device}) == 1 else \
            torch.cat([d.cpu() for d in on_device])  # tensors on several devices: rare, copied now
        self._pending.append((h, digests))
        self.batches += 1
        if len(self._pending) >= self.FLUSH:
            self._fold()

    def _fold(self) -> None:
        """The waiting batches into the digest, in order: one host copy per device."""
        pending, self._pending = self._pending, []
        host = {}  # device -> its batches' digests on the host, in order
        for device in {d.device for _, d in pending}:
            group = [d for _, d in pending if d.device == device]
            host[device] = iter(torch.cat(group).cpu().split([len(d) for d in group]))
        for h, d in pending:
            h.update(next(host[d.device]).numpy().tobytes())  # after the batch's own bytes and shapes
            self._h.update(h.digest())

    def hexdigest(self) -> str:
        if self._pending:
            self._fold()
        return self._h.hexdigest()


class OrderedBatches:
    """run.ordered: the wrapped batches in their order, each one's content hashed when consumed."""

    def __init__(self, batches, order: OrderDigest):
        self.batches, self.order = batches, order

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            self.order.update_content(batch)
            yield batch


def content_digest(batch) -> bytes:
    """A batch's content (tensors, arrays, numbers, strings nested in tuples, lists, dicts) hashed."""
    h = hashlib.blake2b(digest_size=16)
    _hash_content(batch, h)
    return h.digest()


class _HashingDeque(deque):
    """For run.sampler: fingerprint each batch as it is drawn."""

    def __init__(self, order):
        super().__init__()
        self._order = order

    def append(self, batch) -> None:
        self._order.update(batch.numpy())


def _read_on_host(t: torch.Tensor) -> bool:
    """Whether a tensor's bytes are hashed on the host (CPU tensors) or digested on its device."""
    return t.is_cpu


def _hash_bytes(h, data) -> None:
    """A tensor's or array's bytes into the batch's hash: their XXH3-128 (digest version 2, ~40 GB/s),
    else the bytes themselves (version 1: blake2b reads them at ~1.3 GB/s)."""
    h.update(host_digest.bytes_digest(data) if host_digest.available() else data)


_HEADERS: dict = {}  # (kind, dtype, shape) -> the bytes that say them: a step's batches repeat a few


def _header(kind: str, dtype: torch.dtype, shape) -> bytes:
    """b"T" or b"D", the dtype and the shape of a tensor, as hashed before its content (built once
    per distinct triple: formatting them costs more than looking them up, ~5 µs a tensor in a step)."""
    key = (kind, dtype, shape)
    header = _HEADERS.get(key)
    if header is None:
        if len(_HEADERS) >= 4096:  # shapes that keep changing (variable-length batches): bounded
            _HEADERS.clear()
        header = _HEADERS[key] = f"{kind}{dtype}{tuple(shape)}".encode()
    return header


def _hash_content(x, h, on_device: Optional[list] = None) -> None:
    """Feed a batch's content (with dtypes and shapes, so a reshaped batch differs) to ``h``.
    ``on_device``: a list that takes the on-device digest of each tensor not on the CPU (their
    bytes are then not copied here); None: every tensor's bytes are hashed (copied to the host)."""
    if isinstance(x, torch.Tensor):
        t = x.detach() if x.requires_grad else x  # a batch seldom needs it; each call is a dispatch (~3 µs)
        if on_device is not None and not _read_on_host(t):
            h.update(_header("D", t.dtype, x.shape))  # its digest is appended when folded
            on_device.append(tensors_digest([t]))
            return
        if not t.is_cpu:  # the check costs ~0.1 µs, the no-op call it skips ~1 µs (a step has a few)
            t = t.to("cpu")
        h.update(_header("T", t.dtype, x.shape))
        _hash_bytes(h, host_digest.host_buffer(t))  # the bytes in place (tobytes would copy the batch)
    elif hasattr(x, "__array_interface__") or type(x).__module__ == "numpy":
        import numpy as np

        a = np.ascontiguousarray(x)
        h.update(f"A{a.dtype}{a.shape}".encode())
        if a.dtype == object:  # Python objects (strings, say): their bytes here are addresses, so their values
            for item in a.reshape(-1):
                _hash_content(item, h, on_device)
        elif a.dtype.hasobject:
            raise TypeError(f"run.ordered got a numpy array of dtype {a.dtype}, with Python objects inside its "
                            "records: its content cannot be fingerprinted. Pass its fields as separate arrays.")
        else:
            _hash_bytes(h, a.reshape(-1).view(np.uint8))  # in place, as above
    elif isinstance(x, Mapping):
        h.update(b"{")
        for key in sorted(x, key=str):
            h.update(repr(key).encode())
            _hash_content(x[key], h, on_device)
        h.update(b"}")
    elif isinstance(x, (list, tuple)):
        h.update(f"({len(x)}".encode())
        for item in x:
            _hash_content(item, h, on_device)
    elif isinstance(x, (bool, int, float, str, bytes)) or x is None:
        h.update(repr(x).encode())
    else:
        raise TypeError(f"run.ordered got a batch holding a {type(x).__name__}: its content cannot be "
                            "fingerprinted. Batches must be tensors, numpy arrays, numbers or strings, nested in "
                            "tuples, lists or dicts.")


_DATASETS: dict[str, Any] = {}


def cached_dataset(node, **call_site):
    """Instantiate a data node once per process, keyed by its resolved config (see Run.dataset)."""
    from omegaconf import OmegaConf

    from harness.training.components import instantiate

    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    key = json.dumps([plain, sorted(call_site.items())], sort_keys=True, default=str)
    if key not in _DATASETS:
        _DATASETS[key] = instantiate(node, **call_site)
    return _DATASETS[key]
