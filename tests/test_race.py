"""The race sweeper (hydra/sweeper=harness_race): Kim & Nelson's procedure on common seeds.

The runs use tests/sequential_fns.paired_metric, whose metric is a fixed function of (seed, shift)
(paired_value gives it without a run), so the race's drops can be predicted by the vectorised
simulation (harness.stats.sequential.race.simulate) fed with the same numbers. One reference race (a
subprocess, the basic launcher, 16 runs) is shared by the tests that read its files; what does not
live in a subprocess (the plan, the analysis tool, wandb, the override checks) runs in-process.
"""

from __future__ import annotations

import os
import shutil
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

# One xdist worker for the module: each worker would run the reference race fixture (~11 s) itself.
pytestmark = pytest.mark.xdist_group("test_race")

SHIFTS = {"shift_0.0": 0.0, "shift_2.0": 2.0, "shift_-1.0": -1.0}
SD, MARGIN, MIN, STEP, MAX = 0.5, 1.0, 4, 2, 15  # drops at the first two looks (4 and 6 seeds): 16 runs
PLAIN = [  # everything but the sweeper and the swept key: also the plain run's settings
    "+experiment=loss_ab", "logger=none", "progress=false", "data.train_limit=64", "determinism.threads=1",
    "repro.certificate=false", "+train.kwargs.shift=0.0", f"+train.kwargs.sd={SD}", f"stats.margin={MARGIN}",
    f"ab.race.min_seeds={MIN}", f"ab.race.seeds_per_look={STEP}", f"ab.race.max_seeds={MAX}",
]
RACE = ["-m", "hydra/sweeper=harness_race", *PLAIN, "train.fn=tests.sequential_fns.paired_metric",
        "train.kwargs.shift=0.0,2.0,-1.0"]


def _runs(root: Path) -> dict:
    return {(r["seed"], r["arm"]): r["fingerprints"]["final"] for r in load_tree(root).results}


def _expected():
    """The simulation's race on paired_metric's own numbers: survivors and seeds per configuration."""
    from harness.stats.sequential.race import simulate

    names = list(SHIFTS)
    x = np.array([[[paired_value(s, SHIFTS[c], SD) for c in names] for s in range(MAX)]])
    sim = simulate(np.zeros(3), np.eye(3), n0=MIN, step=STEP, max_seeds=MAX, alpha=0.05, delta=MARGIN, reps=1, data=x)
    return {c for c, k in zip(names, sim["kept"][0]) if k}, int(sim["spent"][0])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("race") / "basic"
    proc = run_cli([*RACE, f"hydra.sweep.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_race_drops_and_selects_as_the_simulation_says(reference):
    race = read_json(reference / "race.json")
    kept, spent = _expected()
    assert set(race["set"]) == kept and race["seeds_spent"] == spent
    assert race["status"] == "settled" and race["outcome"] == "one_left" and race["winner"] == "shift_2.0"
    results = load_tree(reference).results
    assert len(results) == spent  # no run beyond what the race needed
    for r in results:  # the runs are paired_metric's numbers
        assert r["metrics"]["test_accuracy"] == pytest.approx(paired_value(r["seed"], SHIFTS[r["arm"]], SD))
    dropped = {d["config"]: x["n"] for x in race["looks"] for d in x["dropped"]}
    assert dropped == {"shift_-1.0": 4, "shift_0.0": 6}  # what the simulation says, at two different looks
    for c, n in dropped.items():  # a dropped configuration got no seed after its drop
        assert {r["seed"] for r in results if r["arm"] == c} == set(range(n))
    for r in results:  # one job folder per (seed, configuration), right under the race folder
        assert Path(r["_path"]).relative_to(reference).parts[0] == f"seed={r['seed']},arm={r['arm']}"


@pytest.mark.slow
def test_the_race_folder_has_its_analysis_and_harness_analyze_reproduces_it(reference, tmp_path, capsys):
    """analysis.json and report.md: the winner, each configuration's mean and interval against the
    leader, seeds per configuration, the figure; ``python -m harness.analyze FOLDER`` (no flags)
    writes the same bytes from the declaration and the result files."""
    from harness.tools.analyze import main

    analysis = read_json(reference / "analysis.json")
    race = analysis["race"]
    assert analysis["schema"] == "harness.race_analysis/1" and analysis["declaration"]["margin"] == MARGIN
    assert race["winner"] == "shift_2.0" and race["leader"] == "shift_2.0" and analysis["identity"]["consistent"]
    for name, c in race["configs"].items():
        values = [paired_value(s, SHIFTS[name], SD) for s in c["seeds"]]
        assert c["n"] == len(values) and c["mean"] == pytest.approx(np.mean(values))
        if name != "shift_2.0":  # its difference from the leader on their common seeds, inside its interval
            lead = [paired_value(s, 2.0, SD) for s in c["seeds"]]
            assert c["difference"] == pytest.approx(np.mean(values) - np.mean(lead))
            assert c["interval"][0] < c["difference"] < c["interval"][1]
    assert race["configs"]["shift_-1.0"]["interval"][1] < 0  # shown worse (shift_0.0 fell to KN's width)
    assert {n: c["n"] for n, c in race["configs"].items()} == {"shift_0.0": 6, "shift_2.0": 6, "shift_-1.0": 4}
    md = (reference / "report.md").read_text()
    assert "**shift_2.0 is the best: every other configuration was dropped.**" in md
    assert f"Seeds spent: 16 of {3 * MAX}" in md and "| shift_-1.0 | -1.0 | dropped at look 1 (by shift_2.0) | 4 |" in md
    assert "(race.png)" in md and (reference / "race.png").stat().st_size > 5000

    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    for name in ("analysis.json", "report.md", "race.png"):
        (copy / name).unlink()
    assert main([str(copy)]) == 0
    out = capsys.readouterr().out
    assert "**shift_2.0 is the best" in out and f"wrote analysis.json, report.md, race.png into {copy}" in out
    for name in ("analysis.json", "report.md", "race.png"):
        assert (copy / name).read_bytes() == (reference / name).read_bytes(), name
    assert main([str(copy), "--margin", "0.5"]) == 2  # a choice would change decisions already taken
    assert "holds a race (race.json)" in capsys.readouterr().err


@pytest.mark.slow
def test_wandb_gets_the_table_of_drops_with_the_interval_against_the_leader(reference, tmp_path, monkeypatch):
    """The sweeper's last step (RaceSweeperImpl._track) with logger=wandb, offline, on the reference's
    analysis; the .wandb file read back as the tracking tests do."""
    from hydra_plugins.harness_sweeper.race_impl import RaceSweeperImpl

    from . import wandb_reader

    for key in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "race"
    shutil.copytree(reference, folder)
    cfg = compose_cfg([*PLAIN, "train.fn=tests.sequential_fns.paired_metric", "logger=wandb"])
    analysis = read_json(folder / "analysis.json")
    RaceSweeperImpl._track(cfg, folder, analysis)
    [run] = wandb_reader.read_runs(folder / "wandb")
    assert run.name == "race" and run.job_type == "race"
    table = run.table("race")
    rows = {r[0]: dict(zip(table["columns"], r)) for r in table["data"]}
    look2 = analysis["race"]["looks"][1]
    est, half = look2["versus_leader"]["shift_0.0"]
    assert rows["shift_0.0"]["dropped_at_look"] == 2 and rows["shift_0.0"]["dropped_at_seeds"] == 6
    assert rows["shift_0.0"]["dropped_by"] == rows["shift_0.0"]["leader"] == "shift_2.0"
    assert rows["shift_0.0"]["minus_leader"] == pytest.approx(est)
    assert (rows["shift_0.0"]["interval_low"], rows["shift_0.0"]["interval_high"]) == pytest.approx((est - half, est + half))
    assert rows["shift_-1.0"]["dropped_at_look"] == 1 and rows["shift_-1.0"]["dropped_at_seeds"] == 4
    assert rows["shift_2.0"]["status"] == "leader" and rows["shift_2.0"]["dropped_at_look"] is None
    assert run.summary["race/winner"] == "shift_2.0" and run.summary["race/seeds_spent"] == 16
    assert run.summary["figure"]["_type"] == "image-file"


def test_the_plan_replays_the_simulation_on_many_races():
    """race_plan.plan (the sweeper's decisions from result files) = simulate on the same data, both directions."""
    from harness.experiment.adaptive.race_plan import RaceDesign, plan
    from harness.stats.sequential.race import simulate

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
    from harness.stats.sequential.race import simulate

    k, reps, alpha = 4, 3000, 0.1
    cov = 9 * np.ones((k, k)) + np.eye(k)
    sim = simulate([1.0, 0, 0, 0], cov, n0=6, step=2, max_seeds=40, alpha=alpha, delta=1.0, reps=reps, seed=1)
    wrong = 1 - sim["kept"][:, 0].mean()
    assert wrong <= alpha / 2 + 3 * np.sqrt(alpha / 2 * (1 - alpha / 2) / reps)
    far = simulate([3.0, 0, 0, 0], cov, n0=6, step=2, max_seeds=40, alpha=alpha, delta=1.0, reps=500, seed=2)
    assert far["spent"].mean() < 0.5 * k * 40  # a clear winner: the others stop early


@pytest.mark.slow
def test_killed_race_resumes_to_the_same_decisions_and_the_joblib_launcher_gives_the_basic_bits(tmp_path, reference):
    """A race killed (SIGKILL) in its second batch, while a job holds seed 5's run lock; the same
    command run again, on hydra/launcher=joblib, keeps the finished runs, runs only what is missing
    in its workers, and ends with the reference's (basic launcher's) runs, bits and decisions, file
    for file. The killed race starts from the reference's job folders of seeds 0-4 (bit-identical
    to what it would run itself: the reference test shows the bits are the same on every launcher)."""
    out = tmp_path / "killed"
    for job in reference.glob("seed=*,arm=*"):
        if int(job.name.split(",")[0].split("=")[1]) < 5:
            shutil.copytree(job, out / job.name)
    want = len(list(out.rglob("result.json")))
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0", "HARNESS_TEST_HOLD_FROM_SEED": "5"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", *RACE, f"hydra.sweep.dir={out}"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while not [lk for lk in out.rglob(".lock") if not (lk.parent / "result.json").exists()] \
            and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)  # until the next job, held at seed 5, has taken its run lock
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p: p.read_bytes() for p in out.rglob("result.json")}
    assert want == 14 and len(before) == want and read_json(out / "race.json")["status"] == "running"
    proc = run_cli([*RACE, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for path, content in before.items():  # finished runs were not run again
        assert path.read_bytes() == content
    assert _runs(out) == _runs(reference)
    assert read_json(out / "race.json") == read_json(reference / "race.json")
    assert (out / "analysis.json").read_bytes() == (reference / "analysis.json").read_bytes()


def test_bad_settings_are_refused_before_any_run(tmp_path):
    """End to end once: exit 2, one paragraph, no Traceback, nothing run or written."""
    out = tmp_path / "bad"
    proc = run_cli([*RACE, "stats.margin=auto", f"hydra.sweep.dir={out}"])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "stats.margin='auto': a race drops a configuration when it is worse than the best by" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(out.rglob("result.json")) and not (out / "race.json").exists()


@pytest.mark.parametrize("overrides, words", [
    (["stats.margin=null"], "stats.margin=None: a race drops"),
    (["ab.race.max_seeds=3"], f"ab.race.max_seeds=3 is below ab.race.min_seeds={MIN}"),
    (["ab.race.seeds_per_look=0"], "ab.race.seeds_per_look=0 must be an integer >= 1"),
])
def test_bad_designs_are_named(overrides, words):
    """The design's checks (the sweeper runs them before any job; end to end above)."""
    from harness.config.declaration import Declaration
    from harness.experiment.adaptive.race_plan import design_of

    cfg = compose_cfg([*PLAIN, "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=2.0", *overrides])
    with pytest.raises(ValueError, match="Nothing was run") as e:
        design_of(Declaration.from_config(cfg), cfg.ab.race)
    assert words in str(e.value)


@pytest.mark.parametrize("overrides, words", [
    (["train.kwargs.shift=0.0,2.0", "optim.lr=0.1,0.2"], "the race sweeper races the values of ONE key"),
    (["train.kwargs.shift=0.0,2.0", "ab.arms.B=0.3"], "cannot be given with it"),
    (["train.kwargs.shift=0.0,2.0", "seed=3"], "the race sweeper chooses the seeds and configurations itself"),
    (["train.kwargs.shift=interval(0,1)"], "must be a list of values (a,b,c), not a range"),
])
def test_bad_overrides_are_refused_by_the_sweeper(overrides, words, capsys):
    from types import SimpleNamespace

    from hydra_plugins.harness_sweeper.race_impl import RaceSweeperImpl

    impl = RaceSweeperImpl(None)
    impl.hydra_context = SimpleNamespace(config_loader=None)
    with pytest.raises(SystemExit) as e:
        impl._configurations([*PLAIN, *overrides])
    assert e.value.code == 2 and words in capsys.readouterr().err


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


@pytest.mark.slow
def test_a_configuration_has_the_bits_of_the_same_run_outside_the_race(tmp_path, reference):
    from harness.api import run

    plain = [*PLAIN, "train.fn=tests.sequential_fns.paired_metric", "ab.factor=train.kwargs.shift", "ab.arms.A=2.0",
             "ab.arms.B=0.0", "ab.seeds=[3]"]
    run(plain, out_dir=tmp_path / "plain", verbose=False)
    runs, raced = _runs(tmp_path / "plain"), _runs(reference)
    assert runs[(3, "A")] == raced[(3, "shift_2.0")] and runs[(3, "B")] == raced[(3, "shift_0.0")]


def _design(**kw):
    from harness.experiment.adaptive.race_plan import RaceDesign

    base = dict(configs=("a", "b", "c"), values={"a": 0, "b": 1, "c": 2}, factor="f", metric="m", direction="max",
                unit="", margin=1.0, alpha=0.05, min_seeds=5, seeds_per_look=2, max_seeds=15, max_failures=1)
    return RaceDesign(**{**base, **kw})


def test_a_failed_run_counts_for_no_configuration_and_past_the_budget_stops_the_race():
    from harness.experiment.adaptive.race_plan import plan

    shift = {"a": 0.0, "b": 2.0, "c": -1.0}
    results = [{"seed": s, "arm": c, "status": "completed", "metrics": {"m": paired_value(s, v)}}
               for s in range(8) for c, v in shift.items()]
    results[3 * 2 + 1] = {"seed": 2, "arm": "b", "status": "failed", "error": {"type": "RuntimeError", "message": "x"}}
    p = plan(_design(), results, seeds=[])
    assert p.failed == [{"seed": 2, "arm": "b", "reason": "failed: RuntimeError: x"}] and p.stopped is None
    assert p.seeds[:5] == [0, 1, 3, 4, 5] and p.looks[0]["n"] == 5  # seed 2 counts for none; seed 5 takes its place
    p = plan(_design(max_failures=0), results, seeds=[])
    assert p.stopped.startswith("1 failed run(s), more than ab.race.max_failures=0: seed 2 config b") and p.done


def test_a_configuration_that_diverges_where_the_others_finish_is_dropped_named_with_its_seed():
    """issue 33: one NaN seed at the largest learning rate drops that configuration instead of
    stopping the race unsettled; with stats.diverged=exclude it is a failed run, as before."""
    from harness.experiment.adaptive.race_plan import plan, record

    shift = {"a": 0.0, "b": 2.0, "c": -1.0}
    results = [{"seed": s, "arm": c, "status": "completed", "metrics": {"m": paired_value(s, v)}}
               for s in range(8) for c, v in shift.items()]
    nan = {"type": "NonFiniteLoss", "message": "the loss became nan at step 7", "step": 7}
    results[3 * 2 + 1] = {"seed": 2, "arm": "b", "status": "failed", "error": nan}
    p = plan(_design(max_failures=0), results, seeds=[])
    assert p.stopped is None and p.failed == []
    assert p.diverged == [{"seed": 2, "config": "b", "reason": "failed: NonFiniteLoss: the loss became nan at step 7"}]
    assert "b" not in p.alive and p.seeds[:5] == [0, 1, 2, 3, 4]  # seed 2 counts for the others
    r = record(_design(max_failures=0), p, status="running", runs=len(results))
    assert r["configs"]["b"]["status"] == "dropped (diverged at seed 2)" and r["diverged"] == p.diverged
    excluded = plan(_design(max_failures=0, diverged="exclude"), results, seeds=[])
    assert excluded.stopped.startswith("1 failed run(s), more than ab.race.max_failures=0") and excluded.diverged == []
    # every running configuration diverged at a seed: it counts for none, and nothing is dropped
    both = [dict(r, status="failed", error=nan) if r["seed"] == 1 else r for r in results]
    p = plan(_design(max_failures=0), both, seeds=[])
    assert [d for d in p.diverged if d["seed"] == 1] == [] and p.failed == [] and p.stopped is None
    assert 1 not in p.seeds


@pytest.mark.slow
def test_a_changed_design_is_refused_on_resume(reference):
    from harness.experiment.adaptive.race_plan import stored_design_problem

    stored = read_json(reference / "race.json")
    same = _design(configs=tuple(SHIFTS), values=SHIFTS, factor="train.kwargs.shift", metric="test_accuracy",
                   unit="pts", max_failures=0, min_seeds=MIN)
    assert stored_design_problem(stored, same, reference) is None
    problem = stored_design_problem(stored, _design(configs=tuple(SHIFTS), values=SHIFTS, factor="train.kwargs.shift",
                                                    metric="test_accuracy", unit="pts", max_failures=0,
                                                    min_seeds=MIN, margin=0.5), reference)
    assert "holds a race declared with another design (margin 1.0 -> 0.5)" in problem


@pytest.mark.slow
def test_a_training_file_edited_after_the_first_batch_stops_the_race(tmp_path):
    """The identity watch between batches (as in the sequential sweeper): the training function, a
    copy of tests/sequential_fns.py on PYTHONPATH, appends to its own source when it runs seed 3 (the
    second batch). The basic launcher runs the jobs in this process, whose code identity was
    computed once, so only the look at the files on disk between batches sees it: the race stops
    with the file named, race.json keeps the first look, and nothing is analysed."""
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(REPO / "tests" / "sequential_fns.py", code / "editable_fns.py")
    out = tmp_path / "race"
    proc = run_cli(["-m", "hydra/sweeper=harness_race", *PLAIN, "train.fn=editable_fns.edits_a_file",
                    "train.kwargs.sd=1.0", "ab.race.min_seeds=3", "train.kwargs.shift=0.0,0.5",
                    "+train.kwargs.edit_from_seed=3", f"hydra.sweep.dir={out}"],
                   env={"PYTHONPATH": f"{code}{os.pathsep}{REPO}"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    err = proc.stderr
    assert "race stopped: the config or code changed while this race was going on" in err and "Traceback" not in err
    assert "the code changed: edited: editable_fns.py (on disk since the run started)" in err
    assert ("The runs since the last look that record the earlier identity (arm shift_0.0 seeds 3-4, arm shift_0.5 "
            "seeds 3-4) may have been made with the changed files") in err
    race = read_json(out / "race.json")
    assert race["status"] == "stopped" and "edited: editable_fns.py" in race["stopped"]
    assert [x["n"] for x in race["looks"]] == [3] and race["outcome"] is None  # the look before the change
    assert not (out / "analysis.json").exists() and not (out / "report.md").exists()


def test_long_values_and_values_with_slashes_make_valid_folders():
    """Configurations whose values are long paths (one 255-byte folder name would not hold them, and
    they differ only at the end): distinct names of at most 48 characters, and the folder Hydra
    gives each job from the sweeper's overrides is ``<race folder>/seed=S,arm=NAME`` (composed here
    as the launcher composes it; the reference race runs the same overrides end to end), with the
    whole value in the job's configuration."""
    import re
    from types import SimpleNamespace

    from harness.config import compose
    from hydra_plugins.harness_sweeper.race_impl import RaceSweeperImpl, arm_name

    values = [f"/data/{'x' * 200}/train", f"/data/{'x' * 200}/valid"]
    names = [arm_name("train.kwargs.tag", v) for v in values]
    assert len(set(names)) == 2 and all(len(n) <= 48 and n.startswith("tag__data_xxx") for n in names)
    assert arm_name("optim.lr", "0.01") == "lr_0.01"  # a plain value keeps its readable name
    args = [*PLAIN, "train.fn=tests.sequential_fns.sets_env", "+train.kwargs.tag=x", f"train.kwargs.tag={','.join(values)}"]
    impl = RaceSweeperImpl(None)
    impl.hydra_context = SimpleNamespace(config_loader=None)
    impl.config = compose(args[:-1], return_hydra_config=True)
    base, extra = impl._configurations(args)
    assert re.findall(r"(tag_\w+): ", extra[1]) == names
    folder = impl._job_folder_overrides(base + extra, "/tmp/the race")
    for name, value in zip(names, values):
        job = compose(base + extra + folder + ["seed=3", f"arm={name}"], return_hydra_config=True)
        assert (job.hydra.sweep.dir, job.hydra.sweep.subdir) == ("/tmp/the race", f"seed=3,arm={name}")
        assert job.ab.factor == "train.kwargs.tag" and job.ab.arms[name] == value


@pytest.mark.slow
def test_analyze_folder_does_not_overwrite_a_race_folders_analysis(reference):
    import harness
    from harness import HarnessError

    before = (reference / "analysis.json").read_bytes()
    with pytest.raises(HarnessError, match="holds a race"):
        harness.analyze_folder(reference)
    assert (reference / "analysis.json").read_bytes() == before


@pytest.mark.slow
def test_a_race_at_its_seed_limit_returns_its_survivors_and_its_screen_counts_every_run(tmp_path):
    """At ab.race.max_seeds with two configurations neither separated nor within the margin, the race
    returns the set of survivors (status max_seeds), not "indistinguishable from the best" (the
    within-margin stop); a configuration dropped because it diverged is named on the look's line, and
    the seeds spent count every run trained (the diverged configuration's whole first batch too)."""
    out = tmp_path / "limit"
    proc = run_cli(["-m", "hydra/sweeper=harness_race", *[o for o in PLAIN if "sd=" not in o and "ab.race." not in o],
                    "+train.kwargs.sd=5.0", "ab.race.min_seeds=4", "ab.race.max_seeds=4",
                    "train.fn=tests.sequential_fns.diverges", "+train.kwargs.nan_shift=9.0", "+train.kwargs.nan_seed=1",
                    "train.kwargs.shift=0.0,0.5,9.0", f"hydra.sweep.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    race = read_json(out / "race.json")
    assert race["outcome"] == "max_seeds" and race["status"] == "max_seeds" and race["set"] == ["shift_0.0", "shift_0.5"]
    assert "indistinguishable" not in race["verdict"]
    behind = min(("shift_0.0", "shift_0.5"), key=lambda c: race["configs"][c]["mean"])
    c = race["configs"][behind]
    assert c["status"] == "in the set"  # the race is over: no configuration is still running
    assert race["verdict"].startswith("the race reached its maximum of 4 seeds with shift_0.0, shift_0.5 still in "
                                      f"it: not separated ({behind} {c['difference']:+.3g} pts [{c['interval'][0]:+.3g}, "
                                      f"{c['interval'][1]:+.3g}]")
    assert f"**{race['verdict']}**" in (out / "report.md").read_text()
    trained = len(load_tree(out).results)
    assert trained == 12 and race["seeds_spent"] == trained  # 4 seeds x 3: the diverged one's batch ran too
    screen = proc.stdout + proc.stderr
    look = next(line for line in screen.splitlines() if "race look 1 at 4 seeds" in line)
    assert "dropped shift_9.0 (diverged at seed 1" in look
    assert f"Seeds spent {trained} of 12" in screen
