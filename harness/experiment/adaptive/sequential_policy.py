"""The sequential policy of the adaptive loop: the design from ``ab.sequential``, each look, sequential.json.

``python -m harness +experiment=loss_ab ab.sequential.enabled=true stats.margin=0.3`` (in_process.py)
and ``-m hydra/sweeper=harness_sequential`` (the sweeper) run loop.run_loop with this policy: validate
the design and a stored one before anything is written; at each look replay every arm over the result
files (sequential_plan.py, with the statistics of harness.stats.sequential); the next batch is the
next seeds for the baseline and every arm still running. It stops when every arm is settled (or a
rule of the loop stops it); sequential.json holds every look of every arm, sequential.png the running
interval against the margin, and the analysis gets the looks in analysis.json. A killed run continued
with the same command reaches the same looks; a folder that holds a run of another design is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from harness.config.sequential_design import baseline_and_arms, design_of
from harness.experiment.adaptive import sequential_plan as sp
from harness.experiment.arms import ExperimentError
from harness.results import read_json, write_json


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


class SequentialPolicy:
    """What a look decides and writes, for loop.run_loop. ``on_write(loaded)``: what the caller
    writes beside sequential.json (the in-process run's experiment.json)."""

    what = "sequential run"
    budget_key = "ab.sequential.max_failures"

    def __init__(self, design, declaration, root: Path, *, baseline: str, arms: list, seeds: list, budget: int,
                 on_write: Optional[Callable[[list], None]] = None):
        self.design, self.declaration, self.root = design, declaration, root
        self.baseline, self.arms, self.seeds, self.budget = baseline, arms, seeds, budget
        self.on_write = on_write

    def plan(self, loaded: list):
        return sp.plan(self.design, loaded, seeds=self.seeds, baseline=self.baseline, arms=self.arms,
                       metric=self.declaration.metric, max_failures=self.budget, diverged=self.declaration.diverged)

    @staticmethod
    def halt(p, why: str) -> None:
        p.stopped = why
        p.batch_seeds, p.batch_arms = [], []

    @staticmethod
    def final_status(p) -> str:
        return "stopped" if p.stopped else "settled"

    def write(self, p, loaded: list, status: str) -> dict:
        block = sp.record(self.design, p, metric=self.declaration.metric, baseline=self.baseline, status=status,
                          runs=len(loaded), unit=self.declaration.unit)
        write_json(self.root / sp.SEQUENTIAL_NAME, block)
        if self.on_write is not None:
            self.on_write(loaded)
        return block

    @staticmethod
    def say_looks(p, say) -> None:
        for arm, h in p.history.items():
            if h:
                x = h[-1]
                shown = (f"interval [{x.interval[0]:+.4g}, {x.interval[1]:+.4g}]" if x.nominal_alpha > 0
                         else "no interval (a futility-only look)")
                say(f"sequential look {x.look}, {arm}: n {x.n}, estimate {x.estimate:+.4g}, {shown}, "
                    f"decision {x.decision}")

    def batch(self, p, loaded: list) -> list:
        """(seed, arm) of the next batch, seed by seed, every arm of a seed before the next seed."""
        return [(s, a) for s in p.batch_seeds for a in p.batch_arms]

    def all_arms(self) -> list:
        return [self.baseline, *self.arms]

    def describe(self) -> str:
        d = self.design
        looks = d.looks
        shown = ", ".join(map(str, looks)) if len(looks) <= 6 else f"{looks[0]}, {looks[1]}, ... {looks[-1]}"
        early = d.futility_looks
        first = (f"futility-only looks at {', '.join(map(str, early))} seeds, then " if early else "")
        return (f"sequential: {first}looks at {shown} seeds, alpha {d.alpha:g}, margin "
                f"{d.margin if d.margin is not None else 'none (better/worse than 0)'}, {d.spending} spending")

    @staticmethod
    def batch_words(p) -> str:
        return f"seeds {', '.join(map(str, p.batch_seeds))} for arms {', '.join(p.batch_arms)}"

    def decisions(self, block: dict, say) -> None:
        for arm, a in block["arms"].items():
            say(f"sequential decision, {arm} vs {self.baseline}: {a['sentence']}")

    def analyse(self, block: dict, *, show_table: bool, tables):
        """sequential.png and the analysis with the looks; (analysis, None) or (None, the AnalysisError)."""
        from harness.analysis import AnalysisError
        from harness.analysis.analyze import analyze_dir
        from harness.analysis.render.report import render_table
        from harness.analysis.render.sequential_figure import write_figure

        write_figure(block, self.root / sp.FIGURE_NAME)
        try:
            analysis = analyze_dir(self.root, declaration=self.declaration, extra={"sequential": block})
        except AnalysisError as e:
            return None, e
        if show_table:
            render_table(analysis, tables=tables)
        return analysis, None
