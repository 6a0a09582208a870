"""A rank of a black-box torchrun command (no harness.attach(), stdlib only) that writes its pid to
HARNESS_RUN_DIR/rank-R.pid and then waits forever (tests/test_ranks.py). With --hang_while PATH it
waits only while the file PATH exists; else rank 0 prints a score and every rank ends (a rerun
trains)."""

import os
import sys
import threading

argv = sys.argv[1:]
hang_while = argv[argv.index("--hang_while") + 1] if "--hang_while" in argv else None
if hang_while is not None and not os.path.exists(hang_while):
    if os.environ["RANK"] == "0":
        print("score 1.0")
    sys.exit(0)
path = os.path.join(os.environ["HARNESS_RUN_DIR"], f"rank-{os.environ['RANK']}.pid")
with open(path + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(path + ".tmp", path)
threading.Event().wait()
