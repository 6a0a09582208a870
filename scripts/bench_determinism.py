"""What deterministic mode costs, for one model: median ms per training step in each mode.

Rows are modes, columns precisions (fp32, bf16 autocast): ms/step and the overhead against the
first mode (PyTorch's default with cudnn.benchmark on). The reference report, ResNet18 on a GPU:
fp32 17.94 -> 20.90 ms (+16.5%), bf16 12.42 -> 14.37 ms (+15.6%).

How it measures, and why:
- every (mode, precision) cell trains its own copy of the same initial model on the same fixed
  synthetic batches, so the cells do the same arithmetic and differ only in the mode;
- the cells take turns: each round runs every cell once (`--warmup` untimed steps after switching
  modes, then `--steps` timed ones), and each round starts one cell later than the last, so a drift
  of the machine (clock, a neighbour's load) is spread over all modes instead of biasing one;
- a step is timed with CUDA events on the GPU (no sync inside the loop), on a CPU with wall time
  or (--clock cpu, for a machine shared with other work) this process's CPU time;
- the first table gives the median over all timed steps; the second the overhead within each
  round, paired in time, and its spread (a noise floor: on a CPU the two "default" rows run the
  same code, since cudnn.benchmark only touches cuDNN);
- modes are switched with harness.training.determinism.configure, as a harness run switches them;
- afterwards a few steps of each deterministic mode run under torch.profiler, which attributes the
  time spent filling uninitialized memory directly (a small cost a step-time difference can hide).
CUBLAS_WORKSPACE_CONFIG=:4096:8 (set when harness is imported) holds for the whole process, so
all modes run with it: its own cost, if any, is not part of the overhead measured here.

GPU:  python scripts/bench_determinism.py --out results/
CPU:  python scripts/bench_determinism.py --device cpu --model small_cnn --channels 1 \
          --image-size 8 --batch 64 --steps 5 --warmup 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import _bench_common as common  # first: puts the repo root on sys.path and imports harness before torch
import torch
from harness.training.determinism import configure, resolve_device

PRECISIONS = ("fp32", "bf16")
N_BATCHES = 8  # distinct batches cycled through: enough that no step reuses the previous one's data


class Cell:
    """One (mode, precision): its own model and optimizer, stepping through the shared batches."""

    def __init__(self, mode: str, precision: str, args, device: torch.device, batches):
        self.mode, self.precision = mode, precision
        self.settings = common.mode_settings(mode, args.threads)
        self.model = common.build_model(args, device)
        self.optimizer = common.make_optimizer(self.model)
        self.batches = batches
        self.bf16 = precision == "bf16"
        self.steps_taken = 0

    def step(self) -> None:
        x, y = self.batches[self.steps_taken % len(self.batches)]
        common.train_step(self.model, self.optimizer, x, y, self.bf16)
        self.steps_taken += 1


def timed_steps(cell: Cell, n: int, device: torch.device, clock: str) -> list[float]:
    """ms of each of n consecutive steps. On CUDA, events between steps: the GPU's own clock, and
    no synchronisation inside the loop that would stall the CPU from queueing the next step.
    On a CPU, clock="cpu" counts this process's CPU time (all threads, user and system) instead of
    wall time: on a machine shared with other work it leaves out the time spent waiting for a core."""
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        events[0].record()
        for i in range(n):
            cell.step()
            events[i + 1].record()
        events[-1].synchronize()
        return [events[i].elapsed_time(events[i + 1]) for i in range(n)]
    now = time.process_time if clock == "cpu" else time.perf_counter
    stamps = [now()]
    for _ in range(n):
        cell.step()
        stamps.append(now())
    return [1000.0 * (b - a) for a, b in zip(stamps, stamps[1:])]


def measure(cells: list[Cell], args, device: torch.device) -> dict[tuple[str, str], list[list[float]]]:
    """Round-robin over the cells; returns, per (mode, precision), one list of step times per round."""
    times: dict[tuple[str, str], list[list[float]]] = {(c.mode, c.precision): [] for c in cells}
    for r in range(args.repeats):
        start = r % len(cells)  # rotate who goes first, so no mode always follows the same one
        for cell in cells[start:] + cells[:start]:
            configure(cell.settings, device)
            for _ in range(args.warmup):  # after a switch: cudnn autotuning, allocator, caches
                cell.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[(cell.mode, cell.precision)].append(timed_steps(cell, args.steps, device, args.clock))
        print(f"round {r + 1}/{args.repeats} done", flush=True)
    return times


def measure_isolated(args) -> dict[tuple[str, str], list[list[float]]]:
    """--isolate: each mode measured in a process of its own (all its rounds), so cudnn.benchmark's
    cached plans, or anything else one mode leaves in a process, cannot reach another mode's rows.
    The rounds of different modes then no longer alternate in time: a drift of the machine shows as
    a difference, which the per-round spread of the second table makes visible."""
    import subprocess
    import sys
    import tempfile

    common_args = ["--device", args.device, "--model", args.model, "--batch", str(args.batch),
                   "--channels", str(args.channels), "--image-size", str(args.image_size),
                   "--classes", str(args.classes), "--threads", str(args.threads), "--seed", str(args.seed),
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--repeats", str(args.repeats),
                   "--clock", args.clock, "--precisions", ",".join(args.precisions), "--profile-steps", "0"]
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            path = os.path.join(tmp, f"{mode}.json")
            print(f"mode {mode}: in its own process", flush=True)
            subprocess.run([sys.executable, os.path.abspath(__file__), *common_args, "--modes", mode,
                            "--times-to", path], check=True)
            with open(path) as f:
                times.update({tuple(k.split("/")): v for k, v in json.load(f).items()})
    return times


def profile_fill(cells: list[Cell], args, device: torch.device) -> dict[str, dict]:
    """Time spent filling uninitialized memory, per step, attributed by torch.profiler.

    Filling is an aten::fill_ inside each aten::empty; the rest of a step hardly calls fill_ (the
    optimizer sets gradients to None). So the aten::fill_ time with filling on, minus that with it
    off, is what filling costs. Unlike the difference of two step times, it is not buried in the
    noise of a busy machine. Self GPU time of the fill kernels on CUDA; self CPU time on a CPU.
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    by = {(c.mode, c.precision): c for c in cells}
    result = {}
    for precision in args.precisions:
        fill = {}
        for mode in ("deterministic", "deterministic_nofill"):
            cell = by[(mode, precision)]
            configure(cell.settings, device)
            cell.step()  # the first step after a switch is not the one to look at
            with profile(activities=activities) as prof:
                for _ in range(args.profile_steps):
                    cell.step()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
            events = [e for e in prof.key_averages() if e.key == "aten::fill_"]
            us = sum(e.self_device_time_total if device.type == "cuda" else e.self_cpu_time_total for e in events)
            fill[mode] = {"ms_per_step": us / 1000 / args.profile_steps,
                          "calls_per_step": sum(e.count for e in events) / args.profile_steps}
        result[precision] = {
            "fill_on": fill["deterministic"],
            "fill_off": fill["deterministic_nofill"],
            "cost_ms_per_step": fill["deterministic"]["ms_per_step"] - fill["deterministic_nofill"]["ms_per_step"],
        }
    return result


def summarize(times: dict[tuple[str, str], list[list[float]]], modes, precisions) -> list[dict]:
    """Per cell: median ms/step over all timed steps, quartiles, and the overhead against modes[0],
    overall (ratio of medians) and per round (ratio of that round's medians: paired in time)."""
    baseline = modes[0]
    cells = []
    for precision in precisions:
        base_all = statistics.median(t for rnd in times[(baseline, precision)] for t in rnd)
        base_rounds = [statistics.median(rnd) for rnd in times[(baseline, precision)]]
        for mode in modes:
            rounds = times[(mode, precision)]
            pooled = sorted(t for rnd in rounds for t in rnd)
            median = statistics.median(pooled)
            q1, _, q3 = statistics.quantiles(pooled, n=4) if len(pooled) > 1 else (median, median, median)
            round_medians = [statistics.median(rnd) for rnd in rounds]
            cells.append({
                "mode": mode,
                "label": common.MODE_LABELS[mode],
                "precision": precision,
                "ms_per_step": median,
                "ms_q1": q1,
                "ms_q3": q3,
                "n_steps": len(pooled),
                "overhead_pct": 100.0 * (median / base_all - 1.0),
                "round_medians_ms": round_medians,
                "round_overhead_pct": [100.0 * (m / b - 1.0) for m, b in zip(round_medians, base_rounds)],
            })
    return cells


def _ms(v: float) -> str:
    return f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def _pct(v: float) -> str:
    return f"{v:+.1f}%"


def tables(cells: list[dict], modes, precisions) -> list[str]:
    """The reference layout (rows: mode; per precision: ms/step, overhead), then the per-round spread."""
    by = {(c["mode"], c["precision"]): c for c in cells}
    lines = ["| mode | " + " | ".join(f"{p} ms/step | {p} overhead" for p in precisions) + " |"]
    lines.append("| --- |" + " ---: | ---: |" * len(precisions))
    for i, mode in enumerate(modes):
        row = [common.MODE_LABELS[mode]]
        for p in precisions:
            c = by[(mode, p)]
            row += [_ms(c["ms_per_step"]), "baseline" if i == 0 else _pct(c["overhead_pct"])]
        lines.append("| " + " | ".join(row) + " |")
    n_rounds = len(cells[0]["round_overhead_pct"])
    lines += ["", f"Overhead within each round (each round times every mode once, close together in time): "
              f"median (min … max) over {n_rounds} rounds:", ""]
    lines.append("| mode | " + " | ".join(f"{p} overhead per round" for p in precisions) + " |")
    lines.append("| --- |" + " ---: |" * len(precisions))
    for mode in modes[1:]:
        row = [common.MODE_LABELS[mode]]
        for p in precisions:
            r = by[(mode, p)]["round_overhead_pct"]
            row.append(f"{_pct(statistics.median(r))} ({_pct(min(r))} … {_pct(max(r))})")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def fill_lines(fill: dict[str, dict], cells: list[dict], device: torch.device) -> list[str]:
    det = {c["precision"]: c["ms_per_step"] for c in cells if c["mode"] == "deterministic"}
    if device.type == "cuda":
        how = ("GPU time of the aten::fill_ kernels, fill on minus fill off; a lower bound, as launching "
               "them is not counted")
    else:
        how = ("self CPU time of aten::fill_, fill on minus fill off; it includes the page faults of memory "
               "fresh from the OS, which the op would otherwise take itself when it writes, so it can overstate")
    lines = ["", f"Filling uninitialized memory, attributed by torch.profiler ({how}):", ""]
    for p, f in fill.items():
        extra = f["fill_on"]["calls_per_step"] - f["fill_off"]["calls_per_step"]
        lines.append(f"- {p}: {_ms(f['cost_ms_per_step'])} ms/step, {100 * f['cost_ms_per_step'] / det[p]:.1f}% "
                     f"of the deterministic step ({extra:.0f} extra fills per step)")
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_args(parser)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per cell per round")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps after each mode switch")
    parser.add_argument("--repeats", type=int, default=5, help="rounds; every cell is timed once per round")
    parser.add_argument(
        "--clock", default="wall", choices=["wall", "cpu"],
        help="CPU device only: wall time, or this process's CPU time (for a machine shared with other work; "
             "use with --threads 1, since a waiting OpenMP thread spins and counts as CPU time)",
    )
    parser.add_argument("--profile-steps", type=int, default=5,
                        help="steps profiled to attribute the cost of filling uninitialized memory (0: skip)")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="comma-separated: fp32,bf16")
    parser.add_argument(
        "--modes", default=",".join(common.MODE_LABELS),
        help=f"comma-separated, the first is the baseline: {','.join(common.MODE_LABELS)}",
    )
    parser.add_argument("--isolate", action="store_true",
                        help="measure each mode in a process of its own (scripts/gpu_check.sh does)")
    parser.add_argument("--times-to", default=None, help=argparse.SUPPRESS)  # --isolate's child: write times
    args = parser.parse_args(argv)
    args.precisions = args.precisions.split(",")
    args.modes = args.modes.split(",")
    for p in args.precisions:
        if p not in PRECISIONS:
            parser.error(f"precision {p!r} is not one of {', '.join(PRECISIONS)}")
    for m in args.modes:
        if m not in common.MODE_LABELS:
            parser.error(f"mode {m!r} is not one of {', '.join(common.MODE_LABELS)}")
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        parser.error("--steps and --repeats must be >= 1, --warmup >= 0")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    device = resolve_device(args.device)
    if args.clock == "cpu" and device.type != "cpu":
        raise SystemExit("--clock cpu measures CPU time: use it with --device cpu (a GPU step is timed by CUDA events)")
    baseline = common.mode_settings(args.modes[0], args.threads)
    configure(baseline, device)
    head = common.header(args, device, baseline)
    clock = "CUDA events" if device.type == "cuda" else {"wall": "wall time", "cpu": "process CPU time"}[args.clock]
    head.update(steps=args.steps, warmup=args.warmup, repeats=args.repeats, baseline=args.modes[0], clock=clock)

    batches = common.make_batches(args, N_BATCHES, device)
    both_deterministic = {"deterministic", "deterministic_nofill"} <= set(args.modes)
    if args.isolate:  # the parent builds only what the fill profile needs, and runs no timed mode itself
        cells = [Cell(m, p, args, device, batches) for p in args.precisions for m in args.modes
                 if both_deterministic and m.startswith("deterministic")]
        times = measure_isolated(args)
    else:
        cells = [Cell(m, p, args, device, batches) for p in args.precisions for m in args.modes]
        times = measure(cells, args, device)
    if args.times_to:
        with open(args.times_to, "w") as f:
            json.dump({f"{m}/{p}": rounds for (m, p), rounds in times.items()}, f)
        return
    summary = summarize(times, args.modes, args.precisions)
    fill = profile_fill(cells, args, device) if args.profile_steps > 0 and both_deterministic else None

    lines = [f"# Cost of deterministic mode — {args.model} on {device.type}", ""]
    lines += common.header_lines(head)
    lines.append(
        f"- median ms/step ({clock}) over {args.repeats} rounds × {args.steps} timed steps per cell "
        f"({args.warmup} warm-up step{'' if args.warmup == 1 else 's'} after each mode switch); "
        "overhead against the first row"
    )
    lines += [""] + tables(summary, args.modes, args.precisions)
    if fill is not None:
        lines += fill_lines(fill, summary, device)
    text = "\n".join(lines) + "\n"
    print()
    print(text)

    out = common.out_dir(args.out)
    if out is not None:
        with open(os.path.join(out, "determinism_cost.md"), "w") as f:
            f.write(text)
        with open(os.path.join(out, "determinism_cost.json"), "w") as f:
            raw = {f"{m}/{p}": rounds for (m, p), rounds in times.items()}  # every timed step, per round
            json.dump({"header": head, "cells": summary, "fill_profile": fill, "times_ms": raw}, f, indent=1)
        print(f"wrote {out}/determinism_cost.md and determinism_cost.json")


if __name__ == "__main__":
    main()
