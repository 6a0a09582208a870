"""Models used by tests through model.target (a user's own model plugs in the same way)."""

import torch
from torch import nn


class PutModel(nn.Module):
    """Calls Tensor.put_(accumulate=False) in forward: no deterministic implementation on CPU."""

    def __init__(self, in_channels: int, num_classes: int, image_size: int):
        super().__init__()
        self.fc = nn.Linear(in_channels * image_size * image_size, num_classes)
        self.scatter = Scatter()

    def forward(self, x):
        return self.scatter(self.fc(x.flatten(1)))


class Scatter(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        out.put_(torch.arange(x.numel()), x.reshape(-1), accumulate=False)
        return out



# -- a tiny training function of the tests' own, written against the public Run (harness.diff --ops) --


class TinyConvNet(nn.Module):
    """conv -> relu -> LayerNorm -> linear -> relu -> linear on 1x8x8 inputs: a conv (whose weight
    gradient is a reduction that 1 and 2 threads add in another order) and a LayerNorm (its eps)."""

    def __init__(self, num_classes: int = 4, width: int = 8, hidden: int = 16, dropout: float = 0.0, eps: float = 1e-5):
        super().__init__()
        self.conv = nn.Conv2d(1, width, 3, padding=1)
        self.act = nn.ReLU()
        self.norm = nn.LayerNorm(width * 64, eps=eps)
        self.fc = nn.Linear(width * 64, hidden)
        self.fc_act = nn.ReLU()
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        h = self.norm(self.act(self.conv(x)).flatten(1))
        return self.head(self.fc_act(self.fc(h)))


class TinyConvNetEdited(TinyConvNet):
    """The same weights, one layer edited: the hidden activation is a GELU instead of a ReLU."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fc_act = nn.GELU()


def tiny_train(cfg, run, steps: int = 6, batch_size: int = 32, nudge_from: int = 0) -> dict:
    """Synthetic 4-class data (the same for every seed), cfg.model built in run.init(), plain SGD.
    ``nudge_from``: from that step on the loss is scaled by 1 + 2**-20 (a change that starts late)."""
    from harness import TensorBatches, instantiate

    g = torch.Generator().manual_seed(1234)  # the data set itself: fixed, like a file on disk
    x = torch.randn(512, 1, 8, 8, generator=g)
    teacher = torch.randn(64, 4, generator=g)
    y = (x.flatten(1) @ teacher).argmax(1)
    train_x, train_y, test_x, test_y = x[:384], y[:384], x[384:], y[384:]
    loader = run.loader(TensorBatches(train_x, train_y), batch_size)
    with run.init():
        model = instantiate(cfg.model, num_classes=4)
    run.watch(model, steps)
    optimizer = torch.optim.SGD(model.parameters(), lr=float(cfg.optim.lr), momentum=0.9)
    step = 0
    while step < steps:
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            if nudge_from and step + 1 >= nudge_from:
                loss = loss * (1 + 2**-20)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            run.step(loss)
            step += 1
            if step >= steps:
                break
    with torch.no_grad():
        logits = model(test_x)
        correct = logits.argmax(1) == test_y
    return {"test_accuracy": 100.0 * float(correct.float().mean()),
            "test_loss": float(nn.functional.cross_entropy(logits, test_y)), "train_loss": run.last_loss}
