"""harness.hf.Callback in a user's own Hugging Face Trainer: the pairing proven from the batches the
model was trained on and the Trainer's sampler drawing from the harness's data_order stream (the
user's args.seed=1234 neither pairs nor unpairs the arms), one step record per optimizer step, the
certificate bitwise. A tiny BERT built from a config: no download."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.results import load_steps
from harness.training.run import Run

from . import hf_fns
from .trainer_ab import attached_units, run_paired_ab


def test_a_hugging_face_ab_is_paired_by_its_fingerprints_and_bitwise(tmp_path):
    results = run_paired_ab(tmp_path, "tests.hf_fns.fit")  # its TrainingArguments say seed=1234
    r = results[(0, "A")]
    assert r["fingerprints"]["batches"] == 8  # 128 sequences in batches of 16, each fingerprinted
    assert r["code"]["packages"].get("transformers", "").startswith("transformers==")
    assert "loss" in r["curve"]  # the Trainer's logged values are the curve


def test_gradient_accumulation_records_one_step_per_optimizer_step():
    run = Run(0)
    hf_fns.fit(OmegaConf.create({"loss": {"label_smoothing": 0.0}}), run, gradient_accumulation_steps=2)
    out = run.finish({"x": 1.0})
    assert out["fingerprints"]["batches"] == 8 and len(out["fingerprints"]["steps"]["params"]) == 4


def test_in_a_command_arms_script_the_callback_attaches_and_its_record_pairs_the_arms(tmp_path, monkeypatch):
    units = attached_units(tmp_path, monkeypatch, hf_fns.script)
    record = units[(0, "A")][0]
    assert len(record["fingerprints"]["steps"]["params"]) == 8
    assert "eval_accuracy" in record["metrics"]  # written after trainer.evaluate()


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "hf"


def test_the_hf_fit_example_is_paired_by_its_fingerprints_and_bitwise(tmp_path, monkeypatch):
    """examples/hf: a BERT from a config, datasets and TrainingArguments from the yaml, no script; the
    seeds and determinism the harness's, the final metrics trainer.evaluate()'s. Made small here."""
    monkeypatch.syspath_prepend(str(EXAMPLE))  # the example's data.py, as its PYTHONPATH=examples/hf does
    results = run_paired_ab(tmp_path, None, arms=("low", "high"), experiment="hf_fit_ab",
                            config_dir=str(EXAMPLE / "conf"), overrides=[
                                "train.kwargs.train_dataset.n=128", "train.kwargs.eval_dataset.n=64",
                                "train.kwargs.args.num_train_epochs=1", "train.kwargs.model.config.num_hidden_layers=1"])
    r = results[(0, "low")]
    assert r["fingerprints"]["batches"] == 4 and len(load_steps(r)["loss"]) == 4  # 128 sequences in batches of 32
    assert set(r["metrics"]) == {"eval_loss", "eval_accuracy"}  # trainer.evaluate()'s, its timings left out
    assert r["code"]["packages"].get("transformers", "").startswith("transformers==")


@pytest.mark.parametrize("key", ["seed", "full_determinism"])
def test_hf_fit_refuses_the_arguments_the_harness_sets(key):
    from harness.hf import HarnessHFError, fit

    with pytest.raises(HarnessHFError, match=rf"train.kwargs.args.{key} is set, but the harness sets seed, data_seed"):
        fit(OmegaConf.create({}), Run(0), model={"_target_": "tests.hf_fns.model"}, train_dataset={},
            eval_dataset={}, args={key: 1})
