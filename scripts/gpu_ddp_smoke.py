"""A 1-GPU DDP smoke step (scripts/gpu_check.sh): DistributedDataParallel over one rank started by
torchrun, NCCL on the GPU (gloo with --device cpu, the dry run), a few steps recorded by the harness's
Run, and the world the unit's identity would record (size, backend, the NCCL settings in force).

    python -m torch.distributed.run --standalone --nproc_per_node=1 scripts/gpu_ddp_smoke.py [--device cpu]
"""

import argparse
import sys

import torch
import torch.distributed as dist

from harness.integrations.ranks import world, world_block
from harness.training.run import Run


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    w = world()
    if w is None:
        sys.exit("run it under torchrun (RANK/WORLD_SIZE unset)")
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("no CUDA device: use --device cpu")
    device = torch.device("cuda", w.local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    run = Run(0, device)
    with run.init():
        model = torch.nn.Linear(32, 4).to(device)
    run.watch(model, args.steps)
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[w.local_rank] if cuda else None)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    for _ in range(args.steps):
        x, y = torch.randn(16, 32, generator=g).to(device), torch.randn(16, 4, generator=g).to(device)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        run.step(loss)
    fp = run.finish({})["fingerprints"]
    block = world_block(w, str(dist.get_backend()))
    print(f"ddp smoke ok: rank {w.rank} of {w.size}, {args.steps} steps on {device}, world {block}, "
          f"final parameters {fp['final'][:16]}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
