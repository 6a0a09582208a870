"""Build harness/stats/power/exact_share_table.json: the exact sign-flip test's share of the t test's
power (harness.stats.power.exact_share.simulate_share) for every count of pairs below 20, every effect
on the 0.05-sd grid between the draws' bounds, at the levels the verdict decides claims at when
alpha is 0.05 (1 to 3 comparisons with the baseline; a declared or an estimated margin).

Each entry is simulate_share's own counts (``exact_share.counts``), so a share read from the table
is the number the simulation gives; tests/test_stats_cost.py regenerates a sample and compares.
Other levels (another alpha) are simulated when asked, as before. Takes a few minutes.

    python scripts/build_exact_share_table.py [--out harness/stats/power/exact_share_table.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from harness.stats.power import exact_share  # noqa: E402
from harness.stats.power.seeds_needed import decision_levels, fewest_seeds  # noqa: E402


def table_levels(alpha: float = 0.05, comparisons=(1, 2, 3)) -> list[float]:
    """The one-sided levels seeds_needed_for asks the share at (power._share rounds them to 6
    digits): the test against 0 and beyond the margin at half their level, TOST's at its level."""
    out = set()
    for k in comparisons:
        for share in (1.0, 0.5):  # a declared margin; an estimated one (half of alpha pays its bound)
            levels = decision_levels(alpha, k, share)
            for level in (levels["zero"] / 2, levels["beyond"] / 2, levels["equivalent"]):
                out.add(float(f"{level:.6g}"))
    return sorted(out)


def entry(n: int, level: float) -> dict:
    low, high = exact_share.bounds(n)
    pairs = [exact_share.counts(n, j / exact_share._STEP, level) for j in range(low + 1, high)]
    return {"low": low, "high": high, "t": [t for t, _ in pairs], "both": [b for _, b in pairs]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(exact_share.TABLE))
    args = p.parse_args(argv)
    started = time.perf_counter()
    shares = {}
    for level in table_levels():
        for n in range(fewest_seeds(level, two_sided=False), exact_share._EXACT_BELOW):
            shares.setdefault(str(n), {})[repr(level)] = entry(n, level)
        print(f"level {level:.6g}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    table = {"what": "harness.stats.power.exact_share.counts(n, j / 20, level) for low < j < high, "
                     "built by scripts/build_exact_share_table.py",
             "sims": exact_share._EXACT_SIMS, "step": exact_share._STEP, "shares": shares}
    with open(args.out, "w") as f:
        json.dump(table, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1e3:.0f} kB) in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
