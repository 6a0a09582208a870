"""Nothing guessed (issue 17, item 3): units and test-set noise come from the declaration, never
from a metric's name.

A user's own training function reports ``val_score``, a name that says nothing, declared as
``{direction: max, unit: pts, examples: true}``; its per-example record says which metric it
belongs to, the analysis uses the record of the metric it analyses (float32 values included),
a hand-edited metric that its own record contradicts is excluded, and the noise audit and goldens
read metrics and units from the declaration.

Runs are tiny (a linear model, a few dozen steps, threads=1) and in-process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import harness
from harness.analysis import example_records
from harness.tools.golden import golden as golden
from harness.tools.noise import noise_audit as noise_audit
from harness import results as results_io
from harness.analysis.analyze import analyze, analyze_dir
from harness.training.run import Run
from harness.training.batches import TensorBatches
from harness.config.metric_spec import MetricSpec
from harness.analysis.selection import _usable_runs

from . import _results_factory as F

N_VAL = 450
STEPS = 24
VAL_SCORE = MetricSpec("val_score", "max", "pts", True)


# -- a user's own training function ---------------------------------------------------------------


def fit_val_score(cfg, run: Run, lr: float = 0.5, record: str = "named") -> dict:
    """A linear classifier on synthetic data; val_score is its accuracy on N_VAL held-out examples,
    computed in float32 the way a user's loop often does (so it is float32-rounded)."""
    g = torch.Generator().manual_seed(1234)  # the data: the same for every seed and arm
    w_true = torch.randn(8, 3, generator=g)
    x = torch.randn(256 + N_VAL, 8, generator=g)
    y = (x @ w_true + 1.5 * torch.randn(len(x), 3, generator=g)).argmax(1)
    train_x, train_y, val_x, val_y = x[:256], y[:256], x[256:], y[256:]
    loader = run.loader(TensorBatches(train_x, train_y), 32)
    total = int(cfg.train.max_steps)
    with run.init():
        model = torch.nn.Linear(8, 3)
    run.watch(model, total)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    step = 0
    while step < total:
        for xb, yb in loader:
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            run.step(loss)
            step += 1
            if step == total:
                break
    with torch.no_grad():
        logits = model(val_x)
    correct = logits.argmax(1) == val_y
    if record == "named":
        run.record_examples(correct, metric="val_score")
    elif record == "implicit":
        run.record_examples(correct)
    return {"val_score": (100 * correct.float().mean()).item(),  # a float32 accuracy
            "val_loss": torch.nn.functional.cross_entropy(logits, val_y).item(),
            "train_loss": run.last_loss}


EXPERIMENT = f"""# @package _global_
experiment_name: val_ab
train:
  fn: tests.test_declared_metrics.fit_val_score
  max_steps: {STEPS}
  kwargs:
    lr: 0.5
stats:
  metric: val_score
  metrics:
    val_score: {{direction: max, unit: pts, examples: true}}
    val_loss: min
    train_loss: min
ab:
  factor: train.kwargs.lr
  arms:
    A: 0.5
    B: 0.05
  seeds: [0, 1, 2, 3]
"""
TINY = ["+experiment=val_ab", "workers=1", "logger=none", "progress=false", "determinism.threads=1", "data.train_limit=64",
        "repro.certificate=false"]


@pytest.fixture(scope="module")
def conf_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("own_conf")
    (folder / "experiment").mkdir()
    (folder / "experiment" / "val_ab.yaml").write_text(EXPERIMENT)
    return folder


@pytest.fixture(scope="module")
def val_ab(tmp_path_factory, conf_dir):
    out = tmp_path_factory.mktemp("val_ab")
    res = harness.run(TINY, config_dir=conf_dir, out_dir=out, verbose=False)
    return out, res


# -- 1. run.record_examples says which declared metric it belongs to ------------------------------


def _finished(run: Run, metrics: dict) -> dict:
    w = torch.nn.Parameter(torch.zeros(1))
    run.watch([w])
    run.step(w.sum())
    return run.finish(metrics)


def test_a_record_names_its_metric_and_without_a_name_belongs_to_the_one_declared_with_examples():
    declared = {"val_score": {"direction": "max", "unit": "pts", "examples": True}, "val_loss": "min"}
    correct = torch.tensor([True, False, True, True])
    run = Run(0, metrics=declared)
    run.record_examples(correct)  # no name: the one metric declared with examples: true
    out = _finished(run, {"val_score": 75.0, "val_loss": 0.5})
    assert out["examples"]["metric"] == "val_score" and out["examples"]["n"] == 4
    assert results_io.example_correctness(out, "val_score").tolist() == correct.tolist()
    assert results_io.example_correctness(out, "val_loss") is None

    run = Run(0, metrics=declared)
    run.record_examples(correct, metric="val_score")
    assert _finished(run, {"val_score": 75.0})["examples"]["metric"] == "val_score"


@pytest.mark.parametrize("declared, which", [
    ({"val_score": "max", "val_loss": "min"}, "none of the declared metrics"),
    ({"a": {"direction": "max", "unit": "pts", "examples": True}, "b": {"direction": "max", "unit": "pts", "examples": True}}, "a, b"),
    (None, "no metrics were declared"),
])
def test_a_record_without_a_name_and_not_one_declared_examples_metric_is_set_aside_with_the_fix(declared, which):
    """Found after training, the slip never fails the run: the record is kept apart, unused, with
    the line that fixes it (a Run outside a harness run also warns: no analysis will say it)."""
    run = Run(0, metrics=declared)
    run.record_examples(torch.ones(3, dtype=torch.bool))
    with pytest.warns(FutureWarning, match="examples: true") as caught:
        out = _finished(run, {"val_score": 100.0})
    assert "examples" not in out and results_io.example_correctness(out, "val_score") is None
    (aside,) = out["examples_set_aside"]
    assert which in aside["why"] and "stats.metrics" in aside["fix"] and "metric=" in aside["fix"] and aside["n"] == 3
    assert len(caught) == 1


def test_records_of_two_metrics_are_both_kept_and_each_is_read_by_its_name():
    declared = {"top1": {"direction": "max", "unit": "pts", "examples": True},
                "top5": {"direction": "max", "unit": "pts", "examples": True}}
    run = Run(0, metrics=declared)
    top1, top5 = torch.tensor([True, False, False, True]), torch.tensor([True, True, False, True])
    run.record_examples(top1, metric="top1")
    run.record_examples(top5, metric="top5")
    out = json.loads(json.dumps(_finished(run, {"top1": 50.0, "top5": 75.0})))  # as result.json holds it
    assert results_io.example_correctness(out, "top1").tolist() == top1.tolist()
    assert results_io.example_correctness(out, "top5").tolist() == top5.tolist()
    assert {r["metric"] for r in results_io.example_records(out)} == {"top1", "top5"}


def test_a_record_of_a_metric_the_function_did_not_return_is_set_aside_not_a_failed_run():
    run = Run(0, metrics={"val_score": {"direction": "max", "unit": "pts", "examples": True}})
    run.record_examples(torch.ones(3, dtype=torch.bool), metric="val_scor")
    with pytest.warns(FutureWarning, match="val_scor.*returned no such metric"):
        out = _finished(run, {"val_score": 100.0})
    assert out["metrics"] == {"val_score": 100.0} and "examples" not in out
    (aside,) = out["examples_set_aside"]
    assert "return val_scor" in aside["fix"] and "metric=" in aside["fix"]


def test_the_builtin_loop_records_test_accuracy(tmp_path):
    from .conftest import FAST

    res = harness.run([*FAST, "seed=0", "arm=A", "repro.certificate=false", "determinism.threads=1"],
                      out_dir=tmp_path, verbose=False)
    (result,) = res.results
    assert result["status"] == "completed", result["error"]
    assert result["examples"]["metric"] == "test_accuracy"


# -- 2. a user's metric with per-example outcomes gets the test set's noise -----------------------


def test_a_users_float32_metric_gets_the_test_sets_noise(val_ab):
    out, res = val_ab
    assert all(r["status"] == "completed" for r in res.results), [r.get("error") for r in res.results]
    for r in res.results:
        assert r["examples"]["metric"] == "val_score" and r["examples"]["n"] == N_VAL
    a = res.analysis
    assert a["metric"] == "val_score" and a["unit"] == "pts"
    assert a["test_set_noise"]["available"], a["test_set_noise"]
    assert a["test_set_noise"]["n_examples"] == N_VAL and a["excluded"] == []
    assert a["comparisons"]["B"]["test_set"]["se_test_set"] > 0
    assert a["noise_floor"]["n_test"] == N_VAL  # from the record: the user returns no n_test


def _records(values, n=N_VAL, metric="val_score", seeds=4, rng_seed=3):
    """Factory results whose value is float32(100 * mean(correct)) of their own record of ``metric``."""
    rng = np.random.default_rng(rng_seed)
    directions = {"val_score": {"direction": "max", "unit": "pts", "examples": True}, "val_loss": "min"}
    items = []
    for seed in range(seeds):
        for arm in ("A", "B"):
            correct = rng.random(n) < 0.8
            value = values(correct)
            r = F.make_result(seed, arm, value, metrics={"val_score": value, "val_loss": 0.3},
                              directions=directions)
            r["config"]["stats"]["metric"] = "val_score"  # (stats is not in the config hashes)
            r["examples"] = results_io.pack_examples(correct, metric=metric)
            items.append(r)
    return items


def _float32_pts(correct) -> float:
    return float(np.float32(100) * np.float32(correct.sum()) / np.float32(correct.size))


def test_the_agreement_check_tolerates_float32_rounding_and_no_more():
    items = _records(_float32_pts)
    gaps = [abs(r["metrics"]["val_score"] - 100 * results_io.example_correctness(r, "val_score").mean())
            for r in items]
    assert max(gaps) > 1e-6  # float32 rounding is larger than the old fixed tolerance
    by_arm = {arm: {r["seed"]: {"value": r["metrics"]["val_score"], "result": r} for r in items if r["arm"] == arm}
              for arm in ("A", "B")}
    compared = {"B": list(range(4))}
    arrays, note = example_records.examples(compared, by_arm, "A", VAL_SCORE)
    assert note["available"], note
    assert arrays["B"][0].shape == (4, N_VAL)
    # one example more is not rounding
    by_arm["B"][2]["value"] += 100 / N_VAL
    arrays, note = example_records.examples(compared, by_arm, "A", VAL_SCORE)
    assert not note["available"] and "seed 2 arm B" in note["reason"] and "not the same test set" in note["reason"]


def test_the_analysis_uses_only_the_records_of_the_metric_it_analyses():
    items = _records(_float32_pts, metric="val_loss")  # a record, but of another metric
    a = analyze(items)
    assert not a["test_set_noise"]["available"] and a["excluded"] == []
    assert "val_score" in a["test_set_noise"]["reason"]


def test_an_older_record_without_a_metric_belongs_to_the_declared_examples_metric(val_ab, tmp_path):
    out, res = val_ab
    old = tmp_path / "old"
    for r in res.results:
        r = json.loads(json.dumps(r))
        del r["examples"]["metric"]  # as a harness without examples.metric wrote it
        results_io.write_json(results_io.run_dir(old, r["seed"], r["arm"]) / results_io.RESULT_NAME, r)
    a = analyze_dir(old, write=False)
    assert a["test_set_noise"]["available"] and a["test_set_noise"]["n_examples"] == N_VAL


# -- 3. a metric its own per-example record contradicts is excluded -------------------------------


def test_a_hand_edited_metric_that_its_record_contradicts_is_excluded(val_ab, tmp_path):
    out, res = val_ab
    edited = tmp_path / "edited"
    for r in res.results:
        r = json.loads(json.dumps(r))
        if (r["seed"], r["arm"]) == (1, "B"):
            true_value = r["metrics"]["val_score"]
            r["metrics"]["val_score"] = 99.99
        results_io.write_json(results_io.run_dir(edited, r["seed"], r["arm"]) / results_io.RESULT_NAME, r)
    a = analyze_dir(edited, write=True)
    reasons = {(e["seed"], e["arm"]): e["reason"] for e in a["excluded"]}
    assert reasons[(1, "B")] == (f"val_score 99.99 disagrees with its per-example record "
                                 f"({true_value:.2f} from {N_VAL} examples): excluded")
    assert a["arms"]["B"]["seeds"] == [0, 2, 3] and 99.99 not in a["arms"]["B"]["values"]
    assert "99.99 disagrees with its per-example record" in (edited / "report.md").read_text()


def test_the_reason_shows_enough_digits_to_tell_the_values_apart():
    items = _records(_float32_pts)
    items[1]["metrics"]["val_score"] += 0.001
    usable, excluded = _usable_runs(items, VAL_SCORE)
    (e,) = excluded
    value = items[1]["metrics"]["val_score"]
    record = 100 * results_io.example_correctness(items[1], "val_score").mean()
    match = re.fullmatch(r"val_score (\d+\.(\d+)) disagrees with its per-example record \((\d+\.\d+) from "
                         rf"{N_VAL} examples\): excluded", e["reason"])
    assert match, e["reason"]
    shown_value, decimals, shown_record = match[1], len(match[2]), match[3]
    assert shown_value != shown_record and len(shown_record.split(".")[1]) == decimals >= 2
    assert abs(float(shown_value) - value) <= 0.5 * 10**-decimals
    assert abs(float(shown_record) - record) <= 0.5 * 10**-decimals
    assert len(usable) == len(items) - 1


# -- 4. the noise audit: any declared metric ------------------------------------------------------


@pytest.mark.solo  # the noise audit reruns with 2 and 3 threads: the counts are the point
def test_the_noise_audit_reads_a_users_metric_and_its_unit_from_the_declaration(conf_dir, tmp_path, capsys):
    out_dir = tmp_path / "audit"
    code = noise_audit.main(["--config-dir", str(conf_dir), "--repeats", "2", "--out", str(out_dir), *TINY,
                             "arm=A"])
    assert code == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    result = json.loads((out_dir / "noise_audit.json").read_text())
    assert result["metric"] == "val_score"  # the declared primary metric
    assert result["summary"]["repeat"]["metrics"]["val_score"]["std"] == 0
    assert f"final val_score (pts; {N_VAL} test examples, one = {100 / N_VAL:.3g} pts)" in text
    assert "final val_loss" in text and "test_accuracy" not in text


@pytest.mark.solo  # the noise audit reruns with 2 and 3 threads: the counts are the point
def test_the_noise_audit_takes_train_loss_of_a_users_loop(conf_dir, tmp_path, capsys):
    out_dir = tmp_path / "audit"
    code = noise_audit.main(["--config-dir", str(conf_dir), "--repeats", "2", "--out", str(out_dir),
                             "--metric", "train_loss", *TINY, "arm=A"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((out_dir / "noise_audit.json").read_text())["metric"] == "train_loss"
    assert "final train_loss:" in capsys.readouterr().out


def test_the_noise_audit_refuses_an_undeclared_metric_in_one_paragraph(conf_dir, tmp_path, capsys):
    code = noise_audit.main(["--config-dir", str(conf_dir), "--out", str(tmp_path), "--metric", "val_acc", *TINY])
    assert code == 2
    err = capsys.readouterr().err
    assert "stats.metrics" in err and "val_score" in err and "val_loss" in err and "val_acc" in err
    assert err.count("\n") == 1


# -- 5. goldens: any declared metric --------------------------------------------------------------


def test_a_golden_of_a_users_loop_names_its_declared_metric_and_unit(conf_dir, tmp_path, capsys):
    path = tmp_path / "golden.json"
    overrides = [*TINY, "seed=0", "arm=A"]
    assert golden.save(str(path), overrides, [conf_dir]) == 0
    saved = capsys.readouterr().out
    value = json.loads(path.read_text())["metrics"]["val_score"]
    assert f"val_score {value:.6g} pts" in saved and "test_accuracy" not in saved and "nan" not in saved
    assert golden.check(str(path), [f"train.max_steps={STEPS - 4}"], [conf_dir]) == 1
    failed = capsys.readouterr().out
    assert "golden check FAILED" in failed and f"{value:.6g} pts in the golden" in failed
    assert "val_loss" in failed  # every declared metric the runs report, with its own unit
