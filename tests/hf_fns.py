"""A tiny Hugging Face project (tests/test_hf.py): a 1-layer BERT built from a config (no download)
classifying synthetic token sequences, the user's own Trainer with harness.hf.Callback added. The
arms differ in loss.label_smoothing (TrainingArguments.label_smoothing_factor)."""

from __future__ import annotations

import tempfile

import torch
import transformers

from harness.hf import Callback


class Tokens(torch.utils.data.Dataset):
    """128 sequences of 8 tokens; the label: whether token 1 appears more often than token 2."""

    def __init__(self, n: int = 128):
        g = torch.Generator().manual_seed(7)  # the same data in every run
        self.ids = torch.randint(0, 20, (n, 8), generator=g)
        self.labels = ((self.ids == 1).sum(1) > (self.ids == 2).sum(1)).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def model() -> transformers.PreTrainedModel:
    config = transformers.BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16, num_labels=2)
    return transformers.BertForSequenceClassification(config)


def fit(cfg, run, gradient_accumulation_steps: int = 1) -> dict:
    with run.init():
        net = model()
    return train(net, Callback(run), float(cfg.loss.label_smoothing), gradient_accumulation_steps)


def fit_with_wandb(cfg, run) -> dict:
    """fit with the Trainer's own report_to="wandb", as its users set it."""
    with run.init():
        net = model()
    return train(net, Callback(run), float(cfg.loss.label_smoothing), report_to=["wandb"])


def script(seed: int, label_smoothing: float, epochs: int = 1, eval_strategy: str = "no") -> dict:
    """What a command arm's script does: its own seeding and model, Callback() with no Run."""
    transformers.set_seed(seed)
    return train(model(), Callback(), label_smoothing, epochs=epochs, eval_strategy=eval_strategy)


def train(net, callback, label_smoothing: float, gradient_accumulation_steps: int = 1, report_to=(), epochs: int = 1,
          eval_strategy: str = "no") -> dict:
    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, num_train_epochs=epochs, eval_strategy=eval_strategy, per_device_train_batch_size=16,
            learning_rate=1e-3, use_cpu=True,
            report_to=list(report_to), save_strategy="no", logging_steps=2, disable_tqdm=True, seed=1234,
            gradient_accumulation_steps=gradient_accumulation_steps,
            label_smoothing_factor=label_smoothing, dataloader_num_workers=0)
        trainer = transformers.Trainer(model=net, args=args, train_dataset=Tokens(), eval_dataset=Tokens(64),
                                       compute_metrics=_accuracy, callbacks=[callback])
        trainer.train()
        trainer.evaluate()
    return {"test_loss": callback.metrics["eval_loss"], "test_accuracy": callback.metrics["eval_accuracy"]}


def _accuracy(prediction) -> dict:
    return {"accuracy": 100.0 * float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}
