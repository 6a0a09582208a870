"""harness.hf.Callback in a user's own Hugging Face Trainer: the pairing proven from the batches the
model was trained on and the Trainer's sampler drawing from the harness's data_order stream (the
user's args.seed=1234 neither pairs nor unpairs the arms), one step record per optimizer step, the
certificate bitwise. A tiny BERT built from a config: no download."""

from __future__ import annotations

from omegaconf import OmegaConf

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
