"""The GPUs CUDA will show this process, found without creating a CUDA context or importing torch.

``CUDA_VISIBLE_DEVICES`` decides what CUDA sees: unset, every device the driver has; set, its
entries in order (ordinals, ``GPU-``/``MIG-`` UUIDs), read the way CUDA reads them (torch mirrors it
in torch.cuda._parse_visible_devices): an entry that is not a device ends the list, a repeated one
empties it, an ordinal past the driver's devices ends it. The driver's count comes from NVML
(libnvidia-ml, as torch.cuda.device_count does before CUDA is initialised): no context, so a parent
that spreads workers over the GPUs never holds device memory itself and never poisons fork.

Side-by-side workers get one device each, round robin (``worker_env``): a worker's CUDA_VISIBLE_DEVICES
names one entry, so inside it the device is cuda:0 and its units never share a GPU with another
worker's unless there are more workers than GPUs.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional


def nvml_count() -> int:
    """The devices the driver has (NVML), or 0 without a driver (no context is created)."""
    from ctypes import CDLL, byref, c_int

    try:
        nvml = CDLL("libnvidia-ml.so.1")
    except OSError:
        return 0
    if nvml.nvmlInit_v2() != 0:
        return 0
    count = c_int(0)
    try:
        return count.value if nvml.nvmlDeviceGetCount_v2(byref(count)) == 0 else 0
    finally:
        nvml.nvmlShutdown()


def _ordinal(entry: str) -> int:
    """The leading integer of an entry, as strtoul reads it; -1 when there is none."""
    digits = ""
    for i, c in enumerate(entry):
        if c.isdigit() or (i == 0 and c in "+-"):
            digits += c
        else:
            break
    try:
        return int(digits)
    except ValueError:
        return -1


def parse_visible(value: str, count: int) -> list[str]:
    """The entries of a CUDA_VISIBLE_DEVICES value CUDA will use, given the driver's ``count``."""
    entries = [e.strip() for e in value.split(",")]
    out: list[str] = []
    if entries and entries[0][:4] in ("GPU-", "MIG-"):
        prefix = entries[0][:4]
        for e in entries:
            if not e.startswith(prefix):
                break
            if e in out:
                return []
            out.append(e)
        return out[:count]
    for e in entries:
        n = _ordinal(e)
        if n < 0 or n >= count:
            break
        if str(n) in out:
            return []
        out.append(str(n))
    return out


def visible(environ: Optional[Mapping[str, str]] = None, count: Optional[Callable[[], int]] = None) -> list[str]:
    """The GPUs this process's CUDA will see, as entries for a worker's CUDA_VISIBLE_DEVICES."""
    environ = os.environ if environ is None else environ
    n = (count or nvml_count)()
    value = environ.get("CUDA_VISIBLE_DEVICES")
    return [str(i) for i in range(n)] if value is None else parse_visible(value, n)


def worker_env(index: int, gpus: list[str], environ: Mapping[str, str]) -> dict:
    """The environment of side-by-side worker ``index``: one of ``gpus``, round robin (none: unchanged)."""
    env = dict(environ)
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus[index % len(gpus)]
    return env
