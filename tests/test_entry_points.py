"""Cheap in-process runs of what the fast tier would otherwise reach only in subprocesses: the
``python -m harness.ledger`` program, and ``harness.analyze`` on a race folder (the race's own
analysis). ``python -m harness`` and the tools end through ``os._exit``, so the tests that refuse
bad input run those as subprocesses."""

from __future__ import annotations

import runpy
import sys

import pytest


def test_python_m_harness_ledger_runs_the_ledgers_command_and_exits_with_its_status(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["harness.ledger", "--ledger", str(tmp_path / "none.sqlite")])
    with pytest.raises(SystemExit) as ended:
        runpy.run_module("harness.ledger", run_name="__main__")
    assert ended.value.code == 0
    assert "(not made yet): 0 claim(s)" in capsys.readouterr().out
    assert not (tmp_path / "none.sqlite").exists()

    monkeypatch.setattr(sys, "argv", ["harness.ledger", "--level", "2"])
    with pytest.raises(SystemExit) as ended:
        runpy.run_module("harness.ledger", run_name="__main__")
    assert ended.value.code == 2 and capsys.readouterr().err.startswith("harness.ledger: ")


def test_a_race_folder_without_its_declaration_is_refused_in_one_paragraph_and_nothing_is_written(tmp_path, capsys):
    from harness.tools.analyze import main

    (tmp_path / "race.json").write_text("{}")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harness.analyze: {tmp_path} holds no race") and "declaration.json and race.json" in err
    assert err.count("\n") == 1
    assert main([str(tmp_path), "--metric", "test_accuracy"]) == 2  # no choices on a race's analysis
    assert "holds a race (race.json): its analysis is the race's" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["race.json"]
