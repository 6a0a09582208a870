"""harness.hf.Callback in a user's own Hugging Face Trainer: the pairing proven from the batches the
model was trained on and the Trainer's sampler drawing from the harness's data_order stream (the
user's args.seed=1234 neither pairs nor unpairs the arms), one step record per optimizer step, the
certificate bitwise. A tiny BERT built from a config: no download."""

from __future__ import annotations

from omegaconf import OmegaConf

import harness
from harness.results import read_json
from harness.training.run import Run

from . import hf_fns

PAIRS = ["+experiment=loss_ab", "ab.seeds=[0,1,2]", "logger=none", "progress=false", "workers=1",
         "determinism.threads=1", "train.fn=tests.hf_fns.fit"]


def test_a_hugging_face_ab_is_paired_by_its_fingerprints_and_bitwise(tmp_path):
    res = harness.run(PAIRS, out_dir=tmp_path, verbose=False)
    assert res.analysis is not None
    fps = {(s, a): read_json(tmp_path / "runs" / f"seed={s}" / f"arm={a}" / "result.json")["fingerprints"]
           for s in range(3) for a in ("A", "B")}
    for key in ("init", "data_order"):
        assert all(fps[(s, "A")][key] == fps[(s, "B")][key] for s in range(3))
        assert len({fps[(s, "A")][key] for s in range(3)}) == 3 and None not in {f[key] for f in fps.values()}
    assert fps[(0, "A")]["batches"] == 8 and fps[(0, "A")]["final"] != fps[(0, "B")]["final"]
    a = read_json(tmp_path / "analysis.json")
    assert a["pairing"]["proven"] is True and a["pairing"]["basis"] == "fingerprints"
    assert a["certificate"]["reproducible"] is True and a["certificate"]["line"].startswith("bitwise reproducible: yes")
    r = read_json(tmp_path / "runs" / "seed=0" / "arm=A" / "result.json")
    assert r["code"]["packages"].get("transformers", "").startswith("transformers==")
    assert "loss" in r["curve"]  # the Trainer's logged values are the curve


def test_gradient_accumulation_records_one_step_per_optimizer_step():
    run = Run(0)
    hf_fns.fit(OmegaConf.create({"loss": {"label_smoothing": 0.0}}), run, gradient_accumulation_steps=2)
    out = run.finish({"x": 1.0})
    assert out["fingerprints"]["batches"] == 8 and len(out["fingerprints"]["steps"]["params"]) == 4
