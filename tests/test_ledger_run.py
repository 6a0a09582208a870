"""stats.fdr end to end: the level the ledger gives before the data is the one the verdict uses,
a rerun reproduces it, and a ledger changed afterwards changes no past verdict. The module's
experiment runs under LOND-dep (stats.fdr.method=lond_dep: any dependence between claims), with a
training function that copies declaration.json as each run starts (tests/ledger_fns.py)."""

from __future__ import annotations

import json

import pytest

from harness.analysis.analyze import analyze_dir
from harness.ledger.store import Ledger
from harness.stats.fdr import online as ofdr
from harness.stats.fdr.asynchronous import next_alpha
from harness.stats.fdr.dependent import DEPENDENT

SYN = [  # a training function with no training (tests/sequential_fns.py): an effect of 4 on 3 seeds, the fewest
    # a claim rests on: a sweep job or a process costs far more than a seed's run
    "+experiment=loss_ab", "workers=1", "logger=none", "progress=false", "data.train_limit=64",
    "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0", "+train.kwargs.sd=1.0",
    "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=4.0", "ab.seeds=[0,1,2]",
    "stats.margin=null", "determinism.threads=1", "repro.certificate=false", "stats.bootstrap_resamples=999",
]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    from harness.api import run

    tmp = tmp_path_factory.mktemp("fdr")
    ledger = tmp / "ledger.sqlite"
    # 4 seeds: the exact test's floor, 2 / 2^4 = 0.125, lets an alternative analysis at alpha 0.2 decide
    args = [*SYN, "ab.seeds=[0,1,2,3]", "train.fn=tests.ledger_fns.declared_then_metric",
            f"+train.kwargs.seen={tmp / 'seen'}", f"ledger.path={ledger}", "stats.fdr.method=lond_dep", "stats.fdr.level=0.1"]
    first = run(args, out_dir=tmp / "e1", verbose=False)
    return tmp, ledger, args, first


def test_the_level_written_before_the_data_is_the_one_the_verdict_used(ran):
    tmp, ledger, _, first = ran
    declared = json.loads((tmp / "e1" / "declaration.json").read_text())
    expected = next_alpha("lond_dep", [], [], level=0.1)  # the first claim of an empty ledger
    assert expected == pytest.approx(DEPENDENT["lond_dep"]([1.0], level=0.1).alpha[0], rel=1e-12)
    assert declared["alpha"] == declared["fdr"]["alpha_t"] == pytest.approx(expected, rel=1e-12)
    seen = [json.loads(f.read_text()) for f in sorted((tmp / "seen").glob("*.json"))]
    assert len(seen) == 8 and all(s.get("fdr") == declared["fdr"] for s in seen)  # every run started after it
    assert first.analysis["alpha"] == declared["alpha"]
    report = (tmp / "e1" / "report.md").read_text()
    assert f"at α_t = {expected:.4g} (LOND-dep at FDR 0.1, claim 1 of this ledger)" in report
    (claim,) = Ledger(ledger).claims()
    assert claim["alpha"] == declared["alpha"] and claim["test"] == declared["fdr"]["test"]
    (test,) = Ledger(ledger).tests()
    assert test["pvalue"] == claim["p_decision"] and test["rejected"] == int(claim["p_decision"] <= claim["alpha"])


def test_a_rerun_reproduces_it_and_adds_no_row(ran):
    from harness.api import run

    tmp, ledger, args, first = ran
    again = run(args, out_dir=tmp / "e1", verbose=False)
    assert again.analysis["alpha"] == first.analysis["alpha"]
    assert len(Ledger(ledger).claims()) == 1 and len(Ledger(ledger).tests()) == 1


@pytest.mark.slow
def test_a_misspelt_fdr_key_or_an_unknown_method_fails_at_compose_naming_the_methods(compose_fn):
    from omegaconf import OmegaConf

    from harness.config import compose_error
    from harness.config.declaration import Declaration
    from harness.config.metric_spec import DeclarationError
    from harness.config.fdr_spec import FDR_METHODS

    assert FDR_METHODS == ("none", *ofdr.ALL_METHODS)  # the schema offers every method the ledger computes
    with pytest.raises(Exception, match="methd"):
        compose_fn([*SYN, "stats.fdr.methd=lord++"])
    with pytest.raises(Exception) as refused:
        compose_fn([*SYN, "stats.fdr.method=lord"])
    said = compose_error(refused.value)
    assert "stats.fdr.method=lord" in said
    assert "expected one of [none, lond, lord++, saffron, addis, lond_dep, lord_dep]" in said
    for method in ofdr.ALL_METHODS:
        assert Declaration.from_config(compose_fn([*SYN, f"stats.fdr.method={method}"])).fdr["method"] == method
    recorded = OmegaConf.to_container(compose_fn(SYN), resolve=True, enum_to_str=True)
    recorded["stats"]["fdr"]["method"] = "lord"  # a result's recorded config is checked at declaration
    with pytest.raises(DeclarationError, match="'lord' is not an online FDR method; one of none, lond, lord\\+\\+"):
        Declaration.from_config(recorded)
    with pytest.raises(DeclarationError, match="fixed-seed A/B"):
        Declaration.from_config(compose_fn([*SYN, "stats.fdr.method=lond", "ab.sequential.enabled=true"]))
    assert Declaration.from_config(compose_fn(SYN)).fdr is None  # the default: today's behaviour


@pytest.mark.slow
def test_harness_analyze_records_an_alternative_flagged_in_the_experiments_ledger(ran, monkeypatch, capsys):
    from harness.tools import analyze

    tmp, ledger, _, first = ran
    monkeypatch.chdir(tmp)  # no outputs/ledger.sqlite here: the declaration names the experiment's ledger
    before = Ledger(ledger).claims(alternatives=True)
    assert analyze.main([str(tmp / "e1"), "--alpha", "0.2"]) == 0
    rows = Ledger(ledger).claims(alternatives=True)
    new = [r for r in rows if r["id"] not in {b["id"] for b in before}]
    assert [(r["alternative"], r["alpha"]) for r in new] == [(1, 0.2)] and "alpha 0.2" in new[0]["claim"]
    # the verdict at alpha_t (4 seeds: its exact test's p cannot go below 2 / 2^4 = 0.125) is not the one at 0.2
    assert (before[0]["verdict"], new[0]["verdict"]) == ("undecided", "better")
    assert before[0]["verdict"] == first.analysis["comparisons"]["B"]["verdict"]["code"]
    assert analyze.main([str(tmp / "e1"), "--alpha", "0.2"]) == 0  # the same alternative again: no row
    assert len(Ledger(ledger).claims(alternatives=True)) == len(rows)
    assert not (tmp / "outputs").exists()


def test_a_ledger_changed_afterwards_changes_no_past_verdict(ran):
    tmp, ledger, _, first = ran
    aside = ledger.with_suffix(".aside")
    ledger.rename(aside)  # the ledger gone (or replaced) after the verdict
    try:
        later = analyze_dir(tmp / "e1", write=False)
    finally:
        aside.rename(ledger)
    assert later["alpha"] == first.analysis["alpha"]
    assert later["comparisons"]["B"]["verdict"] == first.analysis["comparisons"]["B"]["verdict"]


@pytest.mark.slow
def test_a_sequential_runs_decision_is_recorded_once(tmp_path):
    from harness.api import run

    ledger = tmp_path / "ledger.sqlite"
    args = [*[a for a in SYN if not a.startswith("ab.seeds")], "ab.sequential.enabled=true", "ab.sequential.max_seeds=8",
            f"ledger.path={ledger}"]
    first = run(args, out_dir=tmp_path / "seq", verbose=False)
    run(args, out_dir=tmp_path / "seq", verbose=False)  # resumed: nothing new to claim
    (claim,) = Ledger(ledger).claims()
    assert claim["verdict"] == first.analysis["comparisons"]["B"]["verdict"]["code"]
    assert claim["alpha"] == first.analysis["alpha"] == 0.05


@pytest.mark.slow
def test_two_experiments_started_at_once_each_claim_once_at_their_own_places(tmp_path):
    import subprocess
    import sys

    from .conftest import REPO

    ledger = tmp_path / "ledger.sqlite"
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-m", "harness", *SYN, f"ledger.path={ledger}", "stats.fdr.method=lord++",
                               f"hydra.run.dir={tmp_path / name}"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("one", "two")]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    claims, tests = Ledger(ledger).claims(), Ledger(ledger).tests()
    assert sorted(c["folder"] for c in claims) == sorted(str((tmp_path / n).resolve()) for n in ("one", "two"))
    declared = {n: json.loads((tmp_path / n / "declaration.json").read_text())["fdr"] for n in ("one", "two")}
    assert sorted(d["claim"] for d in declared.values()) == [1, 2]
    first = next_alpha("lord++", [], [], level=0.1)
    assert sorted(t["alpha"] for t in tests) == sorted(d["alpha_t"] for d in declared.values())
    assert first in [t["alpha"] for t in tests]


@pytest.mark.slow
def test_a_sweep_takes_one_level_before_its_jobs_and_a_grid_is_refused(tmp_path):
    """A sweep is one experiment: its launcher takes alpha_t from the ledger before any job, writes it
    into the sweep's declaration.json, and its analysis decides that one test. A grid (a key swept
    besides seed and arm) would put each setting's claim under one level: refused, no job launched."""
    from .conftest import run_cli

    ledger, sweep = tmp_path / "ledger.sqlite", tmp_path / "sweep"
    fdr = [f"ledger.path={ledger}", "stats.fdr.method=lord++", "stats.fdr.level=0.1"]
    proc = run_cli(["-m", *SYN, *fdr, "seed=range(0,3)", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    declared = json.loads((sweep / "declaration.json").read_text())
    expected = next_alpha("lord++", [], [], level=0.1)
    assert declared["alpha"] == declared["fdr"]["alpha_t"] == pytest.approx(expected, rel=1e-12)
    analysis = json.loads((sweep / "analysis.json").read_text())
    assert analysis["alpha"] == declared["alpha"]
    (claim,) = Ledger(ledger).claims()
    (test,) = Ledger(ledger).tests()
    assert claim["test"] == test["id"] == declared["fdr"]["test"] and claim["alpha"] == declared["alpha"]
    assert test["pvalue"] == claim["p_decision"] and test["decision_time"] == 1
    grid = run_cli(["-m", *SYN, *fdr, "seed=range(0,3)", "data.train_limit=64,128", f"hydra.sweep.dir={tmp_path / 'g'}"],
                   cwd=tmp_path)
    assert grid.returncode == 2 and "is a grid over data.train_limit" in grid.stderr and "No job was launched" in grid.stderr
    assert not list((tmp_path / "g").rglob("result*.json")) and len(Ledger(ledger).tests()) == 1


@pytest.mark.slow
def test_a_race_with_stats_fdr_is_refused_before_any_run(tmp_path):
    from .conftest import run_cli

    out = tmp_path / "race"
    plain = [o for o in SYN if not o.startswith(("ab.", "+train.kwargs.shift"))]
    proc = run_cli(["-m", "hydra/sweeper=harness_race", *plain, "+train.kwargs.shift=0.0", "train.kwargs.shift=0.0,4.0", "stats.margin=1.0", f"ledger.path={tmp_path / 'l.sqlite'}",
                    "stats.fdr.method=lord++", f"hydra.sweep.dir={out}"], cwd=tmp_path)
    assert proc.returncode == 2 and "a race decides by intervals" in proc.stderr, proc.stderr[-2000:]
    assert not list(out.rglob("result*.json")) and not (tmp_path / "l.sqlite").exists()
