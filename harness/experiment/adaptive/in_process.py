"""The adaptive loop in one process: the sequential mode and the race without ``-m``.

``python -m harness +experiment=loss_ab ab.sequential.enabled=true stats.margin=0.3``
``python -m harness +experiment=loss_ab ab.race.enabled=true stats.margin=1.0``

The launcher here runs each batch with ``harness.experiment.units.run_plan``, the plan narrowed to
each seed (``seed=S``, and ``arm=A`` once an arm has stopped: ``Plan.narrow``), the units a sweep's
jobs run; or, with workers, side by side (side_by_side.py). The loop and its rules are loop.py's;
the Hydra sweepers (hydra_plugins/harness_sweeper) run the same loop with jobs on any launcher.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from harness.experiment.adaptive.identity_watch import IdentityWatch, refresh
from harness.experiment.adaptive.loop import run_loop
from harness.experiment.plan import ALL_DONE, Plan
from harness.experiment.units import Outcome, run_plan
from harness.results import write_json


class InProcessLauncher:
    """Runs a batch's (seed, arm) units in this process (or on its workers), as run_experiment runs
    a sweep's job (its preflight made once, at the entry). A run that fails writes its result file,
    so no failure here goes unrecorded."""

    stall_hint = "the result files of the last batch cannot be read (see the log)."

    def __init__(self, plan: Plan, name: str, every: list, *, tracker=None, pool=None):
        self.plan, self.name, self.every, self.tracker, self.pool = plan, name, every, tracker, pool
        self.certify = plan.certify  # one certificate per invocation, from the first batch that runs
        self.results, self.skipped, self.failed, self.cert = [], [], [], None
        self.unrecorded: list = []

    def launch(self, units: list, words: str, say: Callable[[str], None], loaded: list) -> None:
        say(f"{self.name}: next batch, {words}")
        seeds = list(dict.fromkeys(s for s, _ in units))
        whole = {s for s in seeds if {a for t, a in units if t == s} >= set(self.every)}
        if len(whole) == len(seeds):  # seed by seed, every arm of a seed before the next seed
            units = [(s, None) for s in seeds]
        if self.pool is not None:
            outcome = self._side_by_side(units, say)
        else:
            for seed, arm in units:
                unit = replace(self.plan.narrow(seed, arm), certify=self.certify, certificate_dir=self.plan.out_dir)
                if unit.all_done():
                    say(ALL_DONE)
                self._add(run_plan(unit, log=say, tracker=self.tracker))
            return
        self._add(outcome)

    def _add(self, outcome) -> None:
        self.certify = False
        self.cert = outcome.certificate or self.cert
        self.results += outcome.results
        self.skipped += outcome.skipped
        self.failed += outcome.failed

    def _side_by_side(self, units, say) -> Outcome:
        """One batch's units on the workers: each unit exactly as run_plan(plan.narrow(seed, arm)) runs
        it in this process (the same config, so the same result files), without a preflight per unit."""
        from harness.experiment.parallel.side_by_side import certify_with, run_units

        todo = []
        for seed, arm in units:
            sub = self.plan.narrow(seed, arm)
            todo += [(seed, name, sub.arms[name]) for name in sub.arm_names]
        outcome = run_units(todo, self.plan, self.pool, log=say, tracker=self.tracker)
        if self.certify:
            outcome.certificate, kept = certify_with(self.pool, self.plan.arms, outcome.results, self.plan.out_dir, say)
            outcome.certified_now = outcome.certificate is not None and not kept
        return outcome

    def outcome(self) -> Outcome:
        return Outcome(self.plan.out_dir, self.results, self.skipped, self.failed, self.cert)


def run_sequential(plan: Plan, declaration, *, say: Callable[[str], None] = print, tracker=None,
                   show_table: bool = True, pool=None):
    """The sequential mode (the entry made the preflight); returns units.Executed (outcome over every
    batch, the final analysis). ``pool`` (workers.Workers): each batch's units side by side in its
    workers, else one by one."""
    from harness.experiment.adaptive.sequential_policy import SequentialPolicy, prepare
    from harness.experiment.units import Executed

    out_dir = plan.out_dir
    design, baseline, arms = prepare(declaration, out_dir)

    def experiment_json(loaded):  # run_plan wrote the last batch's seeds; say which seeds the folder holds
        if loaded:
            seeds = sorted({r["seed"] for r in loaded if isinstance(r.get("seed"), int)})
            write_json(out_dir / "experiment.json", {
                "experiment": plan.experiment, "factor": plan.factor, "arms": plan.declared_arms,
                "seeds": seeds, "sequential": True, "config": plan.record,
            })

    policy = SequentialPolicy(design, declaration, out_dir, baseline=baseline, arms=arms, seeds=list(plan.all_seeds),
                              budget=plan.max_failures, on_write=experiment_json)
    say(policy.describe())
    refresh(plan.arms, out_dir, say)
    watch = IdentityWatch(plan.arms)  # from here on, a changed config or code stops the run
    launcher = InProcessLauncher(plan, "sequential", policy.all_arms(), tracker=tracker, pool=pool)
    ended = run_loop(policy, launcher, out_dir, watch, say)
    outcome = launcher.outcome()
    if ended.identity:
        return Executed(outcome, None, f"sequential run stopped: {ended.identity}")
    if not show_table:  # the verdict screen leads with the decisions: said once
        policy.decisions(ended.block, say)
    analysis, error = policy.analyse(ended.block, show_table=show_table, tables=plan.tables)
    if error is not None:
        return Executed(outcome, None, f"no analysis: {error} The result files are in {out_dir / 'runs'}."
                        + _stopped(ended, "sequential run"))
    if tracker is not None:
        tracker.log_analysis(analysis, out_dir)
    say(f"results: {out_dir}  (analysis.json, report.md, analysis.png, sequential.json, sequential.png)")
    if ended.plan.stopped:
        return Executed(outcome, analysis, f"sequential run stopped unsettled: {ended.plan.stopped}")
    return Executed(outcome, analysis)


def run_race(plan: Plan, declaration, race: dict, *, say: Callable[[str], None] = print, tracker=None,
             pool=None, ledger=None):
    """The race of the declaration's arms in this process (the entry made the preflight); returns
    units.Executed with the race's analysis (race_report.py)."""
    from harness.experiment.adaptive.race_policy import RacePolicy, prepare
    from harness.experiment.adaptive.race_report import RaceAnalysisError
    from harness.experiment.units import Executed

    out_dir = plan.out_dir
    design = prepare(declaration, race, out_dir)
    policy = RacePolicy(design, out_dir, seeds=list(plan.all_seeds))
    say(policy.describe())
    refresh(plan.arms, out_dir, say)
    watch = IdentityWatch(plan.arms, what="race")  # from here on, a changed config or code stops the race
    launcher = InProcessLauncher(plan, "race", policy.all_arms(), tracker=tracker, pool=pool)
    ended = run_loop(policy, launcher, out_dir, watch, say)
    outcome = launcher.outcome()
    if ended.identity:
        return Executed(outcome, None, f"race stopped: {ended.identity}")
    try:
        analysis = policy.analyse(ledger)
    except RaceAnalysisError as e:
        return Executed(outcome, None, f"no analysis: {e} The result files are in {out_dir / 'runs'}."
                        + _stopped(ended, "race"))
    if tracker is not None:
        tracker.log_race(analysis, out_dir)
    say(policy.verdict_words(ended.block, out_dir))
    if ended.plan.stopped:
        return Executed(outcome, analysis, f"race stopped unsettled: {ended.plan.stopped}")
    return Executed(outcome, analysis)


def _stopped(ended, what: str) -> str:
    return f" Also, the {what} stopped unsettled: {ended.plan.stopped}" if ended.plan.stopped else ""
