"""harness.hf.Callback in a user's own Hugging Face Trainer: the pairing proven from the batches the
model was trained on and the Trainer's sampler drawing from the harness's data_order stream (the
user's args.seed=1234 neither pairs nor unpairs the arms), one step record per optimizer step, the
certificate bitwise. A tiny BERT built from a config: no download."""

from __future__ import annotations

from omegaconf import OmegaConf

from harness.training.run import Run

from . import hf_fns
from .trainer_ab import run_paired_ab


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
    from harness.integrations.attach import ATTACHED_NAME, RUN_ENV, run_settings
    from harness.results import read_json

    determinism = {"mode": "strict", "threads": 1, "fill_uninitialized_memory": False, "cudnn_benchmark": False}
    fps = {}
    try:
        for seed, arm, smoothing in ((0, "A", 0.0), (0, "B", 0.1), (1, "A", 0.0)):
            folder = tmp_path / f"{seed}{arm}"
            folder.mkdir()
            for key, value in (("HARNESS_RUN_DIR", str(folder)), ("HARNESS_SEED", str(seed)), ("HARNESS_ARM", arm),
                               (RUN_ENV, run_settings("cpu", "fp32", determinism, None, None, 10))):
                monkeypatch.setenv(key, value)
            hf_fns.script(seed, smoothing)
            record = read_json(folder / ATTACHED_NAME)  # written after trainer.evaluate()
            assert "eval_accuracy" in record["metrics"]
            parent = Run(seed)
            parent.adopt(record)  # what the command arm does after the script
            fps[(seed, arm)] = parent.finish({})["fingerprints"]
    finally:
        import torch

        torch.use_deterministic_algorithms(False)
    for key in ("init", "data_order"):
        assert fps[(0, "A")][key] == fps[(0, "B")][key] != fps[(1, "A")][key] and fps[(0, "A")][key]
    assert len(fps[(0, "A")]["steps"]["params"]) == 8
