"""The race policy of the adaptive loop: the design from ``ab.race``, each look's drops, race.json.

``python -m harness +experiment=loss_ab ab.race.enabled=true stats.margin=1.0`` (in_process.py) and
``-m hydra/sweeper=harness_race`` (the sweeper) run loop.run_loop with this policy: the
configurations are the declaration's arms; at each look race_plan.plan replays the race from the
result files (Kim & Nelson's procedure, harness.stats.race); the next batch is the next seeds for
every configuration still running. At the end race_report.analyze_race writes analysis.json,
report.md and race.png (what ``python -m harness.analyze`` reproduces).
"""

from __future__ import annotations

from pathlib import Path

from harness.experiment.adaptive import race_plan as rp
from harness.experiment.arms import ExperimentError
from harness.results import read_json, write_json


class RaceConfigError(ExperimentError):
    """ab.race, stats.* or the folder's stored race does not allow a race; the message says why."""


def design_for(declaration, race: dict):
    """The race's design from the declaration and ab.race; RaceConfigError: what does not allow it."""
    if declaration.fdr:  # a race decides by intervals, with no p-value: no online FDR test to take
        raise RaceConfigError(
            f"stats.fdr.method={declaration.fdr['method']} takes a test level from the ledger, but a race decides by "
            "intervals (no p-value to test at it). Run the race with stats.fdr.method=none.")
    try:
        design = rp.design_of(declaration, race)
    except ValueError as e:
        raise RaceConfigError(str(e)) from None
    return design


def prepare(declaration, race: dict, where: Path):
    """Validate before any run: the design (ab.race and the declaration), a stored race's design;
    then write the declaration into ``where``. Returns the RaceDesign. Raises RaceConfigError."""
    design = design_for(declaration, race)
    if (where / rp.RACE_NAME).is_file():
        problem = rp.stored_design_problem(read_json(where / rp.RACE_NAME), design, where)
        if problem:
            raise RaceConfigError(problem)
    where.mkdir(parents=True, exist_ok=True)
    declaration.write(where)
    return design


class RacePolicy:
    """What a look decides and writes, for loop.run_loop."""

    what = "race"
    budget_key = "ab.race.max_failures"

    def __init__(self, design, root: Path, *, seeds: list):
        self.design, self.root, self.seeds = design, root, seeds
        self.budget = design.max_failures
        self._looks_said = self._diverged_said = 0

    def plan(self, loaded: list):
        return rp.plan(self.design, loaded, seeds=self.seeds)

    @staticmethod
    def halt(p, why: str) -> None:
        p.stopped = why
        p.batch_seeds, p.batch_configs = [], []

    @staticmethod
    def final_status(p) -> str:
        return rp.final_status(p)

    def write(self, p, loaded: list, status: str) -> dict:
        block = rp.record(self.design, p, status=status, runs=len(loaded))
        write_json(self.root / rp.RACE_NAME, block)
        return block

    def say_looks(self, p, say) -> None:
        from harness.experiment.adaptive.race_report import look_drops

        for x in p.looks[self._looks_said:]:  # each look once, with every configuration it dropped
            say(f"race look {x['look']} at {x['n']} seeds: " + ", ".join(
                f"{c} {m:.4g}" for c, m in x["means"].items()) + "".join(f"; dropped {d}" for d in look_drops(x)))
        self._looks_said = len(p.looks)
        in_looks = sum(len(x.get("diverged") or []) for x in p.looks)
        for d in p.diverged[max(in_looks, self._diverged_said):]:  # after the last look (the race may end there)
            say(f"race: dropped {d['config']} (diverged at seed {d['seed']}: {d['reason']})")
        self._diverged_said = len(p.diverged)

    @staticmethod
    def batch(p, loaded: list) -> list:
        return [(s, c) for s in p.batch_seeds for c in p.batch_configs]

    def all_arms(self) -> list:
        return list(self.design.configs)

    def describe(self) -> str:
        d = self.design
        return (f"race: {len(d.configs)} configurations ({', '.join(d.configs)}), looks at "
                f"{', '.join(map(str, d.looks))} seeds, margin {d.margin:g}, alpha {d.alpha:g}")

    @staticmethod
    def batch_words(p) -> str:
        return f"seeds {', '.join(map(str, p.batch_seeds))} for {', '.join(p.batch_configs)}"

    def analyse(self, ledger=None) -> dict:
        """analysis.json, report.md and race.png (race_report.analyze_race: the race replayed)."""
        from harness.experiment.adaptive.race_report import analyze_race

        return analyze_race(self.root, ledger=ledger)

    @staticmethod
    def verdict_words(block: dict, root: Path) -> str:
        return (f"race: {block['verdict']} Seeds spent {block['seeds_spent']} of {block['seeds_all_to_max']} "
                f"(all to the maximum). results: {root} (analysis.json, report.md, race.png, race.json)")
