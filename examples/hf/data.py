"""A tiny text-classification data set for examples/hf (no download): sequences of 16 token ids drawn
from a fixed generator; the label says whether token 3 appears in it (about half do). What a
Hugging Face user's dataset builder returns: a map-style dataset of {"input_ids", "labels"} dicts."""

import torch


class CountingTokens(torch.utils.data.Dataset):
    def __init__(self, n: int = 512, length: int = 16, vocab: int = 32, split_seed: int = 0):
        g = torch.Generator().manual_seed(1000 + split_seed)  # the same data in every run; train and eval apart
        self.ids = torch.randint(4, vocab, (n, length), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        where = torch.randint(0, length, (n,), generator=g)
        self.ids[self.labels == 1, where[self.labels == 1]] = 3  # one 3 somewhere in a positive sequence

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def accuracy(prediction) -> dict:
    """compute_metrics: the share of the eval set classified right, in points."""
    return {"accuracy": 100.0 * float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}
