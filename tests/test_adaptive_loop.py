"""The one adaptive loop (harness/experiment/adaptive/loop.py): each rule that ends a run, once, for
both policies and either launcher.

The loop runs here with the real policies (sequential_policy.py, race_policy.py) on a folder of
result files, and a launcher that does what a launcher does to that folder: it writes a unit's
result file, or fails a job without one (a job that died before its run, a job whose process
failed before the harness wrote anything). The in-process and Hydra launchers differ only in how
they start units; the rules below are the loop's, so they hold for the in-process mode and both
sweepers alike.
"""

from __future__ import annotations

from pathlib import Path

from harness.results import SCHEMA, read_json, write_json

from .sequential_fns import paired_value

SHIFT = {"a": 0.0, "b": 2.0, "c": -1.0}


class Unchanged:
    """An identity watch for which nothing ever changes (identity_watch.py is tested on real runs)."""

    def problem(self, loaded, root):
        return None

    def consistent(self, loaded):
        return loaded


class Writes:
    """A launcher that writes each unit's result file, except the (seed, arm) in ``fail_jobs``: those
    jobs fail without one."""

    stall_hint = "check the jobs' logs."

    def __init__(self, root: Path, fail_jobs=()):
        self.root, self.fail_jobs = root, set(fail_jobs)
        self.unrecorded: list = []
        self.batches = 0

    def launch(self, units, words, say, loaded):
        self.batches += 1
        for seed, arm in units:
            if (seed, arm) in self.fail_jobs:
                self.unrecorded.append(f"seed={seed} arm={arm}: status FAILED")
                continue
            write_json(self.root / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json",
                       {"schema": SCHEMA, "seed": seed, "arm": arm, "status": "completed", "metrics": {"m": paired_value(seed, SHIFT[arm])}})


class Nothing(Writes):
    """A launcher whose batch leaves no result file and names no failed job (in one process: result
    files that cannot be read back)."""

    def launch(self, units, words, say, loaded):
        self.batches += 1


def _race(root: Path, max_failures: int):
    from harness.experiment.adaptive.race_plan import RaceDesign
    from harness.experiment.adaptive.race_policy import RacePolicy

    design = RaceDesign(configs=("a", "b", "c"), values={"a": 0, "b": 1, "c": 2}, factor="f", metric="m",
                        direction="max", unit="", margin=1.0, alpha=0.05, min_seeds=5, seeds_per_look=2, max_seeds=15,
                        max_failures=max_failures)
    return RacePolicy(design, root, seeds=[])


def _sequential(root: Path, max_failures: int):
    from types import SimpleNamespace

    from harness.experiment.adaptive.sequential_policy import SequentialPolicy
    from harness.stats.sequential.design import SequentialDesign

    design = SequentialDesign(max_seeds=12, min_seeds=6, alpha=0.05, margin=1.0)
    declaration = SimpleNamespace(metric="m", unit="", diverged="worst")
    return SequentialPolicy(design, declaration, root, baseline="a", arms=["b"], seeds=[], budget=max_failures)


def test_a_race_counts_jobs_that_failed_without_a_result_against_its_failure_budget(tmp_path):
    """Two jobs of the first batch fail before writing a result; ab.race.max_failures=1. The race
    stops there (the sequential sweeper's rule, now the race's too), race.json says stopped and why."""
    from harness.experiment.adaptive.loop import run_loop

    launcher = Writes(tmp_path, fail_jobs={(0, "b"), (1, "c")})
    ended = run_loop(_race(tmp_path, max_failures=1), launcher, tmp_path, Unchanged(), say=lambda m: None)
    state = read_json(tmp_path / "race.json")
    assert launcher.batches == 1
    assert state["status"] == "stopped" and state["stopped"] == ended.plan.stopped
    assert "2 job(s) failed before writing a result" in state["stopped"]
    assert "ab.race.max_failures=1" in state["stopped"] and "seed=0 arm=b" in state["stopped"]


def test_a_job_failing_without_a_result_within_the_budget_is_launched_again(tmp_path):
    """Within the budget the loop goes on: the failed job's (seed, arm) has no result, so it is in
    the next batch, and the race settles as it would have."""
    from harness.experiment.adaptive.loop import run_loop

    class OnceFails(Writes):
        def launch(self, units, words, say, loaded):
            self.fail_jobs = {(0, "b")} if self.batches == 0 else set()
            super().launch(units, words, say, loaded)

    launcher = OnceFails(tmp_path)
    ended = run_loop(_race(tmp_path, max_failures=1), launcher, tmp_path, Unchanged(), say=lambda m: None)
    assert launcher.batches > 1 and ended.plan.outcome is not None
    assert ended.plan.stopped is None and read_json(tmp_path / "race.json")["status"] == "settled"


def test_a_batch_that_leaves_nothing_stops_either_policy_with_its_results_kept_and_the_reason_recorded(tmp_path):
    """The stall rule, once for both policies (in one process it used to raise, leaving
    sequential.json "running"): the run stops after the batch that left nothing new, the state file
    says stopped and why, and what was there stays."""
    from harness.experiment.adaptive.loop import run_loop

    for name, policy_of, state_file in (("seq", _sequential, "sequential.json"), ("race", _race, "race.json")):
        root = tmp_path / name
        root.mkdir()
        kept = root / "runs" / "seed=99" / "arm=a" / "result.json"
        write_json(kept, {"schema": SCHEMA, "seed": 99, "arm": "a", "status": "completed", "metrics": {"m": 1.0}})
        launcher = Nothing(root)
        ended = run_loop(policy_of(root, 0), launcher, root, Unchanged(), say=lambda m: None)
        state = read_json(root / state_file)
        assert launcher.batches == 1, name
        assert state["status"] == "stopped" and "the last batch left no new result file" in state["stopped"], name
        assert ended.plan.stopped == state["stopped"] and kept.is_file(), name


def test_whatever_ends_the_loop_leaves_the_state_stopped_with_why(tmp_path):
    """An error inside a batch (here Ctrl-C) is raised on, and the race's state is not left "running"."""
    import pytest

    from harness.experiment.adaptive.loop import run_loop

    class Interrupted(Writes):
        def launch(self, units, words, say, loaded):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_loop(_race(tmp_path, 0), Interrupted(tmp_path), tmp_path, Unchanged(), say=lambda m: None)
    state = read_json(tmp_path / "race.json")
    assert state["status"] == "stopped" and state["stopped"] == "interrupted (Ctrl-C or a signal)"
