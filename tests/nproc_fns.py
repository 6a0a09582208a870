"""Training functions for train.nproc units (tests/test_nproc.py): a tiny DDP loop, run as one rank of
the harness's process group when there is one and alone otherwise."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

import harness


def tiny_ddp(cfg, run, lr=0.1, break_sync=False, fail_rank=-1, fail_once=None, hang=False):
    """12 examples of 2 features, batches of 2, 2 epochs. ``break_sync``: rank 1 nudges its weights
    after its 2nd step. ``fail_rank``: that rank kills itself (SIGKILL) at its 3rd step while the file
    ``fail_once`` exists, removing it first (a rerun trains); with ``hang`` it skips the next step's
    all-reduce instead and waits forever, leaving the other ranks waiting in it."""
    spans = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if spans else 0
    with run.init():
        model = torch.nn.Linear(2, 1)
    run.watch(model)
    net = torch.nn.parallel.DistributedDataParallel(model) if spans else model
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    data = harness.TensorBatches(torch.linspace(0, 1, 24).reshape(12, 2), torch.linspace(1, 0, 12))
    for _ in range(2):
        for inputs, targets in run.loader(data, batch_size=2):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(inputs).flatten(), targets)
            loss.backward()
            opt.step()
            if break_sync and rank == 1 and run.steps == 1:
                with torch.no_grad():
                    model.weight.add_(1e-3)
            run.step(loss)
            if rank == fail_rank and run.steps == 3 and fail_once and os.path.exists(fail_once):
                os.remove(fail_once)
                if hang:
                    threading.Event().wait()
                os.kill(os.getpid(), signal.SIGKILL)
    return {"score": loss.item()}


def side_by_side(cfg, run, folder, meet=False, **kwargs):
    """tiny_ddp, its span marked in ``folder`` by rank 0 (tests/test_nproc_side_by_side.py): the file
    running-ARM while it trains, done-ARM after; with ``meet``, rank 0 first waits until another unit
    has begun and writes the units it met to met-ARM.json."""
    arm, folder = os.environ["HARNESS_ARM"], Path(folder)
    first = not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0
    mine = folder / f"running-{arm}"
    if first:
        mine.write_text("")
        met: list = []
        deadline = time.monotonic() + 300  # a bound, should the other unit never come
        while meet and not met and time.monotonic() < deadline:
            met = sorted(p.name for p in folder.iterdir() if p.name.startswith(("running-", "done-")) and p != mine)
            time.sleep(0.05)
        (folder / f"met-{arm}.json").write_text(json.dumps(met))
    metrics = tiny_ddp(cfg, run, **kwargs)
    if first:
        mine.rename(folder / f"done-{arm}")
    return metrics
