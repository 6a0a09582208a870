"""One run: (config, seed) -> metrics, fingerprints, curve, timing, environment.

Reads top to bottom: switch modes, load data, build the model from the init stream, train while
recording every step's loss bits and parameter digest, evaluate. It knows nothing of arms or of
other runs; experiment.py does.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from types import SimpleNamespace
from typing import Callable, Optional

import torch

from . import data as data_mod
from . import losses, models
from .determinism import Settings, capture_environment, configure, resolve_device
from .fingerprint import StepRecorder, flatten_parameters, model_fingerprint
from .rng import Streams


class NonFiniteLoss(RuntimeError):
    def __init__(self, step: int, value: float):
        super().__init__(f"loss became {value} at step {step}")
        self.step = step


def determinism_settings(cfg) -> Settings:
    d = cfg.determinism
    return Settings(
        mode=getattr(d.mode, "value", d.mode),
        threads=d.threads,
        fill_uninitialized_memory=d.fill_uninitialized_memory,
        cudnn_benchmark=d.cudnn_benchmark,
    )


def _value(x):
    return getattr(x, "value", x)


def _namespace(node) -> SimpleNamespace:
    if hasattr(node, "items"):
        return SimpleNamespace(**{k: _value(v) for k, v in node.items()})
    return node


def train_run(
    cfg,
    seed: int,
    datasets: Optional[data_mod.Datasets] = None,
    progress: Optional[Callable[[int, int, float], None]] = None,
    init_hook: Optional[Callable[[torch.nn.Module], None]] = None,
) -> dict:
    """Train and evaluate one run. ``cfg`` is the resolved config of one arm.

    Returns a dict with metrics, fingerprints, curve, timing and env (see results.py), plus
    ``weights`` (tensors, not JSON) when repro.save_weights or repro.keep_step_weights ask for them.
    ``init_hook(model)`` may change the initial weights in place (the noise audit nudges one by an
    ULP); the init fingerprint is taken after it.
    """
    # -- modes and threads, before anything touches a tensor ------------------------------------
    settings = determinism_settings(cfg)
    device = resolve_device(_value(cfg.device))
    configure(settings, device)
    bf16 = _value(cfg.precision) == "bf16"
    loss_cfg = _namespace(cfg.loss)  # plain attributes: OmegaConf lookups cost ~0.5 ms a step
    losses.check(loss_cfg)
    augment = bool(cfg.data.augment)
    # bf16: autocast around the forward pass; fp32: no context at all (it costs per step even disabled)
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    log_every = int(cfg.train.log_every)

    # -- data: in memory; the order comes from the data_order stream alone ----------------------
    ds = datasets if datasets is not None else data_mod.load(cfg.data)
    streams = Streams.from_seed(seed)
    loader = data_mod.train_loader(ds, cfg.train.batch_size, streams.data_order, cfg.data.num_workers)
    steps_per_epoch = len(loader)
    total_steps = cfg.train.max_steps or cfg.train.epochs * steps_per_epoch
    epochs = -(-total_steps // steps_per_epoch)

    # -- model: initial weights from the init stream; afterwards the global RNG is the model stream
    streams.seed_init()
    model = models.build(cfg.model, ds.in_channels, ds.num_classes, ds.image_size).to(device)
    if init_hook is not None:
        with torch.no_grad():
            init_hook(model)
    init_fp = model_fingerprint(model)
    streams.seed_model()

    optimizer = build_optimizer(cfg, model.parameters())

    # -- training loop ---------------------------------------------------------------------------
    params = [p for p in model.parameters()]
    flatten_parameters(params)  # one buffer: a cheap per-step digest, the same numerics
    recorder = StepRecorder(params, total_steps, device)
    order = hashlib.blake2b(digest_size=8)  # the batch-index sequence, hashed as it goes
    keep = cfg.repro.keep_step_weights
    step_weights = []
    curve_steps, curve_loss = [], []
    step = 0
    t0 = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        for x, y, idx in loader:
            order.update(idx.numpy().tobytes())
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if augment:
                x = data_mod.augment(x, streams.augment)
            with autocast():
                logits = model(x)
            loss = losses.training_loss(loss_cfg, logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            recorder.record(loss)
            step += 1
            if step <= keep:
                step_weights.append(torch.cat([p.detach().reshape(-1).float().cpu() for p in params]))
            if step % log_every == 0 or step == total_steps:
                value = loss.item()  # the one host sync every log_every steps
                _check_finite(recorder, step)
                curve_steps.append(step)
                curve_loss.append(value)
                if progress is not None:
                    progress(step, total_steps, value)
            if step >= total_steps:
                break
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    train_seconds = time.perf_counter() - t0
    _check_finite(recorder, step)

    # -- evaluation: plain cross-entropy and accuracy on the test split --------------------------
    test_loss, test_acc = evaluate(model, ds, cfg.train.eval_batch_size, device, bf16)
    steps = recorder.finish()
    out = {
        "metrics": {
            "test_accuracy": test_acc,
            "test_loss": test_loss,
            "train_loss": steps["loss_values"][-1],
            "n_test": len(ds.test_y),
            "n_train": len(ds.train_y),
        },
        "fingerprints": {
            "init": init_fp,
            "data_order": order.hexdigest(),
            "final": model_fingerprint(model),
            "steps": {"loss": steps["loss"], "params": steps["params"]},
        },
        "curve": {"step": curve_steps, "train_loss": curve_loss},
        "timing": {
            "train_seconds": train_seconds,
            "steps": step,
            "steps_per_s": step / train_seconds if train_seconds > 0 else None,
            "ms_per_step": 1000 * train_seconds / step if step else None,
        },
        "env": capture_environment(settings, device),
    }
    if cfg.repro.save_weights or keep:
        out["weights"] = {
            "final": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
            "steps": torch.stack(step_weights) if step_weights else None,
        }
    return out


def build_optimizer(cfg, params) -> torch.optim.Optimizer:
    o = cfg.optim
    if _value(o.name) == "sgd":
        return torch.optim.SGD(
            params, lr=o.lr, momentum=o.momentum, nesterov=o.nesterov and o.momentum > 0,
            weight_decay=o.weight_decay,
        )
    return torch.optim.AdamW(params, lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay)


def _check_finite(recorder: StepRecorder, step: int) -> None:
    losses_so_far = recorder.losses[:step]
    bad = (~torch.isfinite(losses_so_far)).nonzero()
    if len(bad):
        first = int(bad[0, 0])
        raise NonFiniteLoss(first + 1, float(losses_so_far[first]))


@torch.no_grad()
def evaluate(model, ds, batch_size: int, device, bf16: bool = False) -> tuple[float, float]:
    """(mean plain cross-entropy, accuracy in percentage points) on the test split."""
    model.eval()
    total_loss = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    for i in range(0, len(ds.test_y), batch_size):
        x = ds.test_x[i : i + batch_size].to(device)
        y = ds.test_y[i : i + batch_size].to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        total_loss += losses.eval_loss(logits, y)
        correct += (logits.argmax(1) == y).sum()
    model.train()
    n = len(ds.test_y)
    return float(total_loss) / n, 100.0 * int(correct) / n
