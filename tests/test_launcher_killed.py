"""A torchrun launcher killed with SIGKILL (the OOM killer's usual pick: it is not the rank that
allocates) while the harness lives: the unit fails saying how the command ended, none of the ranks
it started outlives it (black-box ranks, in sessions of their own, without harness.attach()'s death
signal), and running the same command again reruns the unit."""

from __future__ import annotations

import os
import signal

import pytest

from harness.results import read_json

from .conftest import REPO
from .test_process_tree import WAIT_S, _alive, _end_leftovers, _of_run, _pid_in, _start, _until

SCRIPT = REPO / "tests" / "command_scripts" / "hang_ranks.py"


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


@pytest.mark.slow
def test_a_killed_launcher_leaves_no_rank_and_the_unit_reruns(tmp_path):
    out, hang = tmp_path / "run", tmp_path / "hang"
    hang.write_text("")
    args = ["+experiment=command_toy", "logger=none", "progress=false", "determinism.threads=1", "workers=1",
            f"train.cmd='python -m torch.distributed.run --standalone --nproc_per_node=2 {SCRIPT}'",
            f"+train.args.hang_while={hang}", "seed=0", "arm=A"]
    proc = _start(args, out)
    try:
        unit = out / "runs" / "seed=0" / "arm=A"
        _until(lambda: all(_pid_in(unit / f"rank-{r}.pid") for r in (0, 1)), "both ranks to run")
        ranks = [_pid_in(unit / f"rank-{r}.pid") for r in (0, 1)]
        launcher = _parent(ranks[0])
        assert "torch.distributed.run" in _cmdline(launcher)
        os.kill(launcher, signal.SIGKILL)
        _, err = proc.communicate(timeout=WAIT_S)  # the harness goes on: the unit failed
        failed = read_json(unit / "result.json")
        assert failed["status"] == "failed", failed
        assert "the command was killed by SIGKILL from outside the script" in failed["error"]["message"]
        _until(lambda: not any(_alive(p) for p in ranks), "both ranks to end")
        assert not _of_run(out)
        hang.unlink()
        rerun = _start(args, out)
        _, err = rerun.communicate(timeout=WAIT_S)
        assert read_json(unit / "result.json")["status"] == "completed", err[-3000:]
    finally:
        proc.kill()
        _end_leftovers(out)
