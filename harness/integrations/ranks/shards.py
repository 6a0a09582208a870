"""One rank's share of the data order, for a unit that spans processes (records.py).

Every rank draws the same permutation from its data_order stream (the same seed on every rank) and
takes its share of it as torch's DistributedSampler does: the permutation padded with its own head to
a multiple of the world's size, then every size-th index from the rank's own. The shares are disjoint
(but for the padding) and together cover the epoch; each rank fingerprints the batches it consumed,
and the unit's data order is the ranks' digests in rank order.
"""

from __future__ import annotations

import torch

from harness.training.batches import ShuffledBatches


class ShardedBatches(ShuffledBatches):
    """ShuffledBatches over rank ``rank``'s share (of ``size``) of each epoch's permutation."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator, drop_last: bool = False, *,
                 rank: int, size: int):
        super().__init__(n, batch_size, generator, drop_last)
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not in a world of {size} processes.")
        self.rank, self.size = int(rank), int(size)
        self.share = -(-n // size) if n else 0  # every rank the same count: DDP steps in lockstep

    def __len__(self) -> int:
        return self.share // self.batch_size if self.drop_last else -(-self.share // self.batch_size)

    def __iter__(self):
        self.drawn.clear()
        perm = torch.randperm(self.n, generator=self.generator)
        total = self.share * self.size
        if total > self.n:  # padded with its own head, as DistributedSampler pads
            perm = perm.repeat(-(-total // self.n))[:total]
        for batch in perm[self.rank::self.size].contiguous().split(self.batch_size):
            if self.drop_last and len(batch) < self.batch_size:
                return
            self.drawn.append(batch)
            yield batch
