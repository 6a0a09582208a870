"""A rank of a black-box torchrun command (no harness.attach(), stdlib only) that writes its pid to
HARNESS_RUN_DIR/rank-R.pid and then waits forever (tests/test_ranks.py)."""

import os
import threading

path = os.path.join(os.environ["HARNESS_RUN_DIR"], f"rank-{os.environ['RANK']}.pid")
with open(path + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(path + ".tmp", path)
threading.Event().wait()
