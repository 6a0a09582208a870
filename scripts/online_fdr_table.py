"""docs/statistics.md's online FDR table: each method's false discovery rate and power at FDR 0.1.

Streams of 200 one-sided z-tests, a share pi1 of true effects of 3 sd, independent (rho 0) or
equicorrelated (rho 0.5: positive dependence), 2,000 streams per cell, seeded; about 10 s. The
last two columns: LOND and LORD under arbitrary dependence (online_fdr_dep.py).
    python scripts/online_fdr_table.py
"""

import numpy as np

from harness.stats.online_fdr import METHODS, NAMES
from harness.stats.online_fdr_dep import DEPENDENT
from harness.stats.online_fdr_sim import simulate_online_fdr, simulate_streams

LEVEL = 0.1

print("| effects | rho | " + " | ".join(NAMES[m] for m in METHODS) + " | unadjusted (each at 0.1) | LOND dep | LORD dep |")
print("|---" * (len(METHODS) + 5) + "|")
for pi1 in (0.1, 0.5):
    for rho in (0.0, 0.5):
        p, null = simulate_streams(n=200, reps=2000, pi1=pi1, effect=3.0, rho=rho, seed=0)
        cells = []
        for m in METHODS:
            r = simulate_online_fdr(m, LEVEL, p=p, null=null)
            cells.append(f"{r.fdr:.3f} ± {r.fdr_se:.3f} / {r.power:.2f}")
        every = p <= LEVEL
        fdp = ((every & null).sum(1) / np.maximum(every.sum(1), 1)).mean()
        power = ((every & ~null).sum(1) / np.maximum((~null).sum(1), 1)).mean()
        dep = []
        for m in ("lond", "lord++"):
            R = DEPENDENT[m](p, level=LEVEL).rejected
            f = (R & null).sum(1) / np.maximum(R.sum(1), 1)
            w = ((R & ~null).sum(1) / np.maximum((~null).sum(1), 1)).mean()
            dep.append(f"{f.mean():.3f} ± {f.std(ddof=1) / np.sqrt(len(f)):.3f} / {w:.2f}")
        print(f"| {pi1:.0%} | {rho} | " + " | ".join(cells) + f" | {fdp:.3f} / {power:.2f} | " + " | ".join(dep) + " |")
