"""A stand-in for a script that saves ./model.pt and loads it back (pytorch/examples' main.py does):
it writes its own arm into ./model.pt, says so through a file in --sync, waits (polling files) until
every arm in --others has written its own, then reads ./model.pt back and reads ./data/x.txt and
../up.txt (relative paths into the launch folder and its parent). Stdlib only: no torch."""

import argparse
import json
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--arm", required=True)
parser.add_argument("--sync", required=True)
parser.add_argument("--others", nargs="*", default=[])
args, _ = parser.parse_known_args()  # the experiment's other flags (--out, --mode) are not ours

with open("model.pt", "w") as f:
    f.write(args.arm)
open(os.path.join(args.sync, f"{args.arm}.written"), "w").close()
deadline = time.monotonic() + 120  # a bound, not an order: the files decide when to go on
while not all(os.path.exists(os.path.join(args.sync, f"{o}.written")) for o in args.others):
    if time.monotonic() > deadline:
        break
    time.sleep(0.02)
met = all(os.path.exists(os.path.join(args.sync, f"{o}.written")) for o in args.others)
with open("model.pt") as f:
    loaded = f.read()
with open("data/x.txt") as f:
    data = f.read().strip()
with open("../up.txt") as f:
    up = f.read().strip()
with open(os.path.join(os.environ["HARNESS_RUN_DIR"], "seen.json"), "w") as f:
    json.dump({"loaded": loaded, "met": met, "data": data, "up": up, "cwd": os.getcwd()}, f)
print(f"own {1.0 if loaded == args.arm else 0.0}")
