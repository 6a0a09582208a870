"""A stand-in for a researcher's argparse script (tests/test_command_arm.py, tests/test_slurm.py): no
training, a metric that is a fixed function of (seed, shift), a --mode to crash, stay silent, hang or be killed once,
and the hold of tests/sequential_fns.py (HARNESS_TEST_HOLD_ONCE). Stdlib only: no torch."""

import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--mode", default="ok")
parser.add_argument("--shift", type=float, default=0.0)
parser.add_argument("--flag", action="store_true")
parser.add_argument("--out", default=None)
parser.add_argument("--save", default=None)  # a "model" file: the metric's value
parser.add_argument("--edit_from_seed", type=int, default=-1)  # append a comment to helper.py beside it
args = parser.parse_args()
if 0 <= args.edit_from_seed <= args.seed:  # an edit of the code while an experiment runs
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "helper.py"), "a") as f:
        f.write(f"# edited at seed {args.seed}\n")


def parent_has_torch():
    """Whether the process that started this script (the harness's unit runner) has torch loaded:
    libtorch among its mapped files (Linux; None elsewhere)."""
    try:
        with open(f"/proc/{os.getppid()}/maps") as f:
            return "libtorch" in f.read()
    except OSError:
        return None


if args.out:  # what the script was given, for the test to read
    with open(args.out, "w") as f:
        json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(), "pid": os.getpid(), "parent_torch": parent_has_torch(),
                   "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "HARNESS_SEED",
                                                          "HARNESS_ARM", "HARNESS_RUN_DIR", "CUBLAS_WORKSPACE_CONFIG")}}, f)
hold = os.environ.get("HARNESS_TEST_HOLD_ONCE")  # tests/sequential_fns.py's protocol: the first run of a
if hold:  # unit whose marker file exists holds until the test requeues or cancels its SLURM job
    marker = os.path.join(hold, f"{args.seed}_{args.shift:g}")
    try:
        os.unlink(marker)  # atomic: one run claims it
        claimed = True
    except FileNotFoundError:
        claimed = False
    if claimed:
        job = os.environ.get("SLURM_ARRAY_JOB_ID")
        with open(marker + ".tmp", "w") as f:
            json.dump({"pid": os.getpid(), "slurm": f"{job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job
                       else os.environ.get("SLURM_JOB_ID")}, f)
        os.replace(marker + ".tmp", marker + ".held")
        # held as a train.fn's unit is held in the job's own process, where submitit ignores SLURM's
        # SIGTERM: only the SIGKILL that follows ends it, so the job dies with its unit unwritten
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)  # until the test requeues or cancels the job (its SIGKILL ends this)
if args.mode == "crash":
    print("loading data", flush=True)
    print("Traceback: ValueError: the toy script failed on purpose", file=sys.stderr)
    sys.exit(3)
if args.mode == "killed_once":  # a scancel or preemption: SIGTERM from outside, the first time only
    marker = os.path.join(os.environ["HARNESS_RUN_DIR"], "killed_once")
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGTERM)
if args.mode == "hang":
    time.sleep(120)  # a unit that never ends by itself: the tests end it (SIGKILL, Ctrl-C, timeout_s)
if args.mode == "silent":
    print("trained, but printed no score")
    sys.exit(0)
value = 50.0 + args.shift * (1 + args.seed % 3 / 10) + (args.seed * 7919 % 13) / 10 + (0.5 if args.flag else 0.0)
print(f"epoch 1 score {value - 1:.4f}")
print(f"score {value:.4f}")
if args.save:
    with open(args.save, "w") as f:
        f.write(f"{value!r}\n")
