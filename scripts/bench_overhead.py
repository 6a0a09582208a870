"""What does the harness's training loop cost over a bare PyTorch loop?

Both build the default model (small CNN on digits), train it for the same steps on the same data and
evaluate it once on the test split, in this one process, under the same determinism settings and
thread count, alternating repeats so drift on the machine hits both alike. The harness loop adds the
seeded loader, the per-step loss-bit and parameter fingerprints, the batch-order hash, the curve,
the per-example record and its own plumbing (config copy, _target_ instantiation): what is timed is
what the Run times, from its construction to its record. Prints median ms/step, the ratio and
PASS/FAIL against the issue's target (<= 1.05). (Before issue 34 the bare loop neither built nor
evaluated its model, so both counted as the harness's cost.)

    python scripts/bench_overhead.py [--steps 440] [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import harness  # noqa: F401  - CUBLAS_WORKSPACE_CONFIG before torch
import torch
import torch.nn.functional as F

from harness.builtin.models import SmallCNN
from harness.config import compose
from harness.training.run import cached_dataset
from harness.training.determinism import configure, settings_from
from harness.experiment.runner import train_one

TARGET = 1.05  # issue 34: the recording costs at most 5% of a step


def bare_loop(cfg, ds, steps: int, seed: int) -> float:
    """The loop a researcher would write by hand: ms/step, nothing recorded."""
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    model = SmallCNN(in_channels=ds.in_channels, num_classes=ds.num_classes, image_size=ds.image_size,
                     width=cfg.model.width, hidden=cfg.model.hidden, dropout=cfg.model.dropout)
    o = cfg.optim
    opt = torch.optim.SGD(model.parameters(), lr=o.lr, momentum=o.momentum, nesterov=o.nesterov, weight_decay=o.weight_decay)
    g = torch.Generator().manual_seed(seed)
    n, bs = len(ds.train_y), cfg.train.batch_size
    step = 0
    while step < steps:
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, bs):
            idx = perm[i : i + bs]
            x, y = ds.train_x[idx], ds.train_y[idx]
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step >= steps:
                break
    loss.item()
    evaluate(model, ds, cfg.train.eval_batch_size)
    return 1000 * (time.perf_counter() - t0) / steps


@torch.no_grad()
def evaluate(model, ds, batch_size: int) -> tuple[float, float]:
    """Test loss and accuracy, as the built-in loop evaluates (by hand: no Run)."""
    model.eval()
    total, hits = 0.0, 0
    for i in range(0, len(ds.test_y), batch_size):
        x, y = ds.test_x[i : i + batch_size], ds.test_y[i : i + batch_size]
        logits = model(x)
        total += float(F.cross_entropy(logits, y, reduction="sum"))
        hits += int((logits.argmax(1) == y).sum())
    model.train()
    return total / len(ds.test_y), 100.0 * hits / len(ds.test_y)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=330, help="optimizer steps per run (330 = 15 digits epochs of 22 batches, the default)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()

    cfg = compose([
        "+experiment=loss_ab", "arm=A", f"train.max_steps={args.steps}", f"determinism.threads={args.threads}",
        "device=cpu", "logger=none",
    ])
    configure(settings_from(cfg))
    ds = cached_dataset(cfg.data)  # the same cached copy the harness loop reads

    # warm-up both (allocator, kernels)
    bare_loop(cfg, ds, 20, 0)
    cfg_warm = cfg.copy()
    cfg_warm.train.max_steps = 20
    train_one(cfg_warm, 0)

    harness_ms, bare_ms = [], []
    for r in range(args.repeats):
        bare_ms.append(bare_loop(cfg, ds, args.steps, r))
        out = train_one(cfg, r)
        harness_ms.append(out["timing"]["ms_per_step"])
    h, b = statistics.median(harness_ms), statistics.median(bare_ms)
    print(f"bench_overhead: small_cnn on digits, batch {cfg.train.batch_size}, {args.steps} steps x {args.repeats} "
          f"repeats, {torch.get_num_threads()} threads, mode {getattr(cfg.determinism.mode, 'value', cfg.determinism.mode)}, torch {torch.__version__}")
    print(f"  bare PyTorch loop : {b:7.3f} ms/step  (runs: {', '.join(f'{v:.3f}' for v in bare_ms)})")
    print(f"  harness loop      : {h:7.3f} ms/step  (runs: {', '.join(f'{v:.3f}' for v in harness_ms)})")
    print(f"  ratio harness/bare: {h / b:.3f}  (target <= {TARGET}): {'PASS' if h / b <= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
