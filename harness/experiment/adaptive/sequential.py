"""Sequential mode in one process: run seeds in batches until every comparison is settled.

``python -m harness +experiment=loss_ab ab.sequential.enabled=true stats.margin=0.3``

The loop: validate the design (ab.sequential) and every setting before anything is written; then,
over and over, read the result files, replay the looks (harness.experiment.adaptive.sequential_plan, with the
statistics of harness.stats.sequential), and run the next batch -- the next seeds for the baseline
and every arm still running -- with ``harness.experiment.units.run_plan``, the plan narrowed to each seed
(``seed=S``, and ``arm=A`` once an arm has stopped: ``Plan.narrow``), the units a sweep's jobs run. It stops
when every arm is settled (or past the failure budget), writes ``sequential.json`` (every look of
every arm) and ``sequential.png`` (the running interval against the margin), and analyses the
results with the looks in analysis.json. A killed run continued with the same command skips the
finished runs (run_experiment's resume) and reaches the same looks; a folder that holds a run of
another design is refused. The Hydra sweeper (hydra_plugins/harness_sweeper) does the same with
jobs on any launcher.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from harness.config.sequential_design import baseline_and_arms, design_of
from harness.experiment.adaptive import sequential_plan as sp
from harness.experiment.plan import ALL_DONE, Plan
from harness.experiment.units import Outcome, run_plan
from harness.experiment.arms import ExperimentError
from harness.results import load_tree, read_json, write_json
from harness.experiment.adaptive.identity_watch import IdentityWatch, expected_identity, identity_stop  # noqa: F401
from harness.analysis.render.sequential_figure import write_figure  # noqa: F401 - the sweeper imports it from here


class SequentialConfigError(ExperimentError):
    """ab.sequential (or the folder's stored design) does not allow a run; the message says why."""


def prepare(declaration, where: Path, *, stored: Optional[Path] = None):
    """Validate before any run (the entry made the preflight): the design, a stored design; then
    write the declaration into ``where``.

    Returns (design, baseline, arms). Raises SequentialConfigError.
    """
    try:
        design = design_of(declaration)
    except ValueError as e:
        raise SequentialConfigError(f"{e} Nothing was run.") from None
    baseline, arms = baseline_and_arms(declaration)
    path = stored or where / sp.SEQUENTIAL_NAME
    if path.is_file():
        problem = sp.stored_design_problem(read_json(path), design, declaration.metric, baseline, where)
        if problem:
            raise SequentialConfigError(problem)
    where.mkdir(parents=True, exist_ok=True)
    declaration.write(where)
    return design, baseline, arms


def refresh(arms: dict, root: Path, say: Callable[[str], None] = print) -> int:
    """Move aside results of another config or code than ``arms``' (arm -> config; resume's rule),
    failed ones too.

    The plan reads every result file under root, so this is where a changed config or code makes
    a seed run again; a failed run of the same config and code stays (it counts as a failure).
    """
    from harness.experiment.resume import supersede
    from harness.results import find_result_files

    ident = expected_identity(arms)
    moved = 0
    for path in find_result_files(root) if root.exists() else []:
        try:
            r = read_json(path)
        except (OSError, ValueError):
            continue  # the analysis names unreadable files
        want = ident.get(str(r.get("arm")))
        if want and (r.get("config_hash"), r.get("code_version")) != want:
            dest = supersede(path)
            moved += 1
            say(f"seed={r.get('seed')} arm={r.get('arm')}: result of another config or code moved to {dest}; "
                "it runs again when its seed is reached")
    return moved


def run_sequential(plan: Plan, declaration, *, say: Callable[[str], None] = print, tracker=None,
                   show_table: bool = True, pool=None):
    """The in-process loop (the entry made the preflight); returns app.Executed (outcome over every
    batch, the final analysis). ``pool`` (workers.Workers): each batch's units side by side in its
    workers, else one by one."""
    from harness.experiment.units import Executed

    out_dir, certify = plan.out_dir, plan.certify
    design, baseline, arms = prepare(declaration, out_dir)
    metric = declaration.metric
    budget = plan.max_failures
    say(f"sequential: looks at {_looks(design)} seeds, alpha {design.alpha:g}, margin "
        f"{design.margin if design.margin is not None else 'none (better/worse than 0)'}, {design.spending} spending")

    refresh(plan.arms, out_dir, say)
    watch = IdentityWatch(plan.arms)  # from here on, a changed config or code stops the run
    results, skipped, failed, cert = [], [], [], None
    last = p = None
    while True:
        loaded = load_tree(out_dir).results if (out_dir / "runs").exists() else []
        if last is not None and len(loaded) <= last:  # a batch that left no result would repeat forever
            raise ExperimentError(f"a batch of seeds left no new result file under {out_dir / 'runs'}; "
                                  "the result files of the last batch cannot be read (see the log).")
        last = len(loaded)
        changed = watch.problem(loaded, out_dir)
        if changed:
            p = identity_stop(watch, changed, p, design, loaded, seeds=list(plan.all_seeds), baseline=baseline,
                              arms=arms, metric=metric, budget=budget, diverged=declaration.diverged)
            _write(out_dir, design, p, plan, declaration, loaded, "stopped")
            return Executed(Outcome(out_dir, results, skipped, failed, cert), None,
                            f"sequential run stopped: {changed}")
        p = sp.plan(design, loaded, seeds=list(plan.all_seeds), baseline=baseline, arms=arms, metric=metric,
                    max_failures=budget, diverged=declaration.diverged)
        _write(out_dir, design, p, plan, declaration, loaded, "running")
        _say_looks(p, say)
        if p.stopped or p.done:
            break
        say(f"sequential: next batch, seeds {_names(p.batch_seeds)} for arms {', '.join(p.batch_arms)}")
        every_arm = len(p.batch_arms) == len(arms) + 1
        # seed by seed, every arm of a seed before the next seed (as a sweep's jobs would be)
        units = [(seed, arm) for seed in p.batch_seeds for arm in ([None] if every_arm else p.batch_arms)]
        if pool is not None:
            outcome = _batch_side_by_side(plan, units, pool, say, tracker, certify)
            certify = False
            cert = outcome.certificate or cert
            results += outcome.results
            skipped += outcome.skipped
            failed += outcome.failed
            continue
        for seed, arm in units:  # as run_experiment runs a sweep's job (its preflight made once, above)
            unit = replace(plan.narrow(seed, arm), certify=certify, certificate_dir=out_dir)
            if unit.all_done():
                say(ALL_DONE)
            outcome = run_plan(unit, log=say, tracker=tracker)
            certify = False  # one certificate per invocation, from the first batch that runs
            cert = outcome.certificate or cert
            results += outcome.results
            skipped += outcome.skipped
            failed += outcome.failed

    loaded = load_tree(out_dir).results
    status = "stopped" if p.stopped else "settled"
    block = _write(out_dir, design, p, plan, declaration, loaded, status)
    write_figure(block, out_dir / sp.FIGURE_NAME)
    outcome = Outcome(out_dir, results, skipped, failed, cert)
    if not show_table:  # the verdict screen leads with the decisions: said once
        for arm, a in block["arms"].items():
            say(f"sequential decision, {arm} vs {baseline}: {a['sentence']}")

    from harness.analysis.analyze import analyze_dir
    from harness.analysis import AnalysisError
    from harness.analysis.render.report import render_table

    try:
        analysis = analyze_dir(out_dir, declaration=declaration, extra={"sequential": block})
    except AnalysisError as e:
        return Executed(outcome, None, f"no analysis: {e} The result files are in {out_dir / 'runs'}.")
    if show_table:
        render_table(analysis, tables=plan.tables)
    if tracker is not None:
        tracker.log_analysis(analysis, out_dir)
    say(f"results: {out_dir}  (analysis.json, report.md, analysis.png, sequential.json, sequential.png)")
    if p.stopped:
        return Executed(outcome, analysis, f"sequential run stopped unsettled: {p.stopped}")
    return Executed(outcome, analysis)


def _batch_side_by_side(plan: Plan, units, pool, say, tracker, certify: bool) -> Outcome:
    """One batch's units on the workers: each unit exactly as run_plan(plan.narrow(seed, arm)) runs
    it in this process (the same config, so the same result files), without a preflight per unit."""
    from harness.experiment.parallel.side_by_side import certify_with, run_units

    todo = []
    for seed, arm in units:
        sub = plan.narrow(seed, arm)
        todo += [(seed, name, sub.arms[name]) for name in sub.arm_names]
    outcome = run_units(todo, plan, pool, log=say, tracker=tracker)
    if certify:
        outcome.certificate, kept = certify_with(pool, plan.arms, outcome.results, plan.out_dir, say)
        outcome.certified_now = outcome.certificate is not None and not kept
    return outcome


def _write(out_dir: Path, design, p, plan: Plan, declaration, loaded, status) -> dict:
    block = sp.record(design, p, metric=declaration.metric, baseline=declaration.baseline, status=status,
                      runs=len(loaded), unit=declaration.unit)
    write_json(out_dir / sp.SEQUENTIAL_NAME, block)
    if loaded:  # run_plan wrote the last batch's seeds; say which seeds the folder holds
        seeds = sorted({r["seed"] for r in loaded if isinstance(r.get("seed"), int)})
        write_json(out_dir / "experiment.json", {
            "experiment": plan.experiment, "factor": plan.factor, "arms": plan.declared_arms,
            "seeds": seeds, "sequential": True, "config": plan.record,
        })
    return block


def _looks(design) -> str:
    looks = design.looks
    return ", ".join(map(str, looks)) if len(looks) <= 6 else f"{looks[0]}, {looks[1]}, ... {looks[-1]}"


def _names(items) -> str:
    return ", ".join(map(str, items))


def _say_looks(p, say) -> None:
    for arm, h in p.history.items():
        if h:
            x = h[-1]
            say(f"sequential look {x.look}, {arm}: n {x.n}, estimate {x.estimate:+.4g}, interval "
                f"[{x.interval[0]:+.4g}, {x.interval[1]:+.4g}], decision {x.decision}")


