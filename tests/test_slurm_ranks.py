"""A SLURM job's tasks as one unit's ranks, without a cluster: the rendezvous read from a SLURM task's
environment (integrations/ranks/slurm_tasks.py), and the launcher settings a sweep is refused for
before any job is submitted. The units themselves run on a cluster in tests/test_slurm.py."""

from __future__ import annotations

import random

import pytest

from harness.integrations.ranks import World, world
from harness.integrations.ranks.slurm_tasks import SlurmEnvError, rank_env, slurm_tasks

from .conftest import TEST_CONF, run_cli

TASK_1 = {"SUBMITIT_EXECUTOR": "slurm", "SLURM_JOB_ID": "4242", "SLURM_NTASKS": "4", "SLURM_PROCID": "3",
          "SLURM_LOCALID": "1", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "node[07-08]"}


def test_a_slurm_task_reads_its_rank_the_world_and_the_rendezvous_from_slurms_environment():
    tasks = slurm_tasks(TASK_1)
    assert (tasks.rank, tasks.size, tasks.local_rank, tasks.local_size) == (3, 4, 1, 2)
    assert tasks.master_addr == "node07"  # the job's first node
    derived = random.Random("4242").randint(20000, 60000)  # submitit's TorchDistributedEnvironment port
    assert tasks.port(0) == derived and tasks.port(1) == (derived + 1 if derived < 60000 else 20000)
    assert slurm_tasks({**TASK_1, "MASTER_PORT": "29555"}).port(2) == 29557
    # what torch's env:// rendezvous and the rank's Run read (ranks.world)
    env = rank_env(tasks, tasks.rank, tasks.local_rank, 0)
    assert world(env) == World(rank=3, size=4, local_rank=1)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["LOCAL_WORLD_SIZE"]) == ("node07", str(derived), "2")
    assert tasks.exchange("/sweep").as_posix() == "/sweep/.submitit/ranks/4242.0"  # a requeued job: .1
    assert slurm_tasks({**TASK_1, "SLURM_RESTART_COUNT": "1"}).exchange("/s").name == "4242.1"


def test_a_job_of_one_task_or_outside_submitit_is_no_world_and_a_bad_variable_is_named():
    assert slurm_tasks({**TASK_1, "SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) is None
    assert slurm_tasks({k: v for k, v in TASK_1.items() if k != "SUBMITIT_EXECUTOR"}) is None  # srun alone, salloc
    assert slurm_tasks({}) is None
    for change, words in (({"SLURM_PROCID": "x"}, "SLURM_PROCID='x'"), ({"SLURM_PROCID": "4"}, "SLURM_PROCID=4 is not a task"),
                          ({"SLURM_JOB_NODELIST": ""}, "SLURM_JOB_NODELIST is not set")):
        with pytest.raises(SlurmEnvError) as bad:
            slurm_tasks({**TASK_1, **change})
        assert words in str(bad.value)


def test_launcher_settings_a_unit_cannot_run_as_are_refused_naming_the_key():
    from omegaconf import open_dict

    from harness.config.compose import compose
    from harness.integrations.ranks.slurm_tasks import launcher_problem

    composed = compose(["hydra/launcher=slurm"], return_hydra_config=True)  # once: each case changes a copy

    def problem(launcher=None, **keys):
        cfg = composed.copy()
        with open_dict(cfg):
            cfg.hydra.launcher.update(launcher or {})
            for key, value in keys.items():
                cfg.train[key] = value
        return launcher_problem(cfg)

    two = {"tasks_per_node": 2}
    assert problem() is None and problem(two) is None
    assert "train.nproc=2 is set with hydra.launcher.nodes x hydra.launcher.tasks_per_node = 2" in problem(two, nproc=2)
    assert "train.cmd is set with hydra.launcher.nodes x hydra.launcher.tasks_per_node = 4" in problem(
        {"nodes": 2, **two}, cmd="python x.py")
    assert "hydra.launcher.tasks_per_node=0 is not allowed: give an integer >= 1" in problem({"tasks_per_node": 0})
    local = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"
    assert "only SLURM's launcher" in problem({"_target_": local, **two})


def test_more_tasks_on_a_node_than_its_gpus_are_refused_in_the_job():
    from omegaconf import OmegaConf

    from harness.integrations.ranks.slurm_tasks import tasks_problem

    cfg = OmegaConf.create({"train": {"nproc": 1, "cmd": None}, "device": "cuda"})
    said = tasks_problem(cfg, 4, local_size=2, gpus=1)
    assert "4 SLURM tasks on a GPU, 2 on this node" in said and "hydra.launcher.gpus_per_node >=" in said
    assert tasks_problem(cfg, 4, local_size=2, gpus=2) is None and tasks_problem(cfg, 4, local_size=2) is None


@pytest.mark.slow
def test_a_sweep_of_two_task_jobs_with_train_nproc_2_is_refused_before_any_job(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "--config-dir", str(TEST_CONF), "+experiment=command_toy", "train.cmd=null", "train.args={}",
                    "train.metrics_from=null", "train.fn=tests.nproc_fns.tiny_ddp", "logger=none", "seed=0,1",
                    "hydra/launcher=slurm", "hydra.launcher.tasks_per_node=2", "train.nproc=2", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 2, proc.stderr[-2000:]
    said = " ".join(proc.stderr.split())
    assert "train.nproc=2 is set with hydra.launcher.nodes x hydra.launcher.tasks_per_node = 2" in said, said
    assert "Traceback" not in proc.stderr and not sweep.exists()  # no sbatch, nothing written
