"""What one invocation runs, read from the composed config once: the ``Plan``.

The declaration (harness/config/declaration.py) says what is analysed; the plan says what is run:
which seeds and arms (narrowed by ``seed=``/``arm=``), each arm's config, where, and how (resume,
progress, workers, the certificate, the lock timeout, the sequential failure budget). The entry
points (execute, units.run_experiment called with a config, a sweeper) make both from the config;
everything below takes them, so a setting is read in one place and means one thing. An arm's config
is the training function's contract (``train.fn(cfg, run)``): it travels, read-only, to the unit
runner and the training code only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig, OmegaConf

from harness.experiment.arms import ExperimentError, arm_configs, factor_value, resolve_arms
from harness.experiment.identity import plain

ALL_DONE = "every run is done with this config and code: nothing to check or train"


@dataclass(frozen=True)
class Plan:
    out_dir: Path
    experiment: str
    factor: str
    seeds: tuple  # the seeds this invocation runs (narrowed by seed=)
    arm_names: tuple  # the arms it runs (narrowed by arm=)
    arms: dict = field(repr=False)  # every arm's config, read-only
    all_seeds: tuple = ()  # ab.seeds: the order of seeds (the sequential looks)
    seed: Optional[int] = None  # seed= / arm=, when narrowed
    arm: Optional[str] = None
    multirun: bool = False
    resume: bool = True
    progress: bool = False
    tables: bool = False
    workers: int = 1
    threads: int = 1
    certify: bool = False
    certificate_dir: Optional[Path] = None
    lock_timeout: Optional[float] = None
    max_failures: int = 0  # ab.sequential.max_failures
    modules: tuple = ()  # the training function's and components' modules (a worker imports them first)
    declared_arms: dict = field(default_factory=dict, repr=False)  # ab.arms as given (a sequential experiment.json)
    record: dict = field(default_factory=dict, repr=False)  # the plain config, for experiment.json
    # each arm's config before its interpolations resolve: a narrowed unit resolves its own (narrow)
    arm_sources: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_config(cls, cfg: DictConfig, out_dir, *, sweep_root=None, multirun: bool = False,
                    certify: Optional[bool] = None, certificate_dir=None) -> "Plan":
        """Read ``cfg`` (threads already resolved into it) once. ``certify`` and ``certificate_dir``
        default to repro.certificate (in a sweep, the job of the first unit) and ``sweep_root``.
        Raises ExperimentError for arms that cannot be made (arms.py)."""
        sources: dict = {}
        arms = _read_only(arm_configs(cfg, sources=sources))
        out_dir = Path(out_dir)
        if certify is None:
            certify = bool(cfg.repro.certificate) and _owns_certificate(cfg)
        return cls(
            out_dir=out_dir, experiment=cfg.experiment_name, factor=cfg.ab.factor,
            seeds=(cfg.seed,) if cfg.seed is not None else tuple(cfg.ab.seeds),
            arm_names=(cfg.arm,) if cfg.arm is not None else tuple(arms),
            arms=arms, all_seeds=tuple(cfg.ab.seeds), seed=cfg.seed, arm=cfg.arm, multirun=multirun,
            resume=bool(cfg.resume), progress=bool(cfg.progress), tables=bool(cfg.tables),
            workers=int(cfg.get("workers") or 1), threads=cfg.determinism.threads, certify=bool(certify),
            certificate_dir=Path(certificate_dir or sweep_root or out_dir), lock_timeout=cfg.get("lock_timeout"),
            max_failures=int(cfg.ab.sequential.max_failures),
            modules=modules_of(arms), declared_arms={str(k): _arm_value(v) for k, v in cfg.ab.arms.items()},
            record=plain(cfg), arm_sources=sources,
        )

    @property
    def narrowed(self) -> bool:
        """One unit of a sweep (seed= or arm=): the sweep analyses the whole."""
        return self.seed is not None or self.arm is not None

    def narrow(self, seed: int, arm: Optional[str] = None) -> "Plan":
        """This plan narrowed to one seed (and one arm), as a sweep job is (adaptive/sequential.py's units):
        each arm's config resolved now, with the seed, as the job's would be. ab.seeds stays as given.
        Raises ExperimentError as arm_configs does."""
        arms = _read_only(resolve_arms(self.arm_sources, self.factor, seed))
        record = {**self.record, "seed": int(seed), "arm": arm}
        return replace(self, seeds=(int(seed),), arm_names=(arm,) if arm is not None else tuple(arms), arms=arms,
                       seed=int(seed), arm=arm, record=record)

    def described(self) -> dict:
        """experiment.json: what was run, in whose words."""
        return {"experiment": self.experiment, "factor": self.factor,
                "arms": {k: factor_value(v, self.factor) for k, v in self.arms.items()},
                "seeds": list(self.seeds), "config": self.record}

    def all_done(self) -> bool:
        """Whether resume would skip every unit: then the config already ran as it is, and preflight's
        torch import, data load and component builds (seconds) would check nothing new."""
        from harness.experiment.identity import config_hash
        from harness.experiment.resume import decide
        from harness.experiment.runner import code_of
        from harness.results import RESULT_NAME, run_dir

        return self.resume and all(
            decide(run_dir(self.out_dir, s, a) / RESULT_NAME, config_hash(self.arms[a]), code_of(self.arms[a]), s, a).skip
            for s in self.seeds for a in self.arm_names)


def preflight_or_refuse(cfg: DictConfig, arms: dict) -> None:
    """The preflight of every value, import and the data (harness/config/preflight.py): it reads the
    whole config, so the entry points call it. Raises ExperimentError."""
    from harness.config.preflight import PreflightError, preflight
    from harness.experiment.code_arms import preflight_each

    if preflight_each(cfg, arms, preflight, PreflightError):  # ab.factor=code: each arm in its own snapshot
        return
    try:
        preflight(cfg, arms)
    except PreflightError as e:
        raise ExperimentError(str(e)) from None


def check_unless_done(cfg: DictConfig, plan: Plan, log: Callable[[str], None],
                      before_preflight: Optional[Callable[[int], None]] = None) -> None:
    """The preflight, unless every unit of ``plan`` is done (said instead); ``before_preflight(units)``
    first (the workers' imports overlap it)."""
    if plan.all_done():
        log(ALL_DONE)
        return
    if before_preflight is not None:
        before_preflight(len(plan.seeds) * len(plan.arm_names))
    preflight_or_refuse(cfg, plan.arms)


def modules_of(arms: dict) -> tuple:
    """What a worker imports before its first unit: torch, unless every arm is a command on the CPU
    (command_run.py), then the modules of the training function and of every component's _target_,
    over every arm (a command arm's: its own module alone, the script building its data and model)."""
    from harness.integrations.command_run import runs_without_torch
    from harness.integrations.command_spec import is_command, training_fn
    from harness.training.components import targets

    names = [n for a in arms.values() for n in (training_fn(a), *([] if is_command(a) else targets(a)))]
    torch = () if all(runs_without_torch(a) for a in arms.values()) else ("torch",)
    return tuple(dict.fromkeys([*torch, *(n.rsplit(".", 1)[0] for n in names if "." in n)]))


def _owns_certificate(cfg: DictConfig) -> bool:
    """Within a sweep, the job that runs the first seed's first arm reruns it for the certificate."""
    first_seed = cfg.ab.seeds[0] if len(cfg.ab.seeds) else None
    first_arm = next(iter(cfg.ab.arms), None)
    return (cfg.seed is None or cfg.seed == first_seed) and (cfg.arm is None or cfg.arm == first_arm)


def _read_only(arms: dict) -> dict:
    for a in arms.values():
        OmegaConf.set_readonly(a, True)  # the training function's contract: read, never changed
    return arms


def _arm_value(v):
    return OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else getattr(v, "value", v)
