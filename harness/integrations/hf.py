"""``harness.hf.Callback()``: a Hugging Face ``Trainer``'s run recorded through the unit's Run.

Added to a user's own ``Trainer(callbacks=[...])``, it attaches to the unit (``harness.attach()`` in
a script a command arm starts; ``Callback(run)`` in a train.fn) and records what a train.fn records:

- seeds: at the start of training the Trainer's sampler draws its order from the Run's data_order
  stream (accelerate's seedable sampler gets a seed derived from it; a plain RandomSampler its
  generator), whatever ``args.seed``/``data_seed`` say, and the global RNG (dropout) is reseeded
  from the model stream;
- the init fingerprint before the first step (``run.watch(model)``); one step record per optimizer
  step (``on_step_end``: gradient accumulation is the Trainer's), the model's loss summed over its
  batches (where the Trainer computes the loss itself, e.g. label smoothing: the logits' sum);
- the data order from the content of every batch the model is trained on (a forward pre-hook while
  the model is in training mode: whoever built the loader), labels left out (the Trainer takes them
  out of the batch itself when it computes the loss, e.g. with label smoothing);
- the logged values as curve points (``on_log``) and ``trainer.evaluate()``'s metrics as the final
  ones (``callback.metrics``; an attached script's record);
- one wandb run per unit: with ``report_to="wandb"`` the Trainer's WandbCallback logs into the
  harness's run of the unit (opened before training, grouped by seed and arm), or is turned off where
  the harness logs the unit elsewhere; the console says which (wandb_hook.py).

``fit`` is the train.fn for a project with no script of its own: the model, the datasets and the
TrainingArguments' keyword arguments from the config, the seeds and the determinism from the harness.

Imports transformers (``pip install "harness[hf]"``); nothing else in the harness does.
"""

from __future__ import annotations

import numbers
import os
from typing import Optional

import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - the extra is installed with the tests
    raise ImportError('harness.hf needs transformers: pip install "harness[hf]" (or pip install transformers '
                      "accelerate).") from e

from harness import HarnessError
from harness.integrations.attach import AttachedRun, attach
from harness.integrations.wandb_hook import share


class Callback(transformers.TrainerCallback):
    """Records a Trainer's training through the unit's Run. ``run``: a train.fn's Run; None: attach()."""

    def __init__(self, run=None):
        self.run = run  # None: attached when training starts, on args.seed when the script runs on its own
        self.metrics: dict = {}
        self._loss: Optional[torch.Tensor] = None
        self._hooks: list = []
        self._first_step = 0  # state.global_step when training began (a resumed training counts from there)
        # before the Trainer's WandbCallback opens a run of its own (at the start of training)
        self.wandb = share(run.run_dir if run is not None else None,
                           harnessed=run is not None or bool(os.environ.get("HARNESS_RUN_DIR")))

    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        if self.run is None:  # on its own: the script's args.seed names the streams, as the unit's seed does
            self.run = attach(seed=args.seed)
        sampler = getattr(getattr(train_dataloader, "batch_sampler", None), "sampler", None)
        if hasattr(sampler, "initial_seed"):  # accelerate's seedable sampler: the order from data_order
            sampler.initial_seed = self.run.streams.derive("data_order") % 2**62
        elif isinstance(sampler, torch.utils.data.RandomSampler) and sampler.generator is None:
            sampler.generator = self.run.generator("data_order")
        if "wandb" in (args.report_to or []):
            self.wandb.say("harness.hf", 'the Trainer\'s report_to="wandb"', _project(), self.run)
        self._first_step = state.global_step
        self.run.streams.seed_model()
        self.run.watch(model)
        self._hooks = [model.register_forward_pre_hook(self._batch, with_kwargs=True),
                       model.register_forward_hook(self._output)]

    def _batch(self, module, args, kwargs):
        if module.training:  # labels left out: the Trainer takes them out itself when it computes the loss
            self.run.consumed({"args": list(args), **{k: v for k, v in kwargs.items() if k != "labels"}})

    def _output(self, module, args, output):
        if not module.training:
            return
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if not isinstance(loss, torch.Tensor):
            # the Trainer computes the loss itself (label smoothing, compute_loss_func): the logits' sum
            # stands in, as bit-exact a witness of the step's forward pass
            logits = output.get("logits") if isinstance(output, dict) else getattr(output, "logits", None)
            loss = logits.float().sum() if isinstance(logits, torch.Tensor) else None
        if loss is not None:
            loss = loss.detach().float()
            self._loss = loss if self._loss is None else self._loss + loss

    def on_step_end(self, args, state, control, **kwargs):
        self.run.step(self._loss if self._loss is not None else torch.tensor(float("nan")))
        self._loss = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        scalars = _scalars(logs or {})
        if scalars and self.run is not None:
            self.run.log(state.global_step, **scalars)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.metrics.update(_scalars(metrics or {}))
        if self.run is None:  # evaluated before any training: nothing recorded yet
            return
        if isinstance(self.run, AttachedRun) and self.run.attached and self.run.steps:
            self.run.add_metrics(self.metrics)  # written with the record when training ends; rewritten after

    def on_train_end(self, args, state, control, **kwargs):
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self.run.trained(state.global_step - self._first_step)  # counted by the Trainer, not by run.step
        if isinstance(self.run, AttachedRun) and self.run.attached and self.run.steps:
            self.run.finish()  # the record for the command arm: every step, whatever evaluations ran
        self.wandb.release(keep_run=True)  # trainer.evaluate() may follow: its WandbCallback logs then too


HARNESS_ARGS = ("seed", "data_seed", "full_determinism", "use_cpu", "bf16", "fp16")


class HarnessHFError(ValueError, HarnessError):
    """A harness.hf.fit argument the harness sets itself, or a training with nothing to compare."""


def fit(cfg, run, model: dict, train_dataset: dict, eval_dataset: Optional[dict] = None, args: Optional[dict] = None,
        compute_metrics=None, data_collator: Optional[dict] = None) -> dict:
    """A train.fn for a Hugging Face project with no script of its own. ``train.kwargs``:

    - ``model``: a ``_target_`` node, built inside ``run.init()`` (its initial weights from the init
      stream), e.g. ``transformers.AutoModelForSequenceClassification.from_config`` with a ``config``
      node: nothing is downloaded;
    - ``train_dataset``, ``eval_dataset``: ``_target_`` nodes (built once per process, ``run.dataset``);
    - ``args``: ``TrainingArguments``' keyword arguments. ``seed``, ``data_seed`` and
      ``full_determinism`` are the harness's (the unit's streams and determinism.mode), as are the
      device and precision (``use_cpu``, ``bf16``); ``report_to`` is the harness's wandb run of the
      unit where one is open in this process, else none, said (other reporters are kept);
    - ``compute_metrics``: a function's dotted name (or a ``_target_`` node with ``_partial_: true``);
      ``data_collator``: a ``_target_`` node.

    The final metrics are ``trainer.evaluate()``'s (``eval_loss``, ``eval_<name>`` ...)."""
    import tempfile

    from harness.training.components import instantiate, resolve_callable

    given = dict(args or {})
    taken = [k for k in HARNESS_ARGS if k in given]
    if taken:
        raise HarnessHFError(
            f"harness.hf.fit: train.kwargs.args.{taken[0]} is set, but the harness sets {', '.join(HARNESS_ARGS)} "
            "itself (the unit's seed streams, determinism.mode, device and precision). Remove it from train.kwargs.args.")
    if eval_dataset is None:
        raise HarnessHFError("harness.hf.fit: train.kwargs.eval_dataset is missing: the final metrics are "
                             "trainer.evaluate()'s, on that dataset (a _target_ node).")
    with run.init():
        net = instantiate(model)
    callback = Callback(run)
    asked = _as_list(given.pop("report_to", None))
    reporters = [r for r in asked if r not in ("wandb", "all", "none")]
    if callback.wandb.mode == "shared":
        reporters.append("wandb")
    elif {"wandb", "all"} & set(asked):  # asked for, turned off: noted, said once
        callback.wandb.say("harness.hf.fit", 'train.kwargs.args.report_to="wandb"', _project(), run)
    metrics_fn = resolve_callable(compute_metrics, "train.kwargs.compute_metrics") if isinstance(compute_metrics, str) \
        else (instantiate(compute_metrics) if compute_metrics else None)
    with tempfile.TemporaryDirectory() as scratch:
        training = transformers.TrainingArguments(**{
            "output_dir": scratch, "save_strategy": "no", "disable_tqdm": True, **given,
            "seed": run.streams.derive("model") % 2**31, "data_seed": run.streams.derive("data_order") % 2**31,
            "full_determinism": _torch_mode() == "strict", "use_cpu": run.device.type == "cpu",
            "bf16": run.precision == "bf16", "report_to": reporters})
        trainer = transformers.Trainer(
            model=net, args=training, train_dataset=run.dataset(train_dataset), eval_dataset=run.dataset(eval_dataset),
            compute_metrics=metrics_fn, data_collator=instantiate(data_collator) if data_collator else None,
            callbacks=[callback])
        trainer.train()
        metrics = _scalars(trainer.evaluate())
    callback.wandb.release()
    return {k: v for k, v in metrics.items() if k.startswith("eval_") and not k.endswith(("_runtime", "_per_second"))}


def _as_list(value) -> list:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _project() -> Optional[str]:
    """The project the Trainer's WandbCallback names: $WANDB_PROJECT (None: its default)."""
    return os.environ.get("WANDB_PROJECT") or None


def _torch_mode() -> str:
    if not torch.are_deterministic_algorithms_enabled():
        return "off"
    return "warn" if torch.is_deterministic_algorithms_warn_only_enabled() else "strict"


def _scalars(values) -> dict:
    return {str(k): float(v) for k, v in dict(values).items()
            if isinstance(v, numbers.Real) and not isinstance(v, bool)}
