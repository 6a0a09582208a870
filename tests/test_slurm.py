"""The SLURM path through a real cluster: sbatch, squeue, sacct, scancel, scontrol requeue (tests run
only when one is up).

Start a one-node cluster on this machine (Debian's packages, as root) with
``sudo scripts/slurm_local.sh start``; the tests find it through $SLURM_CONF or the file that
script writes (/tmp/harness-slurm/slurm.conf). Elsewhere they are skipped with that sentence.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness
from harness.results import load_tree, read_json

from .conftest import FAST, REPO, TEST_CONF, run_cli
from . import test_code_arms as code_arms
from .test_code_arms import project as code_project  # noqa: F401 - the scratch repository's fixture

CONF = os.environ.get("SLURM_CONF") or "/tmp/harness-slurm/slurm.conf"


def _up() -> bool:
    if not shutil.which("sinfo") or not Path(CONF).is_file():
        return False
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], env={**os.environ, "SLURM_CONF": CONF},
                                capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states)


# One xdist worker, one test after another: the node has this machine's CPUs, and a second test's
# jobs (two of which hold their CPU until the test ends them) would queue behind the first's.
pytestmark = [pytest.mark.services, pytest.mark.xdist_group("slurm"), pytest.mark.skipif(not _up(), reason=(
    "no SLURM cluster is up: start a one-node cluster with `sudo scripts/slurm_local.sh start` (Debian's "
    "slurmctld, slurmd, munge, and slurmdbd on MariaDB for sacct; it prints the SLURM_CONF to export), then run tests/test_slurm.py"))]

ENV = {"SLURM_CONF": CONF}
# The node of slurm_local.sh has this machine's CPUs, no GPU and no memory limit configured.
ON_THE_NODE = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1",
               "hydra.launcher.mem_gb=null", "hydra.launcher.timeout_min=10"]
ONE_THREAD = ["determinism.threads=1"]  # 1 thread in process and on the node: the same bits
# A command arm whose units are a stdlib script (no torch, no training): a job is a light process
TOY_AB = ["+experiment=command_toy", "logger=none", "progress=false", *ONE_THREAD,
          f"train.cmd=[{sys.executable},{REPO / 'tests' / 'command_scripts' / 'toy.py'}]", "+train.args.shift=0.0",
          "ab.factor=train.args.shift", "ab.arms={A: 0.0, B: 1.4}"]


def _finals(root: Path) -> dict:
    return {(r["seed"], r["arm"]): r["fingerprints"]["final"] for r in load_tree(root).results
            if r["status"] == "completed"}


def test_the_default_experiment_as_a_slurm_sweep_gives_the_in_process_bits(tmp_path):
    in_process = tmp_path / "in_process"
    done = run_cli([*FAST, *ONE_THREAD, f"hydra.run.dir={in_process}"])
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *FAST, *ONE_THREAD, "seed=0,1,2", *ON_THE_NODE, f"hydra.sweep.dir={sweep}"],
                   env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(sweep.glob(".submitit/*/*_log.out")), "no job went through sbatch"
    finals = _finals(sweep)
    assert len(finals) == 6 and finals == _finals(in_process)
    swept, here = read_json(sweep / "analysis.json"), read_json(in_process / "analysis.json")
    assert swept["comparisons"] == here["comparisons"]


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "w") as sink:
        return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, stdout=sink,
                                stderr=subprocess.STDOUT, env={**os.environ, **ENV, "PYTHONPATH": str(REPO),
                                                               "HYDRA_FULL_ERROR": "0", **env})


def _slurm(*args: str) -> str:
    return subprocess.run(list(args), env={**os.environ, **ENV}, check=True, capture_output=True, text=True).stdout


def _held_job(held: Path, proc: subprocess.Popen, log: Path) -> str:
    """The SLURM job id (ARRAY_TASK) of a unit that holds (tests/sequential_fns.py: HARNESS_TEST_HOLD_ONCE)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return json.loads(held.read_text())["slurm"]
        except (OSError, ValueError):
            time.sleep(0.2)
    raise AssertionError(log.read_text()[-3000:])


def _requeue(job: str) -> None:
    """scontrol requeue (what preemption does): SLURM ends the job and queues it again, to start after
    a delay (about 2 min here); starting it as soon as it is pending keeps the test short."""
    _slurm("scontrol", "requeue", job)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _slurm("squeue", "-h", "-j", job, "-o", "%T").strip() != "PENDING":
        time.sleep(0.2)
    _slurm("scontrol", "update", f"JobId={job}", "StartTime=now")


def test_on_slurm_a_requeued_job_runs_again_and_a_cancelled_one_is_a_failed_unit_the_rerun_resumes(tmp_path):
    """The sequential sweeper on SLURM. The job of (seed 1, arm B) holds until it is requeued: its run
    lock died with it, so its second start runs the unit again, with the in-process bits. The job of
    (seed 2, arm B) holds until scancel ends it: a named failed unit, the sweep goes on, exit 1, and
    the rerun runs it. The units are a stdlib script's (toy.py holds as sequential_fns does): no torch
    in a job."""
    in_process = tmp_path / "in_process"
    harness.run([*TOY_AB, "workers=1", "ab.seeds=[0,1,2,3,4]"], out_dir=in_process, config_dir=TEST_CONF,
                verbose=False)  # no training: seconds
    sweep, hold, log = tmp_path / "sweep", tmp_path / "hold", tmp_path / "sweep.txt"
    hold.mkdir()
    (hold / "1_1.4").touch()
    (hold / "2_1.4").touch()
    args = ["-m", "--config-dir", str(TEST_CONF), "hydra/sweeper=harness_sequential", *ON_THE_NODE, *TOY_AB, "stats.margin=null",
            "ab.sequential.min_seeds=3",
            "stats.alpha=0.25", "ab.sequential.max_seeds=4", "ab.sequential.max_failures=2",  # 6 jobs, then 2
            f"hydra.sweep.dir={sweep}"]
    proc = _start(args, {"HARNESS_TEST_HOLD_ONCE": str(hold)}, log)
    _requeue(_held_job(hold / "1_1.4.held", proc, log))
    _slurm("scancel", _held_job(hold / "2_1.4.held", proc, log))
    assert proc.wait(timeout=400) == 1, log.read_text()[-3000:]
    out = log.read_text()
    said = " ".join(out.split())
    assert "Traceback" not in out
    assert "some units failed because their job died: (seed=2, arm=B): the job died, SLURM state CANCELLED" in said, \
        said[-3000:]
    assert "run the same command again to resume" in said and "(seed=1, arm=B)" not in said
    state = read_json(sweep / "sequential.json")
    assert state["status"] == "settled", state  # the sweep went on past the lost unit
    assert [(f["seed"], f["arm"]) for f in state["failed"]] == [(2, "B")] and "LostJob" in state["failed"][0]["reason"]
    swept, here = _finals(sweep), _finals(in_process)
    assert swept[(1, "B")] == here[(1, "B")]  # the requeued job ran its unit again (the held run sleeps 600 s)
    assert all(swept[k] == here[k] for k in swept if k in here and k != (2, "B"))

    again = run_cli(args, env=ENV, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_json(sweep / "sequential.json")["status"] == "settled"
    assert {(r["seed"], r["arm"]): r["status"] for r in load_tree(sweep).results}[(2, "B")] == "completed"
    assert _finals(sweep)[(2, "B")] == here[(2, "B")]


def test_a_command_arm_as_a_slurm_sweep_gives_the_in_process_metrics(tmp_path):
    """issue 29: the unchanged script of examples/command_arm, each unit a SLURM job, reports the
    metrics it reports when the harness runs it in this process (run from the repository's root, where
    the yaml's relative command points)."""
    example = REPO / "examples" / "command_arm" / "conf"
    base = ["--config-dir", str(example), "+experiment=command_ab", "ab.seeds=[0,1,2]", *ONE_THREAD, "workers=1",
            "logger=none", "progress=false", "repro.certificate=false"]
    in_process = tmp_path / "in_process"
    done = run_cli([*base, f"hydra.run.dir={in_process}"])
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *base, "seed=0,1,2", "arm=raw,standardized", *ON_THE_NODE, f"hydra.sweep.dir={sweep}"],
                   env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(sweep.glob(".submitit/*/*_log.out")), "no job went through sbatch"

    def metrics(root):
        return {(r["seed"], r["arm"]): r["metrics"] for r in load_tree(root).results if r["status"] == "completed"}

    swept, here = metrics(sweep), metrics(in_process)
    assert len(swept) == 6 and swept == here


def test_a_40_job_slurm_sweep_appends_each_claim_to_the_ledger_exactly_once(tmp_path):
    """issue 32: a grid of 4 settings x 10 seeds, each (setting, seed) a SLURM job whose units are a
    stdlib script's (tests/command_scripts/toy.py: no training). The launcher records each grid point's
    claim once; the jobs record none; analysing the sweep again adds none. issue 29: a job's process,
    which runs the command units, never imports torch (the script sees it as its parent)."""
    from harness.ledger.store import Ledger

    ledger, sweep = tmp_path / "ledger.sqlite", tmp_path / "sweep"
    args = ["-m", "--config-dir", str(TEST_CONF), *TOY_AB, "workers=1", "repro.certificate=false", "stats.bootstrap_resamples=999",
            "data.train_limit=64,128,256,512", "seed=range(0,10)", *ON_THE_NODE, f"ledger.path={ledger}",
            f"hydra.sweep.dir={sweep}"]
    proc = run_cli(args, env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list(sweep.glob(".submitit/*/*_log.out"))) == 40, "not 40 jobs through sbatch"
    seen = [read_json(p) for p in sweep.glob("**/runs/seed=*/arm=*/seen.json")]
    assert len(seen) == 80 and not any(s["parent_torch"] for s in seen)
    grid = read_json(sweep / "grid.json")
    claims = Ledger(ledger).claims(alternatives=True)
    assert sorted(c["claim"] for c in claims) == sorted(
        f"B vs A on score at data.train_limit={n}" for n in (64, 128, 256, 512))
    assert sorted(c["folder"] for c in claims) == sorted(str((sweep / p["folder"]).resolve()) for p in grid["points"])
    # Analysing the sweep again, as its launcher did, adds none. Rerunning all 40 jobs would cost CI
    # minutes for the same check: a re-analysed sweep's claims are its launcher's, not its jobs'.
    from harness.analysis.grid import analyze_grid_dir
    analyze_grid_dir(sweep, ledger={"path": str(ledger), "url": None})
    assert len(Ledger(ledger).claims(alternatives=True)) == 4


# A train.fn unit of a tiny DDP loop (tests/nproc_fns.py), run as the ranks of a job's SLURM tasks
DDP_AB = ["+experiment=command_toy", "train.cmd=null", "train.args={}", "train.metrics_from=null",
          "train.fn=tests.nproc_fns.tiny_ddp", "logger=none", "progress=false", "workers=1", *ONE_THREAD,
          "stats.metric=score", "stats.metrics={score: min}", "+train.kwargs.lr=0.1", "ab.factor=train.kwargs.lr",
          "ab.arms={A: 0.1, B: 0.2}"]
TWO_TASKS = [*ON_THE_NODE, "hydra.launcher.tasks_per_node=2"]


def _proofs(root: Path) -> dict:
    """Each unit's fingerprints and world, by (seed, arm)."""
    return {(r["seed"], r["arm"]): ({k: r["fingerprints"].get(k) for k in ("init", "final", "data_order", "batches",
                                                                             "steps", "ranks", "replicas")},
                                    r["env"].get("world"))
            for r in load_tree(root).results if r["status"] == "completed"}


def test_a_job_of_two_slurm_tasks_runs_each_unit_as_two_ranks_with_the_bits_of_train_nproc_2(tmp_path):
    """hydra.launcher.tasks_per_node=2: one job, its 6 units each a process group of the job's 2 tasks
    (gloo). A verdict, the certificate's rerun of a 2-rank unit, proofs over both shards with the
    replicas compared, a world of 2 in the identity; and per unit the very bits train.nproc=2 gives
    on this machine with the same threads."""
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "--config-dir", str(TEST_CONF), *DDP_AB, "ab.seeds=[0,1,2]", "repro.certificate=true",
                    *TWO_TASKS, f"hydra.sweep.dir={sweep}"], env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {p.name.split("_")[1] for p in sweep.glob(".submitit/*/*_log.out")} == {"0", "1"}, "not 2 tasks in one job"
    analysis = read_json(sweep / "analysis.json")
    verdict = analysis["comparisons"]["B"]["verdict"]  # B vs A over 3 seeds
    assert analysis["comparisons"]["B"]["n_pairs"] == 3 and verdict["sentence"].startswith(verdict["code"]), verdict
    assert read_json(sweep / "certificate.json")["reproducible"] is True  # a 2-rank unit rerun, its bits compared
    proofs = _proofs(sweep)
    assert len(proofs) == 6
    for fp, world in proofs.values():
        assert world == {"world_size": 2, "backend": "gloo"}
        assert [s["rank"] for s in fp["ranks"]] == [0, 1] and [s["batches"] for s in fp["ranks"]] == [6, 6]
        assert fp["ranks"][0]["data_order"] != fp["ranks"][1]["data_order"] and fp["batches"] == 12  # both shards
        assert fp["replicas"] == {"equal": True, "ranks": 2, "says": "equal across 2 ranks"}
    assert not list(sweep.rglob("nproc_unit.pkl")) and not list(sweep.rglob("attached*.json"))

    nproc = tmp_path / "nproc"
    done = run_cli(["--config-dir", str(TEST_CONF), *DDP_AB, "ab.seeds=[0]", "train.nproc=2", "repro.certificate=false",
                    f"hydra.run.dir={nproc}"])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]  # exit 1: one seed is too few for a verdict
    here = _proofs(nproc)
    assert set(here) == {(0, "A"), (0, "B")} and all(proofs[k] == here[k] for k in here)


def test_a_rank_killed_in_a_two_task_job_fails_its_unit_named_and_the_rerun_resumes(tmp_path):
    """Rank 1 (SLURM task 1) of the job's first unit kills itself at its 3rd step (SIGKILL, once): that
    unit fails naming rank 1, no rank of it is left running, the job's next unit completes, and the
    same command again (a new job) runs the failed unit."""
    psutil = pytest.importorskip("psutil")
    sweep, once = tmp_path / "sweep", tmp_path / "once"
    once.write_text("")
    args = ["-m", "--config-dir", str(TEST_CONF), *DDP_AB, "ab.seeds=[0]", "repro.certificate=false",
            "+train.kwargs.fail_rank=1", f"+train.kwargs.fail_once={once}", *TWO_TASKS, f"hydra.sweep.dir={sweep}"]
    proc = run_cli(args, env=ENV, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    results = {r["arm"]: r for r in load_tree(sweep).results}
    assert results["B"]["status"] == "completed" and results["A"]["status"] == "failed"
    said = " ".join(results["A"]["error"]["message"].split())
    assert "a unit of 2 SLURM tasks: rank 1 failed first: it was killed by SIGKILL" in said, said
    # no rank of the sweep's units is left (the job's own processes may still be ending after its result)
    left = [(p.info["pid"], " ".join(p.info["cmdline"] or [])) for p in psutil.process_iter(["pid", "cmdline"])
            if str(sweep) in " ".join(p.info["cmdline"] or []) and "nproc_rank" in " ".join(p.info["cmdline"] or [])
            and p.status() != psutil.STATUS_ZOMBIE]
    assert left == []
    run_cli(args, env=ENV, timeout=600)  # exit 1: one seed is too few for a verdict
    again = {r["arm"]: r for r in load_tree(sweep).results}
    assert again["A"]["status"] == "completed" and again["A"]["env"]["world"]["world_size"] == 2
    assert again["B"] == results["B"]  # kept, not run again


def test_a_code_arm_sweep_on_slurm_runs_the_launchs_snapshots_with_the_in_process_bits(code_project, monkeypatch):
    """issue 50: code arms in a -m sweep whose jobs SLURM runs. The launching process reads the
    revisions once and writes their snapshots into the sweep folder; each job, a process on the node,
    runs those (the first job's edit of the live tree reaches no job), and every run's fingerprints
    are those of the same run in one invocation."""
    project = code_project
    (project / "proj" / "fit.py").write_text(code_arms._fit(code_arms.SMOOTHED, marker=2))  # WORKTREE: uncommitted
    edit = json.dumps({"path": str(project / "proj" / "fit.py"), "text": code_arms._fit(code_arms.PLAIN_LOSS, marker=3)})
    sweep = project / "multi"
    proc = run_cli(["--config-dir", str(project / "conf"), "-m", "+experiment=code_ab", *code_arms.FAST, "seed=0,1,2",
                    *ON_THE_NODE, f"hydra.sweep.dir={sweep}"], cwd=project, timeout=600,
                   env={**ENV, "PYTHONPATH": str(REPO), "CODE_ARMS_EDIT": edit})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(sweep.glob(".submitit/*/*_log.out")), "no job went through sbatch"
    swept = {(r["seed"], r["arm"]): r for r in (json.loads(p.read_text()) for p in sweep.rglob("result.json"))}
    assert {k: r["metrics"]["marker"] for k, r in swept.items()} == {(s, a): {"A": 1, "B": 2}[a]
                                                                       for s in (0, 1, 2) for a in "AB"}
    assert (project / "proj" / "fit.py").read_text() == code_arms._fit(code_arms.PLAIN_LOSS, marker=3)  # edited
    assert {r["code"]["code_arm"]["folder"] for r in swept.values()} <= {
        f"code/{p.name}" for p in (sweep / "code").iterdir() if p.is_dir()}

    (project / "proj" / "fit.py").write_text(code_arms._fit(code_arms.SMOOTHED, marker=2))  # as the sweep saw it
    single = {(r["seed"], r["arm"]): r for r in code_arms._run(project).results}
    assert {k: r["fingerprints"] for k, r in swept.items()} == {k: r["fingerprints"] for k, r in single.items()}


def test_the_sequential_sweeper_on_two_task_jobs_runs_every_look_as_two_ranks(tmp_path):
    """issue 51: the harness's sequential sweeper launching jobs of 2 SLURM tasks: each look's units
    run as process groups of the job's 2 ranks, every unit's proofs cover both shards with the replicas
    compared, and the sweep settles."""
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", "--config-dir", str(TEST_CONF), "hydra/sweeper=harness_sequential", *DDP_AB,
                    "repro.certificate=false", "stats.margin=null", "ab.sequential.min_seeds=3",
                    "ab.sequential.max_seeds=4", "stats.alpha=0.25", *TWO_TASKS, f"hydra.sweep.dir={sweep}"],
                   env=ENV, timeout=900)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    state = read_json(sweep / "sequential.json")
    assert state["status"] == "settled" and not state["failed"], state
    proofs = _proofs(sweep)
    assert len(proofs) >= 6 and {s for s, _ in proofs} >= {0, 1, 2}  # the first look: 3 seeds x 2 arms
    for fp, world in proofs.values():
        assert world == {"world_size": 2, "backend": "gloo"}
        assert [s["batches"] for s in fp["ranks"]] == [6, 6] and fp["batches"] == 12
        assert fp["replicas"] == {"equal": True, "ranks": 2, "says": "equal across 2 ranks"}
    _two_tasks_a_job(sweep)


def _two_tasks_a_job(sweep: Path) -> None:
    """Every job of the sweep ran 2 SLURM tasks (an array job's logs: JOBID_INDEX_TASK_log.out)."""
    tasks: dict = {}
    for p in sweep.glob(".submitit/*/*_log.out"):
        tasks.setdefault(p.name.rsplit("_", 2)[0], set()).add(p.name.rsplit("_", 2)[1])
    assert tasks and all(t == {"0", "1"} for t in tasks.values()), tasks


def test_the_race_sweeper_on_two_task_jobs_runs_every_look_as_two_ranks(tmp_path):
    """issue 51: the race sweeper (three learning rates) launching jobs of 2 SLURM tasks: every unit of
    every look a process group of the job's 2 ranks, proofs over both shards, and the race settles."""
    sweep = tmp_path / "sweep"
    plain = [o for o in DDP_AB if not o.startswith("ab.")]
    proc = run_cli(["-m", "--config-dir", str(TEST_CONF), "hydra/sweeper=harness_race", *plain,
                    "train.kwargs.lr=0.1,0.2,0.3", "repro.certificate=false", "stats.margin=0.01",
                    "ab.race.min_seeds=3", "ab.race.seeds_per_look=1", "ab.race.max_seeds=4", *TWO_TASKS,
                    f"hydra.sweep.dir={sweep}"], env=ENV, timeout=900)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    race = read_json(sweep / "race.json")
    assert race["status"] in ("settled", "max_seeds") and not race.get("failed"), race  # ended, no unit lost
    proofs = _proofs(sweep)
    assert len(proofs) >= 9  # the first look: 3 seeds x 3 learning rates
    for fp, world in proofs.values():
        assert world == {"world_size": 2, "backend": "gloo"}
        assert [s["batches"] for s in fp["ranks"]] == [6, 6] and fp["replicas"]["equal"] is True
    _two_tasks_a_job(sweep)
