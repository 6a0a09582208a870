"""scripts/bench_ddp.py: the harness's 2-rank unit against bare torchrun of the same script. Its output
is checked for what it says and how it is laid out, never for how fast this machine was."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def _bench_ddp():
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module("bench_ddp")
    finally:
        sys.path.remove(str(SCRIPTS))


def test_the_ratios_are_the_medians_of_the_paired_ratios():
    rows = [{"bare": {"step_ms": b, "cpu_ms": 4.0, "unit_s": 10.0, "call_s": 10.0},
             "harness": {"step_ms": h, "cpu_ms": 4.4, "harness_ms": lines, "unit_s": 11.0, "call_s": 13.0}}
            for b, h, lines in ((10.0, 30.0, 0.1), (20.0, 16.0, 0.3), (5.0, 5.5, 0.2))]
    s = _bench_ddp().summarize(rows)
    # the pairs' ratios 3.0, 0.8, 1.1: their median, not the ratio of the ways' medians (16 / 10)
    assert s["step_ms"] == {"bare": 10.0, "harness": 16.0, "ratio": pytest.approx(1.1), "interval": None}
    assert s["cpu_ms"]["ratio"] == pytest.approx(1.1) and s["harness_ms"] == 0.2
    assert s["unit_s"]["ratio"] == pytest.approx(1.1) and s["call_s"]["harness"] == 13.0


def test_the_interval_of_the_median_is_the_order_statistics_that_cover_95_percent():
    b = _bench_ddp()
    assert b.median_interval([1.0] * 5) is None  # 5 pairs: all on one side has chance 1/16 > 0.05
    assert b.median_interval([float(v) for v in range(6)]) == (0.0, 5.0)  # 1 - 2/64 = 0.969
    # 15 pairs: the 4th smallest and the 4th largest (P(Binomial(15, 1/2) <= 3) = 0.0176 <= 0.025)
    assert b.median_interval([float(v) for v in range(15, 0, -1)]) == (4.0, 12.0)
    assert b.target_words(1.02, (0.99, 1.04)).startswith("met: the interval lies below")
    assert b.target_words(1.02, (0.97, 1.08)).startswith("met by the median, not settled")
    assert b.target_words(1.09, (1.06, 1.12)).startswith("NOT met: the interval lies above")
    assert "too few repeats" in b.target_words(1.0, None)


@pytest.mark.bench
def test_bench_ddp_runs_both_ways_interleaved_and_prints_the_ratios_and_the_load():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the script must find harness itself
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_ddp.py"), "--repeats", "2", "--epochs", "1",
                           "--warmup", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert re.match(r"2 ranks \(gloo, CPU, 1 thread each\), the digits CNN, DataLoader \+ DistributedSampler, "
                    r"batch 16 per rank, 43 steps per rank \(2 untimed\); 2 repeats, interleaved; "
                    r"load average at start [0-9.]+ on \d+ CPU\(s\)$", lines[0]), lines[0]
    number = r"[0-9.]+"
    for r, line in enumerate(lines[1:3], start=1):
        assert re.match(rf"  repeat {r}: bare {number} ms/step \({number} CPU\) {number} s/unit  harness {number} "
                        rf"ms/step \({number} CPU\) {number} s/unit  \(step {number}x; harness lines {number} ms; "
                        rf"load {number} on \d+ CPU\(s\)\)$", line), line
    few = "95% interval of the median paired ratio: too few repeats"  # 2 repeats
    assert re.match(rf"per step: harness {number} ms, bare {number} ms: {number}x \({few}; target <= 1.05x: "
                    rf"(met|NOT met) by the median; too few repeats for an interval \(6 or more\)\)$", lines[3]), lines[3]
    assert re.match(rf"per step, rank 0's CPU: harness {number} ms, bare {number} ms: {number}x \({few}\); the "
                    rf"harness's lines {number} ms a step$", lines[4]), lines[4]
    # both ways start from the same weights and do the same arithmetic: their final losses are bit-equal
    assert lines[5] == "the same arithmetic both ways: the final loss bit-equal in 2 of 2 repeats", lines[5]
    assert re.match(rf"per unit: harness {number} s, bare {number} s: {number}x \([+-]{number} s\); the whole "
                    rf"harness.run call {number} s$", lines[6]), lines[6]
    assert re.match(rf"load average at end {number} on \d+ CPU\(s\)$", lines[7]), lines[7]
    # a loaded host is said to be one (the test cannot choose the load: either ending is right)
    assert lines[8:] in ([], ["the host was not quiet: a step's wall time holds its waits for a core, which the CPU "
                              "times do not; quote the wall ratios from a rerun on a quiet machine"]), lines[8:]
