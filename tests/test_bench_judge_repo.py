"""bench_judge --repo: the scratch repository of a tiny model, its code edits, and a real loop judged by
the real judge (scripts/judge_scratch_repo.py, scripts/judge_real_loop.py)."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from .test_scripts import import_script


@pytest.fixture
def scratch(tmp_path):
    module = import_script("judge_scratch_repo")
    repo = tmp_path / "repo"
    module.make_repo(repo)
    return module, repo


def test_each_edit_is_a_code_change_of_its_kind_and_a_discard_puts_the_tree_back(scratch):
    s, repo = scratch
    model = repo / s.MODEL_PATH
    first = model.read_text()
    for kind, changed in [("note", "NOTE_7 = 7"), ("rewrite", s.GATHER_LOSS), ("reorder", "EXTRA_DRAWS = 1"),
                          ("lr up", "LR = 0.0675"), ("dropout up", "DROPOUT = 0.45")]:
        s.apply(repo, kind, 7)
        text = model.read_text()
        assert changed in text and text != first, kind
        compile(text, str(model), "exec")  # still a Python module
        assert s.git(repo, "status", "--porcelain") == f"M {s.MODEL_PATH}"
        s.discard(repo)
        assert model.read_text() == first and s.git(repo, "status", "--porcelain") == ""
    assert s.edited(s.edited(first, "rewrite", 0), "rewrite", 1) == first  # the rewrite, and back
    assert "EXTRA_DRAWS = 1" in s.edited(first, "lr up", 0)  # the init drawn anew with the lr change
    assert {s.class_of(k) for k in ("note", "rewrite", "reorder")} == {"null"}


def test_an_lr_edit_stops_at_the_cap_and_is_then_the_null_edit_it_is(scratch):
    s, repo = scratch
    model = repo / s.MODEL_PATH
    lrs = []
    for i in range(12):
        lrs.append((s.apply(repo, "lr up", i), float(re.search(r"^LR = (.+)$", model.read_text(), re.M)[1])))
    assert lrs[0] == ("lr up", 0.0675) and lrs[-1] == ("reorder", s.LR_MAX)
    assert all(lr <= s.LR_MAX for _, lr in lrs)
    assert all(kind == "reorder" for (kind, _), (_, before) in zip(lrs[1:], lrs) if before >= s.LR_MAX)
    assert "EXTRA_DRAWS = 12" in model.read_text()  # every one of them drew the init anew


@pytest.mark.bench  # a calibration and two judgements: python -m harness.judge spawns python -m harness
def test_a_real_loop_judges_real_edits_and_prints_abc(tmp_path, capsys):
    bench = import_script("bench_judge")
    work = tmp_path / "loop"
    assert bench.main(["--edits", "2", "--loops", "1", "--max-seeds", "12", "--calibration-seeds", "3",
                       "--repo", str(work)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"calibration: 3 paired seeds per edit kind .* 30 units", out), out
    assert re.search(r"note +\(null\): mean B - A of test_loss \+0\.00000, sd 0\.00000", out)  # the same bits
    assert re.search(r"real loop: 2 candidate edits \(REAL code edits", out)
    real = out.split("real loop: 2 candidate edits", 1)[1]  # after the simulated loops' (a)(b)(c)
    for line in (r"\(a\) judge:  false discovery proportion [0-9.]+ vs declared 0.1; false keeps \d+ of \d+",
                 r"\(b\) greedy: false-keep rate [0-9.]+ of null or harmful edits",
                 r"\(c\) candidate runs per decision: judge [0-9.]+ vs fixed-n"):
        assert len(re.findall(line, real)) == 1, out
    rows = json.loads((work / "rows.json").read_text())
    tests = sqlite3.connect(work / "ledger.sqlite").execute("SELECT rejected FROM tests ORDER BY id").fetchall()
    assert [bool(t[0]) for t in tests] == [r["keep"] for r in rows if not r["refused"]]  # every judgement a claim
    commits = import_script("judge_scratch_repo").git(work / "repo", "log", "--format=%s").splitlines()
    assert len(commits) == 1 + sum(r["keep"] for r in rows)  # each kept edit committed: the next baseline


def test_the_fixed_n_design_gets_the_judges_power_or_its_lower_bound_when_every_edit_was_kept():
    loop = import_script("judge_real_loop")
    assert loop.comparator_power(2, 5)[0] == 0.4
    power, words = loop.comparator_power(5, 5)  # power 1 would need no finite n
    assert power == pytest.approx(0.05 ** (1 / 5)) and "95% lower bound 0.549" in words
    bench = import_script("bench_judge")
    assert bench.fixed_n(power, 1.0, 0.01) < bench.fixed_n(0.99, 1.0, 0.01)  # fewer seeds: the ratio an upper bound


def test_the_sign_flip_floor_is_the_fewest_seeds_whose_exact_p_reaches_alpha():
    loop = import_script("judge_real_loop")
    for alpha in (0.05, 0.011, 1e-3, 8e-5):
        n = loop.sign_flip_floor(alpha)
        assert 2 / 2 ** n <= alpha < 2 / 2 ** (n - 1)
