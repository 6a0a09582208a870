"""The determinism scripts run on a CPU at toy sizes and say what they found, in files and words.

They are run as a user runs them (python scripts/..., in a subprocess, no PYTHONPATH), so a broken
import path or a crash in the report code fails here, not on a rented GPU.
"""

from __future__ import annotations

import importlib
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
# One thread: on 2 shared cores a second OpenMP thread can wait for a busy core for milliseconds.
TOY = ["--device", "cpu", "--model", "small_cnn", "--channels", "1", "--image-size", "8", "--batch", "32",
       "--threads", "1"]


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the script must find harness itself
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.bench
def test_bench_determinism_writes_the_table(tmp_path):
    proc = run_script("bench_determinism.py", *TOY, "--steps", "3", "--warmup", "1", "--repeats", "2",
                      "--profile-steps", "2", "--out", str(tmp_path))

    md = (tmp_path / "determinism_cost.md").read_text()
    result = json.loads((tmp_path / "determinism_cost.json").read_text())
    labels = [
        "default, cudnn.benchmark on",
        "default, cudnn.benchmark off",
        "deterministic, fill_uninitialized_memory on",
        "deterministic, fill_uninitialized_memory off",
    ]
    for label in labels:
        assert f"| {label} |" in md
        assert f"| {label} |" in proc.stdout
    assert "| mode | fp32 ms/step | fp32 overhead | bf16 ms/step | bf16 overhead |" in md

    head = result["header"]
    for key in ("date", "device_name", "torch", "threads", "command"):
        assert head[key], key
    assert head["device"] == "cpu" and head["threads"] == 1 and head["baseline"] == "benchmark"

    cells = result["cells"]
    assert {(c["mode"], c["precision"]) for c in cells} == {
        (m, p) for m in ("benchmark", "default", "deterministic", "deterministic_nofill") for p in ("fp32", "bf16")
    }
    for c in cells:
        assert c["n_steps"] == 2 * 3  # repeats x timed steps, warm-up excluded
        assert c["ms_per_step"] > 0
        assert len(c["round_overhead_pct"]) == 2
        if c["mode"] == "benchmark":
            assert c["overhead_pct"] == 0.0

    # Filling is an extra aten::fill_ per fresh tensor: the profiler must see more of them with it on.
    assert "Filling uninitialized memory, attributed by torch.profiler" in md
    for precision in ("fp32", "bf16"):
        fill = result["fill_profile"][precision]
        assert fill["fill_on"]["calls_per_step"] > fill["fill_off"]["calls_per_step"]
        assert fill["cost_ms_per_step"] == pytest.approx(fill["fill_on"]["ms_per_step"] - fill["fill_off"]["ms_per_step"])


def import_script(name: str):
    """A script as a module, for its pure functions."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS))


def test_bench_summary_is_the_ratio_of_medians():
    bench_determinism = import_script("bench_determinism")
    times = {
        ("benchmark", "fp32"): [[10.0, 10.0, 30.0], [20.0, 20.0, 20.0]],
        ("deterministic", "fp32"): [[12.0, 12.0, 12.0], [22.0, 22.0, 100.0]],
    }
    cells = bench_determinism.summarize(times, ["benchmark", "deterministic"], ["fp32"])
    det = cells[1]
    # pooled medians 20 and 17 (a median is robust to the one 100 ms step)
    assert det["ms_per_step"] == 17.0
    assert det["overhead_pct"] == pytest.approx(-15.0)
    # per round: 12/10 and 22/20
    assert det["round_overhead_pct"] == pytest.approx([20.0, 10.0])


@pytest.mark.slow
@pytest.mark.solo  # trains with 2 threads: the count is the point
def test_replicate_divergence_finds_the_thread_pair_and_not_the_deterministic_one(tmp_path):
    proc = run_script("replicate_divergence.py", *TOY, "--steps", "3", "--threads-b", "2", "--out", str(tmp_path))

    result = json.loads((tmp_path / "divergence.json").read_text())
    pairs = {p["name"]: p for p in result["pairs"]}
    assert set(pairs) == {"default", "deterministic", "deterministic_nofill", "threads"}
    for name in ("deterministic", "deterministic_nofill"):
        assert pairs[name]["identical"] is True
        assert pairs[name]["first_divergent_step"] is None
        assert pairs[name]["final_max_abs_dw"] == 0.0
        assert pairs[name]["final_fingerprint_a"] == pairs[name]["final_fingerprint_b"]

    # Filling uninitialized memory must not change the bits of a program that never reads it.
    assert result["fill_check"]["changes_bits"] is False

    threads = pairs["threads"]
    assert (threads["settings_a"]["threads"], threads["settings_b"]["threads"]) == (1, 2)
    assert threads["identical"] is False
    assert threads["first_divergent_step"] in (1, 2, 3)
    assert threads["final_max_abs_dw"] > 0
    assert len(threads["curves"]["max_abs_dw"]) == 3
    assert len(threads["curves"]["loss_a"]) == len(threads["curves"]["loss_b"]) == 3

    # On a CPU, same threads: default mode is deterministic too, and the output must say so plainly.
    assert pairs["default"]["identical"] is True
    assert "the default-mode pair happened to be bit-identical" in proc.stdout

    md = (tmp_path / "divergence.md").read_text()
    for name in pairs:
        assert f"| {name} |" in md
    assert (tmp_path / "divergence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_first_difference():
    replicate_divergence = import_script("replicate_divergence")
    assert replicate_divergence.first_difference(["a", "b", "c"], ["a", "b", "c"]) is None
    assert replicate_divergence.first_difference(["a", "b", "c"], ["a", "x", "y"]) == 2
    assert replicate_divergence.first_difference(["a"], ["z"]) == 1


@pytest.mark.slow
def test_scripts_import_neither_hydra_nor_wandb():
    """The GPU check runs on a machine with torch, torchvision, numpy and scipy only."""
    code = (
        "import sys; sys.path.insert(0, 'scripts');"
        "import bench_determinism, replicate_divergence;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('hydra', 'omegaconf', 'wandb'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"imported: {proc.stdout}{proc.stderr}"


def test_gpu_check_needs_an_outdir():
    proc = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "usage" in proc.stderr
    syntax = subprocess.run(["bash", "-n", str(SCRIPTS / "gpu_check.sh")], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr


def _gpu_check(tmp_path, env=None):
    full = {**os.environ, **(env or {})}
    full.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh"), "--dry-run", str(tmp_path)], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=1900)
    rows = [line.split("\t") for line in (tmp_path / "steps.tsv").read_text().splitlines()[1:]]
    return proc, {r[0]: r[3] for r in rows}


ALL_STEPS = ["env", "preflight", "ddp", "cost", "divergence", "side_by_side_cnn", "side_by_side_resnet"]


@pytest.mark.bench
def test_gpu_check_records_a_timed_out_step_and_runs_the_next(tmp_path):
    # every measuring step gets 1 s: each times out (python alone takes longer), is recorded, and the
    # next one still runs; the table is left and the exit status says a step did not finish
    budgets = {f"GPU_CHECK_TIMEOUT_{s.upper()}": "1" for s in ALL_STEPS[2:]}
    proc, status = _gpu_check(tmp_path, budgets)
    assert list(status) == ALL_STEPS, proc.stdout + proc.stderr
    assert status["preflight"] == "ok"
    assert all(status[s] == "timed out" for s in ALL_STEPS[2:]), status
    assert proc.returncode == 1 and "side_by_side_resnet  1" in proc.stdout  # the table, at the end


# Not solo: every process of the dry run is pinned to 1 thread (--threads 1), so another worker's test
# beside it only slows it down, never into the thread trap. Its steps get generous budgets here: the
# test proves the dry run walks every step and leaves every table, not how fast this machine is at
# the moment (under a loaded suite one step took 46 s of its 45); the default budgets' sum is checked
# below, and the quiet machine's seconds a step are quoted from the script's own table.
@pytest.mark.bench
def test_gpu_check_dry_run_walks_every_step_and_leaves_its_tables(tmp_path):
    generous = {f"GPU_CHECK_TIMEOUT_{s.upper()}": "300" for s in ALL_STEPS}
    proc, status = _gpu_check(tmp_path, generous)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert status == dict.fromkeys(ALL_STEPS, "ok")
    assert "missing: nothing" in (tmp_path / "env.txt").read_text()
    cost = json.loads((tmp_path / "determinism_cost.json").read_text())
    assert len(cost["times_ms"]) == 8  # every mode x precision, each mode measured in its own process
    assert "seed 0 alone and side by side: the same bits" in (tmp_path / "side_by_side.txt").read_text()
    # a launch's own timeout is its step's budget (300 s here), never a figure tied to a machine's speed
    launches = [line for line in (tmp_path / "gpu_check.log").read_text().splitlines()
                if line.startswith("== step side_by_side_") and "gpu_side_by_side.py" in line]
    assert len(launches) == 2 and all(line.endswith("--timeout 300") for line in launches), launches


def test_gpu_checks_default_budgets_add_up_to_its_promise():
    """510 s on a GPU, 300 s in a dry run: what the script's header promises, step by step."""
    text = (SCRIPTS / "gpu_check.sh").read_text()
    tables = re.findall(r"declare -A budget=\((.*)\)", text)
    sums = [sum(int(v) for v in re.findall(r"\]=(\d+)", t)) for t in tables]
    assert sums == [300, 510], sums  # the dry run's table first, then the GPU's
    assert "--dry-run OUTDIR   on a CPU: every step, tiny, at most 300 s" in text
    assert "scripts/gpu_check.sh OUTDIR             on a GPU: at most 510 s" in text
    assert all(len(re.findall(r"\[(\w+)\]=", t)) == len(ALL_STEPS) for t in tables)
