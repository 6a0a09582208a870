"""The harness's side of a ``train.nproc: N`` unit: its N ranks started through torch's elastic
launcher, ended whatever happens, and their records made the unit's one record.

``train(cfg, run)`` is the unit's training function when train.nproc > 1 (command_spec.training_fn):
it writes the unit's config beside its result, starts ``python -m torch.distributed.run --standalone
--nproc_per_node=N -m harness.integrations.ranks.nproc_rank CONFIG`` with the unit's environment (the
command arm's: process.py, so the launcher and every rank end with the unit, a timeout or a killed
harness included), and adopts what the ranks recorded as a command arm adopts an attached torchrun
script: rank 0's steps and metrics, the data order over every rank's shard in rank order, the
replicas' parameters compared (records.py), the world in the unit's env. A rank that fails fails the
unit, named, with what it raised.
"""

from __future__ import annotations

import pickle
import shlex
import sys
import tempfile
from pathlib import Path

from harness.integrations import process, ranks
from harness.integrations.command import _adopt, _attach_settings, arm_of
from harness.integrations.command_env import ATTACHED_ENV_NAME, read_reported
from harness.integrations.ranks import rank_timeout
from harness.integrations.ranks.nproc_spec import KEY, nproc_of
from harness.integrations.process import ATTACHED_NAME, RUN_ENV, CommandFailed

UNIT_CONFIG = "nproc_unit.pkl"  # the unit's config, for its ranks; removed when they end
RANK_MODULE = "harness.integrations.ranks.nproc_rank"


def launcher_argv(nproc: int, config: Path) -> list[str]:
    """The command that starts the unit's ranks: the harness's own interpreter runs the launcher."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", RANK_MODULE, str(config)]


def train(cfg, run, **_kwargs) -> dict:
    """Run the unit's train.fn as train.nproc ranks (the ranks call it with train.kwargs)."""
    if run.run_dir is not None:
        return _unit(cfg, run, Path(run.run_dir))
    with tempfile.TemporaryDirectory(prefix="harness-nproc-") as tmp:  # a rerun: written nowhere
        return _unit(cfg, run, Path(tmp))


def _unit(cfg, run, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    arm, n = arm_of(cfg), nproc_of(cfg)
    who = f"seed {run.seed} arm {arm}"
    attached = folder / ATTACHED_NAME
    for left in (attached, folder / ATTACHED_ENV_NAME):  # an earlier run's records are not this run's
        left.unlink(missing_ok=True)
    ranks.clear(folder)
    config = folder / UNIT_CONFIG
    config.write_bytes(pickle.dumps(cfg))
    argv = launcher_argv(n, config)
    out, err = folder / "stdout.txt", folder / "stderr.txt"
    env = process.environment(run.seed, arm, folder, int(cfg.determinism.threads))
    env[RUN_ENV] = _attach_settings(cfg, run)
    env.update(rank_timeout.environment(cfg.train))  # the process group's timeout (nproc_rank.py)
    try:  # train.timeout_s: the whole unit; train.rank_timeout_s: a rank waiting in a collective
        code = process.run(argv, Path.cwd(), env, out, err, cfg.train.get("timeout_s"))
    finally:
        config.unlink(missing_ok=True)
    if code != 0:
        text = err.read_text(errors="replace") if err.exists() else ""
        rank = ranks.failure_words(text, folder, process.ending, n, rank_timeout.of(cfg.train), owned=True)
        raise CommandFailed(f"{who}: {KEY}={n}: the unit's launcher {process.ending(code)}"
                            f"{f' ({rank})' if rank else ''}: {shlex.join(argv)}\n"
                            f"last lines of stderr ({err}):\n{process.tail(err) or '(stderr is empty)'}")
    if not attached.exists():
        raise CommandFailed(f"{who}: {KEY}={n}: the ranks ended without rank 0's record ({attached}); "
                            f"last lines of stderr ({err}):\n{process.tail(err) or '(stderr is empty)'}")
    return _adopt(run, attached, {}, who, _env_of(read_reported(folder)))


def _env_of(reported):
    """Rank 0's environment as a train.fn unit's env (the interpreter is the harness's own)."""
    if isinstance(reported, dict):
        reported = {k: v for k, v in reported.items() if k != "interpreter"}
    return reported
