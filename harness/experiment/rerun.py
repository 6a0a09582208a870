"""The certificate's rerun in a fresh process, where the first run's process cannot help it.

On a GPU a process remembers what it ran: the convolution plans cuDNN picked, the algorithms chosen
beside other units under memory pressure, cuBLAS handles and their workspaces. A rerun in the same
process (or a worker that already ran the unit's shapes) reuses all of that, so a setup that picks
differently each time could still look reproducible. ``rerun_fresh`` trains the unit again in a new
interpreter (``python -m harness.experiment.rerun``: the arm's config in, the result out through a
file; the training function's output goes to the terminal as usual). On a CPU nothing is chosen by
timing or kept between runs, so the serial path reruns in its own process there (units.py).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path


def rerun_fresh(arm_cfg, seed: int, arm: str) -> dict:
    """run_one's result for (seed, arm), trained in a new process; a failed result when it dies."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # this very harness, whatever the cwd
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="harness-rerun-") as tmp:
        out = Path(tmp) / "result.pickle"
        proc = subprocess.run([sys.executable, "-m", "harness.experiment.rerun", str(out)], env=env,
                              input=pickle.dumps((arm_cfg, seed, arm, list(sys.path))), stderr=subprocess.PIPE)
        if proc.returncode == 0 and out.exists():
            return pickle.loads(out.read_bytes())
    last = (proc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
    return {"status": "failed", "error": {"type": "RerunDied", "step": None,
                                          "message": f"the fresh process exited with status {proc.returncode}: {last[0]}"}}


def main(argv: list[str]) -> int:
    arm_cfg, seed, arm, path = pickle.loads(sys.stdin.buffer.read())
    sys.path[:] = list(dict.fromkeys([*sys.path, *path]))  # the training function's modules, as the parent sees them
    from harness.experiment.runner import run_one

    result, _ = run_one(arm_cfg, seed, arm)
    Path(argv[0]).write_bytes(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
