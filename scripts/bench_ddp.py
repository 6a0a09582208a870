"""What the harness costs around a unit of 2 processes: one DDP script (gloo, CPU, 1 thread per rank)
run by bare torchrun and as a harness command arm, per step and per unit, in one run.

The script is this file (``--train``), as a DDP user writes it: the digits CNN the harness ships
(conv3x3-ReLU-conv3x3-ReLU-maxpool-linear-ReLU-linear, 38k parameters) on the 1,347 training digits,
batches from a DataLoader over a TensorDataset with torch's DistributedSampler, DistributedDataParallel,
SGD with momentum. Both ways load the same initial weights (drawn with torch.manual_seed before the
model the harness's ``run.init()`` builds), so they do the same arithmetic at every step, checked by
their final losses (bit-equal): the harness's own cost is then all the two ways differ by. Its harness lines are ``harness.attach()``, ``run.init()``, ``run.watch(model)``,
``run.consumed(batch)`` (each rank's batches fingerprinted by content), ``run.step(loss)`` and
``run.finish()``; ``--bare`` skips exactly those lines and imports nothing of the harness (what the
user ran before adding the harness). The data loader, sampler, model and optimizer are the same code.

Per step: each rank times every step (the batch's fetch, the harness's lines, forward, backward, the
all-reduce, the update) in wall and in its process's CPU time, and the harness's lines inside it;
rank 0 prints the medians after ``--warmup`` steps (on a loaded host a step's wall is mostly a wait
for a core; its CPU time and the lines' own time say what the harness adds). Per unit: bare, the
torchrun command's wall; harness, the unit's ``timing.total_seconds`` (the command, plus the harness's
reading of the ranks' records), and the whole ``harness.run`` call beside it (composing the config,
the analysis). Each repeat runs both ways back to back, the order alternating, so a drift in the
host's load hits both; the ratios are the medians of the repeats' paired ratios, each with a 95 %
interval from the order statistics (6 repeats or more), and the per-step target is said met only as
far as that interval shows it. On a shared machine the absolute times are noisy: read the ratios
under the load the run prints.

    python scripts/bench_ddp.py [--repeats 5] [--epochs 10] [--batch-size 16] [--warmup 20]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # this checkout's harness, installed or not (scripts/ is what python puts first)
    sys.path.insert(0, str(REPO))
TARGET = 1.05
WAYS = ("bare", "harness")


def train(args) -> None:
    """One rank of the DDP script (started by torchrun)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    run = None
    if not args.bare:
        import harness

        run = harness.attach(seed=args.seed)  # harness
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x, y = torch.load(args.data)  # the digits, written by the bench once for every unit
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    def cnn():
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))

    torch.manual_seed(args.seed)
    initial = cnn().state_dict()  # both ways start from these weights: the same arithmetic at every step
    if run is not None:
        with run.init():  # harness
            model = cnn()
        model.load_state_dict(initial)
        run.watch(model)  # harness
    else:
        model = cnn()
        model.load_state_dict(initial)
    net = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    wall, cpu, harness_s = [], [], []  # per step: its wall and this process's CPU seconds; the harness lines' wall
    t, c = time.perf_counter(), time.process_time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            if run is not None:
                h0 = time.perf_counter()
                run.consumed((xb, yb))  # harness
                h = time.perf_counter() - h0
            opt.zero_grad()
            loss = F.cross_entropy(net(xb), yb)
            loss.backward()
            opt.step()
            if run is not None:
                h0 = time.perf_counter()
                run.step(loss)  # harness
                harness_s.append(h + time.perf_counter() - h0)
            now, now_cpu = time.perf_counter(), time.process_time()
            wall.append(now - t)
            cpu.append(now_cpu - c)
            t, c = now, now_cpu
    if run is not None:
        run.finish({"loss": loss.item()})  # harness
    if rank == 0:
        ms = {name: 1000 * statistics.median(v[args.warmup:] or v) for name, v in
              (("wall", wall), ("cpu", cpu), ("harness", harness_s or [0.0]))}
        # "score": the metric the tests' command_toy experiment reads from stdout
        print(f"ms_per_step {ms['wall']:.4f} cpu_ms_per_step {ms['cpu']:.4f} harness_ms_per_step {ms['harness']:.4f} "
              f"steps {len(wall)} loss {loss.item().hex()}\nscore {ms['wall']:.4f}", flush=True)
    # both ranks done before either tears its group down: without it, one bare rank in ~50 units aborted at
    # the end ("terminate called without an active exception", SIGABRT) and the bench stopped
    dist.barrier()
    dist.destroy_process_group()


def _script_argv(args, data: Path, bare: bool) -> list[str]:
    return ["python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(Path(__file__).resolve()),
            "--train", "--data", str(data), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
            "--warmup", str(args.warmup), *(["--bare"] if bare else [])]


def bare(args, data: Path) -> dict:
    """ms per step and unit seconds of one bare torchrun (1 thread per rank: the threads the harness
    gives its command, determinism.threads=1)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for key in [k for k in env if k.startswith("HARNESS_")]:
        del env[key]
    argv = [sys.executable, *_script_argv(args, data, True)[1:], "--seed", "0"]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the bare torchrun failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return {**_rank0(proc.stdout), "unit_s": wall, "call_s": wall}


def harnessed(args, data: Path, folder: Path) -> dict:
    """ms per step, unit seconds and the harness.run call's seconds of one unit run by the harness (a
    fresh output folder: no resume)."""
    import harness
    from harness.results import read_json

    cmd = shlex.join(_script_argv(args, data, False))
    t0 = time.perf_counter()
    harness.run(["+experiment=command_toy", f"train.cmd='{cmd}'", "logger=none", "progress=false",
                 "workers=1", "determinism.threads=1", "repro.certificate=false", "ab.seeds=[0]", "seed=0", "arm=A",
                 "stats.metrics={score: min}"],
                out_dir=folder, config_dir=REPO / "tests" / "conf", verbose=False)
    call = time.perf_counter() - t0
    result = read_json(folder / "runs" / "seed=0" / "arm=A" / "result.json")
    if result["status"] != "completed":
        raise SystemExit(f"the harness's unit failed: {result['error']}")
    return {**_rank0((folder / "runs" / "seed=0" / "arm=A" / "stdout.txt").read_text()),
            "unit_s": float(result["timing"]["total_seconds"]), "call_s": call}


def _rank0(out: str) -> dict:
    """What rank 0 printed: the median wall and CPU ms of its steps, and of the harness's lines in them."""
    found = re.search(r"ms_per_step ([0-9.]+) cpu_ms_per_step ([0-9.]+) harness_ms_per_step ([0-9.]+) steps \d+ "
                      r"loss (\S+)", out)
    return {**dict(zip(("step_ms", "cpu_ms", "harness_ms"), map(float, found.groups()[:3]))), "loss": found.group(4)}


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median of ``values`` (order statistics: the median lies
    below the k-th smallest with chance P(Binomial(n, 1/2) < k)), covering at least ``level``; None when
    n is too small for any (n < 6 at 95 %)."""
    n, ordered = len(values), sorted(values)
    tail, k = 0.0, 0  # tail: P(Binomial(n, 1/2) <= k - 1)
    while tail + math.comb(n, k) / 2 ** n <= (1 - level) / 2:
        tail += math.comb(n, k) / 2 ** n
        k += 1
    return (ordered[k - 1], ordered[n - k]) if k >= 1 else None


def summarize(rows: list[dict]) -> dict:
    """Per measure (step_ms, cpu_ms, unit_s, call_s): each way's median over the repeats, and the
    median of the repeats' paired ratios harness / bare (a pair ran back to back, under the same
    load) with its 95 % interval; harness_ms: the median of the harness's lines a step."""
    out = {}
    for measure in ("step_ms", "cpu_ms", "unit_s", "call_s"):
        medians = {w: statistics.median(r[w][measure] for r in rows) for w in WAYS}
        ratios = [r["harness"][measure] / r["bare"][measure] for r in rows]
        out[measure] = {**medians, "ratio": statistics.median(ratios), "interval": median_interval(ratios)}
    out["harness_ms"] = statistics.median(r["harness"]["harness_ms"] for r in rows)
    return out


def target_words(ratio: float, interval: tuple[float, float] | None) -> str:
    """Whether the per-step target is met, as far as the repeats show it."""
    if interval is None:
        return f"{'met' if ratio <= TARGET else 'NOT met'} by the median; too few repeats for an interval (6 or more)"
    if interval[1] <= TARGET:
        return "met: the interval lies below it"
    if interval[0] > TARGET:
        return "NOT met: the interval lies above it"
    return f"{'met' if ratio <= TARGET else 'NOT met'} by the median, not settled: the interval holds {TARGET}x"


def write_digits(path: Path) -> int:
    """The 1,347 training digits the harness's built-in data holds, for the script to torch.load; their count."""
    import torch

    from harness.builtin.data import digits

    ds = digits()
    torch.save((ds.train_x.contiguous(), ds.train_y.contiguous()), path)
    return len(ds.train_y)


def _interleaved(args, data: Path, tmp: Path, steps: int) -> list[dict]:
    """The repeats, each running both ways back to back, the order alternating."""
    print(f"2 ranks (gloo, CPU, 1 thread each), the digits CNN, DataLoader + DistributedSampler, batch "
          f"{args.batch_size} per rank, {steps} steps per rank ({args.warmup} untimed); {args.repeats} repeats, "
          f"interleaved; load average at start {_load()}", flush=True)
    rows = []
    for r in range(args.repeats):
        row = {}
        for way in (WAYS if r % 2 == 0 else WAYS[::-1]):
            row[way] = bare(args, data) if way == "bare" else harnessed(args, data, tmp / f"h{r}")
        rows.append(row)
        print(f"  repeat {r + 1}: " + "  ".join(
            f"{w} {row[w]['step_ms']:.3f} ms/step ({row[w]['cpu_ms']:.3f} CPU) {row[w]['unit_s']:.2f} s/unit" for w in WAYS)
            + f"  (step {row['harness']['step_ms'] / row['bare']['step_ms']:.3f}x; harness lines "
              f"{row['harness']['harness_ms']:.3f} ms; load {_load()})", flush=True)
    return rows


def _interval(measure: dict) -> str:
    lo_hi = measure["interval"]
    return ("95% interval of the median paired ratio: too few repeats" if lo_hi is None
            else f"95% interval of the median paired ratio {lo_hi[0]:.3f}-{lo_hi[1]:.3f}")


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--warmup", type=int, default=20, help="steps not timed, at the start of each unit")
    parser.add_argument("--repeats", type=int, default=5, help="units of each way, interleaved")
    args, _ = parser.parse_known_args()
    if args.train:
        train(args)
        return 0
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    os.environ["OMP_NUM_THREADS"] = "1"
    quiet = os.getloadavg()[0] < 1  # nothing else running: the wall times are the ranks' own
    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as tmp:
        data = Path(tmp) / "digits.pt"
        share = -(-write_digits(data) // 2)  # a rank's examples, padded as DistributedSampler pads
        steps = args.epochs * -(-share // args.batch_size)
        rows = _interleaved(args, data, Path(tmp), steps)
    s = summarize(rows)
    step, cpu, unit, call = s["step_ms"], s["cpu_ms"], s["unit_s"], s["call_s"]
    print(f"per step: harness {step['harness']:.3f} ms, bare {step['bare']:.3f} ms: {step['ratio']:.3f}x "
          f"({_interval(step)}; target <= {TARGET}x: {target_words(step['ratio'], step['interval'])})")
    print(f"per step, rank 0's CPU: harness {cpu['harness']:.3f} ms, bare {cpu['bare']:.3f} ms: {cpu['ratio']:.3f}x "
          f"({_interval(cpu)}); "
          f"the harness's lines {s['harness_ms']:.3f} ms a step")
    same = sum(r["harness"]["loss"] == r["bare"]["loss"] for r in rows)
    print(f"the same arithmetic both ways: the final loss bit-equal in {same} of {len(rows)} repeats"
          + ("" if same == len(rows) else " (the ways trained different numbers: the step times compare less)"))
    print(f"per unit: harness {unit['harness']:.2f} s, bare {unit['bare']:.2f} s: {unit['ratio']:.3f}x "
          f"({unit['harness'] - unit['bare']:+.2f} s); the whole harness.run call {call['harness']:.2f} s")
    print(f"load average at end {_load()}")
    if not quiet:
        print("the host was not quiet: a step's wall time holds its waits for a core, which the CPU times do "
              "not; quote the wall ratios from a rerun on a quiet machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
