"""What offline wandb costs: the default experiment's wall time with logger.wandb.mode=offline
against logger.wandb.mode=disabled (the target is a ratio of at most 1.10).

Both launches are the same command (`python -m harness +experiment=loss_ab ...`) in a fresh output
folder, so both pay the same Python, torch, Hydra and wandb imports and differ only in what wandb
writes: 20 runs with every step's loss, and the analysis run with its table, figure and artifact.
With --repeats N the pairs alternate their order (disabled first, then offline first, ...), so a
warm file cache or a drifting machine does not always favour the same mode; the ratio is then the
ratio of the medians.

Besides wall time it prints CPU time (user + system of the launch and every process it started,
wandb's service included): on a machine shared with other jobs, wall time mostly measures the
neighbours, while CPU time still measures what wandb adds.

    python scripts/bench_wandb.py                      # the default experiment, once each
    python scripts/bench_wandb.py --repeats 3
    python scripts/bench_wandb.py -- ab.seeds=[0,1,2] train.epochs=1   # extra Hydra overrides

With --unreachable-sweep it times something else: a 3-job local-pool sweep (seed=0,1,2, the
sweep's analysis at the end) offline, against the same sweep online with a wandb server that
cannot be reached (WANDB_BASE_URL at a closed port on 127.0.0.1: loopback only, nothing leaves the
machine). The online attempt costs logger.wandb.init_timeout seconds (--init-timeout, 60 by
default as in the config); the harness pays it once per sweep, so the difference should be about
one timeout, not one per job. It also counts the online attempts wandb made (each leaves a
wandb/run-* folder).

    python scripts/bench_wandb.py --unreachable-sweep --init-timeout 15

On a shared machine, other load shows up as noise in both numbers; rerun before reading much into
a few percent.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.10
MODES = ("disabled", "offline")


def children_cpu() -> float:
    """CPU seconds of every finished child process (and theirs) so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def launch(mode: str, out_dir: Path, extra: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and exit status of one experiment; its output goes to <out_dir>.log."""
    cmd = [sys.executable, "-m", "harness", "+experiment=loss_ab", f"logger.wandb.mode={mode}",
           f"hydra.run.dir={out_dir}", f"ledger.path={out_dir.parent / 'ledger.sqlite'}",  # never the checkout's
           "progress=false", *extra]
    env = dict(os.environ)
    env.pop("WANDB_MODE", None)  # the command line decides the mode (it would win anyway)
    with open(out_dir.parent / f"{out_dir.name}.log", "w") as logfile:
        cpu0, t0 = children_cpu(), time.perf_counter()
        rc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=logfile, stderr=subprocess.STDOUT).returncode
        return time.perf_counter() - t0, children_cpu() - cpu0, rc


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_sweep(kind: str, out: Path, init_timeout: float, extra: list[str]) -> tuple[float, int, int, int]:
    """Wall seconds, exit status, online attempts and offline runs of one 3-job local-pool sweep."""
    cmd = [sys.executable, "-m", "harness", "-m", "+experiment=loss_ab", "ab.seeds=[0,1,2]", "seed=0,1,2",
           "hydra/launcher=local_pool", f"hydra.sweep.dir={out}", f"ledger.path={out.parent / 'ledger.sqlite'}",
           "progress=false",
           f"logger.wandb.init_timeout={init_timeout}", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    if kind == "unreachable":
        cmd.append("logger.wandb.mode=online")
        env.update(WANDB_BASE_URL=f"http://127.0.0.1:{closed_port()}", WANDB_API_KEY="0" * 40)
    else:
        cmd.append("logger.wandb.mode=offline")
    with open(out.parent / f"{out.name}.log", "w") as logfile:
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=logfile, stderr=subprocess.STDOUT).returncode
        seconds = time.perf_counter() - t0
    attempts = len([p for p in out.rglob("wandb/run-*") if p.is_dir()])
    offline = len([p for p in out.rglob("wandb/offline-run-*") if p.is_dir()])
    return seconds, rc, attempts, offline


def unreachable_sweep(args) -> int:
    root = Path(tempfile.mkdtemp(prefix="bench_wandb_sweep_"))
    extra = args.overrides or ["train.epochs=1"]
    walls = {}
    try:
        for kind in ("offline", "unreachable"):
            out = root / kind
            seconds, rc, attempts, offline = launch_sweep(kind, out, args.init_timeout, extra)
            walls[kind] = seconds
            print(f"{kind:11s}  wall {seconds:7.2f} s  exit {rc}  online attempts {attempts}  "
                  f"offline runs {offline}  (log {root / (kind + '.log')})", flush=True)
        extra_s = walls["unreachable"] - walls["offline"]
        print(f"\nunreachable - offline: {extra_s:+.2f} s with init_timeout {args.init_timeout:g} s "
              f"({extra_s / args.init_timeout:.2f} timeouts; 3 jobs and the analysis would be 4)")
    finally:
        if args.keep:
            print(f"output folders: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1, help="pairs of launches (alternating order)")
    parser.add_argument("--keep", action="store_true", help="keep the output folders (printed at the end)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for both launches (after --)")
    parser.add_argument("--unreachable-sweep", action="store_true",
                        help="time a 3-job pool sweep offline against online with an unreachable server")
    parser.add_argument("--init-timeout", type=float, default=60.0, help="logger.wandb.init_timeout for --unreachable-sweep")
    args = parser.parse_args()
    if args.unreachable_sweep:
        return unreachable_sweep(args)

    root = Path(tempfile.mkdtemp(prefix="bench_wandb_"))
    times: dict[str, list[float]] = {m: [] for m in MODES}
    cpus: dict[str, list[float]] = {m: [] for m in MODES}
    failed = []
    try:
        for r in range(args.repeats):
            order = MODES if r % 2 == 0 else MODES[::-1]
            for mode in order:
                out = root / f"{mode}-{r}"
                seconds, cpu, rc = launch(mode, out, args.overrides)
                runs = len(list((out / "wandb").glob("offline-run-*"))) if (out / "wandb").is_dir() else 0
                print(f"round {r + 1}  {mode:8s}  wall {seconds:7.2f} s  cpu {cpu:7.2f} s  exit {rc}  "
                      f"offline wandb runs written: {runs}", flush=True)
                times[mode].append(seconds)
                cpus[mode].append(cpu)
                if rc != 0:
                    failed.append(f"{mode} (round {r + 1}, exit {rc}, log {root / (out.name + '.log')})")
        offline, disabled = statistics.median(times["offline"]), statistics.median(times["disabled"])
        ratio = offline / disabled
        cpu_ratio = statistics.median(cpus["offline"]) / statistics.median(cpus["disabled"])
        print(f"\nwall: offline {offline:.2f} s, disabled {disabled:.2f} s\n"
              f"ratio offline/disabled: {ratio:.3f} (target <= {TARGET:.2f}: {'met' if ratio <= TARGET else 'NOT met'})\n"
              f"cpu ratio offline/disabled: {cpu_ratio:.3f}  (cpu: offline {statistics.median(cpus['offline']):.2f} s, "
              f"disabled {statistics.median(cpus['disabled']):.2f} s)")
        if failed:
            print("experiments that exited non-zero (their times still count): " + "; ".join(failed))
    finally:
        if args.keep or failed:
            print(f"output folders: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
