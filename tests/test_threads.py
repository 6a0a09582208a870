"""determinism.threads=auto (issue 18, item 1): never more pinned threads than free cores; the
resolved count is hashed, recorded and compared on resume; a warning before the first run when an
explicit count will wait for busy cores. Every decision is asserted on an injected measurement."""

from __future__ import annotations

import os

import pytest

from harness.config.preflight import check_settings
from harness.experiment.arms import arm_configs
from harness.experiment.identity import config_hash, plain
from harness.experiment.execute import execute
from harness.experiment.resume import decide
from harness.experiment.runner import code_of
from harness.experiment.units import pin_threads, run_experiment
from harness.results import read_json
from harness.training import threads as th
from harness.training.threads import Load, choose_threads
from tests.conftest import FAST, compose_cfg

TINY = [*FAST, "determinism.threads=auto", "ab.seeds=[0]", "arm=A", "train.max_steps=3", "data.train_limit=64", "repro.certificate=false"]
QUIET, ONE_BUSY, CROWDED = Load(2, 0, 0.1, 0), Load(2, 1, 1.1, 1), Load(2, 5, 5.3, 5)


@pytest.mark.parametrize("load, expected", [
    (QUIET, 2), (ONE_BUSY, 1), (CROWDED, 1), (Load(64, 10, 10.0, 10), 54), (Load(1, 0), 1),
])
def test_auto_pins_the_free_cores_and_never_more(load, expected):
    choice = choose_threads("auto", load)
    assert choice.threads == expected
    assert choice.warning is None  # auto never pins into the trap
    assert f"determinism.threads=auto -> {expected}" in choice.why


def test_auto_in_a_sweep_is_one_and_a_folder_keeps_its_recorded_count():
    assert choose_threads("auto", QUIET, in_sweep=True).threads == 1  # jobs measure on their own
    kept = choose_threads("auto", ONE_BUSY, recorded=2)
    assert kept.threads == 2 and "made with" in kept.why
    assert kept.warning is not None  # ... and says that it will wait, with the setting to change
    assert choose_threads(2, ONE_BUSY, recorded=1).threads == 2  # an explicit count is what is asked


def test_an_explicit_count_above_the_free_cores_warns_naming_load_slowdown_and_setting():
    warning = choose_threads(2, ONE_BUSY).warning
    assert warning is not None
    assert "1 other busy process(es) on 2 core(s), load average 1.10" in warning
    assert "15-135x slower" in warning
    assert "determinism.threads=auto (here 1) or determinism.threads=1" in warning
    assert choose_threads(2, QUIET).warning is None  # an idle machine: no warning
    assert choose_threads(1, CROWDED).warning is None  # one thread has no barrier to wait at
    assert choose_threads(8, QUIET).warning is not None  # more threads than cores


def test_measure_load_counts_other_runnable_processes_and_scales_to_our_share(monkeypatch):
    monkeypatch.setattr(th, "usable_cores", lambda: 2)
    monkeypatch.setattr(th, "_runnable_now", lambda: 2)  # this process and one other
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.4, 0.4))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert th.measure_load(interval=0).busy == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (3.7, 1.0, 1.0))  # busy for the last minute, idle now
    assert th.measure_load(interval=0).busy == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 8)  # our 2 of 8 cores: a quarter of the others
    monkeypatch.setattr(th, "_runnable_now", lambda: 9)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert th.measure_load(interval=0).busy == 2


def test_the_resolved_count_is_written_into_the_config_and_changes_the_identity(tmp_path):
    one, two = compose_cfg(TINY), compose_cfg(TINY)
    assert one.determinism.threads == "auto"
    pin_threads(one, tmp_path / "a", measure=lambda: ONE_BUSY, say=lambda m: None)
    pin_threads(two, tmp_path / "b", measure=lambda: QUIET, say=lambda m: None)
    assert (one.determinism.threads, two.determinism.threads) == (1, 2)
    assert config_hash(arm_configs(one)["A"]) != config_hash(arm_configs(two)["A"])
    explicit = compose_cfg([*TINY, "determinism.threads=1"])
    pin_threads(explicit, tmp_path / "c", measure=lambda: QUIET, say=lambda m: None)
    assert config_hash(arm_configs(explicit)["A"]) == config_hash(arm_configs(one)["A"])  # same bits, same identity


def test_resume_compares_the_resolved_count_and_a_folder_keeps_its_own(tmp_path):
    said = []
    busy = compose_cfg(TINY)
    pin_threads(busy, tmp_path, measure=lambda: ONE_BUSY, say=said.append)
    run_experiment(busy, tmp_path, log=said.append, certify=False)
    result = read_json(tmp_path / "runs/seed=0/arm=A/result.json")
    assert result["config"]["determinism"]["threads"] == 1 and result["env"]["threads"] == 1
    assert read_json(tmp_path / "experiment.json")["config"]["determinism"]["threads"] == 1

    # The same experiment resolved on a quiet machine (another folder, or another machine): 2 threads,
    # another identity; resume of the 1-thread result says the thread count changed.
    quiet = compose_cfg(TINY)
    pin_threads(quiet, tmp_path / "elsewhere", measure=lambda: QUIET, say=said.append)
    arm = arm_configs(quiet)["A"]
    d = decide(tmp_path / "runs/seed=0/arm=A/result.json", config_hash(arm), code_of(arm), 0, "A", config=plain(arm))
    assert not d.skip and "determinism.threads: 1 -> 2" in d.why

    # In the folder itself, auto keeps the recorded count whatever the load now: the run is skipped.
    again, log = compose_cfg(TINY), []
    pin_threads(again, tmp_path, measure=lambda: QUIET, say=log.append)
    assert again.determinism.threads == 1
    run_experiment(again, tmp_path, log=log.append, certify=False)
    assert "seed=0 arm=A: skipped, completed with the same config and code" in log, log


@pytest.mark.solo  # trains with 2 threads: the warning about them is the point
def test_the_warning_comes_before_the_first_run(tmp_path, monkeypatch):
    monkeypatch.setattr(th, "measure_load", lambda: ONE_BUSY)
    said = []
    cfg = compose_cfg([*TINY, "determinism.threads=2", "train.max_steps=2"])
    execute(cfg, tmp_path, say=said.append, show_table=False)
    warn = next(i for i, m in enumerate(said) if m.startswith("warning: the machine is busy"))
    first_run = next(i for i, m in enumerate(said) if m.startswith("seed=0 arm=A"))
    assert warn < first_run


def test_preflight_takes_auto_or_an_integer_and_names_the_key_otherwise():
    assert not [p for p in check_settings(compose_cfg(TINY), ["A"]) if "determinism.threads" in p]
    for bad in ("two", "0"):
        problems = check_settings(compose_cfg([*TINY, f"determinism.threads={bad}"]), ["A"])
        assert any(p.startswith("determinism.threads=") and "or auto" in p for p in problems), problems


def test_a_tool_that_composed_its_own_config_gets_the_count_resolved_by_preflight(monkeypatch):
    from harness.config.preflight import preflight

    monkeypatch.setattr(th, "measure_load", lambda: ONE_BUSY)
    arm_cfg = arm_configs(compose_cfg(TINY))["A"]  # as the noise audit, golden and audit select a run
    assert arm_cfg.determinism.threads == "auto"
    preflight(arm_cfg, {"A": arm_cfg})
    assert arm_cfg.determinism.threads == 1  # an integer the tools can hash and vary (noise audit)
