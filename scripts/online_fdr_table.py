"""docs/statistics.md's online FDR tables: each method's false discovery rate and power at FDR 0.1.

Streams of 200 one-sided z-tests, a share pi1 of true effects of 3 sd, independent (rho 0) or
equicorrelated (rho 0.5: positive dependence), 2,000 streams per cell, seeded. The first table
decides each claim before the next one starts; the second makes them overlap (each decided 0 to 9
claims after it started: up to 10 experiments at once, finishing out of order) under the ledger's
asynchronous rules (harness/stats/fdr/asynchronous.py). PASS when every method holds FDR <= 0.1
within 3 standard errors on independent claims, and LOND-dep and LORD-dep on dependent ones too.
About a minute on 2 cores.
    python scripts/online_fdr_table.py
"""

import sys

import numpy as np

from harness.stats.fdr.online import ALL_METHODS, DEP_METHODS, NAMES
from harness.stats.fdr.simulate import decision_times, simulate_online_fdr, simulate_streams

LEVEL, N, REPS, LAG = 0.1, 200, 2000, 9


def table(overlap: bool) -> list[str]:
    """Print one table; the cells that break the guarantee each method claims."""
    print("| effects | rho | " + " | ".join(NAMES[m] for m in ALL_METHODS) + " | unadjusted (each at 0.1) |")
    print("|---" * (len(ALL_METHODS) + 3) + "|")
    broken = []
    for pi1 in (0.1, 0.5):
        for rho in (0.0, 0.5):
            p, null = simulate_streams(n=N, reps=REPS, pi1=pi1, effect=3.0, rho=rho, seed=0)
            times = decision_times(p.shape, LAG, seed=1) if overlap else None
            cells = []
            for m in ALL_METHODS:
                r = simulate_online_fdr(m, LEVEL, p=p, null=null, times=times)
                cells.append(f"{r.fdr:.3f} ± {r.fdr_se:.3f} / {r.power:.2f}")
                if (rho == 0 or m in DEP_METHODS) and r.fdr > LEVEL + 3 * r.fdr_se:
                    broken.append(f"{NAMES[m]} at {pi1:.0%} effects, rho {rho}{', overlapping' if overlap else ''}: "
                                  f"FDR {r.fdr:.3f} ± {r.fdr_se:.3f}")
            every = p <= LEVEL
            fdp = ((every & null).sum(1) / np.maximum(every.sum(1), 1)).mean()
            power = ((every & ~null).sum(1) / np.maximum((~null).sum(1), 1)).mean()
            print(f"| {pi1:.0%} | {rho} | " + " | ".join(cells) + f" | {fdp:.3f} / {power:.2f} |")
    return broken


print(f"Each claim decided before the next starts ({REPS} streams of {N} claims; FDR ± se / power at FDR {LEVEL}):\n")
broken = table(overlap=False)
print(f"\nOverlapping claims, each decided 0-{LAG} claims after it started (the ledger's asynchronous rules):\n")
broken += table(overlap=True)
print("\n" + ("FAIL: " + "; ".join(broken) if broken else
              "PASS: every method holds FDR <= 0.1 within 3 standard errors on independent claims, "
              "LOND-dep and LORD-dep on positively dependent ones too, decided in turn or overlapping"))
sys.exit(1 if broken else 0)
