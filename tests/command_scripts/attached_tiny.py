"""A tiny PyTorch script that records through harness.attach() (tests/test_command_identity.py)."""

import argparse

import torch

import harness

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--off_after_attach", action="store_true")  # a script that switches the mode off itself
args, _ = parser.parse_known_args()  # the experiment's other flags (--out, --mode) are not ours
run = harness.attach(seed=args.seed)
if args.off_after_attach:
    torch.use_deterministic_algorithms(False)
with run.init():
    model = torch.nn.Linear(3, 1)
run.watch(model)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
x, y = torch.arange(24.0).reshape(8, 3) / 24, torch.arange(8.0) / 8
for xb, yb in run.loader(harness.TensorBatches(x, y), batch_size=2):
    loss = ((model(xb).squeeze(1) - yb) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    run.step(loss)
run.finish({"loss": loss.item()})
print(f"score {loss.item():.6f}")
