"""What the screen and analysis.json say about the margin: none where none was declared, and when a
margin was declared (before the data, after it, or chosen for an alternative analysis)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness.analysis.render import summary
from harness.analysis.analyze import analyze, analyze_dir
from harness.config.declaration import of_results
from harness.results import read_json
from harness.tools.analyze import main

sys.path.insert(0, str(Path(__file__).parent))  # the factory lives beside the tests

import _results_factory as F  # noqa: E402

from .conftest import REPO  # noqa: E402


def _results(loss_shift: float):
    """Ten seeds; test_loss varies by seed and moves by ``loss_shift`` in arm B."""
    rng = np.random.default_rng(2)
    acc = F.accuracies(10, shift=0.5)
    items = []
    for seed in range(10):
        level = 0.3 + rng.normal(0, 0.05)
        for arm in ("A", "B"):
            loss = level + (loss_shift if arm == "B" else 0.0) + rng.normal(0, 0.005)
            items.append(F.make_result(seed, arm, acc[arm][seed], metrics={
                "test_accuracy": acc[arm][seed], "test_loss": loss, "train_loss": 0.1, "n_test": F.N_TEST}))
    return items


def _said(a: dict) -> str:
    return "\n".join(summary.lines(a))


def test_a_metric_without_a_margin_gets_the_verdicts_that_need_none_and_says_it_has_none(tmp_path, capsys):
    """The declared margin (0.5 pts) is test_accuracy's: test_loss has none. Its verdict is better,
    worse or no detectable difference by the test against 0, never "beyond the margin ±0"."""
    items = _results(-0.05)
    declared = replace(of_results(items), margin=0.5)
    a = analyze(items, declared, metric="test_loss")
    c = a["comparisons"]["B"]
    assert a["margin"]["source"] == "none" and c["verdict"]["code"] == "better"  # the category stays
    words = _said(a)
    assert "declared before the data" not in words and "±0" not in words and "beyond the margin" not in words
    assert "margin none" in words and "no margin" in c["verdict"]["sentence"]
    still = analyze(_results(0.0), declared, metric="test_loss")
    v = still["comparisons"]["B"]["verdict"]
    assert v["code"] == "undecided" and v["sentence"].startswith("no detectable difference")
    assert "equivalence within" not in v["sentence"] and "margin of 0" not in v["sentence"]

    root = F.write_results(tmp_path / "exp", items)
    declared.write(root)
    assert main([str(root), "--metric", "test_loss", "--no-write", "--tables"]) == 0
    out = capsys.readouterr().out
    assert "declared before the data" not in out and "±0" not in out and "margin none" in out


def test_a_margin_chosen_for_an_alternative_analysis_is_not_said_declared_before_the_data(tmp_path, capsys):
    items = _results(-0.05)
    root = F.write_results(tmp_path / "exp", items)
    replace(of_results(items), margin=0.5).write(root)
    assert main([str(root), "--margin", "0.3"]) == 0
    out = capsys.readouterr().out
    alternative = next((root / "alternatives").rglob("analysis.json"))
    margin = read_json(alternative)["margin"]
    assert "declared before the data" not in out and "declared before the data" not in margin["description"]
    assert "chosen for this alternative analysis, after the data" in margin["description"]
    assert "chosen for this alternative analysis" in out


def test_a_margin_declared_again_on_a_finished_folder_says_it_came_after_the_data(tmp_path):
    """A finished folder run again with another stats.margin: the runs are kept, the earlier
    declaration goes to superseded/, and the analysis says the margin was declared after results."""
    from harness.api import run

    plain = ["+experiment=loss_ab", "logger=none", "progress=false", "determinism.threads=1", "repro.certificate=false",
             "train.fn=tests.sequential_fns.paired_metric", "ab.factor=train.kwargs.shift", "+train.kwargs.shift=0.0",
             "ab.arms.A=0.0", "ab.arms.B=1.0", "ab.seeds=[0,1,2]", "stats.bootstrap_resamples=199"]
    out = tmp_path / "exp"
    run([*plain, "stats.margin=1.0"], out_dir=out, verbose=False)
    first = read_json(out / "analysis.json")["margin"]
    assert "declared before the data" in first["description"]
    run([*plain, "stats.margin=0.5"], out_dir=out, verbose=False)
    [old] = (out / "superseded").glob("declaration-*.json")
    a = read_json(out / "analysis.json")
    assert a["margin"]["value"] == 0.5
    assert "declared before the data" not in a["margin"]["description"] + _said(a)
    assert (f"declared after the data (6 results were in the folder; the earlier declaration, margin 1, is "
            f"superseded/{old.name})") in a["margin"]["description"]
    assert "declared after the data" in _said(a)
    again = analyze_dir(out, write=False)  # the record stays with the declaration
    assert again["margin"]["description"] == a["margin"]["description"]
    assert str(REPO)
