"""Batches for a training function: the seeded shuffled order, tensors read a batch at a time, the
loader that fingerprints each batch as it is consumed, and data nodes built once per process."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler


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
    """Iterates a DataLoader; hashes each batch's indices when the batch is consumed (not prefetched)."""

    def __init__(self, loader: DataLoader, sampler: ShuffledBatches, order):
        self.loader, self.sampler, self.order = loader, sampler, order

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            # DataLoader keeps the sampler's order, so the oldest drawn batch is this one
            self.order.update(self.sampler.drawn.popleft().numpy().tobytes())
            yield batch


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
