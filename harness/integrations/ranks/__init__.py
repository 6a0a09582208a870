"""A unit that spans processes: a command arm started through torchrun, each rank attached, a train.fn unit of train.nproc ranks, or of a SLURM job's tasks.

Owns: records.py (which rank a process is, the world it runs in, the ranks' records made one unit
record, the replicas compared, the failed rank named; torch-free), rank_side.py (what
``harness.attach()`` does in one rank: its device, its end with the launcher, its exception kept),
shards.py (one rank's share of the shuffled order), proc_tree.py (the processes a command started
out of its process group, found by parent: torchrun's ranks, in sessions of their own; stdlib only,
read by path by group_guard.py); and a train.fn unit the harness starts as ``train.nproc`` ranks:
nproc_spec.py (the key, its refusal), nproc_launch.py (the ranks started, their records made one),
nproc_rank.py (one rank: the process group, the Run, train.fn), trainer_ranks.py (the ranks a
trainer's own launcher starts: Lightning's strategy="ddp"); rank_timeout.py (train.rank_timeout_s:
the process group's timeout, for the harness's ranks and a torchrun script's); and a SLURM job's
tasks as a unit's ranks: slurm_tasks.py (which task this is, the rendezvous from SLURM's
environment, the launcher settings refused), slurm_units.py (task 0 posts each unit, every task runs
its rank of it).
"""

from harness.integrations.ranks.records import (  # noqa: F401 - the names the command arm and the identity use
    RANK_ERROR, RANK_RECORD, RanksFailed, World, clear, combine, failed_rank, failure_words, launched_world,
    nccl_settings, rank_error, rank_record, replicas, world, world_block, world_words)
