"""Training functions that move their parameters after run.watch, for tests/test_fingerprint_stale.py."""

from __future__ import annotations

import torch


def _model():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def _train(run, model, lr: float, steps: int) -> dict:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    g = run.generator("data_order")
    dtype = next(model.parameters()).dtype
    for _ in range(steps):
        x = torch.randn(32, 8, generator=g).to(dtype)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.step(loss.float())
    return {"test_accuracy": 50.0, "final_loss": float(loss.detach())}


def converted_after_watch(cfg, run, lr: float = 0.1, steps: int = 6) -> dict:
    """run.watch(model), then model.to(torch.float64): every parameter gets new storage."""
    with run.init():
        model = _model()
    run.watch(model, total_steps=steps)
    model = model.to(torch.float64)
    return _train(run, model, lr, steps)


def replaced_after_watch(cfg, run, lr: float = 0.1, steps: int = 6) -> dict:
    """run.watch(model), then load_state_dict(assign=True): new Parameter objects the Run never saw."""
    with run.init():
        model = _model()
    run.watch(model, total_steps=steps)
    model.load_state_dict({k: v.clone() for k, v in model.state_dict().items()}, assign=True)
    return _train(run, model, lr, steps)
