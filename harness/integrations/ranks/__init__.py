"""A unit that spans processes: a command arm started through torchrun, each rank attached.

Owns: records.py (which rank a process is, the world it runs in, the ranks' records made one unit
record, the replicas compared, the failed rank named; torch-free), rank_side.py (what
``harness.attach()`` does in one rank: its device, its end with the launcher, its exception kept),
shards.py (one rank's share of the shuffled order), proc_tree.py (the processes a command started
out of its process group, found by parent: torchrun's ranks, in sessions of their own; stdlib only,
read by path by group_guard.py).
"""

from harness.integrations.ranks.records import (  # noqa: F401 - the names the command arm and the identity use
    RANK_ERROR, RANK_RECORD, RanksFailed, World, clear, combine, failed_rank, failure_words, launched_world,
    nccl_settings, rank_error, rank_record, replicas, world, world_block, world_words)
