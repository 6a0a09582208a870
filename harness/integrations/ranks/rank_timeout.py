"""``train.rank_timeout_s``: how long a rank waits in a collective for the others before it fails.

It is the process group's timeout (``init_process_group(timeout=...)``), null for torch's default
(30 minutes for gloo, 10 for NCCL). The harness opens the group of a ``train.nproc`` unit
(nproc_rank.py, and so Lightning's ddp through harness.lightning.fit, which joins that group); a
torchrun command's script opens its own, so the value reaches every rank as HARNESS_RANK_TIMEOUT_S
and ``harness.rank_timeout()`` reads it back for ``init_process_group``. A rank that times out
raises; torchrun then ends the other ranks and the unit fails naming both the rank that waited and
the ranks that never reached the collective (records.failure_words). Torch-free.
"""

from __future__ import annotations

import datetime
import os
from typing import Mapping, Optional

KEY = "train.rank_timeout_s"
ENV = "HARNESS_RANK_TIMEOUT_S"


def problem(value) -> Optional[str]:
    """The one-paragraph refusal of a train.rank_timeout_s value, or None."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
        return None
    return (f"{KEY}={value!r} is not allowed: give a number of seconds > 0, or null (torch's default, "
            "30 minutes for gloo). It is how long a rank of a unit that spans processes waits in a "
            "collective (an all-reduce) for the other ranks before it fails and the unit with it: the "
            "process group's timeout, set by the harness for train.nproc units and handed to a torchrun "
            "script as harness.rank_timeout() (docs/own-code.md, More than one process per run).")


def of(train) -> Optional[float]:
    """The value of a config's ``train`` node (None where unset or not valid: the preflight names it)."""
    value = train.get("rank_timeout_s") if train is not None else None
    return float(value) if problem(value) is None and value is not None else None


def environment(train) -> dict:
    """What a unit's processes get in their environment for the value (nothing where it is null)."""
    value = of(train)
    return {} if value is None else {ENV: repr(value)}


def rank_timeout(env: Mapping = os.environ) -> Optional[datetime.timedelta]:
    """The unit's train.rank_timeout_s for ``init_process_group(backend, timeout=...)``; None (torch's
    default) where it is not set or the process was not started by the harness."""
    try:
        seconds = float(env[ENV])
    except (KeyError, ValueError):
        return None
    return datetime.timedelta(seconds=seconds) if seconds > 0 else None
