"""What ``harness.attach()`` does in one rank of a unit that spans processes (ranks.py): the rank's
device, its end with the launcher, the exception it ends with, and the world it ran in."""

from __future__ import annotations

import signal
import sys
import traceback
from pathlib import Path

from harness.integrations.ranks import records as ranks


def rank_device(device, w: ranks.World):
    """A CUDA unit's rank computes on the GPU of its local rank; a CPU unit's on the CPU."""
    import torch

    return torch.device("cuda", w.local_rank) if device.type == "cuda" else device


def rank_process(folder: Path, w: ranks.World) -> None:
    """Tie the rank to its launcher: torchrun starts each rank in a session of its own, out of reach of
    the unit's process group, so a launcher killed (a timeout, a harness killed) must take its ranks
    with it (the kernel's death signal). An exception the rank's script ends with is kept for the
    unit's failure message (torchrun names the rank, not what it raised)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    previous = sys.excepthook

    def hook(kind, value, tb) -> None:
        try:
            ranks.rank_error(folder, w.rank).write_text("".join(traceback.format_exception_only(kind, value)))
        except OSError:
            pass
        previous(kind, value, tb)

    sys.excepthook = hook


def world_now(w: ranks.World) -> dict:
    """The world this rank runs in: its size, the process group's backend (None before
    init_process_group), the NCCL settings in force."""
    backend = None
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            backend = str(dist.get_backend())
    except (ImportError, RuntimeError):
        pass
    return ranks.world_block(w, backend)
