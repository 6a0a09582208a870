"""Wall clock of whole invocations, and the fixed costs by phase, in one run.

Each line is a fresh ``python -m harness`` in a subprocess, as a user runs it:

  refuse          a bad value (train.batch_size=0): the time to the error
  serial          every unit one after another in one process (determinism.threads=1 workers=1)
  side by side    the units in worker processes, one per core (determinism.threads=1 workers=CORES):
                  the same bits as serial
  default         the command as given (threads and workers auto: on a quiet 2-core machine, the same
                  as side by side)
  noop            the default command again: every run skipped, certificate and analysis kept
  noop wandb      the same, logger=wandb (WANDB_MODE=offline)
  busy ...        serial, side by side and default again, in fresh folders, while one synthetic busy
                  process spins
  busy threads=2  pinned to 2 threads beside it (the old default: the thread trap), with --trap

then the phases of a no-op rerun measured inside one process (imports, compose, cheap checks, the
load measurement, resume decisions with the code identity, analysis). Ratios: side by side / serial
(quiet and busy; target <= 0.65 on 2 cores) and busy / quiet for the default (target <= 2). Every
line says the load average when it started: on a shared machine, read them as measured under that
load.

    python scripts/bench_wall.py [--trap] [--timeout 600] [-- OVERRIDES...]
    python scripts/bench_wall.py -- train.max_steps=60 ab.seeds=[0,1,2]   # smaller than the default
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = ["+experiment=loss_ab", "logger=none", "progress=false"]


def _env(**extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    return env


def invocation(args: list[str], folder: Path, timeout: int, **env) -> tuple[float, int, str]:
    """(wall seconds, exit status, last lines) of one ``python -m harness`` into folder."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "harness", *args, f"hydra.run.dir={folder}"], cwd=folder.parent,
                           env=_env(**env), capture_output=True, text=True, timeout=timeout)
        code, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return float("inf"), -1, f"(stopped after {timeout} s)"
    wall = time.perf_counter() - t0
    said = [line.split(" - ", 1)[-1] for line in out.splitlines() if "determinism.threads" in line or "error" in line.lower()]
    return wall, code, f"load {load:.2f} at start; " + (said[0][-150:] if said else f"exit {code}")


def units(folder: Path) -> dict:
    """Per-unit seconds from the result files: the whole unit (total) and its training loop (train),
    mean over the units, and the slowest unit (a worker's first pays what its start-up left)."""
    total, train = [], []
    for path in sorted(folder.glob("runs/*/*/result.json")):
        timing = json.loads(path.read_text()).get("timing") or {}
        if timing.get("total_seconds") is not None:
            total.append(timing["total_seconds"])
            train.append(timing.get("train_seconds") or 0.0)
    if not total:
        return {}
    return {"n": len(total), "total": sum(total) / len(total), "train": sum(train) / len(train),
            "slowest": max(total), "sum": sum(total)}


def phases(folder: Path, overrides: list[str]) -> dict:
    """A no-op rerun's fixed costs, phase by phase, in this (fresh) process."""
    out, t = {}, time.perf_counter()

    def lap(name):
        nonlocal t
        now = time.perf_counter()
        out[name] = now - t
        t = now

    from harness.config import compose
    from harness.experiment import execute as ex
    lap("import harness (no torch)")
    cfg = compose([*BASE, *overrides])
    lap("compose the config")
    from harness.config.preflight import preflight_cheap
    preflight_cheap(cfg)
    lap("cheap checks")
    from harness.experiment.units import pin_threads
    pin_threads(cfg, folder, say=lambda m: None)
    lap("measure the load, resolve threads")
    from harness.experiment.plan import Plan
    done = Plan.from_config(cfg, folder).all_done()  # the arms made, then every resume decision
    lap(f"resume decisions + code identity (all done: {done})")
    from harness.config.declaration import Declaration
    declaration = Declaration.from_config(cfg)
    ex._analysis(folder, declaration, unchanged_inputs=True)
    lap("analysis (read: its inputs are unchanged)")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trap", action="store_true", help="also run pinned to 2 threads beside the busy process")
    p.add_argument("--timeout", type=int, default=600, help="seconds before one invocation is stopped")
    p.add_argument("--phases-of", help=argparse.SUPPRESS)  # the child that measures the phases
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    if a.phases_of:
        print(json.dumps(phases(Path(a.phases_of), a.overrides)))
        return 0

    args = [*BASE, *a.overrides]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    serial, side = ["determinism.threads=1", "workers=1"], ["determinism.threads=1", f"workers={cores}"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows.append(("refuse", *invocation([*args, "train.batch_size=0"], tmp / "refuse", a.timeout)))
        rows.append(("serial", *invocation([*args, *serial], tmp / "serial", a.timeout)))
        rows.append(("side by side", *invocation([*args, *side], tmp / "side", a.timeout)))
        per_unit = {"serial": units(tmp / "serial"), "side by side": units(tmp / "side")}
        rows.append(("default", *invocation(args, tmp / "exp", a.timeout)))
        rows.append(("noop", *invocation(args, tmp / "exp", a.timeout)))
        wandb_dir = tmp / "wandb_cache"
        rows.append(("noop wandb", *invocation([*args, "logger=wandb"], tmp / "exp", a.timeout, WANDB_MODE="offline",
                                              WANDB_DIR=str(wandb_dir), WANDB_CACHE_DIR=str(wandb_dir))))
        child = subprocess.run([sys.executable, __file__, "--phases-of", str(tmp / "exp"), *a.overrides],
                               env=_env(), capture_output=True, text=True, timeout=a.timeout)
        phase = json.loads(child.stdout.splitlines()[-1]) if child.returncode == 0 else {"failed": child.stderr[-300:]}
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(2)  # let the load average and the runnable count see it
            rows.append(("busy serial", *invocation([*args, *serial], tmp / "busy_serial", a.timeout)))
            rows.append(("busy side", *invocation([*args, *side], tmp / "busy_side", a.timeout)))
            rows.append(("busy default", *invocation(args, tmp / "busy_auto", a.timeout)))
            if a.trap:
                rows.append(("busy threads=2", *invocation([*args, "determinism.threads=2", "workers=1"],
                                                           tmp / "busy_t2", a.timeout)))
        finally:
            spin.kill()
            spin.wait()

    wall = {r[0]: r[1] for r in rows}
    first = wall["serial"]
    print(f"bench_wall: {' '.join(args)}  ({os.cpu_count()} CPUs, {cores} usable)\n")
    print(f"{'invocation':<16} {'wall s':>8} {'x serial':>8}  exit  note")
    for name, seconds, code, note in rows:
        print(f"{name:<16} {seconds:>8.2f} {seconds / first:>8.2f}  {code:>4}  {note}")
    print(f"\nside by side / serial, quiet: {wall['side by side'] / wall['serial']:.2f} (target <= 0.65 on 2 cores)")
    print(f"side by side / serial, busy:  {wall['busy side'] / wall['busy serial']:.2f}")
    print(f"default busy / default quiet: {wall['busy default'] / wall['default']:.2f} (target <= 2)")
    print(f"noop: {wall['noop']:.2f} s (target <= 2), noop wandb: {wall['noop wandb']:.2f} s (target <= 4)")
    print("\nper unit (from the result files: the whole unit, and its training loop alone):")
    for name, u in per_unit.items():
        if u:
            print(f"  {name:<14} {u['n']} units: {u['total']:.2f} s a unit (train {u['train']:.2f} s), slowest "
                  f"{u['slowest']:.2f} s; units' seconds added up {u['sum']:.1f} s")
    s, b = per_unit["serial"], per_unit["side by side"]
    if s and b:
        print(f"  a unit side by side / alone: {b['total'] / s['total']:.2f} (train {b['train'] / s['train']:.2f}): "
              f"what two units at once cost each other on these cores")
    print("\nno-op rerun by phase (one process):")
    for name, s in phase.items():
        print(f"  {name:<48} {s:>6.2f} s" if isinstance(s, float) else f"  {name}: {s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
