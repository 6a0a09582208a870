"""Resume trusts only sound results; two processes never train the same run; a config changed on
fewer seeds sets the old seeds aside (issue 13, items 4, 6 and 10, on the experiment's side)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import harness
import pytest
from harness.results import load_tree, read_json, write_json

from .conftest import FAST, REPO

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

SMALL = [*FAST, "train.max_steps=10", "data.train_limit=128", "repro.certificate=false"]


def test_resume_reruns_a_result_that_does_not_check_out_and_says_why(tmp_path):
    out = tmp_path / "out"
    harness.run(SMALL, out_dir=out, verbose=False)
    runs = out / "runs"
    # a copy of seed 2's result put in seed 1's folder, and a metric damaged into a string
    shutil.copy(runs / "seed=2" / "arm=A" / "result.json", runs / "seed=1" / "arm=A" / "result.json")
    damaged = read_json(runs / "seed=0" / "arm=B" / "result.json")
    damaged["metrics"]["test_accuracy"] = "oops"
    write_json(runs / "seed=0" / "arm=B" / "result.json", damaged)

    lines: list[str] = []
    from harness.experiment.execute import execute
    from harness.config import compose

    execute(compose(SMALL), out, say=lines.append, show_table=False)
    text = "\n".join(lines)
    assert "seed=1 arm=A: rerun, the existing result does not check out (it holds seed 2 arm A, not this " \
           "folder's seed 1 arm A)" in text
    assert "seed=0 arm=B: rerun, the existing result does not check out (metric test_accuracy is 'oops', " \
           "not a finite number)" in text
    assert text.count("skipped, completed with the same config and code") == 4
    fixed = {(r["seed"], r["arm"]): r for r in load_tree(out).results}
    assert fixed[(1, "A")]["seed"] == 1 and isinstance(fixed[(0, "B")]["metrics"]["test_accuracy"], float)
    assert len(list(runs.rglob("superseded/result.*.json"))) == 2  # the bad files are kept aside


def test_a_config_changed_on_fewer_seeds_sets_the_old_seeds_aside(tmp_path):
    out = tmp_path / "out"
    harness.run([*SMALL, "ab.seeds=[0,1,2,3,4,5]"], out_dir=out, verbose=False)
    lines: list[str] = []
    from harness.experiment.execute import execute
    from harness.config import compose

    done = execute(compose([*SMALL, "ab.seeds=[0,1,2]", "optim.lr=0.2"]), out, say=lines.append, show_table=False)
    assert done.analysis is not None, done.analysis_error  # analysed, not blocked
    assert [c["n_pairs"] for c in done.analysis["comparisons"].values()] == [3]
    text = "\n".join(lines)
    for seed in (3, 4, 5):
        for arm in "AB":
            assert f"seed={seed} arm={arm}: set aside (made with another configuration" in text
    current = load_tree(out).results
    assert sorted({r["seed"] for r in current}) == [0, 1, 2]
    assert len(list((out / "runs").rglob("superseded/result.*.json"))) == 6 + 6  # nothing lost


def test_two_processes_in_one_folder_never_train_the_same_run(tmp_path):
    out = tmp_path / "out"
    env = {**{k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "harness", *SMALL, "train.max_steps=60", f"hydra.run.dir={out}"]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs[0][1][-2000:] + outputs[1][1][-2000:]
    text = "".join(o + e for o, e in outputs)
    trained = [line for line in text.splitlines() if " steps in " in line and "seed=" in line]
    assert len(trained) == 6, "\n".join(trained)  # each (seed, arm) trained once, by one of them
    assert not list((out / "runs").rglob("superseded"))
