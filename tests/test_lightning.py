"""harness.lightning.Callback in a user's own Trainer: the pairing proven from the batches Lightning
consumed (a DataModule shuffling from the global RNG included), one step record per optimizer step,
the user's seed_everything harmless, the Trainer kept to the harness's determinism, lines printed once."""

from __future__ import annotations

import logging

import pytest
import torch

import harness
from harness.lightning import HarnessLightningError
from harness.results import load_steps
from harness.training.run import Run

from . import lightning_fns as L
from .test_attach import HARNESS_ENV
from .trainer_ab import attached_units, run_paired_ab


@pytest.mark.slow
def test_a_lightning_ab_is_paired_by_its_fingerprints_and_bitwise(tmp_path):
    results = run_paired_ab(tmp_path, "tests.lightning_fns.fit")  # its fn calls seed_everything(1234)
    assert results[(0, "A")]["fingerprints"]["batches"] == 8  # 256 examples in batches of 32, each fingerprinted
    r = results[(1, "B")]
    assert set(r["metrics"]) >= {"test_accuracy", "test_loss", "train_loss"}
    assert r["curve"]["test_accuracy"][-1] == r["metrics"]["test_accuracy"]  # logged metrics: the curve too
    assert r["code"]["packages"].get("lightning", "").startswith("lightning==")  # the version is the identity's


def test_gradient_accumulation_records_one_step_per_optimizer_step():
    run = Run(0)
    L.fit(_cfg(), run, accumulate_grad_batches=2)
    out = run.finish({"x": 1.0})
    assert out["fingerprints"]["batches"] == 8 and len(out["fingerprints"]["steps"]["params"]) == 4


def test_a_trainer_that_weakens_the_harness_determinism_is_refused():
    torch.use_deterministic_algorithms(True)  # the harness's determinism.mode=strict
    try:
        callback = L.Callback(Run(0))
        with pytest.raises(HarnessLightningError, match=r"determinism to 'off' \(Trainer\(deterministic=...\)\).*determinism.mode=strict"):
            L.trainer(callback, deterministic=False).fit(L.MLP(), datamodule=L.Digits())
    finally:
        torch.use_deterministic_algorithms(False)


def test_lightning_lines_are_printed_once_under_a_root_logger_that_prints():
    """Lightning imported before logging was set up has console handlers of its own; a Hydra app's
    root logger prints too: each line went out twice (once as 'INFO: ...', once in the app's format)."""
    root = logging.getLogger()
    loggers = [logging.getLogger(n) for n in ("lightning", "lightning.pytorch")]
    saved = [(lg.propagate, list(lg.handlers)) for lg in loggers]
    seen_root, seen_own = _Collect(), _Collect()
    root.addHandler(seen_root)
    loggers[0].addHandler(seen_own)  # what Lightning's import adds: a console handler
    loggers[1].addHandler(_Stream(seen_own))
    loggers[1].propagate = False
    try:
        L.Callback(Run(0))
        logging.getLogger("lightning.pytorch.utilities.rank_zero").info("GPU available: False")
        assert seen_root.messages == ["GPU available: False"] and seen_own.messages == []
    finally:
        root.removeHandler(seen_root)
        for lg, (propagate, handlers) in zip(loggers, saved):
            lg.handlers[:] = handlers
            lg.propagate = propagate


class _Stream(logging.StreamHandler):
    def __init__(self, collect):
        super().__init__()
        self.collect = collect

    def emit(self, record):
        self.collect.emit(record)


class _Collect(logging.StreamHandler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _cfg():
    from omegaconf import OmegaConf

    return OmegaConf.create({"loss": {"label_smoothing": 0.0}})


@pytest.mark.slow
def test_in_a_command_arms_script_the_callback_attaches_and_its_record_pairs_the_arms(tmp_path, monkeypatch):
    from harness.training.fingerprint import model_fingerprint

    def script(seed, smoothing):
        module = L.script(seed, smoothing)
        assert L.Callback().run is harness.attach()  # one Run per unit: the script's and the callback's
        return module

    units = attached_units(tmp_path, monkeypatch, script)
    for record, module in units.values():
        assert record["fingerprints"]["final"] == model_fingerprint(module)
    record = units[(0, "A")][0]
    assert len(record["fingerprints"]["steps"]["loss"]) == 8 and "test_accuracy" in record["metrics"]
    for key in HARNESS_ENV:
        monkeypatch.delenv(key)
    alone = L.script(1, 0.0)  # by hand, no harness: seed_everything(1) gives the unit of seed 1's weights
    assert model_fingerprint(alone) == units[(1, "A")][0]["fingerprints"]["final"]


def test_under_a_command_arm_validated_every_epoch_the_record_covers_every_step(tmp_path, monkeypatch):
    """Validation after each epoch does not close the record: it is built when the fit ends, and
    the certificate's line says how many of the steps the trainer took it compared."""
    from harness.experiment.units import certificate

    units = attached_units(tmp_path, monkeypatch, lambda seed, smoothing: L.script(seed, smoothing, epochs=2))
    for record, _module in units.values():
        fp = record["fingerprints"]
        assert len(fp["steps"]["loss"]) == 16 and fp["batches"] == 16 and fp["steps_trained"] == 16  # 2 epochs of 8
        assert record["curve"]["step"] == [8, 16] and "test_accuracy" in record["metrics"]
    record = {**units[(0, "A")][0], "seed": 0, "arm": "A"}
    assert certificate(record, record)["line"] == "bitwise reproducible: yes (16 of 16 steps, seed 0, arm A rerun)"


def test_a_callback_that_records_fewer_steps_than_the_trainer_took_is_partial_never_yes():
    from harness.experiment.units import certificate

    run = Run(0)
    with run.init():
        module = L.MLP()
    L.trainer(L.FirstEpochOnly(run), max_epochs=2).fit(module, datamodule=L.Digits())
    record = {**run.finish({"x": 1.0}), "seed": 0, "arm": "A"}
    assert len(record["fingerprints"]["steps"]["loss"]) == 8 and record["fingerprints"]["steps_trained"] == 16
    cert = certificate(record, record)
    assert cert["line"].startswith("bitwise reproducible: PARTIAL") and "8 of the 16 steps" in cert["line"]
    assert "yes" not in cert["line"] and cert["reproducible"] is False


@pytest.mark.slow
def test_harness_lightning_fit_runs_a_module_and_datamodule_from_the_config(tmp_path):
    results = run_paired_ab(tmp_path, "harness.lightning.fit", overrides=[
        "+train.kwargs.module={_target_: tests.lightning_fns.MLP, label_smoothing: 0.0}",
        "+train.kwargs.datamodule={_target_: tests.lightning_fns.Digits, batch_size: 64}",
        "+train.kwargs.trainer={max_epochs: 2, num_sanity_val_steps: 0, enable_model_summary: false}",
        "ab.factor=train.kwargs.module.label_smoothing", "ab.arms={A: 0.0, B: 0.1}"])
    r = results[(0, "A")]  # validated after each epoch: the record still covers both
    assert r["fingerprints"]["batches"] == 8 and len(load_steps(r)["loss"]) == 8  # 2 x 256 examples in batches of 64
    assert set(r["metrics"]) >= {"test_accuracy", "test_loss"}
