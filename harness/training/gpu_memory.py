"""What one run used of its GPU's memory, measured around it (``timing.gpu_memory`` of a CUDA run).

``workers=auto`` on a GPU runs the first unit alone and widens the pool to the units that fit
(threads.gpu_workers): the numbers it decides on are these, measured by the driver and torch's caching
allocator, never a guess. Bytes, all four:

- ``total``: the device's memory;
- ``used_before``: in use on the device as the run began, after this process's cache was emptied:
  its own CUDA context, and whatever other processes held (so, charged to each new worker, an upper
  bound on what a context costs);
- ``peak_reserved``: the most the caching allocator held during the run (tensors, cuBLAS and cuDNN
  workspaces, fragmentation): what one more unit needs beside its context;
- ``free_after``: free on the device once the run ended and this process's cache was emptied.

Emptying the cache changes no bit: which blocks a tensor lives in does not enter a deterministic kernel.
"""

from __future__ import annotations


def before(device):
    """The start of a CUDA run's measurement (None on any other device)."""
    if getattr(device, "type", None) != "cuda":
        return None
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()  # what an earlier unit of this process left cached is not this run's
    torch.cuda.reset_peak_memory_stats(device)
    free, total = torch.cuda.mem_get_info(device)
    return {"total": int(total), "used_before": int(total - free)}


def after(device, start: dict) -> dict:
    """The whole measurement, once the run ended."""
    import torch

    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_reserved(device)
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    return {**start, "peak_reserved": int(peak), "free_after": int(free)}
