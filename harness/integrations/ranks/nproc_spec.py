"""``train.nproc``: how many processes one unit runs as, read and checked in one place (torch-free).

1 (the default) is today's unit, one process; N > 1 starts the unit's train.fn as N ranks of one
process group (nproc_launch.py). A unit of N processes takes N worker slots side by side
(training/threads.py counts processes x threads against the free cores).
"""

from __future__ import annotations

from typing import Optional

from omegaconf import OmegaConf

from harness.integrations.ranks import rank_timeout

KEY = "train.nproc"
NPROC_FN = "harness.integrations.ranks.nproc_launch.train"  # the unit's door when train.nproc > 1


def nproc_of(cfg) -> int:
    """The processes a unit of ``cfg`` runs as (1 where the key is absent or not yet valid: the
    preflight names a bad value)."""
    value = OmegaConf.select(cfg, KEY, default=1) if OmegaConf.is_config(cfg) else ((cfg or {}).get("train") or {}).get("nproc", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def nproc_problem(value, *, command: bool = False, where: str = KEY) -> Optional[str]:
    """The one-paragraph refusal of a ``train.nproc`` value, or None. ``command``: the arm runs
    train.cmd, whose launcher starts its own ranks."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return (f"{where}={value!r} is not allowed: give an integer >= 1, the processes one unit runs as "
                "(1: one process, as before; N > 1: the harness starts train.fn as N ranks of one process "
                "group through torch's elastic launcher, gloo on the CPU, NCCL on GPUs, each rank with "
                "determinism.threads threads; side by side the unit takes N worker slots).")
    if command and value > 1:
        return (f"{where}={value} is set with train.cmd: a command starts its own ranks. Launch them in the "
                "command (train.cmd: torchrun --nproc_per_node=N train.py, with harness.attach() in the "
                "script) and leave train.nproc at 1 (docs/own-code.md, More than one process per run).")
    return None


def ranks_problem(train, on_gpu) -> list[str]:
    """train.nproc's refusal for a config's ``train`` node (its value, with train.cmd, more ranks than
    GPUs; train.rank_timeout_s's value), as a list; ``on_gpu()`` says whether the config computes on a GPU (asked only for N > 1)."""
    if train is None:
        return []
    timeout_problem = rank_timeout.problem(train.get("rank_timeout_s"))
    if timeout_problem is not None:
        return [timeout_problem]
    if "nproc" not in train:
        return []
    value = train.get("nproc")
    problem = nproc_problem(value, command=train.get("cmd") is not None)
    timeout = train.get("timeout_s")
    if problem is None and value > 1 and timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        problem = f"train.timeout_s={timeout!r} must be a number of seconds > 0, or null (no limit): it ends a {KEY} unit's ranks."
    if problem is None and value > 1 and on_gpu():
        from harness.training.gpus import visible

        gpus = len(visible())
        if value > gpus:
            problem = (f"{KEY}={value} on a GPU: each rank computes on a GPU of its own (cuda:LOCAL_RANK) and "
                       f"{gpus} GPU(s) are visible here. Give {KEY} <= {gpus}, or device=cpu (gloo).")
    return [problem] if problem else []
