"""One rank of a ``train.nproc`` unit: the unit's Run on this rank, the process group, the training
function, the rank's record.

Started by torch's elastic launcher (nproc_launch.py) as ``python -m harness.integrations.ranks.nproc_rank
CONFIG``. ``harness.attach()`` builds the rank-aware Run from the unit's environment (attach.py): the
unit's determinism mode and threads set on this rank before any CUDA work, ``run.loader`` handing
out this rank's share of the seed's order, the record written to rank 0's or this rank's file. The
process group is the harness's (gloo on the CPU, NCCL on a GPU), so a train.fn wraps its model in
``DistributedDataParallel`` when ``torch.distributed.is_initialized()`` and is otherwise unchanged.
"""

from __future__ import annotations

import pickle
import sys


def main(argv: list[str]) -> int:
    with open(argv[0], "rb") as f:
        cfg = pickle.load(f)
    from harness.integrations.attach import attach
    from harness.integrations.ranks.rank_timeout import rank_timeout

    run = attach()  # modes and threads first, on every rank

    import torch
    import torch.distributed as dist
    from omegaconf import OmegaConf, flag_override

    from harness.training.components import resolve_callable
    from harness.training.steps import RunUsageError

    if run.device.type == "cuda":
        torch.cuda.set_device(run.device)
    # train.rank_timeout_s (None: torch's default); a Lightning Trainer's ddp joins this group
    dist.init_process_group("nccl" if run.device.type == "cuda" else "gloo", timeout=rank_timeout())
    fn = resolve_callable(cfg.train.fn, "train.fn")
    with flag_override(cfg, "readonly", True):
        metrics = fn(cfg, run, **OmegaConf.to_container(cfg.train.kwargs, resolve=True))
    if not isinstance(metrics, dict) or not metrics:
        raise RunUsageError(f"train.fn={cfg.train.fn} returned {type(metrics).__name__} on rank {run.world.rank}: "
                            "it must return a non-empty dict of final metrics, name -> number.")
    run.finish({str(k): (v.item() if hasattr(v, "item") and callable(v.item) else v) for k, v in metrics.items()})
    if dist.is_initialized():  # a trainer may have ended the group itself
        dist.destroy_process_group()  # after finish: the record names the group's backend
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
