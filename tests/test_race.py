"""The race sweeper (hydra/sweeper=harness_race): Kim & Nelson's procedure on common seeds.

The runs use tests/sequential_fns.paired_metric, whose metric is a fixed function of (seed, shift)
(paired_value gives it without a run), so the race's drops can be predicted by the vectorised
simulation (harness.stats.race.simulate) fed with the same numbers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness.results import load_tree, read_json

from .conftest import REPO, compose_cfg, run_cli
from .sequential_fns import paired_value

SHIFTS = {"shift_0.0": 0.0, "shift_2.0": 2.0, "shift_-1.0": -1.0}
MARGIN, MIN, STEP, MAX = 1.0, 5, 2, 15
RACE = [
    "-m", "hydra/sweeper=harness_race",
    "+experiment=loss_ab", "logger=none", "progress=false", "data.train_limit=64", "determinism.threads=1",
    "repro.certificate=false", "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0",
    "+train.kwargs.sd=1.0", "train.kwargs.shift=0.0,2.0,-1.0", f"stats.margin={MARGIN}",
    f"ab.race.min_seeds={MIN}", f"ab.race.seeds_per_look={STEP}", f"ab.race.max_seeds={MAX}",
]


def _runs(root: Path) -> dict:
    return {(r["seed"], r["arm"]): r["fingerprints"]["final"] for r in load_tree(root).results}


def _expected():
    """The simulation's race on paired_metric's own numbers: survivors and seeds per configuration."""
    from harness.stats.race import simulate

    names = list(SHIFTS)
    x = np.array([[[paired_value(s, SHIFTS[c]) for c in names] for s in range(MAX)]])
    sim = simulate(np.zeros(3), np.eye(3), n0=MIN, step=STEP, max_seeds=MAX, alpha=0.05, delta=MARGIN, reps=1, data=x)
    return {c for c, k in zip(names, sim["kept"][0]) if k}, int(sim["spent"][0])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("race") / "basic"
    proc = run_cli([*RACE, f"hydra.sweep.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_race_drops_and_selects_as_the_simulation_says(reference):
    race = read_json(reference / "race.json")
    kept, spent = _expected()
    assert set(race["set"]) == kept and race["seeds_spent"] == spent
    assert race["status"] == "settled" and race["outcome"] == "one_left" and race["winner"] == "shift_2.0"
    results = load_tree(reference).results
    assert len(results) == spent  # no run beyond what the race needed
    for r in results:  # the runs are paired_metric's numbers
        assert r["metrics"]["test_accuracy"] == pytest.approx(paired_value(r["seed"], SHIFTS[r["arm"]]))
    dropped = {d["config"]: x["n"] for x in race["looks"] for d in x["dropped"]}
    assert dropped == {"shift_-1.0": 5, "shift_0.0": 11}  # what the simulation says, at two different looks
    for c, n in dropped.items():  # a dropped configuration got no seed after its drop
        assert {r["seed"] for r in results if r["arm"] == c} == set(range(n))
    md = (reference / "race.md").read_text()
    assert "**shift_2.0 is the best: every other configuration was dropped.**" in md
    assert f"Seeds spent: {spent} of {3 * MAX}" in md and "dropped at look" in md
    assert (reference / "race.png").stat().st_size > 5000


def test_the_plan_replays_the_simulation_on_many_races():
    """race_plan.plan (the sweeper's decisions from result files) = simulate on the same data, both directions."""
    from harness.experiment.race_plan import RaceDesign, plan
    from harness.stats.race import simulate

    rng = np.random.default_rng(5)
    k, reps = 4, 60
    mu = np.array([0.0, -0.8, -1.5, -3.0])
    x = mu + rng.normal(0, 3, (reps, 20, 1)) + rng.normal(0, 1, (reps, 20, k))
    sim = simulate(mu, np.eye(k), n0=5, step=3, max_seeds=20, alpha=0.1, delta=1.0, reps=reps, data=x)
    names = [f"c{i}" for i in range(k)]
    for direction, sign in (("max", 1.0), ("min", -1.0)):
        design = RaceDesign(tuple(names), dict(zip(names, range(k))), "f", "m", direction, "", 1.0, 0.1, 5, 3, 20, 0)
        for j in range(reps):
            results = [{"seed": s, "arm": c, "status": "completed", "metrics": {"m": sign * x[j, s, i]}}
                       for s in range(20) for i, c in enumerate(names)]
            p = plan(design, results, seeds=[])
            assert p.alive == [c for c, a in zip(names, sim["kept"][j]) if a]
            assert sum(map(len, p.values.values())) == sim["spent"][j]
            assert p.outcome == ("one_left", "within_margin", "max_seeds")[sim["stop"][j]]


def test_simulated_promise_at_the_least_favourable_configuration():
    """Best exactly one margin ahead of all others: it is dropped at most alpha/2 of the time (KN)."""
    from harness.stats.race import simulate

    k, reps, alpha = 4, 3000, 0.1
    cov = 9 * np.ones((k, k)) + np.eye(k)
    sim = simulate([1.0, 0, 0, 0], cov, n0=6, step=2, max_seeds=40, alpha=alpha, delta=1.0, reps=reps, seed=1)
    wrong = 1 - sim["kept"][:, 0].mean()
    assert wrong <= alpha / 2 + 3 * np.sqrt(alpha / 2 * (1 - alpha / 2) / reps)
    far = simulate([3.0, 0, 0, 0], cov, n0=6, step=2, max_seeds=40, alpha=alpha, delta=1.0, reps=500, seed=2)
    assert far["spent"].mean() < 0.5 * k * 40  # a clear winner: the others stop early


def test_killed_race_resumes_to_the_same_decisions(tmp_path, reference):
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0", "HARNESS_TEST_HOLD_FROM_SEED": "7"}
    want = sum(1 for s, _ in _runs(reference) if s < 7)
    proc = subprocess.Popen([sys.executable, "-m", "harness", *RACE, f"hydra.sweep.dir={out}"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while len(list(out.rglob("result.json"))) < want and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    while not [lk for lk in out.rglob(".lock") if not (lk.parent / "result.json").exists()] \
            and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)  # until the next job, held at seed 7, has taken its run lock
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p: p.read_bytes() for p in out.rglob("result.json")}
    assert len(before) == want and read_json(out / "race.json")["status"] == "running"
    proc = run_cli([*RACE, f"hydra.sweep.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for path, content in before.items():  # finished runs were not run again
        assert path.read_bytes() == content
    assert _runs(out) == _runs(reference)
    assert read_json(out / "race.json") == read_json(reference / "race.json")


def test_joblib_launcher_gives_the_basic_decisions(tmp_path, reference):
    out = tmp_path / "joblib"
    proc = run_cli([*RACE, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _runs(out) == _runs(reference)  # the same (seed, configuration) runs, the same bits
    assert read_json(out / "race.json") == read_json(reference / "race.json")


@pytest.mark.parametrize("overrides, words", [
    (["stats.margin=auto"], "stats.margin='auto': a race drops a configuration when it is worse than the best by"),
    (["stats.margin=null"], "stats.margin=None: a race drops"),
    (["ab.race.max_seeds=4"], "ab.race.max_seeds=4 is below ab.race.min_seeds=5"),
    (["ab.race.seeds_per_look=0"], "ab.race.seeds_per_look=0 must be an integer >= 1"),
    (["optim.lr=0.1,0.2"], "the race sweeper races the values of ONE key"),
    (["ab.arms.B=0.3"], "cannot be given with it"),
    (["seed=3"], "the race sweeper chooses the seeds and configurations itself"),
])
def test_bad_settings_are_refused_before_any_run(tmp_path, overrides, words):
    out = tmp_path / "bad"
    proc = run_cli([*RACE, *overrides, f"hydra.sweep.dir={out}"])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert not list(out.rglob("result.json")) and not (out / "race.json").exists()


def test_plugin_is_discovered_light_and_its_schema_composes():
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    from harness.config import compose

    assert "HarnessRaceSweeper" in [x.__name__ for x in Plugins.instance().discover(Sweeper)]
    hydra_cfg = compose(["+experiment=loss_ab", "hydra/sweeper=harness_race"], return_hydra_config=True)
    assert hydra_cfg.hydra.sweeper._target_.endswith("HarnessRaceSweeper")
    assert dict(compose_cfg(["+experiment=loss_ab"]).ab.race) == {
        "min_seeds": 10, "seeds_per_look": 2, "max_seeds": 40, "max_failures": 0}
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, hydra_plugins.harness_sweeper.race_sweeper; "
                               "print(sorted({'torch', 'scipy', 'harness'} & set(sys.modules)))"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_a_configuration_has_the_bits_of_the_same_run_outside_the_race(tmp_path, reference):
    from harness.api import run

    plain = ["+experiment=loss_ab", "logger=none", "progress=false", "data.train_limit=64", "determinism.threads=1",
             "repro.certificate=false", "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0",
             "+train.kwargs.sd=1.0", "ab.factor=train.kwargs.shift", "ab.arms.A=2.0", "ab.arms.B=0.0", "ab.seeds=[3]"]
    run(plain, out_dir=tmp_path / "plain", verbose=False)
    runs, raced = _runs(tmp_path / "plain"), _runs(reference)
    assert runs[(3, "A")] == raced[(3, "shift_2.0")] and runs[(3, "B")] == raced[(3, "shift_0.0")]


def _design(**kw):
    from harness.experiment.race_plan import RaceDesign

    base = dict(configs=("a", "b", "c"), values={"a": 0, "b": 1, "c": 2}, factor="f", metric="m", direction="max",
                unit="", margin=1.0, alpha=0.05, min_seeds=5, seeds_per_look=2, max_seeds=15, max_failures=1)
    return RaceDesign(**{**base, **kw})


def test_a_failed_run_counts_for_no_configuration_and_past_the_budget_stops_the_race():
    from harness.experiment.race_plan import plan

    shift = {"a": 0.0, "b": 2.0, "c": -1.0}
    results = [{"seed": s, "arm": c, "status": "completed", "metrics": {"m": paired_value(s, v)}}
               for s in range(8) for c, v in shift.items()]
    results[3 * 2 + 1] = {"seed": 2, "arm": "b", "status": "failed", "error": {"type": "RuntimeError", "message": "x"}}
    p = plan(_design(), results, seeds=[])
    assert p.failed == [{"seed": 2, "arm": "b", "reason": "failed: RuntimeError: x"}] and p.stopped is None
    assert p.seeds[:5] == [0, 1, 3, 4, 5] and p.looks[0]["n"] == 5  # seed 2 counts for none; seed 5 takes its place
    p = plan(_design(max_failures=0), results, seeds=[])
    assert p.stopped.startswith("1 failed run(s), more than ab.race.max_failures=0: seed 2 config b") and p.done


def test_a_changed_design_is_refused_on_resume(reference):
    from harness.experiment.race_plan import stored_design_problem

    stored = read_json(reference / "race.json")
    same = _design(configs=tuple(SHIFTS), values=SHIFTS, factor="train.kwargs.shift", metric="test_accuracy",
                   unit="pts", max_failures=0)
    assert stored_design_problem(stored, same, reference) is None
    problem = stored_design_problem(stored, _design(configs=tuple(SHIFTS), values=SHIFTS, factor="train.kwargs.shift",
                                                    metric="test_accuracy", unit="pts", max_failures=0,
                                                    margin=0.5), reference)
    assert "holds a race declared with another design (margin 1.0 -> 0.5)" in problem
