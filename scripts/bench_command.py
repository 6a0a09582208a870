"""What the harness costs around a command arm: an A/B of N units through the harness against the
same N runs of the bare script, serial and side by side, in one run (issue 29).

  bare serial         each (seed, arm) as `python examples/command_arm/train.py ... --seed S`, one
                      after another (what a researcher's own loop over seeds costs)
  bare side by side   the same runs, CORES at a time
  harness serial      python -m harness --config-dir examples/command_arm/conf +experiment=command_ab
                      workers=1 (every unit, the analysis, no certificate)
  harness side by side  the same with workers=CORES

Targets: harness serial <= 1.05 x bare serial + 0.5 s a unit; harness side by side <= 0.6 x bare
serial on 2 cores. Every line says the load average when it started: on a shared machine, read the
numbers as measured under that load. --epochs makes each run of the script longer (the default
run takes a fraction of a second, so the harness's fixed costs dominate).

    python scripts/bench_command.py [--seeds 10] [--epochs 200] [--workers CORES] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "command_arm" / "train.py"
ARMS = {"raw": [], "standardized": ["--standardize"]}


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    return env


def bare(seeds: list[int], epochs: int, parallel: int) -> float:
    """Wall seconds of every (seed, arm) run of the bare script, ``parallel`` at a time."""
    runs = [[sys.executable, str(SCRIPT), "--epochs", str(epochs), *flags, "--seed", str(s)]
            for s in seeds for flags in ARMS.values()]

    def one(argv):
        subprocess.run(argv, cwd=REPO, env=_env(), check=True, capture_output=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, runs))
    return time.perf_counter() - t0


def through_harness(seeds: list[int], epochs: int, workers: int, folder: Path) -> float:
    args = [sys.executable, "-m", "harness", "--config-dir", str(REPO / "examples" / "command_arm" / "conf"),
            "+experiment=command_ab", f"ab.seeds=[{','.join(map(str, seeds))}]",
            f"train.cmd=[{sys.executable},{SCRIPT},--epochs,{epochs}]", f"workers={workers}",
            "determinism.threads=1", "logger=none", "progress=false", "repro.certificate=false",
            f"hydra.run.dir={folder}"]
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the harness failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=200, help="the script's --epochs (its run time)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, default=None)
    a = parser.parse_args(argv)
    seeds = list(range(a.seeds))
    units = len(seeds) * len(ARMS)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-command-") as tmp:
        for name, measure in (
            ("bare serial", lambda: bare(seeds, a.epochs, 1)),
            ("bare side by side", lambda: bare(seeds, a.epochs, a.workers)),
            ("harness serial", lambda: through_harness(seeds, a.epochs, 1, Path(tmp) / "serial")),
            ("harness side by side", lambda: through_harness(seeds, a.epochs, a.workers, Path(tmp) / "sbs")),
        ):
            load = os.getloadavg()[0]
            rows[name] = {"seconds": measure(), "load_at_start": load}
            print(f"{name:22s} {rows[name]['seconds']:7.2f} s  ({units} units; load {load:.2f} at start)", flush=True)
    base = rows["bare serial"]["seconds"]
    serial_limit = 1.05 * base + 0.5 * units
    ratio = rows["harness side by side"]["seconds"] / base
    summary = {
        "units": units, "epochs": a.epochs, "workers": a.workers, "rows": rows,
        "serial_overhead_per_unit_s": (rows["harness serial"]["seconds"] - base) / units,
        "serial_limit_s": serial_limit, "serial_within": rows["harness serial"]["seconds"] <= serial_limit,
        "side_by_side_ratio": ratio, "side_by_side_within": ratio <= 0.6,
    }
    print(f"harness serial: {summary['serial_overhead_per_unit_s']:+.3f} s a unit over the bare runs; target "
          f"<= 1.05 x bare + 0.5 s a unit = {serial_limit:.2f} s: {'met' if summary['serial_within'] else 'NOT met'}")
    print(f"harness side by side / bare serial = {ratio:.2f} (target <= 0.6 on 2 cores): "
          f"{'met' if summary['side_by_side_within'] else 'NOT met'}")
    if a.json:
        a.json.write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
