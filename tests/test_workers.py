"""Units side by side in worker processes (issue 18, item 2): the same bits and analysis as the serial
path; a worker that dies is a failed result naming its (seed, arm); Ctrl-C and a killed parent leave
no worker behind; a resume after SIGKILL is exact; a full disk is named as on the serial path;
sequential mode runs its batches on the workers. The only tests that start worker pools (FAST keeps
every other test serial, in one process: workers=1)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results import load_tree, read_json
from harness.training.threads import Load, choose_threads
from tests.conftest import FAST, FAST_CLI_GROUP, REPO, run_cli

REAL = [*FAST, "determinism.threads=1"]  # real training, 3 seeds x 2 arms, 30 steps
# no training (tests/sequential_fns.py): the process behaviour alone, in a fraction of a second per unit
SYN = ["+experiment=loss_ab", "logger=none", "progress=false", "determinism.threads=1", "data.train_limit=64",
       "ab.seeds=[0,1,2]", "train.fn=tests.sequential_fns.paired_metric", "+train.kwargs.shift=0.0",
       "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=1.6", "repro.certificate=false"]
KILLS_ITSELF = ["train.fn=tests.workers_fns.killed_at_seed", "+train.kwargs.kill_seed=1", "+train.kwargs.kill_shift=1.6"]
QUIET, ONE_BUSY = Load(2, 0, 0.1, 0), Load(2, 1, 1.1, 1)
WAIT_S = 120  # how long a test waits for a process to reach a state (a bound, not a measurement)


def _finals(folder: Path) -> dict:
    return {(r["seed"], r["arm"]): (r["status"], r["fingerprints"].get("final"))
            for r in load_tree(folder).results}


def _until(condition, what: str):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def _workers_of(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    out = []
    for child in map(int, children):
        try:
            if b"harness.experiment.parallel.workers" in Path(f"/proc/{child}/cmdline").read_bytes():
                out.append(child)
        except OSError:
            pass
    return out


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _start(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# -- the rule ---------------------------------------------------------------------------------------


def test_auto_fills_the_free_cores_with_one_thread_units_and_one_unit_gets_every_core():
    side = choose_threads("auto", QUIET, units=20)
    assert (side.threads, side.workers) == (1, 2)  # 2 units x 1 thread beat 1 unit x 2 threads
    assert (choose_threads("auto", QUIET, units=1).threads, choose_threads("auto", QUIET, units=1).workers) == (2, 1)
    assert choose_threads("auto", ONE_BUSY, units=20).workers == 1  # one free core: serial, in process
    # a job that just ended keeps the 1-minute load average up for a while: 1-thread workers follow the
    # cores free now (no barrier to wait at); pinned threads keep the cautious count
    just_ended = Load(2, 1, 1.3, 0)
    assert (choose_threads("auto", just_ended, units=20).threads, choose_threads("auto", just_ended, units=20).workers) == (1, 2)
    assert choose_threads(2, just_ended, units=20).workers == 1
    big = choose_threads("auto", Load(64, 4), units=20)
    assert (big.threads, big.workers) == (3, 20)  # the free cores shared out among the units
    assert choose_threads("auto", QUIET, units=20, workers=1).threads == 2  # serial: every core to the unit
    assert choose_threads("auto", QUIET, in_sweep=True, units=20).workers == 1  # a sweep's job runs one unit
    assert choose_threads("auto", QUIET, units=20, recorded=2).workers == 1  # the folder's count is kept
    assert choose_threads(1, QUIET, units=4, workers=8).workers == 4  # never more workers than units
    assert choose_threads(2, QUIET, units=4, workers=2).warning is not None  # 4 pinned threads on 2 cores
    gpu = choose_threads("auto", QUIET, units=20, gpu=True)  # one unit first: its measured memory decides
    assert (gpu.threads, gpu.workers, gpu.gpu_cap) == (1, 1, 2)  # the cores cap how far it may widen
    assert choose_threads(1, QUIET, units=20, workers=4, gpu=True).workers == 4  # asked for


def test_a_bad_workers_value_is_refused_naming_the_key_and_what_is_allowed(tmp_path):
    proc = run_cli([*FAST, "workers=0", f"hydra.run.dir={tmp_path}"])
    assert proc.returncode == 2
    assert "workers=0 is not allowed" in proc.stderr and "'auto'" in proc.stderr and "integer >= 1" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- the same bits --------------------------------------------------------------------------------


@pytest.mark.slow
@FAST_CLI_GROUP
def test_side_by_side_gives_the_serial_runs_bits_and_the_same_analysis(tmp_path, fast_cli_run):
    # the serial run: REAL with workers=1, i.e. FAST, as conftest's fast_cli_run made it (shared with
    # test_outputs_cli.py: the same command, run once)
    side = tmp_path / "side"
    a = fast_cli_run.proc
    b = run_cli([*REAL, "workers=2", f"hydra.run.dir={side}"])
    assert a.returncode == 0 and b.returncode == 0, (a.stderr[-2000:], b.stderr[-2000:])
    serial = fast_cli_run.folder
    assert "workers=2 -> 2 (6 units, 2 side by side x 1 thread(s))" in (side / "harness.log").read_text()
    assert "side by side" not in (serial / "harness.log").read_text()
    finals = _finals(serial)
    assert len(finals) == 6 and all(status == "completed" for status, _ in finals.values())
    assert _finals(side) == finals
    assert read_json(side / "analysis.json") == read_json(serial / "analysis.json")
    assert read_json(side / "certificate.json") == read_json(serial / "certificate.json")


@pytest.mark.slow
def test_a_pairing_violation_is_refused_side_by_side_as_in_serial(tmp_path):
    unpaired = [*SYN, "train.fn=tests.workers_fns.unpaired"]
    a = run_cli([*unpaired, "workers=1", f"hydra.run.dir={tmp_path / 'serial'}"], cwd=tmp_path)
    b = run_cli([*unpaired, "workers=2", f"hydra.run.dir={tmp_path / 'side'}"], cwd=tmp_path)
    assert a.returncode == b.returncode == 2, (a.stderr[-2000:], b.stderr[-2000:])
    assert "seed 0: arms A and B have different init fingerprints" in b.stderr
    assert a.stderr.split("harness: error:")[1].split(" (")[0] == b.stderr.split("harness: error:")[1].split(" (")[0]
    assert "Traceback" not in b.stderr
    for proc, folder in ((a, tmp_path / "serial"), (b, tmp_path / "side")):  # kept, and named
        assert list(folder.glob("runs/seed=0/arm=*/result.json")), proc.stderr[-2000:]
        assert f"written so far are in {folder}" in proc.stderr


# -- a worker that dies -----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_unit_whose_worker_is_killed_is_a_failed_result_naming_it_not_a_traceback(tmp_path):
    proc = run_cli([*SYN, *KILLS_ITSELF, "ab.seeds=[0,1,2,3]", "workers=2", f"hydra.run.dir={tmp_path}"])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lost = read_json(tmp_path / "runs/seed=1/arm=B/result.json")
    assert lost["status"] == "failed" and lost["error"]["type"] == "WorkerLost"
    assert "seed=1 arm=B ended by signal SIGKILL" in lost["error"]["message"]
    assert "seed=1 arm=B: FAILED (WorkerLost" in (tmp_path / "harness.log").read_text()
    statuses = {k: s for k, (s, _) in _finals(tmp_path).items()}
    assert statuses == {(0, "A"): "completed", (0, "B"): "completed", (1, "A"): "completed",
                        (1, "B"): "failed", (2, "A"): "completed", (2, "B"): "completed",
                        (3, "A"): "completed", (3, "B"): "completed"}
    excluded = read_json(tmp_path / "analysis.json")["excluded"]  # the analysis names what it left out
    assert {"seed": 1, "arm": "B", "reason": f"failed: WorkerLost: {lost['error']['message']}"} in excluded


# -- the parent interrupted or killed -------------------------------------------------------------


def _held_run(tmp_path: Path, folder: Path) -> tuple[subprocess.Popen, list[int]]:
    """The side-by-side run with seed 0 done and both workers holding a seed >= 1 unit."""
    proc = _start([*SYN, "workers=2", f"hydra.run.dir={folder}"], tmp_path, env={"HARNESS_TEST_HOLD_FROM_SEED": "1"})
    _until(lambda: len(list(folder.rglob("result.json"))) == 2, "seed 0's two results")
    _until(lambda: len(_workers_of(proc.pid)) == 2, "two workers")
    workers = _workers_of(proc.pid)
    _until(lambda: len(list((folder / "runs").glob("seed=1/arm=*/.lock"))) == 2, "seed 1 held in both workers")
    return proc, workers


@pytest.mark.slow
def test_ctrl_c_ends_every_worker_and_names_what_is_safe(tmp_path):
    folder = tmp_path / "out"
    proc, workers = _held_run(tmp_path, folder)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    _until(lambda: all(_gone(w) for w in workers), "the workers to end")
    assert len(list(folder.rglob("result.json"))) == 2  # the held units left nothing


@pytest.mark.slow
def test_resume_after_sigkill_of_the_parent_is_exact_and_no_worker_is_left(tmp_path):
    import harness

    # the serial reference in this process (the API runs what the CLI runs), not a process of its own
    reference = harness.run([*SYN, "workers=1"], out_dir=tmp_path / "reference", verbose=False)
    assert reference.analysis is not None and {r["status"] for r in reference.results} == {"completed"}
    folder = tmp_path / "out"
    proc, workers = _held_run(tmp_path, folder)
    proc.kill()
    proc.communicate(timeout=WAIT_S)
    _until(lambda: all(_gone(w) for w in workers), "the workers to die with their parent")
    again = run_cli([*SYN, "workers=2", f"hydra.run.dir={folder}"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (folder / "harness.log").read_text().count("skipped, completed with the same config and code") == 2
    assert _finals(folder) == _finals(tmp_path / "reference")
    assert read_json(folder / "analysis.json") == read_json(tmp_path / "reference" / "analysis.json")


# -- a full disk --------------------------------------------------------------------------------


def _small_files():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # result.json (about 5 KB) cannot be written


@pytest.mark.slow
def test_a_write_that_fails_in_a_worker_is_named_as_on_the_serial_path(tmp_path):
    """A file-size limit (EFBIG, as ENOSPC would: an OSError from the atomic writer) hits the
    workers' result files; the parent names the file, says nothing completed, and exits 1."""
    full = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run([sys.executable, "-m", "harness", *SYN, "workers=2", f"hydra.run.dir={tmp_path / 'out'}",
                           "hydra.job_logging.root.handlers=[console]", "hydra.output_subdir=null"],
                          cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300, preexec_fn=_small_files)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "/runs/seed=0/arm=" in proc.stderr and "result.json: File too large" in proc.stderr
    assert "The 0 completed result(s)" in proc.stderr and "run the same command again to resume" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list((tmp_path / "out").rglob("result.json"))


# -- sequential mode ------------------------------------------------------------------------------


@pytest.mark.slow
def test_sequential_mode_runs_its_batches_on_the_workers_with_the_same_looks(tmp_path):
    seq = [*SYN, "ab.seeds=[0,1,2,3,4,5]", "+train.kwargs.sd=1.0", "ab.sequential.enabled=true",
           "ab.sequential.max_seeds=12", "stats.margin=null"]
    a = run_cli([*seq, "workers=1", f"hydra.run.dir={tmp_path / 'serial'}"], cwd=tmp_path)
    b = run_cli([*seq, "workers=2", f"hydra.run.dir={tmp_path / 'side'}"], cwd=tmp_path)
    assert a.returncode == b.returncode and a.returncode in (0, 1), (a.stderr[-2000:], b.stderr[-2000:])
    assert "side by side" in (tmp_path / "side" / "harness.log").read_text()
    looks = [json.dumps(read_json(tmp_path / f / "sequential.json"), sort_keys=True) for f in ("serial", "side")]
    assert looks[0] == looks[1]
    assert _finals(tmp_path / "side") == _finals(tmp_path / "serial")


# -- the GPU check's side-by-side part ------------------------------------------------------------


@pytest.mark.slow
def test_the_gpu_side_by_side_check_runs_without_hydra_or_wandb():
    """scripts/gpu_check.sh runs on a machine with torch alone; its side-by-side part too."""
    code = ("import sys; sys.path.insert(0, 'scripts'); import gpu_side_by_side;"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('hydra', 'omegaconf', 'wandb'));"
            "print(bad); sys.exit(1 if bad else 0)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"imported: {proc.stdout}{proc.stderr}"
    assert "gpu_side_by_side.py --device cuda --units 20" in (REPO / "scripts/gpu_check.sh").read_text()
