"""A tiny next-symbol model on a synthetic sequence, written against harness.Run only.

What makes it a useful test of "nothing guessed": its primary metric is ``q`` (the validation
error rate in points, LOWER is better, a name that says nothing), it records its per-example
outcomes (1 = wrong) for ``q``, and it logs sparsely: the train loss every 5 steps, ``q`` every 20,
and ``lr`` only in arm B's runs.
"""

import torch

from harness import Run, TensorBatches


def _data(n: int, generator: torch.Generator):
    x = torch.randn(n, 8, generator=generator)
    w = torch.arange(1, 9, dtype=torch.float32).mul(0.25)
    y = ((x @ w) + 0.8 * torch.randn(n, generator=generator) > 0).long()
    return x, y


def fit(cfg, run: Run, hidden: int = 16, noise: float = 0.0) -> dict:
    g = torch.Generator().manual_seed(1234)  # the data set is the same for every seed and arm
    train_x, train_y = _data(512, g)
    val_x, val_y = _data(300, g)
    loader = run.loader(TensorBatches(train_x, train_y), batch_size=32)
    total = int(cfg.train.max_steps)
    with run.init():
        model = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2))
    run.watch(model, total_steps=total)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = 0
    while step < total:
        for x, y in loader:
            logits = model(x)
            if noise:  # the factor: noise on the logits, drawn from the model stream
                logits = logits + noise * torch.randn_like(logits)
            loss = torch.nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            run.step(loss)
            step += 1
            if step % 5 == 0:
                run.log(step, train_loss=loss.item())
            if step % 20 == 0:
                run.log(step, q=_wrong(model, val_x, val_y).float().mean().item() * 100)
            if noise and step % 10 == 0:
                run.log(step, lr=0.1)
            if step == total:
                break
    wrong = _wrong(model, val_x, val_y)
    run.record_examples(wrong, metric="q")
    with torch.no_grad():
        nll = torch.nn.functional.cross_entropy(model(val_x), val_y).item()
    return {"q": float(wrong.float().mean().item() * 100), "nll": nll, "train_loss": run.last_loss,
            "n_test": len(val_y)}


@torch.no_grad()
def _wrong(model, x, y):
    return model(x).argmax(1) != y
