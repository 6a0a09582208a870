"""train_attached.py under DistributedDataParallel: started by torchrun, one process per rank (gloo on
the CPU, NCCL on GPUs), each rank calling ``harness.attach()``.

What changes from the one-process script: the process group, the DDP wrapper, and printing on rank 0
only. ``run.loader`` hands each rank its share of the seed's order; the harness proves the pairing
from every rank's batches (in rank order) and checks that the ranks' weights stayed bit-identical.
On its own, two processes on the CPU:

    python -m torch.distributed.run --standalone --nproc_per_node=2 examples/command_arm/train_ddp.py --seed 0
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import data  # noqa: E402 - the same data as train.py

import harness  # harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--standardize", action="store_true", help="scale each feature to mean 0, sd 1")
    args = parser.parse_args()

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank()
    x_train, y_train, x_test, y_test = (torch.tensor(a, dtype=torch.float32) for a in data())
    if args.standardize:
        mean, sd = x_train.mean(0), x_train.std(0)
        x_train, x_test = (x_train - mean) / sd, (x_test - mean) / sd
    run = harness.attach(seed=args.seed)  # harness: this rank's Run (rank 0's record is the unit's)
    with run.init():  # harness: the same initial weights on every rank
        model = torch.nn.Linear(x_train.shape[1], 1).to(run.device)
    run.watch(model)  # harness: init fingerprint, then the weights at every step
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    # harness: each rank reads its share of the seed's order (as a DistributedSampler would)
    batches = run.loader(harness.TensorBatches(x_train, y_train), batch_size=args.batch_size)
    for epoch in range(1, args.epochs + 1):
        for xb, yb in batches:
            loss = loss_fn(ddp(xb.to(run.device)).squeeze(1), yb.to(run.device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.step(loss)  # harness: the step's loss and weights
        with torch.no_grad():
            logits = model(x_test.to(run.device)).squeeze(1).cpu()
            test_loss = loss_fn(logits, y_test).item()
        if rank == 0:
            print(f"epoch {epoch} test_loss {test_loss:.6f}", flush=True)
    if rank == 0:
        accuracy = 100.0 * ((logits > 0) == (y_test > 0.5)).float().mean().item()
        print(f"final test_loss {test_loss:.6f} test_accuracy {accuracy:.2f}")
    run.finish()  # harness: before the process group goes (the record names its backend)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
