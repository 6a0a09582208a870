"""A trainer's own launcher (Lightning's ``strategy="ddp"``): the unit's ranks found from the trainer,
where no torchrun named them.

Lightning's subprocess launcher runs the script again once per extra rank, with WORLD_SIZE and
LOCAL_RANK set but no RANK (one node: the rank is the local rank), and sets WORLD_SIZE in the first
process only once the Trainer launches, after the script attached as one process. ``child_world``
reads a started copy's rank from its environment (attach.py), ``rank_aware`` makes the first
process's Run rank 0 of the world the Trainer reports, so every rank records as under torchrun
(records.py: rank 0 writes the unit's record, every other rank its own).
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

from harness.integrations import ranks


def child_world(env: Mapping = os.environ) -> Optional[ranks.World]:
    """The rank of a process a trainer's launcher started on one node (WORLD_SIZE and LOCAL_RANK, no
    RANK), or None (a launcher that set RANK: ranks.world; several nodes: the trainer says, rank_aware)."""
    if env.get("RANK") is not None or env.get("WORLD_SIZE") is None or env.get("LOCAL_RANK") is None:
        return None
    if str(env.get("NODE_RANK", env.get("GROUP_RANK", "0"))) != "0":
        return None
    try:
        size, local = int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
    except ValueError:
        return None
    return ranks.World(local, size, local) if 0 <= local < size else None


def rank_aware(run, rank: int, size: int, local_rank: int) -> None:
    """Make an attached Run that began as one process a rank of a ``size``-process world (a trainer
    launched the others after the script attached). Rank 0 keeps the unit's record; another rank
    that began alone writes its own (records.rank_record)."""
    from pathlib import Path

    if size <= 1 or not getattr(run, "attached", False):
        return
    if run.world is not None and run.world.spans:
        return  # a launcher named the rank before (torchrun, or the trainer's started copy)
    run.world = ranks.World(int(rank), int(size), int(local_rank))
    if run.world.rank != 0:
        run.record_to = ranks.rank_record(Path(run.run_dir), run.world.rank)
