"""What the harness costs around a unit of 2 processes: the same DDP script (gloo, CPU, 1 thread per
rank) run by bare torchrun and as a harness command arm, per step and per unit, in one run.

The script is this file (``--train``): an MLP on random data, DistributedDataParallel, its step loop
timed inside each rank (rank 0 prints ``ms_per_step``). Bare (``--bare``): a plain loop over a
DataLoader with torch's DistributedSampler, nothing of the harness imported. Under the harness: the same loop
through ``harness.attach()``, ``run.loader`` (the rank's share of the seed's order, fingerprinted)
and ``run.step`` (every step's parameter digest), the ranks' records made one after torchrun ends.

Per step: rank 0's ms per step inside the loop (harness / bare; target <= 1.05). Per unit: the wall
time of the whole unit, torchrun's start to its end (bare: the command's wall; harness: the unit's
timing.total_seconds, which also holds the harness's reading of the ranks' records). Each way is run
--repeats times, alternating, and the medians compared. On a shared machine, read the numbers under
the load they name.

    python scripts/bench_ddp.py [--steps 300] [--repeats 3] [--hidden 256]
"""

from __future__ import annotations

import argparse
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
TARGET = 1.05


def train(args) -> None:
    """One rank of the DDP script (started by torchrun)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    n = args.steps * args.batch_size * dist.get_world_size()
    g = torch.Generator().manual_seed(1234)
    x, y = torch.randn(n, 784, generator=g), torch.randint(0, 10, (n,), generator=g)
    if args.bare:
        torch.manual_seed(args.seed)
        model = torch.nn.Sequential(torch.nn.Linear(784, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10))
        dataset = torch.utils.data.TensorDataset(x, y)  # what a DDP script reads its batches with
        batches = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size,
                                              sampler=torch.utils.data.DistributedSampler(dataset, seed=args.seed))
        run = None
    else:
        import harness

        run = harness.attach(seed=args.seed)
        with run.init():
            model = torch.nn.Sequential(torch.nn.Linear(784, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10))
        run.watch(model)
        batches = run.loader(harness.TensorBatches(x, y), batch_size=args.batch_size)
    net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    steps = 0
    t0 = time.perf_counter()
    for inputs, targets in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(inputs), targets)
        loss.backward()
        opt.step()
        if run is not None:
            run.step(loss)
        steps += 1
    seconds = time.perf_counter() - t0
    if run is not None:
        run.finish({"loss": loss.item()})
    if rank == 0:
        # "score": the metric the tests' command_toy experiment reads from stdout
        print(f"ms_per_step {1000 * seconds / steps:.4f} steps {steps} loss {loss.item():.6f}\n"
              f"score {1000 * seconds / steps:.4f}", flush=True)
    dist.destroy_process_group()


def _script_argv(args, bare: bool) -> list[str]:
    return ["python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(Path(__file__).resolve()),
            "--train", "--steps", str(args.steps), "--hidden", str(args.hidden), "--batch-size", str(args.batch_size),
            *(["--bare"] if bare else [])]


def bare(args) -> tuple[float, float]:
    """(ms per step, unit seconds) of one bare torchrun."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    for key in [k for k in env if k.startswith("HARNESS_")]:
        del env[key]
    argv = [sys.executable, *_script_argv(args, True)[1:], "--seed", "0"]
    t0 = time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    return float(re.search(r"ms_per_step ([0-9.]+)", out).group(1)), wall


def harnessed(args, folder: Path) -> tuple[float, float]:
    """(ms per step, unit seconds) of one unit run by the harness (a fresh output folder: no resume)."""
    import harness
    from harness.results import read_json

    cmd = shlex.join(_script_argv(args, False))
    harness.run(["+experiment=command_toy", f"train.cmd='{cmd}'", "logger=none", "progress=false",
                 "workers=1", "determinism.threads=1", "repro.certificate=false", "ab.seeds=[0]", "seed=0", "arm=A",
                 "stats.metrics={score: min}"],
                out_dir=folder, config_dir=REPO / "tests" / "conf", verbose=False)
    result = read_json(folder / "runs" / "seed=0" / "arm=A" / "result.json")
    if result["status"] != "completed":
        raise SystemExit(f"the harness's unit failed: {result['error']}")
    return float(result["metrics"]["score"]), float(result["timing"]["total_seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per rank")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--repeats", type=int, default=3)
    args, _ = parser.parse_known_args()
    if args.train:
        train(args)
        return 0
    os.environ["OMP_NUM_THREADS"] = "1"
    print(f"2 ranks (gloo, CPU, 1 thread each), {args.steps} steps of an MLP 784-{args.hidden}-10, batch "
          f"{args.batch_size} per rank; load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s)")
    ways: dict = {"bare": [], "harness": []}
    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as tmp:
        for r in range(args.repeats):
            order = ("bare", "harness") if r % 2 == 0 else ("harness", "bare")
            for way in order:
                got = bare(args) if way == "bare" else harnessed(args, Path(tmp) / f"h{r}")
                ways[way].append(got)
                print(f"  repeat {r + 1} {way:8s} {got[0]:8.3f} ms/step  {got[1]:7.2f} s/unit", flush=True)
    step = {w: statistics.median(v[0] for v in ways[w]) for w in ways}
    unit = {w: statistics.median(v[1] for v in ways[w]) for w in ways}
    per_step, per_unit = step["harness"] / step["bare"], unit["harness"] / unit["bare"]
    print(f"per step: harness {step['harness']:.3f} ms / bare {step['bare']:.3f} ms = {per_step:.3f}x "
          f"(target <= {TARGET}x: {'PASS' if per_step <= TARGET else 'FAIL'})")
    print(f"per unit: harness {unit['harness']:.2f} s / bare {unit['bare']:.2f} s = {per_unit:.3f}x "
          f"(+{unit['harness'] - unit['bare']:.2f} s)")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
