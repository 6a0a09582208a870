"""``python -m harness.ledger`` is the ledger's command, run here as a program in this process (the
fast tier touches every module; ``python -m harness`` and the tools end through ``os._exit``, so the
tests that refuse bad input run those as subprocesses)."""

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
