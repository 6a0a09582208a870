"""The built-in training loop: ``train(cfg, run) -> metrics``, one user of the public ``Run`` API.

Reads top to bottom: knobs, data, model, optimizer, loss, the loop, evaluation. A researcher's
own loop has the same shape (examples/own_code/ has one); nothing here is private to the harness.
Host syncs are named: one every ``train.log_every`` steps (the curve point), and evaluation.
"""

from __future__ import annotations

import torch

from harness import Run, TensorBatches, instantiate

from harness.builtin.data import augment
from harness.builtin.losses import eval_loss


def train(cfg, run: Run) -> dict:
    # -- knobs: read once into plain values (an OmegaConf lookup costs ~µs, a step ~ms) ----------
    batch_size = int(cfg.train.batch_size)  # examples per optimizer step
    eval_batch_size = int(cfg.train.eval_batch_size)  # examples per forward pass when testing
    log_every = int(cfg.train.log_every)  # steps between curve points (one host sync each)

    # -- data: in memory, loaded once per process; the batch order comes from the data_order stream
    ds = run.dataset(cfg.data)
    # on CUDA, batches come from pinned memory, so the non_blocking copies below do not block the host
    loader = run.loader(TensorBatches(ds.train_x, ds.train_y), batch_size, num_workers=int(cfg.train.num_workers),
                        pin_memory=run.device.type == "cuda")
    steps_per_epoch = len(loader)
    total_steps = int(cfg.train.max_steps or int(cfg.train.epochs) * steps_per_epoch)
    epochs = -(-total_steps // steps_per_epoch)
    augment_stream = run.generator("augment") if ds.augment else None

    # -- model: initial weights from the init stream; the model takes what its signature names --
    with run.init():
        model = instantiate(cfg.model, in_channels=ds.in_channels, num_classes=ds.num_classes,
                            image_size=ds.image_size).to(run.device)
    run.watch(model, total_steps)

    # -- optimizer, schedule and loss: _target_ nodes; params/optimizer are passed here ----------
    optimizer = instantiate(cfg.optim, params=model.parameters())
    scheduler = instantiate(cfg.scheduler, optimizer=optimizer) if cfg.get("scheduler") else None
    loss_fn = instantiate(cfg.loss)

    # -- training loop ---------------------------------------------------------------------------
    device = run.device
    step = 0
    model.train()
    for _epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if augment_stream is not None:
                x = augment(x, augment_stream)
            with run.autocast():
                logits = model(x)
            loss = loss_fn(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()  # once per optimizer step
            run.step(loss)
            step += 1
            if step % log_every == 0 or step == total_steps:
                run.log(step, train_loss=loss.item())  # the one host sync every log_every steps
            if step >= total_steps:
                break
    run.trained(step)  # the loop's own count: what the record's steps are checked against

    # -- evaluation: plain cross-entropy and accuracy on the test split --------------------------
    test_loss, test_acc, correct = evaluate(model, ds, eval_batch_size, run)
    run.record_examples(correct, metric="test_accuracy")  # the outcomes test_accuracy is the mean of
    return {
        "test_accuracy": test_acc,  # percentage points
        "test_loss": test_loss,
        "train_loss": run.last_loss,
        "n_test": len(ds.test_y),
        "n_train": len(ds.train_y),
    }


@torch.no_grad()
def evaluate(model, ds, batch_size: int, run: Run) -> tuple[float, float, torch.Tensor]:
    """(mean plain cross-entropy, accuracy in percentage points, per-example correctness)."""
    model.eval()
    device = run.device
    total_loss = torch.zeros((), device=device)
    hits = []
    for i in range(0, len(ds.test_y), batch_size):
        x = ds.test_x[i : i + batch_size].to(device)
        y = ds.test_y[i : i + batch_size].to(device)
        with run.autocast():
            logits = model(x)
        total_loss += eval_loss(logits, y)
        hits.append(logits.argmax(1) == y)
    model.train()
    correct = torch.cat(hits).cpu()
    n = len(ds.test_y)
    return float(total_loss) / n, 100.0 * int(correct.sum()) / n, correct
