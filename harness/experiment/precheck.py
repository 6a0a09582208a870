"""Hydra callbacks that run before any job: a writable output folder, and every job's config.

Hydra itself writes ``.hydra/`` and the log into the output folder before our task function runs,
and a sweep launches its jobs before any of them can look at the others; so these checks live in
``on_run_start`` / ``on_multirun_start``, which Hydra calls first. A problem prints one paragraph
and exits with status 2 (SystemExit passes through Hydra's callback wrapper; other exceptions would
become warnings). Nothing has been written then.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


def _refuse(message: str) -> None:
    print(f"\nharness: error: {message}\n", file=sys.stderr)
    raise SystemExit(2)


def check_writable(folder: Path) -> None:
    """Refuse a folder (or its nearest existing parent) that this process cannot write into."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        finished = (folder / "runs").is_dir()
        _refuse(
            f"cannot write into {probe} (read-only or not yours), so nothing was run. "
            + (f"The results already there are intact and can be analysed without writing: "
               f"python -m harness.analyze {folder} --no-write. " if finished else "")
            + "Choose a writable output folder with hydra.run.dir=DIR (a sweep: hydra.sweep.dir=DIR)."
        )


def job_overrides(config: DictConfig) -> list[list[str]]:
    """Every job's overrides in a sweep, as Hydra's basic sweeper would expand them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def check_job(job_cfg: DictConfig, multirun: bool = True) -> None:
    """arm_configs (factor, arms, seed, arm) and the preflight, as the job itself will run them; and
    what a sweep's job would refuse only once launched (ab.conditions, which run in one process)."""
    from omegaconf import open_dict

    from harness.experiment.conditions import refuse_narrowed
    from harness.experiment.arms import ExperimentError, arm_configs
    from harness.config.preflight import PreflightError, preflight

    job_cfg = job_cfg.copy()
    with open_dict(job_cfg):
        job_cfg.pop("hydra", None)  # the job's own config, as its task function will get it
    if job_cfg.ab.get("conditions"):
        refuse_narrowed(multirun=multirun, narrowed=job_cfg.seed is not None or job_cfg.arm is not None)
    code_arms = multirun and (job_cfg.ab.get("factor") == "code" or job_cfg.get("code") is not None)
    if code_arms:
        from harness.experiment.code_arms import prepare

        prepare(job_cfg, None, multirun=True)  # only the arms the launcher read (on_multirun_start)
    arms = arm_configs(job_cfg)
    try:
        from harness.experiment.code_arms import preflight_each

        if not (code_arms and preflight_each(job_cfg, arms, preflight, PreflightError)):  # each in its snapshot
            preflight(job_cfg, arms)
    except PreflightError as e:
        raise ExperimentError(str(e)) from None


def run_dir(config: DictConfig) -> Path:
    """hydra.run.dir of a single run's config, before Hydra's run_job has set HydraConfig.

    The shipped run.dir interpolates ``${hydra:job.override_dirname}``, and the ``hydra:`` resolver
    reads HydraConfig, which Hydra sets only after on_run_start. It is set here for the lookup
    (as run_job will set it) and the previous one put back.
    """
    from hydra.core.hydra_config import HydraConfig

    instance = HydraConfig.instance()
    before, readonly = instance.cfg, config.hydra._get_node_flag("readonly")
    try:
        instance.set_config(config)
        return Path(str(config.hydra.run.dir))
    finally:
        instance.cfg = before
        OmegaConf.set_readonly(config.hydra, readonly)


# The jobs (sorted overrides) whose config on_multirun_start composed here, against which master config:
# the harness's plain sweeper skips Hydra's second composition of them (validate_batch_is_legal), which
# would only find again that they compose (about a third of a second per job).
COMPOSED: dict = {"config": None, "jobs": set()}


def composed_already(config: DictConfig, batch) -> bool:
    """Whether on_multirun_start composed every job of this batch from this master config."""
    return COMPOSED["config"] is config and all(tuple(sorted(job)) in COMPOSED["jobs"] for job in batch)


def check_ledger(config: DictConfig) -> None:
    """The ledger's address (harness/config/ledger_spec.py) before Hydra writes the config anywhere:
    a password in ledger.url would be in .hydra/ and the folder's name the moment it did."""
    from harness.config.ledger_spec import ledger_problem

    problem = ledger_problem(config.get("ledger"))
    if problem:
        _refuse(f"{problem} Nothing was run.")


def check_launcher(config: DictConfig, where: str = "") -> None:
    """A SLURM launcher's nodes x tasks_per_node with the units they would run as ranks
    (integrations/ranks/slurm_tasks.py), before any job is submitted."""
    from harness.integrations.ranks.slurm_tasks import launcher_problem

    problem = launcher_problem(config)
    if problem:
        _refuse(f"{where}{problem}")


class CheckBeforeRuns(Callback):
    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        from harness.experiment.refused_files import note_run_start
        from harness.integrations.command_spec import config_cmd_problem

        check_ledger(config)
        folder = run_dir(config)
        problem = config_cmd_problem(config.get("train"), OmegaConf.select(config, "ab.factor", default=None,
                                                                            throw_on_resolution_failure=False))
        # (before Hydra writes .hydra/ and the log)
        if problem:
            _refuse(problem + " Nothing was run.")
        check_writable(folder)
        # Hydra creates the folder next (.hydra/, the log), or rewrites them in a folder that exists:
        # a refusal before any unit removes the new folder or puts the old files back (app.refuse)
        note_run_start(folder, config.hydra.output_subdir)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from hydra.core.global_hydra import GlobalHydra

        from harness.experiment.execute import CURRENT
        from harness.config import factor_override_problem, replace_whole_arms
        from harness.config.ledger_spec import shown
        from harness.experiment.arms import ExperimentError

        check_ledger(config)  # the sweep's own; a job's (a swept ledger.url) by check_job's preflight below
        check_launcher(config)  # SLURM tasks as ranks; a job's own train.nproc / train.cmd in the loop below
        CURRENT["folder"] = Path(config.hydra.sweep.dir)  # for the Ctrl-C message in this process
        check_writable(Path(config.hydra.sweep.dir))
        code_arms = _code_arms_of(config)  # ab.factor=code: the revisions read once, here, for every job
        if str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
            loader = GlobalHydra.instance().config_loader()
            checked = set()
            COMPOSED.update(config=config, jobs=set())
            for overrides in job_overrides(config):
                key = tuple(sorted(overrides))
                if key in checked:
                    continue
                checked.add(key)
                try:
                    job = loader.load_sweep_config(config, list(overrides))
                    replace_whole_arms(job, overrides)
                    problem = factor_override_problem(job, overrides)
                    if problem:
                        raise ExperimentError(problem)
                    check_launcher(job, f"the sweep's job {' '.join(overrides)}: ")
                    check_job(job)
                    COMPOSED["jobs"].add(key)
                except ExperimentError as e:
                    _refuse(shown(f"the sweep's job {' '.join(overrides)}: {e} No job was launched."))
        if code_arms:
            code_arms.publish(config.hydra.sweep.dir)


def _code_arms_of(config: DictConfig):
    """ab.factor=code in a sweep: each arm's revision read and staged now, in the launching process,
    and said; the code_arms module (its publish writes them into the sweep's folder once the jobs'
    configs pass), or None for another factor. A problem is refused before any job."""
    if OmegaConf.select(config, "ab.factor", default=None, throw_on_resolution_failure=False) != "code":
        return None
    from omegaconf import open_dict

    from harness.experiment import code_arms

    job_cfg = config.copy()
    with open_dict(job_cfg):
        job_cfg.pop("hydra", None)
    try:
        for line in code_arms.prepare(job_cfg, Path(config.hydra.sweep.dir)):
            print(line, file=sys.stderr)
    except code_arms.CodeArmError as e:
        _refuse(f"{e} No job was launched.")
    return code_arms
