"""Sequential mode speaks once (issue 17, item 4): a run whose config or code changes between
batches stops without a decision (a sweep whose analysis fails exits non-zero: tests/test_sweeps.py,
test_analyze_refuses_below_three_pairs_and_names_what_is_missing).

The runs use the training functions of tests/sequential_fns.py (no training: a metric that is a fixed
function of (seed, arm)) with a design small enough for a handful of runs: two arms, B 2.0 points
above A, alpha 0.2 with a margin, looks at 3 and 5 seeds (the sweep on a process per job: 3 and 4).
Undisturbed, B is "continue" at 3 seeds; every test below changes something after the first look
(from seed 3 on).
"""

from __future__ import annotations

import os
import shutil

import pytest
from harness.results import load_tree, read_json

from .conftest import REPO, run_cli

SMALL = [
    "+experiment=loss_ab", "workers=1", "logger=none", "progress=false", "data.train_limit=64", "determinism.threads=1",
    "repro.certificate=false", "+train.kwargs.shift=0.0", "+train.kwargs.sd=1.0",
    "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=2.0",
    "stats.margin=0.01", "ab.sequential.alpha=0.2", "ab.sequential.min_seeds=3",
    "ab.sequential.equivalence=false", "ab.sequential.futility=0",
]
LOOKS_3_5 = [*SMALL, "ab.sequential.max_seeds=5"]
# looks at 3 and 4 seeds: the second look's batch is seed 3 alone (2 jobs, a process each), which is all
# that a change between batches needs
LOOKS_3_4 = [*SMALL, "ab.sequential.max_seeds=4", "ab.sequential.seeds_per_look=1"]


def _identities(root):
    """(arm, config_hash, code_version) -> the seeds of the results that record it."""
    out: dict = {}
    for r in load_tree(root).results:
        out.setdefault((r["arm"], r["config_hash"], r["code_version"]), []).append(r["seed"])
    return {k: sorted(v) for k, v in out.items()}


def _each_identity_named(root, err):
    """Each identity's result files are named in the message (a few, then how many more)."""
    files: dict = {}
    for r in load_tree(root).results:
        files.setdefault((r["arm"], r["config_hash"], r["code_version"]), []).append(
            os.path.relpath(r["_path"], root))
    for key, paths in files.items():
        assert any(p in err for p in paths), key
        assert f"config_hash {key[1]}, code_version {key[2]}" in err


def _stopped_without_a_decision(root):
    seq = read_json(root / "sequential.json")
    assert seq["status"] == "stopped" and "changed while this sequential run was going on" in seq["stopped"]
    # the looks as they stood before the change: the first look, nothing settled
    assert [x["decision"] for x in seq["arms"]["B"]["looks"]] == ["continue"]
    assert seq["arms"]["B"]["decision"] == "continue" and seq["arms"]["B"]["seeds"] == [0, 1, 2]
    assert not (root / "analysis.json").exists()
    return seq


@pytest.mark.slow
def test_sweeper_on_a_process_per_job_launcher_stops_when_the_code_changes_between_batches(tmp_path):
    """The measured defect: the sequential sweeper on hydra/launcher=submitit_local (a new process per
    job, as on SLURM), the user's training file edited after the first batch; the sweep exited 0 with
    "settled, better", decided on old-code and new-code runs, and only logged "sweep analysis ...
    failed: 2 different identities".

    The edit, deterministically: the training function lives in a copy of tests/sequential_fns.py in
    tmp_path (on PYTHONPATH, named by train.fn); when it runs seed 3 (the first seed after the first
    look) it appends a comment to its own source file, once. With hydra.sweeper.max_batch_size=1 the
    jobs run one at a time, each in a new process that imports the file again: seeds 0-2 of both arms
    and seed 3 of arm A record the old code (A's seed 3 job computed its identity before editing),
    every later job the new code. The sweep must stop after that batch, exit 1, name the edited file
    and the result files of each identity, and record no decision on them.

    The first look's six runs (seeds 0-2, before any edit) are made by a plain sweep of the same
    overrides on the basic launcher, in one process, and their job folders copied into the sequential
    sweep's folder, which resumes from them (it launches only what has no result): the same runs and
    identity as its own jobs would record, without a new process per job for them (about 4 s each).
    """
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(REPO / "tests" / "sequential_fns.py", code / "editable_fns.py")
    env = {"PYTHONPATH": f"{code}{os.pathsep}{REPO}"}
    first = tmp_path / "first_look"
    made = run_cli(["-m", *LOOKS_3_4, "train.fn=editable_fns.edits_a_file", "+train.kwargs.edit_from_seed=3",
                    "seed=0,1,2", "arm=A,B", f"hydra.sweep.dir={first}"], env=env)
    assert made.returncode == 0, made.stderr[-3000:]
    sweep = tmp_path / "sweep"
    for job in first.glob("seed=*,arm=*"):
        shutil.copytree(job, sweep / job.name)
    assert len(list(sweep.rglob("result.json"))) == 6
    proc = run_cli(["-m", "hydra/sweeper=harness_sequential", "hydra/launcher=submitit_local",
                    "hydra.sweeper.max_batch_size=1", *LOOKS_3_4, "train.fn=editable_fns.edits_a_file",
                    "+train.kwargs.edit_from_seed=3", f"hydra.sweep.dir={sweep}"], env=env, timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]
    err = proc.stderr
    said = " ".join((proc.stdout + err).split())
    # resumed: the sweeper launched only the second look's jobs, each in a process of its own
    assert "batch of 2 job(s), seeds 3" in said and "batch of 6" not in said
    assert "sequential sweep stopped: the config or code changed" in err and "Traceback" not in err
    assert "the code changed: edited: editable_fns.py (on disk since the run started, in the results)" in err
    assert "record the earlier identity (arm A seeds 3) may have been made with the changed files" in err
    identities = _identities(sweep)
    assert len({k[2] for k in identities}) == 2  # old and new code, as the jobs recorded it
    old = min(identities.items(), key=lambda kv: kv[1][0])[0][2]
    assert {(k[0], tuple(v)) for k, v in identities.items() if k[2] == old} == {("A", (0, 1, 2, 3)), ("B", (0, 1, 2))}
    _each_identity_named(sweep, err)
    seq = _stopped_without_a_decision(sweep)
    assert "edited: editable_fns.py" in seq["stopped"]
    assert "settled" not in err


@pytest.mark.slow
def test_in_process_run_stops_when_a_code_paths_file_changes(tmp_path):
    """In one process the code is read once, so an edited training module changes nothing that
    runs; a file the function reads, listed in repro.code_paths, does. The function edits it from
    seed 3 on: every result records the identity computed at the start (one per process), so only
    the runner's look at the files on disk between batches can see it."""
    data = tmp_path / "prep.txt"
    data.write_text("version 1\n")
    out = tmp_path / "run"
    proc = run_cli([*LOOKS_3_5, "ab.sequential.enabled=true", "train.fn=tests.sequential_fns.edits_a_file",
                    "+train.kwargs.edit_from_seed=3", f"+train.kwargs.edit_path={data}",
                    f"repro.code_paths=[{data}]", f"hydra.run.dir={out}"])
    assert proc.returncode == 1, proc.stderr[-3000:]
    err = proc.stderr
    assert "sequential run stopped: the config or code changed" in err and "Traceback" not in err
    assert f"the code changed: edited: {data}:prep.txt (on disk since the run started)" in err
    assert "sequential decision" not in proc.stdout + err
    # every result records the identity of the start; those since the first look are named as suspect
    assert len(_identities(out)) == 2
    assert ("The runs since the last look that record the earlier identity (arm A seeds 3-4, arm B seeds 3-4) "
            "may have been made with the changed files") in err
    seq = _stopped_without_a_decision(out)
    assert f"edited: {data}:prep.txt" in seq["stopped"]


@pytest.mark.slow
def test_in_process_run_stops_when_the_config_changes(tmp_path):
    """A config-side change in one process: train.kwargs.tag is interpolated from an environment
    variable that the training function sets at seed 3, so the runs of seed 4 resolve another config
    (config_hash) than those before. The results check names the key and each identity's files."""
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_TEST_TAG"}
    proc = run_cli([*LOOKS_3_5, "ab.sequential.enabled=true", "train.fn=tests.sequential_fns.sets_env",
                    "+train.kwargs.env_from_seed=3", "+train.kwargs.env_var=HARNESS_TEST_TAG",
                    "+train.kwargs.tag=${oc.env:HARNESS_TEST_TAG,start}", f"hydra.run.dir={out}"], env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    err = proc.stderr
    assert "the config changed: train.kwargs.tag: start -> changed (in the results)" in err
    assert "may have been made with the changed files" not in err  # nothing changed on disk
    identities = _identities(out)
    assert sorted(tuple(v) for v in identities.values()) == [(0, 1, 2, 3), (0, 1, 2, 3), (4,), (4,)]
    _each_identity_named(out, err)
    _stopped_without_a_decision(out)


def test_arms_whose_code_differs_where_it_was_shared_stop_the_run(tmp_path):
    """Each arm's results have one identity, but B's record other code than A's (e.g. every B job
    of the first batch started after an edit): the arms' code was one at the start, so no look. And
    after a look, an arm whose results all have another identity than at that look is named too."""
    from harness.experiment.arms import arm_configs
    from harness.experiment.adaptive.sequential import IdentityWatch

    from .conftest import compose_cfg

    cfg = compose_cfg([*LOOKS_3_5, "ab.sequential.enabled=true", "train.fn=tests.sequential_fns.paired_metric"])
    watch = IdentityWatch(arm_configs(cfg))
    (ha, code), (hb, _) = watch.expected["A"], watch.expected["B"]

    def result(seed, arm, h, version):
        return {"seed": seed, "arm": arm, "config_hash": h, "code_version": version,
                "_path": str(tmp_path / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json")}

    same = [result(s, "A", ha, code) for s in range(3)] + [result(s, "B", hb, code) for s in range(3)]
    other = [result(s, "A", ha, code) for s in range(3)] + [result(s, "B", hb, code + "x") for s in range(3)]
    message = watch.problem(other, tmp_path)
    assert ("the arms' results record different code, where the arms' code was the same at the start: arm B "
            f"against arm A, the code changed (now {code}x)") in message  # (these dicts hold no code block)
    assert f"arm B seeds 0-2 (another identity: config_hash {hb}, code_version {code}x: runs/seed=0/arm=B" in message
    assert [r["arm"] for r in watch.consistent(other)] == ["A"] * 3  # B's results are not of its identity

    watch = IdentityWatch(arm_configs(cfg))
    assert watch.problem(same, tmp_path) is None  # a look: B is held to its identity from here on
    message = watch.problem(same[:3] + other[3:], tmp_path)
    assert f"arm B's results have another identity than at the earlier looks (config_hash {hb}, code_version {code})" \
        in message
