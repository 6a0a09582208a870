"""The project's own training loop, written against harness.Run.

What the harness needs from a loop: build the model inside ``with run.init():``, ``run.watch`` it,
draw batches from ``run.loader`` (or ``run.sampler``), call ``run.step(loss)`` after each optimizer
step, and return the final metrics. Everything else is the project's own.
"""

import torch

from harness import Run, TensorBatches, instantiate


def fit(cfg, run: Run, eval_every: int = 0) -> dict:
    """eval_every: steps between test-set RMSE curve points (0: only at the end)."""
    data = run.dataset(cfg.data)  # loaded once per process, shared by every seed and arm
    # TensorBatches: tensors read a whole batch at a time (any map-style Dataset works too, collated
    # per example, at ~10x the cost per step for a model this small)
    loader = run.loader(TensorBatches(data.train_x, data.train_y), batch_size=int(cfg.train.batch_size))
    total = int(cfg.train.max_steps or cfg.train.epochs * len(loader))

    with run.init():
        model = instantiate(cfg.model, in_features=data.train_x.shape[1]).to(run.device)
    run.watch(model, total_steps=total)
    optimizer = instantiate(cfg.optim, params=model.parameters())
    loss_fn = instantiate(cfg.loss)

    step = 0
    while step < total:
        for x, y in loader:
            x, y = x.to(run.device), y.to(run.device)
            loss = loss_fn(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            run.step(loss)
            step += 1
            if step % int(cfg.train.log_every) == 0 or step == total:
                run.log(step, train_loss=loss.item())
            if eval_every and step % eval_every == 0:
                run.log(step, test_rmse=evaluate(model, data, run)[0])
            if step == total:
                break

    rmse, mae = evaluate(model, data, run)
    return {"test_rmse": rmse, "test_mae": mae, "train_loss": run.last_loss,
            "n_params": sum(p.numel() for p in model.parameters()), "n_test": len(data.test_y)}


@torch.no_grad()
def evaluate(model, data, run: Run) -> tuple[float, float]:
    """(RMSE, MAE) on the test split, in the target's own units (disease progression score)."""
    model.eval()
    err = model(data.test_x.to(run.device)).cpu() - data.test_y
    model.train()
    return float(err.pow(2).mean().sqrt()) * data.y_scale, float(err.abs().mean()) * data.y_scale
