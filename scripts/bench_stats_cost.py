"""Section 9 of bench_stats.py: what one ``stats.compare`` costs (<= 30 ms on 10 seeds).

Each case runs in a fresh process (imports done before the clock starts): the first call, then
10 calls whose differences are shifted by 0.013 a time (each a new effect size, so nothing a
previous call computed can be reused), their median against the target. The same again with the
exact test's shipped table of shares switched off (every share simulated, as before the table shipped), so
one run shows what the table saves on this host. The CPU time of the calls is printed beside
the wall clock: on a shared host it says more about the code than the wall clock does.

    python scripts/bench_stats.py --sections 9
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

TARGET_MS = 30.0
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, what the data is): 10 seeds of a 97% accuracy, the arms' differences sd 0.4
CASES = {
    "clear": "b = a + 1.5 + rng.normal(0, 0.4, 10)",  # decided: B better
    "near margin": "b = a + 0.3 + rng.normal(0, 0.4, 10)",  # undecided near the auto margin: the costliest
    "equivalent": "b = a + rng.normal(0, 0.1, 10)",
}

_CHILD = r"""
import json, statistics, sys, time
import numpy as np
import scipy.stats  # noqa: F401 - imports are not what is measured
from harness import stats
from harness.stats.power import exact_share
if sys.argv[2] == "off":
    exact_share._table.cache_clear()
    exact_share._table = lambda: {}
rng = np.random.default_rng(1)
a = 97 + rng.normal(0, 0.5, 10)
CODE
t, c = time.perf_counter(), time.process_time(); stats.compare(a, b)
first, first_cpu = time.perf_counter() - t, time.process_time() - c
times, cpu = [], []
for i in range(1, 11):
    t, c = time.perf_counter(), time.process_time(); stats.compare(a, b + 0.013 * i)
    times.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
print(json.dumps({"first": first, "median": statistics.median(times), "first_cpu": first_cpu,
                  "median_cpu": statistics.median(cpu)}))
"""


def _measure(code: str, table: str) -> dict:
    env = {**os.environ, "PYTHONPATH": REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", _CHILD.replace("CODE", code), "x", table], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def rows(failed: list) -> list[str]:
    """The table of section 9; a case over the target is appended to ``failed``."""
    out = ["### 9. The statistics' own cost: stats.compare on 10 seeds, in ms (target <= 30 ms)", "",
           "| case | first call | median of 10 new effects | result | CPU: first, median | without the table: first, median |",
           "|---|---|---|---|---|---|"]
    for name, code in CASES.items():
        now, before = _measure(code, "on"), _measure(code, "off")
        ok = max(now["first"], now["median"]) * 1e3 <= TARGET_MS
        if not ok:
            failed.append(f"cost of compare ({name})")
        out.append(f"| {name} | {now['first'] * 1e3:.1f} | {now['median'] * 1e3:.1f} | {'PASS' if ok else 'FAIL'} "
                   f"| {now['first_cpu'] * 1e3:.1f}, {now['median_cpu'] * 1e3:.1f} "
                   f"| {before['first'] * 1e3:.1f}, {before['median'] * 1e3:.1f} |")
    out += ["", "(wall clock decides PASS/FAIL; the CPU time beside it is this process's own, which a loaded "
            "host inflates less)"]
    return out
