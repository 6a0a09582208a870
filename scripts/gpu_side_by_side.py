"""Units side by side on one GPU: K processes training at once against one alone.

Each unit is a separate process (as a harness worker is) that trains one seed under deterministic
mode on fixed synthetic batches and prints its wall time, its GPU memory as the harness measures a
unit (harness/training/gpu_memory.py) and its final weights' fingerprint. The parent runs seed 0
alone, then K seeds at once, K = what ``workers=auto`` on a GPU would choose from the alone run's
measurement (harness.training.threads.gpu_workers, at most --units and the cores), and prints
  - the wall of K side by side / the wall of one alone (goal <= 3 for K = 20),
  - whether seed 0 gave the same bits alone and beside the others (it must: the same bits as one at
    a time).

Only torch and the harness modules of scripts/_bench_common.py: no Hydra, no wandb.

    python scripts/gpu_side_by_side.py --units 20 --model small_cnn --channels 1 --image-size 8 --batch 64
    python scripts/gpu_side_by_side.py --units 20 --model resnet18 --batch 128 --steps 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _bench_common import (add_common_args, build_model, header, header_lines, make_batches, make_optimizer,
                           mode_settings, torch, train_step)
from harness.training import gpu_memory
from harness.training.determinism import configure
from harness.training.threads import gpu_workers
from harness.training.fingerprint import model_fingerprint


def one_unit(args) -> dict:
    device = torch.device("cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    configure(mode_settings("deterministic", args.threads), device)
    memory = gpu_memory.before(device)  # as the harness measures a unit (timing.gpu_memory)
    batches = make_batches(args, args.batches, device)
    model = build_model(args, device)
    optimizer = make_optimizer(model)
    t0 = time.perf_counter()
    for step in range(args.steps):
        x, y = batches[step % len(batches)]
        train_step(model, optimizer, x, y, bf16=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    final = model_fingerprint(model)
    del model, optimizer, batches  # what a unit leaves behind when its training function returns
    memory = gpu_memory.after(device, memory) if memory is not None else None
    return {"seed": args.seed, "train_s": wall, "gpu_memory": memory, "final": final}


def launch(args, seeds: list[int]) -> tuple[float, list[dict]]:
    """Start one process per seed at once; (wall until the last one ends, their reports)."""
    base = [sys.executable, os.path.abspath(__file__), "--one", "--device", args.device, "--model", args.model,
            "--batch", str(args.batch), "--channels", str(args.channels), "--image-size", str(args.image_size),
            "--threads", str(args.threads), "--steps", str(args.steps), "--batches", str(args.batches)]
    t0 = time.perf_counter()
    procs = [subprocess.Popen([*base, "--seed", str(s)], stdout=subprocess.PIPE, text=True) for s in seeds]
    reports = []
    for p in procs:
        out, _ = p.communicate(timeout=args.timeout)
        if p.returncode != 0:
            raise SystemExit(f"a unit exited with status {p.returncode}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return time.perf_counter() - t0, reports


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p)
    p.add_argument("--units", type=int, default=20)
    p.add_argument("--steps", type=int, default=330, help="optimizer steps per unit (the default experiment: 330)")
    p.add_argument("--batches", type=int, default=21, help="distinct synthetic batches, cycled")
    p.add_argument("--timeout", type=int, default=240, help="seconds one launch may take")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a unit's own process
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_unit(args)))
        return 0

    device = torch.device("cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    for line in header_lines(header(args, device, mode_settings("deterministic", args.threads))):
        print(line)
    alone_wall, [alone] = launch(args, [0])
    k = args.units
    if device.type == "cuda":  # the harness's own rule (workers=auto on a GPU), on the unit's measurement
        k, why = gpu_workers(alone["gpu_memory"], cap=min(args.units, max(1, (os.cpu_count() or 1) // args.threads)))
        print(f"- {why}")
    side_wall, reports = launch(args, list(range(k)))
    same = next(r for r in reports if r["seed"] == 0)["final"] == alone["final"]
    print(f"one alone: {alone_wall:.2f} s wall ({alone['train_s']:.2f} s training)")
    print(f"{k} side by side: {side_wall:.2f} s wall (training {min(r['train_s'] for r in reports):.2f}-"
          f"{max(r['train_s'] for r in reports):.2f} s per unit)")
    print(f"side by side / alone: {side_wall / alone_wall:.2f} (goal <= 3 for 20 units)")
    print(f"seed 0 alone and side by side: {'the same bits' if same else 'DIFFERENT BITS'} ({alone['final']})")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
