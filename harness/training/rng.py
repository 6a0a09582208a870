"""One seed -> independent random streams, one per purpose (common random numbers).

Each purpose gets its own seed, derived by hashing (seed, purpose), so what one consumer draws never
shifts another (a purpose's seed may be set apart from the run's, ``seeds.<purpose>``, to move that
stream alone): an arm whose loss draws extra random numbers still sees the same batches in the same
order and the same augmentations as the other arm.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping, Optional

import torch

PURPOSES = ("init", "data_order", "augment", "model")


def derive_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for (seed, purpose); stable across machines, Python and torch versions."""
    digest = hashlib.sha256(f"harness:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass
class Streams:
    """The generators of one run.

    init:       seeds the global RNG while the model is built (nn.Module inits draw from it)
    data_order: the DataLoader's shuffling (and its workers' base seed)
    augment:    per-batch augmentation, on the CPU so the stream is identical on every device
    model:      seeds the global RNG (CPU and CUDA) for everything during training that draws
                without an explicit generator: dropout, a loss term's noise, a user's module
    """

    seed: int
    data_order: torch.Generator
    augment: torch.Generator
    # purpose -> the seed it derives from, where set apart from ``seed`` (the config's seeds.*): one
    # stream moved while the others stay, which is how the noise floor's sources are measured
    apart: dict = field(default_factory=dict)

    @classmethod
    def from_seed(cls, seed: int, apart: Optional[Mapping] = None) -> "Streams":
        apart = {str(k): int(v) for k, v in (apart or {}).items() if v is not None}
        out = cls(seed=seed, data_order=torch.Generator(), augment=torch.Generator(), apart=apart)
        out.data_order.manual_seed(out.derive("data_order"))
        out.augment.manual_seed(out.derive("augment"))
        return out

    def derive(self, purpose: str) -> int:
        """The purpose's seed: from its own seed when set apart, else from the run's (today's bits)."""
        return derive_seed(self.apart.get(purpose, self.seed), purpose)

    def seed_init(self) -> None:
        torch.manual_seed(self.derive("init"))

    def seed_model(self) -> None:
        torch.manual_seed(self.derive("model"))


def seed_worker(worker_id: int) -> None:
    """DataLoader worker_init_fn: seed numpy and random from the worker's torch seed.

    torch gives each worker base_seed + worker_id, and base_seed comes from the loader's generator
    (the data_order stream), so a user transform that uses numpy or random is reproducible too.
    """
    import random

    import numpy as np

    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)
