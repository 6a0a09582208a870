"""The sequential mode wired into the harness: in process, resumed after a kill, through the sweeper.

The runs use tests/sequential_fns.paired_metric, a training function with no training whose metric
is a fixed function of (seed, arm): three arms, B a little better than the baseline A (settled at
the third look), C much worse (settled at the first look, then it gets no more seeds).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results import load_tree, read_json

from .conftest import REPO, compose_cfg, run_cli

SYN = [
    "+experiment=loss_ab", "workers=1", "logger=none", "progress=false", "data.train_limit=64",
    "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0", "+train.kwargs.sd=1.0",
    "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.6", "+ab.arms.C=-6.0",
    "ab.sequential.max_seeds=20", "stats.margin=null",
    "determinism.threads=1",  # auto resolves from the load of the moment (tests of auto: test_threads.py)
]
SEQ = SYN + ["ab.sequential.enabled=true"]


def _runs(root: Path) -> dict:
    return {(r["seed"], r["arm"]): r["fingerprints"]["final"] for r in load_tree(root).results}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted in-process run (the Python API calls the same execute as the CLI)."""
    from harness.api import run

    out = tmp_path_factory.mktemp("seq_ref")
    res = run(SEQ, out_dir=out, verbose=False)
    assert res.analysis is not None
    return out


def test_in_process_run_stops_when_settled_and_drops_the_worse_arm(reference):
    seq = read_json(reference / "sequential.json")
    assert seq["status"] == "settled" and seq["design"]["looks"][:3] == [8, 10, 12]
    b, c = seq["arms"]["B"], seq["arms"]["C"]
    assert [x["decision"] for x in b["looks"]] == ["continue", "continue", "better"]
    assert [x["n"] for x in b["looks"]] == [8, 10, 12] and b["seeds"] == list(range(12))
    assert [x["decision"] for x in c["looks"]] == ["worse"] and c["seeds"] == list(range(8))
    for x in b["looks"] + c["looks"]:  # each look carries its boundaries and interval
        assert x["interval"][0] < x["estimate"] < x["interval"][1] and x["critical"] > 2
    # C stopped getting seeds at its first look; A and B went on to 12 seeds, and no further
    runs = _runs(reference)
    assert {s for s, a in runs if a == "C"} == set(range(8))
    assert {s for s, a in runs if a == "A"} == {s for s, a in runs if a == "B"} == set(range(12))
    analysis = read_json(reference / "analysis.json")
    assert analysis["sequential"] == seq and analysis["comparisons"]["B"]["n_pairs"] == 12
    assert (reference / "sequential.png").stat().st_size > 5000
    report = (reference / "report.md").read_text()
    assert "Sequential looks (settled)" in report and "sequential decision (worse): C is worse than A" in report


def test_the_screen_leads_with_the_sequential_decision_and_labels_fixed_n_numbers_information(reference):
    from harness.analysis.render.summary import lines

    screen = lines(read_json(reference / "analysis.json"))
    assert screen[0].endswith(": sequential decision")
    verdicts = [line for line in screen[1:] if line.startswith("  ")][:2]
    assert any("better" in v and v.lstrip().startswith("B") for v in verdicts), screen
    fixed = [line for line in screen if line.startswith("fixed-N reading of")]
    assert fixed and all("(information only" in line for line in fixed)
    assert screen.index(fixed[0]) > 1  # below the decisions, never above them
    assert not any(line.startswith("  undecided") for line in screen)  # no fixed-N verdict as a verdict


def test_report_flags_skewed_differences(reference):
    import copy

    from harness.analysis.render.report import sequential_sections

    analysis = read_json(reference / "analysis.json")
    assert not any("skewed" in n for n in sequential_sections(analysis)[0].notes)
    skewed = copy.deepcopy(analysis)
    skewed["sequential"]["arms"]["B"]["looks"][-1]["skewness"] = -1.4
    assert any(n.startswith("skewed differences at the last look (B -1.40)") for n in sequential_sections(skewed)[0].notes)


@pytest.mark.slow
def test_killed_run_continues_at_the_right_look_with_the_same_decisions(tmp_path, reference, capsys):
    out = tmp_path / "killed"
    args = SEQ + [f"hydra.run.dir={out}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_TEST_HOLD_FROM_SEED": "9"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # seeds 0-7 for three arms, seed 8 for A and B; then seed 9 blocks: 26 results, part-way through a batch
    deadline = time.monotonic() + 240
    while len(list(out.rglob("result.json"))) < 26 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p: p.read_bytes() for p in out.rglob("result.json")}
    assert len(before) == 26
    assert [x["n"] for x in read_json(out / "sequential.json")["arms"]["B"]["looks"]] == [8]

    from harness.api import run

    run(SEQ, out_dir=out)  # the same experiment into the same folder (the API runs what the CLI runs)
    log = capsys.readouterr().out
    assert "next batch, seeds 9 for arms A, B" in log  # one seed completes the second look
    for path, content in before.items():  # finished runs were not run again
        assert path.read_bytes() == content
    assert _runs(out) == _runs(reference)
    assert read_json(out / "sequential.json") == read_json(reference / "sequential.json")


# basic: the three-arm run (an arm dropped, per-arm batches); joblib: two arms, two looks (fewer jobs
# to start in the pool's workers)
@pytest.mark.slow
@pytest.mark.parametrize("launcher, more", [("basic", []), ("joblib", ["~ab.arms.C", "ab.arms.B=1.6"])])
def test_sweeper_gives_the_in_process_decisions(tmp_path, reference, launcher, more):
    from harness.api import run

    if more:
        reference = tmp_path / "in_process"
        run(SEQ + more, out_dir=reference, verbose=False)
        assert len(read_json(reference / "sequential.json")["arms"]["B"]["looks"]) == 3
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "hydra/sweeper=harness_sequential", f"hydra/launcher={launcher}", *SYN, *more,
                    f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _runs(sweep) == _runs(reference)  # the same (seed, arm) runs, the same bits
    assert read_json(sweep / "sequential.json") == read_json(reference / "sequential.json")
    analysis = read_json(sweep / "analysis.json")
    assert analysis["sequential"]["arms"]["B"]["decision"] == "better"
    assert analysis["comparisons"] == read_json(reference / "analysis.json")["comparisons"]
    folders = {p.parents[3] for p in sweep.rglob("result.json")}  # <job folder>/runs/seed=S/arm=A/result.json
    assert len(folders) == len(_runs(reference))  # initial_job_idx grew: one job folder per (seed, arm)


@pytest.mark.slow
def test_bad_sequential_config_fails_before_any_run(tmp_path):
    out = tmp_path / "bad"
    proc = run_cli(SEQ + ["ab.sequential.max_seeds=4", "ab.sequential.min_seeds=8", f"hydra.run.dir={out}"])
    assert proc.returncode == 2
    assert "ab.sequential.max_seeds=4 is below ab.sequential.min_seeds=8" in proc.stderr
    assert "Nothing was run" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(out.rglob("result.json")) and not (out / "sequential.json").exists()

    sweep = tmp_path / "bad_sweep"
    proc = run_cli(["-m", "hydra/sweeper=harness_sequential", *SYN, "ab.sequential.seeds_per_look=0",
                    "ab.sequential.equivalence=true", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 2
    assert "ab.sequential.seeds_per_look=0 must be an integer >= 1" in proc.stderr
    assert "ab.sequential.equivalence=true asks for 'equivalent' claims, but stats.margin=None" in proc.stderr
    assert "Traceback" not in proc.stderr and not sweep.exists()


@pytest.mark.parametrize("overrides, words", [
    (["ab.sequential.seeds_per_look=0"], "ab.sequential.seeds_per_look=0 must be an integer >= 1"),
    (["ab.sequential.max_seeds=5", "ab.sequential.min_seeds=6"], "max_seeds=5 is below ab.sequential.min_seeds=6"),
    (["ab.sequential.max_seeds=4"], "max_seeds=4 is below the first look at 7 seeds"),
    (["ab.sequential.equivalence=true"], "equivalence is only claimed within a margin declared before the data"),
    (["stats.margin=0", "ab.sequential.equivalence=true"], "but stats.margin=0.0: equivalence"),
    (["stats.margin=-1"], "stats.margin=-1 must be a number >= 0"),
    (["stats.margin=auto"], "stats.margin=auto cannot be used in sequential mode"),
    (["ab.sequential.margin=0.3"], "the margin is declared once, for every mode, at stats.margin"),
    (["ab.sequential.min_seeds=5"], "a claim needs at least 7 seeds"),
    (["ab.sequential.spending=linear"], "allowed: pocock, obrien-fleming, hsd"),
    (["ab.sequential.futility_rule=worse"], "ab.sequential.futility_rule='worse' is not a futility rule; allowed: reach"),
    (["ab.sequential.alpha=0.7"], "ab.sequential.alpha=0.7 must be a number between 0 and 0.5"),
    (["ab.sequential.futility_from=4"], "ab.sequential.futility_from=4 asks for futility-only looks before the first "
                                        "claim look, which need ab.sequential.futility_rule=better (got reach"),
    (["ab.sequential.futility_rule=better", "ab.sequential.futility_from=2"],
     "ab.sequential.futility_from=2 must be an integer >= 3 or null"),
    (["ab.sequential.max_failures=-1"], "ab.sequential.max_failures=-1 must be an integer >= 0"),
])
def test_each_bad_value_is_named_with_what_is_allowed(overrides, words):
    from harness.config.declaration import Declaration
    from harness.config.preflight import check_settings
    from harness.config.sequential_design import design_of

    cfg = compose_cfg(SEQ + overrides)
    with pytest.raises(ValueError) as e:
        design_of(Declaration.from_config(cfg))
    assert words in str(e.value)
    if "first look" not in words and "needs at least" not in words:  # range checks: in the preflight too
        assert any(words in p for p in check_settings(cfg, list(cfg.ab.arms)))


@pytest.mark.slow
def test_design_follows_the_config():
    from harness.config.declaration import Declaration
    from harness.config.sequential_design import design_of

    d = design_of(Declaration.from_config(compose_cfg(SEQ + ["stats.margin=0.3", "stats.metric=test_loss"])))
    assert (d.direction, d.margin, d.equivalence, d.arms, d.min_seeds) == ("min", 0.3, True, 2, 7)
    d = design_of(Declaration.from_config(compose_cfg(SEQ + ["~ab.arms.C", "ab.sequential.alpha=0.1",
                                                             "ab.sequential.equivalence=false", "stats.margin=0.5"])))
    assert (d.direction, d.alpha, d.equivalence, d.arms, d.min_seeds) == ("max", 0.1, False, 1, 5)


@pytest.mark.slow
def test_a_changed_design_is_refused_on_resume(tmp_path, reference):
    import shutil

    from harness.api import run
    from harness import HarnessError

    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    before = sorted(out.rglob("result.json"))
    with pytest.raises(HarnessError, match=r"holds a sequential run declared with another design "
                                           r"\(seeds_per_look 2 -> 3\)"):
        run(SEQ + ["ab.sequential.seeds_per_look=3"], out_dir=out, verbose=False)
    assert sorted(out.rglob("result.json")) == before


@pytest.mark.slow
def test_failed_runs_count_for_no_arm_and_past_the_budget_stop_the_run(tmp_path):
    from harness.experiment.execute import execute

    two = SEQ + ["~ab.arms.C", "+train.kwargs.fail_seed=2", "+train.kwargs.fail_shift=1.6"]  # seed 2 of B fails
    done = execute(compose_cfg(two + ["ab.sequential.max_failures=1"]), tmp_path / "within", say=lambda m: None,
                   show_table=False)
    seq = done.analysis["sequential"]
    assert done.analysis_error is None and seq["status"] == "settled"
    assert seq["failed"][0]["seed"] == 2 and seq["failed"][0]["arm"] == "B"
    assert "planned failure of seed 2" in seq["failed"][0]["reason"]
    assert 2 not in seq["arms"]["B"]["seeds"] and seq["arms"]["B"]["seeds"][:3] == [0, 1, 3]
    assert {(e["seed"], e["arm"]) for e in done.analysis["excluded"]} == {(2, "A"), (2, "B")}  # B failed; A unpaired

    out = tmp_path / "over"  # max_failures defaults to 0; app.run exits 1 with analysis_error
    done = execute(compose_cfg(two), out, say=lambda m: None, show_table=False)
    assert done.analysis_error.startswith(
        "sequential run stopped unsettled: 1 failed run(s), more than ab.sequential.max_failures=0")
    assert "seed 2 arm B: failed: RuntimeError: planned failure of seed 2" in done.analysis_error
    seq = read_json(out / "sequential.json")
    assert seq["status"] == "stopped" and len(load_tree(out).results) == 14  # the first batch only (7 seeds)


def test_plugin_is_discovered_and_light():
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    assert "HarnessSequentialSweeper" in [x.__name__ for x in Plugins.instance().discover(Sweeper)]
    assert not (REPO / "hydra_plugins" / "__init__.py").exists()  # a namespace package: others' plugins live there too
    from harness.config import compose

    hydra_cfg = compose(["+experiment=loss_ab", "hydra/sweeper=harness_sequential"], return_hydra_config=True)
    assert hydra_cfg.hydra.sweeper._target_.endswith("HarnessSequentialSweeper")
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, hydra_plugins.harness_sweeper.sequential_sweeper; "
                               "print(sorted({'torch', 'scipy', 'harness'} & set(sys.modules)))"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_looks_become_history_of_the_wandb_analysis_run(reference, tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from harness.tracking.tracker import open_tracker

    from . import wandb_reader

    for var in [v for v in os.environ if v.startswith("WANDB_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = OmegaConf.create({"logger": {"name": "wandb", "wandb": {
        "project": None, "entity": None, "mode": "offline", "init_timeout": 30.0, "tags": [], "history_every": 1}}})
    tracker = open_tracker(cfg, tmp_path, group="seq:test")
    tracker.log_analysis(read_json(reference / "analysis.json"), reference)
    assert tracker.close() == []
    [run] = wandb_reader.read_runs(tmp_path / "wandb")
    flat = [_flat(row) for row in run.history if any(k.startswith("sequential/") for k in _flat(row))]
    assert [f["sequential/seeds"] for f in flat] == [8, 10, 12]  # a row per look, in order
    assert flat[0]["sequential/C/decision"] == "worse" and "sequential/C/estimate" not in flat[1]
    assert flat[2]["sequential/B/decision"] == "better"
    b = read_json(reference / "sequential.json")["arms"]["B"]["looks"]
    assert [f["sequential/B/lower"] for f in flat] == [x["interval"][0] for x in b]


def _flat(row, prefix=""):
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.slow
def test_reanalysing_a_sequential_folder_rewrites_its_files_byte_for_byte(tmp_path, reference):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(reference, folder)
    assert (folder / "certificate.json").is_file() and (folder / "sequential.json").is_file()
    before = {name: (folder / name).read_bytes() for name in ("analysis.json", "report.md")}
    done = run_cli([str(folder)], module="harness.analyze")
    assert done.returncode == 0, done.stderr
    for name, content in before.items():
        assert (folder / name).read_bytes() == content, name


def test_futility_only_looks_stop_a_run_heading_nowhere_before_the_first_claim_look(tmp_path):
    """ab.sequential.futility_from: the run looks at 3, 5, ... seeds, where no claim is possible, and an arm
    far below the baseline stops there; the record, the report and the screen say what such a look is."""
    from harness.api import run

    res = run(SEQ + ["~ab.arms.C", "ab.arms.B=-3.0", "ab.sequential.futility_rule=better",
                     "ab.sequential.futility_from=3"], out_dir=tmp_path, verbose=False)
    seq = read_json(tmp_path / "sequential.json")
    assert seq["design"]["futility_looks"] == list(range(3, seq["design"]["looks"][0], 2))
    look = seq["arms"]["B"]["looks"][-1]
    assert seq["arms"]["B"]["decision"] == "futile" and look["n"] == 3 and look["look"] == 1
    assert look["nominal_alpha"] == 0 and look["interval"] == [None, None] and look["critical"] is None
    assert "B is not shown better than A" in seq["arms"]["B"]["sentence"]
    assert "after 3 seeds, look 1 of" in seq["arms"]["B"]["sentence"]
    assert set(_runs(tmp_path)) == {(s, a) for s in range(3) for a in "AB"}  # no seed more
    report = (tmp_path / "report.md").read_text()
    assert "— (futility-only look)" in report and "futility-only looks at 3, 5" in report
    assert res.analysis["sequential"] == seq
