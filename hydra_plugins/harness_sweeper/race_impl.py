"""The race sweeper's loop: launch a batch of (seed, configuration) jobs, read the result files, drop.

The sequential sweeper's pattern (_impl.py): every batch goes through ``self.launcher.launch`` (any
launcher), job folders numbered on from the highest one, a job's status read and never its return
value; between batches harness.experiment.adaptive.race_plan replays the race from the result files under
the sweep folder, so a killed race run again with the same command reaches the same decisions.

The configurations are the experiment's arms, or the values of ONE swept key
(``optim.lr=0.01,0.03,0.1``), which become arms named ``lr_0.01`` ... placed at that key
(``ab.factor=optim.lr``): every job is then an ordinary harness run ``seed=S arm=NAME`` with the
same bits as in a plain sweep. A job's folder is ``<race folder>/seed=S,arm=NAME``: the race folder
(hydra.sweep.dir) is named by the command's overrides already, so the job's overrides (every
configuration's value among them) are left out of it, and a name is at most 48 characters: long
values or values with slashes make valid folders.

Between batches an IdentityWatch (harness/experiment/adaptive/identity_watch.py, as in the sequential
sweeper) holds the race to one config and code: a training file edited after the first batch stops
the race with the files named, race.json records the looks as they stood, and nothing is analysed.
At the end, harness.experiment.adaptive.race_report.analyze_race writes analysis.json, report.md and race.png (what
``python -m harness.analyze`` reproduces) and wandb gets the table of drops.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any, List

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, flag_override

from ._impl import SequentialSweeperImpl, _fail

log = logging.getLogger("harness")

_CHOSEN_BY_SWEEPER = ("seed", "arm", "ab.seeds")


_NAME_MAX = 48  # an arm name names folders (job, runs/seed=S/arm=NAME) and wandb runs


def arm_name(key: str, text: str) -> str:
    """``optim.lr`` and ``0.01`` -> ``lr_0.01`` (an arm name: no '/', '=', ',' or spaces). A value
    changed by that, or too long for a name, ends in 8 hex digits of its text so names stay distinct."""
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", text.strip())
    name = f"{key.split('.')[-1]}_{clean}"
    if clean == text.strip() and len(name) <= _NAME_MAX:
        return name
    return f"{name[:_NAME_MAX - 9]}_{hashlib.sha1(text.strip().encode()).hexdigest()[:8]}"


class RaceSweeperImpl(SequentialSweeperImpl):
    def sweep(self, arguments: List[str]) -> Any:
        import harness  # noqa: F401 - CUBLAS_WORKSPACE_CONFIG before torch
        from harness.config.declaration import Declaration
        from harness.config.metric_spec import DeclarationError
        from harness.config.preflight import PreflightError, preflight
        from harness.experiment.adaptive import race_plan as rp
        from harness.experiment.adaptive.race_report import analyze_race, look_drops
        from harness.experiment.adaptive.sequential import IdentityWatch, refresh
        from harness.experiment.arms import arm_configs
        from harness.results import load_tree, read_json, write_json

        base, extra = self._configurations(arguments)
        cfg = self._task_config_with(extra)
        root = Path(str(self.config.hydra.sweep.dir))
        try:
            declaration = Declaration.from_config(cfg)
            if declaration.fdr:  # a race decides by intervals, with no p-value: no online FDR test to take
                _fail(f"stats.fdr.method={declaration.fdr['method']} takes a test level from the ledger, but a race "
                      "decides by intervals (no p-value to test at it). Run the race with stats.fdr.method=none.", 2)
            design = rp.design_of(declaration, OmegaConf.to_container(cfg.ab.race))
            arm_cfgs = arm_configs(cfg)
            preflight(cfg, arm_cfgs)
        except (DeclarationError, ValueError, PreflightError) as e:
            _fail(str(e), 2)
        if (root / rp.RACE_NAME).is_file():
            problem = rp.stored_design_problem(read_json(root / rp.RACE_NAME), design, root)
            if problem:
                _fail(problem, 2)
        root.mkdir(parents=True, exist_ok=True)
        declaration.write(root)
        OmegaConf.save(self.config, root / "multirun.yaml")
        refresh(arm_cfgs, root, say=log.info)
        self._rerun_lost(root)  # units whose job died in an earlier race run again (_lost_units.py)
        watch = IdentityWatch(arm_cfgs, what="race")  # from here on, a changed config or code stops the race
        log.info(f"race: {len(design.configs)} configurations ({', '.join(design.configs)}), looks at "
                 f"{', '.join(map(str, design.looks))} seeds, margin {design.margin:g}, alpha {design.alpha:g}")

        idx = self._next_job_idx(root)
        returns, job_failures, lost, last, p = [], [], [], None, None
        looks_said, diverged_said = 0, 0
        folder = self._job_folder_overrides(base + extra, root)
        while True:
            loaded = load_tree(root).results
            changed = watch.problem(loaded, root)
            if changed:  # no look at results of two identities: the looks as they stood, no analysis
                if p is None:
                    p = rp.plan(design, watch.consistent(loaded), seeds=list(cfg.ab.seeds))
                p.stopped, p.batch_seeds, p.batch_configs = changed, [], []
                write_json(root / rp.RACE_NAME, rp.record(design, p, status="stopped", runs=len(loaded)))
                _fail(f"race stopped: {changed}", 1)
            p = rp.plan(design, loaded, seeds=list(cfg.ab.seeds))
            if last is not None and len(loaded) <= last and not p.done and not p.stopped:
                p.stopped = (f"the last batch's jobs completed but left no new result file under {root}"
                             + (f" ({'; '.join(job_failures[-3:])})" if job_failures else "")
                             + "; check the jobs' logs (a job folder per job).")
            last = len(loaded)
            write_json(root / rp.RACE_NAME, rp.record(design, p, status="running", runs=len(loaded)))
            for x in p.looks[looks_said:]:  # each look once, with every configuration it dropped
                log.info(f"race look {x['look']} at {x['n']} seeds: " + ", ".join(
                    f"{c} {m:.4g}" for c, m in x["means"].items()) + "".join(f"; dropped {d}" for d in look_drops(x)))
            looks_said = len(p.looks)
            in_looks = sum(len(x.get("diverged") or []) for x in p.looks)
            for d in p.diverged[max(in_looks, diverged_said):]:  # after the last look (the race may end there)
                log.info(f"race: dropped {d['config']} (diverged at seed {d['seed']}: {d['reason']})")
            diverged_said = len(p.diverged)
            if p.stopped or p.done:
                break
            jobs = [base + extra + folder + [f"seed={s}", f"arm={c}"] for s in p.batch_seeds for c in p.batch_configs]
            log.info(f"race: batch of {len(jobs)} job(s), seeds {', '.join(map(str, p.batch_seeds))} for "
                     f"{', '.join(p.batch_configs)}")
            idx = self._launch_batch(jobs, idx, root, returns, job_failures, lost)

        block = rp.record(design, p, status=rp.final_status(p), runs=len(loaded))
        write_json(root / rp.RACE_NAME, block)
        analysis = analyze_race(root, ledger=cfg.get("ledger"))
        self._track(cfg, root, analysis)
        log.info(f"race: {block['verdict']} Seeds spent {block['seeds_spent']} of {block['seeds_all_to_max']} "
                 f"(all to the maximum). results: {root} (analysis.json, report.md, race.png, race.json)")
        died = (f"some units failed because their job died: {'; '.join(lost)}. Run the same command again to "
                "resume: they run again.") if lost else ""
        if p.stopped:
            _fail(f"race stopped unsettled: {p.stopped}" + (f" Also, {died}" if died else ""), 1)
        if died:
            _fail(died, 1)
        return returns

    def _job_folder_overrides(self, overrides: List[str], root: Path) -> List[str]:
        """``<race folder>/seed=S,arm=NAME``: every key of the job's overrides is left out of its folder
        name (the arms' override holds every configuration's value), and the race folder is given, not
        interpolated again from each job's overrides."""
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        keys = list(self.config.hydra.job.config.override_dirname.exclude_keys)
        keys += [o.key_or_group for o in parser.parse_overrides(overrides) if o.key_or_group not in keys]
        return ["hydra.job.config.override_dirname.exclude_keys=[" + ",".join(f"'{k}'" for k in keys) + "]",
                f"hydra.sweep.dir='{root}'"]

    @staticmethod
    def _track(cfg, root: Path, analysis: dict) -> None:
        """The race's table of drops in wandb; closing the tracker prints the sweep's sync hint."""
        from harness.tracking.tracker import open_tracker
        from harness.tracking.options import TrackingConfigError

        try:
            tracker = open_tracker(cfg, root, sweep_root=root)
        except TrackingConfigError as e:
            log.error(f"harness: error: {e}")
            return
        tracker.log_race(analysis, root)
        for w in tracker.close():
            log.warning(w)

    # -- the configurations -------------------------------------------------------------------

    def _configurations(self, arguments: List[str]):
        """(the plain overrides, the overrides that make one swept key the arms)."""
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        plain, swept = [], []
        for o in parser.parse_overrides(arguments):
            key = o.get_key_element().lstrip("+~")
            if key in _CHOSEN_BY_SWEEPER:
                _fail(f"{o.input_line}: the race sweeper chooses the seeds and configurations itself (ab.seeds sets "
                      f"the order of seeds; ab.race.* the looks); drop this override.", 2)
            (swept if o.is_sweep_override() else plain).append(o)
        if not swept:
            return [o.input_line for o in plain], []
        if len(swept) > 1:
            _fail(f"{', '.join(o.input_line for o in swept)}: the race sweeper races the values of ONE key "
                  f"(optim.lr=0.01,0.03,0.1); for configurations that differ in several keys declare them as "
                  f"arms (ab.factor=<a node>, ab.arms.NAME={{...}}) or race one key at a time.", 2)
        o = swept[0]
        key = o.get_key_element().lstrip("+~")
        clash = [x.input_line for x in plain if x.get_key_element().lstrip("+~").split(".")[:2] in (["ab", "arms"],
                                                                                                 ["ab", "factor"])]
        if clash or o.is_sweep_override() and not o.is_discrete_sweep():
            _fail(f"{o.input_line}: the swept values of {key} become the race's configurations "
                  + (f"and replace the arms, so {', '.join(clash)} cannot be given with it; drop it."
                     if clash else "and must be a list of values (a,b,c), not a range or interval."), 2)
        texts = list(o.sweep_string_iterator())
        names = [arm_name(key, t) for t in texts]
        if len(set(names)) != len(names):
            _fail(f"{o.input_line}: two values give the same configuration name ({', '.join(names)}); give each "
                  f"value once.", 2)
        arms = "{" + ", ".join(f"{n}: {t}" for n, t in zip(names, texts)) + "}"
        return [x.input_line for x in plain], [f"ab.factor={key}", f"++ab.arms={arms}"]

    def _task_config_with(self, extra: List[str]) -> DictConfig:
        """The config a job gets (without seed and arm), the swept key turned into the arms."""
        import copy

        from harness.config import replace_whole_arms

        cfg = copy.deepcopy(self.config)
        with flag_override(cfg, ["struct", "readonly"], [False, False]):
            del cfg["hydra"]
            if extra:
                cfg.ab.factor = extra[0].split("=", 1)[1]
        replace_whole_arms(cfg, list(self.config.hydra.overrides.task) + extra[1:])
        return cfg
