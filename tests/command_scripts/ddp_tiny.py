"""A tiny DDP script (gloo, CPU) that records through harness.attach() on every rank (tests/test_ranks.py).

Started by torchrun; run as one process (no WORLD_SIZE) it trains alone. --break_sync: rank 1 nudges
its own weights after its 2nd step (a broken synchronisation). --fail_rank R --how kill|raise|hang
--fail_once PATH: rank R kills itself (SIGKILL), raises, or hangs (the others wait in the next
all-reduce until --pg_timeout, else train.rank_timeout_s) at its 3rd step while the file PATH.HOW exists, removing it first (a
rerun trains)."""

import argparse
import datetime
import os
import signal
import threading

import torch
import torch.distributed as dist

import harness

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--break_sync", action="store_true")
parser.add_argument("--fail_rank", type=int, default=-1)
parser.add_argument("--how", default="kill")
parser.add_argument("--fail_once", default=None)
parser.add_argument("--pg_timeout", type=float, default=None)  # the process group's timeout, seconds
args, _ = parser.parse_known_args()
spans = "WORLD_SIZE" in os.environ
if spans:
    failing = args.fail_once and os.path.exists(f"{args.fail_once}.{args.how}")  # a rerun waits as long as torch's default
    # no --pg_timeout: the unit's train.rank_timeout_s, as a user's script passes it
    timeout = datetime.timedelta(seconds=args.pg_timeout) if args.pg_timeout and failing else harness.rank_timeout()
    dist.init_process_group("gloo", timeout=timeout)
rank = dist.get_rank() if spans else 0
run = harness.attach(seed=args.seed)
with run.init():
    model = torch.nn.Linear(2, 1)
run.watch(model)
net = torch.nn.parallel.DistributedDataParallel(model) if spans else model
opt = torch.optim.SGD(net.parameters(), lr=args.lr)
data = harness.TensorBatches(torch.linspace(0, 1, 24).reshape(12, 2), torch.linspace(1, 0, 12))
once = f"{args.fail_once}.{args.how}" if args.fail_once else None
for epoch in range(2):
    for inputs, targets in run.loader(data, batch_size=2):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(inputs).flatten(), targets)
        loss.backward()
        opt.step()
        if args.break_sync and rank == 1 and run.steps == 1:  # in its 2nd step
            with torch.no_grad():
                model.weight.add_(1e-3)
        run.step(loss)
        if run.steps == 3 and rank == args.fail_rank and once and os.path.exists(once):
            os.remove(once)
            if args.how == "raise":
                raise ValueError(f"rank {rank} broke on purpose")
            if args.how == "hang":  # never reaches the next step's all-reduce
                threading.Event().wait()
            os.kill(os.getpid(), signal.SIGKILL)
run.finish({"loss": loss.item()})
if rank == 0:
    print(f"score {loss.item():.6f}")
if spans:
    dist.destroy_process_group()
