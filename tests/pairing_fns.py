"""Training functions for the pairing-proof tests (tests/test_empty_proof.py): a tiny linear model
on synthetic data, the arms differing in loss.label_smoothing (read here as a shift of the metric).

``own_batches`` feeds itself without the Run (batches sliced in a fixed order), as an LM or a
Lightning DataModule does: its data_order fingerprint covers nothing. ``ordered_windows`` reads
contiguous windows from a seeded start through ``run.ordered``: the data order is proven.
"""

from __future__ import annotations

import torch


def _corpus() -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 64).reshape(32, 2)  # the same data in every run


def _fit(cfg, run, batches) -> dict:
    with run.init():
        model = torch.nn.Linear(2, 1)
    run.watch(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for xb in batches:
        loss = (model(xb).squeeze(1) - xb.sum(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.step(loss.detach())
    return {"test_accuracy": 50.0 + float(cfg.loss.label_smoothing) * 10 + float(loss.detach()) + run.seed % 3}


def own_batches(cfg, run) -> dict:
    return _fit(cfg, run, _corpus().split(8))


def ordered_windows(cfg, run) -> dict:
    start = int(torch.randint(0, 8, (1,), generator=run.generator("data_order")))  # a seeded start, then in order
    return _fit(cfg, run, run.ordered(_corpus()[start:].split(8)))
