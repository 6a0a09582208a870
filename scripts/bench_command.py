"""What the harness costs around a command arm: an A/B of N units through the harness against the
same N runs of the bare script, serial and side by side, in one run.

Two rounds, each measured four ways (bare serial, bare side by side, harness serial, harness side
by side), every line with the CPU seconds of every process it started and the load average when it
started:

  fixed cost    units that do (nearly) nothing: examples/command_arm/train.py --epochs 1, about the
                start of a Python with numpy. The harness's time minus the bare runs' time is what
                one invocation costs around N units (start-up, workers, preflight, analysis, report).
  work units    units of a stated length (--unit-seconds, default 2 s of CPU each): the same script
                at --batch-size 1 --lr 0.001 and as many epochs as that length takes here (measured
                first; one line of output per epoch, as a training script prints). The targets are
                judged on this round.

Targets (the issue's): harness serial <= 1.05 x bare serial + 0.5 s a unit; harness side by side
<= 0.6 x bare serial on 2 cores. The harness runs with workers=1 / workers=CORES,
determinism.threads=1, logger=none, progress=false and repro.certificate=false (the bare runs rerun
nothing either; the certificate's rerun is one unit more). Each result ends with PASS or FAIL, and
the line after it says from which unit length the side-by-side target would be met, extrapolated
from the two rounds. On a shared machine, read the numbers under the load they name.

With --repeats R each way is timed R times, in an order rotated and reversed from one repeat to the
next, and the figures are the medians: on a VM whose speed drifts within minutes, one timing of each
way compares the drift as much as the ways.

    python scripts/bench_command.py [--seeds 10] [--unit-seconds 2] [--workers CORES] [--repeats R] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "command_arm" / "train.py"
ARMS = {"raw": [], "standardized": ["--standardize"]}
ZERO = ["--epochs", "1"]  # the fixed-cost round: one epoch of 16 small batches
WORK = ["--batch-size", "1", "--lr", "0.001"]  # the work round: --epochs chosen by calibrate()
SIDE_BY_SIDE_TARGET, SERIAL_FACTOR, SERIAL_PER_UNIT = 0.6, 1.05, 0.5


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    return env


def _cpu_of(argv: list[str]) -> float:
    """CPU seconds (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=REPO, env=_env(), check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def calibrate(unit_seconds: float) -> tuple[int, float]:
    """The --epochs at which one run of the work round takes ``unit_seconds`` of CPU here, and the
    CPU seconds of one epoch (CPU time, not wall: the load of other processes does not enter)."""
    probe = 40
    short = min(_cpu_of([sys.executable, str(SCRIPT), *WORK, "--epochs", "1", "--seed", "0"]) for _ in range(2))
    long = _cpu_of([sys.executable, str(SCRIPT), *WORK, "--epochs", str(probe), "--seed", "0"])
    per_epoch = max(1e-4, (long - short) / (probe - 1))
    return max(1, round(1 + (unit_seconds - short) / per_epoch)), per_epoch


def bare(seeds: list[int], flags: list[str], parallel: int) -> float:
    """Wall seconds of every (seed, arm) run of the bare script, ``parallel`` at a time."""
    runs = [[sys.executable, str(SCRIPT), *flags, *arm, "--seed", str(s)] for s in seeds for arm in ARMS.values()]

    def one(argv):
        subprocess.run(argv, cwd=REPO, env=_env(), check=True, capture_output=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, runs))
    return time.perf_counter() - t0


def through_harness(seeds: list[int], flags: list[str], workers: int, folder: Path) -> float:
    args = [sys.executable, "-m", "harness", "--config-dir", str(REPO / "examples" / "command_arm" / "conf"),
            "+experiment=command_ab", f"ab.seeds=[{','.join(map(str, seeds))}]",
            f"train.cmd=[{','.join([sys.executable, str(SCRIPT), *flags])}]", f"workers={workers}",
            "determinism.threads=1", "logger=none", "progress=false", "repro.certificate=false",
            f"hydra.run.dir={folder}", f"ledger.path={folder.parent / 'ledger.sqlite'}"]  # never the checkout's ledger
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the harness failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall


def round_of(name: str, seeds: list[int], flags: list[str], workers: int, tmp: Path, repeats: int = 1) -> dict:
    """The four ways, each timed ``repeats`` times, printed as they end; each way's median.

    The machine's speed drifts by tens of percent within minutes (a shared VM): one timing of each way
    a minute apart compares the drift as much as the ways. Repeats run the four ways in an order
    rotated and reversed from one repeat to the next (so that no way always runs first or last), and
    each way's figure is the median of its repeats."""
    units = 2 * len(seeds)
    ways = {
        "bare serial": lambda r: bare(seeds, flags, 1),
        "bare side by side": lambda r: bare(seeds, flags, workers),
        "harness serial": lambda r: through_harness(seeds, flags, 1, tmp / f"{name}-serial-{r}"),
        "harness side by side": lambda r: through_harness(seeds, flags, workers, tmp / f"{name}-sbs-{r}"),
    }
    names, seen = list(ways), {way: [] for way in ways}
    for r in range(repeats):
        order = names[r % 4:] + names[:r % 4]
        for way in (order if r % 2 == 0 else order[::-1]):
            load, before = os.getloadavg()[0], _children_cpu()
            row = {"seconds": ways[way](r), "load_at_start": load}
            row["cpu_seconds"] = _children_cpu() - before  # every process it started, workers and units too
            seen[way].append(row)
            print(f"  {way:22s} {row['seconds']:7.2f} s  ({row['cpu_seconds']:6.2f} s CPU; {units} units; "
                  f"load {load:.2f} at start)" + (f"  [repeat {r + 1}]" if repeats > 1 else ""), flush=True)
    rows = {way: {"seconds": statistics.median(x["seconds"] for x in xs),
                  "cpu_seconds": statistics.median(x["cpu_seconds"] for x in xs),
                  "load_at_start": xs[0]["load_at_start"], "all": xs} for way, xs in seen.items()}
    if repeats > 1:
        print("  medians: " + ", ".join(f"{way} {row['seconds']:.2f} s" for way, row in rows.items()), flush=True)
    return rows


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds (units = 2 x seeds); default 10")
    parser.add_argument("--unit-seconds", type=float, default=2.0,
                        help="CPU seconds of one unit of the work round (default 2)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=1,
                        help="time each way this many times, in rotated order, and judge the medians (default 1)")
    a = parser.parse_args(argv)
    if a.seeds < 3 or a.unit_seconds <= 0 or a.workers < 1 or a.repeats < 1:
        parser.error("--seeds >= 3 (the analysis needs 3 pairs), --unit-seconds > 0, --workers >= 1 and --repeats >= 1")
    seeds, units = list(range(a.seeds)), 2 * a.seeds
    epochs, per_epoch = calibrate(a.unit_seconds)
    work = [*WORK, "--epochs", str(epochs)]
    print(f"{units} units ({a.seeds} seeds x 2 arms), {a.workers} worker(s) side by side, {os.cpu_count()} core(s); "
          f"load {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-command-") as tmp:
        print(f"fixed cost: units that do nearly nothing (train.py {' '.join(ZERO)})", flush=True)
        zero = round_of("zero", seeds, ZERO, a.workers, Path(tmp), a.repeats)
        print(f"work units: train.py {' '.join(work)} ({a.unit_seconds:g} s of CPU a unit asked; "
              f"{per_epoch * 1000:.1f} ms an epoch measured here)", flush=True)
        rows = round_of("work", seeds, work, a.workers, Path(tmp), a.repeats)
    fixed = {m: zero[f"harness {m}"]["seconds"] - zero["bare serial" if m == "serial" else "bare side by side"]["seconds"]
             for m in ("serial", "side by side")}
    # in CPU seconds, which the load of other processes changes far less than wall seconds
    fixed_cpu = {m: zero[f"harness {m}"]["cpu_seconds"] - zero["bare serial"]["cpu_seconds"] for m in ("serial", "side by side")}
    base = rows["bare serial"]["seconds"]
    serial_limit = SERIAL_FACTOR * base + SERIAL_PER_UNIT * units
    ratio = rows["harness side by side"]["seconds"] / base
    # harness side by side = c + b x bare serial, through the two rounds: the target holds from
    # bare serial >= c / (0.6 - b), i.e. from units of that length / units
    b0, b1 = zero["bare serial"]["seconds"], base
    t0, t1 = zero["harness side by side"]["seconds"], rows["harness side by side"]["seconds"]
    slope = (t1 - t0) / (b1 - b0) if b1 > b0 else float("nan")
    c = t0 - slope * b0
    met_from = c / (SIDE_BY_SIDE_TARGET - slope) / units if slope < SIDE_BY_SIDE_TARGET and c > 0 else None
    summary = {
        "units": units, "workers": a.workers, "unit_seconds_asked": a.unit_seconds, "epochs": epochs,
        "unit_seconds_bare": base / units, "zero": zero, "rows": rows, "fixed_cost_s": fixed,
        "fixed_cost_cpu_s": fixed_cpu,
        "serial_overhead_per_unit_s": (rows["harness serial"]["seconds"] - base) / units,
        "serial_limit_s": serial_limit, "serial_within": rows["harness serial"]["seconds"] <= serial_limit,
        "side_by_side_ratio": ratio, "side_by_side_within": ratio <= SIDE_BY_SIDE_TARGET,
        "side_by_side_met_from_unit_s": met_from,
    }
    print(f"fixed cost of one invocation around {units} units: serial {fixed['serial']:+.2f} s, side by side "
          f"{fixed['side by side']:+.2f} s (harness minus bare, the round of units that do nearly nothing); in CPU: "
          f"serial {fixed_cpu['serial']:+.2f} s, side by side {fixed_cpu['side by side']:+.2f} s")
    print(f"unit length: {base / units:.2f} s a unit (bare serial / {units}; train.py --epochs {epochs})")
    print(f"harness serial: {summary['serial_overhead_per_unit_s']:+.3f} s a unit over the bare runs; target "
          f"<= {SERIAL_FACTOR} x bare + {SERIAL_PER_UNIT} s a unit = {serial_limit:.2f} s: "
          f"{'PASS' if summary['serial_within'] else 'FAIL'}")
    print(f"harness side by side / bare serial = {ratio:.2f} (target <= {SIDE_BY_SIDE_TARGET} on 2 cores, units of "
          f"{base / units:.2f} s): {'PASS' if summary['side_by_side_within'] else 'FAIL'}")
    print("side by side <= 0.6 from units of about " + (f"{met_from:.2f} s (bare), extrapolated from the two rounds"
          if met_from is not None else "- (not reached at any length: the side-by-side time grows faster than "
          "0.6 x the bare time)"))
    if a.json:
        a.json.write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
