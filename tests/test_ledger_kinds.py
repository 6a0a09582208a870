"""Issue 32: the claims of ab.conditions, of a grid's points and of a race go into the ledger, one row
per claim, and re-analysing them adds none. The runs use tests/sequential_fns.paired_metric (no
training); the grid and the race run as real sweeps, in a subprocess, as a user would start them."""

from __future__ import annotations

import pytest

import harness
from harness.ledger.store import Ledger
from harness.results import read_json

from .conftest import run_cli

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

CHEAP = [
    "+experiment=loss_ab", "workers=1", "ab.seeds=[0,1,2]", "logger=none", "progress=false", "determinism.threads=1",
    "repro.certificate=false", "train.fn=tests.sequential_fns.paired_metric", "ab.factor=train.kwargs.shift",
    "+train.kwargs.shift=0.0", "+train.kwargs.sd=1.0", "ab.arms={A: 0.0, B: 3.0}", "stats.bootstrap_resamples=999",
]


def test_conditions_record_the_average_once_and_reanalysis_adds_none(tmp_path, monkeypatch):
    from harness.analysis.conditions import analyze_conditions_dir

    ledger = tmp_path / "ledger.sqlite"
    out = tmp_path / "exp"
    res = harness.run([*CHEAP, "ab.conditions={quiet: ['+train.kwargs.sd=0.3'], mid: ['+train.kwargs.sd=0.6'], noisy: ['+train.kwargs.sd=1.2']}",
                       f"ledger.path={ledger}"], out_dir=out, verbose=False)
    (row,) = Ledger(ledger).claims()  # one claim: B against A on average (not one per condition)
    pooled = res.analysis["across_conditions"]["B"]["pooled"]
    assert row["claim"] == "B vs A on test_accuracy, on average across 3 conditions"
    assert row["folder"] == str(out.resolve()) and row["effect"] == pytest.approx(pooled["estimate"])
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(pooled["ci"]) and row["p_decision"] == pooled["pvalue"]
    assert row["verdict"] == "better" and row["alpha"] == res.analysis["alpha"]
    monkeypatch.setenv("HARNESS_LEDGER", str(ledger))  # python -m harness.analyze's ledger: the default one
    analyze_conditions_dir(out)
    assert len(Ledger(ledger).claims()) == 1


def test_a_grid_sweep_records_each_points_claims_once(tmp_path, monkeypatch):
    from harness.tools.analyze import main

    ledger = tmp_path / "ledger.sqlite"
    sweep = tmp_path / "grid"
    proc = run_cli(["-m", *CHEAP, "data.train_limit=64,128", f"ledger.path={ledger}", f"hydra.sweep.dir={sweep}"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    grid = read_json(sweep / "grid.json")
    rows = Ledger(ledger).claims()
    assert sorted(r["claim"] for r in rows) == [f"B vs A on test_accuracy at data.train_limit={n}" for n in (128, 64)]
    for point in grid["points"]:
        (row,) = [r for r in rows if r["folder"] == str((sweep / point["folder"]).resolve())]
        own = read_json(sweep / point["folder"] / "analysis.json")["comparisons"]["B"]
        assert row["effect"] == own["mean_diff"] and row["p_decision"] == own["decision"]["pvalues"]["zero"]
    monkeypatch.setenv("HARNESS_LEDGER", str(ledger))
    assert main([str(sweep), "--grid"]) == 0  # re-analysed: no new row
    assert main([str(sweep), "--grid", "--alpha", "0.01"]) == 0  # an alternative: flagged, never counted
    assert len(Ledger(ledger).claims()) == 2
    alternatives = [r for r in Ledger(ledger).claims(alternatives=True) if r["alternative"]]
    assert len(alternatives) == 2 and all("alpha" in r["departures"] for r in alternatives)


def test_a_settled_race_records_each_configuration_against_the_best_once(tmp_path, monkeypatch):
    from harness.tools.analyze import main

    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "race"
    proc = run_cli(["-m", "hydra/sweeper=harness_race", *[o for o in CHEAP if not o.startswith(("ab.", "+train.kwargs.shift"))],
                    "+train.kwargs.shift=0.0", "train.kwargs.sd=0.3", "stats.margin=1.0", "ab.race.min_seeds=3",
                    "ab.race.seeds_per_look=2", "ab.race.max_seeds=8", "train.kwargs.shift=0.0,3.0",
                    f"ledger.path={ledger}", f"hydra.sweep.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    race = read_json(out / "analysis.json")["race"]
    assert race["outcome"] == "one_left"
    (row,) = Ledger(ledger).claims()
    (loser,) = [c for c in race["configs"] if c != race["leader"]]
    assert row["arm"] == loser and row["baseline"] == race["leader"] == race["winner"]
    assert row["verdict"] == "dropped" and row["effect"] == race["configs"][loser]["difference"]
    assert row["p_decision"] is None  # decided by intervals: not in the offline BH / BY view
    monkeypatch.setenv("HARNESS_LEDGER", str(ledger))
    assert main([str(out)]) == 0
    assert len(Ledger(ledger).claims()) == 1
