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
    model = torch.nn.Linear(2, 1)
run.watch(model)
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
data = harness.TensorBatches(torch.linspace(0, 1, 12).reshape(6, 2), torch.linspace(1, 0, 6))
for inputs, targets in run.loader(data, batch_size=3):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs).flatten(), targets)
    loss.backward()
    opt.step()
    run.step(loss)
run.finish({"loss": loss.item()})
print(f"score {loss.item():.6f}")
