"""Section 8 of bench_stats.py: a diverged run counts, by vectorised simulation.

Paired arms with seed std 1 (correlation 0.5); each run diverges with its arm's chance. Under
``stats.diverged: worst`` a pair with a divergence is decided by the signed-rank sign-flip test
(harness.stats.diverged); under ``exclude`` the seeds with a divergence are left out and the paired
t test runs on the survivors (the rule before the diverged runs counted, with its verdict's survivorship bias).

    python scripts/bench_diverged.py [--experiments 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402

from harness import stats  # noqa: E402
from harness.stats.diverged import diverged_pvalues, signed_ranks  # noqa: E402

ALPHA = 0.05


def _pairs(rng, experiments, n, shift, rate_a, rate_b):
    level = rng.normal(0, math.sqrt(0.5), (experiments, n))
    a = level + rng.normal(0, math.sqrt(0.5), (experiments, n))
    b = level + shift + rng.normal(0, math.sqrt(0.5), (experiments, n))
    da, db = rng.random((experiments, n)) < rate_a, rng.random((experiments, n)) < rate_b
    return b - a, da, db


def _worst(d, da, db) -> np.ndarray:
    """Per experiment: +1 'B better', -1 'B worse', 0 undecided, under the worst rule."""
    w = np.where(da & db, 0.0, np.where(da, np.inf, np.where(db, -np.inf, d)))
    return np.where(diverged_pvalues(w) < ALPHA, np.sign(signed_ranks(w).sum(axis=1)), 0)


def _exclude(d, da, db) -> np.ndarray:
    """Per experiment: the paired t test's claim on the seeds where both finished (fewer than 3: none)."""
    keep = ~(da | db)
    out = np.zeros(d.shape[0])
    for k in range(3, d.shape[1] + 1):
        rows = np.flatnonzero(keep.sum(axis=1) == k)
        if rows.size:
            survivors = d[rows][keep[rows]].reshape(rows.size, k)
            _, p = stats.one_sample_t(survivors)
            out[rows] = np.where(p < ALPHA, np.sign(survivors.mean(axis=1)), 0)
    return out


def rows(rng, experiments, *, row, header) -> list[str]:
    """The section's lines; ``row`` and ``header``: bench_stats's (a PASS/FAIL cell with its SE)."""
    lines = ["### 8. A diverged run counts", "",
             "Nulls: both arms diverge with the same chance; the rate of any difference claimed under "
             "stats.diverged=worst (the signed-rank sign-flip test) and, beside it, exclude.", "",
             *header("exclude (survivors)")]
    for n, rate in ((8, 0.1), (12, 0.1), (12, 0.3), (20, 0.2)):
        d, da, db = _pairs(rng, experiments, n, 0.0, rate, rate)
        worst, excl = _worst(d, da, db), _exclude(d, da, db)
        lines.append(row(f"n = {n}, both diverge {rate:.0%}: any difference claimed", float(np.mean(worst != 0)),
                         experiments, limit=ALPHA, extra=f" {np.mean(excl != 0):.4f} |"))
    lines += ["", "Survivorship: B is 0.5 sd better wherever it finishes but diverges in 30% of seeds (A never). "
                  "The rate at which each rule calls B better, and worse.", "",
              "| n | worst: B better | worst: B worse | exclude: B better | exclude: B worse |", "|---|---|---|---|---|"]
    for n in (8, 12, 20):
        d, da, db = _pairs(rng, experiments, n, 0.5, 0.0, 0.3)
        worst, excl = _worst(d, da, db), _exclude(d, da, db)
        lines.append(f"| {n} | {np.mean(worst > 0):.4f} | {np.mean(worst < 0):.4f} | {np.mean(excl > 0):.4f} | "
                     f"{np.mean(excl < 0):.4f} |")
    return lines


if __name__ == "__main__":
    import bench_stats  # noqa: E402 - the cells' PASS/FAIL rule

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiments", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    print("\n".join(rows(np.random.default_rng(args.seed), args.experiments, row=bench_stats.row,
                         header=bench_stats.header)))
    sys.exit(1 if bench_stats.FAILED else 0)
