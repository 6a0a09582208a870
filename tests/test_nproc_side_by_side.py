"""Side by side, a train.nproc=2 unit takes 2 worker slots: workers=2 runs two such units one after
the other, workers=4 runs them at once: each result records the worker count its experiment ran
with (config.workers: 1 runs the units one after the other, in the harness's process), and units
side by side meet (tests/nproc_fns.py's side_by_side: each waits until the other has begun). Slots
asked for that hold fewer units are said."""

from __future__ import annotations

import json

import pytest

import harness
from harness.results import read_json

from .conftest import TEST_CONF, compose_cfg

BASE = ["+experiment=command_toy", "train.cmd=null", "train.args={}", "train.metrics_from=null",
        "train.fn=tests.nproc_fns.side_by_side", "logger=none", "progress=false", "determinism.threads=1",
        "stats.metric=score", "stats.metrics={score: min}", "ab.seeds=[0]", "repro.certificate=false",
        "train.nproc=2", "+train.kwargs.lr=0.1", "ab.factor=train.kwargs.lr", "ab.arms={A: 0.1, B: 0.2}"]


def _units(tmp_path, workers: int, meet: bool) -> dict:
    folder = tmp_path / "spans"
    folder.mkdir()
    out = tmp_path / "out"
    harness.run([*BASE, f"workers={workers}", f"+train.kwargs.folder={folder}", f"+train.kwargs.meet={str(meet).lower()}"],
                out_dir=out, config_dir=TEST_CONF, verbose=False)
    saw = {}
    for arm in ("A", "B"):
        result = read_json(out / "runs" / "seed=0" / f"arm={arm}" / "result.json")
        assert result["status"] == "completed", result.get("error")
        met = folder / f"met-{arm}.json"
        saw[arm] = {"workers": result["config"]["workers"], "met": json.loads(met.read_text()) if meet else None}
    return saw


@pytest.mark.slow
@pytest.mark.solo  # 2 ranks: both cores
def test_two_worker_slots_run_two_units_of_two_processes_one_at_a_time(tmp_path):
    saw = _units(tmp_path, workers=2, meet=False)
    assert saw["A"]["workers"] == saw["B"]["workers"] == 1, saw  # 2 slots, units of 2 processes: 1 at a time


@pytest.mark.slow
@pytest.mark.solo
def test_four_worker_slots_run_two_units_of_two_processes_at_once(tmp_path):
    saw = _units(tmp_path, workers=4, meet=True)  # each waits until the other has begun: both at once
    assert saw["A"]["workers"] == saw["B"]["workers"] == 2, saw
    assert saw["A"]["met"] in (["running-B"], ["done-B"]) and saw["B"]["met"] in (["running-A"], ["done-A"]), saw


def test_slots_asked_that_hold_fewer_units_are_said():
    from harness.training.threads import Load, resolve_threads

    cfg = compose_cfg([*BASE, "workers=2"], config_dirs=(TEST_CONF,))
    said: list = []
    choice = resolve_threads(cfg, say=said.append, measure=lambda: Load(cores=4, busy=0, runnable=0))
    assert choice.workers == cfg.workers == 1
    assert any("train.nproc=2" in line and "workers=2 slots hold 1 unit(s) side by side" in line for line in said), said
