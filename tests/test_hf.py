"""harness.hf.Callback in a user's own Hugging Face Trainer: the pairing proven from the batches the
model was trained on and the Trainer's sampler drawing from the harness's data_order stream (the
user's args.seed=1234 neither pairs nor unpairs the arms), one step record per optimizer step, the
certificate bitwise; with report_to="wandb", one wandb run per unit. A tiny BERT built from a config:
no download."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.results import load_steps
from harness.training.run import Run

from . import hf_fns, wandb_reader
from .trainer_ab import attached_units, run_paired_ab


@pytest.fixture(scope="module")
def wandb_ab(tmp_path_factory):
    """One A/B read by two tests: the user's own Trainer with report_to="wandb" (its TrainingArguments
    say seed=1234), the harness logging to wandb (offline, in this process; $HOME fresh, no WANDB_*)."""
    out = tmp_path_factory.mktemp("hf_wandb")
    with pytest.MonkeyPatch.context() as mp:
        for var in [v for v in os.environ if v.startswith("WANDB_")]:
            mp.delenv(var)
        mp.setenv("HOME", str(out / "home"))
        results = run_paired_ab(out / "exp", "tests.hf_fns.fit_with_wandb", logger="wandb",
                                overrides=["logger.wandb.history_every=1"])
    return out / "exp", results


@pytest.mark.slow
def test_a_hugging_face_ab_is_paired_by_its_fingerprints_and_bitwise(wandb_ab):
    _, results = wandb_ab  # run_paired_ab checked the pairing and the certificate
    r = results[(0, "A")]
    assert r["fingerprints"]["batches"] == 8  # 128 sequences in batches of 16, each fingerprinted
    assert r["code"]["packages"].get("transformers", "").startswith("transformers==")
    assert "loss" in r["curve"]  # the Trainer's logged values are the curve


@pytest.mark.slow
def test_report_to_wandb_logs_into_the_units_one_run(wandb_ab):
    """The Trainer's WandbCallback logs into the harness's run of each unit (read back from the
    offline .wandb files): one run per unit plus the analysis, none of the Trainer's own; the
    certificate's rerun (wandb off for it, a disabled run for the Trainer) adds none."""
    out, _ = wandb_ab
    runs = wandb_reader.read_runs(out / "wandb")
    units = {f"seed={s} arm={a}" for s in range(3) for a in "AB"}
    assert collections.Counter(r.name for r in runs) == collections.Counter(units | {"analysis"})
    assert {r.project for r in runs} == {"harness"} and len({r.group for r in runs}) == 1
    for run in runs:
        if run.name == "analysis":
            continue
        arm = run.name.split("arm=")[1]
        assert run.job_type == arm and run.config["arm"] == arm and run.exit_code == 0
        hf_rows = [row for row in run.history if "train/global_step" in row]  # what the Trainer logged
        assert [row["train/global_step"] for row in hf_rows if "train/grad_norm" in row] == [2, 4, 6, 8]
        assert any("eval/accuracy" in row for row in hf_rows)  # trainer.evaluate() after training, too
        harness_rows = [row for row in run.history if "harness/step" in row]  # and the harness's record
        assert [row["harness/step"] for row in harness_rows] == list(range(1, 9))
        assert run.summary["fingerprints/data_order"]


def test_gradient_accumulation_records_one_step_per_optimizer_step():
    run = Run(0)
    hf_fns.fit(OmegaConf.create({"loss": {"label_smoothing": 0.0}}), run, gradient_accumulation_steps=2)
    out = run.finish({"x": 1.0})
    assert out["fingerprints"]["batches"] == 8 and len(out["fingerprints"]["steps"]["params"]) == 4


@pytest.mark.slow
def test_in_a_command_arms_script_the_callback_attaches_and_its_record_pairs_the_arms(tmp_path, monkeypatch):
    units = attached_units(tmp_path, monkeypatch, hf_fns.script)
    record = units[(0, "A")][0]
    assert len(record["fingerprints"]["steps"]["params"]) == 8
    assert "eval_accuracy" in record["metrics"]  # written after trainer.evaluate()


@pytest.mark.slow
def test_under_a_command_arm_evaluated_every_epoch_the_record_covers_every_step(tmp_path, monkeypatch):
    """eval_strategy="epoch" does not close the record: it is built when training ends, and the
    trainer.evaluate() after it only adds its metrics."""
    units = attached_units(tmp_path, monkeypatch,
                           lambda seed, smoothing: hf_fns.script(seed, smoothing, epochs=2, eval_strategy="epoch"))
    for record, returned in units.values():
        fp = record["fingerprints"]
        assert len(fp["steps"]["loss"]) == 16 and fp["batches"] == 16 and fp["steps_trained"] == 16  # 2 epochs of 8
        assert record["metrics"]["eval_loss"] == returned["test_loss"]  # the last evaluate's


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "hf"


@pytest.mark.slow
def test_the_hf_fit_example_is_paired_by_its_fingerprints_and_bitwise(tmp_path, monkeypatch):
    """examples/hf: a BERT from a config, datasets and TrainingArguments from the yaml, no script; the
    seeds and determinism the harness's, the final metrics trainer.evaluate()'s. Made small here."""
    monkeypatch.syspath_prepend(str(EXAMPLE))  # the example's data.py, as its PYTHONPATH=examples/hf does
    results = run_paired_ab(tmp_path, None, arms=("low", "high"), experiment="hf_fit_ab",
                            config_dir=str(EXAMPLE / "conf"), overrides=[
                                "train.kwargs.train_dataset.n=128", "train.kwargs.eval_dataset.n=64",
                                "train.kwargs.args.num_train_epochs=2", "+train.kwargs.args.eval_strategy=epoch",
                                "train.kwargs.model.config.num_hidden_layers=1"])
    r = results[(0, "low")]  # evaluated after each epoch: the record still covers both
    assert r["fingerprints"]["batches"] == 8 and len(load_steps(r)["loss"]) == 8  # 2 x 128 sequences in batches of 32
    assert set(r["metrics"]) == {"eval_loss", "eval_accuracy"}  # trainer.evaluate()'s, its timings left out
    assert r["code"]["packages"].get("transformers", "").startswith("transformers==")


@pytest.mark.parametrize("key", ["seed", "full_determinism"])
def test_hf_fit_refuses_the_arguments_the_harness_sets(key):
    from harness.hf import HarnessHFError, fit

    with pytest.raises(HarnessHFError, match=rf"train.kwargs.args.{key} is set, but the harness sets seed, data_seed"):
        fit(OmegaConf.create({}), Run(0), model={"_target_": "tests.hf_fns.model"}, train_dataset={},
            eval_dataset={}, args={key: 1})
