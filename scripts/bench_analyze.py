"""How long does ``harness.analyze`` take on a big tree of result files?

Writes a synthetic tree of N result files (default 10,000: 5,000 seeds x 2 arms) of realistic size
(440 per-step fingerprints, a 44-point curve, a full config and environment, like the default
experiment's; the folder's declaration.json, as the harness writes it), then times, in this process: finding and parsing the files, the analysis, and the
whole ``python -m harness.analyze DIR --no-write`` command in a subprocess (imports included).
Target (a ratio that holds on any host): the whole command <= 2x the floor, a fresh process that
only starts, imports the command's modules, finds and parses the files and exits (what the analysis
adds is the rest of the command's time); both measured in this run, each --repeats times (default
3), alternated, medians compared; PASS/FAIL on it, exit status 1 on FAIL. The CPU seconds of both
are printed beside the wall: on a host busier than its cores the wall ratio scatters and the CPU
ratio is what a quiet single core would show. Beside them, the in-process find + parse.

The tree is written in the current contract (harness.result/2: the per-step fingerprints in one
packed field) and, with --format both (the default), also in the previous one (harness.result/1:
two lists of 440 hex strings), which the analysis still reads; the ratios compare the two in the
same run, on the same machine.

    python scripts/bench_analyze.py [--files 10000] [--format both|2|1] [--repeats 3] [--dir /tmp/harness-bench-analyze]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 2.0  # the whole command against the floor (_FLOOR)
NO_APART = False
REPEATS = 3  # --repeats
sys.path.insert(0, str(REPO))

from harness.analysis.analyze import analyze  # noqa: E402
from harness.config.declaration import Declaration, read as read_declaration  # noqa: E402
from harness.results import SCHEMA, SCHEMA_V1, config_digest, gc_paused, load_tree, pack_examples, pack_steps  # noqa: E402


def synthetic_result(seed: int, arm: str, rng: random.Random, config: dict, env: dict) -> dict:
    acc = 97.5 + rng.gauss(0, 0.4) + (0.2 if arm == "B" else 0.0)
    n_test = 450
    n_correct = min(n_test, round(acc * n_test / 100))
    correct = [1] * n_correct + [0] * (n_test - n_correct)
    rng.shuffle(correct)  # which examples a run gets right: its per-example record, as the loop writes it
    init = f"{rng.getrandbits(64) ^ seed:016x}"
    order = f"{(seed * 2654435761) & (2**64 - 1):016x}"
    return {
        "schema": SCHEMA, "experiment": "loss_ab", "seed": seed, "arm": arm,
        "factor": "loss.label_smoothing", "factor_value": 0.0 if arm == "A" else 0.1,
        "status": "completed", "error": None,
        "metrics": {"test_accuracy": 100 * n_correct / n_test, "test_loss": 0.1 + rng.random() / 10,
                    "train_loss": rng.random(), "n_test": n_test, "n_train": 1347},
        "examples": pack_examples(correct, metric="test_accuracy"),
        "fingerprints": {
            "init": f"{seed:016x}", "data_order": order, "final": init,
            "steps": {"loss": [f"{rng.getrandbits(32):08x}" for _ in range(440)],
                      "params": [f"{rng.getrandbits(64):016x}" for _ in range(440)]},
        },
        "pairing": {"init": True, "data_order": True},
        "curve": {"step": list(range(10, 450, 10)), "train_loss": [rng.random() for _ in range(44)]},
        "env": env,
        "timing": {"train_seconds": 1.3, "steps": 440, "steps_per_s": 338.0, "ms_per_step": 2.95, "total_seconds": 1.4},
        "config": {**config[arm], "seed": seed, "arm": arm},
        "config_hash": config[arm + "_hash"], "base_hash": config["base_hash"],
        "code_version": "0.1.0+bench",
        "code": {"version": "0.1.0+bench", "harness": "606986ff87bb", "files": {},
                 "packages": {"torch": "torch==2.14.1"}, "git": {}},
        "created": "2026-11-29T00:00:00+00:00",
    }


# The least any one-process command that reads the files costs (printed as "floor"): Python's start,
# the command's imports, finding and parsing the files in fresh memory (timed inside too: the
# in-process find + parse above reuses memory freed by the previous repeat), and an exit without
# teardown. What the target leaves for gathering and the statistics is 2x find + parse minus this.
_FLOOR = ("import gc, os, sys, time; import harness.tools.analyze; from harness.results import load_tree; "
          "gc.disable(); t = time.perf_counter(); load_tree(sys.argv[1]); "
          "print(time.perf_counter() - t, flush=True); os._exit(0)")


def write_tree(root: Path, n_files: int, version: int = 2) -> None:
    from harness.experiment.identity import plain as _plain  # the real config's shape and size
    from tests.conftest import compose_cfg

    cfg = compose_cfg(["+experiment=loss_ab", "logger=none"])
    plain = _plain(cfg)
    config = {}
    for arm, value in (("A", 0.0), ("B", 0.1)):  # each arm's config, with the hashes the harness records
        config[arm] = {**plain, "loss": {**plain["loss"], "label_smoothing": value}}
        config[arm + "_hash"] = config_digest(config[arm])
    config["base_hash"] = config_digest(config["A"], exclude_factor="loss.label_smoothing")
    env = {"python": "3.11.7", "platform": "Linux-6.18.44-x86_64-with-glibc2.36", "machine": "x86_64",
           "processor": "Intel(R) Xeon(R) Processor", "torch": "2.14.1+cu130", "numpy": "2.4.6", "harness": "0.1.0",
           "device": "cpu", "device_name": "Intel(R) Xeon(R) Processor", "cuda": "13.0", "cudnn": 92400, "threads": 1,
           "cpu_capability": "AVX512", "interop_threads": 2, "mode": "strict", "deterministic_algorithms": True,
           "deterministic_warn_only": False, "fill_uninitialized_memory": False, "cudnn_deterministic": True,
           "cudnn_benchmark": False, "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "cublas_set_by_harness": True,
           "cuda_initialized_before_harness": False, "OMP_NUM_THREADS": None}  # what a CPU run records
    # the declaration every folder the harness writes holds (execute.py), as an analysis reads it
    Declaration.from_config(cfg).write(root)
    rng = random.Random(0)
    for i in range(n_files):
        seed, arm = divmod(i, 2)
        arm = "AB"[arm]
        path = root / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        result = synthetic_result(seed, arm, rng, config, env)
        if version == 1:
            result["schema"] = SCHEMA_V1
        else:  # what results.write_result writes
            result["fingerprints"]["steps"] = pack_steps(result["fingerprints"]["steps"])
        path.write_text(json.dumps(result, indent=1))


def measure(root: Path, n_files: int, version: int) -> dict:
    """Write the tree in one format, time loading, analysing and the whole command; return the figures."""
    if root.exists():
        shutil.rmtree(root)
    t = time.perf_counter()
    write_tree(root, n_files, version)
    size = sum(f.stat().st_size for f in root.rglob("result.json"))
    print(f"bench_analyze: harness.result/{version}: {n_files} result files, {size / 1e6:.0f} MB "
          f"({size / n_files / 1e3:.1f} KB each), written in {time.perf_counter() - t:.1f} s to {root}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # Each side timed REPEATS times, alternated, medians compared: the first read after writing the tree
    # competes with the kernel's writeback (3.1 s against 0.9-1.8 s for the same tree later, loaded)
    parses, parse_cpus, commands, command_cpus, analysis = [], [], [], [], None
    floors, floor_cpus, fresh_parses, scipys = [], [], [], []
    for _ in range(REPEATS):
        with gc_paused():  # as harness.analyze does (analysis.analyze_dir)
            c0, t0 = time.process_time(), time.perf_counter()
            loaded = load_tree(root)
            t1, c1 = time.perf_counter(), time.process_time()
            if analysis is None:  # the analysis in this process: timed once, for its line
                analysis = analyze(loaded.results, read_declaration(root))  # as analyze_dir reads it
                analysis_seconds = time.perf_counter() - t1
        parses.append(t1 - t0)
        parse_cpus.append(c1 - c0)
        del loaded
        r3, t3 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "harness.analyze", str(root), "--no-write"],
                              capture_output=True, text=True, env=env)
        t4, r4 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        commands.append(t4 - t3)
        command_cpus.append((r4.ru_utime - r3.ru_utime) + (r4.ru_stime - r3.ru_stime))  # both of its processes
        if proc.returncode != 0:
            print(proc.stderr)
            raise SystemExit(f"harness.analyze failed with exit code {proc.returncode}")
        r5, t5 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        floor = subprocess.run([sys.executable, "-c", _FLOOR, str(root)], capture_output=True, text=True,
                               env=env, check=True)
        t6, r6 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        floors.append(t6 - t5)
        floor_cpus.append((r6.ru_utime - r5.ru_utime) + (r6.ru_stime - r5.ru_stime))
        fresh_parses.append(float(floor.stdout))
        t6 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import scipy.stats"], env=env, check=True)
        scipys.append(time.perf_counter() - t6)
    parse, command = statistics.median(parses), statistics.median(commands)
    cpu, parse_cpu = statistics.median(command_cpus), statistics.median(parse_cpus)
    verdict = analysis["comparisons"]["B"]["verdict"]["code"]
    runs = f"median of {REPEATS}, alternated"
    print(f"  find + parse      : {parse:6.2f} s  ({1e6 * parse / n_files:.0f} us per file; {runs}: "
          f"{', '.join(f'{x:.2f}' for x in parses)})")
    print(f"  analysis          : {analysis_seconds:6.2f} s  ({analysis['comparisons']['B']['n_pairs']} pairs, verdict {verdict})")
    print(f"  harness.analyze   : {command:6.2f} s  wall, whole command in a subprocess ({runs}: "
          f"{', '.join(f'{x:.2f}' for x in commands)}); command / (find + parse) {command / parse:.2f}")
    floor, fresh = statistics.median(floors), statistics.median(fresh_parses)
    floor_cpu = statistics.median(floor_cpus)
    print(f"  floor             : {floor:6.2f} s  wall = {floor / parse:.2f}x find + parse: a process that starts, imports "
          f"the command's modules, finds and parses the files and exits, no analysis ({runs}: "
          f"{', '.join(f'{x:.2f}' for x in floors)}); its find + parse {fresh:.2f} s = {fresh / parse:.2f}x (fresh memory)")
    ratio = command / floor
    print(f"  command / floor   : {ratio:.2f} wall, {cpu / floor_cpu:.2f} CPU ({cpu:.2f} s / {floor_cpu:.2f} s)  "
          f"(target <= {TARGET_RATIO:g}): {'PASS' if ratio <= TARGET_RATIO else 'FAIL'}")
    # What the statistics need before they can start: the verdict's tests are scipy's
    scipy_wall = statistics.median(scipys)
    print(f"  scipy.stats       : {scipy_wall:6.2f} s  wall = {scipy_wall / parse:.2f}x find + parse: a process that starts and "
          f"imports scipy.stats, as the statistics' process does first ({runs}: {', '.join(f'{x:.2f}' for x in scipys)})")
    # CPU seconds beside the wall: on a host busier than its cores, the second process overlaps
    # nothing and the wall ratio follows the CPU one; the load says which host this was
    print(f"  CPU: command (both processes) {cpu:.2f} s / find + parse {parse_cpu:.2f} s = {cpu / parse_cpu:.2f}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    # The command computes the statistics in a second process when a second core is usable, which
    # imports scipy while the results are read (analyze_dir's apart): against the same command in one
    # process, and the floor, alternated REPEATS times, medians compared, wall and CPU.
    if NO_APART:
        return {"size": size, "parse": parse, "command": command, "ratio": ratio}
    one = ("import sys; import harness.training.threads as t; t.usable_cores = lambda: 1; "
           "from harness.tools.analyze import main; from harness.tools.fast_exit import exit_now; "
           "exit_now(main(sys.argv[1:]))")
    sides = {"apart": [sys.executable, "-m", "harness.analyze", str(root), "--no-write"],
             "one process": [sys.executable, "-c", one, str(root), "--no-write"],
             "floor": [sys.executable, "-c", _FLOOR, str(root)]}
    walls, cpus = ({k: [] for k in sides} for _ in range(2))
    for _ in range(REPEATS):
        for name, cmd in sides.items():
            r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, env=env)
            t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            walls[name].append(t1 - t0)
            cpus[name].append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    wall = {k: statistics.median(v) for k, v in walls.items()}
    cpu_of = {k: statistics.median(v) for k, v in cpus.items()}
    for name in ("apart", "one process"):
        print(f"  {name:17s} : {wall[name]:6.2f} s wall = {wall[name] / wall['floor']:.2f}x floor, "
              f"{cpu_of[name]:.2f} s CPU = {cpu_of[name] / cpu_of['floor']:.2f}x ({runs}: "
              f"{', '.join(f'{x:.2f}' for x in walls[name])}; floor {', '.join(f'{x:.2f}' for x in walls['floor'])})")
    return {"size": size, "parse": parse, "command": command, "ratio": ratio}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--format", choices=["both", "2", "1"], default="both",
                   help="result format(s) to measure: the current (2), the previous (1), or both (default)")
    p.add_argument("--dir", default=None, help="where to write the tree (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the tree afterwards")
    p.add_argument("--repeats", type=int, default=3, help="time each side this many times, alternated (default 3)")
    p.add_argument("--no-apart", action="store_true", help="skip the apart / one process / floor comparison (faster)")
    args = p.parse_args()
    global NO_APART, REPEATS
    NO_APART, REPEATS = args.no_apart, max(1, args.repeats)

    root = Path(args.dir or tempfile.mkdtemp(prefix="harness-bench-analyze-"))
    versions = [2, 1] if args.format == "both" else [int(args.format)]
    figures = {v: measure(root / f"v{v}", args.files, v) for v in versions}
    if len(figures) == 2:
        new, old = figures[2], figures[1]
        print(f"result/2 vs result/1: files {new['size'] / old['size']:.2f}x the size, parsing "
              f"{new['parse'] / old['parse']:.2f}x the time, the whole command {new['command'] / old['command']:.2f}x")
    if not args.keep and not args.dir:
        shutil.rmtree(root)
    return 0 if all(f["ratio"] <= TARGET_RATIO for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
