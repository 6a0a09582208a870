"""Results written by another tool: `harness.analyze --metric M --direction D` analyses them without
a stats block, and an identity refusal shows where the configs differ."""

from __future__ import annotations

import json

import pytest
from harness.tools.analyze import main as analyze_main


def _write(root, config_of):
    """The minimal keys of docs/result-format.md, as a 24-line wrapper around a script writes them."""
    for seed in range(5):
        for arm, tied, shift in (("untied", False, 0.0), ("tied", True, -3.0)):
            folder = root / "runs" / f"seed={seed}" / f"arm={arm}"
            folder.mkdir(parents=True)
            result = {"schema": "harness.result/2", "experiment": "tied_ab", "seed": seed, "arm": arm,
                      "factor": "tied", "factor_value": tied, "status": "completed",
                      "metrics": {"test_ppl": 150.0 + shift + seed + 0.1 * (seed % 3) * tied},
                      "config": config_of(seed, tied)}
            (folder / "result.json").write_text(json.dumps(result))


@pytest.mark.slow
def test_foreign_results_are_analysed_with_the_metric_and_direction_given(tmp_path, capsys):
    _write(tmp_path, lambda seed, tied: {"argv": ["--data", "../data", "--emsize", "64"], "tied": tied})
    assert analyze_main([str(tmp_path), "--no-write"]) == 2  # nothing declares the metric: said, not guessed
    assert "pass the metric and its direction explicitly" in capsys.readouterr().err
    assert analyze_main([str(tmp_path), "--metric", "test_ppl", "--direction", "min"]) == 0
    a = json.loads((tmp_path / "analysis.json").read_text())
    assert a["metric"] == "test_ppl" and a["direction"] == "min" and a["departures"] == []
    assert a["comparisons"]["untied" if a["baseline"] == "tied" else "tied"]["n_pairs"] == 5
    assert "pairing verified" not in capsys.readouterr().out


def test_an_identity_refusal_shows_the_values_where_they_differ(tmp_path, capsys):
    argv = ["--data", "../data_60k", "--emsize", "64", "--nhid", "64", "--epochs", "1", "--dropout", "0.2"]
    _write(tmp_path, lambda seed, tied: {"argv": argv + ["--lr", "20" if seed < 3 else "5"], "tied": tied})
    assert analyze_main([str(tmp_path), "--metric", "test_ppl", "--direction", "min", "--no-write"]) == 2
    err = capsys.readouterr().err
    shown = err.split("The configs differ at argv: ")[1].split(". Per comparison")[0]
    assert shown.count(" vs ") == 1  # each distinct value once
    assert '"--lr", "20"]' in shown and '"--lr", "5"]' in shown  # the part that differs, not cut before it
