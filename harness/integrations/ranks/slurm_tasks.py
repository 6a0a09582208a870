"""A SLURM job of several tasks as one unit's ranks: which task this process is, the rendezvous, and
the launcher settings a sweep is refused for (torch-free).

With ``hydra/launcher=submitit_slurm`` (or the harness's ``slurm``) and ``hydra.launcher.tasks_per_node``
or ``nodes`` above 1, srun starts the job's function once per task: every task runs the harness's
task function. Task 0 runs the job's units as usual; the others follow it (slurm_units.py), and each
unit runs as ``nodes x tasks_per_node`` ranks, one per task. The rendezvous comes from SLURM's
environment as submitit's ``helpers.TorchDistributedEnvironment`` takes it: the rank is SLURM_PROCID,
the world SLURM_NTASKS, the local rank SLURM_LOCALID, the master the job's first node
(SLURM_JOB_NODELIST), the port one derived from the job id (MASTER_PORT, where set, instead), plus
the unit's index in the job, so that consecutive units never share a port.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from omegaconf import OmegaConf

UNITS_ENV = "HARNESS_SLURM_UNITS"  # set on task 0: the folder its units' requests go to (slurm_units.py)
PORTS = (20000, 60000)  # submitit's range for a port derived from the job id


@dataclass(frozen=True)
class SlurmTasks:
    rank: int  # SLURM_PROCID
    size: int  # SLURM_NTASKS: nodes x tasks_per_node
    local_rank: int  # SLURM_LOCALID
    local_size: int  # tasks on this node
    job_id: str  # SLURM_JOB_ID (an array's element has its own)
    restart: int  # SLURM_RESTART_COUNT: a requeued job starts its units' exchange afresh
    master_addr: str  # the job's first node
    port_base: int

    def port(self, unit: int) -> int:
        """The rendezvous port of the job's ``unit``-th unit."""
        low, high = PORTS
        return low + (self.port_base - low + unit) % (high - low + 1)

    def exchange(self, sweep_root: Path) -> Path:
        """The folder on the sweep's (shared) file system where task 0 posts its units for the others."""
        return Path(sweep_root) / ".submitit" / "ranks" / f"{self.job_id}.{self.restart}"


class SlurmEnvError(ValueError):
    """SLURM's environment does not say which task this is; the message names the variable."""


def _int(env: Mapping, name: str, default: Optional[str] = None) -> int:
    value = env.get(name, default)
    try:
        return int(str(value))
    except ValueError:
        raise SlurmEnvError(f"{name}={value!r} in this SLURM job's environment is not an integer: the "
                            "harness reads the task's rank and the world's size from it (srun sets it).") from None


def first_node(nodelist: str) -> str:
    """The first host of a SLURM node list ("node[03-05,9],gpu1" -> "node03")."""
    try:
        from submitit.slurm.slurm import _parse_node_list

        return _parse_node_list(nodelist)[0]
    except ImportError:  # submitit is the launcher's: where it is missing, the list's first name
        head = nodelist.split(",")[0]
        if "[" not in head:
            return head
        prefix, inside = head.split("[", 1)
        return prefix + inside.split("-")[0].split(",")[0].rstrip("]")


def slurm_tasks(env: Mapping = os.environ) -> Optional[SlurmTasks]:
    """This process's place in a submitit SLURM job of more than one task, or None (one task, or not a
    submitit SLURM job: a local run, a pool's worker, a job of one task as before)."""
    if env.get("SUBMITIT_EXECUTOR") != "slurm" or "SLURM_PROCID" not in env:
        return None
    size = _int(env, "SLURM_NTASKS", "1")
    if size <= 1:
        return None
    rank = _int(env, "SLURM_PROCID")
    if not 0 <= rank < size:
        raise SlurmEnvError(f"SLURM_PROCID={rank} is not a task of this job's SLURM_NTASKS={size}.")
    nodes = max(1, _int(env, "SLURM_JOB_NUM_NODES", "1"))
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise SlurmEnvError("SLURM_JOB_NODELIST is not set in this SLURM job's environment: the harness takes "
                            "the rendezvous address (MASTER_ADDR) from the job's first node.")
    job_id = str(env.get("SLURM_JOB_ID") or "")
    if not job_id:
        raise SlurmEnvError("SLURM_JOB_ID is not set in this SLURM job's environment: the rendezvous port is derived from it.")
    port = _int(env, "MASTER_PORT") if env.get("MASTER_PORT") else random.Random(job_id).randint(*PORTS)
    return SlurmTasks(rank=rank, size=size, local_rank=_int(env, "SLURM_LOCALID", "0"), local_size=size // nodes,
                      job_id=job_id, restart=_int(env, "SLURM_RESTART_COUNT", "0"),
                      master_addr=first_node(nodelist), port_base=port)


def rank_env(tasks: SlurmTasks, rank: int, local_rank: int, unit: int) -> dict:
    """What torch's ``env://`` rendezvous reads (and ranks.world()): the unit's ``unit``-th port."""
    return {"MASTER_ADDR": tasks.master_addr, "MASTER_PORT": str(tasks.port(unit)), "WORLD_SIZE": str(tasks.size),
            "LOCAL_WORLD_SIZE": str(tasks.local_size), "RANK": str(rank), "LOCAL_RANK": str(local_rank)}


def _tasks_of(launcher) -> tuple[Optional[str], int]:
    """(the refusal of a launcher's nodes / tasks_per_node, or None; the tasks of one job)."""
    count = 1
    for key in ("nodes", "tasks_per_node"):
        value = launcher.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return (f"hydra.launcher.{key}={value!r} is not allowed: give an integer >= 1 (a job runs each unit "
                    "as nodes x tasks_per_node ranks, one per SLURM task; 1 and 1: one process, as before)."), 1
        count *= value
    return None, count


def launcher_problem(cfg) -> Optional[str]:
    """The one-paragraph refusal of a sweep's launcher settings with this job's config, or None.
    ``cfg`` holds the ``hydra`` node (a job's config as on_multirun_start composes it)."""
    launcher = OmegaConf.select(cfg, "hydra.launcher", default=None)
    if launcher is None or "submitit" not in str(launcher.get("_target_", "")):
        return None
    problem, tasks = _tasks_of(launcher)
    if problem or tasks == 1:
        return problem
    target = str(launcher.get("_target_"))
    if not target.endswith("SlurmLauncher"):
        return (f"hydra.launcher.tasks_per_node x nodes = {tasks} with {target}: only SLURM's launcher "
                "(hydra/launcher=submitit_slurm or slurm) makes one unit of a job's tasks. Give tasks_per_node=1 "
                "and nodes=1 here, or train.nproc=N to run each unit as N ranks.")
    return tasks_problem(cfg, tasks, "hydra.launcher.nodes x hydra.launcher.tasks_per_node")


def tasks_problem(cfg, tasks: int, where: str = "SLURM_NTASKS", *, local_size: int = 1,
                  gpus: Optional[int] = None) -> Optional[str]:
    """Why a unit of ``cfg`` cannot run as the ``tasks`` ranks of a SLURM job, or None. In the job,
    ``gpus``: the GPUs a task sees where the unit computes on a GPU (None: on the CPU, or not known
    yet), against the ``local_size`` tasks of its node."""
    from harness.integrations.ranks.nproc_spec import nproc_of

    nproc = nproc_of(cfg)
    if nproc > 1:
        return (f"train.nproc={nproc} is set with {where} = {tasks}: each SLURM task is already one rank of the "
                f"unit, and train.nproc would start {nproc} more in every task. Give one of them: train.nproc=1 "
                f"with {tasks} tasks (SLURM starts the ranks), or tasks_per_node=1 and nodes=1 with train.nproc={nproc} "
                "(the harness starts the ranks inside the job). Nothing was run.")
    if OmegaConf.select(cfg, "train.cmd", default=None) is not None:
        return (f"train.cmd is set with {where} = {tasks}: a command arm starts its own ranks. Give tasks_per_node=1 "
                "and nodes=1 and launch the ranks in the command (train.cmd: torchrun --nproc_per_node=N train.py, "
                "with harness.attach() in the script), or run a train.fn as the job's tasks. Nothing was run.")
    if gpus is not None and local_size > gpus:
        return (f"{tasks} SLURM tasks on a GPU, {local_size} on this node: each rank computes on the GPU of its "
                f"local rank (cuda:SLURM_LOCALID), and a task here sees {gpus} GPU(s). Give "
                "hydra.launcher.gpus_per_node >= hydra.launcher.tasks_per_node, or device=cpu (gloo).")
    return None
