"""The three regressions users hit first (issue 33, item 0): each reproduced as its user met it.

- arms that set a whole subtree (``ab.factor=optim 'ab.arms={A: {lr: 0.05}, B: {lr: 0.1}}'``, the
  documented form for arms that differ in several keys) are analysed, with no dose trend (the arms
  are not numbers);
- ``loss_ab_conditions`` runs with the default ``workers`` (auto);
- a user's declaration holds exactly the metrics it declares (the built-in loop's belong to the
  built-in experiments), and a per-example record that cannot be attributed stops the experiment at
  its first unit, said once, instead of failing every unit after its training.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import harness
from harness import HarnessError
from harness.config.declaration import Declaration
from harness.training.run import Run
from harness.training.batches import TensorBatches

from .conftest import FAST, compose_cfg

TINY = ["train.max_steps=6", "data.train_limit=256", "ab.seeds=[0,1,2]", "logger=none", "progress=false",
        "determinism.threads=1", "repro.certificate=false"]


# -- arms that are mappings ----------------------------------------------------------------------


MAPPING_ARMS = ["ab.factor=optim", "ab.arms={A: {lr: 0.05}, B: {lr: 0.1}}"]


@pytest.mark.slow
def test_arms_that_set_a_whole_subtree_are_analysed_without_a_dose_trend(tmp_path):
    res = harness.run(["+experiment=loss_ab", *TINY, "workers=1", *MAPPING_ARMS], out_dir=tmp_path, verbose=False)
    assert [r["status"] for r in res.results] == ["completed"] * 6
    a = res.analysis
    assert a is not None and a["comparisons"]["B"]["n_pairs"] == 3
    assert a["arms"]["A"]["factor_value"]["lr"] == 0.05 and a["arms"]["B"]["factor_value"]["lr"] == 0.1
    assert a["dose_trend"] is None and "not numbers" in a["dose_trend_why"]
    # The same folder through harness.analyze's door.
    again = harness.analyze_folder(tmp_path, write=False)
    assert again.analysis["comparisons"]["B"]["n_pairs"] == 3 and again.analysis["dose_trend"] is None


def test_a_dose_trend_says_why_it_is_absent(tmp_path):
    """Three numeric arms get the trend; two arms get none, and analysis.json says why."""
    from harness.analysis import dose_trend

    def usable(values):
        return {(s, arm): {"value": float(s + i), "result": {"factor_value": v}}
                for s in range(3) for i, (arm, v) in enumerate(values.items())}

    three = {"A": 0.0, "B": 0.1, "C": 0.2}
    assert dose_trend.dose_trend(usable(three), list(three), 0.05)["doses"] == [0.0, 0.1, 0.2]
    assert "3 or more" in dose_trend.dose_trend_why(usable({"A": 0.0, "B": 0.1}), ["A", "B"])
    subtree = {"A": {"lr": 0.05}, "B": {"lr": 0.1}, "C": {"lr": 0.2}}
    assert dose_trend.dose_trend(usable(subtree), list(subtree), 0.05) is None
    assert "not numbers" in dose_trend.dose_trend_why(usable(subtree), list(subtree))
    assert dose_trend.dose_trend_why(usable(three), list(three)) is None


# -- the conditions experiment with the default workers -----------------------------------------


@pytest.mark.slow
@pytest.mark.solo  # workers=auto reads the machine's load
def test_the_conditions_experiment_runs_with_the_default_workers(tmp_path):
    res = harness.run(["+experiment=loss_ab_conditions", *TINY], out_dir=tmp_path, verbose=False)
    assert len(res.results) == 3 * 3 * 2
    assert all(r["status"] == "completed" for r in res.results)
    assert res.analysis is not None


# -- a user's declaration holds what it declares -------------------------------------------------


def fit_bpc(cfg, run: Run, implicit_record: bool = False) -> dict:
    """A user's loop: its own metric names, a per-example record when asked (without metric=)."""
    g = torch.Generator().manual_seed(7)
    x, y = torch.randn(96, 4, generator=g), torch.randint(0, 2, (96,), generator=g)
    with run.init():
        model = torch.nn.Linear(4, 2)
    run.watch(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for xb, yb in run.loader(TensorBatches(x, y), 32):
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.step(loss)
    with torch.no_grad():
        correct = model(x).argmax(1) == y
    if implicit_record:
        run.record_examples(correct)  # no metric=: nothing declared with examples: true
    return {"val_bpc": loss.item(), "val_acc": 100 * correct.float().mean().item(), "param_norm": 1.0}


USER_EXPERIMENT = """# @package _global_
experiment_name: bpc_ab
train:
  fn: tests.test_user_regressions.fit_bpc
  kwargs: {implicit_record: false}
stats:
  metric: val_bpc
  metrics: {val_bpc: min, val_acc: max, param_norm: min}
ab:
  factor: optim.lr
  arms: {A: 0.1, B: 0.2}
  seeds: [0, 1, 2, 3]
"""


@pytest.fixture
def user_conf(tmp_path) -> Path:
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "bpc_ab.yaml").write_text(USER_EXPERIMENT)
    return tmp_path / "conf"


def test_a_users_declaration_holds_exactly_the_metrics_it_declares(user_conf, tmp_path):
    cfg = compose_cfg(["+experiment=bpc_ab"], config_dirs=[user_conf])
    declaration = Declaration.from_config(cfg)
    assert list(declaration.metrics) == ["val_bpc", "val_acc", "param_norm"]
    declaration.write(tmp_path / "out", say=lambda m: None)
    written = json.loads((tmp_path / "out" / "declaration.json").read_text())
    assert list(written["metrics"]) == ["val_bpc", "val_acc", "param_norm"]
    # The built-in experiments still declare the built-in loop's metrics.
    builtin = Declaration.from_config(compose_cfg(FAST))
    assert list(builtin.metrics) == ["test_accuracy", "test_loss", "train_loss"]
    assert builtin.metrics["test_accuracy"].examples and builtin.metrics["test_accuracy"].unit == "pts"
    assert list(Declaration.from_config(compose_cfg(["logger=none"])).metrics) == ["test_accuracy", "test_loss", "train_loss"]


@pytest.mark.slow
def test_a_record_that_cannot_be_attributed_keeps_every_trained_unit_and_is_said_once(user_conf, tmp_path, capfd):
    """A returning user's loop calls run.record_examples(correct) without metric=, and no declared
    metric has examples: true: a slip found only after training. Every unit keeps its training and
    metrics, the record is set aside (not used by the analysis), and the terminal names the line to
    add once, not once per unit."""
    overrides = ["+experiment=bpc_ab", "train.kwargs.implicit_record=true", "workers=1", "logger=none",
                 "progress=false", "determinism.threads=1", "repro.certificate=false"]
    done = harness.run(overrides, config_dir=user_conf, out_dir=tmp_path / "out", verbose=True)
    results = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert len(results) == 8 and all(r["status"] == "completed" for r in results)
    assert all(set(r["metrics"]) == {"val_bpc", "val_acc", "param_norm"} for r in results)
    for r in results:
        (aside,) = r["examples_set_aside"]
        assert "examples" not in r and aside["n"] == 96 and "metric" not in aside
        assert "examples: true" in aside["fix"] and "metric=" in aside["fix"]
    assert done.analysis is not None and "examples_set_aside" in done.analysis
    captured = capfd.readouterr()
    printed = " ".join((captured.out + captured.err).split())
    assert printed.count("add `examples: true` under the metric they belong to in stats.metrics") == 1, printed[-3000:]
    assert "8 of 8 runs" in printed


# -- a margin belongs to the metric it was declared for -----------------------------------------


def test_an_alternative_metric_never_borrows_the_primary_metrics_margin(user_conf):
    cfg = compose_cfg(["+experiment=bpc_ab", "stats.margin=0.02"], config_dirs=[user_conf])
    declared = Declaration.from_config(cfg)
    assert declared.margin == 0.02
    other = declared.alternative(metric="val_acc")
    assert other.margin is None
    assert any("val_bpc's" in d and "0.02" in d for d in other.departures), other.departures
    assert declared.alternative(metric="val_acc", margin=0.5).margin == 0.5  # one given for it is its own
    assert declared.alternative(metric="val_bpc").margin == 0.02  # the declared metric keeps its own
    auto = Declaration.from_config(compose_cfg(["+experiment=bpc_ab"], config_dirs=[user_conf]))
    assert auto.alternative(metric="val_acc").margin == "auto"  # auto is estimated from each metric's data


# -- the noise audit keeps out of the thread trap -------------------------------------------------


def test_the_noise_audit_runs_only_thread_counts_the_free_cores_keep_busy():
    from harness.tools.noise.noise_runs import thread_counts, threads_note

    assert thread_counts(1, 2, free=2) == ([2], [3])  # 2 cores: 3 pinned threads would wait at barriers
    assert thread_counts(1, 2, free=1) == ([], [2, 3])
    assert thread_counts(2, 3, free=16) == ([1, 3, 4], [])
    note = threads_note({"thread_counts": [2], "thread_counts_skipped": [3], "free_cores": 2})
    assert "ran 2; skipped 3" in note and "2 free core(s)" in note
    assert threads_note({"thread_counts": [1, 3], "thread_counts_skipped": [], "free_cores": 8}) == ""
