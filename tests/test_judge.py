"""python -m harness.judge: a keep / discard / undecided judgement of a code change, for research loops.

Every test makes a scratch git repository in tmp_path: a command arm (a script printing a score for a
seed) whose effect file a candidate edits. The baseline's units are reused across judgements of one
baseline commit, and each judgement is one test of the ledger's online FDR stream."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from pathlib import Path

import pytest

from harness.stats.fdr.asynchronous import next_alpha
from harness.tools.judge.cli import main

from .conftest import run_cli
from .test_code_arms import _git
from .test_scripts import import_script

TRAIN = textwrap.dedent('''
    import argparse, random
    from effect import EFFECT, NOISE
    p = argparse.ArgumentParser(); p.add_argument("--seed", type=int); a = p.parse_args()
    # the seed's own variation, shared by both arms (paired), plus the candidate's noise around its effect
    print("score", 10 + random.Random(a.seed).gauss(0, 1) + EFFECT + NOISE * random.Random(7919 + a.seed).gauss(0, 1))
''')
CONF = textwrap.dedent('''
    # @package _global_
    experiment_name: judged
    train:
      cmd: python train.py
      metrics_from: {stdout: {score: 'score ([-0-9.e]+)'}}
    stats: {metric: score, margin: null, metrics: {score: max}}
    ab: {factor: code, arms: {A: main, B: WORKTREE}, seeds: [0, 1, 2], sequential: {max_seeds: 12}}
''')
FAST = ["+experiment=judged", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
        "repro.certificate=false"]


def _effect(repo: Path, effect: float, noise: float = 0.0) -> None:
    (repo / "effect.py").write_text(f"EFFECT = {effect}\nNOISE = {noise}\n")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A scratch repository: train.py and effect.py (no effect) committed on main; the launch folder."""
    repo = tmp_path / "project"
    (repo / "conf" / "experiment").mkdir(parents=True)
    (repo / "conf" / "experiment" / "judged.yaml").write_text(CONF)
    (repo / "train.py").write_text(TRAIN)
    _effect(repo, 0.0)
    (repo / ".gitignore").write_text("outputs/\n__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "baseline")
    monkeypatch.chdir(repo)
    return repo


def _judge(repo: Path, *args, ledger: Path):
    proc = run_cli(["--config-dir", "conf", "--ledger", str(ledger), *args, *FAST], cwd=repo, module="harness.judge")
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-3000:]  # one JSON object on stdout, nothing else
    return proc.returncode, json.loads(lines[0]), proc.stderr


def _tests(ledger: Path) -> list[dict]:
    con = sqlite3.connect(ledger)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT * FROM tests ORDER BY id")]


@pytest.mark.slow  # two judgements: python -m harness.judge spawns python -m harness
def test_keep_then_discard_reuses_the_baseline_and_takes_the_ledgers_next_level(project, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    base = _git(project, "rev-parse", "HEAD")
    _effect(project, 1.0)  # the working tree: a clear improvement
    rc, first, err = _judge(project, "--baseline", "main", ledger=ledger)
    assert rc == 0 and first["verdict"] == "keep", err[-3000:]
    assert first["decision"] == "better" and first["effect"] == pytest.approx(1.0)
    assert first["p"] <= first["alpha_t"] == first["ledger"]["alpha_t"]
    assert first["ledger"]["claim"] == 1 and first["ledger"]["method"] == "saffron" and first["ledger"]["claim_id"]
    assert first["alpha_t"] == pytest.approx(next_alpha("saffron", [], [], level=0.1, decision_times=[]))
    assert first["baseline"] == {"revision": "main", "commit": base,
                                 "units": {"reused": [], "ran": first["seeds"]}}
    assert first["candidate"] == {"revision": "WORKTREE", "commit": None}
    assert Path(first["results"], "analysis.json").is_file() and len(first["seeds"]) >= 6

    _effect(project, -1.0)  # a harmful edit, committed: the candidate is a revision this time
    _git(project, "commit", "-qam", "harmful")
    harmful = _git(project, "rev-parse", "HEAD")
    rc, second, err = _judge(project, "--baseline", base, "--candidate", "HEAD", ledger=ledger)
    # a harmful edit: stopped at the first futility-only look (no claim that it is worse), discarded
    assert rc == 1 and second["verdict"] == "discard" and second["decision"] == "futile", err[-3000:]
    assert second["candidate"] == {"revision": "HEAD", "commit": harmful}
    # the baseline was paid for once: every baseline unit of the second judgement is the first's, unchanged
    assert second["baseline"]["units"] == {"reused": second["seeds"], "ran": []}
    assert Path(second["results"]).parent == Path(first["results"]).parent
    for seed in second["seeds"]:
        unit = f"runs/seed={seed}/arm=A/result.json"
        assert Path(second["results"], unit).read_bytes() == Path(first["results"], unit).read_bytes()
    assert err.count("arm=A: skipped") == len(second["seeds"])

    # the online FDR across judgements: the second got the level the ledger gives after the first's keep
    tests = _tests(ledger)
    assert [(t["rejected"], t["pvalue"]) for t in tests] == [(1, first["p"]), (0, second["p"])]
    expected = next_alpha("saffron", [first["p"]], [True], level=0.1, decision_times=[tests[0]["decision_time"]])
    assert second["alpha_t"] == pytest.approx(expected) and second["ledger"]["claim"] == 2
    assert second["alpha_t"] != first["alpha_t"]
    assert second["ledger"]["claim_id"] != first["ledger"]["claim_id"]


@pytest.mark.slow  # a judgement: python -m harness.judge spawns python -m harness
def test_no_detectable_effect_within_the_maximum_is_undecided(project, tmp_path):
    _effect(project, 0.0, noise=1.0)  # a null edit that adds noise: neither better nor worse
    # no futility stop, and the overrides' futility rule rather than the judge's
    rc, out, err = _judge(project, "--baseline", "main", "ab.sequential.max_seeds=9", "ab.sequential.futility=0",
                          "ab.sequential.futility_rule=reach", ledger=tmp_path / "l.sqlite")
    assert rc == 3 and out["verdict"] == "undecided", err[-3000:]
    assert out["decision"] == "undecided" and len(out["seeds"]) == 9 and out["stopped_by"]["rule"] == "max_seeds"
    assert "futility_rule" not in json.loads(Path(out["results"], "analysis.json").read_text())["sequential"]["design"]
    assert _tests(tmp_path / "l.sqlite")[0]["rejected"] == 0


@pytest.mark.slow  # a judgement: python -m harness.judge spawns python -m harness
def test_a_null_edit_stops_early_for_futility_and_is_discarded(project, tmp_path):
    _effect(project, 0.0, noise=1.0)
    rc, out, err = _judge(project, "--baseline", "main", ledger=tmp_path / "l.sqlite")
    assert rc == 1 and out["verdict"] == "discard" and out["decision"] == "futile", err[-3000:]
    stop = out["stopped_by"]
    assert stop["rule"] == "futility" and stop["futility_rule"] == "better" and stop["chance"] < stop["threshold"]
    assert len(out["seeds"]) == stop["n"] < 12  # before max_seeds (12, the project's config)
    assert "the predictive chance that the maximum number of seeds shows it better" in out["why"]
    analysis = json.loads(Path(out["results"], "analysis.json").read_text())
    assert analysis["sequential"]["design"]["futility_rule"] == "better"
    assert _tests(tmp_path / "l.sqlite")[0]["rejected"] == 0


@pytest.mark.slow
def test_an_edit_that_changes_no_number_is_discarded_at_the_first_futility_only_look(project, tmp_path):
    from harness.tools.judge.verdict import FUTILITY_FROM

    (project / "effect.py").write_text("EFFECT = 0.0 * 2  # rewritten: the same value\nNOISE = 0.0\n")
    rc, out, err = _judge(project, "--baseline", "main", ledger=tmp_path / "l.sqlite")
    assert rc == 1 and out["verdict"] == "discard", err[-3000:]
    assert out["why"].startswith("identical results")
    # after FUTILITY_FROM seeds, before the first look at which the ledger's alpha_t allows a claim
    assert out["stopped_by"]["rule"] == "futility" and len(out["seeds"]) == out["stopped_by"]["n"] == FUTILITY_FROM
    design = json.loads(Path(out["results"], "analysis.json").read_text())["sequential"]["design"]
    assert design["futility_from"] == FUTILITY_FROM and design["looks"][0] > FUTILITY_FROM
    runs = sorted(p.parent.name for p in Path(out["results"], "runs").glob("seed=*/arm=B/result.json"))
    assert len(runs) == FUTILITY_FROM  # the candidate ran no seed beyond the look that stopped it


@pytest.mark.parametrize("args, words", [
    (["--baseline", "no-such-branch"], "--baseline='no-such-branch': no commit, branch or tag"),
    (["--baseline", "main", "--candidate", "nope"], "--candidate='nope': no commit, branch or tag"),
    (["--baseline", "main", "ab.arms={A: main, B: x}"], "sets ab.arms, which the judge sets itself"),
    (["--baseline", "main", "stats.fdr.method=lord++"], "sets stats.fdr.method, which the judge sets itself"),
    (["--baseline", "main", "--fdr", "bonferroni"], "--fdr='bonferroni' is not an online FDR method"),
    (["--candidate", "WORKTREE"], "the following arguments are required: --baseline"),
    # a config that does not compose (Hydra's exit 1 in python -m harness): bad input, no ledger level spent
    (["--baseline", "main", "ab.sequential.max_sedes=5"], "Key 'max_sedes' not in 'SequentialConfig'"),
    (["--baseline", "main", "+model=nope"], "Could not find 'model/nope'"),
])
def test_bad_input_exits_2_with_one_paragraph_and_writes_nothing(project, tmp_path, capsys, args, words):
    ledger = tmp_path / "ledger.sqlite"
    assert main(["--config-dir", "conf", "--ledger", str(ledger), *args, *FAST]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["verdict"] is None and words in json.loads(captured.out)["error"]
    assert words in captured.err and captured.err.strip().count("\n") == 0  # one paragraph
    assert not (project / "outputs").exists() and not ledger.exists()


def test_outside_a_git_repository_is_bad_input(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert main(["--baseline", "main", "--ledger", str(tmp_path / "l.sqlite"), *FAST]) == 2
    assert "is in none. Run it from inside the project's repository" in capsys.readouterr().err
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "l.sqlite").exists()


@pytest.mark.slow  # python -m harness.judge spawns python -m harness, which refuses the config
def test_a_config_the_harness_refuses_is_bad_input_with_the_harness_reason(project, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    rc, out, err = _judge(project, "--baseline", "main", "stats.margin=auto", ledger=ledger)
    assert rc == 2 and out["verdict"] is None
    assert "stats.margin=auto cannot be used in sequential mode" in out["error"]
    assert "nothing ran" in out["error"] and err.rstrip().endswith(out["error"])
    assert _tests(ledger) == []  # a refusal changes nothing: the reserved level is withdrawn, not spent
    assert not [p for p in Path("outputs/judge").rglob("*") if p.is_file()]  # and its folder is gone


@pytest.mark.bench  # seconds per distinct alpha_t: the sequential boundaries are calibrated for each
def test_bench_judge_prints_the_judges_fdr_greedys_false_keeps_and_the_runs_per_decision(capsys):
    bench = import_script("bench_judge")
    assert bench.main(["--edits", "25", "--loops", "2", "--max-seeds", "16"]) == 0
    out = capsys.readouterr().out
    judge = re.search(r"\(a\) judge:  FDR ([0-9.]+) \+- ([0-9.na]+) \(SE\) vs declared 0.1; false keeps (\d+) of (\d+)", out)
    greedy = re.search(r"\(b\) greedy: false-keep rate ([0-9.]+) of null or harmful edits", out)
    runs = re.search(r"\(c\) candidate runs per decision: judge ([0-9.]+) vs fixed-n .* ([0-9.na]+) \(ratio", out)
    assert judge and greedy and runs, out
    assert int(judge.group(4)) > 0 and float(greedy.group(1)) > 0.2  # one run against one: about half the nulls kept
    assert int(judge.group(3)) < float(greedy.group(1)) * int(judge.group(4))
    # between the first futility-only look and the maximum
    assert bench.FUTILITY_FROM <= float(runs.group(1)) <= 16
    # the same loops with futility asked only from the first claim look: more runs per decision
    assert bench.main(["--edits", "25", "--loops", "2", "--max-seeds", "16", "--futility-from", "0"]) == 0
    late = re.search(r"\(c\) candidate runs per decision: judge ([0-9.]+) vs", capsys.readouterr().out)
    assert "futility rule better from the first claim look" in late.string and float(late.group(1)) > float(runs.group(1))


@pytest.mark.parametrize("decision, code, margin, p, verdict, rule", [
    ("better", "better", None, 0.004, "keep", "boundary"),
    ("better", "better", None, 0.02, "undecided", "boundary"),  # the design said better, but p > the ledger's alpha_t
    ("worse", "worse", None, 0.004, "discard", "boundary"),
    ("equivalent", "equivalent", 0.5, 0.9, "discard", "boundary"),  # within the declared margin: it does not matter
    ("undecided", "inconclusive", 0.5, 0.3, "undecided", "max_seeds"),
    ("futile", "inconclusive", None, 0.6, "discard", "futility"),  # not shown better, nor worth more seeds
    ("undecided", "identical", None, 1.0, "discard", "max_seeds"),  # the edit changes no number
])
@pytest.mark.parametrize("futility_rule", ["reach", "better"])
def test_each_sequential_decision_reads_as_the_documented_verdict(decision, code, margin, p, verdict, rule,
                                                                 futility_rule):
    from harness.tools.judge.verdict import EXIT, judgement

    design = {"futility": 0.05, **({"futility_rule": "better"} if futility_rule == "better" else {})}
    look = {"look": 2, "n": 8, "estimate": 0.1, "interval": [0.0, 0.2], "level": 0.99, "chance_to_settle": 0.012}
    analysis = {"declaration": {"margin": margin}, "metric": "score",
                "sequential": {"design": design,
                               "arms": {"B": {"decision": decision, "n": 8, "seeds": list(range(8)), "looks": [look]}}},
                "comparisons": {"B": {"verdict": {"code": code}, "decision": {"pvalues": {"zero": p}}}}}
    out = judgement(analysis, alpha_t=0.01)
    assert out["verdict"] == verdict and EXIT[verdict] == {"keep": 0, "discard": 1, "undecided": 3}[verdict]
    assert out["p"] == p and out["seeds"] == list(range(8)) and out["interval"] == [0.0, 0.2]
    assert out["stopped_by"]["rule"] == rule and out["stopped_by"]["n"] == 8
    if rule == "futility":  # which futility rule stopped it, with the chance it stopped on, in the JSON and in why
        assert out["stopped_by"] == {"rule": "futility", "futility_rule": futility_rule, "chance": 0.012,
                                     "threshold": 0.05, "look": 2, "n": 8}
        assert "0.012 < 0.05" in out["why"] and "not shown better" in out["why"]
        assert ("predictive chance" in out["why"]) == (futility_rule == "better")
