"""One A/B under several declared conditions (``ab.conditions``): every (condition, seed, arm) unit.

A condition is a list of config overrides added to the ones that composed the experiment, with the
same arms and seeds (``{digits: [data=digits], synthetic: [data=synthetic]}``). Every condition's
config is composed and checked before the first run, so an unknown key or value is refused naming
``ab.conditions.NAME`` with nothing run. Each condition runs into its own folder, ``condition=NAME/``,
exactly as the plain A/B with those overrides would: ``ab.conditions`` is dropped from its config, so
its identity (and resume) is that run's. Each is analysed there as a plain A/B; then the declared
primary claim, the average across conditions (analysis/conditions.py), is written at the root.

In one process only: a multirun sweep of the same conditions is a grid over their overrides
(``-m data=digits,synthetic``), whose grid.md/grid.json carry the same across-conditions block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

from omegaconf import DictConfig, open_dict

from harness.experiment.units import Executed, Outcome, run_plan
from harness.experiment.arms import ExperimentError, arm_configs
from harness.training.threads import is_auto


def _key(override: str) -> str:
    return str(override).split("=", 1)[0].lstrip("+~")


def _compose(overrides: list, config_dirs: Sequence) -> DictConfig:
    """As ``python -m harness`` composes: inside the running Hydra app with its search path (and
    --config-dir), else through harness.config.compose."""
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        from hydra import compose

        return compose(config_name="config", overrides=overrides)
    from harness.config import compose

    return compose(overrides, config_dirs=config_dirs)


def given_overrides(overrides: Optional[Sequence[str]]) -> list:
    """The overrides that composed the experiment: given, or the running Hydra app's."""
    if overrides is not None:
        return list(overrides)
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return list(HydraConfig.get().overrides.task)
    raise ExperimentError("ab.conditions: each condition is composed from the overrides that composed the "
                          "experiment plus its own; run it with python -m harness, or harness.run(overrides) "
                          "(not with an already composed cfg).")


def condition_configs(cfg: DictConfig, declaration, overrides: Sequence[str], config_dirs: Sequence = ()) -> dict:
    """name -> the condition's composed config, every one checked (arms, values) before any run.
    An entry point: each condition's config is composed here from the overrides (``cfg``, the
    experiment's, gives its seed=, arm= and resolved threads), and becomes its plan when it runs."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from harness.config import compose_error, replace_whole_arms
    from harness.config.preflight import PreflightError, preflight_cheap

    base = [o for o in overrides if not _key(o).startswith("ab.conditions")]
    out = {}
    for name, extra in declaration.conditions.items():
        where = f"ab.conditions.{name}={list(extra)}"
        own = {_key(o) for o in extra}
        chosen = [o for o in base if _key(o) not in own] + list(extra)  # the condition's value wins
        try:
            c = _compose(chosen, config_dirs)
        except (HydraException, OmegaConfBaseException) as e:
            raise ExperimentError(f"{where} does not compose a config: {compose_error(e)} Nothing was run.") from None
        replace_whole_arms(c, chosen)
        with open_dict(c):
            c.ab.conditions = None  # the condition's runs are the plain A/B with its overrides (same identity)
            c.seed, c.arm = cfg.seed, cfg.arm
            if is_auto(c.determinism.threads):
                c.determinism.threads = cfg.determinism.threads  # resolved once, for every condition
            if is_auto(c.get("workers")):
                c.workers = cfg.get("workers")  # resolved with the threads (threads.resolve_threads)
        try:
            preflight_cheap(c)
            arm_configs(c)
        except (PreflightError, ExperimentError) as e:
            raise ExperimentError(f"{where}: {e} Nothing was run.") from None
        out[name] = c
    return out


def refuse_narrowed(*, multirun: bool, narrowed: bool) -> None:
    """Conditions run in one process, whole: not as a sweep's job, nor narrowed to one unit."""
    if multirun or narrowed:
        raise ExperimentError(
            "ab.conditions runs every (condition, seed, arm) in one process: python -m harness +experiment=... "
            "(without -m, seed= or arm=). To spread the conditions over a sweep, sweep their overrides as a grid "
            "instead: python -m harness -m +experiment=loss_ab ab.conditions={} data=digits,synthetic "
            "'seed=range(0,10)'; grid.md and grid.json then carry the same across-conditions block.")


def run_conditions(configs: dict, out_dir: Path, declaration, *, say: Callable[[str], None], tracker,
                   certify: bool, show_table: bool) -> Executed:
    """Run every (condition, seed, arm) not done, analyse each condition, then the average across them.
    ``configs``: condition_configs' (the entry composed them); each config becomes its plan, and every
    plan is checked (the preflight) before anything is written: a refused condition leaves no other run."""
    from harness.analysis.conditions import CONDITION_DIR, analyze_conditions_dir, render_conditions
    from harness.config.declaration import Declaration
    from harness.experiment.plan import ALL_DONE, Plan, preflight_or_refuse

    plans, done = {}, {}
    for name, c in configs.items():  # every condition's preflight before anything is written or run
        folder = out_dir / CONDITION_DIR.format(name)
        plans[name] = Plan.from_config(c, folder, certify=certify, certificate_dir=folder)
        done[name] = plans[name].all_done()
        if not done[name]:
            try:
                preflight_or_refuse(c, plans[name].arms)
            except ExperimentError as e:
                raise ExperimentError(f"ab.conditions.{name}={list(declaration.conditions[name])}: {e}") from None
    declaration.write(out_dir, say=say)
    results, skipped, failed, folders = [], [], [], {}
    for name, c in configs.items():
        folder = out_dir / CONDITION_DIR.format(name)
        say(f"condition {name}: {' '.join(declaration.conditions[name])}")
        Declaration.from_config(c).write(folder, say=say)
        if done[name]:
            say(ALL_DONE)
        outcome = run_plan(plans[name], log=say, tracker=tracker)
        results += outcome.results
        skipped += [(name, *s) for s in outcome.skipped]
        failed += outcome.failed
        folders[name] = folder
    summary, analyses = analyze_conditions_dir(out_dir, ledger=next(iter(configs.values())).get("ledger"))  # as python -m harness.analyze would redo it
    for name, analysis in analyses.items():
        tracker.log_analysis(analysis, folders[name])
    tracker.log_conditions(summary, out_dir)
    if show_table:
        render_conditions(summary)
    say(f"results: {out_dir}  (analysis.json, report.md, analysis.png; each condition's in condition=NAME/)")
    errors = [f"{r['name']}: {r['not_analysed']}" for r in summary["conditions"] if "not_analysed" in r]
    return Executed(Outcome(out_dir, results, skipped, failed), summary,
                    None if analyses else "no condition could be analysed: " + "; ".join(errors))
