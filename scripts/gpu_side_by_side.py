"""Units side by side on one GPU: K processes training at once against one alone (issue 18, item 2).

Each unit is a separate process (as a harness worker is) that trains one seed under deterministic
mode on fixed synthetic batches and prints its wall time, its peak GPU memory and its final weights'
fingerprint. The parent runs seed 0 alone, then K seeds at once (only as many as the measured free
memory holds: the peak of the alone run, times K, against torch.cuda.mem_get_info), and prints
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
from harness.training.determinism import configure
from harness.training.fingerprint import model_fingerprint


def one_unit(args) -> dict:
    device = torch.device("cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    configure(mode_settings("deterministic", args.threads), device)
    batches = make_batches(args, args.batches, device)
    model = build_model(args, device)
    optimizer = make_optimizer(model)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for step in range(args.steps):
        x, y = batches[step % len(batches)]
        train_step(model, optimizer, x, y, bf16=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    peak = torch.cuda.max_memory_reserved() if device.type == "cuda" else 0
    return {"seed": args.seed, "train_s": wall, "peak_bytes": peak, "final": model_fingerprint(model)}


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
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info()
        fit = max(1, int(0.9 * free // max(1, alone["peak_bytes"])))
        print(f"- one unit's peak: {alone['peak_bytes'] / 2**20:.0f} MiB reserved; free {free / 2**30:.1f} of "
              f"{total / 2**30:.1f} GiB: {fit} units fit (90% of free)")
        k = min(k, fit)
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
